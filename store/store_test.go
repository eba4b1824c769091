package store_test

import (
	"strings"
	"testing"

	"github.com/chibrary/chibrary/store"
)

// TestContentOf: copies of a message with headers or whitespace added in
// transit have its content digest; another body or another Message-ID
// have another; no Message-ID, none.
func TestContentOf(t *testing.T) {
	const id = "1234@example.org"
	msg := "From: a@example.org\nSubject: hello\nMessage-ID: <" + id + ">\n\nFirst line.\n\n  indented line\n>From the mbox.\n-- \nsig\n"
	want := store.ContentOf([]byte(msg), id)
	if want == (store.Digest{}) {
		t.Fatal("ContentOf(a message with a Message-ID) is zero")
	}
	if want == store.DigestOf([]byte(msg)) {
		t.Fatal("ContentOf is DigestOf: the two would collide in one index")
	}
	same := []struct{ name, raw string }{
		{"CRLF", strings.ReplaceAll(msg, "\n", "\r\n")},
		{"a blank line at the end", msg + "\n"},
		{"two blank lines at the end, CRLF", strings.ReplaceAll(msg, "\n", "\r\n") + "\r\n\r\n"},
		{"a blank line inside the body", strings.Replace(msg, "First line.\n", "First line.\n\n", 1)},
		{"a blank line lost", strings.Replace(msg, "First line.\n\n", "First line.\n", 1)},
		{"blank lines before the header", "\n\r\n" + msg},
		{"a Received header", "Received: from x by y; Mon, 1 Jan 2024 00:00:00 +0000\n" + msg},
		{"a folded header added", strings.Replace(msg, "Subject: hello\n", "Subject: hello\nX-Spam: no\n\tfolded\n", 1)},
		{"the subject tagged", strings.Replace(msg, "Subject: hello", "Subject: [list] hello", 1)},
		{"spaces and tabs at line ends", strings.Replace(msg, "First line.\n", "First line. \t \n", 1)},
		{"the signature separator's space lost", strings.Replace(msg, "-- \n", "--\n", 1)},
		{"mboxrd quoting", strings.Replace(msg, ">From the", ">>From the", 1)},
		{"mboxo unquoted", strings.Replace(msg, ">From the", "From the", 1)},
	}
	for _, c := range same {
		if got := store.ContentOf([]byte(c.raw), id); got != want {
			t.Errorf("ContentOf(%s) = %v, want the original's %v", c.name, got, want)
		}
	}
	other := []struct{ name, raw, id string }{
		{"a word changed", strings.Replace(msg, "First", "Last", 1), id},
		{"indentation changed", strings.Replace(msg, "  indented", "indented", 1), id},
		{"a line added", msg + "P.S.\n", id},
		{"a line break moved", strings.Replace(msg, "First line.\n", "First\nline.\n", 1), id},
		{"a quote that is not mbox quoting", strings.Replace(msg, ">From the", ">Fro the", 1), id},
		{"another Message-ID", msg, "other@example.org"},
		{"no body", "Message-ID: <" + id + ">\n", id},
	}
	for _, c := range other {
		if got := store.ContentOf([]byte(c.raw), c.id); got == want || got == (store.Digest{}) {
			t.Errorf("ContentOf(%s) = %v, want another digest than %v, not zero", c.name, got, want)
		}
	}
	if got := store.ContentOf([]byte(msg), ""); got != (store.Digest{}) {
		t.Errorf("ContentOf(no Message-ID) = %v, want zero", got)
	}
}
