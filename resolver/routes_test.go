package resolver

import (
	"io"
	"strings"
	"testing"
)

// TestRouteTable requests every route the help lists, its variables filled
// in, and finds it in the metrics under the route the table names: the
// table, the ServeMux and the dispatchers agree.
func TestRouteTable(t *testing.T) {
	fa := newFixtureArchive(t)
	cn := fa.numbers["signed.eml"].String()
	fill := strings.NewReplacer("CALLNUMBER", cn, "MESSAGE-ID", "signed-1@example.com", "LIST", "test-list",
		"YYYY-MM", "2001-09", "/N/", "/1/", "/N.git", "/0.git", "NAME", "x.txt", "WORDS", "signed", "TEXT", cn, "CURSOR", "")
	seen := map[string]bool{}
	for _, r := range routes {
		if r.Path == "" {
			continue
		}
		if seen[r.Path] {
			t.Errorf("%s is listed twice", r.Path)
		}
		seen[r.Path] = true
		if r.pattern == "" || r.Doc == "" {
			t.Errorf("%s: pattern %q, doc %q: want both", r.Path, r.pattern, r.Doc)
		}
		resp, err := noRedirect.Get(fa.srv.URL + fill.Replace(r.Path))
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
	}
	metrics := get(t, fa.srv.URL+"/metrics").body
	for _, r := range routes {
		if r.Path != "" && !strings.Contains(metrics, `route="`+r.pattern+`"`) {
			t.Errorf("GET %s was not served as %q", r.Path, r.pattern)
		}
	}
	for _, r := range Routes() {
		if r.Path == "" && r.Doc == "" {
			t.Errorf("Routes() has an empty route")
		}
	}
	if t.Failed() {
		t.Logf("the metrics:\n%s", metrics)
	}
}
