package boltstore_test

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

const benchBatch = 1000

type benchMessage struct {
	raw    []byte
	digest store.Digest
	id     string
}

// readCorpus reads the shared corpus as the importer does.
func readCorpus(tb testing.TB) ([]benchMessage, int64) {
	src, err := mailsource.Open(context.Background(), testcorpus.Path(tb), mailsource.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	var msgs []benchMessage
	var total int64
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			return msgs, total
		}
		if err != nil {
			tb.Fatal(err)
		}
		meta, _ := mailmsg.Parse(it.Raw)
		msgs = append(msgs, benchMessage{raw: it.Raw, digest: store.DigestOf(it.Raw), id: meta.MessageID})
		total += int64(len(it.Raw))
	}
}

// BenchmarkCorpus writes the shared corpus through the store in batches of
// 1,000 (compressed, and uncompressed as before compression: records of
// version 1 in 4 KiB pages), and the same raw bytes through a bare bbolt
// loop with sequential keys in transactions of 1,000, and reports each,
// their ratios, and the bytes on disk per raw byte. One iteration writes
// the whole corpus into a new file with each.
func BenchmarkCorpus(b *testing.B) {
	corpus, total := readCorpus(b)
	b.Logf("corpus: %d messages, %.1f MB", len(corpus), float64(total)/1e6)
	var storeTime, plainTime, bareTime time.Duration
	var storeDisk, plainDisk int64
	b.SetBytes(3 * total)
	for i := 0; b.Loop(); i++ {
		dir := b.TempDir()
		path := filepath.Join(dir, "messages.db")
		storeTime += writeStore(b, path, corpus, boltstore.Options{})
		storeDisk += boltstore.DiskBytes(path)
		path = filepath.Join(dir, "plain.db")
		plainTime += writeStore(b, path, corpus, boltstore.Options{Compression: store.Compression{Off: true}, PageSize: 4096})
		plainDisk += boltstore.DiskBytes(path)
		bareTime += writeBare(b, filepath.Join(dir, "bare.db"), corpus)
	}
	n := float64(b.N * len(corpus))
	mb := float64(b.N) * float64(total) / 1e6
	b.ReportMetric(n/storeTime.Seconds(), "store-msgs/s")
	b.ReportMetric(n/plainTime.Seconds(), "uncompressed-msgs/s")
	b.ReportMetric(n/bareTime.Seconds(), "bare-msgs/s")
	b.ReportMetric(mb/bareTime.Seconds(), "bare-MB/s")
	b.ReportMetric(bareTime.Seconds()/storeTime.Seconds(), "store/bare")
	b.ReportMetric(bareTime.Seconds()/plainTime.Seconds(), "uncompressed/bare")
	b.ReportMetric(float64(storeDisk)/float64(b.N)/float64(total), "store-disk/raw")
	b.ReportMetric(float64(plainDisk)/float64(b.N)/float64(total), "uncompressed-disk/raw")
}

func writeStore(b *testing.B, path string, corpus []benchMessage, opts boltstore.Options) time.Duration {
	ctx := context.Background()
	auth := storetest.NewAuthority(b, shuffle.Bits)
	s, err := boltstore.Open(ctx, path, opts)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordLease(ctx, auth.Lease(1)); err != nil {
		b.Fatal(err)
	}
	msgs := make([]store.Message, len(corpus))
	for i, m := range corpus {
		msgs[i] = store.Message{Number: auth.Number(b, 1, i), Raw: m.raw, Digest: m.digest, MessageID: m.id, List: "linux-mips"}
	}
	start := time.Now()
	for len(msgs) > 0 {
		k := min(benchBatch, len(msgs))
		if _, err := s.Put(ctx, msgs[:k]); err != nil {
			b.Fatal(err)
		}
		msgs = msgs[k:]
	}
	return time.Since(start)
}

func writeBare(b *testing.B, path string, corpus []benchMessage) time.Duration {
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	start := time.Now()
	for i := 0; i < len(corpus); i += benchBatch {
		err := db.Update(func(tx *bolt.Tx) error {
			bk, err := tx.CreateBucketIfNotExists([]byte("messages"))
			if err != nil {
				return err
			}
			for j := i; j < min(i+benchBatch, len(corpus)); j++ {
				if err := bk.Put(binary.BigEndian.AppendUint64(nil, uint64(j)), corpus[j].raw); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

// BenchmarkOpen measures what every operation pays: opening the file,
// one Get and closing, on a store of about 100,000 messages.
func BenchmarkOpen(b *testing.B) {
	ctx := context.Background()
	path := filepath.Join(b.TempDir(), "messages.db")
	auth := storetest.NewAuthority(b, shuffle.Bits)
	s, err := boltstore.Open(ctx, path, boltstore.Options{Linger: -1})
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	body := bytes.Repeat([]byte("a line of a message body, long enough to matter\n"), 40)
	const runs, perRun = 7, 16000
	for run := uint32(1); run <= runs; run++ {
		if err := s.RecordLease(ctx, auth.Lease(run)); err != nil {
			b.Fatal(err)
		}
		for seq := 0; seq < perRun; seq += benchBatch {
			var msgs []store.Message
			for i := seq; i < seq+benchBatch; i++ {
				raw := append(storetest.Mail("", string(binary.BigEndian.AppendUint32(nil, run<<16|uint32(i)))), body...)
				msgs = append(msgs, storetest.Message(auth.Number(b, run, i), raw, "", ""))
			}
			if _, err := s.Put(ctx, msgs); err != nil {
				b.Fatal(err)
			}
		}
	}
	if fi, err := os.Stat(path); err == nil {
		b.Logf("%s: %d messages, %.0f MB", path, runs*perRun, float64(fi.Size())/1e6)
	}
	n := auth.Number(b, 3, 5)
	known := auth.Lease(99)
	if err := s.RecordLease(ctx, known); err != nil {
		b.Fatal(err)
	}
	for _, ro := range []bool{true, false} {
		// The open alone, with the options the store uses.
		b.Run(map[bool]string{true: "bbolt-open-readonly", false: "bbolt-open-writable"}[ro], func(b *testing.B) {
			for b.Loop() {
				db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: ro, FreelistType: bolt.FreelistMapType, Timeout: time.Second})
				if err != nil {
					b.Fatal(err)
				}
				db.Close()
			}
		})
	}
	for _, op := range []struct {
		name  string
		write bool
	}{{"read", false}, {"write", true}} {
		b.Run(op.name, func(b *testing.B) {
			for b.Loop() {
				if op.write {
					// A lease already recorded: a writable open, a no-op
					// transaction, a close.
					if err := s.RecordLease(ctx, known); err != nil {
						b.Fatal(err)
					}
				} else if _, err := s.Get(ctx, n); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkGet reads random messages of the corpus from 32 goroutines,
// from a compressed store and from an uncompressed one (as before
// compression), interleaved so that a load on the machine weighs on both
// alike, and reports both rates and their ratio. One iteration is 2,000
// reads of each.
func BenchmarkGet(b *testing.B) {
	corpus, _ := readCorpus(b)
	dir := b.TempDir()
	type side struct {
		s       *boltstore.Store
		numbers []callnumber.Number
		took    time.Duration
	}
	var sides [2]side
	for i, opts := range []boltstore.Options{{}, {Compression: store.Compression{Off: true}, PageSize: 4096}} {
		path := filepath.Join(dir, fmt.Sprint(i), "messages.db")
		writeStore(b, path, corpus, opts)
		s, err := boltstore.Open(context.Background(), path, opts)
		if err != nil {
			b.Fatal(err)
		}
		defer s.Close()
		sides[i].s = s
		// writeStore's authority is its own: the feed lists the numbers.
		for after := store.Cursor(""); ; {
			page, err := s.Changes(context.Background(), after, 1000)
			if err != nil {
				b.Fatal(err)
			}
			if len(page.Messages) == 0 {
				break
			}
			for _, m := range page.Messages {
				sides[i].numbers = append(sides[i].numbers, m.Number)
			}
			after = page.Next
		}
	}
	const reads, clients = 2000, 32
	for b.Loop() {
		for i := range sides {
			sd := &sides[i]
			var next atomic.Int64
			var wg sync.WaitGroup
			start := time.Now()
			for c := range clients {
				wg.Go(func() {
					rng := rand.New(rand.NewPCG(uint64(c), 7))
					for next.Add(1) <= reads {
						n := sd.numbers[rng.IntN(len(sd.numbers))]
						if _, err := sd.s.Get(context.Background(), n); err != nil {
							b.Error(err)
							return
						}
					}
				})
			}
			wg.Wait()
			sd.took += time.Since(start)
		}
	}
	n := float64(b.N * reads)
	b.ReportMetric(n/sides[0].took.Seconds(), "compressed-gets/s")
	b.ReportMetric(n/sides[1].took.Seconds(), "uncompressed-gets/s")
	b.ReportMetric(sides[1].took.Seconds()/sides[0].took.Seconds(), "compressed/uncompressed")
}
