// Package metrictest reads a server's Prometheus metrics in tests (the
// open-connection gauges and accept counters by which the tests of cut
// connections see that every place comes back), and the process's
// resident memory for benchmarks.
package metrictest

import (
	"io"
	"net"
	"os"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Value reads the gauge or counter name of reg, of the series whose one
// label has the value label ("" for a metric without labels); a counter
// of a label not yet seen reads 0.
func Value(t testing.TB, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
		return 0
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Await waits up to 10 s for get to return want, and returns what it
// returned last.
func Await(get func() float64, want float64) float64 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := get()
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Settled waits until every connection of the server counted under
// namespace (NAMESPACE_connections_total and _open, package netserve)
// that was dialed, dialed in all, was taken in or refused, then until
// none is open; it returns how many are open then.
func Settled(t testing.TB, reg *prometheus.Registry, namespace string, dialed float64) float64 {
	t.Helper()
	taken := func() float64 {
		return Value(t, reg, namespace+"_connections_total", "accepted") + Value(t, reg, namespace+"_connections_total", "refused")
	}
	if got := Await(taken, dialed); got != dialed {
		t.Fatalf("%v connections taken in or refused, want %v", got, dialed)
	}
	return Await(func() float64 { return Value(t, reg, namespace+"_connections_open", "") }, 0)
}

// RSS is this process's resident memory now, in bytes (Linux; 0
// elsewhere).
func RSS() int64 {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) < 2 {
		return 0
	}
	pages, _ := strconv.ParseInt(f[1], 10, 64)
	return pages * int64(os.Getpagesize())
}

// SampleRSS reads RSS every 10 ms until the function it returns is
// called, which returns the highest it read.
func SampleRSS() (stop func() int64) {
	var peak int64
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			peak = max(peak, RSS())
			select {
			case <-done:
				return
			case <-time.After(10 * time.Millisecond):
			}
		}
	})
	return func() int64 {
		close(done)
		wg.Wait()
		return peak
	}
}

// StalledReaders opens n connections to addr, sends script on each, reads
// the first read bytes of what comes back, and then reads nothing for
// hold before it closes them all: clients that ask for a large message
// and stall. It returns the process's resident memory before they
// connected and its peak while they held.
func StalledReaders(tb testing.TB, addr string, n int, script string, read int64, hold time.Duration) (before, peak int64) {
	tb.Helper()
	runtime.GC()
	debug.FreeOSMemory()
	before = RSS()
	stop := SampleRSS()
	conns := make([]net.Conn, 0, n)
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		conns = append(conns, c)
		c.SetDeadline(time.Now().Add(time.Minute))
		if _, err := io.WriteString(c, script); err != nil {
			tb.Fatal(err)
		}
		if _, err := io.CopyN(io.Discard, c, read); err != nil {
			tb.Fatalf("reading the first %d bytes: %v", read, err)
		}
	}
	time.Sleep(hold)
	return before, stop()
}

// StalledHeap opens n connections to addr with small receive buffers,
// sends script on each and reads nothing, then after hold returns how
// much the live heap grew meanwhile: what n clients that ask for a large
// message and stall cost in memory. The connections close when the test
// ends.
func StalledHeap(tb testing.TB, addr string, n int, script string, hold time.Duration) int64 {
	tb.Helper()
	heap := func() int64 {
		runtime.GC()
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	before := heap()
	for range n {
		c, err := net.Dial("tcp", addr)
		if err != nil {
			tb.Fatal(err)
		}
		tb.Cleanup(func() { c.Close() })
		// A small receive buffer, full soon: the server is left writing.
		c.(*net.TCPConn).SetReadBuffer(4 << 10)
		if _, err := io.WriteString(c, script); err != nil {
			tb.Fatal(err)
		}
	}
	time.Sleep(hold)
	return heap() - before
}
