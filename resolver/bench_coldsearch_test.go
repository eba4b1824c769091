package resolver

import (
	"context"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
)

// coldQueries are ordinary searches, as readers type them, that must fit
// the search budget (catalog.DefaultSearchTimeout) on a catalog just
// opened, beside a steady page load: two or three common words, a list:
// with a word, phrases of common words, a prefix.
var coldQueries = []string{
	"cache flush list:linux-mips",
	"kernel panic",
	"the kernel patch",
	`"the of and"`,
	`"this is a"`,
	"list:linux-mips patch",
	"cpu*",
	"s:mips d:20100101..",
}

// BenchmarkColdSearchBesidePages serves the shared corpus with the
// catalog as a server opens it (the default search budget), and in each
// round opens the catalog anew, as a server just started does (SQLite's
// page cache empty; with CHIBRARY_BENCH_DROP_CACHES=1, run as root, the
// kernel's page cache dropped too, for the whole machine: see
// "os-cache-dropped")
// and sends every ordinary query of coldQueries once, two at a time,
// while list and thread pages are asked for at pageRate. It reports the
// searches' p50 and p99, the share answered 503 (the machine too busy:
// Retry-After) and 400 (the query refused as too costly), both of which
// should be zero, and the pages' p99 meanwhile.
func BenchmarkColdSearchBesidePages(b *testing.B) {
	a, built, _ := corpusArchive(b)
	path := built.Path()
	threads, _, err := built.Threads(b.Context(), "linux-mips", 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	if err := built.Close(); err != nil {
		b.Fatal(err)
	}
	pages := (len(threads) + threadsPerPage - 1) / threadsPerPage
	page := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return "/l/linux-mips/?page=" + strconv.Itoa(1+r.IntN(pages))
		}
		return "/t/" + threads[r.IntN(len(threads))].Root.CallNumber + "/"
	}
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64, DisableCompression: true}, Timeout: time.Minute}
	get := func(ctx context.Context, u string) (int, time.Duration) {
		t0 := time.Now()
		req, _ := http.NewRequestWithContext(ctx, "GET", u, nil)
		resp, err := client.Do(req)
		if err != nil {
			return 0, time.Since(t0)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode, time.Since(t0)
	}

	var searchLat, pageLat []time.Duration
	status := map[int]int{}
	dropped := 0
	b.ResetTimer()
	for done := 0; done < b.N; {
		b.StopTimer()
		if os.Getenv("CHIBRARY_BENCH_DROP_CACHES") == "1" && os.WriteFile("/proc/sys/vm/drop_caches", []byte("1"), 0) == nil {
			dropped = 1
		}
		c, err := catalog.Open(b.Context(), path, catalog.Options{ReadOnly: true})
		if err != nil {
			b.Fatal(err)
		}
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			b.Fatal(err)
		}
		ctx, stop := context.WithCancel(b.Context())
		s := New(a.st, Options{Catalogs: keeper.Fixed(c)})
		s.cache, s.texts = nil, nil
		served := make(chan error, 1)
		go func() { served <- s.Serve(ctx, ln) }()
		base := "http://" + ln.Addr().String()
		b.StartTimer()

		// The page load, at pageRate, each request on its own.
		var mu sync.Mutex
		var load sync.WaitGroup
		lctx, stopLoad := context.WithCancel(ctx)
		load.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(done), 7))
			tick := time.NewTicker(time.Second / pageRate)
			defer tick.Stop()
			var each sync.WaitGroup
			defer each.Wait()
			for {
				select {
				case <-lctx.Done():
					return
				case <-tick.C:
				}
				u := base + page(rng)
				each.Go(func() {
					code, d := get(ctx, u)
					if code == http.StatusOK {
						mu.Lock()
						pageLat = append(pageLat, d)
						mu.Unlock()
					}
				})
			}
		})
		time.Sleep(200 * time.Millisecond) // the load under way

		// Every query once, two at a time, until b.N searches are done.
		next := make(chan string)
		var searchers sync.WaitGroup
		for range 2 {
			searchers.Go(func() {
				for q := range next {
					code, d := get(ctx, base+"/search?q="+url.QueryEscape(q))
					mu.Lock()
					searchLat = append(searchLat, d)
					status[code]++
					mu.Unlock()
				}
			})
		}
		for _, q := range coldQueries {
			if done == b.N {
				break
			}
			next <- q
			done++
		}
		close(next)
		searchers.Wait()
		stopLoad()
		load.Wait()

		b.StopTimer()
		stop()
		<-served
		c.Close()
		b.StartTimer()
	}
	b.StopTimer()
	slices.Sort(searchLat)
	slices.Sort(pageLat)
	n := float64(len(searchLat))
	b.ReportMetric(float64(searchLat[len(searchLat)/2])/1e6, "search-p50-ms")
	b.ReportMetric(float64(searchLat[len(searchLat)*99/100])/1e6, "search-p99-ms")
	b.ReportMetric(float64(status[http.StatusServiceUnavailable])/n, "503-share")
	b.ReportMetric(float64(status[http.StatusBadRequest])/n, "400-share")
	if len(pageLat) > 0 {
		b.ReportMetric(float64(pageLat[len(pageLat)*99/100])/1e6, "pages-p99-ms")
	}
	b.ReportMetric(float64(dropped), "os-cache-dropped")
	if other := int(n) - status[http.StatusOK] - status[http.StatusServiceUnavailable] - status[http.StatusBadRequest]; other > 0 {
		b.Errorf("%d of %d searches failed otherwise (%v)", other, int(n), status)
	}
}
