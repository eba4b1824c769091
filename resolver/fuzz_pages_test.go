package resolver

import (
	"bytes"
	"encoding/xml"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// FuzzPages renders arbitrary mail on every page that shows it among
// others (a thread, a list's rows, a message in its thread, the search
// results) and in a feed: the HTML is safe and the feed is XML.
func FuzzPages(f *testing.F) {
	for _, name := range append(fixtureFiles, "dmarc.eml", "attachments.eml") {
		f.Add(readFixture(f, name))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := mailview.Parse(raw, mailview.Options{MaxTextBytes: 1 << 16})
		var from string
		for _, fl := range v.Fields {
			if fl.Name == "From" {
				from = fl.Value
			}
		}
		m := &catalog.Message{CallNumber: "00000001", List: "fuzz", Date: time.Unix(1e9, 0).UTC(), FromName: from, FromAddr: from, Subject: v.Subject, MessageID: v.MessageID}
		th := &catalog.Thread{List: "fuzz", Subject: v.Subject, Messages: 2, Nodes: []catalog.Node{
			{MessageID: v.MessageID + "-missing", Parent: -1, Children: []int{1}},
			{Message: m, Depth: 1, Parent: 0, MissingParent: v.MessageID + "-missing"},
		}}
		render := func(name string, data any) {
			var b strings.Builder
			if err := templates.ExecuteTemplate(&b, name, data); err != nil {
				t.Fatalf("cannot render %s: %v", name, err)
			}
			if err := unsafeHTML(b.String()); err != nil {
				t.Fatalf("%s of %q is unsafe: %v", name, raw, err)
			}
		}
		render("thread.html", &threadView{CallNumber: "00000001", Self: "/t/00000001/", Thread: th, Page: 1, Pages: 1, Entries: []threadEntry{
			{Node: th.Nodes[0]}, {Node: th.Nodes[1], Current: true, View: v, NewSubject: true},
		}})
		sum := []catalog.ThreadSummary{{Root: *m, Messages: 2, First: m.Date, Last: m.Date, InMonth: 1}}
		render("listpage.html", &listView{List: catalog.List{Name: "fuzz", Messages: 2}, Page: 1, Pages: 1, Threads: sum, Months: []catalog.Month{{Year: 2001, Month: 9, Messages: 2}}})
		render("month.html", &monthView{List: "fuzz", Year: 2001, Month: 9, Messages: 2, Threads: sum})
		link := linkOf(m)
		render("page.html", pageData{CallNumber: "00000001", Title: v.Subject, View: v, Replies: true, Nav: &navigation{
			List: "fuzz", Month: "2001-09", ThreadCN: "00000001", ThreadSubject: v.Subject, ThreadMessages: 2, Position: 1, ThreadPage: 1,
			Tree: []treeRow{{Depth: 0}, {Depth: 1, Link: link, Current: true, NewSubject: true}}, PrevByDate: link, NextInThread: link,
			Parent: link, Replies: []msgLink{*link},
		}})
		render("search.html", &searchView{Query: v.Subject + " x", Sort: "newest", Page: 1, Pages: 2, Total: 21, Results: []searchResult{
			{Message: *m, Excerpt: catalog.Excerpt(catalog.Text(v), strings.Fields(strings.ToLower(v.Subject)), excerptBytes)},
		}})
		// The feed: XML whatever the mail holds.
		var b bytes.Buffer
		feed := atomFeed{ID: "http://x/l/fuzz/", Title: "fuzz", Updated: atomTime(m.Date), Entries: []atomEntry{{
			ID: "http://x/00000001", Title: v.Subject, Updated: atomTime(m.Date), Author: atomPerson{Name: from},
			Content: &atomText{Type: "text", Text: catalog.Text(v)},
		}}}
		if err := xml.NewEncoder(&b).Encode(feed); err != nil {
			t.Fatalf("cannot encode the feed: %v", err)
		}
		var back atomFeed
		if err := xml.Unmarshal(b.Bytes(), &back); err != nil || len(back.Entries) != 1 {
			t.Fatalf("the feed of %q is not XML: %v\n%s", raw, err, b.Bytes())
		}
	})
}
