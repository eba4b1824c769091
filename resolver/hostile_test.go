package resolver

import (
	"io"
	"net/http"
	"strings"
	"testing"
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
