package resolver

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// chromium returns the path of a Chromium binary, or skips the test.
func chromium(t *testing.T) string {
	t.Helper()
	for _, p := range []string{os.Getenv("CHIBRARY_CHROMIUM"), "/usr/bin/chromium", "/usr/bin/chromium-browser"} {
		if p == "" {
			continue
		}
		if _, err := os.Stat(p); err == nil {
			return p
		}
	}
	if p, err := exec.LookPath("chromium"); err == nil {
		return p
	}
	t.Skip("Chromium is not installed (apt-get install chromium, or set CHIBRARY_CHROMIUM): skipping the browser test")
	return ""
}

// browser starts a headless Chromium that reaches nothing but loopback.
func browser(t *testing.T) context.Context {
	t.Helper()
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(chromium(t)),
		chromedp.Headless,
		chromedp.NoSandbox,
		chromedp.DisableGPU,
		chromedp.NoFirstRun,
		chromedp.NoDefaultBrowserCheck,
		chromedp.UserDataDir(t.TempDir()),
		chromedp.Flag("disable-quic", true),
		chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true),
		chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-default-apps", true),
		chromedp.Flag("disable-extensions", true),
		chromedp.Flag("disable-breakpad", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.Flag("metrics-recording-only", true),
		chromedp.Flag("safebrowsing-disable-auto-update", true),
		chromedp.Flag("disable-features", "Translate,OptimizationHints,MediaRouter,InterestFeedContentSuggestions"),
		// Every name resolves to nothing, so no request leaves the machine
		// even if a page asked for one; the test server is an IP literal.
		chromedp.Flag("host-resolver-rules", "MAP * ~NOTFOUND, EXCLUDE 127.0.0.1"),
		// Loopback bypasses the proxy; anything else goes to a closed port.
		chromedp.Flag("proxy-server", "http://127.0.0.1:9"),
		chromedp.WindowSize(1000, 900),
	}
	ctx, cancel := context.WithTimeout(context.Background(), 6*time.Minute)
	t.Cleanup(cancel)
	actx, acancel := chromedp.NewExecAllocator(ctx, opts...)
	t.Cleanup(acancel)
	bctx, bcancel := chromedp.NewContext(actx)
	t.Cleanup(bcancel)
	if err := chromedp.Do(bctx); err != nil {
		t.Fatalf("cannot start Chromium: %v", err)
	}
	return bctx
}

func normalize(s string) string { return strings.Join(strings.Fields(s), " ") }

// screenshotDir is where TestBrowser saves its screenshots for a person
// to look at: $CHIBRARY_SCREENSHOT_DIR, else bin/screenshots in the
// module (bin/ is not versioned).
func screenshotDir(t *testing.T) string {
	t.Helper()
	dir := os.Getenv("CHIBRARY_SCREENSHOT_DIR")
	if dir == "" {
		dir = filepath.Join("..", "bin", "screenshots")
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatalf("cannot create the screenshot directory: %v", err)
	}
	abs, _ := filepath.Abs(dir)
	return abs
}

// viewports are the screens every page is checked and photographed on.
var viewports = []struct {
	name          string
	width, height int64
	mobile        bool
}{{"desktop", 1100, 900, false}, {"phone", 390, 844, true}}

func TestBrowser(t *testing.T) {
	chromium(t) // skips without one, before building anything
	// The shared corpus, when present: a catalog of its first messages,
	// for a list page and a thread page of real mail. Built before the
	// browser starts, whose time is limited.
	var corpus *httptest.Server
	var corpusThread catalog.ThreadSummary
	if testcorpus.Find() != "" {
		corpus, corpusThread = browserCorpus(t)
	}
	ctx := browser(t)
	fa := newFixtureArchive(t)
	ca := newCatalogArchive(t)
	shots := screenshotDir(t)
	t.Logf("screenshots in %s", shots)

	// A real message: the first of the shared corpus with a subject and a
	// plain-text body, or a fixture when the corpus is absent.
	raw := readFixture(t, "latin1.eml")
	if testcorpus.Find() != "" {
		for _, m := range readCorpus(t, 50) {
			v := mailview.Parse(m, mailview.Options{})
			if v.Subject != "" && len(v.Parts) > 0 && v.Parts[0].Text != "" && len(v.Attachments) == 0 {
				raw = m
				break
			}
		}
	} else {
		// The fixture archive holds latin1.eml already: the same
		// message under another Message-ID, so that it is stored again.
		t.Logf("shared corpus absent: using fixtures/web/latin1.eml")
		raw = bytes.Replace(raw, []byte("Message-ID: <"), []byte("Message-ID: <browser-"), 1)
	}
	n := fa.put(t, raw, "linux-mips")
	view := mailview.Parse(raw, mailview.Options{})
	var firstLine string
	for _, l := range strings.Split(view.Parts[0].Text, "\n") {
		if len(strings.TrimSpace(l)) > 10 {
			firstLine = normalize(l)
			break
		}
	}

	// load opens a page on a viewport and checks and photographs it
	// (shoot).
	load := func(t *testing.T, url, wait, name string, vp int) {
		t.Helper()
		v := viewports[vp]
		emulate := []chromedp.EmulateViewportOption{}
		if v.mobile {
			emulate = append(emulate, chromedp.EmulateMobile, chromedp.EmulateScale(2))
		}
		if err := chromedp.Do(ctx,
			chromedp.EmulateViewport(v.width, v.height, emulate...),
			chromedp.Navigate(url),
			chromedp.WaitVisible(chromedp.CSS(wait)),
		); err != nil {
			t.Fatalf("cannot load %s: %v", url, err)
		}
		shoot(t, ctx, shots, name, vp)
	}
	// submit types into the text box of a form of the page shown, sends
	// it with its button, and waits for the page it leads to to show
	// wait; then checks and photographs that page.
	submit := func(t *testing.T, form, typed, wait, name string, vp int) {
		t.Helper()
		if err := chromedp.Do(ctx,
			chromedp.SendKeys(chromedp.CSS(form+` input[name="n"]`), typed),
			chromedp.Click(chromedp.CSS(form+` button[type="submit"]`)),
			chromedp.WaitVisible(chromedp.CSS(wait)),
		); err != nil {
			t.Fatalf("cannot search for %q with %s: %v", typed, form, err)
		}
		shoot(t, ctx, shots, name, vp)
	}
	location := func(t *testing.T) *url.URL {
		t.Helper()
		loc, err := chromedp.Run(ctx, chromedp.Location())
		if err != nil {
			t.Fatal(err)
		}
		u, err := url.Parse(loc)
		if err != nil {
			t.Fatal(err)
		}
		return u
	}
	text := func(t *testing.T, sel string) string {
		t.Helper()
		s, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS(sel)))
		if err != nil {
			t.Fatalf("text of %s: %v", sel, err)
		}
		return normalize(s)
	}
	// texts returns the visible text of every element sel selects.
	texts := func(t *testing.T, sel string) []string {
		t.Helper()
		all, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`Array.from(document.querySelectorAll(`+strconv.Quote(sel)+`)).map(e => e.innerText)`))
		if err != nil {
			t.Fatalf("texts of %s: %v", sel, err)
		}
		for i := range all {
			all[i] = normalize(all[i])
		}
		return all
	}
	count := func(t *testing.T, sel string) int {
		t.Helper()
		n, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll(`+strconv.Quote(sel)+`).length`))
		if err != nil {
			t.Fatalf("count %s: %v", sel, err)
		}
		return n
	}
	// hasAll fails the test for each of want that got lacks.
	hasAll := func(t *testing.T, what, got string, want ...string) {
		t.Helper()
		for _, w := range want {
			if !strings.Contains(got, w) {
				t.Errorf("%s does not show %q:\n%s", what, w, got)
			}
		}
	}

	for vp, v := range viewports {
		t.Run(v.name, func(t *testing.T) {
			t.Run("message page", func(t *testing.T) {
				load(t, fa.srv.URL+"/"+n.String(), "section.body", "message", vp)
				title, err := chromedp.Run(ctx, chromedp.Title())
				if err != nil || title != view.Subject {
					t.Errorf("title = %q (%v), want %q", title, err, view.Subject)
				}
				if h1 := text(t, "h1"); h1 != normalize(view.Subject) {
					t.Errorf("visible h1 = %q, want %q", h1, view.Subject)
				}
				if body := text(t, "section.body"); !strings.Contains(body, firstLine) {
					t.Errorf("visible body does not contain %q:\n%s", firstLine, body)
				}
			})
			t.Run("index", func(t *testing.T) {
				load(t, ca.srv.URL+"/", "table.lists", "index", vp)
				if got := count(t, "table.lists tbody tr"); got < 5 {
					t.Errorf("%d lists shown, want the fixtures' lists", got)
				}
				// Each list with what its mail's List-Id says it is.
				if got := text(t, "table.lists"); !strings.Contains(got, "demo Demo Archive Discussion 20") {
					t.Errorf("the lists table does not show demo, described, with 20 messages:\n%s", got)
				}
			})
			t.Run("list", func(t *testing.T) {
				load(t, ca.srv.URL+"/l/demo/", "ol.threads", "list", vp)
				if got := text(t, "ol.threads li:first-child"); !strings.Contains(got, "A subject line that is long enough") {
					t.Errorf("first thread = %q, want the newest", got)
				}
				if got := count(t, "table.calendar a"); got != 1 {
					t.Errorf("%d months linked, want 1", got)
				}
			})
			t.Run("month", func(t *testing.T) {
				load(t, ca.srv.URL+"/l/demo/2024-03/", "ol.threads", "month", vp)
				if got := text(t, "h1"); got != "demo, March 2024" {
					t.Errorf("h1 = %q, want demo, March 2024", got)
				}
				if got, err := chromedp.Run(ctx, chromedp.Evaluate[string](`document.querySelector("form.search input[name=n]").placeholder`)); err != nil || got != "Search demo" {
					t.Errorf("the month's search box says %q (%v), want Search demo", got, err)
				}
			})
			t.Run("thread", func(t *testing.T) {
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "t1.1")+"/", "article.tmsg", "thread", vp)
				if got := count(t, "article.tmsg"); got != 5 {
					t.Errorf("%d messages on the thread page, want 5", got)
				}
				// Replies are indented under what they answer.
				left, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`Array.from(document.querySelectorAll("article.tmsg")).map(a => a.getBoundingClientRect().left)`))
				if err != nil || len(left) < 2 || !(left[1] > left[0]) {
					t.Errorf("left edges of the thread's messages = %v (%v), want the reply indented", left, err)
				}
			})
			// The hard threading cases of fixtures/threads (issue 11).
			t.Run("thread with a parent never archived", func(t *testing.T) {
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "p1")+"/", "article.tmsg", "thread-missing-parent", vp)
				if got := count(t, "article.tmsg"); got != 3 {
					t.Errorf("%d articles on the thread page, want 3: the missing message and its two answers", got)
				}
				if got := texts(t, "p.placeholder"); len(got) != 1 || got[0] != "A message that is not in the archive (<gone@example.org>)" {
					t.Errorf("placeholders = %q, want one saying <gone@example.org> is not in the archive", got)
				}
				hasAll(t, "the thread page", text(t, "main"), "first answer to a lost message", "second answer to it")
				load(t, ca.srv.URL+"/"+ca.cn(t, "p2"), "nav.thread", "message-missing-parent", vp)
				hasAll(t, "the message page of the second answer", text(t, "main"),
					"In reply to a message that is not in the archive: <gone@example.org>", "Message 2 of 2 in the thread")
			})
			t.Run("thread of a reference loop", func(t *testing.T) {
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "la")+"/", "article.tmsg", "thread-loop", vp)
				if got := count(t, "article.tmsg"); got != 3 {
					t.Errorf("%d messages on the thread page, want 3, each once", got)
				}
				if got := text(t, "h1"); got != "loop a" && got != "loop b" && got != "loop c" {
					t.Errorf("h1 = %q, want the subject of one of the loop", got)
				}
				hasAll(t, "the loop's thread page", text(t, "main"), "a names b", "b names a", "c names b, a and itself")
			})
			t.Run("a shared Message-ID", func(t *testing.T) {
				load(t, ca.srv.URL+"/m/same@example.org", "ul.list", "shared-message-id", vp)
				if got := text(t, "h1"); got != "Several messages share this Message-ID" {
					t.Errorf("h1 = %q", got)
				}
				if got := texts(t, "ul.list li span.subject"); !slices.Equal(got, []string{"shared", "shared, again"}) && !slices.Equal(got, []string{"shared, again", "shared"}) {
					t.Errorf("the messages listed = %q, want the two that share the ID", got)
				}
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "reply-to-same")+"/", "article.tmsg", "thread-shared-message-id", vp)
				hasAll(t, "the thread of a reply to the shared ID", text(t, "main"), "the first message with this ID", "a reply to that ID")
			})
			t.Run("thread grouped by subject", func(t *testing.T) {
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "pm1")+"/", "article.tmsg", "thread-pipermail", vp)
				if got := text(t, "h1"); got != "build failure on r4000" {
					t.Errorf("h1 = %q, want build failure on r4000", got)
				}
				// pm4, months later, starts a thread of its own.
				if got := count(t, "article.tmsg"); got != 3 {
					t.Errorf("%d messages on the thread page, want the 3 of the first week about the build failure", got)
				}
				if got := texts(t, "article.tmsg a.from"); !slices.Equal(got, []string{"X", "Y", "Z"}) {
					t.Errorf("senders on the thread page = %q, want X, Y, Z", got)
				}
			})
			if corpus != nil {
				t.Run("corpus list", func(t *testing.T) {
					load(t, corpus.URL+"/l/linux-mips/", "ol.threads", "corpus-list", vp)
					if got := count(t, "ol.threads li"); got != threadsPerPage {
						t.Errorf("%d threads on the corpus's list page, want %d", got, threadsPerPage)
					}
					if got := count(t, "table.calendar a"); got < 2 {
						t.Errorf("%d months linked on the corpus's list page, want several", got)
					}
				})
				t.Run("corpus thread", func(t *testing.T) {
					load(t, corpus.URL+"/t/"+corpusThread.Root.CallNumber+"/", "article.tmsg", "corpus-thread", vp)
					if got, want := text(t, "h1"), normalize(corpusThread.Root.Subject); got != want {
						t.Errorf("h1 = %q, want %q", got, want)
					}
					// Messages of the sample's thread (every 16th of the list)
					// answer messages it lacks: placeholders besides them.
					if got, want := count(t, "article.tmsg[id]"), min(corpusThread.Messages, messagesPerThreadPage); got != want {
						t.Errorf("%d messages on the corpus thread's page, want %d", got, want)
					}
					if got := count(t, "article.tmsg div.body"); got == 0 {
						t.Errorf("no message text on the corpus thread's page")
					}
				})
			}
			t.Run("search box", func(t *testing.T) {
				load(t, ca.srv.URL+"/", "table.lists", "index", vp)
				submit(t, "form.go", "never change", "ol.results", "search-typed", vp)
				if u := location(t); u.Path != "/search" || u.Query().Get("q") != "never change" {
					t.Errorf("the box led to %s, want /search?q=never+change", u)
				}
				if got := text(t, "h1"); got != "Search: never change" {
					t.Errorf("h1 = %q, want Search: never change", got)
				}
				if got := text(t, "p.lead"); !strings.Contains(got, "messages found") || strings.HasPrefix(got, "0 ") {
					t.Errorf("the results page says %q, want messages found", got)
				}
				marks := texts(t, "ol.results mark")
				if len(marks) < count(t, "ol.results li") {
					t.Errorf("%d words marked in %d results, want one at least in each", len(marks), count(t, "ol.results li"))
				}
				for _, m := range marks {
					if l := strings.ToLower(m); l != "never" && l != "change" {
						t.Errorf("marked %q, want only never and change", m)
					}
				}
				// The list page's box: its list joins the search, visibly.
				load(t, ca.srv.URL+"/l/demo/", "ol.threads", "list", vp)
				submit(t, "form.search", "archive", "ol.results", "search-list", vp)
				if got, err := chromedp.Run(ctx, chromedp.Value(chromedp.CSS(`form.search input[name="n"]`))); err != nil || got != "archive list:demo" {
					t.Errorf("the results page's box holds %q (%v), want archive list:demo", got, err)
				}
				for _, l := range texts(t, "ol.results span.meta a") {
					if l != "demo" {
						t.Errorf("a result of list %q in a search of demo", l)
					}
				}
				// A call number typed into the box goes to its message.
				cn := ca.cn(t, "t1.3")
				load(t, ca.srv.URL+"/", "table.lists", "index", vp)
				submit(t, "form.go", cn, "nav.thread", "search-callnumber", vp)
				if u := location(t); u.Path != "/"+cn {
					t.Errorf("the box with call number %s led to %s, want /%s", cn, u, cn)
				}
				hasAll(t, "the message the call number names", text(t, "nav.thread"), "Message 3 of 5 in the thread Call numbers for the archive")
				// A search that cannot be run says why, typed or not.
				load(t, ca.srv.URL+"/", "table.lists", "index", vp)
				submit(t, "form.go", "bugs OR", "p.problem", "search-bad", vp)
				hasAll(t, "the page of a bad search", text(t, "p.problem"), "OR at character 6 joins nothing")
				// OR joins two words.
				load(t, ca.srv.URL+"/", "table.lists", "index", vp)
				submit(t, "form.go", "sprockets OR panic", "ol.results", "search-or", vp)
				hasAll(t, "the results of sprockets OR panic", text(t, "ol.results"), "[Widgets] Sprocket sizes", "kernel panic")
			})
			t.Run("message in its thread", func(t *testing.T) {
				load(t, ca.srv.URL+"/"+ca.cn(t, "t1.3"), "nav.thread", "message-in-thread", vp)
				nav := text(t, "nav.thread")
				for _, want := range []string{"In reply to Re: Call numbers for the archive", "Message 3 of 5 in the thread Call numbers for the archive", "Next in thread"} {
					if !strings.Contains(nav, want) {
						t.Errorf("thread navigation does not say %q:\n%s", want, nav)
					}
				}
				if got := count(t, "ul.tree li"); got != 5 {
					t.Errorf("%d rows in the thread's tree, want 5", got)
				}
				if got := text(t, "ul.tree li.current"); got != "Grace Hopper 2024-03-04 23:26 UTC" {
					t.Errorf("the current row of the tree = %q", got)
				}
			})
			t.Run("search", func(t *testing.T) {
				load(t, ca.srv.URL+"/search?q=archive", "ol.results", "search", vp)
				// Grouped by thread: a row per thread, its other results under
				// its first.
				if got, also := count(t, "ol.results > li"), count(t, "ol.results p.also"); got < 3 || also == 0 {
					t.Errorf("%d rows (%d with more of their thread) for archive, want several, grouped", got, also)
				}
				if got := count(t, "ol.results mark"); got == 0 {
					t.Errorf("no word marked in the excerpts")
				}
			})
			// Reading real lists (issue 22): fixtures/lists.
			t.Run("thread split by pipermail", func(t *testing.T) {
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "s1")+"/", "article.tmsg", "thread-split-pipermail", vp)
				if got := texts(t, "article.tmsg a.from"); !slices.Equal(got, []string{"Alice Archer", "Bob Baker", "Alice Archer", "Carol Clark", "Hank Hill"}) {
					t.Errorf("senders on the thread page = %q, want the question, its answers without Re: and the reply with a broken In-Reply-To", got)
				}
				if got := count(t, "details.outline li"); got != 5 {
					t.Errorf("%d rows in the thread's outline, want 5", got)
				}
				hasAll(t, "the split thread", text(t, "main"), "under the message it quotes", "someone else had asked under the same subject")
			})
			t.Run("a list that rewrites From", func(t *testing.T) {
				load(t, ca.srv.URL+"/"+ca.cn(t, "dm2"), "section.reply", "message-dmarc-rewritten", vp)
				hasAll(t, "the message a list rewrote", text(t, "dl.fields"), "Jeremy Allison via samba-technical <samba-technical@lists.samba.org>", "Sender Jeremy Allison <jra@samba.org>")
				hasAll(t, "its reply instructions", text(t, "section.reply"), `git send-email \ --in-reply-to='<dm2@samba.org>' \ --to='samba-technical@lists.samba.org' \ --cc='jra@samba.org' \ /path/to/YOUR_REPLY`)
				load(t, ca.srv.URL+"/l/samba-technical.lists.samba.org/", "ol.threads", "list-dmarc", vp)
				if got := text(t, "ol.threads"); strings.Contains(got, " via ") {
					t.Errorf("the list's rows still say via:\n%s", got)
				}
			})
			t.Run("a message alone in its thread", func(t *testing.T) {
				// Nothing above the previous/next links: no rule and no
				// empty stripe above them.
				load(t, ca.srv.URL+"/"+ca.cn(t, "ar4"), "nav.thread", "message-alone", vp)
				border, err := chromedp.Run(ctx, chromedp.Evaluate[string](`(() => { const u = document.querySelector("nav.thread > ul.prevnext:first-child"); return u ? getComputedStyle(u).borderTopWidth + " " + getComputedStyle(u).paddingTop : "not first" })()`))
				if err != nil || border != "0px 0px" {
					t.Errorf("the previous/next links of a message alone in its thread: border and padding above %q (%v), want none", border, err)
				}
			})
			t.Run("a patch", func(t *testing.T) {
				load(t, ca.srv.URL+"/"+ca.cn(t, "series-3"), "details.diffstat", "message-patch", vp)
				if got := count(t, "table.diffstat tr"); got != 2 {
					t.Errorf("%d files in the diffstat, want 2", got)
				}
				colours, err := chromedp.Run(ctx, chromedp.Evaluate[[]string](`["span.da", "span.dd", "span.dk", "div.text pre"].map(s => getComputedStyle(document.querySelector("div.text " + s.replace("div.text ", "")) || document.body).color)`))
				if err != nil || len(colours) != 4 || colours[0] == colours[3] || colours[2] == colours[3] {
					t.Errorf("colours of added lines, deleted lines, hunks and text = %q (%v): the patch is not coloured", colours, err)
				}
			})
			t.Run("a patch series", func(t *testing.T) {
				load(t, ca.srv.URL+"/"+ca.cn(t, "series-2"), "ul.tree", "message-patch-series", vp)
				rows := texts(t, "ul.tree li")
				if len(rows) != 5 || !strings.HasPrefix(rows[1], "[PATCH 1/3] MIPS: c-r4k: fix the flush of the last line") || strings.Count(strings.Join(rows, "\n"), "A Developer") != 1 {
					t.Errorf("the series' tree = %q, want each patch by its whole subject, its sender said once", rows)
				}
				load(t, ca.srv.URL+"/t/"+ca.cn(t, "series-0")+"/", "details.outline", "thread-patch-series", vp)
				if got := count(t, "details.outline li"); got != 5 {
					t.Errorf("%d rows in the outline, want 5", got)
				}
			})
			t.Run("a message sent to two lists", func(t *testing.T) {
				copies := ca.byLabel["cross-1"]
				load(t, ca.srv.URL+"/"+copies[0], "p.copies", "message-cross-posted", vp)
				hasAll(t, "the first copy", text(t, "p.copies"), "Also archived in linux-kernel.kernel.example")
			})
			t.Run("a list page", func(t *testing.T) {
				load(t, ca.srv.URL+"/l/fetchmail/", "ol.threads", "list-fetchmail", vp)
				tops, err := chromedp.Run(ctx, chromedp.Evaluate[[]float64](`["table.calendar", "ol.threads"].map(s => document.querySelector(s).getBoundingClientRect().top)`))
				if err != nil || len(tops) != 2 || tops[0] > tops[1] {
					t.Errorf("tops of the calendar and the threads = %v (%v), want the calendar first", tops, err)
				}
				if got := texts(t, "ol.threads li .subject"); len(got) != 6 || got[0] != "IDLE support broken?" {
					t.Errorf("the list's threads = %q, want 6, the one received last first", got)
				}
			})
			t.Run("search results by thread", func(t *testing.T) {
				load(t, ca.srv.URL+"/search?q=idle+list%3Afetchmail", "ol.results", "search-grouped", vp)
				if got := count(t, "ol.results > li"); got != 3 {
					t.Errorf("%d rows for 7 results in 3 threads, want 3", got)
				}
				load(t, ca.srv.URL+"/search?q=xylophone+marimba", "div.advice", "search-nothing", vp)
				hasAll(t, "the advice", text(t, "div.advice"), "put OR between words")
			})
			t.Run("wrapped message", func(t *testing.T) {
				load(t, ca.srv.URL+"/"+ca.cn(t, "wrapper-1"), "section.embedded", "message-dmarc", vp)
				if got := text(t, "section.embedded"); !strings.Contains(got, "sprockets come in three sizes") || !strings.Contains(got, "Alice Example <alice@example.com>") {
					t.Errorf("the enclosed message does not show its sender and text:\n%s", got)
				}
				if got := count(t, `a[rel="nofollow noopener noreferrer"][href="https://example.org/sprockets"]`); got != 1 {
					t.Errorf("%d links to https://example.org/sprockets, want 1", got)
				}
			})
		})
	}

	// The control: the same browser does run a page's script, so the
	// checks below can fail.
	t.Run("control", func(t *testing.T) {
		ctl := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			w.Header().Set("Content-Type", "text/html; charset=utf-8")
			io.WriteString(w, `<!doctype html><title>x</title><body><script>document.title='pwned-control'</script>`)
		}))
		defer ctl.Close()
		if err := chromedp.Do(ctx, chromedp.Navigate(ctl.URL)); err != nil {
			t.Fatal(err)
		}
		if title, err := chromedp.Run(ctx, chromedp.Title()); err != nil || title != "pwned-control" {
			t.Fatalf("control page title = %q (%v), want pwned-control: this browser runs no script, the test proves nothing", title, err)
		}
	})

	t.Run("hostile messages run no script", func(t *testing.T) {
		for _, file := range []string{"hostile.eml", "hostile-plain.eml"} {
			t.Run(file, func(t *testing.T) {
				if err := chromedp.Do(ctx,
					chromedp.Navigate(fa.srv.URL+"/"+fa.numbers[file].String()),
					chromedp.WaitVisible(chromedp.CSS("section.body")),
					chromedp.Sleep(300*time.Millisecond), // let onload/onerror handlers fire, if any survived
				); err != nil {
					t.Fatalf("cannot load the page: %v", err)
				}
				title, err := chromedp.Run(ctx, chromedp.Title())
				if err != nil || strings.HasPrefix(title, "pwned") {
					t.Errorf("document.title = %q (%v): a hostile script ran", title, err)
				}
				want := mailview.Parse(readFixture(t, file), mailview.Options{}).Subject
				if title != want {
					t.Errorf("document.title = %q, want the subject as text %q", title, want)
				}
				count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script:not([src='/static/keys.js']), img, iframe, svg:not(.chart), object, embed, form:not([action='/go']), [onerror], [onload], [style]").length`))
				if err != nil || count != 0 {
					t.Errorf("%d active elements in the DOM (%v), want 0", count, err)
				}
				js, err := chromedp.Run(ctx, chromedp.Evaluate[int](`Array.from(document.querySelectorAll("a[href]")).filter(a => a.protocol === "javascript:").length`))
				if err != nil || js != 0 {
					t.Errorf("%d javascript: links (%v), want 0", js, err)
				}
				text, err := chromedp.Run(ctx, chromedp.Text(chromedp.CSS("body")))
				if err != nil || !strings.Contains(text, "document.title") && file == "hostile-plain.eml" {
					t.Errorf("the markup of the plain message is not shown as text (%v):\n%s", err, text)
				}
			})
		}
		// The pages that show hostile messages among others, and an HTML
		// attachment opened directly: it is downloaded, never rendered.
		pages := []struct{ path, wait string }{
			{"/l/hostile/", "ol.threads"},
			{"/l/hostile/2024-01/", "ol.threads"},
			{"/t/" + ca.cn(t, "hostile-1") + "/", "article.tmsg"},
			{"/t/" + ca.cn(t, "hostile-plain") + "/", "article.tmsg"},
			{"/" + ca.cn(t, "attachments-1") + "/attachments/0/evil.html", ""},
			{"/" + ca.cn(t, "attachments-1") + "/attachments/1/pic.svg", ""},
		}
		for _, p := range pages {
			t.Run(p.path, func(t *testing.T) {
				// Start from a known page: a download leaves it in place.
				if err := chromedp.Do(ctx, chromedp.Navigate(ca.srv.URL+"/")); err != nil {
					t.Fatal(err)
				}
				actions := []chromedp.Action[chromedp.Void]{chromedp.Navigate(ca.srv.URL + p.path)}
				if p.wait != "" {
					actions = append(actions, chromedp.WaitVisible(chromedp.CSS(p.wait)))
				}
				err := chromedp.Do(ctx, append(actions, chromedp.Sleep(300*time.Millisecond))...)
				if err != nil && p.wait != "" {
					t.Fatalf("cannot load the page: %v", err)
				}
				title, err := chromedp.Run(ctx, chromedp.Title())
				if err != nil || strings.HasPrefix(title, "pwned") {
					t.Errorf("document.title = %q (%v): a hostile script ran", title, err)
				}
				count, err := chromedp.Run(ctx, chromedp.Evaluate[int](`document.querySelectorAll("script:not([src='/static/keys.js']), img, iframe, svg:not(.chart), object, embed, form:not([action='/go']), [onerror], [onload], [style]").length`))
				if err != nil || count != 0 {
					t.Errorf("%d active elements in the DOM (%v), want 0", count, err)
				}
			})
		}
	})
}

// shoot checks what every page must be (the stylesheet applied, nothing
// wider than the screen) on the page the browser shows, and saves a
// screenshot of the whole page in dir as NAME-VIEWPORT.png.
func shoot(t *testing.T, ctx context.Context, dir, name string, vp int) {
	t.Helper()
	v := viewports[vp]
	loc, _ := chromedp.Run(ctx, chromedp.Location())
	// The stylesheet loaded under the CSP: main is width-limited.
	maxWidth, err := chromedp.Run(ctx, chromedp.Evaluate[string](`getComputedStyle(document.querySelector("main")).maxWidth`))
	if err != nil || maxWidth == "none" {
		t.Errorf("%s: main max-width = %q (%v): the stylesheet did not apply", loc, maxWidth, err)
	}
	// Nothing is wider than the viewport (readable on a phone).
	overflow, err := chromedp.Run(ctx, chromedp.Evaluate[bool](`document.documentElement.scrollWidth > document.documentElement.clientWidth + 1`))
	if err != nil || overflow {
		t.Errorf("%s scrolls sideways at %dpx (%v)", loc, v.width, err)
	}
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		t.Fatalf("screenshot: %v", err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+"-"+v.name+".png"), png, 0o644); err != nil {
		t.Fatal(err)
	}
}

// browserCorpus serves a catalog of the first 1,000 messages of the
// shared corpus (list linux-mips), and returns the thread with the most
// messages among the newest 200 (one with a subject).
func browserCorpus(t *testing.T) (*httptest.Server, catalog.ThreadSummary) {
	t.Helper()
	a := newArchive(t, boltstore.Options{})
	msgs := readCorpus(t, 1000)
	for start := 0; start < len(msgs); start += 500 {
		var batch []store.Message
		for _, raw := range msgs[start:min(start+500, len(msgs))] {
			batch = append(batch, a.message(t, raw, "linux-mips"))
		}
		if _, err := a.st.Put(t.Context(), batch); err != nil {
			t.Fatal(err)
		}
	}
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	threads, _, err := c.Threads(t.Context(), "linux-mips", 0, 200)
	if err != nil {
		t.Fatal(err)
	}
	var best catalog.ThreadSummary
	for _, th := range threads {
		if th.Messages > best.Messages && strings.TrimSpace(th.Root.Subject) != "" {
			best = th
		}
	}
	if best.Messages < 2 {
		t.Fatalf("no thread of several messages among the corpus's newest 200")
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	return srv, best
}
