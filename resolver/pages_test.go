package resolver

import (
	"encoding/json"
	"fmt"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
)

// TestPageRoutes serves every route of the reading side, HTML and JSON,
// with its errors, on the fixtures.
func TestPageRoutes(t *testing.T) {
	ca := newCatalogArchive(t)
	t1 := ca.cn(t, "t1.1") // the first message of the demo's first thread
	t1r := ca.cn(t, "t1.3")
	const html, js = "text/html; charset=utf-8", "application/json"
	tests := []struct {
		name        string
		path        string
		status      int
		contentType string
		location    string
		has         []string
		hasNot      []string
	}{
		{"index", "/", 200, html, "", []string{`href="/l/demo/"`, `href="/l/widgets.example.org/"`, `href="/l/lost/"`, `action="/go"`, "<td class=\"num\">20</td>"}, nil},
		{"lists JSON", "/api/v1/lists", 200, js, "", []string{`"name":"demo","messages":20`, `"name":"widgets.example.org"`}, nil},

		{"list", "/l/demo/", 200, html, "", []string{
			"<h1>demo</h1>", `href="/t/` + t1 + `/"`, "Call numbers for the archive", "Ada Lovelace", "4 replies",
			`href="/l/demo/2024-03/"`, `href="/l/demo/atom.xml"`, `href="/api/v1/lists/demo"`,
		}, []string{`rel="next"`}},
		{"list JSON", "/api/v1/lists/demo", 200, js, "", []string{`"list":{"name":"demo","messages":20`, `"page":1,"pages":1`, `"year":2024,"month":3,"messages":20`, `"callnumber":"` + t1 + `"`}, nil},
		{"list page 1", "/l/demo/?page=1", 200, html, "", []string{"Latest threads"}, nil},
		{"list page past the end", "/l/demo/?page=2", 404, html, "", []string{"has 1 pages of threads; there is no page 2"}, nil},
		{"list page 0", "/l/demo/?page=0", 400, html, "", []string{"Not a page number"}, nil},
		{"list page word", "/api/v1/lists/demo?page=two", 400, js, "", []string{`"error":"Not a page number`}, nil},
		{"list upper case", "/l/Demo/", 301, "", "/l/demo/", nil, nil},
		{"list upper case JSON", "/api/v1/lists/DEMO", 301, "", "/api/v1/lists/demo", nil, nil},
		{"list without slash", "/l/demo", 307, "", "/l/demo/", nil, nil}, // ServeMux's own redirect
		{"list unknown", "/l/no-such-list/", 404, html, "", []string{`There is no list named &#34;no-such-list&#34; in this archive.`}, nil},
		{"list unknown JSON", "/api/v1/lists/no-such-list", 404, js, "", []string{`"error":"There is no list named \"no-such-list\"`}, nil},
		{"list malformed", "/l/no%20such/", 400, html, "", []string{"Not a list name"}, nil},
		{"list malformed JSON", "/api/v1/lists/a!b", 400, js, "", []string{"Not a list name"}, nil},
		{"list root", "/l/", 301, "", "/", nil, nil},

		{"month", "/l/demo/2024-03/", 200, html, "", []string{"demo, March 2024", "20 messages in", `href="/t/` + t1 + `/"`, `href="/l/demo/2024-03.mbox.gz"`}, []string{`rel="prev"`, `rel="next"`}},
		{"month JSON", "/api/v1/lists/demo/2024-03", 200, js, "", []string{`"list":"demo","year":2024,"month":3,"messages":20`, `"in_month":5`}, nil},
		{"month without slash", "/l/demo/2024-03", 301, "", "/l/demo/2024-03/", nil, nil},
		{"month empty", "/l/demo/2024-04/", 404, html, "", []string{"List demo has no messages in April 2024."}, nil},
		{"month empty JSON", "/api/v1/lists/demo/1999-12", 404, js, "", []string{"no messages in December 1999"}, nil},
		{"month of unknown list", "/l/nope/2024-03/", 404, html, "", []string{"no list named"}, nil},
		{"month malformed", "/l/demo/2024-13/", 400, html, "", []string{"Not a month"}, nil},
		{"month malformed short", "/l/demo/24-3/", 400, html, "", []string{"Not a month"}, nil},
		{"month malformed JSON", "/api/v1/lists/demo/March", 400, js, "", []string{"Not a month"}, nil},
		{"month neighbours", "/l/dates/2001-01/", 200, html, "", []string{`rel="prev" href="/l/dates/2000-01/"`, `rel="next" href="/l/dates/`}, nil},

		{"thread", "/t/" + t1r + "/", 200, html, "", []string{
			"<h1>Call numbers for the archive</h1>", "5 messages", `id="m` + t1 + `"`, `class="tmsg d0"`, `class="tmsg d1`,
			`id="m` + t1r + `"`, "current", `href="/t/` + t1r + `.mbox.gz"`,
		}, nil},
		{"thread JSON", "/api/v1/threads/" + t1r, 200, js, "", []string{`"callnumber":"` + t1r + `"`, `"list":"demo"`, `"messages":5`, `"nodes":[{"message":{"callnumber":"` + t1 + `"`}, nil},
		{"thread without slash", "/t/" + t1, 301, "", "/t/" + t1 + "/", nil, nil},
		{"thread malformed", "/t/abcdefg-/", 400, html, "", []string{"at position 8; a call number is 8 letters and digits"}, nil},
		{"thread out of range", "/t/zzzzzzzz/", 404, html, "", []string{"No message in this archive has that call number."}, nil},
		{"thread without slash malformed", "/t/abc", 400, html, "", []string{"is 3 characters long; a call number is 8 letters and digits"}, nil},
		{"thread malformed JSON", "/api/v1/threads/abc", 400, js, "", []string{"is 3 characters long; a call number is 8 letters and digits"}, nil},
		{"thread unknown", "/t/" + ca.number(t, 1, 9999).String() + "/", 404, html, "", []string{"No message in this archive has that call number."}, nil},
		{"thread page past the end", "/t/" + t1 + "/?page=2", 404, html, "", []string{"This thread has 1 pages"}, nil},

		{"feed", "/l/demo/atom.xml", 200, "application/atom+xml; charset=utf-8", "", []string{`<feed xmlns="http://www.w3.org/2005/Atom">`, "<id>" + ca.srv.URL + "/" + t1 + "</id>"}, nil},
		{"feed unknown", "/l/nope/atom.xml", 404, html, "", []string{"no list named"}, nil},
		{"month download", "/l/demo/2024-03.mbox.gz", 200, "application/gzip", "", nil, nil},
		{"month download empty", "/l/demo/2023-03.mbox.gz", 404, html, "", []string{"no messages in March 2023"}, nil},
		{"month download malformed", "/l/demo/2023-3.mbox.gz", 400, html, "", []string{"Not a month"}, nil},
		{"thread download", "/t/" + t1 + ".mbox.gz", 200, "application/gzip", "", nil, nil},
		{"thread download unknown", "/t/" + ca.number(t, 1, 9999).String() + ".mbox.gz", 404, html, "", nil, nil},

		{"robots.txt", "/robots.txt", 200, "text/plain; charset=utf-8", "", []string{"User-agent: *", "Disallow: /api/"}, nil},
		{"favicon", "/favicon.ico", 200, "image/x-icon", "", nil, nil},
		{"stats", "/api/v1/stats", 200, js, "", []string{`"messages":`, `"catalog":{"messages":`, `"threads":`}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, ca.srv.URL+tt.path)
			if r.status != tt.status {
				t.Fatalf("GET %s status = %d, want %d; body %q", tt.path, r.status, tt.status, r.body)
			}
			if got := r.header.Get("Content-Type"); tt.contentType != "" && got != tt.contentType {
				t.Errorf("GET %s Content-Type = %q, want %q", tt.path, got, tt.contentType)
			}
			if got := r.header.Get("Location"); got != tt.location {
				t.Errorf("GET %s Location = %q, want %q", tt.path, got, tt.location)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.body, s) {
					t.Errorf("GET %s body does not contain %q:\n%s", tt.path, s, r.body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(r.body, s) {
					t.Errorf("GET %s body contains %q:\n%s", tt.path, s, r.body)
				}
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("GET %s X-Content-Type-Options = %q, want nosniff", tt.path, got)
			}
			switch ct := r.header.Get("Content-Type"); {
			case strings.HasPrefix(ct, "text/html"):
				if err := unsafeHTML(r.body); err != nil {
					t.Errorf("GET %s: %v\n%s", tt.path, err, r.body)
				}
				if got := r.header.Get("Content-Security-Policy"); got != wantCSP {
					t.Errorf("GET %s CSP = %q, want %q", tt.path, got, wantCSP)
				}
			case ct == js:
				if !json.Valid([]byte(r.body)) {
					t.Errorf("GET %s: invalid JSON %q", tt.path, r.body)
				}
			}
		})
	}
}

// TestPagesWithoutCatalog: without a catalog, its pages say so with 503
// and Retry-After; the message pages and the index work.
func TestPagesWithoutCatalog(t *testing.T) {
	fa := newFixtureArchive(t)
	n := fa.numbers["signed.eml"].String()
	for _, path := range []string{"/l/demo/", "/l/demo/2024-03/", "/t/" + n + "/", "/l/demo/atom.xml", "/l/demo/2024-03.mbox.gz", "/t/" + n + ".mbox.gz",
		"/api/v1/lists", "/api/v1/lists/demo", "/api/v1/lists/demo/2024-03", "/api/v1/threads/" + n} {
		r := get(t, fa.srv.URL+path)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("GET %s = %d, Retry-After %q; want 503 with Retry-After", path, r.status, r.header.Get("Retry-After"))
		}
		// In a reader's words: "the catalog" is the operator's.
		if !strings.Contains(r.body, "no index of its lists, months and threads") || strings.Contains(r.body, "catalog") {
			t.Errorf("GET %s body %q, want it to say there is no index of the lists, without \"catalog\"", path, r.body)
		}
	}
	for _, path := range []string{"/", "/" + n, "/" + n + "/raw", "/robots.txt"} {
		if r := get(t, fa.srv.URL+path); r.status != 200 {
			t.Errorf("GET %s = %d, want 200", path, r.status)
		}
	}
	if r := get(t, fa.srv.URL+"/"); !strings.Contains(r.body, "lists of this archive cannot be shown") {
		t.Errorf("index without a catalog does not say why there are no lists:\n%s", r.body)
	}
}

// TestReferenceLoopPages: a loop of References (a names b, b names a; c
// names b, a and itself) reads on the pages as the catalog threads it
// (catalog.TestReferenceLoop): b the root, a answering b, c answering a.
func TestReferenceLoopPages(t *testing.T) {
	ca := newCatalogArchive(t)
	la, lb, lc := ca.cn(t, "la"), ca.cn(t, "lb"), ca.cn(t, "lc")
	name := map[string]string{la: "la", lb: "lb", lc: "lc"}
	// The thread page: its messages in reading order, with their depth
	// and whom each answers.
	thread := get(t, ca.srv.URL+"/t/"+la+"/")
	if thread.status != 200 {
		t.Fatalf("GET /t/%s/ = %d", la, thread.status)
	}
	head := regexp.MustCompile(`^ class="tmsg d(\d)[^"]*" id="m(\w{8})">`)
	answers := regexp.MustCompile(`<p class="replyto">In reply to <a href="/t/\w{8}/#m(\w{8})"`)
	var got []string
	for _, art := range strings.Split(thread.body, "<article")[1:] {
		m := head.FindStringSubmatch(art)
		if m == nil {
			continue
		}
		row := strings.Repeat("  ", int(m[1][0]-'0')) + name[m[2]]
		if a := answers.FindStringSubmatch(art); a != nil {
			row += " answers " + name[a[1]]
		}
		got = append(got, row)
	}
	if want := []string{"lb", "  la answers lb", "    lc answers la"}; !slices.Equal(got, want) {
		t.Errorf("thread page of a loop:\n%s\nwant:\n%s\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"), thread.body)
	}
	// The message pages: each one's parent and replies.
	tests := []struct {
		cn, parent string
		replies    []string
	}{
		{lb, "", []string{la}},
		{la, lb, []string{lc}},
		{lc, la, nil},
	}
	replyTo := regexp.MustCompile(`<p class="replyto">In reply to <a href="/(\w{8})">`)
	repliesSection := regexp.MustCompile(`(?s)<section class="replies">.*?</section>`)
	link := regexp.MustCompile(`<a href="/(\w{8})">`)
	for _, tt := range tests {
		r := get(t, ca.srv.URL+"/"+tt.cn)
		parent := ""
		if m := replyTo.FindStringSubmatch(r.body); m != nil {
			parent = m[1]
		}
		var replies []string
		for _, m := range link.FindAllStringSubmatch(repliesSection.FindString(r.body), -1) {
			replies = append(replies, m[1])
		}
		if r.status != 200 || parent != tt.parent || !slices.Equal(replies, tt.replies) {
			t.Errorf("page of %s: %d, in reply to %q, replies %q; want 200, %q (%s), %q", name[tt.cn], r.status, name[parent], replies, name[tt.parent], tt.parent, tt.replies)
		}
	}
}

// TestOutlineKeepsPlaceholders: a thread's outline has a row for a
// removed (or never archived) message, in its place, so that its replies
// stay indented under it rather than under nothing.
func TestOutlineKeepsPlaceholders(t *testing.T) {
	at := time.Date(2008, 11, 3, 10, 0, 0, 0, time.UTC)
	msg := func(cn string, min int) *catalog.Message {
		return &catalog.Message{CallNumber: cn, Subject: "the thread", Date: at.Add(time.Duration(min) * time.Minute)}
	}
	removed := &catalog.Removed{Date: at.AddDate(1, 0, 0), Reason: "spam"}
	th := &catalog.Thread{List: "l", Subject: "the thread", Messages: 5, Nodes: []catalog.Node{
		{Message: msg("00000001", 1), Parent: -1, Children: []int{1, 3, 4}},
		{MessageID: "gone@example.org", Depth: 1, Parent: 0, Children: []int{2}, Removed: removed},
		{Message: msg("00000005", 5), Depth: 2, Parent: 1, MissingParent: "gone@example.org", Removed: removed},
		{Message: msg("00000003", 3), Depth: 1, Parent: 0},
		{Message: msg("00000004", 4), Depth: 1, Parent: 0},
	}}
	rows, _ := outline(th, "00000001", 1, func(j int) int { return j/messagesPerThreadPage + 1 }, "")
	var got []string
	for _, r := range rows {
		s := fmt.Sprintf("%d ", r.Depth)
		switch {
		case r.Removed != nil:
			s += "removed"
		case r.Placeholder:
			s += "missing"
		default:
			s += r.Href[strings.Index(r.Href, "#"):]
		}
		got = append(got, s)
	}
	want := []string{"0 #m00000001", "1 removed", "2 #m00000005", "1 #m00000003", "1 #m00000004"}
	if !slices.Equal(got, want) {
		t.Errorf("outline() = %q, want %q", got, want)
	}
}
