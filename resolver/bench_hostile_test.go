package resolver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/http/httptest"
	"net/url"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
	"github.com/chibrary/chibrary/store/boltstore"
)

// hostileArchive is an ordinary list of 200 threads of 5 messages with
// the costly messages of package hostile in it (each beside an ordinary
// reply, the baseline), and its catalog.
func hostileArchive(b *testing.B) (*archive, *catalog.Catalog, map[string]string) {
	a := newArchive(b, boltstore.Options{})
	threads := hostile.Threads(200, 4)
	var ids []string
	for _, m := range threads {
		a.put(b, m.Raw(), "hostile")
		ids = append(ids, m.MessageID)
	}
	cns := map[string]string{}
	for _, m := range []hostile.Message{
		hostile.Ordinary("ordinary", "thread-0-4@hostile.test", 2000),
		hostile.ManyReferences(hostile.ManyReferencesCount),
		hostile.NamesAll(ids, 2001),
		hostile.SoftBreaks(hostile.SoftBreaksSize),
		hostile.BigAttachment(hostile.BigAttachmentSize),
		hostile.BigPatch(hostile.BigPatchSize),
	} {
		cns[m.Name] = a.put(b, m.Raw(), "hostile").String()
	}
	c := openTestCatalog(b)
	if _, err := c.Sync(b.Context(), a.st, catalog.SyncOptions{}); err != nil {
		b.Fatal(err)
	}
	return a, c, cns
}

// hostileMessages are the messages BenchmarkHostile measures, the
// ordinary one first.
var hostileMessages = []string{"ordinary", "many-references", "names-all", "soft-breaks", "big-attachment", "big-patch"}

// BenchmarkHostile measures the CPU time of each page of the costly
// messages of package hostile (its message page, its thread page and
// their JSON twins), beside an ordinary reply in an ordinary thread:
// every request rendered (no page cache), one at a time, in process.
func BenchmarkHostile(b *testing.B) {
	a, c, cns := hostileArchive(b)
	s := New(a.st, Options{Catalogs: keeper.Fixed(c), SpoolDir: b.TempDir()})
	s.cache, s.messages = nil, nil
	routes := []struct{ name, path string }{
		{"page", "/%s"},
		{"thread", "/t/%s/"},
		{"message-json", "/api/v1/messages/%s"},
		{"thread-json", "/api/v1/threads/%s"},
	}
	for _, m := range hostileMessages {
		for _, rt := range routes {
			path := fmt.Sprintf(rt.path, cns[m])
			b.Run(m+"/"+rt.name, func(b *testing.B) {
				cpu0 := cpuTime()
				b.ResetTimer()
				for range b.N {
					w := httptest.NewRecorder()
					s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
					if w.Code != http.StatusOK {
						b.Fatalf("GET %s = %d", path, w.Code)
					}
				}
				b.StopTimer()
				b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/req")
			})
		}
	}
}

// BenchmarkSlowReaders has 10 clients download the 44 MB attachment of
// "big-attachment" (and its 60 MB message) over loopback, reading 1 MiB
// every 100 ms, and reports the process's peak resident memory while
// they do, beside what it was before they started.
func BenchmarkSlowReaders(b *testing.B) {
	a, c, cns := hostileArchive(b)
	for _, path := range []string{"/" + cns["big-attachment"] + "/attachments/0/big.bin", "/" + cns["big-attachment"] + "/raw"} {
		name := "attachment"
		if strings.HasSuffix(path, "/raw") {
			name = "raw"
		}
		b.Run(name, func(b *testing.B) {
			srv := httptest.NewServer(New(a.st, Options{Catalogs: keeper.Fixed(c), SpoolDir: b.TempDir()}))
			defer srv.Close()
			var peak, base int64
			for range b.N {
				runtime.GC()
				debug.FreeOSMemory()
				base = metrictest.RSS()
				stopSampling := metrictest.SampleRSS()
				var wg sync.WaitGroup
				for range 10 {
					wg.Go(func() {
						resp, err := http.Get(srv.URL + path)
						if err != nil {
							b.Error(err)
							return
						}
						defer resp.Body.Close()
						for {
							if _, err := io.CopyN(io.Discard, resp.Body, 1<<20); err != nil {
								if err != io.EOF {
									b.Error(err)
								}
								return
							}
							time.Sleep(100 * time.Millisecond)
						}
					})
				}
				wg.Wait()
				peak = max(peak, stopSampling())
			}
			b.ReportMetric(float64(base)/(1<<20), "rss-before-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MiB")
		})
	}
}

// BenchmarkHostileSearch measures, on the shared corpus, the CPU time of
// the costliest searches a reader may type (a phrase of MaxQueryWords
// one-letter words, and the phrase of 499 that is refused) beside a
// one-word search; then the latency of list and thread pages (rendered,
// no page cache) asked for at a steady pageRate, alone and while 4
// clients search the costliest phrase without pause.
func BenchmarkHostileSearch(b *testing.B) {
	a, c, _ := corpusArchive(b)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	s := New(a.st, Options{Catalogs: keeper.Fixed(c)})
	s.cache, s.texts = nil, nil
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	defer func() { stop(); <-done }()
	base := "http://" + ln.Addr().String()

	worst := hostile.LongPhrase(catalog.MaxQueryWords)
	for _, q := range []struct{ name, query string }{
		{"word", "cache"},
		{"phrase-32", worst},
		{"phrase-499", hostile.LongPhrase(hostile.LongPhraseWords)},
	} {
		b.Run("search/"+q.name, func(b *testing.B) {
			u := base + "/search?q=" + url.QueryEscape(q.query)
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				resp, err := http.Get(u)
				if err != nil {
					b.Fatal(err)
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				if resp.StatusCode != http.StatusOK && resp.StatusCode != http.StatusBadRequest {
					b.Fatalf("GET %s = %d", u, resp.StatusCode)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/req")
		})
	}

	threads, _, err := c.Threads(ctx, "linux-mips", 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	pages := (len(threads) + threadsPerPage - 1) / threadsPerPage
	page := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return "/l/linux-mips/?page=" + strconv.Itoa(1+r.IntN(pages))
		}
		return "/t/" + threads[r.IntN(len(threads))].Root.CallNumber + "/"
	}
	for _, searching := range []bool{false, true} {
		name := "pages"
		if searching {
			name += "/4-hostile-searches"
		}
		b.Run(name, func(b *testing.B) {
			var searches atomic.Int64
			sctx, stopSearches := context.WithCancel(ctx)
			var wg sync.WaitGroup
			if searching {
				for range 4 {
					wg.Go(func() {
						u := base + "/search?q=" + url.QueryEscape(worst)
						for sctx.Err() == nil {
							req, _ := http.NewRequestWithContext(sctx, "GET", u, nil)
							if resp, err := http.DefaultClient.Do(req); err == nil {
								io.Copy(io.Discard, resp.Body)
								resp.Body.Close()
								searches.Add(1)
							}
						}
					})
				}
			}
			lat, failed, elapsed := paceURLs(b, base, page, pageRate)
			stopSearches()
			wg.Wait()
			reportLatency(b, lat, failed, elapsed, true)
			if searching {
				b.ReportMetric(float64(searches.Load())/elapsed.Seconds(), "searches/s")
			}
		})
	}
}

// pageRate is the pages a second BenchmarkHostileSearch asks for: about
// a third of what 2 CPUs serve.
const pageRate = 200

// paceURLs sends b.N requests at rate a second, each on its own, whether
// or not the ones before are answered (so that a slow server does not
// slow the load down), and returns their latencies as loadURLs does.
func paceURLs(b *testing.B, base string, url func(*rand.Rand) string, rate int) ([]time.Duration, int64, time.Duration) {
	tr := &http.Transport{MaxIdleConns: 64, MaxIdleConnsPerHost: 64, DisableCompression: true}
	defer tr.CloseIdleConnections()
	client := &http.Client{Transport: tr, Timeout: time.Minute}
	lat := make([]time.Duration, b.N)
	var failed atomic.Int64
	var wg sync.WaitGroup
	rng := rand.New(rand.NewPCG(1, 11))
	tick := time.NewTicker(time.Second / time.Duration(rate))
	defer tick.Stop()
	b.ResetTimer()
	start := time.Now()
	for i := range b.N {
		<-tick.C
		u := base + url(rng)
		wg.Go(func() {
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
		})
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	return lat, failed.Load(), elapsed
}
