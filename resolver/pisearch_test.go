package resolver

import (
	"bytes"
	"encoding/xml"
	"html"
	"io"
	"net/http"
	"net/url"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// post sends a POST with body (form-encoded, as a browser's form and
// curl -d send it) and reads the answer.
func post(t *testing.T, u, body string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodPost, u, strings.NewReader(body))
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("POST %s: %v", u, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// mboxIDs returns the Message-IDs of a gzipped mboxrd answer, sorted.
func mboxIDs(t *testing.T, r response) []string {
	t.Helper()
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("answer = %d %s, want 200 application/gzip: %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var ids []string
	for _, raw := range gunzipMbox(t, r.body) {
		meta, _ := mailmsg.Parse(raw)
		ids = append(ids, meta.MessageID)
	}
	slices.Sort(ids)
	return ids
}

func sorted(s ...string) []string { slices.Sort(s); return s }

// TestPublicInboxSearch: public-inbox's request rules for a search
// (pisearch.go), in the archive's own search language (the tests of
// public-inbox's language are the parser's, and e2e's with b4 and lei).
func TestPublicInboxSearch(t *testing.T) {
	ca := newCatalogArchive(t)
	base := ca.srv.URL
	series := sorted("series-0@example.org", "series-1@example.org", "series-2@example.org", "series-3@example.org", "review-1@franken.example")
	for _, tt := range []struct {
		name, method, path, body string
		want                     []string
	}{
		{"matches", "GET", "/all/?x=m&q=dfn:setup.c", "", sorted("series-3@example.org")},
		{"matches, POST as b4", "POST", "/all/?x=m&q=dfn:setup.c", "", sorted("series-3@example.org")},
		{"t=1: whole threads", "POST", "/all/?x=m&t=1&q=dfn:setup.c", "", series},
		{"t=1 by GET", "GET", "/all/?q=dfn%3Asetup.c&t=1&x=m", "", series},
		{"a list's t=1", "POST", "/linux-mips.vger.kernel.org/?x=m&t=1&q=dfn:setup.c", "", series},
		{"body x=full threads", "POST", "/all/?x=m&q=dfn:setup.c", "x=full+threads", series},
		{"body z=results only", "POST", "/all/?x=m&q=dfn:setup.c", "z=results+only", sorted("series-3@example.org")},
		{"body x=0", "POST", "/all/?x=m&q=dfn:setup.c", "x=0", sorted("series-3@example.org")},
		{"; separates as &", "GET", "/all/?x=m;t=1;q=dfn:setup.c", "", series},
		// b4 am -c's search for a newer version, as b4 quotes it.
		{"b4's search", "POST", "/all/?x=m&t=1&q=" + url.QueryEscape(`(s:"MIPS: clean up the r4k cache code" AND f:"dev@example.org") AND d:20240115..`), "", series},
		{"b4's search, without t=1", "POST", "/all/?x=m&q=" + url.QueryEscape(`(s:"MIPS: clean up the r4k cache code" AND f:"dev@example.org") AND d:20240115..`), "", sorted("series-0@example.org")},
		{"a date range before the series", "POST", "/all/?x=m&q=" + url.QueryEscape(`s:r4k AND d:..20240114`), "", nil},
		// Within a thread: the matches of that thread only, in that list.
		{"thread-scoped", "POST", "/linux-mips.linux-mips.example/cross-1@example.org/?x=m&q=binutils", "", sorted("cross-1@example.org", "cross-2@example.org")},
		{"thread-scoped, the other list's copy", "POST", "/linux-kernel.kernel.example/cross-1@example.org/?x=m&q=binutils", "", sorted("cross-1@example.org", "cross-3@example.org")},
		{"thread-scoped by GET x=m", "GET", "/all/series-1@example.org/?x=m&q=dfn:setup.c", "", sorted("series-3@example.org")},
		{"thread-scoped t=1", "POST", "/all/series-1@example.org/?x=m&t=1&q=dfn:setup.c", "", series},
		{"thread-scoped without q: the thread", "POST", "/all/series-1@example.org/", "", series},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r response
			if tt.method == "POST" {
				r = post(t, base+tt.path, tt.body)
			} else {
				r = get(t, base+tt.path)
			}
			if tt.want == nil {
				if r.status != http.StatusNotFound {
					t.Errorf("%s %s = %d, want 404 (no match)", tt.method, tt.path, r.status)
				}
				return
			}
			if got := mboxIDs(t, r); !slices.Equal(got, tt.want) {
				t.Errorf("%s %s = %q, want %q", tt.method, tt.path, got, tt.want)
			}
		})
	}

	// A thread-scoped search is the whole search's matches that are in
	// the thread, whatever the word.
	t.Run("thread-scoped is the search within the thread", func(t *testing.T) {
		all := mboxIDs(t, post(t, base+"/all/?x=m&q=fix", ""))
		var want []string
		for _, id := range all {
			if slices.Contains(series, id) {
				want = append(want, id)
			}
		}
		if len(want) == 0 || len(want) == len(all) {
			t.Fatalf("fix finds %q: the test needs matches in and out of the series", all)
		}
		if got := mboxIDs(t, post(t, base+"/linux-mips.vger.kernel.org/series-2@example.org/?x=m&q=fix", "")); !slices.Equal(got, want) {
			t.Errorf("fix within the series = %q, want %q", got, want)
		}
	})

	for _, tt := range []struct {
		name, method, path string
		status             int
	}{
		{"nothing found", "POST", "/all/?x=m&q=xylophone", http.StatusNotFound},
		{"nothing found in the thread", "POST", "/all/series-1@example.org/?x=m&q=binutils", http.StatusNotFound},
		{"no query", "POST", "/all/?x=m", http.StatusBadRequest},
		{"a query too long", "POST", "/all/?x=m&q=" + strings.Repeat("word+", 300), http.StatusBadRequest},
		{"a prefix the archive does not know", "POST", "/all/?x=m&q=zz:cache", http.StatusBadRequest},
		{"an unknown message", "POST", "/all/nobody@example.org/?x=m&q=fix", http.StatusNotFound},
		{"an unknown list", "POST", "/nolist/?x=m&q=fix", http.StatusNotFound},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var r response
			if tt.method == "POST" {
				r = post(t, base+tt.path, "")
			} else {
				r = get(t, base+tt.path)
			}
			if r.status != tt.status {
				t.Errorf("%s %s = %d, want %d: %.300s", tt.method, tt.path, r.status, tt.status, r.body)
			}
		})
	}
	if r := post(t, base+"/all/?x=m&q="+strings.Repeat("word+", 300), ""); !strings.Contains(r.body, "This search cannot be run") {
		t.Errorf("a refused search does not say why: %.500s", r.body)
	}
}

// readFeed parses an Atom answer.
func readFeed(t *testing.T, r response) atomFeed {
	t.Helper()
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "application/atom+xml") {
		t.Fatalf("feed = %d %s: %.300s", r.status, r.header.Get("Content-Type"), r.body)
	}
	var f atomFeed
	if err := xml.NewDecoder(bytes.NewReader([]byte(r.body))).Decode(&f); err != nil {
		t.Fatalf("feed: %v\n%s", err, r.body)
	}
	return f
}

// TestPublicInboxFeeds: x=A (a search as Atom), /all/new.atom.
func TestPublicInboxFeeds(t *testing.T) {
	ca := newCatalogArchive(t)
	base := ca.srv.URL
	entries := func(f atomFeed) []string {
		var cns []string
		for _, e := range f.Entries {
			cns = append(cns, strings.TrimPrefix(e.ID, base+"/"))
		}
		return cns
	}
	f := readFeed(t, get(t, base+"/all/?q=dfn%3Aarch%2Fmips%2FKconfig+OR+dfn%3Asetup.c&x=A"))
	if got, want := entries(f), []string{ca.cn(t, "series-3"), ca.cn(t, "series-2")}; !slices.Equal(got, want) {
		t.Errorf("x=A entries = %q, want %q (newest first)", got, want)
	}
	if !strings.Contains(f.Title, "dfn:setup.c") {
		t.Errorf("x=A title = %q, want the search", f.Title)
	}
	f = readFeed(t, get(t, base+"/all/?x=A&q="+url.QueryEscape(`s:r4k AND f:dev@example.org`)))
	if got, want := entries(f), []string{ca.cn(t, "series-2"), ca.cn(t, "series-1"), ca.cn(t, "series-0")}; !slices.Equal(got, want) {
		t.Errorf("x=A entries of s:r4k AND f:dev = %q, want %q (newest first)", got, want)
	}
	f = readFeed(t, get(t, base+"/linux-mips.linux-mips.example/cross-1@example.org/?q=binutils&x=A"))
	if got, want := sorted(entries(f)...), sorted(ca.byLabel["cross-1"][0], ca.cn(t, "cross-2")); !slices.Equal(got, want) {
		t.Errorf("thread-scoped x=A entries = %q, want %q", got, want)
	}

	// The search page offers its feed: follow a search without subscribing.
	page := get(t, base+"/search?q="+url.QueryEscape(`s:r4k AND f:dev@example.org`))
	m := regexp.MustCompile(`<a href="([^"]*x=A)"[^>]*>follow \(Atom\)</a>`).FindStringSubmatch(page.body)
	if m == nil {
		t.Fatalf("the search page offers no feed:\n%s", page.body)
	}
	f = readFeed(t, get(t, base+html.UnescapeString(m[1])))
	if got, want := entries(f), []string{ca.cn(t, "series-2"), ca.cn(t, "series-1"), ca.cn(t, "series-0")}; !slices.Equal(got, want) {
		t.Errorf("the search page's feed %s has %q, want %q", m[1], got, want)
	}

	// /all/new.atom: the newest of every list, by arrival.
	f = readFeed(t, get(t, base+"/all/new.atom"))
	if len(f.Entries) != feedEntries {
		t.Fatalf("/all/new.atom has %d entries, want %d", len(f.Entries), feedEntries)
	}
	lists := map[string]bool{}
	for i, e := range f.Entries {
		if i > 0 && e.Updated > f.Entries[i-1].Updated {
			t.Errorf("entry %d (%s) is newer than the one before it (%s)", i, e.Updated, f.Entries[i-1].Updated)
		}
		m, err := ca.cat.Message(t.Context(), strings.TrimPrefix(e.ID, base+"/"))
		if err != nil {
			t.Fatalf("entry %s: %v", e.ID, err)
		}
		lists[m.List] = true
	}
	if len(lists) < 2 {
		t.Errorf("/all/new.atom holds the messages of %d list(s), want several", len(lists))
	}
}

// TestPublicInboxHelpAndLinks: _/text/help/ (what liblore probes) and
// lore's short links /r/MSGID.
func TestPublicInboxHelpAndLinks(t *testing.T) {
	ca := newCatalogArchive(t)
	base := ca.srv.URL
	r := get(t, base+"/all/_/text/help/")
	if r.status != http.StatusOK {
		t.Fatalf("help = %d", r.status)
	}
	if err := unsafeHTML(r.body); err != nil {
		t.Error(err)
	}
	hasAllOf(t, "the help", r.body, "dfn:", "patchid:", "from:", "x=m", "searchmask")
	req, _ := http.NewRequest(http.MethodHead, base+"/linux-mips.vger.kernel.org/_/text/help/", nil)
	if resp, err := noRedirect.Do(req); err != nil || resp.StatusCode != http.StatusOK {
		t.Errorf("HEAD help = %v, %v; want 200 (liblore's probe)", resp, err)
	}
	r = get(t, base+"/all/_/text/help/raw")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") || !strings.HasPrefix(r.body, "help for") {
		t.Errorf("help/raw = %d %s %.40q", r.status, r.header.Get("Content-Type"), r.body)
	}
	for _, tt := range []struct{ path, location string }{
		{"/all/_/text/help", base + "/all/_/text/help/"},
		{"/all/_/text/", base + "/all/_/text/help/"},
		{"/r/series-1@example.org", base + "/linux-mips.vger.kernel.org/series-1@example.org/"},
		{"/r/%3Cseries-1@example.org%3E", base + "/linux-mips.vger.kernel.org/series-1@example.org/"},
	} {
		if r := get(t, base+tt.path); r.status/100 != 3 || r.header.Get("Location") != tt.location {
			t.Errorf("GET %s = %d %q, want a redirect to %q", tt.path, r.status, r.header.Get("Location"), tt.location)
		}
	}
	for _, path := range []string{"/r/nobody@example.org", "/all/_/text/nothing/"} {
		if r := get(t, base+path); r.status != http.StatusNotFound {
			t.Errorf("GET %s = %d, want 404", path, r.status)
		}
	}
	// /all/MSGID/ finds a message in whichever list it is.
	if r := get(t, base+"/all/"+url.PathEscape("review-1@franken.example")+"/"); r.header.Get("Location") != "/"+ca.cn(t, "review-1") {
		t.Errorf("/all/MSGID/ = %d %q", r.status, r.header.Get("Location"))
	}
}

// TestPublicInboxSearchCost: a search of public-inbox's routes that does
// not finish in its time is a 503 with Retry-After, as the search page's.
func TestPublicInboxSearchCost(t *testing.T) {
	ca := newCatalogArchive(t)
	cat, err := catalog.Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{SearchTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer cat.Close()
	if _, err := cat.Sync(t.Context(), ca.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, ca.st, Options{Catalogs: keeper.Fixed(cat)})
	for _, path := range []string{"/all/?x=m&t=1&q=message", "/all/?x=A&q=s:message", "/all/series-1@example.org/?x=m&q=fix"} {
		r := post(t, srv.URL+path, "")
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("POST %s past its time = %d, Retry-After %q, want 503 with Retry-After:\n%.400s", path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
}

// TestPublicInboxCorpusThreads: t=1 on real mail, a query whose matches
// are in more threads than maxMboxThreads: the matches, and the whole
// threads of the newest matches' first maxMboxThreads threads, each
// message once; not every thread of every match.
func TestPublicInboxCorpusThreads(t *testing.T) {
	if testing.Short() {
		t.Skip("reads the corpus")
	}
	msgs := readCorpus(t, 2000)
	a := newArchive(t, boltstore.Options{})
	for len(msgs) > 0 {
		n := min(len(msgs), 500)
		var batch []store.Message
		for _, raw := range msgs[:n] {
			batch = append(batch, a.message(t, raw, "linux-mips"))
		}
		if _, err := a.st.Put(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
		msgs = msgs[n:]
	}
	cat := openTestCatalog(t)
	if _, err := cat.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(cat)})

	const query = "f:ralf"
	q, err := catalog.ParseQuery(query)
	if err != nil {
		t.Fatal(err)
	}
	res, err := cat.Search(t.Context(), q, catalog.SearchOptions{Limit: maxMboxResults})
	if err != nil {
		t.Fatal(err)
	}
	// What t=1 gives: the matches, and the threads of the first
	// maxMboxThreads, the newest match's first; everything: every
	// match's thread.
	want, everything := map[string]bool{}, map[string]bool{}
	threads := map[int64]bool{}
	for _, m := range res.Messages {
		want[m.MessageID] = true
		th, err := cat.Thread(t.Context(), m.CallNumber)
		if err != nil {
			t.Fatal(err)
		}
		first := !threads[m.ThreadID()]
		threads[m.ThreadID()] = true
		for _, n := range th.Nodes {
			if n.Message != nil {
				everything[n.Message.MessageID] = true
				if first && len(threads) <= maxMboxThreads {
					want[n.Message.MessageID] = true
				}
			}
		}
	}
	if len(threads) <= maxMboxThreads || len(everything) <= len(want) || len(want) > maxMboxMessages {
		t.Fatalf("%s: %d matches in %d threads of %d messages: the test needs more than %d threads", query, len(res.Messages), len(threads), len(everything), maxMboxThreads)
	}
	r := post(t, srv.URL+"/linux-mips/?x=m&t=1&q="+url.QueryEscape(query), "")
	got := mboxIDs(t, r)
	if n := len(gunzipMbox(t, r.body)); n != len(want) {
		t.Errorf("%s, t=1: %d messages, want %d (of the %d in every match's thread)", query, n, len(want), len(everything))
	}
	for i, id := range got {
		if !want[id] {
			t.Errorf("%s, t=1 has <%s>, of a thread past the first %d", query, id, maxMboxThreads)
		}
		if i > 0 && got[i-1] == id {
			t.Errorf("%s, t=1 has <%s> twice", query, id)
		}
	}
}
