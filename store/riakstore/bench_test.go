package riakstore

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// readCorpus reads the shared corpus as the importer does, copies times,
// each copy made distinct (its own Subject line prefix), so that a copy's
// messages are new.
func readCorpus(tb testing.TB, copies int) []store.Message {
	src, err := mailsource.Open(context.Background(), testcorpus.Path(tb), mailsource.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	var raws [][]byte
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		raws = append(raws, it.Raw)
	}
	var msgs []store.Message
	for c := range copies {
		for _, raw := range raws {
			if c > 0 {
				raw = append(fmt.Appendf(nil, "X-Copy: %d\n", c), raw...)
			}
			meta, _ := mailmsg.Parse(raw)
			msgs = append(msgs, store.Message{Raw: raw, Digest: store.DigestOf(raw), MessageID: meta.MessageID})
		}
	}
	return msgs
}

// importCorpus puts msgs into s in batches of 1,000 under fresh runs, and
// returns how long it took.
func importCorpus(tb testing.TB, s *Store, a *storetest.Authority, msgs []store.Message) time.Duration {
	start := time.Now()
	run := uint32(0)
	for i := 0; i < len(msgs); i += 1000 {
		batch := make([]store.Message, 0, 1000)
		for j := i; j < min(i+1000, len(msgs)); j++ {
			if j%callnumber.SequencesPerRun == 0 {
				run++
				if err := s.RecordLease(tb.Context(), a.Lease(run)); err != nil {
					tb.Fatal(err)
				}
			}
			m := msgs[j]
			m.Number = a.Number(tb, run, j%callnumber.SequencesPerRun)
			batch = append(batch, m)
		}
		if _, err := s.Put(tb.Context(), batch); err != nil {
			tb.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkCorpus puts the shared corpus into a new archive in batches of
// 1,000 (what the importer does, without reading and parsing), then reads
// the whole change feed back in pages of 500 (what a catalog rebuild
// does). BENCH_COPIES=16 makes it archive-sized (84,096 messages).
func BenchmarkCorpus(b *testing.B) {
	copies := 1
	if v := os.Getenv("BENCH_COPIES"); v != "" {
		if _, err := fmt.Sscan(v, &copies); err != nil || copies < 1 {
			b.Fatalf("BENCH_COPIES=%q: want a number of copies", v)
		}
	}
	msgs := readCorpus(b, copies)
	var size int64
	for _, m := range msgs {
		size += int64(len(m.Raw))
	}
	b.Logf("corpus: %d messages, %.1f MB", len(msgs), float64(size)/1e6)
	var putTime, feedTime time.Duration
	var requests int64
	for b.Loop() {
		s := open(b, testOptions(b))
		a := storetest.NewAuthority(b, shuffle.Mix)
		before := s.Requests()
		putTime += importCorpus(b, s, a, msgs)
		requests += s.Requests() - before

		reader := open(b, Options{Nodes: s.opts.Nodes, Archive: s.opts.Archive})
		start := time.Now()
		var cur store.Cursor
		read := 0
		for {
			page, err := reader.Changes(b.Context(), cur, 500)
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Messages) == 0 {
				break
			}
			read += len(page.Messages)
			cur = page.Next
		}
		feedTime += time.Since(start)
		if read != len(msgs) {
			b.Fatalf("the feed listed %d messages, want %d", read, len(msgs))
		}
	}
	n := float64(b.N * len(msgs))
	b.ReportMetric(n/putTime.Seconds(), "put-msgs/s")
	b.ReportMetric(float64(requests)/n, "requests/msg")
	b.ReportMetric(n/feedTime.Seconds(), "feed-msgs/s")
}
