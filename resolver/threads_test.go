package resolver

import (
	"context"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestThreadCases shows the hard threading cases of fixtures/threads on
// the thread and message pages.
func TestThreadCases(t *testing.T) {
	ca := newCatalogArchive(t)
	tests := []struct {
		name   string
		path   string
		has    []string
		hasNot []string
	}{
		{"two answers to a missing message: the thread", "/t/" + ca.cn(t, "p1") + "/", []string{
			`A message that is not in the archive (<a href="/m/gone@example.org" class="mid">&lt;gone@example.org&gt;</a>)`,
			`class="tmsg d1 current" id="m` + ca.cn(t, "p1") + `"`, `class="tmsg d1" id="m` + ca.cn(t, "p2") + `"`,
		}, nil},
		{"two answers to a missing message: one of them", "/" + ca.cn(t, "p2"), []string{
			"In reply to a message that is not in the archive: <span class=\"mid\">&lt;gone@example.org&gt;</span>",
			"Message 2 of 2 in the thread", `<span class="placeholder">a message not in the archive</span>`,
			`rel="prev" href="/` + ca.cn(t, "p1") + `">← Previous in thread`,
		}, []string{"In reply to <a"}},
		{"In-Reply-To only, parent missing", "/" + ca.cn(t, "q"), []string{"In reply to a message that is not in the archive: <span class=\"mid\">&lt;elsewhere@example.org&gt;</span>"}, nil},
		{"reply stored before its parent: labelled parent", "/" + ca.cn(t, "c"), []string{
			`In reply to <a href="/` + ca.cn(t, "b") + `">Re: widgets</a> <span class="meta"><span class="from">Bob</span>`,
			"Message 3 of 3 in the thread", `href="/l/widgets.example.org/"`, `href="/l/widgets.example.org/2001-01/"`,
		}, nil},
		{"the parent lists its reply", "/" + ca.cn(t, "a"), []string{
			"<h2>Replies</h2>", `<a href="/` + ca.cn(t, "b") + `">Re: widgets</a> <span class="meta"><span class="from">Bob</span>`,
			`rel="next" href="/` + ca.cn(t, "b") + `">Next in thread →`, `<span class="off">← Previous in thread</span>`,
		}, []string{"In reply to"}},
		{"by date in the list", "/" + ca.cn(t, "b"), []string{
			`<a class="bydate-prev" href="/` + ca.cn(t, "a") + `">← Previous by date</a>`,
			`<a class="bydate-next" href="/` + ca.cn(t, "d") + `">Next by date →</a>`,
		}, nil},
		{"joined by subject (no References)", "/" + ca.cn(t, "pm2"), []string{"In the thread of <a href=\"/" + ca.cn(t, "pm1") + "\">build failure on r4000</a>"}, []string{"In reply to"}},
		{"a loop of References", "/t/" + ca.cn(t, "la") + "/", []string{`id="m` + ca.cn(t, "la") + `"`, `id="m` + ca.cn(t, "lb") + `"`, `id="m` + ca.cn(t, "lc") + `"`}, nil},
		{"a reply to a shared Message-ID", "/t/" + ca.cn(t, "reply-to-same") + "/", []string{"a reply to that ID", "the first message with this ID"}, nil},
		{"a message without Message-ID", "/t/" + ca.byLabel[""][0] + "/", []string{"1 message,"}, nil},
		{"an enclosed message on the thread page", "/t/" + ca.cn(t, "wrapper-1") + "/", []string{`<section class="embedded">`, "sprockets come in three sizes"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, ca.srv.URL+tt.path)
			if r.status != 200 {
				t.Fatalf("GET %s = %d, want 200: %s", tt.path, r.status, r.body)
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
			if err := unsafeHTML(r.body); err != nil {
				t.Errorf("GET %s: %v", tt.path, err)
			}
		})
	}
}

// TestLongThread pages a thread longer than a page, and draws only part
// of its tree on a message page.
func TestLongThread(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	const n = messagesPerThreadPage*2 + 7
	var cns []string
	for i := range n {
		raw := "From: Poster " + strconv.Itoa(i) + " <p" + strconv.Itoa(i) + "@example.org>\nSubject: Re: a long one\nDate: " +
			time.Date(2020, 5, 1, 0, i, 0, 0, time.UTC).Format(time.RFC1123Z) + "\nMessage-ID: <long" + strconv.Itoa(i) + "@example.org>\n"
		if i > 0 {
			raw += "In-Reply-To: <long0@example.org>\n"
		}
		raw += "\nmessage " + strconv.Itoa(i) + "\n"
		cns = append(cns, a.put(t, []byte(raw), "long").String())
	}
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	last := cns[n-1]
	r := get(t, srv.URL+"/t/"+last+"/")
	if r.status != 200 || !strings.Contains(r.body, "Page 3 of 3") || !strings.Contains(r.body, `id="m`+last+`"`) || strings.Contains(r.body, `id="m`+cns[0]+`"`) {
		t.Errorf("GET /t/%s/ = %d: want page 3 of 3 with the message and without the first", last, r.status)
	}
	r = get(t, srv.URL+"/t/"+last+"/?page=1")
	if !strings.Contains(r.body, `id="m`+cns[0]+`"`) || !strings.Contains(r.body, `rel="next" href="/t/`+last+`/?page=2"`) || strings.Contains(r.body, `rel="prev"`) {
		t.Errorf("page 1 of the thread lacks its first message or its pager:\n%s", r.body)
	}
	if got := strings.Count(r.body, `<article class="tmsg`); got != messagesPerThreadPage {
		t.Errorf("page 1 shows %d messages, want %d", got, messagesPerThreadPage)
	}
	// The message page of a reply: its ancestors and some siblings, and a
	// link to the whole thread.
	mid := cns[n/2]
	r = get(t, srv.URL+"/"+mid)
	if rows := strings.Count(r.body, `<li class="d`); rows > maxTreeRows || rows < 2 {
		t.Errorf("the tree of a reply in a thread of %d has %d rows, want between 2 and %d", n, rows, maxTreeRows)
	}
	for _, s := range []string{"Part of the thread;", `<li class="d1 current"><strong>Poster ` + strconv.Itoa(n/2) + `</strong>`, `href="/t/` + mid + `/?page=2#m` + mid + `"`} {
		if !strings.Contains(r.body, s) {
			t.Errorf("GET /%s does not contain %q:\n%s", mid, s, r.body)
		}
	}
	if err := unsafeHTML(r.body); err != nil {
		t.Error(err)
	}
}

// TestCatalogBuilding: while a catalog that started empty is first built,
// its pages answer 503 with Retry-After and the progress, and the log says
// when it starts and when it is ready; then the pages work.
func TestCatalogBuilding(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	cn := a.put(t, readFixture(t, "signed.eml"), "building").String()
	gate := &gatedStore{Store: a.st, open: make(chan struct{})}
	c := openTestCatalog(t)
	var logs syncbuf.Buffer
	srv := startLoggedServer(t, gate, Options{Catalogs: following(t, gate, c, catalog.FollowOptions{Interval: 20 * time.Millisecond}, newTestLogger(&logs))}, &logs)
	for _, path := range []string{"/l/building/", "/api/v1/lists", "/t/" + cn + "/"} {
		r := get(t, srv+path)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") != "5" || !strings.Contains(r.body, "being built (0 of 1 messages indexed)") || strings.Contains(r.body, "catalog") {
			t.Errorf("GET %s while building = %d Retry-After %q %q; want 503, Retry-After 5, being built (0 of 1 messages indexed), in a reader's words (no \"catalog\")", path, r.status, r.header.Get("Retry-After"), r.body)
		}
	}
	if l := logs.String(); !strings.Contains(l, "level=INFO msg=\"building the catalog from the store") || !strings.Contains(l, "messages=1") {
		t.Errorf("the log does not say the catalog is being built, of how many messages:\n%s", l)
	}
	if r := get(t, srv+"/"+cn); r.status != 200 || strings.Contains(r.body, `class="thread"`) && strings.Contains(r.body, "Message 1 of") {
		t.Errorf("the message page while building = %d, want 200 without thread navigation", r.status)
	}
	if r := get(t, srv+"/"); !strings.Contains(r.body, "being built") {
		t.Errorf("the index while building does not say so:\n%s", r.body)
	}
	close(gate.open)
	waitFor(t, "the list page", func() bool { return get(t, srv+"/l/building/").status == 200 })
	if l := logs.String(); !strings.Contains(l, "msg=\"the catalog is ready\"") {
		t.Errorf("the log does not say when the catalog is ready:\n%s", l)
	}
}

// TestFollowing: a message stored while the server runs is on its list's
// page, in its thread and in the feed soon after, without a restart.
func TestFollowing(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	first := a.put(t, []byte("From: A <a@example.org>\nSubject: first\nMessage-ID: <f1@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nhello\n"), "live")
	c := openTestCatalog(t)
	srv := startServer(t, a.st, Options{Catalogs: following(t, a.st, c, catalog.FollowOptions{}, nil)})
	waitFor(t, "the first message on the list page", func() bool {
		return strings.Contains(get(t, srv+"/l/live/").body, "first")
	})
	page := get(t, srv+"/"+first.String())
	start := time.Now()
	reply := a.put(t, []byte("From: B <b@example.org>\nSubject: Re: first\nMessage-ID: <f2@example.org>\nIn-Reply-To: <f1@example.org>\nDate: Mon, 1 Jan 2024 11:00:00 +0000\n\nhi\n"), "live")
	waitFor(t, "the reply on the list page", func() bool {
		return strings.Contains(get(t, srv+"/l/live/").body, "1 reply")
	})
	t.Logf("a new message was on its list's page %v after it was stored (follower interval %v)", time.Since(start).Round(time.Millisecond), catalog.DefaultInterval)
	// The first message's page now lists the reply: its ETag changed.
	again := get(t, srv+"/"+first.String(), "If-None-Match", page.header.Get("ETag"))
	if again.status != 200 || !strings.Contains(again.body, `<a href="/`+reply.String()+`">Re: first</a>`) {
		t.Errorf("the first message's page after the reply = %d, want 200 listing the reply:\n%s", again.status, again.body)
	}
	if cc := again.header.Get("Cache-Control"); cc != "no-cache" {
		t.Errorf("Cache-Control of a message page in a thread = %q, want no-cache", cc)
	}
	if r := get(t, srv+"/"+first.String(), "If-None-Match", again.header.Get("ETag")); r.status != http.StatusNotModified {
		t.Errorf("GET with the current ETag = %d, want 304", r.status)
	}
}

// TestFreshPages: list, month, thread and JSON pages carry an ETag of
// what they show and are revalidated: 304 while nothing changed.
func TestFreshPages(t *testing.T) {
	ca := newCatalogArchive(t)
	for _, path := range []string{"/l/demo/", "/l/demo/2024-03/", "/t/" + ca.cn(t, "t1.1") + "/", "/api/v1/lists", "/api/v1/lists/demo", "/api/v1/threads/" + ca.cn(t, "t1.1"), "/l/demo/atom.xml"} {
		r := get(t, ca.srv.URL+path)
		etag := r.header.Get("ETag")
		if etag == "" || r.header.Get("Cache-Control") != "no-cache" {
			t.Errorf("GET %s: ETag %q, Cache-Control %q; want an ETag and no-cache", path, etag, r.header.Get("Cache-Control"))
			continue
		}
		if r := get(t, ca.srv.URL+path, "If-None-Match", etag); r.status != http.StatusNotModified || r.body != "" {
			t.Errorf("GET %s If-None-Match %s = %d, want 304", path, etag, r.status)
		}
	}
	// A new thread changes the list page.
	before := get(t, ca.srv.URL+"/l/demo/").header.Get("ETag")
	ca.add(t, []byte("From: N <n@example.org>\nSubject: news\nMessage-ID: <news@example.org>\nDate: Mon, 11 Mar 2024 10:00:00 +0000\n\nnew\n"), "demo")
	ca.sync(t)
	if r := get(t, ca.srv.URL+"/l/demo/", "If-None-Match", before); r.status != 200 || !strings.Contains(r.body, "news") {
		t.Errorf("the list page after a new thread = %d, want 200 with it", r.status)
	}
	// A message's page, kept in the message page cache, shows a reply
	// indexed after it was kept.
	page := "/" + ca.cn(t, "t1.1")
	first := get(t, ca.srv.URL+page)
	if again := get(t, ca.srv.URL+page); again.body != first.body || again.header.Get("ETag") != first.header.Get("ETag") {
		t.Errorf("GET %s twice: different pages", page)
	}
	ca.add(t, []byte("From: R <r@example.org>\nSubject: Re: a late reply\nMessage-ID: <late@example.org>\nIn-Reply-To: <t1.1@example.org>\nDate: Tue, 12 Mar 2024 10:00:00 +0000\n\nlate\n"), "demo")
	ca.sync(t)
	if r := get(t, ca.srv.URL+page, "If-None-Match", first.header.Get("ETag")); r.status != 200 || !strings.Contains(r.body, "late reply") {
		t.Errorf("GET %s after a reply = %d, want 200 with the reply:\n%s", page, r.status, r.body)
	}
}

// gatedStore holds its change feed shut until open is closed: a catalog
// following it stays in its first pass.
type gatedStore struct {
	store.Store
	open chan struct{}
}

func (g *gatedStore) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	select {
	case <-g.open:
	case <-ctx.Done():
		return store.ChangePage{}, ctx.Err()
	}
	return g.Store.Changes(ctx, after, max)
}

// startServer runs Serve (and so the catalog's follower) on loopback
// until the test ends, and returns its base URL. The server's log is
// shown if the test fails.
func startServer(t *testing.T, st store.Store, opts Options) string {
	t.Helper()
	var logs syncbuf.Buffer
	return startLoggedServer(t, st, opts, &logs)
}

// following returns a keeper of c that follows st into it until the
// test ends; log nil discards its log.
func following(t testing.TB, st store.Store, c *catalog.Catalog, fo catalog.FollowOptions, log *slog.Logger) *keeper.Keeper {
	t.Helper()
	k := keeper.New(st, keeper.Options{Catalog: c, Follow: &fo, Logger: log})
	t.Cleanup(k.Start(context.Background()))
	return k
}

// startLoggedServer is startServer writing the server's log to logs.
func startLoggedServer(t *testing.T, st store.Store, opts Options, logs *syncbuf.Buffer) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	opts.Logger = newTestLogger(logs)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- New(st, opts).Serve(ctx, ln) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
		if t.Failed() {
			t.Logf("server log:\n%s", logs.String())
		}
	})
	return "http://" + ln.Addr().String()
}

// waitFor polls cond every 20 ms, failing the test after a minute: for
// what happens in the background, however slow the machine.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
