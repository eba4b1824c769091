package spool

import (
	"bytes"
	"context"
	"errors"
	"io"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func writer(body string, writes *atomic.Int32) func(io.Writer) (any, error) {
	return func(w io.Writer) (any, error) {
		writes.Add(1)
		_, err := io.WriteString(w, body)
		return len(body), err
	}
}

func read(t *testing.T, r io.Reader) string {
	t.Helper()
	b, err := io.ReadAll(r)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// TestShared: readers at the same time share one body, written once, and
// each reads its own part.
func TestShared(t *testing.T) {
	ss := New(Options{Dir: t.TempDir(), Linger: -1})
	var writes atomic.Int32
	gate := make(chan struct{})
	slow := func(w io.Writer) (any, error) {
		<-gate
		return writer("0123456789", &writes)(w)
	}
	var wg sync.WaitGroup
	bodies := make([]*Body, 8)
	for i := range bodies {
		wg.Go(func() {
			b, err := ss.Get(t.Context(), "k", slow)
			if err != nil {
				t.Error(err)
				return
			}
			bodies[i] = b
		})
	}
	time.Sleep(20 * time.Millisecond)
	close(gate)
	wg.Wait()
	if n := writes.Load(); n != 1 {
		t.Errorf("the body was written %d times, want 1", n)
	}
	for i, b := range bodies {
		if got := read(t, b.Section(int64(i), 3)); got != "0123456789"[i:min(i+3, 10)] {
			t.Errorf("Section(%d, 3) = %q", i, got)
		}
		if b.Info() != 10 || b.Size() != 10 {
			t.Errorf("Info, Size = %v, %d, want 10, 10", b.Info(), b.Size())
		}
	}
	if got := read(t, bodies[0].Section(8, 100)); got != "89" {
		t.Errorf("Section(8, 100) = %q, want the rest, 89", got)
	}
	if got := read(t, bodies[0].Section(20, 5)); got != "" {
		t.Errorf("Section(20, 5) = %q, want nothing", got)
	}
	for _, b := range bodies {
		ss.Release(b)
	}
	// With no reader and no lingering, the next Get writes it again.
	b, err := ss.Get(t.Context(), "k", writer("0123456789", &writes))
	if err != nil {
		t.Fatal(err)
	}
	ss.Release(b)
	if n := writes.Load(); n != 2 {
		t.Errorf("after every reader left, the body was written %d times in all, want 2", n)
	}
}

// TestLinger: a body outlives its last reader for Linger, so that a
// client reading it in pieces does not have it written for every piece;
// LingerBytes bounds what lingers, the oldest going first.
func TestLinger(t *testing.T) {
	ss := New(Options{Dir: t.TempDir(), Linger: 200 * time.Millisecond, LingerBytes: 25})
	var writes atomic.Int32
	get := func(key, body string) {
		t.Helper()
		b, err := ss.Get(t.Context(), key, writer(body, &writes))
		if err != nil {
			t.Fatal(err)
		}
		if got := read(t, b.Open()); got != body {
			t.Errorf("%s = %q, want %q", key, got, body)
		}
		ss.Release(b)
	}
	for range 5 {
		get("a", "0123456789")
	}
	if n := writes.Load(); n != 1 {
		t.Errorf("five pieces read in turn: written %d times, want 1", n)
	}
	get("b", "0123456789")
	get("c", "0123456789") // 30 bytes linger: a, the oldest, goes
	get("c", "0123456789")
	get("b", "0123456789")
	if n := writes.Load(); n != 3 {
		t.Errorf("b and c read again while they linger: written %d times in all, want 3", n)
	}
	get("a", "0123456789")
	if n := writes.Load(); n != 4 {
		t.Errorf("a, over LingerBytes: written %d times in all, want 4", n)
	}
	time.Sleep(400 * time.Millisecond)
	get("b", "0123456789")
	if n := writes.Load(); n != 5 {
		t.Errorf("b after its linger ran out: written %d times in all, want 5", n)
	}
	ss.mu.Lock()
	if len(ss.m) != 1 || len(ss.idle) != 1 || ss.idleLen != 10 {
		t.Errorf("kept %d bodies, %d lingering of %d bytes; want b alone", len(ss.m), len(ss.idle), ss.idleLen)
	}
	ss.mu.Unlock()
	ss.Close()
	if _, err := ss.Get(t.Context(), "b", writer("x", &writes)); !errors.Is(err, ErrClosed) {
		t.Errorf("Get after Close = %v, want ErrClosed", err)
	}
}

// TestFailed: a failed write is told to the readers waiting for it, and
// not kept for later ones.
func TestFailed(t *testing.T) {
	ss := New(Options{Dir: t.TempDir()})
	boom := errors.New("the store is down")
	if _, err := ss.Get(t.Context(), "k", func(io.Writer) (any, error) { return nil, boom }); !errors.Is(err, boom) {
		t.Fatalf("Get = %v, want %v", err, boom)
	}
	var writes atomic.Int32
	b, err := ss.Get(t.Context(), "k", writer("ok", &writes))
	if err != nil {
		t.Fatalf("Get after a failure = %v", err)
	}
	defer ss.Release(b)
	if got := read(t, b.Open()); got != "ok" {
		t.Errorf("body = %q, want ok", got)
	}
}

// TestWaitCancelled: a reader waiting for another's write leaves when its
// context ends, and its place is given back.
func TestWaitCancelled(t *testing.T) {
	ss := New(Options{Dir: t.TempDir(), Linger: -1})
	gate := make(chan struct{})
	first := make(chan *Body)
	go func() {
		b, _ := ss.Get(context.Background(), "k", func(w io.Writer) (any, error) {
			<-gate
			_, err := w.Write(bytes.Repeat([]byte("x"), 100))
			return nil, err
		})
		first <- b
	}()
	time.Sleep(20 * time.Millisecond)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	if _, err := ss.Get(ctx, "k", nil); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("a waiting Get whose context ended = %v", err)
	}
	close(gate)
	b := <-first
	ss.mu.Lock()
	refs := b.refs
	ss.mu.Unlock()
	if refs != 1 {
		t.Errorf("the body has %d readers, want 1", refs)
	}
	ss.Release(b)
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if len(ss.m) != 0 {
		t.Errorf("%d bodies kept with no reader and no lingering", len(ss.m))
	}
}
