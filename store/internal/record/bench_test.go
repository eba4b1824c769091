package record

import (
	"context"
	"errors"
	"io"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/store"
)

// corpus returns the shared corpus's messages.
func corpus(b *testing.B) [][]byte {
	src, err := mailsource.Open(context.Background(), testcorpus.Path(b), mailsource.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer src.Close()
	var msgs [][]byte
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			return msgs
		}
		if err != nil {
			b.Fatal(err)
		}
		msgs = append(msgs, it.Raw)
	}
}

// samples returns the first messages of msgs up to n bytes, as a store's
// first training takes them.
func samples(msgs [][]byte, n int) [][]byte {
	var out [][]byte
	size := 0
	for _, m := range msgs {
		if len(m) > MaxSample {
			continue
		}
		if size += len(m); size > n {
			return out
		}
		out = append(out, m)
	}
	return out
}

// BenchmarkTrain trains a dictionary on the first 2 MB and 16 MB of the
// corpus (the first training and a later one).
func BenchmarkTrain(b *testing.B) {
	msgs := corpus(b)
	for _, n := range []int{2 << 20, 16 << 20} {
		in := samples(msgs, n)
		b.Run(fmt64(n>>20)+"MB", func(b *testing.B) {
			b.SetBytes(int64(n))
			for b.Loop() {
				if _, err := Train(context.Background(), in); err != nil {
					b.Fatal(err)
				}
			}
			b.ReportMetric(float64(len(in)), "samples")
		})
	}
}

func fmt64(n int) string {
	if n < 10 {
		return string(rune('0' + n))
	}
	return string(rune('0'+n/10)) + string(rune('0'+n%10))
}

// BenchmarkCodec compresses and decodes the corpus on one core, with the
// dictionary trained on its first 2 MB and without, and reports the
// record bytes per raw byte.
func BenchmarkCodec(b *testing.B) {
	msgs := corpus(b)
	db, err := Train(context.Background(), samples(msgs, 2<<20))
	if err != nil {
		b.Fatal(err)
	}
	d, err := NewDictionary(db)
	if err != nil {
		b.Fatal(err)
	}
	var c Codec
	raw := 0
	for _, m := range msgs {
		raw += len(m)
	}
	for _, dd := range []*Dictionary{nil, d} {
		name := "no-dict"
		if dd != nil {
			name = "dict"
		}
		var recs [][]byte
		b.Run(name+"/append", func(b *testing.B) {
			b.SetBytes(int64(raw))
			size := 0
			for b.Loop() {
				recs, size = recs[:0], 0
				for _, m := range msgs {
					r, err := c.Append(nil, Message{Digest: store.DigestOf(m), Added: time.Unix(1, 0), Raw: m}, dd)
					if err != nil {
						b.Fatal(err)
					}
					recs = append(recs, r)
					size += len(r)
				}
			}
			b.ReportMetric(float64(size)/float64(raw), "bytes/byte")
		})
		b.Run(name+"/decode", func(b *testing.B) {
			b.SetBytes(int64(raw))
			for b.Loop() {
				for _, r := range recs {
					if _, err := c.Decode(r, func(DictID) (*Dictionary, error) { return d, nil }); err != nil {
						b.Fatal(err)
					}
				}
			}
			b.ReportMetric(float64(b.Elapsed().Microseconds())/float64(b.N*len(recs)), "µs/msg")
		})
	}
}
