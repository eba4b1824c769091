package imapwatch

import (
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"runtime/metrics"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/mbox"
)

const corpus = "../../shared/corpus/linux-mips-sample.mbox.gz"

// populateCorpus writes the first limit messages of the shared corpus
// into a Maildir, one at a time (nothing is held in memory), and returns
// how many it wrote.
func populateCorpus(limit int, n *int) func(string) error {
	return func(dir string) error {
		f, err := os.Open(corpus)
		if err != nil {
			return err
		}
		defer f.Close()
		gz, err := gzip.NewReader(f)
		if err != nil {
			return err
		}
		r := mbox.NewReader(gz, mbox.Options{Name: corpus, Format: mbox.FormatMboxrd})
		for *n < limit {
			m, err := r.Next()
			if errors.Is(err, io.EOF) {
				return nil
			}
			var me *mbox.MessageError
			if errors.As(err, &me) {
				continue
			}
			if err != nil {
				return err
			}
			if err := os.WriteFile(filepath.Join(dir, "cur", dovecottest.MaildirName(*n, len(m.Raw))), m.Raw, 0o644); err != nil {
				return err
			}
			*n++
		}
		return nil
	}
}

// BenchmarkDovecotFirstPass archives a Dovecot mailbox holding the shared
// corpus (its first 1,000 messages, then all of it) and reports messages
// per second and, over the heap before the pass, the peak Go heap in use
// (garbage not yet collected included: it depends on GOGC and on the
// largest messages of the corpus) and the peak live heap (what a garbage
// collection found in use). Neither should grow with the mailbox, since
// messages are fetched in bounded batches; TestDovecotFirstPassMemory
// checks it on equal-sized messages.
func BenchmarkDovecotFirstPass(b *testing.B) {
	if _, err := os.Stat(corpus); err != nil {
		b.Skipf("corpus not present: %v", err)
	}
	for _, limit := range []int{1000, 1 << 30} {
		var n int
		srv := dovecottest.Start(b, dovecottest.Options{Populate: populateCorpus(limit, &n)})
		b.Run(fmt.Sprintf("messages=%d", n), func(b *testing.B) {
			var peak, peakLive atomic.Uint64 // heap in use (garbage included), live heap
			for range b.N {
				b.StopTimer()
				a := newArchive(b)
				w := newTestWatcher(b, a, srv.Addr, func(o *Options) {
					o.User, o.Password = srv.User, srv.Password
					o.Logger = slog.New(slog.DiscardHandler)
				})
				settle()
				samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
				metrics.Read(samples)
				baseLive, baseAlloc := samples[0].Value.Uint64(), samples[1].Value.Uint64()
				stop := make(chan struct{})
				var wg sync.WaitGroup
				wg.Add(1)
				go func() { // sample the heap while the pass runs
					defer wg.Done()
					t := time.NewTicker(5 * time.Millisecond)
					defer t.Stop()
					s := slices.Clone(samples)
					for {
						metrics.Read(s)
						if d := s[0].Value.Uint64() - min(baseLive, s[0].Value.Uint64()); d > peakLive.Load() {
							peakLive.Store(d)
						}
						if d := s[1].Value.Uint64() - min(baseAlloc, s[1].Value.Uint64()); d > peak.Load() {
							peak.Store(d)
						}
						select {
						case <-stop:
							return
						case <-t.C:
						}
					}
				}()
				b.StartTimer()
				r := start(b, w)
				r.waitIdle(b)
				b.StopTimer()
				close(stop)
				wg.Wait()
				if err := r.stop(); err != nil {
					b.Fatal(err)
				}
				if got := a.count(b); got != int64(n) {
					b.Fatalf("store holds %d messages, want %d", got, n)
				}
			}
			b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "msg/s")
			b.ReportMetric(float64(peak.Load())/(1<<20), "peak-heap-MiB")
			b.ReportMetric(float64(peakLive.Load())/(1<<20), "peak-live-heap-MiB")
			var ru syscall.Rusage
			if syscall.Getrusage(syscall.RUSAGE_SELF, &ru) == nil {
				b.ReportMetric(float64(ru.Maxrss)/1024, "maxrss-MiB")
			}
		})
	}
}
