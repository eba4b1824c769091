// Command scalebench measures what grows with an archive (make
// bench-scale; issue 37). At --size distinct messages in --lists lists
// (package scalecorpus: the sample made many lists, a share of threads
// cross-posted), and again at a tenth of that size, each in a fresh
// archive and each program in its own process, it measures:
//
//   - bin/importer, list by list into one archive: each list's msg/s and
//     the importer's peak RSS (its rusage), and apart the peaks of its
//     anonymous memory (the Go heap and runtime: what a user must
//     provision) and of the files it maps (messages.db's pages, clean,
//     which the kernel takes back at will), sampled from /proc;
//   - bin/resolver reindex and compact: wall time, msg/s, peak RSS;
//   - the store (messages.db and its packs) before and after compact, and
//     the catalog (catalog.db and its WAL), in bytes per input byte;
//   - a fixed set of searches through bin/resolver serve on loopback
//     (a prefix, phrases of common words, dfn:, a list: with a common
//     word, and ordinary ones): cold (a server just started, its
//     catalog just opened) and warm (p50 and p99), with the answers
//     that were not 200 (503: over the search budget; 400: refused);
//   - page loads the same way: the front page, a list's first and a
//     deep page, a month, a thread, a message.
//   - with --riak, the same lists into a fresh archive on Riak (a
//     cluster started from the test kit, or running nodes): each list's
//     msg/s, the importer's and the nodes' CPU, and a catalog built from
//     it with resolver reindex, beside bbolt's.
//
// CPU time is measured beside wall time (the children's rusage; the
// server's from /proc, per warm request): on a machine shared with other
// work, it moves less with the load than wall time does.
//
// Then it prints every figure beside the same at the small size, with
// their ratio (big over small): a figure that does not grow with the
// archive stays near 1 (sizes per input byte, RSS, msg/s, latency); a
// ratio near 10 grows with it.
//
// The peak RSS of a child is its rusage's, which on Linux starts at its
// parent's peak: this process stays small (the generator runs in a child
// of its own), about 15 MB, below every figure it measures.
//
// The operating system's page cache is not dropped (that needs root): a
// cold figure is the catalog's and the server's cold start, with what
// the kernel keeps of the files from the step before.
//
//	go run ./internal/tools/scalebench --bin bin --size 100000 --lists 11
//	go run ./internal/tools/scalebench --bin bin --size 1000000 --dir /var/tmp/scale --keep
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/scalecorpus"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
)

// queries are the fixed searches: what issue 37 names (a prefix, a
// phrase of common words, dfn:, list: with a common word) and ordinary
// ones as readers type them.
var queries = []string{
	"cpu*",
	`"the of and"`,
	`"this is a"`,
	"dfn:arch/mips/Kconfig",
	"dfn:setup.c",
	"list:linux-kernel patch",
	"kernel panic",
	"cache flush",
	"s:mips d:20100101..",
	"f:ralf tlb",
}

type config struct {
	bin, corpus, dir   string
	size, small, lists int
	seed               uint64
	coldRounds, warm   int
	keep, importOnly   bool
	serveOnly          bool
	riak               string // --riak: "", "kit" or addresses
	riakNodes          int
}

func main() {
	fs := flag.NewFlagSet("scalebench", flag.ContinueOnError)
	fs.Usage = func() {
		fmt.Fprint(fs.Output(), `Usage: scalebench [--bin DIR] [--size N] [--small N] [--lists L] [--dir DIR] [--keep]
                  [--riak kit|HOST:PORT,...] [--riak-nodes N] [--import-only | --serve-only]

Generates N messages in L lists from the shared sample (scalegen), imports
them list by list into one archive with the importer, reindexes and
compacts it with the resolver, then serves it and times a fixed set of
searches and pages, cold and warm; then the same at --small messages, and
prints every figure beside the other with their ratio: what grows with
the archive. Each program runs in its own process: wall time and peak RSS
are its own.

With --riak, each size is also imported list by list into a fresh
archive on Riak (a cluster of --riak-nodes started from the test kit in
../shared/riak, or running nodes), and a catalog is built from it with
resolver reindex: msg/s, CPU (the nodes' too, when started here) and the
catalog's build time, beside bbolt's.

Examples:
  scalebench --bin bin --size 100000 --lists 11
  scalebench --bin bin --size 1000000 --dir /var/tmp/scale --keep
  scalebench --bin bin --size 100000 --riak kit --riak-nodes 3
  scalebench --bin bin --size 100000 --dir /var/tmp/scale --import-only
  scalebench --bin bin --size 1000000 --dir /var/tmp/scale --serve-only

Flags:
`)
		fs.PrintDefaults()
	}
	var c config
	fs.StringVar(&c.bin, "bin", "bin", "the directory of importer and resolver (make build)")
	fs.StringVar(&c.corpus, "corpus", "", "the sample (default: $CHIBRARY_CORPUS or ../shared/corpus/linux-mips-sample.mbox.gz beside the module)")
	fs.StringVar(&c.dir, "dir", "", "work directory: the lists' mboxes are generated there, or reused when generated with the same options (default: a temporary one, removed)")
	fs.IntVar(&c.size, "size", 100000, "distinct messages of the big archive")
	fs.IntVar(&c.small, "small", -1, "distinct messages of the small archive (default: a tenth of --size; 0: none)")
	fs.IntVar(&c.lists, "lists", scalecorpus.DefaultLists, "lists")
	fs.Uint64Var(&c.seed, "seed", 1, "the generator's seed")
	fs.IntVar(&c.coldRounds, "cold-rounds", 3, "cold samples of each search and page, each from a server just started")
	fs.IntVar(&c.warm, "warm", 20, "warm samples of each search and page")
	generate := fs.String("generate", "", "internal: generate --size messages into this directory, in a process of its own")
	fs.StringVar(&c.riak, "riak", "", "also import into Riak: kit (start a cluster from the test kit) or the nodes' protocol buffers addresses HOST:PORT,... (default: bbolt only)")
	fs.IntVar(&c.riakNodes, "riak-nodes", 3, "nodes of the cluster --riak kit starts")
	fs.BoolVar(&c.keep, "keep", false, "keep the archives in --dir too (the generated mboxes stay there in any case)")
	fs.BoolVar(&c.importOnly, "import-only", false, "measure the import into bbolt only: no reindex, compact, searches, pages or Riak stage")
	fs.BoolVar(&c.serveOnly, "serve-only", false, "measure the searches and pages only, of the archives an earlier run with --dir and --keep left there (with --bin's resolver: a new one against the old)")
	if err := fs.Parse(os.Args[1:]); err != nil {
		if errors.Is(err, flag.ErrHelp) {
			os.Exit(0)
		}
		os.Exit(2)
	}
	if fs.NArg() > 0 || c.size < 1 || c.lists < 1 || c.coldRounds < 1 || c.warm < 1 || c.riakNodes < 1 {
		fmt.Fprintln(os.Stderr, "scalebench: --size, --lists, --cold-rounds, --warm and --riak-nodes must be at least 1, and there are no arguments (see --help)")
		os.Exit(2)
	}
	if c.serveOnly && (c.dir == "" || c.importOnly || c.riak != "") {
		fmt.Fprintln(os.Stderr, "scalebench: --serve-only needs --dir (the archives of an earlier run with --keep), and neither --import-only nor --riak")
		os.Exit(2)
	}
	if _, _, err := parseRiak(c.riak); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(2)
	}
	if c.small < 0 {
		c.small = c.size / 10
	}
	if c.corpus == "" {
		if c.corpus = testcorpus.Find(); c.corpus == "" {
			fmt.Fprintln(os.Stderr, "scalebench: no sample: pass --corpus or set CHIBRARY_CORPUS")
			os.Exit(2)
		}
	}
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *generate != "" {
		_, err := scalecorpus.Generate(ctx, scalecorpus.Options{Corpus: c.corpus, Dir: *generate, Messages: c.size, Lists: c.lists, Seed: c.seed})
		if err != nil {
			fmt.Fprintln(os.Stderr, "scalebench:", err)
			os.Exit(1)
		}
		return
	}
	if err := run(ctx, c); err != nil {
		fmt.Fprintln(os.Stderr, "scalebench:", err)
		os.Exit(1)
	}
}

// A figure is one measured number, named so that the two sizes' can be
// put side by side.
type figure struct {
	name, unit string
	value      float64
}

type figures []figure

func (f *figures) add(name, unit string, v float64) { *f = append(*f, figure{name, unit, v}) }

func run(ctx context.Context, c config) error {
	for _, p := range []string{"importer", "resolver"} {
		if _, err := os.Stat(filepath.Join(c.bin, p)); err != nil {
			return fmt.Errorf("no %s in %s (make build): %w", p, c.bin, err)
		}
	}
	dir := c.dir
	if dir == "" {
		d, err := os.MkdirTemp("", "scalebench")
		if err != nil {
			return err
		}
		defer os.RemoveAll(d)
		dir = d
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	host, _ := os.Hostname()
	fmt.Printf("scalebench %s: %d and %d messages in %d lists, seed %d, on %s (%d CPUs, load average %s)\n",
		time.Now().UTC().Format("2006-01-02 15:04 MST"), c.size, c.small, c.lists, c.seed, host, numCPU(), loadAverage())
	rc, err := startRiak(c)
	if err != nil {
		return err
	}
	if rc != nil {
		defer rc.stop()
	}
	// The small size first: its figures are printed even if the big
	// one does not finish.
	var small figures
	if c.small > 0 {
		if small, err = measureSize(ctx, c, rc, dir, c.small); err != nil {
			return err
		}
	}
	big, err := measureSize(ctx, c, rc, dir, c.size)
	if err != nil {
		return err
	}
	if c.small == 0 {
		return nil
	}
	fmt.Printf("\n== growth: %d messages against %d (ratio: big / small; near 1 does not grow, near %.0f grows with the archive)\n",
		c.size, c.small, float64(c.size)/float64(c.small))
	fmt.Printf("%-44s %12s %12s %8s\n", "", fmt.Sprint(c.small), fmt.Sprint(c.size), "ratio")
	for _, b := range big {
		i := slices.IndexFunc(small, func(s figure) bool { return s.name == b.name && s.unit == b.unit })
		if i < 0 {
			continue
		}
		s := small[i]
		ratio := "-"
		if s.value != 0 {
			ratio = fmt.Sprintf("%.2f", b.value/s.value)
		}
		fmt.Printf("%-44s %12s %12s %8s\n", b.name+" ("+b.unit+")", num(s.value), num(b.value), ratio)
	}
	fmt.Printf("load average at the end: %s\n", loadAverage())
	return nil
}

func num(v float64) string {
	switch {
	case v == math.Trunc(v) && math.Abs(v) < 1e12:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 100:
		return strconv.FormatFloat(v, 'f', 0, 64)
	case math.Abs(v) >= 1:
		return strconv.FormatFloat(v, 'f', 2, 64)
	default:
		return strconv.FormatFloat(v, 'f', 3, 64)
	}
}

// measureSize generates (or reuses) size messages and measures them, on
// Riak too when rc is not nil.
func measureSize(ctx context.Context, c config, rc *riakCluster, dir string, size int) (figures, error) {
	var fig figures
	gen := filepath.Join(dir, fmt.Sprintf("gen-%d", size))
	res, err := scalecorpus.ReadManifest(gen)
	if c.serveOnly {
		data := filepath.Join(dir, fmt.Sprintf("archive-%d", size))
		if err != nil {
			return nil, fmt.Errorf("--serve-only: %w", err)
		}
		if _, err := os.Stat(filepath.Join(data, "catalog.db")); err != nil {
			return nil, fmt.Errorf("--serve-only: no archive of %d messages kept in %s (run with --keep first): %w", size, dir, err)
		}
		fmt.Printf("\n== %d messages: the archive kept in %s (%d messages in %d lists, %.1f MB)\n", size, data, res.Written, len(res.Lists), float64(res.Bytes)/1e6)
		return fig, measureServe(ctx, c, filepath.Join(c.bin, "resolver"), data, res, &fig)
	}
	if err != nil || res.Options.Messages != size || res.Options.Lists != c.lists || res.Options.Seed != c.seed || res.Options.Gzip ||
		res.Options.CrossPost != scalecorpus.DefaultCrossPost || !filesPresent(res) {
		os.RemoveAll(gen)
		// In a process of its own: Linux gives a child the peak RSS of
		// the process that started it as its own to begin with (its
		// rusage's maxrss), and the generator holds the sample in memory.
		start := time.Now()
		self, err := os.Executable()
		if err != nil {
			return nil, err
		}
		if _, err := runChild(ctx, self, "--generate", gen, "--size", fmt.Sprint(size), "--lists", fmt.Sprint(c.lists),
			"--seed", fmt.Sprint(c.seed), "--corpus", c.corpus); err != nil {
			return nil, fmt.Errorf("generating %d messages: %w", size, err)
		}
		if res, err = scalecorpus.ReadManifest(gen); err != nil {
			return nil, err
		}
		fmt.Printf("\n== %d messages: generated %d (%d cross-posted copies) in %d lists, %.1f MB, in %.1f s\n",
			size, res.Written, res.Written-res.Messages, len(res.Lists), float64(res.Bytes)/1e6, time.Since(start).Seconds())
	} else {
		fmt.Printf("\n== %d messages: reusing %s: %d messages in %d lists, %.1f MB\n", size, gen, res.Written, len(res.Lists), float64(res.Bytes)/1e6)
	}
	data := filepath.Join(dir, fmt.Sprintf("archive-%d", size))
	os.RemoveAll(data)
	if !c.keep {
		defer os.RemoveAll(data)
	}
	importer, resolver := filepath.Join(c.bin, "importer"), filepath.Join(c.bin, "resolver")

	// Import, list by list.
	fmt.Printf("%-20s %9s %9s %8s %8s %8s %10s %9s %9s %9s\n", "import", "messages", "MB", "wall s", "msg/s", "MB/s", "CPU ms/msg", "peak RSS", "anon", "files")
	var total, totalWall, maxRSS float64
	var first, last float64
	for i, l := range res.Lists {
		r, err := runChild(ctx, importer, "--data", data, "--list", l.Name, "--log-level", "error", l.Path)
		if err != nil {
			return nil, fmt.Errorf("importer %s: %w", l.Name, err)
		}
		n, err := importedCount(r.stderr)
		if err != nil {
			return nil, fmt.Errorf("importer %s: %w", l.Name, err)
		}
		rate := float64(n) / r.wall.Seconds()
		fmt.Printf("%-20s %9d %9.1f %8.1f %8.0f %8.1f %10.3f %6.0f MB %6.0f MB %6.0f MB\n", l.Name, n, float64(l.Bytes)/1e6, r.wall.Seconds(), rate,
			float64(l.Bytes)/1e6/r.wall.Seconds(), msPer(r.cpu, n), r.rss/1e6, r.anon/1e6, r.file/1e6)
		if i == 0 {
			first = rate
			fig.add("import: first list's CPU", "ms/msg", msPer(r.cpu, n))
			fig.add("import: first list's peak anon", "MB", r.anon/1e6)
		}
		last = rate
		total += float64(n)
		totalWall += r.wall.Seconds()
		maxRSS = max(maxRSS, r.rss)
		if i == len(res.Lists)-1 {
			fig.add("import: last list's CPU", "ms/msg", msPer(r.cpu, n))
			fig.add("import: last list's peak RSS", "MB", r.rss/1e6)
			fig.add("import: last list's peak anon", "MB", r.anon/1e6)
			fig.add("import: last list's peak files", "MB", r.file/1e6)
		}
	}
	fig.add("import: first list", "msg/s", first)
	fig.add("import: last list", "msg/s", last)
	fig.add("import: all lists", "msg/s", total/totalWall)
	fig.add("import: peak RSS, largest", "MB", maxRSS/1e6)
	input := float64(res.Bytes)
	storeBytes := diskBytes(filepath.Join(data, "messages.db")) + diskBytes(filepath.Join(data, "messages.packs"))
	fig.add("store, as imported", "bytes/input byte", storeBytes/input)
	if c.importOnly {
		return fig, nil
	}

	// Reindex, then compact.
	r, err := runChild(ctx, resolver, "reindex", "--data", data, "--log-level", "error")
	if err != nil {
		return nil, fmt.Errorf("resolver reindex: %w", err)
	}
	fmt.Printf("%-20s %9.0f msg/s in %.1f s, %.3f ms of CPU a message, peak RSS %.0f MB\n", "resolver reindex", total/r.wall.Seconds(), r.wall.Seconds(), msPer(r.cpu, int(total)), r.rss/1e6)
	fig.add("reindex", "msg/s", total/r.wall.Seconds())
	fig.add("reindex: CPU", "ms/msg", msPer(r.cpu, int(total)))
	fig.add("reindex: peak RSS", "MB", r.rss/1e6)
	catalogBytes := diskBytes(filepath.Join(data, "catalog.db")) + diskBytes(filepath.Join(data, "catalog.db-wal"))
	fig.add("catalog", "bytes/input byte", catalogBytes/input)
	r, err = runChild(ctx, resolver, "compact", "--data", data, "--log-level", "error")
	if err != nil {
		return nil, fmt.Errorf("resolver compact: %w", err)
	}
	compacted := diskBytes(filepath.Join(data, "messages.db")) + diskBytes(filepath.Join(data, "messages.packs"))
	fmt.Printf("%-20s %9.0f msg/s in %.1f s, %.3f ms of CPU a message, peak RSS %.0f MB\n", "resolver compact", total/r.wall.Seconds(), r.wall.Seconds(), msPer(r.cpu, int(total)), r.rss/1e6)
	fig.add("compact", "s", r.wall.Seconds())
	fig.add("compact: time per message", "µs", r.wall.Seconds()/total*1e6)
	fig.add("compact: CPU", "ms/msg", msPer(r.cpu, int(total)))
	fig.add("compact: peak RSS", "MB", r.rss/1e6)
	fmt.Printf("input %.1f MB; store as imported %.1f MB (%.3f bytes per input byte), compacted %.1f MB (%.3f); catalog %.1f MB (%.3f)\n",
		input/1e6, storeBytes/1e6, storeBytes/input, compacted/1e6, compacted/input, catalogBytes/1e6, catalogBytes/input)
	fig.add("store, compacted", "bytes/input byte", compacted/input)

	// Searches and pages.
	if err := measureServe(ctx, c, resolver, data, res, &fig); err != nil {
		return nil, err
	}
	if rc != nil {
		if err := measureRiak(ctx, c, rc, dir, size, res, &fig); err != nil {
			return nil, err
		}
	}
	return fig, nil
}

func filesPresent(res scalecorpus.Result) bool {
	for _, l := range res.Lists {
		if fi, err := os.Stat(l.Path); err != nil || fi.Size() != l.Bytes {
			return false
		}
	}
	return len(res.Lists) > 0
}

var summaryLine = regexp.MustCompile(`(?m)^imported (\d+), duplicates (\d+), failed (\d+) in `)

// importedCount reads the importer's summary line: the messages it read
// (imported and duplicates); a failed one is an error here.
func importedCount(stderr string) (int, error) {
	m := summaryLine.FindStringSubmatch(stderr)
	if m == nil {
		return 0, fmt.Errorf("no summary line in its output: %s", lastLines(stderr, 5))
	}
	imported, _ := strconv.Atoi(m[1])
	dups, _ := strconv.Atoi(m[2])
	failed, _ := strconv.Atoi(m[3])
	if failed > 0 {
		return 0, fmt.Errorf("%d messages failed: %s", failed, lastLines(stderr, 5))
	}
	return imported + dups, nil
}

type childResult struct {
	wall, cpu time.Duration
	rss       float64 // bytes
	// anon and file are the peaks of RssAnon and RssFile, sampled from
	// /proc every sampleEvery (0 where there is none).
	anon, file float64 // bytes
	stderr     string
}

// sampleEvery is how often runChild reads a child's memory in /proc.
const sampleEvery = 50 * time.Millisecond

// runChild runs a program to its end and measures it: wall time, CPU
// time (user and system) and peak RSS, from its rusage, and the peaks of
// its anonymous and file-backed memory, from /proc.
func runChild(ctx context.Context, name string, args ...string) (childResult, error) {
	cmd := exec.CommandContext(ctx, name, args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	start := time.Now()
	var anon, file int64
	err := cmd.Start()
	if err == nil {
		done := make(chan struct{})
		sampled := make(chan struct{})
		go func() {
			defer close(sampled)
			status := fmt.Sprintf("/proc/%d/status", cmd.Process.Pid)
			t := time.NewTicker(sampleEvery)
			defer t.Stop()
			for {
				if b, err := os.ReadFile(status); err == nil {
					if m, err := parseStatus(b); err == nil {
						anon, file = max(anon, m.anon), max(file, m.file)
					}
				}
				select {
				case <-done:
					return
				case <-t.C:
				}
			}
		}()
		err = cmd.Wait()
		close(done)
		<-sampled
	}
	r := childResult{wall: time.Since(start), stderr: stderr.String(), anon: float64(anon), file: float64(file)}
	if err != nil {
		return r, fmt.Errorf("%v: %s", err, lastLines(r.stderr, 5))
	}
	r.cpu = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.rss = float64(ru.Maxrss) * 1024 // Linux reports KiB
	}
	return r, nil
}

// diskBytes is the blocks path occupies, a directory's files included.
func diskBytes(path string) float64 {
	var n int64
	filepath.WalkDir(path, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return nil
		}
		if fi, err := d.Info(); err == nil {
			if st, ok := fi.Sys().(*syscall.Stat_t); ok {
				n += st.Blocks * 512
			} else {
				n += fi.Size()
			}
		}
		return nil
	})
	return float64(n)
}

func msPer(d time.Duration, n int) float64 {
	if n == 0 {
		return 0
	}
	return float64(d.Microseconds()) / 1000 / float64(n)
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}

func loadAverage() string {
	b, err := os.ReadFile("/proc/loadavg")
	if err != nil {
		return "unknown"
	}
	f := strings.Fields(string(b))
	if len(f) < 3 {
		return "unknown"
	}
	return strings.Join(f[:3], " ")
}

func numCPU() int {
	f, err := os.Open("/proc/cpuinfo")
	if err != nil {
		return 0
	}
	defer f.Close()
	n := 0
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.HasPrefix(sc.Text(), "processor") {
			n++
		}
	}
	return n
}

// server is a resolver serve child.
type server struct {
	cmd  *exec.Cmd
	base string
	done chan error
}

var client = &http.Client{Timeout: 2 * time.Minute, Transport: &http.Transport{DisableCompression: true, MaxIdleConnsPerHost: 4}}

// startServer starts resolver serve on a free loopback port and waits
// until it answers with its catalog current.
func startServer(ctx context.Context, resolver, data string) (*server, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	addr := ln.Addr().String()
	ln.Close()
	cmd := exec.CommandContext(ctx, resolver, "serve", "--data", data, "--listen", addr, "--log-level", "error")
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		return nil, err
	}
	s := &server{cmd: cmd, base: "http://" + addr, done: make(chan error, 1)}
	go func() { s.done <- cmd.Wait() }()
	deadline := time.Now().Add(5 * time.Minute)
	for time.Now().Before(deadline) {
		select {
		case err := <-s.done:
			return nil, fmt.Errorf("resolver serve ended: %v: %s", err, lastLines(stderr.String(), 5))
		case <-time.After(20 * time.Millisecond):
		}
		var st struct {
			Messages int
			Catalog  struct {
				Messages int
				Follower struct{ Synced time.Time }
			}
		}
		if get(s.base+"/api/v1/stats", &st) == nil && st.Catalog.Messages > 0 && !st.Catalog.Follower.Synced.IsZero() {
			return s, nil
		}
	}
	s.stop()
	return nil, errors.New("resolver serve did not answer with its catalog current within 5 minutes")
}

func (s *server) stop() {
	s.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-s.done:
	case <-time.After(30 * time.Second):
		s.cmd.Process.Kill()
		<-s.done
	}
}

// get fetches u into v (JSON).
func get(u string, v any) error {
	resp, err := client.Get(u)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("%s: %s", u, resp.Status)
	}
	return json.NewDecoder(resp.Body).Decode(v)
}

// timed fetches u whole and returns its status and latency.
func timed(u string) (int, time.Duration, error) {
	start := time.Now()
	resp, err := client.Get(u)
	if err != nil {
		return 0, 0, err
	}
	_, err = io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	return resp.StatusCode, time.Since(start), err
}

// pagePaths picks the pages to load: the front page, the first list's
// first page and one deep in it, its busiest month, a thread of several
// messages and a message.
func pagePaths(base, list string) ([][2]string, error) {
	var lp struct {
		Pages   int
		Threads []struct {
			Root     struct{ Callnumber string }
			Messages int
		}
	}
	if err := get(base+"/api/v1/lists/"+list, &lp); err != nil {
		return nil, err
	}
	if len(lp.Threads) == 0 {
		return nil, fmt.Errorf("list %s has no threads", list)
	}
	thread := lp.Threads[0].Root.Callnumber
	for _, t := range lp.Threads {
		if t.Messages > 1 {
			thread = t.Root.Callnumber
			break
		}
	}
	deep := max(1, lp.Pages*2/3)
	var sr struct {
		Results []struct{ Date time.Time }
	}
	month := "2005-06"
	if err := get(base+"/api/v1/search?q="+url.QueryEscape("list:"+list+" patch"), &sr); err == nil && len(sr.Results) > 0 {
		month = sr.Results[len(sr.Results)/2].Date.Format("2006-01")
	}
	return [][2]string{
		{"page: front", "/"},
		{"page: list, first", "/l/" + list + "/"},
		{"page: list, deep", fmt.Sprintf("/l/%s/?page=%d", list, deep)},
		{"page: month", "/l/" + list + "/" + month + "/"},
		{"page: thread", "/t/" + thread + "/"},
		{"page: message", "/" + thread},
	}, nil
}

// measureServe times the searches and pages, cold and warm.
func measureServe(ctx context.Context, c config, resolver, data string, res scalecorpus.Result, fig *figures) error {
	s, err := startServer(ctx, resolver, data)
	if err != nil {
		return err
	}
	pages, err := pagePaths(s.base, res.Lists[0].Name)
	s.stop()
	if err != nil {
		return err
	}
	type target struct{ name, path string }
	var targets []target
	for _, q := range queries {
		targets = append(targets, target{"search: " + q, "/search?q=" + url.QueryEscape(q)})
	}
	for _, p := range pages {
		targets = append(targets, target{p[0], p[1]})
	}
	cold := make([][]time.Duration, len(targets))
	status := make([]map[int]int, len(targets))
	for i := range status {
		status[i] = map[int]int{}
	}
	// Cold: each request the first a server just started answers.
	var startup []time.Duration
	for range c.coldRounds {
		for i, t := range targets {
			t0 := time.Now()
			s, err := startServer(ctx, resolver, data)
			if err != nil {
				return err
			}
			startup = append(startup, time.Since(t0))
			code, d, err := timed(s.base + t.path)
			s.stop()
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			cold[i] = append(cold[i], d)
			status[i][code]++
		}
	}
	// Warm: one server, each request once to warm it, then c.warm times.
	s, err = startServer(ctx, resolver, data)
	if err != nil {
		return err
	}
	defer s.stop()
	warm := make([][]time.Duration, len(targets))
	warmCPU := make([]time.Duration, len(targets))
	for i, t := range targets {
		var cpu0 time.Duration
		for j := range c.warm + 1 {
			if j == 1 {
				cpu0 = processCPU(s.cmd.Process.Pid)
			}
			code, d, err := timed(s.base + t.path)
			if err != nil {
				return fmt.Errorf("%s: %w", t.name, err)
			}
			if j > 0 {
				warm[i] = append(warm[i], d)
				status[i][code]++
			}
		}
		warmCPU[i] = processCPU(s.cmd.Process.Pid) - cpu0
	}
	slices.Sort(startup)
	fmt.Printf("%-36s %10s %10s %10s %10s %10s  %s\n", "request (ms)", "cold p50", "cold max", "warm p50", "warm p99", "warm CPU", "answers not 200")
	for i, t := range targets {
		slices.Sort(cold[i])
		slices.Sort(warm[i])
		cp50, cmax := ms(pct(cold[i], 50)), ms(cold[i][len(cold[i])-1])
		wp50, wp99 := ms(pct(warm[i], 50)), ms(pct(warm[i], 99))
		var bad []string
		for code, n := range status[i] {
			if code != http.StatusOK {
				bad = append(bad, fmt.Sprintf("%d×%d", n, code))
			}
		}
		slices.Sort(bad)
		wcpu := ms(warmCPU[i]) / float64(c.warm)
		fmt.Printf("%-36s %10.1f %10.1f %10.1f %10.1f %10.1f  %s\n", t.name, cp50, cmax, wp50, wp99, wcpu, strings.Join(bad, " "))
		fig.add(t.name+", cold p50", "ms", cp50)
		fig.add(t.name+", warm p50", "ms", wp50)
		fig.add(t.name+", warm p99", "ms", wp99)
		fig.add(t.name+", warm CPU", "ms", wcpu)
		fig.add(t.name+", not 200", "answers", float64(len(cold[i])+len(warm[i])-status[i][http.StatusOK]))
	}
	fmt.Printf("resolver serve ready (catalog open and current) in %.0f ms (median of %d starts)\n", ms(pct(startup, 50)), len(startup))
	fig.add("serve: start until ready", "ms", ms(pct(startup, 50)))
	return nil
}

// processCPU is the user and system time of process pid so far, from
// /proc (in clock ticks of 10 ms, the kernel's USER_HZ on Linux); 0 where
// there is no /proc.
func processCPU(pid int) time.Duration {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0
	}
	// The command name, field 2, is in parentheses and may hold spaces.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 13 {
		return 0
	}
	utime, _ := strconv.ParseInt(f[11], 10, 64)
	stime, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(utime+stime) * 10 * time.Millisecond
}

// pct is the p-th percentile of sorted d (nearest rank).
func pct(d []time.Duration, p int) time.Duration {
	i := (len(d)*p + 99) / 100
	return d[min(max(i-1, 0), len(d)-1)]
}

func ms(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }

// procMemory is what parseStatus reads of /proc/PID/status, in bytes.
type procMemory struct{ anon, file int64 }

// errStatus: a /proc/PID/status without RssAnon and RssFile lines of the
// form "RssAnon:\t  1234 kB" (proc(5)), or a value out of range.
var errStatus = errors.New("scalebench: no RssAnon and RssFile in /proc/PID/status")

// parseStatus reads the RssAnon and RssFile lines of a /proc/PID/status
// (proc(5); Linux 4.5 and later).
func parseStatus(b []byte) (procMemory, error) {
	var m procMemory
	var found int
	for line := range strings.Lines(string(b)) {
		key, val, ok := strings.Cut(line, ":")
		if !ok || (key != "RssAnon" && key != "RssFile") {
			continue
		}
		f := strings.Fields(val)
		if len(f) != 2 || f[1] != "kB" {
			return procMemory{}, fmt.Errorf("%w: %q", errStatus, strings.TrimSpace(line))
		}
		kb, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64>>10 {
			return procMemory{}, fmt.Errorf("%w: %q", errStatus, strings.TrimSpace(line))
		}
		if key == "RssAnon" {
			m.anon = kb << 10
			found |= 1
		} else {
			m.file = kb << 10
			found |= 2
		}
	}
	if found != 3 {
		return procMemory{}, errStatus
	}
	return m, nil
}
