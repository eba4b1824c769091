package riakstore

import (
	"context"
	"errors"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// cpuTime returns the CPU time this process has used.
func cpuTime(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// TestNoNodeDoesNotSpin: Open with no node answering fails in seconds, and
// leaves nothing behind that keeps a core busy (the client
// library's node manager, left as it is, spins forever when its first
// command finds no node: see riakconn.PrimeNodeManager).
func TestNoNodeDoesNotSpin(t *testing.T) {
	start := time.Now()
	// Without the workaround the first request never ends: the deadline
	// lets the test see the spin rather than hang.
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	s, err := Open(ctx, Options{Nodes: []string{"127.0.0.1:1", "127.0.0.1:2"}})
	if err == nil {
		s.Close()
		t.Fatal("Open(no node listening) = nil error")
	}
	if !errors.Is(err, store.ErrUnavailable) {
		t.Errorf("Open(no node listening) = %v, want %v", err, store.ErrUnavailable)
	}
	if took := time.Since(start); took > 10*time.Second {
		t.Errorf("Open(no node listening) took %v, want about 5 s", took)
	}
	before := cpuTime(t)
	time.Sleep(time.Second)
	if used := cpuTime(t) - before; used > 300*time.Millisecond {
		t.Errorf("after a failed Open the process used %v of CPU in 1 s of doing nothing: something spins", used)
	}
}

// TestCloseAfterAbandonedRequests: requests whose caller gave up (its
// context ended) still run in the client library; Close waits for them
// rather than stop the client under them (which made the library panic
// on a goroutine of its own).
func TestCloseAfterAbandonedRequests(t *testing.T) {
	for range 5 {
		s := open(t, testOptions(t))
		a := storetest.NewAuthority(t, shuffle.Mix)
		recordLease(t, s, a, 1)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan struct{})
		go func() {
			defer close(done)
			s.Put(ctx, batchOf(t, a, 1, "abandoned", 200))
		}()
		time.Sleep(20 * time.Millisecond)
		cancel()
		<-done
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
	}
}
