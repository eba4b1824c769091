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
	// A patch from a list that rewrites From.
	f.Add([]byte("From: Ann via l <l@lists.example>\nX-Original-From: Ann <ann@example.org>\nList-Post: <mailto:l@lists.example>\n" +
		"Message-ID: <p'1@x>\nSubject: [PATCH] x\n\nlog\n---\ndiff --git a/a.c b/a.c\n--- a/a.c\n+++ b/a.c\n@@ -1 +1 @@\n-<old>\n+\"new\"\n-- \n2.39\n"))
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
		outlined, _ := outline(&catalog.Thread{List: "fuzz", Subject: v.Subject, Messages: 5, Nodes: []catalog.Node{{Message: m, Parent: -1}, {Message: m, Depth: 1}}}, "00000001", 1, func(j int) int { return j/messagesPerThreadPage + 1 }, "")
		render("thread.html", &threadView{CallNumber: "00000001", Self: "/t/00000001/", Thread: th, Page: 1, Pages: 1, Entries: []threadEntry{
			{Node: th.Nodes[0]}, {Node: th.Nodes[1], Current: true, View: v, NewSubject: true, Why: v.Subject},
		}, Outline: outlined})
		sum := []catalog.ThreadSummary{{Root: *m, Messages: 2, First: m.Date, Last: m.Date, InMonth: 1}}
		render("listpage.html", &listView{List: catalog.List{Name: "fuzz", Messages: 2}, Page: 1, Pages: 1, Threads: sum, Months: []catalog.Month{{Year: 2001, Month: 9, Messages: 2}}})
		render("month.html", &monthView{List: "fuzz", Year: 2001, Month: 9, Messages: 2, Threads: sum})
		link := linkOf(m)
		snd := catalog.RealSender(v.Header)
		m.Via = snd.Via
		page := checkPage(t, pageData{CallNumber: "00000001", Title: v.Subject, View: v, Replies: true, Nav: &navigation{
			List: "fuzz", Month: "2001-09", ThreadCN: "00000001", ThreadSubject: v.Subject, ThreadMessages: 2, Position: 1, ThreadPage: 1,
			Tree:       []treeRow{{Depth: 0}, {Depth: 1, Link: link, Current: true, NewSubject: true}, {Depth: 2, Link: link, NewSubject: true, SameFrom: true}},
			PrevByDate: link, NextInThread: link, Parent: link, Replies: []msgLink{*link}, Why: why(&catalog.Message{Joined: catalog.JoinedQuoting}),
			Copies: []catalog.Message{*m},
		}, Sender: &snd, Diffstat: diffstatOf(v), Reply: replyTo(v, from, snd), Copies: []catalog.Message{*m}})
		if err := unsafeHTML(page); err != nil {
			t.Fatalf("page.html of %q is unsafe: %v", raw, err)
		}
		// The reply line quotes every value for a shell.
		if r := replyTo(v, "l@lists.example", snd); r != nil && !strings.Contains(r.Git, "'"+strings.ReplaceAll("<"+v.MessageID+">", "'", `'\''`)+"'") {
			t.Fatalf("the git line %q does not quote the Message-ID %q", r.Git, v.MessageID)
		}
		results := []searchResult{{Message: *m, Excerpt: catalog.Excerpt(catalog.Text(v), strings.Fields(strings.ToLower(v.Subject)), excerptBytes)}, {Message: *m}}
		render("search.html", &searchView{Query: v.Subject + " x", Sort: "newest", Page: 1, Pages: 2, Total: 21, Results: results, Groups: group(results), Advice: []string{v.Subject}})
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
