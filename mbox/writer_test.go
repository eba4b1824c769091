package mbox

import (
	"bytes"
	"errors"
	"io"
	"testing"
)

// rewrite reads in with format and writes every message back as mboxrd.
func rewrite(t testing.TB, in []byte, format Format) []byte {
	t.Helper()
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, it := range readAll(t, NewReader(bytes.NewReader(in), Options{Format: format})) {
		if it.err != nil {
			t.Fatalf("line %d: %v", it.line, it.err)
		}
		if err := w.WriteMessage(it.sep, []byte(it.raw)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return out.Bytes()
}

func TestWriterRoundTripFixtures(t *testing.T) {
	// Well-formed mboxrd files come back byte for byte.
	for _, name := range []string{"mboxrd.mbox", "crlf.mbox", "demo.mbox"} {
		t.Run(name, func(t *testing.T) {
			in := fixture(t, name)
			if out := rewrite(t, in, FormatMboxrd); !bytes.Equal(out, in) {
				t.Errorf("rewrite(%s) =\n%q\nwant\n%q", name, out, in)
			}
		})
	}
}

func TestWriteMboxrd(t *testing.T) {
	const sep = "From a@example.org Mon Jan  1 00:00:00 2001"
	tests := []struct {
		name string
		sep  string
		raw  string
		want string
	}{
		{"quoting", sep, "S: 1\n\nFrom x\n>From y\n>>From z\n> From w\nFrom\n", sep + "\nS: 1\n\n>From x\n>>From y\n>>>From z\n> From w\nFrom\n\n"},
		{"no final newline", sep, "S: 1\n\nb", sep + "\nS: 1\n\nb\n\n"},
		{"CRLF", sep, "S: 1\r\n\r\nFrom b", sep + "\r\nS: 1\r\n\r\n>From b\r\n\r\n"},
		{"empty", sep, "", sep + "\n\n"},
		{"default separator", "", "S: 1\n", DefaultSeparator + "\nS: 1\n\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var b bytes.Buffer
			if err := WriteMboxrd(&b, tt.sep, []byte(tt.raw)); err != nil {
				t.Fatal(err)
			}
			if b.String() != tt.want {
				t.Errorf("WriteMboxrd(%q, %q) wrote %q, want %q", tt.sep, tt.raw, b.String(), tt.want)
			}
		})
	}
}

func TestWriteMboxrdBadSeparator(t *testing.T) {
	for _, sep := range []string{"From nobody", "Subject: x", "From a@b Mon Jan  1 00:00:00 2001\nX", "From a@b Mon Jan  1 00:00:00 2001\r"} {
		var b bytes.Buffer
		if err := WriteMboxrd(&b, sep, []byte("S: 1\n")); !errors.Is(err, ErrBadSeparator) {
			t.Errorf("WriteMboxrd(%q) error %v, want %v", sep, err, ErrBadSeparator)
		}
	}
}

// WriteMboxrd writes one message to w as mboxrd (see Writer), for the
// tests of one message.
func WriteMboxrd(w io.Writer, separator string, raw []byte) error {
	mw := NewWriter(w)
	if err := mw.WriteMessage(separator, raw); err != nil {
		return err
	}
	return mw.Flush()
}
