package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/store"
)

// catalogPath is where the catalog of an archive lives: --catalog PATH
// when given; else the archive's (setup.Files: DATA/catalog.db with
// --data, beside the bbolt file of --store bolt:PATH). A Riak archive
// without --data has no default place: "".
func catalogPath(flags *setup.StoreFlags, flag string) (string, error) {
	if flag != "" {
		return flag, nil
	}
	files, err := flags.Files()
	if err != nil {
		return "", err
	}
	return files.Catalog(), nil
}

// reindex rebuilds the catalog at path from st (catalog.Rebuild): a
// progress bar on a terminal, a log line every 10 seconds otherwise.
func reindex(ctx context.Context, st store.Store, path string, stderr io.Writer, log *slog.Logger) error {
	if path == "" {
		return cli.Usagef("a Riak store has no default catalog: give --catalog PATH")
	}
	total, err := st.Count(ctx)
	if err != nil {
		return fmt.Errorf("cannot count the archive's messages: %w", err)
	}
	start := time.Now()
	bar := cli.NewCountProgress(stderr, log, "msgs")
	progress := func(read int) {
		bar.Update("catalog", "indexing", int64(read), total, "elapsed", time.Since(start).Round(time.Second))
	}
	n, err := catalog.Rebuild(ctx, path, st, catalog.SyncOptions{Progress: progress}, catalog.Options{Logger: log})
	bar.Finish()
	if errors.Is(err, catalog.ErrLocked) {
		return fmt.Errorf("%w\n(a running resolver keeps its catalog current by itself; to have it build the catalog anew instead, stop it, delete %s and start it again)", err, path)
	}
	if err != nil {
		return err
	}
	d := time.Since(start)
	fmt.Fprintf(stderr, "indexed %d messages into %s in %.1f s (%.0f msg/s)\n", n, path, d.Seconds(), float64(n)/max(d.Seconds(), 1e-9))
	return nil
}

const reindexUsage = `
Usage: resolver reindex [--data DIR | --store URL] [--catalog PATH]

Builds the catalog (the index of lists, months and threads that the
resolver's pages read) anew from the store, beside the old one, and
replaces it once complete. ` + "`resolver serve`" + ` keeps the catalog current by
itself, builds it when it is missing and rebuilds it after an upgrade
that changes its layout; reindex is for a catalog that is damaged, or to
build one before the resolver starts (with progress, and without pages
answering 503 meanwhile). It refuses while a resolver follows the
catalog. Shows a progress bar on a terminal, a log line every 10 seconds
otherwise.

The catalog is DATA/catalog.db with --data, the catalog.db beside the
bbolt file with --store bolt:PATH, and --catalog PATH for a Riak store.

Examples:
  resolver reindex --data /var/lib/chibrary
  resolver reindex --store riak://r1:8087/lists --catalog /var/lib/chibrary/catalog.db
`

func reindexCommand(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st   setup.StoreFlags
		logs cli.LogOptions
		path string
	)
	fs := cli.NewFlagSet("resolver reindex", reindexUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&path, "catalog", "", "CHIBRARY_CATALOG", "the catalog file `PATH` (default: DATA/catalog.db, or beside a bolt: store)")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	if path, err = catalogPath(&st, path); err != nil {
		return err
	}
	db, err := st.OpenReader(ctx, log, true)
	if err != nil {
		return err
	}
	defer db.Close()
	return reindex(ctx, db, path, stderr, log)
}
