package resolver

import (
	"context"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// BenchmarkPages measures the list, month and thread pages (HTML) on the
// shared corpus from 32 concurrent clients on loopback, each request for
// a random page, month or thread: with nothing writing, with the page
// cache (as served) and without it (every page rendered), and while
// another process puts 100-message batches into the same bolt file as
// fast as it can and the server's follower indexes them into the catalog
// (which changes the catalog, and so empties the cache, every half
// second).
func BenchmarkPages(b *testing.B) {
	a, c, _ := corpusArchive(b)
	benchPages(b, a.st, c, a.path)
}

// BenchmarkPagesScaled is BenchmarkPages on the archive of
// BenchmarkSearchScaled, the size of the whole linux-mips list (84,096
// messages: 16 times the threads, list pages and messages per month),
// with nothing writing. It runs only with CHIBRARY_BENCH_SCALED=1.
func BenchmarkPagesScaled(b *testing.B) {
	if os.Getenv("CHIBRARY_BENCH_SCALED") == "" {
		b.Skip("set CHIBRARY_BENCH_SCALED=1 to build the 84k-message archive")
	}
	st, c := scaledArchive(b)
	benchPages(b, st, c, "")
}

// benchPages serves st and c and sends b.N requests of each kind of page
// from 32 clients: cached, not cached, and (with boltPath, the store's
// file) while another process writes into it.
func benchPages(b *testing.B, st store.Store, c *catalog.Catalog, boltPath string) {
	ctx := context.Background()
	threads, _, err := c.Threads(ctx, "linux-mips", 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	months, err := c.Months(ctx, "linux-mips")
	if err != nil {
		b.Fatal(err)
	}
	pages := (len(threads) + threadsPerPage - 1) / threadsPerPage
	routes := []struct {
		name string
		url  func(*rand.Rand) string
	}{
		{"list", func(r *rand.Rand) string { return "/l/linux-mips/?page=" + strconv.Itoa(1+r.IntN(pages)) }},
		{"month", func(r *rand.Rand) string {
			m := months[r.IntN(len(months))]
			return fmt.Sprintf("/l/linux-mips/%04d-%02d/", m.Year, m.Month)
		}},
		{"thread", func(r *rand.Rand) string { return "/t/" + threads[r.IntN(len(threads))].Root.CallNumber + "/" }},
	}
	serve := func(cache bool) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sctx, stop := context.WithCancel(ctx)
		done := make(chan error, 1)
		s := New(st, Options{Catalogs: following(b, st, c, catalog.FollowOptions{}, nil)})
		if !cache {
			s.cache, s.messages = nil, nil
		}
		go func() { done <- s.Serve(sctx, ln) }()
		return "http://" + ln.Addr().String(), func() {
			stop()
			<-done
		}
	}
	cachedBase, stopCached := serve(true)
	defer stopCached()
	uncachedBase, stopUncached := serve(false)
	defer stopUncached()
	b.Logf("%d threads on %d list pages, %d months", len(threads), pages, len(months))

	modes := []string{"", "/nocache", "/writer"}
	if boltPath == "" {
		modes = modes[:2]
	}
	for _, mode := range modes {
		writer := mode == "/writer"
		base := cachedBase
		if mode == "/nocache" {
			base = uncachedBase
		}
		for _, route := range routes {
			name := route.name + mode
			b.Run(name, func(b *testing.B) {
				var w *benchWriterProc
				if writer {
					w = startBenchWriter(b, boltPath)
				}
				lat, failed, elapsed := loadURLs(b, base, route.url, 32)
				if writer {
					w.stop(b, elapsed, false)
				}
				reportLatency(b, lat, failed, elapsed, true)
			})
		}
	}
}

// loadURLs sends b.N requests for the paths url picks from clients
// goroutines and returns each request's latency, the number that failed
// (an error or a status other than 200) and the time taken.
func loadURLs(b *testing.B, base string, url func(*rand.Rand) string, clients int) ([]time.Duration, int64, time.Duration) {
	tr := &http.Transport{MaxIdleConns: clients * 2, MaxIdleConnsPerHost: clients * 2, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	lat := make([]time.Duration, b.N)
	var next, failed atomic.Int64
	var wg sync.WaitGroup
	b.ResetTimer()
	start := time.Now()
	for c := range clients {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(c), 11))
			for {
				i := next.Add(1) - 1
				if i >= int64(b.N) {
					return
				}
				u := base + url(rng)
				t0 := time.Now()
				resp, err := client.Get(u)
				if err == nil {
					_, err = io.Copy(io.Discard, resp.Body)
					resp.Body.Close()
					if err == nil && resp.StatusCode != http.StatusOK {
						err = fmt.Errorf("status %d", resp.StatusCode)
					}
				}
				lat[i] = time.Since(t0)
				if err != nil && failed.Add(1) <= 3 {
					b.Logf("GET %s: %v", u, err)
				}
			}
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return lat, failed.Load(), elapsed
}

// BenchmarkMonthMbox streams months of growing size as mbox.gz and
// reports the peak growth of the live heap beside the month's size: it
// stays flat while the month grows.
func BenchmarkMonthMbox(b *testing.B) {
	for _, mib := range []int{8, 32, 128} {
		b.Run(strconv.Itoa(mib)+"MiB", func(b *testing.B) {
			const size = 256 << 10
			a := newArchive(b, boltstore.Options{})
			putBigMonth(b, a, mib<<20/size, size)
			c := openTestCatalog(b)
			if _, err := c.Sync(context.Background(), a.st, catalog.SyncOptions{}); err != nil {
				b.Fatal(err)
			}
			srv, _ := serveWith(b, a.st, Options{Catalogs: keeper.Fixed(c)})
			var peak int64
			var n int
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				p, m := downloadPeakHeap(b, srv.URL+"/l/big/2024-02.mbox.gz")
				peak, n = max(peak, p), m
			}
			elapsed := time.Since(start)
			b.ReportMetric(float64(mib), "month-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(n)*float64(b.N)/elapsed.Seconds()/(1<<20), "MiB/s")
		})
	}
}

// searchKinds are the queries the search benchmarks send, by kind (the
// catalog's search benchmarks time the same ones).
var searchKinds = []struct {
	name    string
	queries []string
}{
	{"word", []string{"cache", "kernel", "thanks", "tlb", "octeon"}},
	{"two-words", []string{"indy cache", "kernel panic", "r4000 tlb", "linux patch"}},
	{"phrase", []string{`"secondary cache"`, `"kernel panic"`, `"cross compiler"`, `"works for me"`}},
	{"from", []string{"from:ralf", "from:macro", "from:linux-mips.org", "from:gmail"}},
}

// BenchmarkSearch measures /search on the shared corpus from 16 concurrent
// clients on loopback, for one-word, two-word, phrase and from: queries
// (the first page of 20 results, newest first, each with its excerpt cut
// from the stored message), with nothing writing.
func BenchmarkSearch(b *testing.B) {
	a, c, _ := corpusArchive(b)
	benchSearch(b, a.st, c)
}

// BenchmarkSearchScaled is BenchmarkSearch on an archive the size of the
// whole linux-mips list: the sample 16 times over with distinct
// Message-IDs (testcorpus.WriteScaled), 84,096 messages, so that every
// query matches 16 times as many messages. Building it takes a few
// minutes, so it runs only with CHIBRARY_BENCH_SCALED=1 (make bench sets
// it); CHIBRARY_BENCH_SCALED_DIR keeps the archive and its catalog in
// that directory and reuses them in later runs.
func BenchmarkSearchScaled(b *testing.B) {
	if os.Getenv("CHIBRARY_BENCH_SCALED") == "" {
		b.Skip("set CHIBRARY_BENCH_SCALED=1 to build the 84k-message archive")
	}
	st, c := scaledArchive(b)
	benchSearch(b, st, c)
}

// benchSearch serves st and c and sends b.N searches of each kind from 16
// clients: first with every excerpt cut from the message fetched from
// the store and parsed ("word": the text cache off, as on a first
// search), then as served ("word-cached": the text cache on, which these
// few queries soon fill with every message they show).
func benchSearch(b *testing.B, st store.Store, c *catalog.Catalog) {
	serve := func(texts bool) (string, func()) {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		sctx, stop := context.WithCancel(context.Background())
		done := make(chan error, 1)
		s := New(st, Options{Catalogs: keeper.Fixed(c)})
		if !texts {
			s.texts = nil
		}
		go func() { done <- s.Serve(sctx, ln) }()
		return "http://" + ln.Addr().String(), func() { stop(); <-done }
	}
	cold, stopCold := serve(false)
	defer stopCold()
	cached, stopCached := serve(true)
	defer stopCached()
	for _, mode := range []string{"", "-cached"} {
		base := cold
		if mode != "" {
			base = cached
		}
		for _, k := range searchKinds {
			benchSearchKind(b, base, k.name+mode, k.queries)
		}
	}
}

func benchSearchKind(b *testing.B, base, name string, queries []string) {
	b.Run(name, func(b *testing.B) {
		cpu0 := cpuTime()
		lat, failed, elapsed := loadURLs(b, base, func(r *rand.Rand) string {
			return "/search?q=" + url.QueryEscape(queries[r.IntN(len(queries))])
		}, 16)
		// Server and clients share this process: CPU time per request,
		// which other processes on the machine hardly change.
		b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(len(lat)), "cpu-ms/req")
		reportLatency(b, lat, failed, elapsed, false)
	})
}

// scaledArchive stores testcorpus.WriteScaled's 84,096 messages in a bolt
// store (in runs of callnumber.MaxSequence+1 messages) and rebuilds a
// catalog of them, as resolver reindex does; in CHIBRARY_BENCH_SCALED_DIR,
// if set, where an archive built earlier is reused.
func scaledArchive(b *testing.B) (store.Store, *catalog.Catalog) {
	dir := os.Getenv("CHIBRARY_BENCH_SCALED_DIR")
	if dir == "" {
		dir = b.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.Fatal(err)
	}
	ctx := b.Context()
	path, cat := filepath.Join(dir, "messages.db"), filepath.Join(dir, "catalog.db")
	_, err := os.Stat(cat)
	built := err == nil
	if !built {
		os.Remove(path)
	}
	st, err := boltstore.Open(ctx, path, boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { st.Close() })
	if !built {
		start := time.Now()
		n := putScaled(b, st)
		b.Logf("stored %d messages in %v", n, time.Since(start).Round(time.Millisecond))
		start = time.Now()
		if _, err := catalog.Rebuild(ctx, cat, st, catalog.SyncOptions{}, catalog.Options{}); err != nil {
			b.Fatal(err)
		}
		b.Logf("rebuilt the catalog in %v", time.Since(start).Round(time.Millisecond))
	}
	c, err := catalog.Open(ctx, cat, catalog.Options{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	return st, c
}

// putScaled stores the scaled corpus in st and returns how many messages
// it stored.
func putScaled(b *testing.B, st store.Store) int {
	ctx := b.Context()
	codec, err := callnumber.NewCodec(shuffle.Bits, testKey)
	if err != nil {
		b.Fatal(err)
	}
	corpus := testcorpus.Path(b)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(testcorpus.WriteScaled(pw, corpus, testcorpus.ScaledCopies)) }()
	defer pr.Close()
	r := mbox.NewReader(pr, mbox.Options{Name: "scaled corpus"})
	run, seq, stored := uint32(0), callnumber.MaxSequence+1, 0
	var batch []store.Message
	flush := func() {
		if _, err := st.Put(ctx, batch); err != nil {
			b.Fatal(err)
		}
		stored += len(batch)
		batch = batch[:0]
	}
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		if seq > callnumber.MaxSequence {
			if len(batch) > 0 {
				flush()
			}
			run, seq = run+1, 0
			if err := st.RecordLease(ctx, testLease(run)); err != nil {
				b.Fatal(err)
			}
		}
		n, err := codec.Encode(callnumber.Fields{Run: run, Sequence: uint16(seq)})
		if err != nil {
			b.Fatal(err)
		}
		seq++
		meta, _ := mailmsg.Parse(m.Raw)
		batch = append(batch, store.Message{Number: n, Raw: m.Raw, Digest: store.DigestOf(m.Raw), MessageID: meta.MessageID, List: "linux-mips"})
		if len(batch) == 1000 {
			flush()
		}
	}
	if len(batch) > 0 {
		flush()
	}
	return stored
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkMessagePage compares a message's page, in its thread, with the
// message's raw bytes: one client asks for both, in a random order, for
// b.N random messages of the corpus (cold: the first time), and at once
// again (cached: as a message many readers follow a link to). It reports
// the median of each and their ratio, page/raw.
func BenchmarkMessagePage(b *testing.B) {
	a, c, raws := corpusArchive(b)
	numbers := slices.Sorted(maps.Keys(raws))
	srv := httptest.NewServer(New(a.st, Options{Catalogs: keeper.Fixed(c)}))
	defer srv.Close()
	client := &http.Client{Timeout: time.Minute}
	fetch := func(path string) time.Duration {
		start := time.Now()
		resp, err := client.Get(srv.URL + path)
		if err != nil {
			b.Fatal(err)
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err != nil || resp.StatusCode != http.StatusOK {
			b.Fatalf("GET %s: %d, %v", path, resp.StatusCode, err)
		}
		return time.Since(start)
	}
	r := rand.New(rand.NewPCG(1, 2))
	picked := make([]string, b.N)
	for i := range picked {
		picked[i] = numbers[r.IntN(len(numbers))]
	}
	median := func(d []time.Duration) time.Duration {
		slices.Sort(d)
		return d[len(d)/2]
	}
	passes := []string{"cold", "cached"}
	raw, page := make([][]time.Duration, 2), make([][]time.Duration, 2)
	for p := range passes {
		raw[p], page[p] = make([]time.Duration, b.N), make([]time.Duration, b.N)
	}
	b.ResetTimer()
	for i, cn := range picked {
		for p := range passes {
			if r.IntN(2) == 0 {
				raw[p][i], page[p][i] = fetch("/"+cn+"/raw"), fetch("/"+cn)
			} else {
				page[p][i], raw[p][i] = fetch("/"+cn), fetch("/"+cn+"/raw")
			}
		}
	}
	for p, pass := range passes {
		rm, pm := median(raw[p]), median(page[p])
		b.ReportMetric(float64(rm.Microseconds()), pass+"-raw-µs")
		b.ReportMetric(float64(pm.Microseconds()), pass+"-page-µs")
		b.ReportMetric(float64(pm)/float64(rm), pass+"-page/raw")
	}
}
