package coordinator

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
)

// BenchmarkLeasesHTTP takes leases through HTTP on loopback with 64
// concurrent clients, durable commits on (bbolt fsyncs every commit), with
// commits shared between concurrent requests (the default) and with one
// commit, so one fsync, per lease: the difference is what batching buys.
//
//	go test -run '^$' -bench LeasesHTTP -benchtime 5000x ./coordinator
func BenchmarkLeasesHTTP(b *testing.B) {
	for _, bc := range []struct {
		name string
		opts authority.Options
	}{
		{"shared-commits", authority.Options{}},
		{"one-fsync-per-lease", authority.Options{OneCommitPerIssue: true}},
	} {
		b.Run(bc.name, func(b *testing.B) {
			const clients = 64
			s := startServer(b, bc.opts)
			cs := make([]*Client, clients)
			for i := range cs {
				cs[i] = newClient(b, s.ts.URL, testToken, ClientOptions{})
				if _, err := cs[i].NewRun(context.Background()); err != nil { // warm the connection
					b.Fatal(err)
				}
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			var wg sync.WaitGroup
			b.ResetTimer()
			start := time.Now()
			for _, c := range cs {
				wg.Go(func() {
					for left.Add(-1) >= 0 {
						if _, err := c.NewRun(context.Background()); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			b.ReportMetric(float64(b.N)/elapsed.Seconds(), "leases/s")
		})
	}
}
