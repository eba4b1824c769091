package resolver

import (
	"context"
	"fmt"
	"github.com/chibrary/chibrary/catalog/keeper"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// TestPageCache: a page is rendered once per catalog generation, and
// served from the cache until the catalog changes.
func TestPageCache(t *testing.T) {
	ca := newCatalogArchive(t)
	first := get(t, ca.srv.URL+"/l/demo/")
	second := get(t, ca.srv.URL+"/l/demo/")
	if first.body != second.body || first.header.Get("ETag") != second.header.Get("ETag") || second.header.Get("Content-Type") != "text/html; charset=utf-8" {
		t.Errorf("the cached page differs from the rendered one")
	}
	metric := func(result string) string {
		for _, l := range strings.Split(get(t, ca.srv.URL+"/metrics").body, "\n") {
			if strings.HasPrefix(l, `chibrary_resolver_page_cache_total{result="`+result+`"}`) {
				return strings.Fields(l)[1]
			}
		}
		return "0"
	}
	if h, m := metric("hit"), metric("miss"); h != "1" || m != "1" {
		t.Errorf("cache hits %s, misses %s; want 1 and 1", h, m)
	}
	ca.add(t, []byte("From: N <n@example.org>\nSubject: cache news\nMessage-ID: <cache@example.org>\nDate: Mon, 11 Mar 2024 10:00:00 +0000\n\nnew\n"), "demo")
	ca.sync(t)
	if r := get(t, ca.srv.URL+"/l/demo/"); !strings.Contains(r.body, "cache news") {
		t.Errorf("the list page after the catalog changed is the cached one")
	}
	if m := metric("miss"); m != "2" {
		t.Errorf("cache misses %s, want 2", m)
	}
	// Many readers of a page not rendered yet: one renders it, the
	// others wait for it.
	var wg sync.WaitGroup
	start := make(chan struct{})
	for range 16 {
		wg.Go(func() {
			<-start
			if r := get(t, ca.srv.URL+"/l/demo/2024-03/"); r.status != 200 {
				t.Errorf("month page = %d", r.status)
			}
		})
	}
	close(start)
	wg.Wait()
	if m := metric("miss"); m != "3" {
		t.Errorf("16 readers at once of one page: %s misses in all, want 3 (one more)", m)
	}
	// Errors are not kept.
	get(t, ca.srv.URL+"/l/demo/?page=9")
	if r := get(t, ca.srv.URL+"/l/demo/?page=9"); r.status != 404 {
		t.Errorf("page 9 = %d, want 404", r.status)
	}
	if h := metric("hit"); h != "16" {
		t.Errorf("cache hits %s, want 16: an error page was served from the cache", h)
	}
}

func TestPageCacheBounds(t *testing.T) {
	c := newPageCache(cacheEntries, cacheBytes)
	for i := range cacheEntries + 10 {
		c.put(&cached{key: fmt.Sprint(i), gen: "g", body: []byte("x")})
	}
	if c.ll.Len() != cacheEntries || len(c.byKey) != cacheEntries {
		t.Errorf("%d entries, want %d", c.ll.Len(), cacheEntries)
	}
	if _, ok := c.get("0", "g"); ok {
		t.Errorf("the oldest entry is still there")
	}
	if _, ok := c.get(fmt.Sprint(cacheEntries+9), "g"); !ok {
		t.Errorf("the newest entry is gone")
	}
	if _, ok := c.get(fmt.Sprint(cacheEntries+9), "h"); ok {
		t.Errorf("an entry of another generation was served")
	}
	big := make([]byte, cacheLargest/2)
	for i := range 2 * cacheBytes / len(big) {
		c.put(&cached{key: fmt.Sprint("big", i), gen: "g", body: big})
	}
	if c.bytes > cacheBytes {
		t.Errorf("%d bytes kept, want at most %d", c.bytes, cacheBytes)
	}
	c.put(&cached{key: "huge", gen: "g", body: make([]byte, cacheLargest+1)})
	if _, ok := c.get("huge", "g"); ok {
		t.Errorf("a page larger than cacheLargest was kept")
	}
}

// failingStore fails Get for one call number while fail is set.
type failingStore struct {
	store.Store
	cn   callnumber.Number
	fail atomic.Bool
}

func (f *failingStore) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	if n == f.cn && f.fail.Load() {
		return store.Stored{}, store.ErrUnavailable
	}
	return f.Store.Get(ctx, n)
}

// TestPageCacheSkipsGaps: a thread page that lacks a message the store
// could not give is not kept; the next reader gets it whole.
func TestPageCacheSkipsGaps(t *testing.T) {
	ca := newCatalogArchive(t)
	n, err := callnumber.Parse(ca.cn(t, "t1.2"))
	if err != nil {
		t.Fatal(err)
	}
	fs := &failingStore{Store: ca.st, cn: n}
	fs.fail.Store(true)
	srv, _ := serveWith(t, fs, Options{Catalogs: keeper.Fixed(ca.cat)})
	path := "/t/" + ca.cn(t, "t1.1") + "/"
	if r := get(t, srv.URL+path); r.status != 200 || !strings.Contains(r.body, "This message cannot be read right now.") {
		t.Fatalf("thread page while the store fails = %d, want 200 saying a message cannot be read", r.status)
	}
	fs.fail.Store(false)
	if r := get(t, srv.URL+path); strings.Contains(r.body, "cannot be read right now") || !strings.Contains(r.body, "Yes, and it must never change") {
		t.Errorf("the thread page with a gap was kept in the cache:\n%s", r.body)
	}
}

// stalledWriter is a reader who never reads: its Write blocks until
// released.
type stalledWriter struct {
	*httptest.ResponseRecorder
	writing chan struct{}
	release chan struct{}
	once    sync.Once
}

func (s *stalledWriter) Write(b []byte) (int, error) {
	s.once.Do(func() { close(s.writing) })
	<-s.release
	return s.ResponseRecorder.Write(b)
}

// TestPageCacheStalledReader: a reader who does not read the page he
// asked for holds up no one else asking for it: the page is rendered
// into the cache, then written outside the lock that makes the others
// wait for the rendering.
func TestPageCacheStalledReader(t *testing.T) {
	ca := newCatalogArchive(t)
	s := New(ca.st, Options{Catalogs: keeper.Fixed(ca.cat)})
	stalled := &stalledWriter{ResponseRecorder: httptest.NewRecorder(), writing: make(chan struct{}), release: make(chan struct{})}
	done := make(chan struct{})
	go func() {
		defer close(done)
		s.ServeHTTP(stalled, httptest.NewRequest("GET", "/l/demo/", nil))
	}()
	defer func() { close(stalled.release); <-done }()
	<-stalled.writing
	other := make(chan int, 1)
	go func() {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/l/demo/", nil))
		other <- w.Code
	}()
	select {
	case code := <-other:
		if code != http.StatusOK {
			t.Errorf("another reader's /l/demo/ = %d, want 200", code)
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("another reader of /l/demo/ waits for the one who does not read")
	}
}
