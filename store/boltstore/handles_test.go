package boltstore

import (
	"errors"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// openCounted opens a store at path whose handle openings are counted.
func openCounted(t *testing.T, path string, opts Options) (*Store, *atomic.Int64) {
	t.Helper()
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	var opens atomic.Int64
	s.h.mu.Lock()
	opened := s.h.opened
	s.h.opened = func(gen string) {
		opens.Add(1)
		opened(gen)
	}
	s.h.mu.Unlock()
	return s, &opens
}

// TestIdleHandleKept: reads spaced out far beyond Linger share one
// handle while no other process waits for the file, as opening it anew
// costs a sparse reader more than its reads; one that waits (a second
// Store, whose lock conflicts as another process's would) is let in
// though the idle handle could be kept for a minute more; after KeepIdle
// the file is let go even for a process that does not take turns.
func TestIdleHandleKept(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	s, opens := openCounted(t, path, Options{KeepIdle: time.Minute})
	time.Sleep(50 * time.Millisecond) // whatever Open left open, closed or kept
	n0 := opens.Load()
	for range 4 {
		if _, err := s.Count(t.Context()); err != nil {
			t.Fatal(err)
		}
		time.Sleep(20 * time.Millisecond) // four times Linger
	}
	if n := opens.Load() - n0; n > 1 {
		t.Errorf("the file opened %d times for 4 reads 20 ms apart; want at most once, the idle handle kept", n)
	}
	n0 = opens.Load()

	// A writer of another Store waits at most its LockTimeout, far less
	// than KeepIdle: it gets in only if the idle handle lets it.
	w, err := Open(t.Context(), path, Options{LockTimeout: 2 * time.Second, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	a := storetest.NewAuthority(t, shuffle.Mix)
	if err := w.RecordLease(t.Context(), a.Lease(1)); err != nil {
		t.Fatalf("RecordLease beside an idle handle kept for a minute = %v; want it let in", err)
	}
	if _, err := s.Count(t.Context()); err != nil {
		t.Fatal(err)
	}
	if _, err := w.Put(t.Context(), []store.Message{storetest.Message(a.Number(t, 1, 0), storetest.Mail("kept", "x"), "x", "")}); err != nil {
		t.Fatalf("Put beside an idle handle kept for a minute = %v; want it let in", err)
	}
	if n, err := s.Count(t.Context()); err != nil || n != 1 {
		t.Fatalf("Count() after the other's Put = %d, %v; want 1 (the handle opened anew)", n, err)
	}
	if n := opens.Load() - n0; n != 2 {
		t.Errorf("the file opened %d times more; want twice, anew after each of the other's writes", n)
	}

	// KeepIdle ends: a process that does not take turns (bbolt alone)
	// gets the file too.
	short, opens2 := openCounted(t, filepath.Join(t.TempDir(), "messages.db"), Options{KeepIdle: 30 * time.Millisecond})
	if _, err := short.Count(t.Context()); err != nil {
		t.Fatal(err)
	}
	n0 = opens2.Load()
	time.Sleep(300 * time.Millisecond)
	db, err := bolt.Open(short.path, 0o644, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("bolt.Open 300 ms after the last read with KeepIdle 30 ms = %v; want the file let go", err)
	}
	db.Close()
	if _, err := short.Count(t.Context()); err != nil || opens2.Load() != n0+1 {
		t.Errorf("Count() after KeepIdle = %v, %d openings more; want the file opened anew", err, opens2.Load()-n0)
	}

	// KeepIdle negative: Linger alone, as before.
	linger, opens3 := openCounted(t, filepath.Join(t.TempDir(), "messages.db"), Options{KeepIdle: -1})
	for range 3 {
		time.Sleep(50 * time.Millisecond)
		if _, err := linger.Count(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	if n := opens3.Load(); n != 3 {
		t.Errorf("with KeepIdle -1 the file opened %d times for 3 reads 50 ms apart; want 3", n)
	}
}

// TestIdleHandleClosed: closing the store closes an idle handle at once,
// and a handle kept idle does not keep the store from closing.
func TestIdleHandleClosed(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	s, err := Open(t.Context(), path, Options{KeepIdle: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := s.Count(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 100 * time.Millisecond})
	if err != nil {
		t.Fatalf("bolt.Open after Close = %v; want the file let go", err)
	}
	db.Close()
	if _, err := s.Count(t.Context()); !errors.Is(err, store.ErrClosed) {
		t.Errorf("Count() after Close = %v; want ErrClosed", err)
	}
}
