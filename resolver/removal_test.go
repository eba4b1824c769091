package resolver

import (
	"context"
	"encoding/json"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestRemoved: a removed message's page, raw bytes, attachments and JSON
// answer 410 with the date and the reason; its thread keeps its place; it
// leaves its list, search and Message-ID; /api/v1/removals lists it.
func TestRemoved(t *testing.T) {
	ca := newCatalogArchive(t)
	b, c := ca.cn(t, "b"), ca.cn(t, "c") // c answers b, which answers a
	att := ca.cn(t, "attachments-1")
	rm := ca.st
	for _, cn := range []string{b, att} {
		n, _, err := Resolve(t.Context(), ca.st, cn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := rm.Remove(t.Context(), n, "at the author's request"); err != nil {
			t.Fatal(err)
		}
	}
	ca.sync(t)
	today := time.Now().UTC().Format(dateLayout)
	for _, path := range []string{"/" + b, "/" + b + "/raw", "/" + att + "/attachments/0/evil.html", "/api/v1/messages/" + b} {
		r := get(t, ca.srv.URL+path)
		if r.status != http.StatusGone || !strings.Contains(r.body, today) || !strings.Contains(r.body, "at the author") {
			t.Errorf("GET %s = %d %q, want 410 with the date and the reason", path, r.status, r.body)
		}
		if strings.Contains(r.body, "widgets") || strings.Contains(r.body, "evil") {
			t.Errorf("GET %s shows some of the removed message: %q", path, r.body)
		}
	}
	var gone struct {
		CallNumber string    `json:"callnumber"`
		RemovedAt  time.Time `json:"removed_at"`
		Reason     string    `json:"reason"`
	}
	if r := get(t, ca.srv.URL+"/api/v1/messages/"+b); json.Unmarshal([]byte(r.body), &gone) != nil || gone.CallNumber != b || gone.RemovedAt.IsZero() {
		t.Errorf("GET /api/v1/messages/%s = %q, want the removal as JSON", b, r.body)
	}
	// The thread: the reply in its place, under the removed message's.
	for _, path := range []string{"/t/" + c + "/", "/" + c} {
		r := get(t, ca.srv.URL+path)
		if r.status != 200 || !strings.Contains(r.body, "removed from the archive on "+today) {
			t.Errorf("GET %s = %d, want the thread with the removed message's place:\n%s", path, r.status, r.body)
		}
	}
	var removals []struct {
		CallNumber string    `json:"callnumber"`
		RemovedAt  time.Time `json:"removed_at"`
		Reason     string    `json:"reason"`
	}
	r := get(t, ca.srv.URL+"/api/v1/removals")
	if err := json.Unmarshal([]byte(r.body), &removals); err != nil || len(removals) != 2 || removals[0].Reason != "at the author's request" {
		t.Errorf("GET /api/v1/removals = %d %q, want the two removals", r.status, r.body)
	}
	for _, path := range []string{"/m/b@example.org", "/search?q=evil"} {
		if r := get(t, ca.srv.URL+path); strings.Contains(r.body, b) || strings.Contains(r.body, att) || r.status == http.StatusFound && strings.Contains(r.header.Get("Location"), b) {
			t.Errorf("GET %s = %d still leads to a removed message: %q", path, r.status, r.body)
		}
	}
}

// removedStore answers Get of one number as removed, with reason: a
// removal recorded before store.CheckReason refused direction marks (or
// by a store that does not check).
type removedStore struct {
	store.Store
	n      callnumber.Number
	reason string
}

func (s removedStore) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	if n == s.n {
		return store.Stored{}, &store.RemovedError{Removal: store.Removal{Number: n, Removed: time.Date(2024, 3, 4, 0, 0, 0, 0, time.UTC), Reason: s.reason}}
	}
	return s.Store.Get(ctx, n)
}

// TestRemovedReasonIsolated: a removal reason holding U+202E (RIGHT-TO-LEFT
// OVERRIDE) is shown on the 410 page isolated (U+2068 ... U+2069), so that
// it cannot reverse the page's own text after it.
func TestRemovedReasonIsolated(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	n := a.put(t, []byte("Message-ID: <rlo@example.org>\nSubject: rlo\n\nbody\n"), "l")
	const reason = "spam \u202eevil"
	srv, _ := serveWith(t, removedStore{Store: a.st, n: n, reason: reason}, Options{})
	r := get(t, srv.URL+"/"+n.String())
	want := ": \u2068" + reason + "\u2069. Its call number stays"
	if r.status != http.StatusGone || !strings.Contains(r.body, want) {
		t.Errorf("GET /%s of a removal whose reason holds U+202E = %d %q, want 410 with the reason isolated: %q", n, r.status, r.body, want)
	}
}
