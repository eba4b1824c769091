package nntpserve

import (
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// BenchmarkOver is a news reader's first visit to a group of the shared
// corpus (5,256 messages): OVER of the whole group, then every article.
func BenchmarkOver(b *testing.B) {
	a := archivetest.New(b)
	a.PutCorpus("linux-mips", 0)
	n := a.Sync()
	addr := serve(b, a, Options{})
	s := dial(b, addr)
	s.expect(211, "GROUP chibrary.linux-mips")
	b.ResetTimer()
	for b.Loop() {
		if _, lines := s.block(224, "OVER 1-"); len(lines) != n {
			b.Fatalf("OVER 1- = %d lines, want %d", len(lines), n)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "overview-lines/s")
}

// BenchmarkArticles reads every article of the group by number, one
// command each, as slrnpull or a reader downloading a group does.
func BenchmarkArticles(b *testing.B) {
	a := archivetest.New(b)
	a.PutCorpus("linux-mips", 0)
	n := a.Sync()
	addr := serve(b, a, Options{})
	s := dial(b, addr)
	s.expect(211, "GROUP chibrary.linux-mips")
	b.ResetTimer()
	for b.Loop() {
		for i := 1; i <= n; i++ {
			s.block(220, "ARTICLE %d", i)
		}
	}
	b.ReportMetric(float64(n)*float64(b.N)/b.Elapsed().Seconds(), "articles/s")
}

// BenchmarkStalledReaders has 32 clients ask for the ARTICLE of a 51 MB
// message, read its first 64 KiB and then nothing for 2 s, and reports
// the process's resident memory before and at its peak (over 500 MiB
// fails it); "in-memory" is the server as it was before large articles
// were spooled.
func BenchmarkStalledReaders(b *testing.B) {
	a := archivetest.New(b)
	a.Put("a", hostile.BigAttachment(51<<20).Raw())
	a.Sync()
	for _, mode := range []struct {
		name  string
		above int64
	}{{"spooled", spoolThreshold}, {"in-memory", 1 << 40}} {
		b.Run(mode.name, func(b *testing.B) {
			addr := serve(b, a, Options{SpoolDir: b.TempDir(), Limits: netserve.Options{MaxConnsPerIP: 64}}, func(s *Server) { s.spoolAbove = mode.above })
			var before, peak int64
			for range b.N {
				before, peak = metrictest.StalledReaders(b, addr, 32, "GROUP chibrary.a\r\nARTICLE 1\r\n", 64<<10, 2*time.Second)
			}
			b.ReportMetric(float64(before)/(1<<20), "rss-before-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MiB")
			if mode.name == "spooled" && peak > 500<<20 {
				b.Errorf("32 stalled readers of a 51 MB message: peak RSS %d MiB, want under 500 (issue 38)", peak>>20)
			}
		})
	}
}
