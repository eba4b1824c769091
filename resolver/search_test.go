package resolver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/store/boltstore"
)

func TestSearch(t *testing.T) {
	ca := newCatalogArchive(t)
	wrapper := ca.cn(t, "wrapper-1")
	tests := []struct {
		name   string
		path   string
		status int
		has    []string
		hasNot []string
	}{
		{"words", "/search?q=sprockets+sizes", 200, []string{
			"1 message found", `<a class="subject" href="/` + wrapper + `">[Widgets] Sprocket sizes</a>`, "<mark>sprockets</mark>", `href="/l/hostile/"`,
			`href="/search?q=sprockets%20sizes&amp;sort=relevance"`,
		}, nil},
		{"from", "/search?q=from%3Aada+list%3Ademo", 200, []string{"4 messages found", "Ada Lovelace"}, []string{"Charles Babbage"}},
		{"phrase and exclusion", "/search?q=%22call+numbers%22+-guessable", 200, []string{"Call numbers for the archive"}, []string{ca.cn(t, "t1.3")}},
		{"relevance", "/search?q=archive&sort=relevance", 200, []string{"best matches first", `<a href="/search?q=archive">Newest first</a>`}, nil},
		{"nothing found", "/search?q=xylophone+marimba+list%3Ademo", 200, []string{"0 messages found", "Nothing found. You could:", "put OR between words", "take out list:", "write xylophone* for every word"}, []string{`<ol class="results">` + "\n<li", "download (mbox.gz"}},
		{"hostile text is text", "/search?q=script", 200, []string{"&lt;script&gt;"}, []string{"<script>"}},
		{"empty: the help", "/search", 200, []string{`<table class="help">`, "from:ralf", "<code>flush*</code>", "<code>cache OR tlb</code>", "<code>dfn:setup.c</code>", "Times are UTC"}, []string{"found"}},
		{"a prefix", "/search?q=sprock*", 200, []string{"1 message found", "<mark>sprockets</mark>", `value="sprock*"`}, nil},
		{"OR", "/search?q=sprockets+OR+widgets", 200, []string{"4 messages found", "download (mbox.gz, the newest 1,000)", `href="/search?q=sprockets%20OR%20widgets&amp;x=m"`}, nil},
		{"one thread, one row", "/search?q=widgets+list%3Awidgets.example.org", 200, []string{"3 messages found", "and 2 more messages of this thread"}, nil},
		{"OR joining nothing", "/search?q=sprockets+OR", 400, []string{"This search cannot be run: OR at character 11 joins nothing", `<table class="help">`}, nil},
		{"NEAR()", "/search?q=NEAR%28sprockets+sizes%29", 400, []string{"NEAR(sprockets at character 1: NEAR(...) is not supported"}, nil},
		{"a short prefix", "/search?q=sp*", 400, []string{"sp* at character 1: give at least 3 letters or digits before the *"}, nil},
		{"a far date", "/search?q=sprockets+before%3A9999", 200, []string{"1 message found"}, nil},
		{"the year 1", "/search?q=after%3A0001", 200, []string{"found"}, []string{"cannot be run"}},
		{"JSON OR", "/api/v1/search?q=OR+b", 400, []string{`"error":`, "joins nothing"}, nil},
		{"a bad search", "/search?q=before%3Ayesterday", 400, []string{"This search cannot be run:", `<table class="help">`}, nil},
		{"a bad sort", "/search?q=x&sort=oldest", 400, []string{"newest or by relevance"}, nil},
		{"past the last page", "/search?q=archive&page=99", 404, []string{"no page 99"}, nil},
		{"JSON", "/api/v1/search?q=sprockets", 200, []string{`"query":"sprockets"`, `"total":1`, `"callnumber":"` + wrapper + `"`, `"excerpt":[`, `"match":true`}, nil},
		{"JSON bad search", "/api/v1/search?q=before%3Ayesterday", 400, []string{`"error":`}, nil},
		{"JSON empty", "/api/v1/search", 400, []string{"?q="}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, ca.srv.URL+tt.path)
			if r.status != tt.status {
				t.Fatalf("GET %s = %d, want %d: %s", tt.path, r.status, tt.status, r.body)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.body, s) {
					t.Errorf("GET %s does not contain %q:\n%s", tt.path, s, r.body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(r.body, s) {
					t.Errorf("GET %s contains %q:\n%s", tt.path, s, r.body)
				}
			}
			if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
				if err := unsafeHTML(r.body); err != nil {
					t.Errorf("GET %s: %v", tt.path, err)
				}
			} else if !json.Valid([]byte(r.body)) {
				t.Errorf("GET %s: invalid JSON", tt.path)
			}
		})
	}
	// Again, the excerpts from the text kept of the first search: the same
	// page.
	for _, path := range []string{"/search?q=sprockets+sizes", "/api/v1/search?q=archive"} {
		first := get(t, ca.srv.URL+path)
		if again := get(t, ca.srv.URL+path); again.body != first.body {
			t.Errorf("GET %s again:\n%s\nwant as the first time:\n%s", path, again.body, first.body)
		}
	}
	// The box leads there.
	r := get(t, ca.srv.URL+"/go?n=sprockets")
	if r.status != http.StatusFound || r.header.Get("Location") != "/search?q=sprockets" {
		t.Errorf("the box with a word = %d %q, want 302 to the search", r.status, r.header.Get("Location"))
	}
	// Without a catalog: 503.
	fa := newFixtureArchive(t)
	if r := get(t, fa.srv.URL+"/search?q=x"); r.status != http.StatusServiceUnavailable {
		t.Errorf("search without a catalog = %d, want 503", r.status)
	}
}

// TestListSearchBox: the box of a list page and of a month page
// searches that list, visibly.
func TestListSearchBox(t *testing.T) {
	ca := newCatalogArchive(t)
	for _, page := range []string{"/l/demo/", "/l/demo/2024-03/"} {
		r := get(t, ca.srv.URL+page)
		for _, s := range []string{`<form class="search" action="/go"`, `name="list" type="hidden" value="demo"`, `placeholder="Search demo"`, `<a class="help-link" href="/search">how to search</a>`} {
			if !strings.Contains(r.body, s) {
				t.Errorf("GET %s lacks %q", page, s)
			}
		}
	}
	// The box goes to /go, which searches that list.
	if r := get(t, ca.srv.URL+"/go?n=sprockets&list=demo"); r.status != 302 || r.header.Get("Location") != "/search?q=sprockets&list=demo" {
		t.Errorf("GET /go?n=sprockets&list=demo = %d to %q, want 302 to /search?q=sprockets&list=demo", r.status, r.header.Get("Location"))
	}
	if r := get(t, ca.srv.URL+"/search?q=archive&list=Not%20A%20List"); r.status != 400 {
		t.Errorf("GET /search with a bad list = %d, want 400", r.status)
	}
	// sprockets are only in a message of the list "hostile". The list
	// joins the query unless the query names lists with list: itself,
	// as parsed: a word with "list:" in it is no list: operator.
	tests := []struct {
		name, q string
		status  int
		box     string // the query shown in the box
		found   string
	}{
		{"a word", "sprockets", 200, "sprockets list:demo", "0 messages found"},
		{"an unknown prefix ending in list:", "sprockets -xlist:y", 400, "sprockets -xlist:y list:demo", "xlist: at character 12 is not a search prefix"},
		{"an excluded phrase with list: in it", `sprockets -"xlist:y"`, 200, `sprockets -&#34;xlist:y&#34; list:demo`, "0 messages found"},
		{"a phrase with list: in it", `sprockets -"list:hostile"`, 200, `sprockets -&#34;list:hostile&#34; list:demo`, "0 messages found"},
		{"a word ending in list:", "sprockets blacklist:", 200, "sprockets blacklist: list:demo", "0 messages found"},
		{"list: named", "sprockets list:hostile", 200, "sprockets list:hostile", "1 message found"},
		{"LIST: named", "sprockets LIST:hostile", 200, "sprockets LIST:hostile", "1 message found"},
		{"a bad search", `sprockets "sizes`, 400, `sprockets &#34;sizes list:demo`, "the quote at character 11 is never closed"},
		{"a bad search naming a list", `sprockets "sizes list:hostile`, 400, `sprockets &#34;sizes list:hostile`, "never closed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := "/search?q=" + url.QueryEscape(tt.q) + "&list=demo"
			r := get(t, ca.srv.URL+path)
			if r.status != tt.status || !strings.Contains(r.body, `value="`+tt.box+`"`) || !strings.Contains(r.body, tt.found) {
				t.Errorf("GET %s = %d, want %d with %q in the box and %q:\n%s", path, r.status, tt.status, tt.box, tt.found, r.body)
			}
		})
	}
	if all := get(t, ca.srv.URL+"/search?q="+url.QueryEscape(`sprockets -"xlist:y"`)); !strings.Contains(all.body, "1 message found") {
		t.Errorf(`sprockets -"xlist:y" in every list: want the one message:\n%s`, all.body)
	}
}

// TestSearchExcerptDeep: a word 32 KiB into a quoted-printable text,
// past the part read first, is the one its excerpt shows and marks,
// whether the message is read for the search or the start of its text
// was kept by an earlier one.
func TestSearchExcerptDeep(t *testing.T) {
	ca := newCatalogArchive(t)
	filler := strings.Repeat("Nothing to see on this line of filler text, move on=\r\n please.\r\n", (32<<10)/60)
	msg := func(id, early, deep string) []byte {
		return []byte("From: Deep Diver <deep@example.org>\r\nSubject: a long message " + id + "\r\n" +
			"Date: Tue, 02 Jan 2024 10:00:00 +0000\r\nMessage-ID: <" + id + "@example.org>\r\n" +
			"MIME-Version: 1.0\r\nContent-Type: text/plain; charset=us-ascii\r\nContent-Transfer-Encoding: quoted-printable\r\n\r\n" +
			early + "\r\n" + filler + "The word is " + deep + " at last.\r\n")
	}
	ca.add(t, msg("deep-1", "Hello.", "zanzibar"), "demo")
	ca.add(t, msg("deep-2", "alpha comes first.", "quokka"), "demo")
	ca.sync(t)
	for _, tt := range []struct{ q, mark string }{
		{"zanzibar", "zanzibar"}, // read for this search, then read further
		{"alpha", "alpha"},       // in the first part, which is kept
		{"quokka", "quokka"},     // past the part kept: read again, whole
		{"quokka", "quokka"},     // the whole text kept
	} {
		r := get(t, ca.srv.URL+"/api/v1/search?q="+tt.q)
		var res struct {
			Total   int `json:"total"`
			Results []struct {
				Excerpt []struct {
					Text  string `json:"text"`
					Match bool   `json:"match"`
				} `json:"excerpt"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(r.body), &res); err != nil || res.Total != 1 || len(res.Results) != 1 {
			t.Fatalf("search %s: %v, %d found: %s", tt.q, err, res.Total, r.body)
		}
		marked := false
		for _, f := range res.Results[0].Excerpt {
			marked = marked || f.Match && strings.EqualFold(f.Text, tt.mark)
		}
		if !marked {
			t.Errorf("search %s: the excerpt does not mark %q: %+v", tt.q, tt.mark, res.Results[0].Excerpt)
		}
	}
}

// TestSearchFollowing: a message stored while the server follows the
// store is found by search, and is on its list's page, within 2 s of
// being stored (the bound), with the follower's default
// interval.
func TestSearchFollowing(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	a.put(t, []byte("From: A <a@example.org>\nSubject: first\nMessage-ID: <sf1@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nhello\n"), "live")
	srv := startServer(t, a.st, Options{Catalogs: following(t, a.st, openTestCatalog(t), catalog.FollowOptions{}, nil)})
	waitFor(t, "the first message on the list page", func() bool {
		return strings.Contains(get(t, srv+"/l/live/").body, "first")
	})
	for i, word := range []string{"quizzaciously", "zymurgical", "xanthophyll"} {
		subject := fmt.Sprintf("news %d", i)
		raw := fmt.Sprintf("From: B <b@example.org>\nSubject: %s\nMessage-ID: <sf-%d@example.org>\nDate: Mon, 1 Jan 2024 1%d:00:00 +0000\n\nThe word is %s.\n", subject, i, i+1, word)
		stored := time.Now()
		cn := a.put(t, []byte(raw), "live").String()
		found, listed := time.Duration(0), time.Duration(0)
		for found == 0 || listed == 0 {
			if time.Since(stored) > 2*time.Second {
				t.Fatalf("message %s, stored 2 s ago: found by search after %v, on the list page after %v (0: not yet)", cn, found, listed)
			}
			if found == 0 && strings.Contains(get(t, srv+"/api/v1/search?q="+word).body, `"callnumber":"`+cn+`"`) {
				found = time.Since(stored)
			}
			if listed == 0 && strings.Contains(get(t, srv+"/l/live/").body, subject) {
				listed = time.Since(stored)
			}
			time.Sleep(10 * time.Millisecond)
		}
		t.Logf("message %d: found by search %v and on its list's page %v after it was stored (follower interval %v)", i, found.Round(time.Millisecond), listed.Round(time.Millisecond), catalog.DefaultInterval)
	}
}
