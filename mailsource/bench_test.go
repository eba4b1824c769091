package mailsource

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
)

// BenchmarkCorpusGzip reads the shared corpus (.mbox.gz) through Open, as
// the importer does; MB/s counts decompressed bytes.
func BenchmarkCorpusGzip(b *testing.B) {
	path := testcorpus.Path(b)
	const decompressed = 40775597
	b.SetBytes(decompressed)
	for b.Loop() {
		s, err := Open(context.Background(), path, Options{})
		if err != nil {
			b.Fatal(err)
		}
		n := 0
		for {
			_, err := s.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		s.Close()
		if n != 5256 {
			b.Fatalf("read %d messages, want 5256", n)
		}
	}
	b.ReportMetric(float64(5256*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
