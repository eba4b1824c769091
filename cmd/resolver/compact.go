package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/store/boltstore"
)

const compactUsage = `
Usage: resolver compact [--data DIR | --store bolt:PATH] [--to bolt:PATH]
                        [--page-size BYTES]

Writes every message of the store anew, each message's digest checked
on the way: the archive's packing step, as git gc is a repository's.
Messages are written as they arrive compressed for speed, each with the
dictionary of the messages before them; compact compresses them harder,
each era of the archive (1,500 messages or more, at most 16 eras) with a
dictionary trained on that era's own messages, about a tenth smaller
again. It also converts an archive written before compression or before
packs, gathers the packs that writers of large batches left (one for
each importer that ran beside another, or was killed) into its own, and
gives back the space bbolt keeps inside its file (bbolt reuses freed
pages but never shrinks the file). Run it after a large import, and now
and then as the archive grows.

Without --to, in place: the copy replaces messages.db. Importers, the
watcher and the resolver may keep running: they wait only for the last
moment, while what they stored during the copy is copied too. Every
process using the store must run this version or later. If it is
interrupted, run it again: it finishes or starts over.

With --to, into a new file; the store stays as it is, and what is stored
during the copy is not in the copy. Shows a progress bar on a terminal.
Bolt stores only, for now.

Examples:
  resolver compact --data /var/lib/chibrary
  resolver compact --store bolt:/srv/archive/messages.db --to bolt:/srv/new/messages.db
`

func compact(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st       setup.StoreFlags
		logs     cli.LogOptions
		to       string
		pageSize int
	)
	fs := cli.NewFlagSet("resolver compact", compactUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&to, "to", "", "", "copy into this new store `URL` (bolt:PATH) instead of compacting in place")
	fs.Int(&pageSize, "page-size", 0, "", fmt.Sprintf("bbolt page size of the new file in `BYTES`, a power of two from 1024 to 1048576 (default %d, whatever the old file's)", boltstore.DefaultPageSize))
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	u, err := st.Parse()
	if err != nil {
		return err
	}
	if u.Bolt == "" {
		return cli.Usagef("resolver compact works on bolt stores only, for now (Riak values are compressed as they are written; existing ones are rewritten when the Riak store gains compaction)")
	}
	path := u.Bolt
	opts := boltstore.CompactOptions{PageSize: pageSize}
	if to != "" {
		u, err := setup.ParseStoreURL(to)
		if err != nil {
			return err
		}
		if u.Bolt == "" {
			return cli.Usagef("--to %s: the copy goes to a bolt store (bolt:PATH)", to)
		}
		opts.To = u.Bolt
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	if _, err := os.Stat(path); err != nil {
		return st.NoArchive(err)
	}
	db, err := boltstore.Open(ctx, path, boltstore.Options{Logger: log})
	if errors.Is(err, boltstore.ErrInterrupted) {
		log.Info("finishing an interrupted compaction", "path", path)
		if err := boltstore.Recover(ctx, path, boltstore.Options{}); err != nil {
			return err
		}
		db, err = boltstore.Open(ctx, path, boltstore.Options{Logger: log})
	}
	if err != nil {
		return err
	}
	defer db.Close()
	start := time.Now()
	progress, done := compactProgress(stderr, log)
	opts.Progress = progress
	res, err := db.Compact(ctx, opts)
	done()
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "compacted %d messages into %s in %.1f s: %.1f MB on disk before, %.1f MB after (%d dictionaries)\n",
		res.Messages, res.Path, time.Since(start).Seconds(), float64(res.Before)/1e6, float64(res.After)/1e6, res.Dicts)
	return nil
}

// compactProgress returns the progress callback (a bar on a terminal, a
// log line every 10 seconds otherwise) and a function that ends it. The
// compaction calls it from its workers.
func compactProgress(stderr io.Writer, log *slog.Logger) (func(done, total int64), func()) {
	var mu sync.Mutex
	p := cli.NewCountProgress(stderr, log, "msgs")
	update := func(done, total int64) {
		mu.Lock()
		defer mu.Unlock()
		p.Update("compaction", "compacting", done, total)
	}
	finish := func() {
		mu.Lock()
		defer mu.Unlock()
		p.Finish()
	}
	return update, finish
}
