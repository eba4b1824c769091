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
