// Command piimportbench measures the importer reading a public-inbox v2
// inbox beside reading the same messages from an mbox file: the corpus is
// imported once into an inbox with public-inbox's own importer
// (pisource/pitest: public-inbox-init -V2 -L basic, then
// PublicInbox::InboxWritable's import_mbox, one commit per message), then
// the importer binary imports the mbox and the inbox, each into a fresh
// data directory, alternately, --rounds times each, in its own process.
// It prints the median wall time, msg/s, CPU time and peak RSS of each and
// the ratio of their speeds (goal: the inbox at 0.8x the mbox's or
// better), then a re-run on the inbox with nothing new (the importer
// remembers the last commit read) and one that reads it all again (what
// it remembers deleted: all duplicates). Skips, saying why, without public-inbox.
//
//	go run ./internal/tools/piimportbench --corpus ../shared/corpus/linux-mips-sample.mbox.gz --importer bin/importer
package main

import (
	"bytes"
	"compress/gzip"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/mailsource/pisource/pitest"
)

func main() {
	corpus := flag.String("corpus", "../shared/corpus/linux-mips-sample.mbox.gz", "mbox (plain or .gz) to import")
	importer := flag.String("importer", "bin/importer", "importer binary")
	rounds := flag.Int("rounds", 3, "runs of each import; the median is reported")
	flag.Parse()
	if err := run(*corpus, *importer, *rounds); err != nil {
		fmt.Fprintln(os.Stderr, "piimportbench:", err)
		os.Exit(1)
	}
}

// tb is pitest.T for a program: a failure ends it.
type tb struct{ dir string }

func (tb) Helper() {}
func (tb) Fatalf(format string, args ...any) {
	fmt.Fprintf(os.Stderr, "piimportbench: "+format+"\n", args...)
	os.Exit(1)
}
func (tb) Skip(args ...any) {
	fmt.Println("== public-inbox import: skipped:", fmt.Sprint(args...))
	os.Exit(0)
}
func (t tb) TempDir() string {
	d, err := os.MkdirTemp(t.dir, "inbox")
	if err != nil {
		t.Fatalf("%v", err)
	}
	return d
}

type result struct {
	wall, cpu time.Duration
	maxRSS    int64
	counts    [3]int // imported, duplicates, failed
}

func (r result) msgs() int { return r.counts[0] + r.counts[1] + r.counts[2] }

var summary = regexp.MustCompile(`(?m)^imported (\d+), duplicates (\d+), failed (\d+) in`)

func importOnce(importer string, args ...string) (result, error) {
	cmd := exec.Command(importer, args...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	err := cmd.Run()
	r := result{wall: time.Since(start)}
	if err != nil {
		return r, fmt.Errorf("%s %s: %w\n%s", importer, strings.Join(args, " "), err, stderr.String())
	}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	m := summary.FindStringSubmatch(stderr.String())
	if m == nil {
		return r, fmt.Errorf("no summary line in:\n%s", stderr.String())
	}
	for i := range r.counts {
		r.counts[i], _ = strconv.Atoi(m[i+1])
	}
	return r, nil
}

func median(rs []result) result {
	slices.SortFunc(rs, func(a, b result) int { return int(a.wall - b.wall) })
	return rs[len(rs)/2]
}

func (r result) String() string {
	return fmt.Sprintf("%d msg in %.2f s (%.0f msg/s), CPU %.2f s (%.0f µs/msg), peak RSS %.0f MB",
		r.msgs(), r.wall.Seconds(), float64(r.msgs())/r.wall.Seconds(), r.cpu.Seconds(),
		float64(r.cpu.Microseconds())/float64(max(r.msgs(), 1)), float64(r.maxRSS)/1e6)
}

func run(corpus, importer string, rounds int) error {
	if _, err := os.Stat(corpus); err != nil {
		fmt.Println("== public-inbox import: skipped: no corpus:", err)
		return nil
	}
	if rounds < 1 {
		return errors.New("--rounds must be 1 or more")
	}
	tmp, err := os.MkdirTemp("", "piimportbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	mboxPath := filepath.Join(tmp, "corpus.mbox")
	if err := decompress(corpus, mboxPath); err != nil {
		return err
	}
	t := tb{dir: tmp}
	start := time.Now()
	ib := pitest.New(t, 2, "-L", "basic")
	ib.ImportMbox(t, mboxPath, 0)
	count, err := exec.Command("git", "--git-dir="+ib.Epoch(0), "rev-list", "--count", "HEAD").Output()
	if err != nil {
		return fmt.Errorf("git rev-list: %w", err)
	}
	fmt.Printf("== public-inbox v2 inbox beside the mbox file: %s, the inbox made by public-inbox's importer in %.1f s (%s commits in git/0.git)\n",
		filepath.Base(corpus), time.Since(start).Seconds(), strings.TrimSpace(string(count)))

	var fromMbox, fromInbox []result
	var lastInbox string
	for i := range rounds {
		for _, in := range []struct {
			path string
			out  *[]result
		}{{mboxPath, &fromMbox}, {ib.Dir, &fromInbox}} {
			data := filepath.Join(tmp, fmt.Sprintf("data-%d-%d", i, len(*in.out)))
			if in.path == ib.Dir {
				data += "-inbox"
				lastInbox = data
			}
			r, err := importOnce(importer, "--data", data, "--list", "bench", in.path)
			if err != nil {
				return err
			}
			*in.out = append(*in.out, r)
			if in.path != ib.Dir || i < rounds-1 {
				os.RemoveAll(data)
			}
		}
	}
	m, p := median(fromMbox), median(fromInbox)
	fmt.Printf("mbox file:           %s\n", m)
	fmt.Printf("public-inbox v2:     %s\n", p)
	ratio := m.wall.Seconds() / p.wall.Seconds() * float64(p.msgs()) / float64(max(m.msgs(), 1))
	verdict := "meets"
	if ratio < 0.8 {
		verdict = "BELOW"
	}
	fmt.Printf("speed of the inbox's import / the mbox's: %.2fx (%s the goal of 0.8x; median of %d rounds each)\n", ratio, verdict, rounds)

	// Again into the last archive: nothing new.
	r, err := importOnce(importer, "--data", lastInbox, "--list", "bench", ib.Dir)
	if err != nil {
		return err
	}
	fmt.Printf("re-run, nothing new (the last commit read is remembered): %d read, in %.2f s\n", r.msgs(), r.wall.Seconds())
	// Again with what it remembers deleted: all read, all duplicates.
	if err := os.RemoveAll(filepath.Join(lastInbox, "public-inbox")); err != nil {
		return err
	}
	r, err = importOnce(importer, "--data", lastInbox, "--list", "bench", ib.Dir)
	if err != nil {
		return err
	}
	if r.counts[1] != p.msgs() {
		return fmt.Errorf("the re-run after forgetting read %d duplicates, want %d: did it not read the inbox again?", r.counts[1], p.msgs())
	}
	fmt.Printf("re-run, nothing remembered (DATA/public-inbox deleted: all read again): %d duplicates in %.2f s (%.0f msg/s)\n", r.counts[1], r.wall.Seconds(), float64(r.msgs())/r.wall.Seconds())
	return nil
}

// decompress writes the corpus, plain or gzip, as a plain mbox file.
func decompress(src, dst string) error {
	in, err := os.Open(src)
	if err != nil {
		return err
	}
	defer in.Close()
	var r io.Reader = in
	if strings.HasSuffix(src, ".gz") {
		zr, err := gzip.NewReader(in)
		if err != nil {
			return err
		}
		r = zr
	}
	out, err := os.Create(dst)
	if err != nil {
		return err
	}
	if _, err := io.Copy(out, r); err != nil {
		out.Close()
		return err
	}
	return out.Close()
}
