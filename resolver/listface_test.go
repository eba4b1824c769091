package resolver

import (
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestListFace: a list's page says what the list is about (its mail's
// List-Id, or the operator's line), where to subscribe and to post, beside
// its chart of messages per month; the front page and the JSON say the
// description too.
func TestListFace(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	put := func(id, date string) {
		a.put(t, []byte("From: A <a@example.org>\nSubject: s "+id+"\nMessage-ID: <"+id+"@example.org>\nDate: "+date+
			"\nList-Id: \"Bufferbloat's CAKE\" <cake.lists.bufferbloat.net>\nList-Post: <mailto:cake@lists.bufferbloat.net>"+
			"\nList-Subscribe: <mailto:cake-request@lists.bufferbloat.net?subject=subscribe>, <https://lists.bufferbloat.net/listinfo/cake>\n\nhi\n"), "cake")
	}
	put("1", "Mon, 1 Jan 2024 10:00:00 +0000")
	put("2", "Tue, 2 Jan 2024 10:00:00 +0000")
	put("3", "Fri, 1 Mar 2024 10:00:00 +0000")
	a.put(t, []byte("From: B <b@example.org>\nSubject: t\nMessage-ID: <t@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\nList-Id: other <other.example.org>\n\nhi\n"), "other")
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	r := get(t, srv.URL+"/l/cake/")
	for _, want := range []string{
		`<p class="description">Bufferbloat&#39;s CAKE</p>`,
		`<a href="https://lists.bufferbloat.net/listinfo/cake">Subscribe</a>`,
		`Post to <a href="mailto:cake@lists.bufferbloat.net">cake@lists.bufferbloat.net</a>`,
		`<svg class="chart"`,
		`<title>2024-01: 2 messages</title>`,
		`<title>2024-03: 1 message</title>`,
		`Who writes <span class="meta">since 2023-04: 1 person</span>`,
		`<li><a href="/search?q=from%3Aa%40example.org&#43;list%3Acake">A</a> <span class="meta">3 messages</span></li>`,
	} {
		if !strings.Contains(r.body, want) {
			t.Errorf("GET /l/cake/: no %q in\n%s", want, r.body)
		}
	}
	if r := get(t, srv.URL+"/l/other/"); strings.Contains(r.body, `class="description"`) || strings.Contains(r.body, "Subscribe") {
		t.Errorf("GET /l/other/ (a List-Id that only names the list, no List-Subscribe) shows a description or a subscription:\n%s", r.body)
	}
	if r := get(t, srv.URL+"/"); !strings.Contains(r.body, `<a href="/l/cake/">cake</a><br><span class="meta">Bufferbloat&#39;s CAKE</span>`) {
		t.Errorf("the front page lacks the description:\n%s", r.body)
	}

	// The operator's description wins.
	file := filepath.Join(t.TempDir(), "lists.txt")
	os.WriteFile(file, []byte("# descriptions\n\nother\tThe other list, <for tests>\ncake   Bufferbloat's   CAKE queue discipline\n"), 0o644)
	desc, err := ReadListDescriptions(file)
	if err != nil {
		t.Fatal(err)
	}
	srv, _ = serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c), ListDescriptions: desc})
	if r := get(t, srv.URL+"/l/other/"); !strings.Contains(r.body, `<p class="description">The other list, &lt;for tests&gt;</p>`) {
		t.Errorf("GET /l/other/ lacks the operator's description:\n%s", r.body)
	}
	if r := get(t, srv.URL+"/api/v1/lists/cake"); !strings.Contains(r.body, `"posters":[{"name":"A","address":"a@example.org","messages":3}],"people":1,"since":"2023-04"`) {
		t.Errorf("GET /api/v1/lists/cake = %s", r.body)
	}
	if r := get(t, srv.URL+"/api/v1/lists"); !strings.Contains(r.body, `"description":"Bufferbloat's CAKE queue discipline","subscribe":"https://lists.bufferbloat.net/listinfo/cake"`) {
		t.Errorf("GET /api/v1/lists = %s", r.body)
	}
}

func TestReadListDescriptions(t *testing.T) {
	for _, tt := range []struct{ file, err string }{
		{"Linux-MIPS about\n", `"Linux-MIPS" is not a list's name`},
		{"a\n", "list a has no description"},
		{"a one\na two\n", "list a is described twice"},
		{"a " + strings.Repeat("x", 201) + "\n", "at most 200 bytes"},
		{"a \xff\n", "not UTF-8"},
	} {
		file := filepath.Join(t.TempDir(), "lists.txt")
		os.WriteFile(file, []byte(tt.file), 0o644)
		if _, err := ReadListDescriptions(file); err == nil || !strings.Contains(err.Error(), tt.err) || !strings.Contains(err.Error(), file+":") {
			t.Errorf("ReadListDescriptions(%q) = %v, want an error at a line of %s saying %q", tt.file, err, file, tt.err)
		}
	}
	if _, err := ReadListDescriptions(filepath.Join(t.TempDir(), "none")); err == nil {
		t.Error("ReadListDescriptions(a missing file) = nil error")
	}
}

// TestListRecent: the front page, a list's page and their JSON say how
// many people wrote in the list's last 30 days (today, UTC, included) and
// in how many threads; a page kept in the cache says the new counts once
// the day has changed.
func TestListRecent(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	put := func(id, from, subject, date string) {
		a.put(t, []byte("From: "+from+"\nSubject: "+subject+"\nMessage-ID: <"+id+"@example.org>\nIn-Reply-To: <1@example.org>\nDate: "+date+"\n\nhi\n"), "cake")
	}
	put("old", "Old <old@example.org>", "long ago", "Sat, 30 Sep 2023 23:59:59 +0000")
	put("1", "A <a@example.org>", "first", "Sun, 1 Oct 2023 00:00:00 +0000")
	put("2", "B <b@example.org>", "Re: first", "Mon, 2 Oct 2023 10:00:00 +0000")
	a.put(t, []byte("From: B <B@Example.org>\nSubject: second\nMessage-ID: <3@example.org>\nDate: Tue, 31 Oct 2023 23:00:00 +0000\n\nhi\n"), "cake")
	a.put(t, []byte("From: C <c@example.org>\nSubject: t\nMessage-ID: <t@example.org>\nDate: Mon, 2 Oct 2023 10:00:00 +0000\n\nhi\n"), "other")
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	var now atomic.Pointer[time.Time]
	setNow := func(s string) {
		n, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		now.Store(&n)
	}
	setNow("2023-10-30T12:00:00+02:00") // 10:00 UTC: Oct 1 to 30
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c), Now: func() time.Time { return *now.Load() }})

	check := func(path string, want ...string) {
		t.Helper()
		r := get(t, srv.URL+path)
		for _, w := range want {
			if !strings.Contains(r.body, w) {
				t.Errorf("GET %s: no %q in\n%s", path, w, r.body)
			}
		}
	}
	check("/", `<td>2 participants, 1 discussion</td>`, `<td>1 participant, 1 discussion</td>`)
	check("/l/cake/", `In the last 30 days: 2 participants, 1 discussion.`)
	check("/api/v1/lists/cake", `"last_30_days":{"posters":2,"threads":1,"messages":2,"since":"2023-10-01"}`)
	check("/api/v1/lists", `"last_30_days":{"posters":2,"threads":1,"messages":2,"since":"2023-10-01"}`, `"last_30_days":{"posters":1,"threads":1,"messages":1,"since":"2023-10-01"}`)
	check("/l/cake/?page=1", `In the last 30 days: 2 participants, 1 discussion.`)

	// A message more the same day: the counts, kept for the day, follow
	// the catalog.
	a.put(t, []byte("From: D <d@example.org>\nSubject: third\nMessage-ID: <4@example.org>\nDate: Tue, 10 Oct 2023 10:00:00 +0000\n\nhi\n"), "cake")
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	check("/", `<td>3 participants, 2 discussions</td>`, `<td>1 participant, 1 discussion</td>`)
	check("/l/cake/", `In the last 30 days: 3 participants, 2 discussions.`)

	// The next day: Oct 1 is out, Oct 31 in; the cached page follows.
	setNow("2023-10-31T23:30:00Z")
	check("/l/cake/", `In the last 30 days: 2 participants, 3 discussions.`)
	check("/api/v1/lists/cake", `"last_30_days":{"posters":2,"threads":3,"messages":3,"since":"2023-10-02"}`)
	setNow("2024-06-01T00:00:00Z")
	check("/l/cake/", `No messages in the last 30 days.`)
	if r := get(t, srv.URL+"/"); strings.Count(r.body, `<td><span class="meta">quiet</span></td>`) != 2 {
		t.Errorf("GET / months later: not both lists quiet in\n%s", r.body)
	}
}
