// Command importbench measures the importer against the floor: a bare
// bbolt loop that puts the same raw messages under sequential keys in
// 1,000-message transactions (uncompressed). Both read the same
// decompressed mbox file, each in its own process, so that wall time,
// peak RSS and bytes on disk are each program's own. It prints both, and
// their ratio; with --before, also an older importer binary's figures
// beside them (make bench builds the importer before compression); with
// --resolver, the store's size after resolver compact too.
//
// Bytes on disk are the blocks the files occupy (du), which is what an
// operator pays for; "apparent" is their length (ls), which counts the
// unwritten tail bbolt keeps ahead of its data. Per input byte is the
// store, messages.db and its packs (messages.packs/), per byte of the
// decompressed mbox: the store alone, without the run authority (runs.db)
// or anything derived.
//
// --copies N imports N copies of the corpus, each with its Message-IDs and
// one header made its own, so that all N times its messages are distinct:
// an input the size of a whole list's archive (16 copies of the sample:
// 84,096 messages, 654 MB, like the whole linux-mips archive), to see what
// grows with the archive.
//
// Then, in the same run and on the same input, the importer into Riak: a
// node started from the Riak test kit (../shared/riak, or --riak-kit), or
// the node --riak (or $CHIBRARY_TEST_RIAK) names, a fresh archive per
// round; it prints msg/s beside the bbolt import's, the requests the
// store sent per message (counted by the store, logged when it closes),
// and the CPU time per message of the node, when it started the node, and
// of the importer, beside the bbolt import's. --riak off skips it.
//
// Every program's CPU time (user and system) is printed per message beside
// its wall time: on a machine shared with other work, wall times say how
// loaded it was as much as how fast a program is.
//
//	go run ./internal/tools/importbench --corpus ../shared/corpus/linux-mips-sample.mbox.gz --importer bin/importer
//	go run ./internal/tools/importbench --importer bin/importer --copies 16 --rounds 1
package main

import (
	"bufio"
	"compress/gzip"
	"encoding/binary"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/mbox"
)

func main() {
	corpus := flag.String("corpus", "../shared/corpus/linux-mips-sample.mbox.gz", "mbox (plain or .gz) to import")
	importer := flag.String("importer", "bin/importer", "importer binary")
	before := flag.String("before", "", "an older importer binary to measure beside it (optional)")
	resolver := flag.String("resolver", "", "resolver binary: also compact an imported store and measure it (optional)")
	rounds := flag.Int("rounds", 3, "runs of each program; the median is reported")
	copies := flag.Int("copies", 1, "import this many copies of the corpus, each made distinct")
	riakAddr := flag.String("riak", os.Getenv(riaktest.EnvAddr), "protocol buffers address of a Riak node to import into (default: start one from the kit; off: skip Riak)")
	riakKit := flag.String("riak-kit", "", "the kit's riak-node script (default: ../shared/riak/riak-node next to the repository)")
	bare := flag.String("bare", "", "internal: run the bare loop on this plain mbox")
	out := flag.String("out", "", "internal: the bare loop's database")
	flag.Parse()
	if *bare != "" {
		if err := bareLoop(*bare, *out); err != nil {
			fmt.Fprintln(os.Stderr, "importbench:", err)
			os.Exit(1)
		}
		return
	}
	if err := compare(*corpus, *importer, *before, *resolver, *rounds, *copies, *riakAddr, *riakKit); err != nil {
		fmt.Fprintln(os.Stderr, "importbench:", err)
		os.Exit(1)
	}
}

type result struct {
	wall      time.Duration
	cpu       time.Duration // user + system
	maxRSS    int64         // bytes
	disk      int64         // blocks of every file of the data directory
	apparent  int64         // their lengths
	store     int64         // blocks of messages.db (bare loop: its file)
	messages  int
	writeOnly time.Duration // bare loop: the bbolt puts alone
}

func compare(corpus, importer, before, resolver string, rounds, copies int, riakAddr, riakKit string) error {
	if _, err := os.Stat(corpus); err != nil {
		return fmt.Errorf("no corpus (%w): pass --corpus", err)
	}
	tmp, err := os.MkdirTemp("", "importbench")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	plain := filepath.Join(tmp, "corpus.mbox")
	size, err := decompress(corpus, plain, copies)
	if err != nil {
		return err
	}
	self, err := os.Executable()
	if err != nil {
		return err
	}
	var imp, old, bar []result
	for i := 0; i < rounds; i++ {
		dir := filepath.Join(tmp, fmt.Sprint("imp", i))
		r, err := measure(exec.Command(importer, "--data", dir, "--log-level", "error", plain), dir, "messages.db")
		if err != nil {
			return fmt.Errorf("importer: %w", err)
		}
		imp = append(imp, r)
		if before != "" {
			dir := filepath.Join(tmp, fmt.Sprint("before", i))
			r, err := measure(exec.Command(before, "--data", dir, "--log-level", "error", plain), dir, "messages.db")
			if err != nil {
				return fmt.Errorf("importer before: %w", err)
			}
			old = append(old, r)
			os.RemoveAll(dir)
		}
		bdir := filepath.Join(tmp, fmt.Sprint("bare", i))
		os.MkdirAll(bdir, 0o755)
		r, err = measure(exec.Command(self, "--bare", plain, "--out", filepath.Join(bdir, "bare.db")), bdir, "bare.db")
		if err != nil {
			return fmt.Errorf("bare loop: %w", err)
		}
		bar = append(bar, r)
		os.RemoveAll(bdir)
	}
	var compacted result
	if resolver != "" {
		// The store as resolver compact leaves it: every record with the
		// dictionary trained on all of it, no free pages.
		dir := filepath.Join(tmp, "imp0")
		if compacted, err = measure(exec.Command(resolver, "compact", "--data", dir, "--log-level", "error"), dir, "messages.db"); err != nil {
			return fmt.Errorf("resolver compact: %w", err)
		}
	}
	mi, mb := median(imp), median(bar)
	msgs := mb.messages
	what := corpus
	if copies > 1 {
		what = fmt.Sprintf("%d distinct copies of %s", copies, corpus)
	}
	fmt.Printf("input: %s, %d messages, %.1f MB (decompressed), median of %d runs each\n\n", what, msgs, float64(size)/1e6, rounds)
	fmt.Printf("%-30s %8s %7s %7s %10s %9s %8s %9s %9s\n", "", "msg/s", "MB/s", "wall s", "CPU ms/msg", "peak RSS", "on disk", "apparent", "store/in")
	row := func(name string, r result) {
		s := r.wall.Seconds()
		fmt.Printf("%-30s %8.0f %7.1f %7.2f %10.3f %6.0f MB %5.1f MB %6.1f MB %9.3f\n", name, float64(msgs)/s, float64(size)/1e6/s, s,
			msPer(r.cpu, msgs), float64(r.maxRSS)/1e6, float64(r.disk)/1e6, float64(r.apparent)/1e6, float64(r.store)/float64(size))
	}
	row("importer (read+index+store)", mi)
	if resolver != "" {
		fmt.Printf("%-30s %8s %7s %7.2f %10s %6.0f MB %5.1f MB %6.1f MB %9.3f\n", "then resolver compact", "", "", compacted.wall.Seconds(), "",
			float64(compacted.maxRSS)/1e6, float64(compacted.disk)/1e6, float64(compacted.apparent)/1e6, float64(compacted.store)/float64(size))
	}
	if before != "" {
		row("importer before compression", median(old))
	}
	row("bare bbolt loop (read+put)", mb)
	fmt.Printf("%-30s %8.0f %7.1f %7.2f\n", "bare bbolt puts alone", float64(msgs)/mb.writeOnly.Seconds(), float64(size)/1e6/mb.writeOnly.Seconds(), mb.writeOnly.Seconds())
	// Round by round: the importer and the bare loop of one round ran
	// one after the other, on a machine in the same state.
	var ratios []float64
	for i := range imp {
		ratios = append(ratios, 100*bar[i].wall.Seconds()/imp[i].wall.Seconds())
	}
	slices.Sort(ratios)
	fmt.Printf("\nimporter / bare loop: %.0f%% of its msg/s (target >= 50%%; round by round, median %.0f%%, %.0f-%.0f%%); importer / bare puts alone: %.0f%%; CPU per message %.3f against %.3f ms\n",
		100*mb.wall.Seconds()/mi.wall.Seconds(), ratios[len(ratios)/2], ratios[0], ratios[len(ratios)-1],
		100*mb.writeOnly.Seconds()/mi.wall.Seconds(), msPer(mi.cpu, msgs), msPer(mb.cpu, msgs))
	if before != "" {
		mo := median(old)
		fmt.Printf("importer before compression / bare loop: %.0f%%; now / before: %.0f%% of its msg/s\n",
			100*mb.wall.Seconds()/mo.wall.Seconds(), 100*mo.wall.Seconds()/mi.wall.Seconds())
		fmt.Printf("store on disk: %.3f bytes per input byte (before compression %.3f; target <= 0.40)\n", float64(mi.store)/float64(size), float64(mo.store)/float64(size))
	} else {
		fmt.Printf("store on disk: %.3f bytes per input byte (target <= 0.40)\n", float64(mi.store)/float64(size))
	}
	fmt.Printf("importer peak RSS: %.0f MB (target < 200 MB)\n", float64(mi.maxRSS)/1e6)
	if riakAddr == "off" {
		return nil
	}
	bolt := boltFigures{messages: msgs, msgPerS: float64(msgs) / mi.wall.Seconds(), cpu: mi.cpu, input: size}
	if err := compareRiak(tmp, plain, importer, rounds, riakAddr, riakKit, bolt); err != nil {
		return fmt.Errorf("riak: %w", err)
	}
	return nil
}

func median(rs []result) result {
	s := slices.Clone(rs)
	slices.SortFunc(s, func(a, b result) int { return int(a.wall - b.wall) })
	return s[len(s)/2]
}

func measure(cmd *exec.Cmd, dir, storeFile string) (result, error) {
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return result{}, fmt.Errorf("%v: %s", err, stderr.String())
	}
	r := result{wall: time.Since(start), cpu: cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()}
	if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
		r.maxRSS = ru.Maxrss * 1024 // Linux reports KiB
	}
	filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				r.apparent += fi.Size()
				blocks := fi.Size()
				if st, ok := fi.Sys().(*syscall.Stat_t); ok {
					blocks = st.Blocks * 512
				}
				r.disk += blocks
				// The store: the file, and the packs that hold its
				// records (STORE.packs/*.pack beside STORE.db).
				if d.Name() == storeFile || filepath.Base(filepath.Dir(path)) == strings.TrimSuffix(storeFile, ".db")+".packs" {
					r.store += blocks
				}
			}
		}
		return nil
	})
	var rep struct {
		Messages  int
		WriteOnly time.Duration
	}
	if json.Unmarshal([]byte(stdout.String()), &rep) == nil {
		r.messages, r.writeOnly = rep.Messages, rep.WriteOnly
	}
	return r, nil
}

// decompress writes copies copies of the mbox src to dst, decompressed;
// copies after the first have their own Message-IDs and an X-Copy header.
func decompress(src, dst string, copies int) (int64, error) {
	out, err := os.Create(dst)
	if err != nil {
		return 0, err
	}
	w := bufio.NewWriterSize(out, 1<<20)
	var total int64
	for k := 1; k <= max(copies, 1); k++ {
		n, err := copyCorpus(src, w, k, copies > 1)
		total += n
		if err != nil {
			out.Close()
			return 0, err
		}
	}
	return total, errors.Join(w.Flush(), out.Close())
}

// copyCorpus writes copy k of the mbox src to w: as it is, or with
// distinct set, with an "X-Copy: k" header after every From_ line and
// ".ck" added to every Message-ID, so that each copy's messages differ
// from every other copy's (digest and Message-ID).
func copyCorpus(src string, w *bufio.Writer, k int, distinct bool) (int64, error) {
	f, err := os.Open(src)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	var r io.Reader = bufio.NewReader(f)
	if strings.HasSuffix(src, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return 0, err
		}
		r = zr
	}
	if !distinct {
		return io.Copy(w, r)
	}
	br := bufio.NewReaderSize(r, 1<<20)
	var n int64
	prevEmpty := true
	for {
		line, err := br.ReadString('\n')
		if line != "" {
			switch {
			case prevEmpty && strings.HasPrefix(line, "From "):
				line += fmt.Sprintf("X-Copy: %d\n", k)
			case len(line) > 11 && strings.EqualFold(line[:11], "message-id:"):
				line = strings.Replace(line, ">", fmt.Sprintf(".c%d>", k), 1)
			}
			prevEmpty = line == "\n"
			m, _ := w.WriteString(line)
			n += int64(m)
		}
		if errors.Is(err, io.EOF) {
			return n, nil
		}
		if err != nil {
			return n, err
		}
	}
}

// bareLoop is the floor: split the mbox with the same reader, put each raw
// message under a sequential key, commit every 1,000 messages.
func bareLoop(in, out string) error {
	f, err := os.Open(in)
	if err != nil {
		return err
	}
	defer f.Close()
	db, err := bolt.Open(out, 0o600, nil)
	if err != nil {
		return err
	}
	defer db.Close()
	rd := mbox.NewReader(f, mbox.Options{Name: in, Format: mbox.FormatMboxrd})
	var n int
	var write time.Duration
	batch := make([][]byte, 0, 1000)
	flush := func() error {
		start := time.Now()
		err := db.Update(func(tx *bolt.Tx) error {
			b, err := tx.CreateBucketIfNotExists([]byte("messages"))
			if err != nil {
				return err
			}
			b.FillPercent = 1.0
			var k [8]byte
			for _, raw := range batch {
				n++
				binary.BigEndian.PutUint64(k[:], uint64(n))
				if err := b.Put(k[:], raw); err != nil {
					return err
				}
			}
			return nil
		})
		write += time.Since(start)
		batch = batch[:0]
		return err
	}
	for {
		m, err := rd.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return err
		}
		batch = append(batch, m.Raw)
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return err
			}
		}
	}
	if err := flush(); err != nil {
		return err
	}
	return json.NewEncoder(os.Stdout).Encode(struct {
		Messages  int
		WriteOnly time.Duration
	}{n, write})
}

// boltFigures are the bbolt import's, for the Riak comparison.
type boltFigures struct {
	messages int
	msgPerS  float64
	cpu      time.Duration // the importer's, user + system
	input    int64         // bytes of the decompressed mbox
}

// msPer is d in milliseconds per message.
func msPer(d time.Duration, msgs int) float64 {
	return float64(d.Microseconds()) / 1000 / float64(msgs)
}

// compareRiak imports plain into a Riak node, a fresh archive per round,
// and prints msg/s beside the bbolt import's and the store's requests per
// message.
func compareRiak(tmp, plain, importer string, rounds int, addr, kit string, bolt boltFigures) error {
	fmt.Println()
	var node *riaktest.Node
	if addr == "" {
		if kit == "" {
			var err error
			if kit, err = riaktest.Kit(); err != nil {
				fmt.Printf("Riak: skipped: no node to import into (%v); pass --riak host:8087 or put the Riak test kit in ../shared/riak\n", err)
				return nil
			}
		}
		dir, err := riaktest.NewDir()
		if err != nil {
			return err
		}
		defer os.RemoveAll(dir)
		fmt.Fprintln(os.Stderr, "importbench: starting a Riak node from", kit)
		n, err := riaktest.Start(kit, dir, "--strong-consistency")
		if err != nil {
			return err
		}
		defer n.Stop()
		addr, node = n.PB, n
	}
	// Riak's leveled backend compresses every value it receives, by
	// default: values the store has compressed already, for nothing. The
	// README recommends compressing them only when the journal is
	// compacted; when this tool started the node, it measures both.
	configs := []struct {
		name     string
		settings map[string]string
	}{{"the node as the kit starts it (leveled compresses on receipt)", nil}}
	if node != nil {
		configs = append(configs, struct {
			name     string
			settings map[string]string
		}{"the node as the README recommends (leveled.compression_point = on_compact)", map[string]string{"leveled.compression_point": "on_compact"}})
	}
	for i, c := range configs {
		if c.settings != nil {
			fmt.Fprintln(os.Stderr, "importbench: restarting the Riak node with", c.settings)
			if err := node.Configure(c.settings); err != nil {
				return err
			}
		}
		if err := riakRounds(tmp, plain, importer, rounds, addr, node, bolt, fmt.Sprint(i), c.name); err != nil {
			return err
		}
	}
	return nil
}

// riakRounds imports plain into the node at addr rounds times, each into
// a fresh archive, and prints the median run.
func riakRounds(tmp, plain, importer string, rounds int, addr string, node *riaktest.Node, bolt boltFigures, tagSuffix, config string) error {
	tag := fmt.Sprintf("bench-%d-%s", time.Now().UnixNano(), tagSuffix)
	type riakRun struct {
		result
		requests int64
		// bytes of all values the store wrote, and of its packs and large
		// messages' objects among them (one replica's worth), and what
		// the archive keeps of those (a pack written again counted once)
		bytes, messageBytes, kept int64
		nodeCPU                   time.Duration // of the node, when this tool started it
		importerCPU               time.Duration // user + system
	}
	var runs []riakRun
	for i := range rounds {
		data := filepath.Join(tmp, fmt.Sprint("riak", tagSuffix, "-", i))
		url := fmt.Sprintf("riak://%s/%s-%d", addr, tag, i)
		cmd := exec.Command(importer, "--data", data, "--store", url, "--log-level", "debug", "--log-format", "json", plain)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		var cpu0 time.Duration
		if node != nil {
			cpu0, _ = node.CPU()
		}
		start := time.Now()
		if err := cmd.Run(); err != nil {
			return fmt.Errorf("importer: %v: %s", err, lastLines(stderr.String(), 5))
		}
		r := riakRun{result: result{wall: time.Since(start)}}
		if node != nil {
			cpu1, _ := node.CPU()
			r.nodeCPU = cpu1 - cpu0
		}
		if ru, ok := cmd.ProcessState.SysUsage().(*syscall.Rusage); ok {
			r.maxRSS = ru.Maxrss * 1024
		}
		r.importerCPU = cmd.ProcessState.UserTime() + cmd.ProcessState.SystemTime()
		for _, l := range strings.Split(stderr.String(), "\n") {
			var rec struct {
				Msg          string
				Requests     int64
				Bytes        int64
				MessageBytes int64 `json:"message_bytes"`
				Kept         int64 `json:"message_bytes_kept"`
			}
			if json.Unmarshal([]byte(l), &rec) == nil && rec.Msg == "riak store closed" {
				r.requests += rec.Requests
				r.bytes += rec.Bytes
				r.messageBytes += rec.MessageBytes
				r.kept += rec.Kept
			}
		}
		runs = append(runs, r)
	}
	slices.SortFunc(runs, func(a, b riakRun) int { return int(a.wall - b.wall) })
	m := runs[len(runs)/2]
	msgs := bolt.messages
	fmt.Printf("\nRiak: one node at %s (n_val 3), %s, a fresh archive per run, median of %d runs\n\n", addr, config, rounds)
	fmt.Printf("%-28s %10s %9s %12s %14s %16s %20s %16s\n", "", "msg/s", "wall s", "peak RSS MB", "requests/msg", "node CPU ms/msg", "importer CPU ms/msg", "both ms/msg")
	fmt.Printf("%-28s %10.0f %9s %12s %14s %16s %20.3f %16.3f\n", "importer into bbolt", bolt.msgPerS, "", "", "-", "-", msPer(bolt.cpu, msgs), msPer(bolt.cpu, msgs))
	cpu, both := "-", "-"
	if node != nil {
		cpu = fmt.Sprintf("%.3f", msPer(m.nodeCPU, msgs))
		both = fmt.Sprintf("%.3f", msPer(m.nodeCPU+m.importerCPU, msgs))
	}
	fmt.Printf("%-28s %10.0f %9.2f %12.1f %14.3f %16s %20.3f %16s\n", "importer into Riak", float64(msgs)/m.wall.Seconds(), m.wall.Seconds(), float64(m.maxRSS)/1e6, float64(m.requests)/float64(msgs), cpu,
		msPer(m.importerCPU, msgs), both)
	fmt.Printf("\nRiak: %.0f msg/s, %.0f%% of bbolt's msg/s (target: >= 1,000 msg/s into one local node; public-inbox: 917 msg/s into git); node and importer together %s ms of CPU per message (target <= 2), bbolt's importer %.3f\n",
		float64(msgs)/m.wall.Seconds(), 100*float64(msgs)/m.wall.Seconds()/bolt.msgPerS, both, msPer(bolt.cpu, msgs))
	fmt.Printf("Riak values written: %.3f bytes per input byte (packs and large messages %.3f; one replica's worth, rewrites of a pack counted each time)\n",
		float64(m.bytes)/float64(bolt.input), float64(m.messageBytes)/float64(bolt.input))
	fmt.Printf("Riak messages kept: %.3f bytes per input byte (the packs and large messages' objects as the archive holds them, one replica's worth; target <= 0.40)\n",
		float64(m.kept)/float64(bolt.input))
	return nil
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(lines[max(0, len(lines)-n):], "\n")
}
