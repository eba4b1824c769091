package scalecorpus

import (
	"bytes"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mbox"
)

// FuzzTemplate takes any message apart and writes copy 3 of it as a
// tagging list distributes it: the mbox reader must read back exactly
// what was written, and taking the copy apart again must find the same
// fields (the list's and its server's Received line added, the sample
// list's gone), the same Message-ID tokens in each threading field, and
// the same body.
func FuzzTemplate(f *testing.F) {
	f.Add("From a@b Sat Feb 24 10:21:36 1996", []byte("Message-ID: <a@b>\nReferences: <x@y>\n <z@w>\nSubject: hi\nList-Id: <l.example>\n\nbody\n"))
	f.Fuzz(func(t *testing.T, sep string, raw []byte) {
		tp := parseTemplate(sep, raw)
		l := listHeaders{name: "linux-arm-kernel", server: "lists.example.org", tag: true}
		out, outSep := tp.render(nil, 3, 12345, -48*time.Hour, l)

		var b bytes.Buffer
		w := mbox.NewWriter(&b)
		if err := w.WriteMessage(outSep, out); err != nil {
			t.Fatalf("WriteMessage(%q) = %v", outSep, err)
		}
		if err := w.Flush(); err != nil {
			t.Fatal(err)
		}
		r := mbox.NewReader(&b, mbox.Options{Format: mbox.FormatMboxrd})
		m, err := r.Next()
		if err != nil {
			t.Fatalf("reading the copy back: %v", err)
		}
		// The writer ends a message that does not end in a newline
		// with one: a CR that ends it gets its LF.
		want := out
		switch {
		case bytes.HasSuffix(out, []byte("\n")):
		case bytes.HasSuffix(out, []byte("\r")):
			want = append(want, '\n')
		default:
			want = append(want, tp.eol...)
		}
		if !bytes.Equal(m.Raw, want) {
			t.Fatalf("read back %q, wrote %q", m.Raw, out)
		}
		if m.Separator != outSep {
			t.Errorf("read back From_ line %q, wrote %q", m.Separator, outSep)
		}
		if _, err := r.Next(); !errors.Is(err, io.EOF) {
			t.Fatalf("a second message after the copy: %v", err)
		}

		again := parseTemplate(outSep, out)
		var kept, ids []int
		for _, f := range tp.fields {
			if f.kind != droppedField {
				kept = append(kept, 0)
			}
			if f.kind == idsField {
				ids = append(ids, len(f.ids))
			}
		}
		var keptAgain, dropped int
		var idsAgain []int
		for _, f := range again.fields {
			switch f.kind {
			case droppedField:
				dropped++
			case idsField:
				idsAgain = append(idsAgain, len(f.ids))
				for _, o := range f.ids {
					if !bytes.HasPrefix(f.raw[o:], []byte("3.")) {
						t.Errorf("a token of %q lacks the copy's prefix", f.raw)
					}
				}
			}
			if f.kind != droppedField {
				keptAgain++
			}
		}
		if keptAgain != len(kept)+1 || dropped != 6 {
			t.Errorf("the copy has %d fields kept and %d list fields, want %d and 6\n%q", keptAgain, dropped, len(kept)+1, out)
		}
		if len(ids) != len(idsAgain) {
			t.Fatalf("the copy has %d threading fields, want %d", len(idsAgain), len(ids))
		}
		for i := range ids {
			if ids[i] != idsAgain[i] {
				t.Errorf("threading field %d has %d tokens in the copy, want %d", i, idsAgain[i], ids[i])
			}
		}
		if !bytes.Equal(again.body, tp.body) && !(tp.body == nil && string(again.body) == tp.eol) {
			t.Errorf("the copy's body is %q, want %q", again.body, tp.body)
		}
	})
}
