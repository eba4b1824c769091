package resolver

import (
	"io"
	"net/http"
	"runtime"
	"runtime/debug"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// BenchmarkStalledMboxReaders has 32 clients download, over loopback,
// the mbox.gz of a month that holds a 51 MB message (base64 of random
// bytes, which gzip cannot shrink much: the archive), or that
// message's /raw, each reading its first 64 KiB and then nothing for
// 2 s, and reports the process's resident memory before and at its peak
// meanwhile, how long the first reader waited for the first byte (the
// file is written whole first), and the size of the file. A peak over
// 500 MiB fails it (issue 38).
func BenchmarkStalledMboxReaders(b *testing.B) {
	const big = 51 << 20
	nm := newNoiseMonth(b, big)
	b.Run("mbox.gz", func(b *testing.B) { stalledReaders(b, nm, noisePath) })
	b.Run("raw", func(b *testing.B) { stalledReaders(b, nm, "/"+nm.bigCN+"/raw") })
}

func stalledReaders(b *testing.B, nm *noiseMonth, path string) {
	const readers = 32
	for range b.N {
		// A server of its own for each round: the file is written again.
		s := New(nm.a.st, Options{Catalogs: keeper.Fixed(nm.c), SpoolDir: b.TempDir(), ShutdownTimeout: time.Second})
		base := serveSmall(b, s)
		runtime.GC()
		debug.FreeOSMemory()
		before := metrictest.RSS()
		stopSampling := metrictest.SampleRSS()
		start := time.Now()
		var firstByte time.Duration
		var size int64
		var mu sync.Mutex
		release := make(chan struct{})
		started := make(chan struct{}, readers)
		var wg sync.WaitGroup
		for range readers {
			wg.Go(func() {
				resp, err := http.Get(base + path)
				if err == nil {
					defer resp.Body.Close()
					_, err = io.CopyN(io.Discard, resp.Body, 64<<10)
				}
				if err != nil {
					b.Error(err)
					started <- struct{}{}
					return
				}
				mu.Lock()
				if firstByte == 0 {
					firstByte = time.Since(start)
				}
				size = resp.ContentLength
				mu.Unlock()
				started <- struct{}{}
				<-release
			})
		}
		for range readers {
			<-started
		}
		time.Sleep(2 * time.Second)
		close(release)
		wg.Wait()
		peak := stopSampling()
		b.ReportMetric(float64(before)/(1<<20), "rss-before-MiB")
		b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MiB")
		b.ReportMetric(firstByte.Seconds(), "first-byte-s")
		b.ReportMetric(float64(size)/(1<<20), "file-MiB")
		if peak > 500<<20 {
			b.Errorf("32 readers of %s stalled: peak RSS %d MiB, want under 500", path, peak>>20)
		}
	}
}
