// Command importer loads mbox archives, Maildirs and .eml files into the
// archive, giving every new message a call number.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"runtime/debug"
	"time"

	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
)

const usage = `
Usage: importer [--data DIR | --store URL]
                [--coordinator URL --token-file F | --authority URL]
                [--list NAME] [--format auto|mboxrd|mboxo|mboxcl2]
                [--manifest FILE] [--partition K/N] PATH...

Imports every message of each PATH into the archive. A PATH is an mbox file
(plain, .gz or .bz2, recognised by content), a folder of mbox and .eml files
(read in name order, months in calendar order: a Mailman 2 archive download
of monthly .txt.gz files), a Maildir, a public-inbox repository, or - for
one message or an mbox on standard input. A message already in the
archive (same bytes, line ends aside) is a duplicate and keeps its call
number, so an interrupted import can simply be run again. A message with "X-No-Archive: yes" is imported
like any other: an archive being imported was published already (the
watcher, which archives mail as it arrives, honours the header). A message the input breaks inside (a compressed
file cut short or corrupt) is failed, never stored in part.

A public-inbox repository is read with git (which must be installed): a
v2 inbox (a directory with git/0.git, its epochs read in order), one
epoch, or a v1 repository (a bare git directory). Messages its history
removed later (public-inbox-learn rm, -purge) are not imported. With
--data (or --store bolt:PATH: beside PATH), the importer remembers in
DIR/public-inbox/LIST/ the last commit it read of each epoch once all
before it is stored, and a later run reads only the commits added
since (docs/public-inbox.md).

--list names the list of every message (without it, each message's
List-Id header does). A list's name is kept in the one form the archive's
URLs carry: lower-case letters, digits, '.', '_' and '-', anything else a
'-'. So "Linux MIPS", Linux-MIPS and linux-mips are one list, linux-mips,
and the importer says so when it is given another form; a name without a
letter or digit is refused.

Every run ends with one line on stderr, below the error that ended it, if
any (even one before anything was read: a store that cannot be opened, a
missing PATH):
  imported N, duplicates D, failed F in S s (R msg/s)
(above it, "X of the duplicates were removed from the archive and stay
out" when some had been taken down with resolver remove: the manifest
says "removed" for those, with the removed message's call number; and
"X of the duplicates are archived in another list" when --list names
another list than the one they were archived in: importing again does
not move them, resolver move does, and the manifest's "list" names it),
and exits 0 when every message was stored, 1 when some failed, nothing
was found to import or the run could not start. Bad usage (exit 2) ends
with the usage hint instead.

Memory: the importer asks Go's garbage collector to keep its heap under
150 MiB, a soft limit ($GOMEMLIMIT, e.g. GOMEMLIMIT=512MiB, sets another).
The pages of a bolt store's file it maps come on top, up to a quarter of
the memory available as it starts, or of its container's memory limit
(cgroup) if that is less, at least 128 MiB: about 300 MB at a million
messages. They are the kernel's page cache, clean, which it takes
back when it needs them; mapped, each batch need not fault them in again.

Examples:
  importer fixtures/mbox/demo.mbox
  importer --data /srv/archive --list linux-mips --manifest out.jsonl 2019-*.txt.gz
  importer --list demo fixtures/pipermail --data /srv/archive
  importer --data /srv/archive --list linux-mips /srv/public-inbox/linux-mips
  zcat old.mbox.gz | importer --format mboxo -
  importer --coordinator http://coord:7070 --token-file /etc/chibrary/token \
           --store riak://r1:8087,r2:8087 --partition 1/4 huge.mbox
  importer --store riak://r1:8087,r2:8087,r3:8087/lists \
           --authority riak://r1:8087,r2:8087,r3:8087/lists huge.mbox

Runs come from the coordinator (--coordinator), from the authority
--authority names (bolt:PATH, or riak://... for one in the Riak cluster,
which needs no coordinator: docs/authority.md), or else from the local
authority DATA/runs.db.
`

// memoryLimit is the importer's soft memory limit (runtime/debug), unless
// $GOMEMLIMIT sets one: the live heap is bounded by the batches in flight
// and the largest message (64 MiB), and without a limit the garbage
// collector lets the heap grow to twice what was live at its last
// collection. At 150 MiB a list of 98,000 messages peaks at 196-199 MB of
// RSS, 44 MB of it the store's mapped pages, where 256 MiB let it reach
// 246-255 MB, for the same CPU (docs/performance.md, Scale); a message
// that holds more than the limit alive makes the collector work harder
// (at most half the CPU) until it is stored.
const memoryLimit = 150 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	cli.Main("importer", run)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var (
		st                               setup.StoreFlags
		runs                             setup.RunFlags
		logs                             cli.LogOptions
		list, format, manifest, partName string
		workers                          int
	)
	fs := cli.NewFlagSet("importer", usage)
	st.AddFlags(fs)
	runs.AddFlags(fs)
	logs.AddFlags(fs)
	fs.String(&list, "list", "", "CHIBRARY_LIST", "mailing list `NAME` recorded with every message")
	fs.String(&format, "format", "auto", "CHIBRARY_FORMAT", "mbox `VARIANT`: auto, mboxrd, mboxo, mboxcl or mboxcl2")
	fs.String(&manifest, "manifest", "", "", "write one JSON line per message to `FILE`")
	fs.String(&partName, "partition", "", "", "`K/N`: import only every N-th message, starting with the K-th (N processes share one input)")
	fs.Int(&workers, "workers", 0, "", "`N` messages digested and parsed in parallel (0: one per CPU)")
	paths, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if len(paths) == 0 {
		return cli.Usagef("no PATH to import")
	}
	if len(paths) == 1 && paths[0] == "help" {
		if _, err := os.Stat("help"); err != nil {
			// "importer help", as one would type "go help": there
			// is no such file, so this is a request for the help.
			fs.PrintHelp(stdout)
			return nil
		}
	}
	log, err := logs.Logger(stderr)
	if err != nil {
		return err
	}
	opts := ingest.FilesOptions{Logger: log, Import: ingest.ImportOptions{Workers: workers}, Source: mailsource.Options{Stdin: stdin}}
	if opts.Source.Format, err = mbox.ParseFormat(format); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	if opts.Import.PartitionK, opts.Import.PartitionN, err = ingest.ParsePartition(partName); err != nil {
		return cli.Usagef("--partition: %v", err)
	}
	files, err := st.Files()
	if err != nil {
		return err
	}
	if list != "" {
		// One form of a list's name, the archive's, from here on.
		name := store.ListName(list)
		if name == "" {
			return cli.Usagef("--list %q: a list name needs letters or digits (it is kept lower-case, [a-z0-9._-], as in the archive's URLs)", list)
		}
		if name != list {
			log.Info("--list is read as the list's name in the archive's form", "given", list, "list", name)
			list = name
		}
	}
	opts.Source.StateDir = files.PublicInboxState(list)
	start := time.Now()
	total, err := importAll(ctx, paths, manifest, st, files, runs, list, opts, stderr)
	if errors.Is(err, cli.ErrUsage) {
		return err // the usage hint is the last line
	}
	if errors.Is(err, context.Canceled) && ctx.Err() != nil {
		err = errors.New("interrupted: what was stored is kept; run the same command again to import the rest (what is stored already comes again as duplicates)")
	}
	// Every run that got past its usage ends with the summary, below the
	// error that ended it (even before anything was read: imported 0),
	// so that the last line is always the summary a script reads.
	if err == nil && total.Failed > 0 {
		err = fmt.Errorf("%d messages could not be stored (see the warnings above)", total.Failed)
	}
	if err != nil {
		fmt.Fprintln(stderr, cli.Message("importer", err))
	}
	secs := time.Since(start).Seconds()
	if total.Removed > 0 {
		fmt.Fprintln(stderr, removedNote(total.Removed))
	}
	if total.OtherList > 0 {
		fmt.Fprintln(stderr, otherListNote(total.OtherList, list))
	}
	fmt.Fprintf(stderr, "imported %d, duplicates %d, failed %d in %.1f s (%.0f msg/s)\n",
		total.Imported, total.Duplicates, total.Failed, secs, float64(total.Messages())/max(secs, 1e-9))
	return cli.Reported(err)
}

// removedNote is the line above the summary when some duplicates are of
// messages removed from the archive.
func removedNote(n int64) string {
	if n == 1 {
		return `1 of the duplicates was removed from the archive and stays out (manifest status "removed")`
	}
	return fmt.Sprintf(`%d of the duplicates were removed from the archive and stay out (manifest status "removed")`, n)
}

// otherListNote is the line above the summary when some duplicates are
// archived in another list than --list.
func otherListNote(n int64, list string) string {
	what := fmt.Sprintf("%d of the duplicates are", n)
	if n == 1 {
		what = "1 of the duplicates is"
	}
	return fmt.Sprintf(`%s archived in another list than %s, and stay there: resolver move --list %s CALLNUMBER... moves them (the manifest's "list" says where each is)`, what, list, list)
}

// importAll opens the store and the run source and imports paths.
func importAll(ctx context.Context, paths []string, manifest string, st setup.StoreFlags, files setup.Files, runs setup.RunFlags, list string, opts ingest.FilesOptions, stderr io.Writer) (ingest.Stats, error) {
	log := opts.Logger
	if err := ingest.CheckPaths(paths); err != nil {
		return ingest.Stats{}, err // before anything is created
	}
	// An empty input creates no archive.
	if ok, err := ingest.HasMessages(ctx, paths, opts.Source); err != nil {
		return ingest.Stats{}, err
	} else if !ok {
		return ingest.Stats{}, ingest.NothingFound(paths)
	}
	var out *os.File
	var err error
	if manifest != "" {
		if out, err = os.Create(manifest); err != nil {
			return ingest.Stats{}, fmt.Errorf("cannot create the manifest: %w", err)
		}
		defer out.Close() // on an early return; closed and checked below otherwise
		opts.Import.Manifest = out
	}
	db, err := st.OpenImport(ctx, log)
	if err != nil {
		return ingest.Stats{}, err
	}
	defer db.Close() // the same
	src, err := runs.Source(ctx, db, files, "importer", log)
	if err != nil {
		return ingest.Stats{}, err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	if opts.Import.Archiver, err = ingest.NewArchiver(ingest.Options{Store: db, Runs: src, List: list, Logger: log}); err != nil {
		return ingest.Stats{}, err
	}
	bar := cli.NewProgress(stderr, log)
	opts.Progress = func(path string, done, total int64, s ingest.Stats) {
		desc := fmt.Sprintf("%s: %d new, %d dup", filepath.Base(path), s.Imported, s.Duplicates)
		if s.Failed > 0 {
			desc += fmt.Sprintf(", %d failed", s.Failed)
		}
		bar.Update(path, desc,
			done, total, "messages", s.Messages(), "imported", s.Imported, "duplicates", s.Duplicates, "failed", s.Failed)
	}
	total, err := ingest.ImportFiles(ctx, paths, opts)
	bar.Finish()
	if out != nil {
		if cerr := out.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot write the manifest: %w", cerr)
		}
	}
	if cerr := db.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("cannot close the store: %w", cerr)
	}
	return total, err
}
