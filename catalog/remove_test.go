package catalog

import (
	"bytes"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
)

// threadMail is a message of a thread: id replies to parent ("" for
// none), with a word found nowhere else in its body.
func threadMail(id, subject, word string, parents ...string) []byte {
	h := fmt.Sprintf("From: Poster %s <%s@example.org>\nSubject: %s\nMessage-ID: <%s@example.org>\nDate: Mon, 3 Nov 2008 10:00:%02d +0000\n", id, id, subject, id, len(id))
	if len(parents) > 0 {
		var refs []string
		for _, p := range parents {
			refs = append(refs, "<"+p+"@example.org>")
		}
		h += fmt.Sprintf("In-Reply-To: %s\nReferences: %s\n", refs[len(refs)-1], strings.Join(refs, " "))
	}
	return []byte(h + "\nSaid " + word + " here.\n")
}

// TestRemove: a removed message leaves its list, month, search and
// thread counts; the thread keeps its replies under a placeholder saying
// it was removed; a catalog rebuilt from the store shows the same; and
// the catalog's file keeps none of the removed message's words.
func TestRemove(t *testing.T) {
	a := newArchive(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	root := a.put(threadMail("root", "the thread", "rootword"), "l")
	middle := a.put(threadMail("middle", "Re: the thread", "zanzibarian", "root"), "l")
	leaf := a.put(threadMail("leaf", "Re: the thread", "leafword", "root", "middle"), "l")
	other := a.put(threadMail("other", "another thread", "otherword"), "l")
	mustSync(t, c, a.st)
	for _, word := range []string{"zanzibarian", "rootword"} {
		q, _ := ParseQuery(word)
		res, err := c.Search(t.Context(), q, SearchOptions{Limit: 10})
		if err != nil || len(res.Messages) != 1 {
			t.Fatalf("Search(%q) before the removal = %+v, %v", word, res, err)
		}
	}
	if got := shape(t, threadOf(t, c, leaf)); got != lines("root", "  middle", "    leaf") {
		t.Fatalf("thread before the removal:\n%s", got)
	}
	n, _, err := a.codec().Parse(middle)
	if err != nil {
		t.Fatal(err)
	}
	r, err := a.st.Remove(t.Context(), n, "at the author's request")
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)

	check := func(t *testing.T, c *Catalog) {
		t.Helper()
		if _, err := c.Message(t.Context(), middle); err == nil {
			t.Errorf("Message(removed) found it")
		}
		th := threadOf(t, c, leaf)
		if got := shape(t, th); got != lines("root", "  [middle]", "    leaf (missing middle)") {
			t.Errorf("thread after the removal:\n%s", got)
		}
		if th.Messages != 2 {
			t.Errorf("thread counts %d messages, want 2", th.Messages)
		}
		for _, node := range th.Nodes {
			wantRemoved := node.Message == nil || node.MissingParent != ""
			if got := node.Removed != nil; got != wantRemoved {
				t.Errorf("node %+v: Removed = %v, want %v", node, node.Removed, wantRemoved)
			} else if got && (node.Removed.Reason != "at the author's request" || !node.Removed.Date.Equal(r.Removed)) {
				t.Errorf("node %+v: Removed = %+v, want the removal", node, node.Removed)
			}
		}
		l, err := c.List(t.Context(), "l")
		if err != nil || l.Messages != 3 {
			t.Errorf("List(l) = %+v, %v; want 3 messages", l, err)
		}
		months, err := c.Months(t.Context(), "l")
		if err != nil || len(months) != 1 || months[0].Messages != 3 {
			t.Errorf("Months(l) = %+v, %v; want one of 3 messages", months, err)
		}
		for word, want := range map[string][]string{"zanzibarian": nil, "leafword": {leaf}, "otherword": {other}, "rootword": {root}} {
			q, err := ParseQuery(word)
			if err != nil {
				t.Fatal(err)
			}
			res, err := c.Search(t.Context(), q, SearchOptions{Limit: 10})
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, m := range res.Messages {
				got = append(got, m.CallNumber)
			}
			if !slices.Equal(got, want) {
				t.Errorf("Search(%q) = %v, want %v", word, got, want)
			}
		}
	}
	t.Run("followed", func(t *testing.T) { check(t, c) })
	rebuilt := filepath.Join(t.TempDir(), "rebuilt.db")
	if _, err := Rebuild(t.Context(), rebuilt, a.st, SyncOptions{}, Options{}); err != nil {
		t.Fatal(err)
	}
	rc, err := Open(t.Context(), rebuilt, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	t.Run("rebuilt", func(t *testing.T) { check(t, rc) })

	// Removing the root of a thread of one: the thread goes, and the
	// list's count.
	n, _, _ = a.codec().Parse(other)
	if _, err := a.st.Remove(t.Context(), n, ""); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	if _, total, err := c.Threads(t.Context(), "l", 0, 10); err != nil || total != 1 {
		t.Errorf("Threads(l) after removing a thread's only message: %d threads, %v; want 1", total, err)
	}
	// Nothing of the removed words is left in the catalog's files.
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{path, path + "-wal"} {
		b, err := os.ReadFile(p)
		if err != nil && !os.IsNotExist(err) {
			t.Fatal(err)
		}
		// (The removed message's Message-ID stays: the reply names it.)
		for _, word := range []string{"zanzibarian", "otherword", "Poster middle", "another thread"} {
			if bytes.Contains(b, []byte(word)) {
				t.Errorf("%s still holds %q, of a removed message", p, word)
			}
		}
	}
}

func (a *archive) codec() *callnumber.Codec {
	a.t.Helper()
	b, err := a.st.Binding(a.t.Context())
	if err != nil {
		a.t.Fatal(err)
	}
	c, err := b.Codec()
	if err != nil {
		a.t.Fatal(err)
	}
	return c
}

// TestRemovedKeepsItsPlace: a removed message's placeholder stays where
// the message was among its siblings, its replies under it, whether the
// catalog followed the removal or was rebuilt (resolver reindex) after it.
func TestRemovedKeepsItsPlace(t *testing.T) {
	mail := func(id string, minute int, parents ...string) []byte {
		h := fmt.Sprintf("From: Poster %s <%s@example.org>\nSubject: Re: the thread\nMessage-ID: <%s@example.org>\nDate: Mon, 3 Nov 2008 10:%02d:00 +0000\n", id, id, id, minute)
		if len(parents) > 0 {
			var refs []string
			for _, p := range parents {
				refs = append(refs, "<"+p+"@example.org>")
			}
			h += fmt.Sprintf("In-Reply-To: %s\nReferences: %s\n", refs[len(refs)-1], strings.Join(refs, " "))
		}
		return []byte(h + "\nSaid " + id + " here.\n")
	}
	a := newArchive(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { c.Close() }()
	root := a.put(mail("root", 1), "l")
	gone := a.put(mail("gone", 2, "root"), "l")
	a.put(mail("third", 3, "root"), "l")
	a.put(mail("fourth", 4, "root"), "l")
	a.put(mail("answer", 5, "root", "gone"), "l")
	mustSync(t, c, a.st)
	before := lines("root", "  gone", "    answer", "  third", "  fourth")
	if got := shape(t, threadOf(t, c, root)); got != before {
		t.Fatalf("thread before the removal:\n%s\nwant:\n%s", got, before)
	}
	n, _, err := a.codec().Parse(gone)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.Remove(t.Context(), n, "spam"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	want := lines("root", "  [gone]", "    answer (missing gone)", "  third", "  fourth")
	if got := shape(t, threadOf(t, c, root)); got != want {
		t.Errorf("thread after the removal:\n%s\nwant:\n%s", got, want)
	}
	rc, _, err := c.RebuildFrom(t.Context(), a.st, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	c.Close()
	c = rc
	if got := shape(t, threadOf(t, c, root)); got != want {
		t.Errorf("thread after the removal, rebuilt:\n%s\nwant:\n%s", got, want)
	}
}
