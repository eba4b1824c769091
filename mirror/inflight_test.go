package mirror

import (
	"testing"
	"time"
)

// TestInflight: bytes are admitted up to the limit, one step larger than
// the limit only when nothing is in flight, and a waiting acquire goes on
// once enough is released, or gives up when stopped.
func TestInflight(t *testing.T) {
	f := newInflight(10)
	stop := make(chan struct{})
	if !f.acquire(30, stop) {
		t.Fatal("acquire(30) with nothing in flight: refused, want taken (one large message)")
	}
	got := make(chan bool, 1)
	go func() { got <- f.acquire(4, stop) }()
	select {
	case <-got:
		t.Fatal("acquire(4) with 30 of 10 in flight went on")
	case <-time.After(50 * time.Millisecond):
	}
	f.release(30)
	if ok := <-got; !ok {
		t.Fatal("acquire(4) after the release: refused")
	}
	if !f.acquire(6, stop) {
		t.Fatal("acquire(6) with 4 of 10 in flight: refused")
	}
	go func() { got <- f.acquire(1, stop) }()
	select {
	case <-got:
		t.Fatal("acquire(1) with 10 of 10 in flight went on")
	case <-time.After(50 * time.Millisecond):
	}
	f.release(4) // 6 of 10 in flight: 1 more fits
	if ok := <-got; !ok {
		t.Fatal("acquire(1) with 6 of 10 in flight: refused")
	}
	go func() { got <- f.acquire(8, stop) }()
	close(stop)
	if ok := <-got; ok {
		t.Fatal("acquire(8) with 7 of 10 in flight, stopped: taken")
	}
	if f.used != 7 {
		t.Errorf("%d bytes in flight, want 7", f.used)
	}
}
