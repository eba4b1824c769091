package resolver

import (
	"encoding/json"
	"strings"
	"testing"
)

// TestMessageJSONThread: GET /api/v1/messages/{callnumber} carries what
// the message page shows of the thread, on the hard threading cases of
// fixtures/threads.
func TestMessageJSONThread(t *testing.T) {
	ca := newCatalogArchive(t)
	type link struct{ CallNumber, Subject, From string }
	type place struct {
		CallNumber    string
		Subject       string
		Messages      int
		Position      int
		List          string
		Month         string
		Parent        *link
		MissingParent string `json:"missing_parent"`
		PrevInThread  *link  `json:"prev_in_thread"`
		NextInThread  *link  `json:"next_in_thread"`
		PrevByDate    *link  `json:"prev_by_date"`
		NextByDate    *link  `json:"next_by_date"`
		Replies       []link
	}
	l := func(label, subject, from string) *link { return &link{ca.cn(t, label), subject, from} }
	a, b, c := l("a", "widgets", "Alice"), l("b", "Re: widgets", "Bob"), l("c", "Re: widgets", "Carol")
	d := l("d", "gadgets", "Dave")
	tests := []struct {
		name  string
		label string
		want  place
	}{
		{"a reply stored before its parent", "c", place{
			CallNumber: a.CallNumber, Subject: "widgets", Messages: 3, Position: 3, List: "widgets.example.org", Month: "2001-01",
			Parent: b, PrevInThread: b, PrevByDate: d, Replies: []link{},
		}},
		{"the parent, with its reply", "a", place{
			CallNumber: a.CallNumber, Subject: "widgets", Messages: 3, Position: 1, List: "widgets.example.org", Month: "2001-01",
			NextInThread: b, NextByDate: b, Replies: []link{*b},
		}},
		{"in the middle", "b", place{
			CallNumber: a.CallNumber, Subject: "widgets", Messages: 3, Position: 2, List: "widgets.example.org", Month: "2001-01",
			Parent: a, PrevInThread: a, NextInThread: c, PrevByDate: a, NextByDate: d, Replies: []link{*c},
		}},
		{"two answers to a parent never archived", "p2", place{
			CallNumber: ca.cn(t, "p1"), Subject: "Re: lost", Messages: 2, Position: 2, List: "lost", Month: "2001-01",
			MissingParent: "gone@example.org", PrevInThread: l("p1", "Re: lost", "p1@example.org"), PrevByDate: l("p1", "Re: lost", "p1@example.org"),
			NextByDate: l("q", "Re: elsewhere", "q@example.org"), Replies: []link{},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/api/v1/messages/" + ca.cn(t, tt.label)
			r := get(t, ca.srv.URL+path)
			var got struct {
				CallNumber string
				Thread     *place
			}
			if r.status != 200 || json.Unmarshal([]byte(r.body), &got) != nil {
				t.Fatalf("GET %s = %d %s, want 200 and JSON", path, r.status, r.body)
			}
			if got.Thread == nil {
				t.Fatalf("GET %s: no thread in %s", path, r.body)
			}
			g, _ := json.Marshal(got.Thread)
			w, _ := json.Marshal(tt.want)
			if string(g) != string(w) {
				t.Errorf("GET %s thread =\n%s\nwant\n%s", path, g, w)
			}
			if cc := r.header.Get("Cache-Control"); cc != "no-cache" {
				t.Errorf("GET %s Cache-Control = %q, want no-cache: its place changes as the archive grows", path, cc)
			}
		})
	}
	// The links carry the date, as on the page.
	r := get(t, ca.srv.URL+"/api/v1/messages/"+c.CallNumber)
	if !strings.Contains(r.body, `"parent":{"callnumber":"`+b.CallNumber+`","subject":"Re: widgets","from":"Bob","date":"2001-01-02T10:00:00Z"}`) {
		t.Errorf("the parent of c in %s: want its call number, subject, author and date", r.body)
	}
}

// Without a catalog, the message's JSON says nothing of a thread, and
// answers as before (immutable).
func TestMessageJSONWithoutCatalog(t *testing.T) {
	fa := newFixtureArchive(t)
	path := "/api/v1/messages/" + fa.numbers["signed.eml"].String()
	r := get(t, fa.srv.URL+path)
	if r.status != 200 || strings.Contains(r.body, `"thread"`) || !json.Valid([]byte(r.body)) {
		t.Errorf("GET %s without a catalog = %d %s, want 200 and no thread", path, r.status, r.body)
	}
	if cc := r.header.Get("Cache-Control"); cc != immutable {
		t.Errorf("GET %s without a catalog: Cache-Control %q, want %q", path, cc, immutable)
	}
}
