package resolver

import (
	"bytes"
	"compress/gzip"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mbox"
)

// gunzipMbox reads a gzipped mboxrd answer into its messages.
func gunzipMbox(t *testing.T, body string) [][]byte {
	t.Helper()
	zr, err := gzip.NewReader(strings.NewReader(body))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	b, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("gunzip: %v", err)
	}
	return readMbox(t, bytes.NewReader(b), "answer", mbox.FormatMboxrd)
}

// sameMessages checks that got are the stored bytes of the call numbers
// want, in any order.
func sameMessages(t *testing.T, ca *catalogArchive, what string, got [][]byte, want ...string) {
	t.Helper()
	if len(got) != len(want) {
		t.Fatalf("%s: %d messages, want %d", what, len(got), len(want))
	}
	for _, cn := range want {
		if !slices.ContainsFunc(got, func(b []byte) bool { return bytes.Equal(b, ca.raws[cn]) }) {
			t.Errorf("%s lacks %s byte for byte", what, cn)
		}
	}
}

func hasAllOf(t *testing.T, what, body string, want ...string) {
	t.Helper()
	for _, w := range want {
		if !strings.Contains(body, w) {
			t.Errorf("%s does not contain %q:\n%s", what, w, body)
		}
	}
}

// TestReadingPages: what a reader of real lists missed (issue 22), on the
// pages of fixtures/lists.
func TestReadingPages(t *testing.T) {
	ca := newCatalogArchive(t)
	page := func(path string) string {
		t.Helper()
		r := get(t, ca.srv.URL+path)
		if r.status != http.StatusOK {
			t.Fatalf("GET %s = %d: %s", path, r.status, r.body)
		}
		if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			if err := unsafeHTML(r.body); err != nil {
				t.Errorf("GET %s is not safe HTML: %v", path, err)
			}
		}
		return r.body
	}
	t.Run("a rewritten sender", func(t *testing.T) {
		body := page("/" + ca.cn(t, "dm1"))
		hasAllOf(t, "the page of dm1", body,
			"Stefan Metzmacher via samba-technical &lt;samba-technical@lists.samba.org&gt;", // the From as received
			`<dd class="sender">Stefan Metzmacher &lt;metze@samba.org&gt;`)
	})
	t.Run("reply instructions", func(t *testing.T) {
		body := page("/" + ca.cn(t, "dm1"))
		hasAllOf(t, "the page of dm1", body,
			"git send-email \\\n    --in-reply-to=&#39;&lt;dm1@samba.org&gt;&#39; \\\n    --to=&#39;samba-technical@lists.samba.org&#39; \\\n    --cc=&#39;metze@samba.org&#39; \\\n    /path/to/YOUR_REPLY",
			`href="mailto:samba-technical@lists.samba.org?In-Reply-To=%3Cdm1@samba.org%3E&amp;Cc=metze@samba.org&amp;Subject=Re%3A%20%5BPATCH%5D%20smbd%3A%20fix%20the%20oplock%20break%20of%20a%20closed%20handle"`,
			`href="/`+ca.cn(t, "dm1")+`/raw"`)
		// A pipermail message names no list address, nor does its list.
		if body := page("/" + ca.cn(t, "s1")); strings.Contains(body, "git send-email") {
			t.Errorf("reply instructions without a list address")
		}
	})
	t.Run("a patch", func(t *testing.T) {
		body := page("/" + ca.cn(t, "series-3"))
		hasAllOf(t, "the page of series-3", body,
			"2 files changed, <span class=\"da\">5 insertions(+)</span>, <span class=\"dd\">0 deletions(-)</span>",
			`<td class="path">Documentation/mips/cache.rst</td><td class="num"><span class="da">+3</span> <span class="dd">-0</span>`,
			`<span class="dh">diff --git a/arch/mips/kernel/setup.c b/arch/mips/kernel/setup.c</span>`,
			`<span class="dk">@@ -800,6 +800,8 @@ void __init setup_arch(char **cmdline_p)</span>`,
			`<span class="da">+	pr_info(&#34;Primary data cache %ldkB\n&#34;, current_cpu_data.dcache.waysize &gt;&gt; 10);</span>`)
		// The signature after the last hunk is a signature.
		hasAllOf(t, "the page of series-3", body, `<pre class="sig">-- `)
	})
	t.Run("a patch series' thread box", func(t *testing.T) {
		body := page("/" + ca.cn(t, "series-2"))
		// Each patch by its full subject, the sender said once.
		hasAllOf(t, "the page of series-2", body,
			`<a href="/`+ca.cn(t, "series-1")+`">[PATCH 1/3] MIPS: c-r4k: fix the flush of the last line</a> <span class="meta"><time`,
			`<strong>[PATCH 2/3] MIPS: Kconfig: add CPU_R4K_CACHE_TLB</strong>`)
	})
	t.Run("why a message is where it is", func(t *testing.T) {
		body := page("/" + ca.cn(t, "s4"))
		hasAllOf(t, "the page of s4", body, "under the message it quotes", "In the thread of")
		thread := page("/t/" + ca.cn(t, "s1") + "/")
		hasAllOf(t, "the thread of s1", thread, "someone else had asked under the same subject days before")
	})
	t.Run("a cross-posted message", func(t *testing.T) {
		copies := ca.byLabel["cross-1"]
		body := page("/" + copies[0])
		hasAllOf(t, "the page of the first copy", body, `Also archived in <a href="/`+copies[1]+`">linux-kernel.kernel.example</a>`)
	})
	t.Run("a thread's outline", func(t *testing.T) {
		body := page("/t/" + ca.cn(t, "s1") + "/")
		hasAllOf(t, "the thread of s1", body, `<details class="outline" open>`, `<a href="/t/`+ca.cn(t, "s1")+`/#m`+ca.cn(t, "s3")+`">Carol Clark</a>`)
		if body := page("/t/" + ca.cn(t, "s8") + "/"); strings.Contains(body, `class="outline"`) {
			t.Errorf("a thread of 2 messages has an outline")
		}
	})
	t.Run("a list page", func(t *testing.T) {
		body := page("/l/oss/")
		// The calendar before the threads; "newest" by arrival: the
		// message dated 2003 but received in 2000 does not lead.
		if cal, threads := strings.Index(body, `class="calendar"`), strings.Index(body, `<ol class="threads">`); cal < 0 || threads < 0 || cal > threads {
			t.Errorf("the calendar (at %d) is not above the threads (at %d)", cal, threads)
		}
		if first, yamon := strings.Index(body, "no Received"), strings.Index(body, "Re: YAMON."); first < 0 || yamon < first {
			t.Errorf("the list page does not lead with the last message received")
		}
		hasAllOf(t, "the list page of oss", body, "2000-07-09 10:00 UTC", "from <time datetime=\"2000-07-06T10:00:00Z\">2000-07-06</time>")
	})
	t.Run("a thread's feed", func(t *testing.T) {
		r := get(t, ca.srv.URL+"/t/"+ca.cn(t, "series-0")+"/atom.xml")
		if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/atom+xml; charset=utf-8" {
			t.Fatalf("thread feed = %d %s", r.status, r.header.Get("Content-Type"))
		}
		// Newest first: the review, then the patches.
		review, cover := strings.Index(r.body, "Re: [PATCH 1/3]"), strings.LastIndex(r.body, "[PATCH 0/3]")
		if review < 0 || cover < 0 || review > cover || strings.Count(r.body, "<entry>") != 5 {
			t.Errorf("thread feed (review at %d, cover at %d, %d entries):\n%s", review, cover, strings.Count(r.body, "<entry>"), r.body)
		}
	})
}

// TestSearchMbox: a search's results as an mboxrd download (x=m, or a
// POST as public-inbox's clients send): the messages as stored.
func TestSearchMbox(t *testing.T) {
	ca := newCatalogArchive(t)
	r := get(t, ca.srv.URL+"/search?q=dfn%3Aarch%2Fmips%2FKconfig+OR+dfn%3Asetup.c&x=m")
	if r.status != http.StatusOK || r.header.Get("Content-Type") != "application/gzip" {
		t.Fatalf("search mbox = %d %s: %s", r.status, r.header.Get("Content-Type"), r.body)
	}
	sameMessages(t, ca, "the search's mbox", gunzipMbox(t, r.body), ca.cn(t, "series-2"), ca.cn(t, "series-3"))
	resp, err := http.PostForm(ca.srv.URL+"/all/?x=m&q="+url.QueryEscape("from:metze"), nil)
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("POST /all/?x=m = %d: %s", resp.StatusCode, b)
	}
	sameMessages(t, ca, "the POSTed search's mbox", gunzipMbox(t, string(b)), ca.cn(t, "dm1"))
	if r := get(t, ca.srv.URL+"/search?q=xylophone&x=m"); r.status != http.StatusNotFound {
		t.Errorf("a search that finds nothing as mbox = %d, want 404", r.status)
	}
	// A list's search is that list's.
	r = get(t, ca.srv.URL+"/fetchmail/?q=idle&x=m")
	if r.status != http.StatusOK {
		t.Fatalf("/fetchmail/?q=idle&x=m = %d: %s", r.status, r.body)
	}
	if got := gunzipMbox(t, r.body); len(got) != 7 {
		t.Errorf("/fetchmail/?q=idle&x=m = %d messages, want the 7 of fetchmail", len(got))
	}
}

// TestPublicInboxRoutes: lore's URLs, on this archive.
func TestPublicInboxRoutes(t *testing.T) {
	ca := newCatalogArchive(t)
	base := ca.srv.URL
	id := url.PathEscape("series-1@example.org")
	list := "linux-mips.vger.kernel.org"
	tests := []struct {
		path     string
		status   int
		location string
	}{
		{"/" + list + "/" + id, http.StatusMovedPermanently, base + "/" + list + "/" + id + "/"},
		{"/all/" + id, http.StatusMovedPermanently, base + "/" + list + "/" + id + "/"},
		{"/lost/" + id, http.StatusMovedPermanently, base + "/" + list + "/" + id + "/"}, // in another list: where it is
		{"/" + list + "/" + id + "/", http.StatusFound, "/" + ca.cn(t, "series-1")},
		{"/all/%3Cseries-1@example.org%3E/", http.StatusFound, "/" + ca.cn(t, "series-1")},
		{"/" + list + "/" + id + "/T/", http.StatusFound, "/t/" + ca.cn(t, "series-1") + "/#m" + ca.cn(t, "series-1")},
		{"/" + list + "/" + id + "/t.atom", http.StatusFound, "/t/" + ca.cn(t, "series-1") + "/atom.xml"},
		{"/" + list + "/nobody@example.org/", http.StatusNotFound, ""},
		{"/" + list + "/", http.StatusFound, "/l/" + list + "/"},
		{"/" + list + "/?q=cache", http.StatusFound, "/search?list=" + list + "&q=cache"},
		{"/" + list + "/new.atom", http.StatusMovedPermanently, "/l/" + list + "/atom.xml"},
		{"/nolist/", http.StatusNotFound, ""},
	}
	for _, tt := range tests {
		r := get(t, base+tt.path)
		if r.status != tt.status || r.header.Get("Location") != tt.location {
			t.Errorf("GET %s = %d %q, want %d %q", tt.path, r.status, r.header.Get("Location"), tt.status, tt.location)
		}
	}
	// A thread, as b4 fetches it: every message byte for byte.
	r := get(t, base+"/all/"+id+"/t.mbox.gz")
	if r.status != http.StatusOK {
		t.Fatalf("t.mbox.gz = %d: %s", r.status, r.body)
	}
	var want []string
	for _, l := range []string{"series-0", "series-1", "series-2", "series-3", "review-1"} {
		want = append(want, ca.cn(t, l))
	}
	sameMessages(t, ca, "t.mbox.gz", gunzipMbox(t, r.body), want...)
	// A cross-posted message: each list's copy and thread; all: both.
	cross := url.PathEscape("cross-1@example.org")
	copies := ca.byLabel["cross-1"]
	r = get(t, base+"/linux-kernel.kernel.example/"+cross+"/t.mbox.gz")
	sameMessages(t, ca, "linux-kernel's thread", gunzipMbox(t, r.body), copies[1], ca.cn(t, "cross-3"))
	r = get(t, base+"/all/"+cross+"/t.mbox.gz")
	sameMessages(t, ca, "every list's threads", gunzipMbox(t, r.body), copies[0], copies[1], ca.cn(t, "cross-2"), ca.cn(t, "cross-3"))
	if r := get(t, base+"/linux-mips.linux-mips.example/"+cross+"/"); r.header.Get("Location") != "/"+copies[0] {
		t.Errorf("the linux-mips copy = %q, want %s", r.header.Get("Location"), copies[0])
	}
	// raw: mboxrd text of the message.
	r = get(t, base+"/"+list+"/"+id+"/raw")
	if r.status != http.StatusOK || !strings.HasPrefix(r.header.Get("Content-Type"), "text/plain") {
		t.Fatalf("raw = %d %s", r.status, r.header.Get("Content-Type"))
	}
	sameMessages(t, ca, "raw", readMbox(t, strings.NewReader(r.body), "raw", mbox.FormatMboxrd), ca.cn(t, "series-1"))
	// The archive's own routes are not lists.
	if r := get(t, base+"/m/"+id); r.status != http.StatusFound || r.header.Get("Location") != "/"+ca.cn(t, "series-1") {
		t.Errorf("/m/ = %d %q", r.status, r.header.Get("Location"))
	}
}
