package resolver

import (
	"crypto/sha256"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/store/boltstore"
)

// Without a base URL, a feed's links take the request's Host; one
// request with a hostile Host must not put that host into the feed other
// readers get from the page cache.
func TestFeedCacheKeyedByHost(t *testing.T) {
	ca := newCatalogArchive(t)
	evil := getHost(t, ca.srv.URL+"/l/demo/atom.xml", "evil.example")
	if evil.status != http.StatusOK || !strings.Contains(evil.body, "http://evil.example/") {
		t.Fatalf("feed for Host evil.example = %d, want 200 with its links:\n%s", evil.status, evil.body)
	}
	for range 2 {
		r := get(t, ca.srv.URL+"/l/demo/atom.xml")
		if r.status != http.StatusOK || strings.Contains(r.body, "evil.example") || !strings.Contains(r.body, ca.srv.URL+"/") {
			t.Fatalf("feed after a request with Host evil.example = %d:\n%s\nwant links to %s only", r.status, r.body, ca.srv.URL)
		}
	}
}

// getHost is get with another Host header.
func getHost(t *testing.T, url, host string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	req.Host = host
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// A search that takes more than the catalog gives one search is the
// machine's load as much as the query's: answered 503 with Retry-After
// on every search route (not 400, not 500, not logged as an error); a
// phrase of 499 one-letter words, what the query itself asks, is
// refused at once with a 400.
func TestSearchCost(t *testing.T) {
	ca := newCatalogArchive(t)
	cat, err := catalog.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{SearchTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Sync(t.Context(), ca.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, logs := serveWith(t, ca.st, Options{Catalogs: keeper.Fixed(cat)})
	for _, path := range []string{"/search?q=message", "/api/v1/search?q=message", "/search?x=m&q=message", "/search?q=s:message+AND+d:20000101.."} {
		r := get(t, srv.URL+path)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" || !strings.Contains(r.body, "try again") {
			t.Errorf("%s past its time = %d, Retry-After %q, want 503 with Retry-After saying to try again:\n%.400s", path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	r := get(t, srv.URL+"/search?q=nosuch:message")
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "nosuch: at character 1 is not a search prefix") {
		t.Errorf("a search with an unknown prefix = %d, want 400 naming it:\n%.400s", r.status, r.body)
	}
	r = get(t, ca.srv.URL+"/search?q="+url.QueryEscape(hostile.LongPhrase(hostile.LongPhraseWords)))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "more than 32 words") {
		t.Errorf("a phrase of 499 words = %d, want 400 saying more than 32 words:\n%.400s", r.status, r.body)
	}
	if l := logs.String() + ca.log.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("logs have ERROR lines:\n%s", l)
	}
}

// liveHeap is the heap in use after a collection.
func liveHeap() uint64 {
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// Ten readers of a 44 MB attachment and of its 60 MB message who read
// slowly hold no copy of it in memory each: the resolver writes what
// it serves from a file of its own (one for all of them), and its heap
// grows by far less than one copy per reader.
func TestSlowReadersOfLargeBodies(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	cn := a.put(t, hostile.BigAttachment(hostile.BigAttachmentSize).Raw(), "l").String()
	want := hostile.BigAttachment(hostile.BigAttachmentSize).Size()
	srv, _ := serveWith(t, a.st, Options{SpoolDir: t.TempDir()})
	att := make([]byte, hostile.BigAttachmentSize)
	for i := range att {
		att[i] = hostile.AttachmentByte(int64(i))
	}
	for _, tt := range []struct {
		path string
		size int64
		sum  [32]byte
	}{
		{"/" + cn + "/attachments/0/big.bin", hostile.BigAttachmentSize, sha256.Sum256(att)},
		{"/" + cn + "/raw", want, sha256.Sum256(hostile.BigAttachment(hostile.BigAttachmentSize).Raw())},
	} {
		t.Run(tt.path, func(t *testing.T) {
			before := liveHeap()
			const readers = 10
			started := make(chan struct{}, readers)
			release := make(chan struct{})
			var wg sync.WaitGroup
			for range readers {
				wg.Go(func() {
					resp, err := http.Get(srv.URL + tt.path)
					if err != nil {
						t.Error(err)
						started <- struct{}{}
						return
					}
					defer resp.Body.Close()
					h := sha256.New()
					n, err := io.CopyN(h, resp.Body, 1<<20)
					started <- struct{}{}
					<-release
					if err == nil {
						var m int64
						m, err = io.Copy(h, resp.Body)
						n += m
					}
					if resp.StatusCode != http.StatusOK || err != nil || n != tt.size || [32]byte(h.Sum(nil)) != tt.sum {
						t.Errorf("GET %s = %d, %d bytes, %v (the bytes stored: %v); want 200, %d bytes", tt.path, resp.StatusCode, n, err, [32]byte(h.Sum(nil)) == tt.sum, tt.size)
					}
				})
			}
			for range readers {
				<-started
			}
			grown := int64(liveHeap()) - int64(before)
			// Meanwhile, a range of it (served from the same file).
			if r := get(t, srv.URL+tt.path, "Range", "bytes=10-19"); r.status != http.StatusPartialContent || len(r.body) != 10 {
				t.Errorf("GET %s, bytes 10-19 = %d, %d bytes; want 206, 10 bytes", tt.path, r.status, len(r.body))
			}
			close(release)
			wg.Wait()
			if grown > 64<<20 {
				t.Errorf("with %d readers of %s each at its first MiB, the heap grew by %d MiB, want under 64 MiB", readers, tt.path, grown>>20)
			}
		})
	}
}

// While the catalog is rebuilt, its pages answer 503 with the progress
// and Retry-After, and message pages work.
func TestRebuildProgress(t *testing.T) {
	ca := newCatalogArchive(t)
	s := New(ca.st, Options{Catalogs: statusOf{keeper.Fixed(nil), keeper.Status{Rebuilding: &keeper.Progress{Read: 40, Total: 97}}}})
	for _, path := range []string{"/l/demo/", "/api/v1/lists", "/"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		want := http.StatusServiceUnavailable
		if path == "/" {
			want = http.StatusOK
		}
		if w.Code != want || !strings.Contains(w.Body.String(), "40 of 97 messages indexed") {
			t.Errorf("GET %s while rebuilding = %d:\n%s\nwant %d with the progress", path, w.Code, w.Body.String(), want)
		}
		if want == http.StatusServiceUnavailable && w.Header().Get("Retry-After") == "" {
			t.Errorf("GET %s while rebuilding: no Retry-After", path)
		}
	}
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/"+ca.cn(t, "t1.1"), nil))
	if w.Code != http.StatusOK {
		t.Errorf("a message page while rebuilding = %d, want 200", w.Code)
	}
}
