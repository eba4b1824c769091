package resolver

import (
	"encoding/json"
	"net/http"
	"regexp"
	"slices"
	"sort"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/store/boltstore"
)

// threadJSONOf is what the test reads of /api/v1/threads/{callnumber}.
type threadJSONOf struct {
	Messages int `json:"messages"`
	Nodes    []struct {
		Message *struct {
			CallNumber string    `json:"callnumber"`
			Date       time.Time `json:"date"`
		} `json:"message"`
	} `json:"nodes"`
	Replies      int           `json:"replies"`
	Participants []Participant `json:"participants"`
}

func getThreadJSON(t *testing.T, url string) threadJSONOf {
	t.Helper()
	r := get(t, url)
	if r.status != http.StatusOK {
		t.Fatalf("GET %s = %d %s", url, r.status, r.body)
	}
	var th threadJSONOf
	if err := json.Unmarshal([]byte(r.body), &th); err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	return th
}

// TestThreadParticipants: a thread's page and JSON say how many replies
// and who took part, each sender once with their number of messages,
// most first.
func TestThreadParticipants(t *testing.T) {
	ca := newCatalogArchive(t)
	cn := ca.cn(t, "t1.1")
	th := getThreadJSON(t, ca.srv.URL+"/api/v1/threads/"+cn)
	want := []Participant{
		{Name: "Ada Lovelace", Address: "ada@example.org", Messages: 2},
		{Name: "Charles Babbage", Address: "charles@example.org", Messages: 1},
		{Name: "Grace Hopper", Address: "grace@example.net", Messages: 1},
		{Name: "Alan Turing", Address: "alan@example.com", Messages: 1},
	}
	if !slices.Equal(th.Participants, want) {
		t.Errorf("participants = %+v, want %+v", th.Participants, want)
	}
	if th.Replies != 4 {
		t.Errorf("replies = %d, want 4", th.Replies)
	}
	page := get(t, ca.srv.URL+"/t/"+cn+"/")
	for _, w := range []string{
		`4 replies, 4 participants: <span class="who">Ada Lovelace</span>&nbsp;(2), <span class="who">Charles Babbage</span>, `,
	} {
		if !strings.Contains(page.body, w) {
			t.Errorf("the thread page does not say %q", w)
		}
	}
	// A message that answers one never archived is a reply; the thread
	// of p1 (a placeholder and its two answers) has two, by two people.
	lost := getThreadJSON(t, ca.srv.URL+"/api/v1/threads/"+ca.cn(t, "p1"))
	if lost.Replies != 2 || len(lost.Participants) != 2 {
		t.Errorf("the thread of a lost message: %d replies by %+v, want 2 by 2", lost.Replies, lost.Participants)
	}
}

var articleID = regexp.MustCompile(`<article class="tmsg d(\d+)[^"]*" id="m([^"]+)"`)

// TestThreadViews: ?view=flat shows a thread's messages by date,
// unindented, without placeholders; the nested view is the default;
// each page names its one canonical URL, and links to the other pages
// of a view stay in it.
func TestThreadViews(t *testing.T) {
	ca := newCatalogArchive(t)
	differs := false
	for _, label := range []string{"t1.1", "s1", "p1", "la", "pm1", "series-0", "reply-to-same"} {
		cn := ca.cn(t, label)
		th := getThreadJSON(t, ca.srv.URL+"/api/v1/threads/"+cn)
		var nested []string
		type dated struct {
			cn   string
			date time.Time
		}
		var byDate []dated
		for _, n := range th.Nodes {
			if n.Message != nil {
				nested = append(nested, n.Message.CallNumber)
				byDate = append(byDate, dated{n.Message.CallNumber, n.Message.Date})
			}
		}
		sort.SliceStable(byDate, func(i, j int) bool { return byDate[i].date.Before(byDate[j].date) })
		var want []string
		for _, d := range byDate {
			want = append(want, d.cn)
		}
		differs = differs || !slices.Equal(want, nested)

		flat := get(t, ca.srv.URL+"/t/"+cn+"/?view=flat")
		if flat.status != http.StatusOK {
			t.Fatalf("GET /t/%s/?view=flat = %d", cn, flat.status)
		}
		var got []string
		for _, m := range articleID.FindAllStringSubmatch(flat.body, -1) {
			if m[1] != "0" {
				t.Errorf("%s: the flat view indents %s (d%s)", label, m[2], m[1])
			}
			got = append(got, m[2])
		}
		if !slices.Equal(got, want) {
			t.Errorf("%s: the flat view shows %q, want by date %q", label, got, want)
		}
		if strings.Contains(flat.body, `class="placeholder"`) && strings.Contains(flat.body, "<article class=\"tmsg d0\">") {
			t.Errorf("%s: the flat view shows a placeholder", label)
		}
		if w := `<link rel="canonical" href="/t/` + cn + `/?view=flat">`; !strings.Contains(flat.body, w) {
			t.Errorf("%s: the flat view does not say %s", label, w)
		}
		if !strings.Contains(flat.body, `<a href="/t/`+cn+`/">nested</a>`) {
			t.Errorf("%s: the flat view does not link the nested one", label)
		}
		for _, q := range []string{"", "?view=nested", "?page=1"} {
			r := get(t, ca.srv.URL+"/t/"+cn+"/"+q)
			if w := `<link rel="canonical" href="/t/` + cn + `/">`; !strings.Contains(r.body, w) {
				t.Errorf("%s: /t/%s/%s does not say %s", label, cn, q, w)
			}
			if !strings.Contains(r.body, `<a href="/t/`+cn+`/?view=flat">by date</a>`) {
				t.Errorf("%s: /t/%s/%s does not link the flat view", label, cn, q)
			}
		}
	}
	if !differs {
		t.Errorf("no thread tested reads differently by date and nested: the test proves nothing")
	}
	cn := ca.cn(t, "t1.1")
	if r := get(t, ca.srv.URL+"/t/"+cn+"/?view=sideways"); r.status != http.StatusBadRequest || !strings.Contains(r.body, "flat (by date)") {
		t.Errorf("?view=sideways = %d %q, want 400 naming the views", r.status, r.body)
	}
	// The two views are two pages, each with its own ETag.
	a, b := get(t, ca.srv.URL+"/t/"+cn+"/"), get(t, ca.srv.URL+"/t/"+cn+"/?view=flat")
	if a.header.Get("ETag") == "" || a.header.Get("ETag") == b.header.Get("ETag") {
		t.Errorf("ETags of the nested and flat views: %q and %q, want two", a.header.Get("ETag"), b.header.Get("ETag"))
	}
	if r := get(t, ca.srv.URL+"/t/"+cn+"/?view=flat", "If-None-Match", b.header.Get("ETag")); r.status != http.StatusNotModified {
		t.Errorf("the flat view with its ETag = %d, want 304", r.status)
	}
}

// TestThreadViewsPaged: the flat view of a long thread pages by date,
// and its pager and outline links keep ?view=flat.
func TestThreadViewsPaged(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	var cns []string
	for i := range messagesPerThreadPage + 7 {
		raw := "From: Poster " + strconv.Itoa(i) + " <p" + strconv.Itoa(i) + "@example.org>\nSubject: Re: long\nDate: " +
			time.Date(2020, 5, 1, 0, i, 0, 0, time.UTC).Format(time.RFC1123Z) + "\nMessage-ID: <long" + strconv.Itoa(i) + "@example.org>\n"
		if i > 0 {
			raw += "In-Reply-To: <long0@example.org>\n"
		}
		raw += "\nmessage " + strconv.Itoa(i) + "\n"
		cns = append(cns, a.put(t, []byte(raw), "l").String())
	}
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	root := cns[0]
	flat := get(t, srv.URL+"/t/"+root+"/?view=flat")
	if !strings.Contains(flat.body, `?page=2&amp;view=flat">Later →</a>`) {
		t.Errorf("the first page of the flat view does not link its second")
	}
	last := cns[len(cns)-1]
	if !strings.Contains(flat.body, `href="/t/`+root+`/?page=2&amp;view=flat#m`+last+`"`) {
		t.Errorf("the outline of the flat view does not link the last message on its second page")
	}
	second := get(t, srv.URL+"/t/"+root+"/?page=2&view=flat")
	if n := len(articleID.FindAllString(second.body, -1)); n != 7 {
		t.Errorf("%d messages on the second page of the flat view, want 7", n)
	}
	if !strings.Contains(second.body, `<link rel="canonical" href="/t/`+root+`/?page=2&amp;view=flat">`) {
		t.Errorf("the second page of the flat view does not name itself canonical")
	}
	// Without ?page=, the page that holds the message named.
	if r := get(t, srv.URL+"/t/"+last+"/?view=flat"); !strings.Contains(r.body, `id="m`+last+`"`) || !strings.Contains(r.body, "Page 2 of 2") {
		t.Errorf("/t/%s/?view=flat does not show the page that holds it", last)
	}
}
