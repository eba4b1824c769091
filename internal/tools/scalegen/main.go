// Command scalegen writes an archive of many lists made from the shared
// sample (package scalecorpus): --messages distinct messages over --lists
// mbox files, one per list, in --out, a share of threads cross-posted
// between lists with each list's headers; the same --seed, the same
// bytes. It prints each list's file, messages and bytes.
//
//	go run ./internal/tools/scalegen --out /tmp/scale --messages 100000
//	go run ./internal/tools/scalegen --out /tmp/scale --messages 1000000 --lists 11 --gzip
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/scalecorpus"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
)

func main() {
	fs := flag.NewFlagSet("scalegen", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: scalegen --out DIR --messages N [--lists L] [--seed S] [--cross-post SHARE] [--gzip]

Writes N distinct messages made from the shared sample into L lists, one
mbox per list (DIR/NAME.mbox, or .mbox.gz with --gzip), and
DIR/scalecorpus.json saying what it wrote. Each copy of the sample gets
its own Message-IDs (references follow, so threads hold) and its dates
moved back by up to three years; each thread goes to one list, and a
share of threads (--cross-post) to two or three, each list's copy with
that list's headers (Received, List-Id, List-Post, Sender, a subject tag
on some). Memory stays the sample's size whatever N; the same flags
write the same bytes.

Examples:
  scalegen --out /tmp/scale --messages 100000
  scalegen --out /tmp/scale --messages 1000000 --lists 11 --seed 2

Flags:
`)
		fs.PrintDefaults()
	}
	out := fs.String("out", "", "the directory to write the lists' mboxes into (required)")
	messages := fs.Int("messages", 100000, "distinct messages to write (cross-posts add copies)")
	lists := fs.Int("lists", scalecorpus.DefaultLists, "number of lists")
	seed := fs.Uint64("seed", 1, "the seed: the same seed writes the same bytes")
	cross := fs.Float64("cross-post", scalecorpus.DefaultCrossPost, "share of threads cross-posted to two or three lists (negative: none)")
	gz := fs.Bool("gzip", false, "write NAME.mbox.gz (gzip's fastest level) instead of NAME.mbox")
	corpus := fs.String("corpus", "", "the sample mbox (default: $CHIBRARY_CORPUS or ../shared/corpus/linux-mips-sample.mbox.gz beside the module)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if err == flag.ErrHelp {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if *out == "" || fs.NArg() > 0 {
		fmt.Fprintln(os.Stderr, "scalegen: --out DIR is required, and there are no arguments (see --help)")
		os.Exit(2)
	}
	if *corpus == "" {
		if *corpus = testcorpus.Find(); *corpus == "" {
			fmt.Fprintln(os.Stderr, "scalegen: no sample: pass --corpus or set CHIBRARY_CORPUS")
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	start := time.Now()
	res, err := scalecorpus.Generate(ctx, scalecorpus.Options{Corpus: *corpus, Dir: *out, Messages: *messages, Lists: *lists,
		CrossPost: *cross, Seed: *seed, Gzip: *gz})
	if err != nil {
		fmt.Fprintln(os.Stderr, "scalegen:", err)
		os.Exit(1)
	}
	for _, l := range res.Lists {
		fmt.Printf("%-60s %9d messages %8.1f MB\n", l.Path, l.Messages, float64(l.Bytes)/1e6)
	}
	d := time.Since(start)
	fmt.Printf("%d messages (%d written, %d cross-posted) in %d lists, %.1f MB in %.1f s (%.0f MB/s)\n",
		res.Messages, res.Written, res.CrossPosted, len(res.Lists), float64(res.Bytes)/1e6, d.Seconds(), float64(res.Bytes)/1e6/d.Seconds())
}
