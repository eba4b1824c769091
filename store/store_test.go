package store_test

import (
	"bytes"
	"crypto/sha256"
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

func BenchmarkContentOf(b *testing.B) {
	var sb strings.Builder
	sb.WriteString("From: a@example.org\nSubject: hello\nMessage-ID: <x@example.org>\n\n")
	for i := 0; sb.Len() < 4096; i++ {
		sb.WriteString("> a line of a typical reply, quoted, of some sixty characters\n")
		if i%10 == 0 {
			sb.WriteString("\n")
		}
	}
	raw := []byte(sb.String())
	b.Run("ContentOf", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			store.ContentOf(raw, "x@example.org")
		}
	})
	b.Run("DigestOf", func(b *testing.B) {
		b.SetBytes(int64(len(raw)))
		for b.Loop() {
			store.DigestOf(raw)
		}
	})
}

// contentRef is ContentOf written plainly, line by line: the oracle of
// FuzzContentOf.
func contentRef(raw []byte, id string) store.Digest {
	if id == "" {
		return store.Digest{}
	}
	var out []byte
	out = append(out, "chibrary content v1\x00"...)
	out = append(out, id...)
	out = append(out, 0)
	started, body := false, false
	for _, line := range strings.Split(string(raw), "\n") {
		line = strings.TrimRight(line, " \t\r")
		switch {
		case line == "" && !started:
			continue
		case !body:
			started = true
			body = line == ""
			continue
		case line == "":
			continue
		}
		if q := strings.TrimLeft(line, ">"); len(q) < len(line) && strings.HasPrefix(q, "From ") {
			line = q
		}
		out = append(out, line+"\n"...)
	}
	return store.Digest(sha256.Sum256(out))
}

// FuzzContentOf: ContentOf, which hashes runs of lines at a time, is the
// plain line-by-line reading; and CRLF line ends and a blank line added at
// the end never change it.
func FuzzContentOf(f *testing.F) {
	for _, s := range []string{
		"Message-ID: <a@b>\n\nbody\n",
		"\n\nSubject: x\n\n\n>From me\n>>From you\n> From no\n  \t\nlast line without LF",
		"Subject: x\r\n\r\nline \r\n\r\nline\r\n",
		"no body",
		"",
	} {
		f.Add([]byte(s), "a@b")
	}
	f.Fuzz(func(t *testing.T, raw []byte, id string) {
		got := store.ContentOf(raw, id)
		if want := contentRef(raw, id); got != want {
			t.Fatalf("ContentOf(%q, %q) = %v, want %v", raw, id, got, want)
		}
		crlf := bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n"))
		if again := store.ContentOf(append(crlf, '\n'), id); again != got && bytes.Contains(raw, []byte("\n")) && !bytes.Contains(raw, []byte("\r")) {
			t.Fatalf("ContentOf(%q with CRLF and a blank line) = %v, want %v", raw, again, got)
		}
	})
}
