package mbox

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
)

// corpusMessages is the number of messages in the shared corpus.
const corpusMessages = 5256

var corpus struct {
	once sync.Once
	data []byte
	err  error
}

// loadCorpus returns the decompressed corpus, skipping when it is absent.
func loadCorpus(t testing.TB) []byte {
	t.Helper()
	corpus.once.Do(func() {
		f, err := os.Open(testcorpus.Find())
		if err != nil {
			corpus.err = err
			return
		}
		defer f.Close()
		zr, err := gzip.NewReader(f)
		if err != nil {
			corpus.err = err
			return
		}
		corpus.data, corpus.err = io.ReadAll(zr)
	})
	if os.IsNotExist(corpus.err) {
		t.Skipf("shared corpus absent: %v", corpus.err)
	}
	if corpus.err != nil {
		t.Fatal(corpus.err)
	}
	return corpus.data
}

func TestCorpusRoundTrip(t *testing.T) {
	data := loadCorpus(t)
	r := NewReader(bytes.NewReader(data), Options{Name: "linux-mips-sample.mbox"})
	items := readAll(t, r)
	if len(items) != corpusMessages {
		t.Fatalf("read %d messages, want %d", len(items), corpusMessages)
	}
	if r.Format() != FormatMboxrd {
		t.Errorf("Format() = %q (%s), want mboxrd", r.Format(), r.FormatReason())
	}
	var out bytes.Buffer
	w := NewWriter(&out)
	for _, it := range items {
		if it.err != nil || len(it.warn) > 0 {
			t.Errorf("line %d: error %v, warnings %q", it.line, it.err, it.warn)
		}
		if err := w.WriteMessage(it.sep, []byte(it.raw)); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(out.Bytes(), data) {
		i := 0
		for i < out.Len() && i < len(data) && out.Bytes()[i] == data[i] {
			i++
		}
		t.Fatalf("rewritten corpus differs from the original at byte %d of %d", i, len(data))
	}
}

func BenchmarkReaderCorpus(b *testing.B) {
	data := loadCorpus(b)
	b.SetBytes(int64(len(data)))
	b.ReportAllocs()
	for b.Loop() {
		r := NewReader(bytes.NewReader(data), Options{})
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != corpusMessages {
			b.Fatalf("read %d messages, want %d", n, corpusMessages)
		}
	}
	b.ReportMetric(float64(corpusMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func BenchmarkReaderCorpusGzip(b *testing.B) {
	raw, err := os.ReadFile(testcorpus.Find())
	if os.IsNotExist(err) {
		b.Skip("shared corpus absent")
	}
	if err != nil {
		b.Fatal(err)
	}
	b.SetBytes(int64(len(loadCorpus(b))))
	for b.Loop() {
		zr, err := gzip.NewReader(bytes.NewReader(raw))
		if err != nil {
			b.Fatal(err)
		}
		r := NewReader(zr, Options{})
		n := 0
		for {
			_, err := r.Next()
			if err == io.EOF {
				break
			}
			if err != nil {
				b.Fatal(err)
			}
			n++
		}
		if n != corpusMessages {
			b.Fatalf("read %d messages, want %d", n, corpusMessages)
		}
	}
	b.ReportMetric(float64(corpusMessages*b.N)/b.Elapsed().Seconds(), "msgs/s")
}
