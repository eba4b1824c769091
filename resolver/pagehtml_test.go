package resolver

import (
	"html/template"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/patch"
)

// pageTemplate is the message page as the html/template it was
// (testdata/page.tmpl), with the site's head and foot: what writePage
// must write.
var pageTemplate = template.Must(template.Must(template.New("").Funcs(funcs).ParseFS(assets, "templates/base.html")).Funcs(template.FuncMap{
	"size":       humanSize,
	"attname":    attachmentName,
	"text":       func(s string) template.HTML { return renderText(s, textOptions{}) },
	"foldedtext": func(s string) template.HTML { return renderText(s, textOptions{Fold: 6}) },
	"parts":      func(m *mailview.Message, folded bool) partsOf { return partsOf{m, folded} },
}).ParseFiles("testdata/page.tmpl"))

type partsOf struct {
	M      *mailview.Message
	Folded bool
}

// checkPage renders d with writePage and with pageTemplate, and its
// folded body with bodyHTML and the template, fails t unless they are
// the same bytes, and returns the page.
func checkPage(t testing.TB, d pageData) string {
	t.Helper()
	var want strings.Builder
	if err := pageTemplate.ExecuteTemplate(&want, "page", d); err != nil {
		t.Fatalf("the template: %v", err)
	}
	var got pageWriter
	writePage(&got, &d)
	if g, w := got.String(), want.String(); g != w {
		i := 0
		for i < min(len(g), len(w)) && g[i] == w[i] {
			i++
		}
		t.Fatalf("the page of %s differs from the template's at byte %d:\n got %q\nwant %q", d.CallNumber, i, g[max(0, i-80):min(len(g), i+80)], w[max(0, i-80):min(len(w), i+80)])
	}
	// And a thread page's body, whose long quotes fold.
	want.Reset()
	if err := pageTemplate.ExecuteTemplate(&want, "parts", partsOf{d.View, true}); err != nil {
		t.Fatalf("the template: %v", err)
	}
	if folded := string(bodyHTML(d.View, true)); folded != want.String() {
		t.Fatalf("the folded body of %s differs from the template's:\n got %q\nwant %q", d.CallNumber, folded, want.String())
	}
	return got.String()
}

// TestMessagePageHTML: writePage writes what the page's html/template
// wrote, escapes and all, for every branch of the page with hostile
// values in each, for every fixture, and for every message of the corpus
// in its thread.
func TestMessagePageHTML(t *testing.T) {
	hostile := `<script>alert("x")</script> & 'q' a+b ` + "\x00 \xff\xfe \ufdd0 \uffff \u202e" + ` %41 %zz </a> <!-- --> javascript:x`
	at := time.Date(2019, 2, 3, 4, 5, 6, 0, time.UTC)
	ml := &msgLink{CallNumber: "3kTMd2xB", Subject: hostile, From: hostile, Date: at}
	removed := &catalog.Removed{Date: at, Reason: hostile}
	embedded := &mailview.Message{
		Fields:    []mailview.Field{{Name: "Subject", Value: hostile}, {Name: "From", Value: hostile}},
		MessageID: hostile + "@x",
		Parts:     []mailview.Part{{Text: hostile}, {HTML: "<p>sanitized</p>"}, {Message: &mailview.Message{}}},
	}
	view := &mailview.Message{
		Fields:    []mailview.Field{{Name: "From", Value: hostile}, {Name: "Subject", Value: hostile}, {Name: "Date", Value: "Sun, 3 Feb 2019"}},
		MessageID: `a b"<c>@x%2F:y`,
		Parts:     []mailview.Part{{Text: "> quoted\n" + hostile + "\nhttps://example.org/a?b=c&d\n"}, {Message: embedded}, {HTML: "<b>x</b>"}},
		Attachments: []mailview.Attachment{
			{Name: hostile, Type: "application/octet-stream", Size: 12345},
			{Type: "message/rfc822", Size: -1}, {Type: "text/plain", Size: 1 << 30},
		},
		Truncated: true,
		Problems:  []string{hostile, "another"},
	}
	tree := []treeRow{
		{Depth: 0, Removed: removed},
		{Depth: 1, Link: ml, NewSubject: true},
		{Depth: 2, Link: ml, NewSubject: true, SameFrom: true, Current: true},
		{Depth: 3, Link: ml, Current: true},
		{Depth: 12, Link: &msgLink{CallNumber: "3kTMd2xC", Date: at}},
		{Depth: 4},
	}
	nav := func(change func(*navigation)) *navigation {
		n := &navigation{
			List: "linux-mips", Month: "2019-02", ThreadCN: "3kTMd2xB", ThreadSubject: hostile,
			ThreadMessages: 40, Position: 7, Tree: tree, TreeCut: true, ThreadPage: 2,
			PrevInThread: ml, NextInThread: ml, PrevByDate: ml, NextByDate: ml,
			Parent: ml, Replies: []msgLink{*ml, {CallNumber: "3kTMd2xD", Date: at}},
			Why: why(&catalog.Message{Joined: catalog.JoinedBySubject}), ListAddress: "l@x",
			Copies: []catalog.Message{{CallNumber: "3kTMd2xE", List: "other"}, {CallNumber: "3kTMd2xF", List: "third"}},
		}
		if change != nil {
			change(n)
		}
		return n
	}
	links := []link{{CallNumber: "3kTMd2xB", Subject: hostile, From: hostile}, {CallNumber: "3kTMd2xG"}}
	ds := &diffstat{Files: []patch.File{{Path: hostile, OldPath: "old+name", Added: 3, Deleted: 1}, {Path: "b.bin", Binary: true}}, More: 1, Added: 1, Deleted: 2, Truncated: true, Changed: 3}
	full := pageData{CallNumber: "3kTMd2xA", Title: hostile, View: view, List: "linux-mips", InReplyTo: links, References: links,
		Replies: true, Sender: &catalog.Sender{Name: hostile, Addr: hostile, Via: hostile}, Diffstat: ds,
		Reply: &replyInfo{To: hostile, Cc: []string{hostile}, Git: hostile, Mailto: "mailto:" + hostile}, Nav: nav(nil)}
	cases := []pageData{full, {CallNumber: "3kTMd2xA", Title: "(no subject)", View: &mailview.Message{}}}
	for _, change := range []func(*pageData){
		func(d *pageData) { d.Nav = nil },
		func(d *pageData) { d.Nav, d.InReplyTo = nil, nil },
		func(d *pageData) { d.Nav, d.References, d.List = nil, nil, "" },
		func(d *pageData) { d.Replies = false },
		func(d *pageData) { d.Nav = nav(func(n *navigation) { n.Parent = nil; n.ParentRemoved = removed }) },
		func(d *pageData) { d.Nav = nav(func(n *navigation) { n.Parent = nil; n.MissingParent = hostile }) },
		func(d *pageData) { d.Nav = nav(func(n *navigation) { n.Parent = nil }) },
		func(d *pageData) { d.Nav, d.InReplyTo = nav(func(n *navigation) { n.Parent = nil }), nil },
		func(d *pageData) {
			d.Nav = nav(func(n *navigation) {
				n.ThreadMessages, n.ThreadPage, n.Tree, n.TreeCut, n.Why, n.Copies, n.Replies = 1, 1, tree[:1], false, "", nil, nil
				n.PrevInThread, n.NextInThread, n.PrevByDate, n.NextByDate = nil, nil, nil, nil
			})
		},
		func(d *pageData) { d.Nav = nav(func(n *navigation) { n.ThreadPage, n.Tree = 1, nil }) },
		func(d *pageData) {
			d.Nav = nav(func(n *navigation) {
				n.PatchVersion, n.Versions = 2, []catalog.Version{{CallNumber: "2UrKPuW8", Version: 1, Date: time.Unix(1e9, 0)}, {CallNumber: "3kTMd2xB", Version: 3, Date: time.Unix(2e9, 0)}}
			})
		},
		func(d *pageData) {
			d.Nav = nav(func(n *navigation) {
				n.PatchVersion, n.Versions = 4, []catalog.Version{{CallNumber: "2UrKPuW8", Version: 1}}
			})
		},
		func(d *pageData) {
			d.Nav = nav(func(n *navigation) {
				n.PatchVersion, n.Stat, n.Series = 2, &catalog.Diffstat{Patches: 3, Files: 1, Added: 1, Deleted: 0}, true
				n.Versions = []catalog.Version{{CallNumber: "2UrKPuW8", Version: 1, Date: time.Unix(1e9, 0), Stat: &catalog.Diffstat{Patches: 1, Files: 2, Added: 10, Deleted: 1}}, {CallNumber: "3kTMd2xB", Version: 3}}
			})
		},
		func(d *pageData) {
			d.Reply, d.Sender, d.Diffstat = &replyInfo{Mailto: "javascript:alert(1)"}, &catalog.Sender{Via: "l"}, &diffstat{Added: 1, Deleted: 1, Changed: 1}
		},
		func(d *pageData) {
			d.Reply = &replyInfo{To: "l@example.org", Cc: []string{"a@example.org", "b@example.org", "c@example.org"}}
		},
	} {
		d := full
		change(&d)
		cases = append(cases, d)
	}
	for _, d := range cases {
		checkPage(t, d)
	}
	t.Run("fixtures", func(t *testing.T) { checkFixturePages(t) })
	t.Run("corpus", func(t *testing.T) { checkCorpusPages(t) })
}

// checkFixturePages checks the page of every fixture, on its own.
func checkFixturePages(t *testing.T) {
	fa := newFixtureArchive(t)
	s := New(fa.st, Options{})
	for _, name := range fixtureFiles {
		m, err := fa.st.Get(t.Context(), fa.numbers[name])
		if err != nil {
			t.Fatal(err)
		}
		d, _ := s.pageData(t.Context(), m, nil)
		checkPage(t, d)
	}
}

// checkCorpusPages checks the page of every message of the corpus, in
// its thread.
func checkCorpusPages(t *testing.T) {
	a, c, raws := corpusArchive(t)
	numbers := slices.Sorted(maps.Keys(raws))
	s := New(a.st, Options{Catalogs: keeper.Fixed(c)})
	for _, cn := range numbers {
		n, err := callnumber.Parse(cn)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.st.Get(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		nav := s.navigate(t.Context(), cn)
		if nav == nil {
			t.Fatalf("no navigation for %s", cn)
		}
		d, _ := s.pageData(t.Context(), m, nav)
		checkPage(t, d)
	}
}
