package resolver

import (
	"encoding/xml"
	"github.com/chibrary/chibrary/catalog/keeper"
	"mime"
	"net/http"
	"net/http/httptest"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store/boltstore"
)

// TestAttachmentDownloads: every attachment at its own URL, as a download
// with a Content-Type no browser runs.
func TestAttachmentDownloads(t *testing.T) {
	ca := newCatalogArchive(t)
	att, dmarc := ca.cn(t, "attachments-1"), ca.cn(t, "wrapper-1")
	tests := []struct {
		path, contentType, filename, body string
	}{
		{"/" + att + "/attachments/0/evil.html", "application/octet-stream", "evil.html", "<html><body><script>document.title='pwned-attachment'</script>HTML attachment</body></html>"},
		{"/" + att + "/attachments/1/pic.svg", "application/octet-stream", "pic.svg", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`},
		{"/" + att + "/attachments/2/fix.patch", "text/x-diff", "fix.patch", "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-bug\n+fix"},
		{"/" + att + "/attachments/2", "text/x-diff", "fix.patch", "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-bug\n+fix"},
		{"/" + att + "/attachments/2/any-name-at-all", "text/x-diff", "fix.patch", "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-bug\n+fix"},
		{"/" + dmarc + "/attachments/0/sizes.csv", "text/csv", "sizes.csv", "size,teeth\nsmall,12\nlarge,36"},
		{"/" + ca.cn(t, "alt-1") + "/attachments/0/pass%20txt.exe", "application/octet-stream", "pass txt.exe", "\x00\x01\x02\x03\x04\x05\x06\x07\x08\x09"},
	}
	for _, tt := range tests {
		t.Run(tt.path, func(t *testing.T) {
			r := get(t, ca.srv.URL+tt.path)
			if r.status != 200 || r.body != tt.body {
				t.Fatalf("GET %s = %d %q, want 200 %q", tt.path, r.status, r.body, tt.body)
			}
			h := r.header
			if h.Get("Content-Type") != tt.contentType || h.Get("X-Content-Type-Options") != "nosniff" || h.Get("Content-Security-Policy") != rawCSP {
				t.Errorf("GET %s: Content-Type %q, nosniff %q, CSP %q; want %q, nosniff, sandboxed", tt.path, h.Get("Content-Type"), h.Get("X-Content-Type-Options"), h.Get("Content-Security-Policy"), tt.contentType)
			}
			disp, params, err := mime.ParseMediaType(h.Get("Content-Disposition"))
			if err != nil || disp != "attachment" || params["filename"] != tt.filename {
				t.Errorf("GET %s Content-Disposition = %q, want attachment; filename=%q", tt.path, h.Get("Content-Disposition"), tt.filename)
			}
		})
	}
	// The enclosed message as a file of its own.
	r := get(t, ca.srv.URL+"/"+dmarc+"/attachments/1/attachment-1.eml")
	if r.status != 200 || r.header.Get("Content-Type") != "message/rfc822" || !strings.HasPrefix(r.body, "From: Alice Example <alice@example.com>\n") {
		t.Errorf("the enclosed message as a file = %d %q %q", r.status, r.header.Get("Content-Type"), r.body)
	}
	for _, path := range []string{"/" + att + "/attachments/3/x", "/" + att + "/attachments/-1/x", "/" + att + "/attachments/01/x", "/" + att + "/attachments/x", "/" + att + "/attachments/"} {
		if r := get(t, ca.srv.URL+path); r.status != 404 {
			t.Errorf("GET %s = %d, want 404", path, r.status)
		}
	}
	if r := get(t, ca.srv.URL+"/abcdefg-/attachments/0/x"); r.status != 400 {
		t.Errorf("GET an attachment of a malformed call number = %d, want 400", r.status)
	}
	// The message page links each attachment under its name.
	page := get(t, ca.srv.URL+"/"+att).body
	for _, s := range []string{`href="/` + att + `/attachments/0/evil.html" download>evil.html</a>`, `href="/` + att + `/attachments/2/fix.patch"`} {
		if !strings.Contains(page, s) {
			t.Errorf("the message page does not link %s:\n%s", s, page)
		}
	}
}

// TestMessagePageReading: links in text, quote levels, the Message-ID
// linked, an enclosed message shown as itself.
func TestMessagePageReading(t *testing.T) {
	ca := newCatalogArchive(t)
	r := get(t, ca.srv.URL+"/"+ca.cn(t, "wrapper-1"))
	for _, s := range []string{
		`<section class="embedded">`, `<dd>Alice Example &lt;alice@example.com&gt;</dd>`, "sprockets come in three sizes",
		`<a href="https://example.org/sprockets" rel="nofollow noopener noreferrer">https://example.org/sprockets</a>`,
		`<pre class="q q1">&gt; Which sizes are there?`, `<a href="/m/original-1@example.com">&lt;original-1@example.com&gt;</a>`,
		`<a href="/m/wrapper-1@lists.example.org">&lt;wrapper-1@lists.example.org&gt;</a>`, "Widgets mailing list",
	} {
		if !strings.Contains(r.body, s) {
			t.Errorf("the wrapped message's page does not contain %q:\n%s", s, r.body)
		}
	}
	if err := unsafeHTML(r.body); err != nil {
		t.Error(err)
	}
	// A Message-ID with characters that mean something in a URL.
	n := ca.add(t, []byte("Subject: odd id\nMessage-ID: <a/b?c#d%e@example.com>\n\nx\n"), "odd")
	r = get(t, ca.srv.URL+"/"+n)
	if !strings.Contains(r.body, `href="/m/a%2Fb%3Fc%23d%25e@example.com"`) {
		t.Errorf("the Message-ID link is not escaped:\n%s", r.body)
	}
	if r := get(t, ca.srv.URL+"/m/a%2Fb%3Fc%23d%25e@example.com"); r.status != 302 || r.header.Get("Location") != "/"+n {
		t.Errorf("following the Message-ID link = %d %q, want 302 to /%s", r.status, r.header.Get("Location"), n)
	}
}

// TestGoBox: the box takes a call number, a Message-ID or a URL.
func TestGoBox(t *testing.T) {
	ca := newCatalogArchive(t)
	cn := ca.cn(t, "t1.1")
	tests := []struct {
		in       string
		status   int
		location string
	}{
		{cn, 302, "/" + cn},
		{"  " + cn + "\n", 302, "/" + cn},
		{"<t1.1@example.org>", 302, "/m/t1.1@example.org"},
		{"t1.1@example.org", 302, "/m/t1.1@example.org"},
		{"mid:t1.1@example.org", 302, "/m/t1.1@example.org"},
		{"http://archive.example/" + cn, 302, "/" + cn},
		{"https://archive.example/" + cn + "/raw", 302, "/" + cn},
		{"https://archive.example/t/" + cn + "/", 302, "/" + cn},
		{"https://archive.example/t/" + cn + ".mbox.gz", 302, "/" + cn},
		{"https://archive.example/m/t1.1%40example.org", 302, "/m/t1.1@example.org"},
		{"https://lore.kernel.org/linux-mips/t1.1@example.org/", 302, "/m/t1.1@example.org"},
		{"https://lore.kernel.org/linux-mips/t1.1@example.org/T/#u", 302, "/m/t1.1@example.org"},
		{"/" + cn, 302, "/" + cn},
		{"<a/b?c#d%e@example.com>", 302, "/m/a%2Fb%3Fc%23d%25e@example.com"},
		{"//evil.example/x@y", 302, "/m/x@y"},
		{"", 400, ""},
		{"https://archive.example/l/demo/", 400, ""},
		{"https://archive.example/zzzzzzzz", 400, ""},
		// What names no message is searched for.
		{"nope", 302, "/search?q=nope"},
		{"<>", 302, "/search?q=%3C%3E"},
		{"Makefile", 302, "/search?q=Makefile"},
		{"nobody@example.org", 302, "/search?q=nobody%40example.org"},
		{"from:ada@example.org", 302, "/search?q=from%3Aada%40example.org"},
		{"cache flush", 302, "/search?q=cache+flush"},
		{"-r4000", 302, "/search?q=-r4000"},
	}
	for _, tt := range tests {
		r := get(t, ca.srv.URL+"/go?n="+url.QueryEscape(tt.in))
		if r.status != tt.status || r.header.Get("Location") != tt.location {
			t.Errorf("/go?n=%q = %d %q, want %d %q", tt.in, r.status, r.header.Get("Location"), tt.status, tt.location)
		}
	}
	// And the Message-ID route it leads to finds the message.
	if r := get(t, ca.srv.URL+"/m/t1.1@example.org"); r.status != 302 || r.header.Get("Location") != "/"+cn {
		t.Errorf("/m/t1.1@example.org = %d %q", r.status, r.header.Get("Location"))
	}
}

// FuzzGoTarget: whatever is typed into the box, the answer redirects
// to a path of this archive or says it cannot (400, or 404 for a call
// number this archive never issued).
func FuzzGoTarget(f *testing.F) {
	for _, s := range []string{"3kTMd2xB", "<x@example.org>", "mid:x%40y", "https://lore.kernel.org/l/x@y/", "//evil.example/", "/\\evil", "http://[::1]/m/%2F%2Fx@y", "@", "/m/"} {
		f.Add(s)
	}
	a := newArchive(f, boltstore.Options{})
	a.put(f, readFixture(f, "signed.eml"), "")
	s := New(a.st, Options{})
	f.Fuzz(func(t *testing.T, in string) {
		if tg, err := parseTarget(in); err == nil && (tg.CallNumber == "") == (tg.MessageID == "") {
			t.Fatalf("parseTarget(%q) = %+v: want exactly one of call number and Message-ID", in, tg)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", "/go?n="+url.QueryEscape(in), nil))
		switch w.Code {
		case http.StatusBadRequest, http.StatusNotFound:
		case http.StatusFound:
			loc := w.Header().Get("Location")
			u, err := url.Parse(loc)
			if err != nil || u.Host != "" || u.Scheme != "" || !strings.HasPrefix(loc, "/") || strings.HasPrefix(loc, "//") || strings.HasPrefix(loc, "/\\") {
				t.Fatalf("/go?n=%q redirects to %q, not a path of this archive", in, loc)
			}
		default:
			t.Fatalf("/go?n=%q = %d, want 302, 400 or 404", in, w.Code)
		}
	})
}

// TestFeed reads a list's feed as Atom (RFC 4287): required elements,
// permanent IDs, escaped text.
func TestFeed(t *testing.T) {
	ca := newCatalogArchive(t)
	srv, _ := serveWith(t, ca.st, Options{Catalogs: keeper.Fixed(ca.cat), BaseURL: "https://archive.example/"})
	for _, list := range []string{"demo", "hostile"} {
		r := get(t, srv.URL+"/l/"+list+"/atom.xml")
		if r.status != 200 || r.header.Get("Content-Type") != "application/atom+xml; charset=utf-8" {
			t.Fatalf("feed of %s = %d %q", list, r.status, r.header.Get("Content-Type"))
		}
		var f struct {
			XMLName xml.Name
			ID      string `xml:"id"`
			Title   string `xml:"title"`
			Updated string `xml:"updated"`
			Links   []struct {
				Rel  string `xml:"rel,attr"`
				Href string `xml:"href,attr"`
			} `xml:"link"`
			Entries []struct {
				ID      string `xml:"id"`
				Title   string `xml:"title"`
				Updated string `xml:"updated"`
				Author  struct {
					Name string `xml:"name"`
				} `xml:"author"`
				Link struct {
					Href string `xml:"href,attr"`
				} `xml:"link"`
				Content string `xml:"content"`
			} `xml:"entry"`
		}
		if err := xml.Unmarshal([]byte(r.body), &f); err != nil {
			t.Fatalf("feed of %s is not XML: %v\n%s", list, err, r.body)
		}
		if f.XMLName.Space != "http://www.w3.org/2005/Atom" || f.XMLName.Local != "feed" || f.ID != "https://archive.example/l/"+list+"/" || f.Title != list {
			t.Errorf("feed of %s: %v id %q title %q", list, f.XMLName, f.ID, f.Title)
		}
		if _, err := time.Parse(time.RFC3339, f.Updated); err != nil {
			t.Errorf("feed updated %q: %v", f.Updated, err)
		}
		if len(f.Links) != 2 || f.Links[0].Rel != "self" || f.Links[0].Href != "https://archive.example/l/"+list+"/atom.xml" {
			t.Errorf("feed links = %+v", f.Links)
		}
		recent, err := ca.cat.Recent(t.Context(), list, feedEntries)
		if err != nil {
			t.Fatal(err)
		}
		if len(f.Entries) != len(recent) || len(f.Entries) == 0 {
			t.Fatalf("feed of %s has %d entries, want %d", list, len(f.Entries), len(recent))
		}
		for i, e := range f.Entries {
			want := "https://archive.example/" + recent[i].CallNumber
			if e.ID != want || e.Link.Href != want || e.Title == "" || e.Author.Name == "" {
				t.Errorf("entry %d = %+v, want id and link %s, a title and an author", i, e, want)
			}
			if _, err := time.Parse(time.RFC3339, e.Updated); err != nil {
				t.Errorf("entry %d updated %q: %v", i, e.Updated, err)
			}
		}
		if list == "hostile" {
			for _, s := range []string{"<script", "<img", "<iframe"} {
				if strings.Contains(r.body, s) {
					t.Errorf("the feed carries markup %s unescaped:\n%s", s, r.body)
				}
			}
			found := false
			for _, e := range f.Entries {
				found = found || e.Title == "</title><script>document.title='pwned-plain'</script>"
			}
			if !found {
				t.Errorf("the hostile subject is not an entry title, as text")
			}
		}
	}
	// Without BaseURL, the request's host.
	r := get(t, ca.srv.URL+"/l/demo/atom.xml")
	if !strings.Contains(r.body, "<id>"+ca.srv.URL+"/l/demo/</id>") {
		t.Errorf("feed without BaseURL does not use the request's host:\n%s", r.body)
	}
	// A Host that is not a host name does not reach the feed.
	for host, want := range map[string]string{"archive.example:8080": "http://archive.example:8080", "[::1]:80": "http://[::1]:80", `evil"><x`: "http://localhost", "a/b": "http://localhost", "": "http://localhost"} {
		req := httptest.NewRequest("GET", "/l/demo/atom.xml", nil)
		req.Host = host
		if got := New(ca.st, Options{}).baseURL(req); got != want {
			t.Errorf("baseURL with Host %q = %q, want %q", host, got, want)
		}
	}
}
