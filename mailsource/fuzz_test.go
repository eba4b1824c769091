package mailsource

import (
	"bytes"
	"context"
	"errors"
	"io"
	"testing"
)

func TestStartsWithField(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want bool
	}{
		{"Subject: x\n", true}, {"X-Weird_Name!: y", true}, {"Received:from", true},
		{"From a@b Mon Jan  1 00:00:00 2001\n", false}, {"From : x", false}, {": x", false},
		{"hello world\n", false}, {"\nSubject: x", false}, {"\xef\xbb\xbfSubject: x", false}, {"", false}, {"Subject", false},
	} {
		if got := startsWithField([]byte(tc.in)); got != tc.want {
			t.Errorf("startsWithField(%q) = %v, want %v", tc.in, got, tc.want)
		}
	}
}

// FuzzOpenStdin: any standard input opens and reads to the end without a
// panic; every item has bytes or an error, and single messages come back
// byte for byte.
func FuzzOpenStdin(f *testing.F) {
	f.Add([]byte("Subject: x\n\nbody\n"))
	f.Add([]byte("From a@b Mon Jan  1 00:00:00 2001\nS: 1\n\nb\n"))
	f.Add([]byte{0x1f, 0x8b, 8, 0, 0, 0, 0, 0, 0, 0xff})
	f.Add([]byte("BZh91AY&SY"))
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := Open(context.Background(), "-", Options{Stdin: bytes.NewReader(data), MaxMessageSize: 1 << 12})
		if err != nil {
			return // e.g. a broken gzip header
		}
		defer s.Close()
		for n := 0; ; n++ {
			if n > len(data)+2 {
				t.Fatalf("more items than input bytes")
			}
			it, err := s.Next()
			if errors.Is(err, io.EOF) {
				return
			}
			if err != nil {
				return // fatal, e.g. corrupt compressed data
			}
			if it.Err == nil && it.Raw == nil {
				t.Fatalf("item %s has neither bytes nor an error", it.Where)
			}
			if s.Format() == KindEML && it.Err == nil && !bytes.Equal(it.Raw, data) {
				t.Fatalf("single message %q, want the input %q", it.Raw, data)
			}
		}
	})
}

// FuzzLess: the reading order of a folder's files is a total order: a
// name equals only itself, and the order of two names does not depend on
// which is asked first, nor is it broken by a third.
func FuzzLess(f *testing.F) {
	for _, s := range [][3]string{
		{"2001-January.txt.gz", "2001-February.txt.gz", "2000-December.txt.gz"},
		{"list.mbox.9", "list.mbox.10", "list.mbox.010"},
		{"a/b.eml", "a.eml", "a/b/c.eml"},
		{"may", "May", "mayday"},
		{"99999999999999999999", "1", "x"},
	} {
		f.Add(s[0], s[1], s[2])
	}
	f.Fuzz(func(t *testing.T, a, b, c string) {
		sign := func(x int) int {
			switch {
			case x < 0:
				return -1
			case x > 0:
				return 1
			}
			return 0
		}
		if Less(a, a) != 0 {
			t.Fatalf("Less(%q, %q) = %d, want 0", a, a, Less(a, a))
		}
		ab, ba := sign(Less(a, b)), sign(Less(b, a))
		if ab != -ba || (ab == 0) != (a == b) {
			t.Fatalf("Less(%q, %q) = %d, Less(%q, %q) = %d: not antisymmetric, or equal for different names", a, b, ab, b, a, ba)
		}
		if ab < 0 && sign(Less(b, c)) < 0 && sign(Less(a, c)) >= 0 {
			t.Fatalf("%q < %q < %q but not %q < %q", a, b, c, a, c)
		}
	})
}
