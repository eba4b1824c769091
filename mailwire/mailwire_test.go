package mailwire

import (
	"bytes"
	"testing"
)

func TestAppendCRLF(t *testing.T) {
	tests := []struct {
		name, raw, want string
		lines           int
	}{
		{"empty", "", "", 0},
		{"lf", "A: b\n\nbody\n", "A: b\r\n\r\nbody\r\n", 1},
		{"crlf kept", "A: b\r\n\r\nbody\r\n", "A: b\r\n\r\nbody\r\n", 1},
		{"mixed", "A: b\r\n\nx\ny\r\n", "A: b\r\n\r\nx\r\ny\r\n", 2},
		{"no final newline", "A: b\n\nx\ny", "A: b\r\n\r\nx\r\ny", 2},
		{"lone cr", "A: b\n\nx\ry\n", "A: b\r\n\r\nx\ry\r\n", 1},
		{"leading lf", "\nbody\n", "\r\nbody\r\n", 1},
		{"double lf", "\n\n", "\r\n\r\n", 1},
		{"header only", "A: b\n", "A: b\r\n", 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := AppendCRLF([]byte("x"), []byte(tt.raw))
			if string(got) != "x"+tt.want {
				t.Errorf("AppendCRLF(%q) = %q, want %q", tt.raw, got[1:], tt.want)
			}
			size, lines := Size([]byte(tt.raw))
			if size != int64(len(tt.want)) || lines != tt.lines {
				t.Errorf("Size(%q) = %d, %d, want %d, %d", tt.raw, size, lines, len(tt.want), tt.lines)
			}
		})
	}
}

func TestBodyStart(t *testing.T) {
	tests := []struct {
		raw  string
		want int
	}{
		{"", 0},
		{"A: b\n\nbody", 6},
		{"A: b\r\n\r\nbody", 8},
		{"A: b\n\r\nbody", 7},
		{"A: b\nC: d\n", 10},
		{"A: b", 4},
		{"\nbody", 1},
	}
	for _, tt := range tests {
		if got := BodyStart([]byte(tt.raw)); got != tt.want {
			t.Errorf("BodyStart(%q) = %d, want %d", tt.raw, got, tt.want)
		}
	}
}

// FuzzAppendCRLF checks the wire form's promises: its size is what Size
// says, it has no bare LF, it is its own wire form, and it reads back to
// the input once every CRLF is read as LF, where the input had no CR
// before an LF of its own.
func FuzzAppendCRLF(f *testing.F) {
	for _, s := range []string{"", "A: b\n\nbody\n", "A: b\r\n\r\nx\ny", "\r\n\n\r\r\n", "x\ry\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		w := AppendCRLF(nil, raw)
		size, lines := Size(raw)
		if size != int64(len(w)) {
			t.Fatalf("Size = %d, len(AppendCRLF) = %d", size, len(w))
		}
		for i, c := range w {
			if c == '\n' && (i == 0 || w[i-1] != '\r') {
				t.Fatalf("bare LF at %d of %q", i, w)
			}
		}
		if again := AppendCRLF(nil, w); !bytes.Equal(again, w) {
			t.Fatalf("AppendCRLF is not idempotent: %q, then %q", w, again)
		}
		lf := bytes.ReplaceAll(raw, []byte("\r\n"), []byte("\n"))
		if back := bytes.ReplaceAll(w, []byte("\r\n"), []byte("\n")); !bytes.Equal(back, lf) {
			t.Fatalf("the wire form %q reads back as %q, want %q", w, back, lf)
		}
		// The body's lines are the same counted in either form.
		if _, l2 := Size(w); l2 != lines {
			t.Fatalf("body lines %d in the stored form, %d in the wire form", lines, l2)
		}
		if b := BodyStart(raw); b < 0 || b > len(raw) {
			t.Fatalf("BodyStart = %d of %d bytes", b, len(raw))
		}
	})
}
