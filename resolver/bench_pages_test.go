package resolver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
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
		s := New(a.st, Options{Catalog: c, Follow: &catalog.FollowOptions{}})
		if !cache {
			s.cache = nil
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

	for _, mode := range []string{"", "/nocache", "/writer"} {
		writer := mode == "/writer"
		base := cachedBase
		if mode == "/nocache" {
			base = uncachedBase
		}
		for _, route := range routes {
			name := route.name + mode
			b.Run(name, func(b *testing.B) {
				var w *exec.Cmd
				var wout strings.Builder
				var wstdin io.WriteCloser
				if writer {
					w = exec.Command(os.Args[0], "-test.run=^$")
					w.Env = append(os.Environ(), writerEnv+"="+a.path,
						writerRunEnv+"="+strconv.Itoa(int(2+1000*writerRuns.Add(1))))
					w.Stdout, w.Stderr = &wout, os.Stderr
					var err error
					if wstdin, err = w.StdinPipe(); err != nil {
						b.Fatal(err)
					}
					if err := w.Start(); err != nil {
						b.Fatal(err)
					}
					time.Sleep(200 * time.Millisecond) // let it start writing
				}
				lat, failed, elapsed := loadURLs(b, base, route.url, 32)
				if writer {
					wstdin.Close()
					if err := w.Wait(); err != nil {
						b.Fatalf("writer: %v", err)
					}
					var written, batches, worst int64
					fmt.Sscan(wout.String(), &written, &batches, &worst)
					b.ReportMetric(float64(written)/elapsed.Seconds(), "writer-msg/s")
				}
				if failed > 0 {
					b.Errorf("%d of %d requests failed", failed, len(lat))
				}
				slices.Sort(lat)
				b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
				b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
				b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
				b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
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
			srv, _ := serveWith(b, a.st, Options{Catalog: c})
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

// BenchmarkSearch measures /search on the shared corpus from 16 concurrent
// clients on loopback, for one-word, two-word, phrase and from: queries
// (the first page of 20 results, newest first, each with its excerpt cut
// from the stored message), with nothing writing.
func BenchmarkSearch(b *testing.B) {
	a, c, _ := corpusArchive(b)
	kinds := []struct {
		name    string
		queries []string
	}{
		{"word", []string{"cache", "kernel", "thanks", "tlb", "octeon"}},
		{"two-words", []string{"indy cache", "kernel panic", "r4000 tlb", "linux patch"}},
		{"phrase", []string{`"secondary cache"`, `"kernel panic"`, `"cross compiler"`, `"works for me"`}},
		{"from", []string{"from:ralf", "from:macro", "from:linux-mips.org", "from:gmail"}},
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	sctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(a.st, Options{Catalog: c}).Serve(sctx, ln) }()
	defer func() { stop(); <-done }()
	base := "http://" + ln.Addr().String()
	for _, k := range kinds {
		b.Run(k.name, func(b *testing.B) {
			lat, failed, elapsed := loadURLs(b, base, func(r *rand.Rand) string {
				return "/search?q=" + url.QueryEscape(k.queries[r.IntN(len(k.queries))])
			}, 16)
			if failed > 0 {
				b.Errorf("%d of %d requests failed", failed, len(lat))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
			b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
			b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
		})
	}
}
