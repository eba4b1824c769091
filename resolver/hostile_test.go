package resolver

import (
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/hostile"
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

// A search that takes more than the catalog gives one search is
// answered 400 with a page saying to narrow it (not 500, not logged as
// an error), and a phrase of 499 one-letter words is refused at once.
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
	srv, logs := serveWith(t, ca.st, Options{Catalog: cat})
	r := get(t, srv.URL+"/search?q=message")
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "narrow") {
		t.Errorf("a search past its time = %d, want 400 saying to narrow it:\n%s", r.status, r.body)
	}
	r = get(t, ca.srv.URL+"/search?q="+url.QueryEscape(hostile.LongPhrase(hostile.LongPhraseWords)))
	if r.status != http.StatusBadRequest || !strings.Contains(r.body, "more than 32 words") {
		t.Errorf("a phrase of 499 words = %d, want 400 saying more than 32 words:\n%.400s", r.status, r.body)
	}
	if l := logs.String() + ca.log.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("logs have ERROR lines:\n%s", l)
	}
}
