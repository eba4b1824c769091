package riakauthority

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
)

// BenchmarkRacingAllocators issues b.N runs from 3 allocators racing on
// a cluster of 3 nodes started from the kit, each its own handle (its own
// connections, as programs on 3 hosts): each asking for one run at a time
// (as programs do), and each asking for 4 at once (as a coordinator
// serving several clients does). It reports runs/s of the 3 together,
// and Riak requests per run.
func BenchmarkRacingAllocators(b *testing.B) {
	for _, each := range []int{1, 4} {
		b.Run(fmt.Sprintf("%d-at-once", each), func(b *testing.B) { benchAllocators(b, each) })
	}
}

func benchAllocators(b *testing.B, each int) {
	nodes := riaktest.SharedCluster(b)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.PB)
	}
	id := make([]byte, 6)
	rand.Read(id)
	opts := Options{Nodes: addrs, Archive: "bench-" + hex.EncodeToString(id)}
	const allocators = 3
	var handles []*Authority
	for range allocators {
		a, _, err := OpenOrCreate(b.Context(), opts)
		if err != nil {
			b.Fatal(err)
		}
		defer a.Close()
		handles = append(handles, a)
	}
	var (
		left atomic.Int64
		mu   sync.Mutex
		seen = make(map[uint32]bool, b.N)
		wg   sync.WaitGroup
	)
	left.Store(int64(b.N))
	var before int64
	for _, a := range handles {
		before += a.Requests()
	}
	b.ResetTimer()
	start := time.Now()
	for i, a := range handles {
		for range each {
			wg.Go(func() {
				h := authority.Holder{Program: "bench", PID: i}
				for left.Add(-1) >= 0 {
					l, err := a.Issue(b.Context(), h)
					if err != nil {
						b.Error(err)
						return
					}
					mu.Lock()
					if seen[l.Run] {
						b.Errorf("run %d issued twice", l.Run)
					}
					seen[l.Run] = true
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	elapsed := time.Since(start)
	b.StopTimer()
	var after int64
	for _, a := range handles {
		after += a.Requests()
	}
	b.ReportMetric(float64(b.N)/elapsed.Seconds(), "runs/s")
	b.ReportMetric(float64(after-before)/float64(b.N), "requests/run")
}
