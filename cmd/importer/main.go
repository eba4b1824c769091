// Command importer loads mbox archives, Maildirs and .eml files into the
// archive, giving every new message a call number.
package main

import (
	"context"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"os"
	"runtime/debug"
	"time"

	"github.com/schollz/progressbar/v3"

	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/setup"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/mbox"
)

const usage = `
Usage: importer [--data DIR | --store URL] [--coordinator URL --token-file F]
                [--list NAME] [--format auto|mboxrd|mboxo|mboxcl2]
                [--manifest FILE] [--partition K/N] PATH...

Imports every message of each PATH into the archive. A PATH is an mbox file
(plain, .gz or .bz2, recognised by content), a Maildir, a directory of .eml
files, or - for one message or an mbox on standard input. A message already
in the archive (same bytes, line ends aside) is a duplicate and keeps its
call number, so an interrupted import can simply be run again.

Ends with one line on stderr:
  imported N, duplicates D, failed F in S s (R msg/s)
and exits 0 when every message was stored, 1 when some failed, 2 on bad usage.

Examples:
  importer fixtures/mbox/demo.mbox
  importer --data /srv/archive --list linux-mips --manifest out.jsonl 2019-*.txt.gz
  zcat old.mbox.gz | importer --format mboxo -
  importer --coordinator http://coord:7070 --token-file /etc/chibrary/token \
           --store riak://r1:8087,r2:8087 --partition 1/4 huge.mbox
`

type config struct {
	store     setup.StoreFlags
	runs      setup.RunFlags
	log       cli.LogOptions
	list      string
	format    string
	manifest  string
	partition string
	workers   int
	paths     []string

	mboxFormat mbox.Format
}

// memoryLimit is the importer's soft memory limit (runtime/debug), unless
// $GOMEMLIMIT sets one: the live heap is bounded by the batch and the
// largest message (64 MiB), and without a limit the garbage collector lets
// the heap grow to twice that around a large message.
const memoryLimit = 256 << 20

func main() {
	if os.Getenv("GOMEMLIMIT") == "" {
		debug.SetMemoryLimit(memoryLimit)
	}
	cli.Main("importer", run)
}

func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error {
	var c config
	fs := flag.NewFlagSet("importer", flag.ContinueOnError)
	fs.SetOutput(stderr)
	c.store.AddFlags(fs)
	c.runs.AddFlags(fs)
	c.log.AddFlags(fs)
	fs.StringVar(&c.list, "list", "", "mailing list name recorded with every message")
	fs.StringVar(&c.format, "format", "auto", "mbox variant: auto, mboxrd, mboxo, mboxcl or mboxcl2")
	fs.StringVar(&c.manifest, "manifest", "", "write one JSON line per message to this file")
	fs.StringVar(&c.partition, "partition", "", "K/N: import only every N-th message, starting with the K-th (N processes share one input)")
	fs.IntVar(&c.workers, "workers", 0, "messages digested and parsed in parallel (0: one per CPU)")
	env := map[string]string{"list": "CHIBRARY_LIST", "format": "CHIBRARY_FORMAT", "log-format": "CHIBRARY_LOG_FORMAT", "log-level": "CHIBRARY_LOG_LEVEL"}
	for k, v := range c.store.Env() {
		env[k] = v
	}
	for k, v := range c.runs.Env() {
		env[k] = v
	}
	fs.Usage = cli.Usage(fs, usage, env)
	if err := cli.Parse(fs, args, env); err != nil {
		return err
	}
	c.paths = fs.Args()
	if len(c.paths) == 0 {
		return cli.Usagef("no PATH to import")
	}
	return c.run(ctx, stdin, stderr)
}

func (c *config) run(ctx context.Context, stdin io.Reader, stderr io.Writer) (err error) {
	log, err := c.log.Logger(stderr)
	if err != nil {
		return err
	}
	if c.mboxFormat, err = mbox.ParseFormat(c.format); err != nil {
		return cli.Usagef("--format: %v", err)
	}
	k, n, err := ingest.ParsePartition(c.partition)
	if err != nil {
		return cli.Usagef("--partition: %v", err)
	}
	var manifest *os.File
	if c.manifest != "" {
		if manifest, err = os.Create(c.manifest); err != nil {
			return fmt.Errorf("cannot create manifest: %w", err)
		}
		defer func() {
			if cerr := manifest.Close(); err == nil && cerr != nil {
				err = fmt.Errorf("cannot write manifest: %w", cerr)
			}
		}()
	}

	st, err := c.store.Open(ctx, log)
	if err != nil {
		return fmt.Errorf("cannot open store: %w", err)
	}
	defer func() {
		if cerr := st.Close(); err == nil && cerr != nil {
			err = fmt.Errorf("cannot close store: %w", cerr)
		}
	}()
	runs, err := c.runs.Source(ctx, c.store.Data, "importer", log)
	if err != nil {
		return err
	}
	arch, err := ingest.NewArchiver(ingest.Options{Store: st, Runs: runs, List: c.list, Logger: log})
	if err != nil {
		return err
	}

	start := time.Now()
	var total ingest.Stats
	defer func() {
		secs := time.Since(start).Seconds()
		fmt.Fprintf(stderr, "imported %d, duplicates %d, failed %d in %.1f s (%.0f msg/s)\n",
			total.Imported, total.Duplicates, total.Failed, secs, float64(total.Messages())/max(secs, 1e-9))
		if err == nil && total.Failed > 0 {
			err = fmt.Errorf("%d messages could not be stored (see the warnings above)", total.Failed)
		}
	}()
	for _, path := range c.paths {
		s, err := c.importPath(ctx, path, arch, k, n, manifest, stdin, stderr, log, total)
		total.Add(s)
		if err != nil {
			return err
		}
	}
	return nil
}

func (c *config) importPath(ctx context.Context, path string, arch *ingest.Archiver, k, n int, manifest *os.File,
	stdin io.Reader, stderr io.Writer, log *slog.Logger, before ingest.Stats) (ingest.Stats, error) {
	src, err := mailsource.Open(ctx, path, mailsource.Options{Format: c.mboxFormat, Stdin: stdin, Logger: log})
	if err != nil {
		return ingest.Stats{}, fmt.Errorf("cannot open %s: %w", path, err)
	}
	defer src.Close()
	log.Debug("importing", "path", path)

	opts := ingest.ImportOptions{Archiver: arch, Workers: c.workers, PartitionK: k, PartitionN: n}
	if manifest != nil {
		opts.Manifest = manifest
	}
	report := c.progress(path, src, stderr, log, before)
	opts.OnBatch = report
	s, err := ingest.Import(ctx, adapter{src}, opts)
	report(s)
	log.Info("read", "path", path, "format", src.Format(), "imported", s.Imported, "duplicates", s.Duplicates, "failed", s.Failed)
	if err != nil {
		return s, fmt.Errorf("cannot import %s: %w", path, err)
	}
	return s, nil
}

// progress returns a per-batch reporter: a progress bar on a terminal,
// a log line every 10 seconds otherwise.
func (c *config) progress(path string, src *mailsource.Source, stderr io.Writer, log *slog.Logger, before ingest.Stats) func(ingest.Stats) {
	if cli.IsTerminal(stderr) {
		_, size := src.Progress()
		bar := progressbar.NewOptions64(max(size, -1),
			progressbar.OptionSetWriter(stderr),
			progressbar.OptionSetDescription(path),
			progressbar.OptionShowBytes(true),
			progressbar.OptionSetPredictTime(true),
			progressbar.OptionThrottle(200*time.Millisecond),
			progressbar.OptionClearOnFinish(),
		)
		return func(s ingest.Stats) {
			done, _ := src.Progress()
			all := before
			all.Add(s)
			bar.Describe(fmt.Sprintf("%s: %d msgs (%d new, %d dup, %d failed)", path, all.Messages(), all.Imported, all.Duplicates, all.Failed))
			bar.Set64(done)
		}
	}
	last := time.Now()
	return func(s ingest.Stats) {
		if time.Since(last) < 10*time.Second {
			return
		}
		last = time.Now()
		done, size := src.Progress()
		all := before
		all.Add(s)
		log.Info("progress", "path", path, "messages", all.Messages(), "imported", all.Imported,
			"duplicates", all.Duplicates, "failed", all.Failed, "bytes_read", done, "bytes_total", size)
	}
}

type adapter struct{ src *mailsource.Source }

func (a adapter) Next() (ingest.Item, error) {
	it, err := a.src.Next()
	return ingest.Item{Raw: it.Raw, Where: it.Where, Err: it.Err}, err
}
