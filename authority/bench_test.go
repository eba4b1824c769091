package authority

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// BenchmarkIssue issues runs from 64 goroutines straight from the
// authority (no HTTP), with shared commits and with one commit per issue.
//
//	go test -run '^$' -bench Issue -benchtime 5000x ./authority
func BenchmarkIssue(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts Options
	}{
		{"shared-commits", Options{}},
		{"one-fsync-per-lease", Options{OneCommitPerIssue: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			a, _ := newAuthority(b, bc.opts)
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for range 64 {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if _, err := a.Issue(context.Background(), testHolder); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			b.ReportMetric(float64(b.N)/time.Since(start).Seconds(), "leases/s")
		})
	}
}
