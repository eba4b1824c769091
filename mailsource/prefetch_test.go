package mailsource

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"testing/iotest"
)

func TestPrefetcherCopiesInOrder(t *testing.T) {
	want := bytes.Repeat([]byte("0123456789"), 1000)
	for _, chunk := range []int{1, 7, 4096, 20000} {
		p := newPrefetcher(iotest.HalfReader(bytes.NewReader(want)), chunk, 3)
		got, err := io.ReadAll(iotest.OneByteReader(p))
		if err != nil || !bytes.Equal(got, want) {
			t.Errorf("chunk %d: read %d bytes, err %v; want %d bytes", chunk, len(got), err, len(want))
		}
		p.Close()
	}
}

func TestPrefetcherError(t *testing.T) {
	errBoom := errors.New("boom")
	p := newPrefetcher(io.MultiReader(strings.NewReader("abc"), iotest.ErrReader(errBoom)), 2, 2)
	defer p.Close()
	got, err := io.ReadAll(p)
	if string(got) != "abc" || !errors.Is(err, errBoom) {
		t.Fatalf("ReadAll = %q, %v, want %q, %v", got, err, "abc", errBoom)
	}
}

func TestPrefetcherCloseEarly(t *testing.T) {
	// Close returns (the goroutine has stopped) while the producer still
	// has data and every buffer is full.
	p := newPrefetcher(bytes.NewReader(make([]byte, 1<<20)), 1024, 2)
	var b [10]byte
	if _, err := p.Read(b[:]); err != nil {
		t.Fatal(err)
	}
	p.Close()
	p.Close() // idempotent
}
