package nntpserve

import (
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/archivetest"
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
