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
	"github.com/chibrary/chibrary/piexport"
	"github.com/chibrary/chibrary/store"
)

const exportUsage = `
Usage: resolver export [--data DIR | --store URL] [--catalog PATH]
                       --public-inbox OUT [--list NAME]... [--epoch-size BYTES]

Writes every list of the archive as a public-inbox v2 inbox, OUT/LIST/
(its epochs git/0.git, git/1.git, ..., all.git, description and
inbox.lock), or brings one written before up to date: a run again writes
only the messages that came since, and records the removals since (a
message removed with ` + "`resolver remove`" + `, or moved to another list with
` + "`resolver move`" + `) as public-inbox-learn rm records them. Run it from cron,
or after each import; public-inbox's tools then take the inboxes as
their own:

  public-inbox-index OUT/LIST           (or add it to ~/.public-inbox/config)
  public-inbox-clone, grok-pull         (with resolver serve --public-inbox OUT)

Each message is one commit of its bytes, its author the sender and its
Date, in the order of the list's numbers (those IMAP and NNTP show).
A message without a Message-ID, or with one another message of the list
has, gets one made as public-inbox makes it, added to its header. An epoch
holds about 1 GB of git (--epoch-size bytes of messages) before the next
begins. A list's progress is in OUT/LIST/chibrary-export.db; an export
stopped at any point is completed by the next run, without a message
written twice or lost. Two exports into the same OUT at once: the second
is refused.

The lists and their order come from the catalog, which export brings up
to date first (or, when a running resolver follows it, takes as that
resolver keeps it): DATA/catalog.db with --data, beside the bbolt file
with --store bolt:PATH, --catalog PATH for a Riak store.

A removal hides the message from public-inbox's readers, but its bytes
stay in the git history that clones of the inbox already hold
(docs/public-inbox.md says what to do about it).

Examples:
  resolver export --data /var/lib/chibrary --public-inbox /srv/public-inbox
  resolver export --public-inbox /srv/public-inbox --list linux-mips
  resolver export --store riak://r1:8087/lists --catalog /var/lib/chibrary/catalog.db --public-inbox /srv/pi
`

func export(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st        setup.StoreFlags
		logs      cli.LogOptions
		out, cat  string
		epochSize int
		lists     stringList
	)
	fs := cli.NewFlagSet("resolver export", exportUsage)
	st.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&out, "public-inbox", "", "CHIBRARY_PUBLIC_INBOX", "the `DIR` of the inboxes: OUT/LIST/ for each list")
	fs.String(&cat, "catalog", "", "CHIBRARY_CATALOG", "the catalog file `PATH` (default: DATA/catalog.db, or beside a bolt: store)")
	fs.Int(&epochSize, "epoch-size", int(piexport.DefaultEpochSize), "", "`BYTES` of messages an epoch holds before the next begins (public-inbox's default: about 1 GB of git)")
	fs.Var(&lists, "list", "", "export only the list `NAME` (may be given several times; default: every list)")
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	if out == "" {
		return cli.Usagef("--public-inbox: name the directory to write the inboxes into")
	}
	if epochSize <= 0 {
		return cli.Usagef("--epoch-size %d: give a number of bytes above 0", epochSize)
	}
	for i, l := range lists {
		name := catalog.ListName(l)
		if err := store.CheckList(name); err != nil {
			return cli.Usagef("--list %q: %v", l, err)
		}
		lists[i] = name
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	path, err := catalogPath(&st, cat)
	if err != nil {
		return err
	}
	if path == "" {
		return cli.Usagef("a Riak store has no default catalog: give --catalog PATH")
	}
	db, err := st.OpenReader(ctx, log, true)
	if err != nil {
		return err
	}
	defer db.Close()
	c, err := exportCatalog(ctx, db, path, log)
	if err != nil {
		return err
	}
	defer c.Close()

	start := time.Now()
	res, err := piexport.Export(ctx, db, c, piexport.Options{Out: out, Lists: lists, EpochSize: int64(epochSize), Logger: log})
	added, removed := 0, 0
	for _, r := range res {
		added += r.Added
		removed += r.Removed
		fmt.Fprintf(stdout, "%s: %d added, %d removals recorded, %d epochs\n", r.Dir, r.Added, r.Removed, r.Epochs)
	}
	if err != nil {
		return err
	}
	fmt.Fprintf(stderr, "exported %d lists into %s: %d messages added, %d removals recorded in %.1f s\n", len(res), out, added, removed, time.Since(start).Seconds())
	return nil
}

// exportCatalog opens the catalog at path brought up to date with the
// store: synced here, or, when a resolver follows it, read as that
// resolver keeps it.
func exportCatalog(ctx context.Context, db store.Store, path string, log *slog.Logger) (*catalog.Catalog, error) {
	c, err := catalog.Open(ctx, path, catalog.Options{Logger: log})
	if errors.Is(err, catalog.ErrLocked) {
		log.Info("a resolver follows the catalog: exporting what it holds", "catalog", path)
		return catalog.Open(ctx, path, catalog.Options{ReadOnly: true, Logger: log})
	}
	if err != nil {
		return nil, err
	}
	if _, err := c.Sync(ctx, db, catalog.SyncOptions{}); err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot bring the catalog up to date: %w", err)
	}
	return c, nil
}
