package ingest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"runtime"
	"strconv"
	"strings"
	"sync"
)

// Item is one message read from an input.
type Item struct {
	Raw []byte
	// Where says where it came from: file:line, a path, "stdin".
	Where string
	// Err, when set, says why the message could be delimited but not read.
	Err error
}

// Source yields one input's messages, then io.EOF; any other error ends it.
type Source interface {
	Next() (Item, error)
}

// ImportOptions configure Import. Zero values are documented per field.
type ImportOptions struct {
	// Archiver stores the messages. Required.
	Archiver *Archiver
	// Workers digest and parse messages in parallel; 0 means GOMAXPROCS.
	Workers int
	// BatchMessages and BatchBytes bound a store batch, written when it
	// reaches either (0: the defaults). Memory use is a small multiple of
	// BatchBytes plus the largest message.
	BatchMessages int
	BatchBytes    int
	// Partition K of N (1 <= K <= N) imports only the messages whose
	// 0-based position in the input is K-1 modulo N, so that N processes
	// given the same inputs share them out. N = 0 imports everything.
	PartitionK, PartitionN int
	// Manifest, if set, receives a ManifestEntry per message of this share.
	Manifest io.Writer
	// OnBatch, if set, gets the totals after each batch, on Import's goroutine.
	OnBatch func(Stats)
}

// Default batch bounds. A batch's messages, store records and touched
// index pages are in memory at once, so it bounds the importer's memory.
// 512 is a multiple of the Riak store's packs of 16 numbers, so that a
// batch does not end inside a pack the next one writes again.
const (
	DefaultBatchMessages = 512
	DefaultBatchBytes    = 8 << 20
)

// Stats count what Import did.
type Stats struct {
	Imported, Duplicates, Failed int64
	// Removed counts the duplicates of messages removed since they were
	// archived (manifest status "removed"), also counted as Duplicates.
	Removed int64
	// OtherList counts duplicates archived in another list (Outcome.OtherList).
	OtherList int64
	// Bytes is the size of the messages handled (stored or not).
	Bytes int64
}

// Messages returns the number of messages handled.
func (s Stats) Messages() int64 { return s.Imported + s.Duplicates + s.Failed }

// Add adds o to s.
func (s *Stats) Add(o Stats) {
	s.Imported += o.Imported
	s.Duplicates += o.Duplicates
	s.Failed += o.Failed
	s.Removed += o.Removed
	s.OtherList += o.OtherList
	s.Bytes += o.Bytes
}

// ManifestEntry is one line of the manifest. For a duplicate, CallNumber
// is the one already stored; for a removed one, the removed message's; for
// a failed message it is empty and Error says why.
type ManifestEntry struct {
	CallNumber string `json:"callnumber"`
	MessageID  string `json:"message_id"`
	Status     Status `json:"status"`
	Error      string `json:"error,omitempty"`
	// List is, for a duplicate, the other list it is in ("" for none).
	List *string `json:"list,omitempty"`
}

// ErrPartition is returned for a partition outside 1 <= K <= N.
var ErrPartition = errors.New("ingest: bad partition")

// ParsePartition reads "K/N" (1 <= K <= N); "" means no partition (0, 0).
func ParsePartition(s string) (k, n int, err error) {
	if s == "" {
		return 0, 0, nil
	}
	ks, ns, ok := strings.Cut(s, "/")
	k, err1 := strconv.Atoi(ks)
	n, err2 := strconv.Atoi(ns)
	if !ok || err1 != nil || err2 != nil || n < 1 || k < 1 || k > n {
		return 0, 0, fmt.Errorf("%w %q: want K/N with 1 <= K <= N, e.g. 2/4", ErrPartition, s)
	}
	return k, n, nil
}

// chunk is a run of consecutive input messages prepared together.
type chunk struct {
	items    []Item
	prepared []Prepared
	done     chan struct{}
}

const (
	chunkMessages = 128
	chunkBytes    = 4 << 20
)

// Import reads src to the end and archives every message of this
// process's share, returning the totals. Its error is a read error of src
// (after all read before it was stored) or a store error, which stops it:
// earlier batches are stored, the failed one is not, nor are later ones
// but the one begun while it was written, which the totals and the
// manifest count as what became of it.
// Messages the store refused are counted as Failed, not returned.
func Import(ctx context.Context, src Source, opts ImportOptions) (Stats, error) {
	if opts.Archiver == nil {
		return Stats{}, errors.New("ingest: ImportOptions.Archiver is required")
	}
	if opts.PartitionN < 0 || (opts.PartitionN > 0 && (opts.PartitionK < 1 || opts.PartitionK > opts.PartitionN)) {
		return Stats{}, fmt.Errorf("%w: %d/%d (want K/N with 1 <= K <= N)", ErrPartition, opts.PartitionK, opts.PartitionN)
	}
	workers := opts.Workers
	if workers <= 0 {
		workers = runtime.GOMAXPROCS(0)
	}
	if opts.BatchMessages <= 0 {
		opts.BatchMessages = DefaultBatchMessages
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}

	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan *chunk)
	ordered := make(chan *chunk, 2*workers) // bounds read-ahead
	var wg sync.WaitGroup
	var readErr error
	wg.Go(func() {
		defer close(work)
		defer close(ordered)
		readErr = readChunks(ctx, src, opts, ordered, work)
	})
	for range workers {
		wg.Go(func() {
			for c := range work {
				c.prepared = make([]Prepared, len(c.items))
				for i, it := range c.items {
					if it.Err != nil {
						c.prepared[i] = Prepared{Raw: it.Raw, Where: it.Where, Err: it.Err}
						continue
					}
					c.prepared[i] = Prepare(it.Raw, it.Where)
				}
				close(c.done)
			}
		})
	}
	stats, writeErr := writeBatches(ctx, ordered, opts)
	if writeErr != nil {
		cancel()
		for range ordered { // let the reader finish
		}
	}
	wg.Wait()
	if writeErr != nil {
		return stats, writeErr
	}
	if readErr != nil && !errors.Is(readErr, context.Canceled) {
		return stats, readErr
	}
	return stats, ctx.Err()
}

// readChunks groups src's messages into chunks and hands each to the
// writer (in order) and to a worker.
func readChunks(ctx context.Context, src Source, opts ImportOptions, ordered, work chan<- *chunk) error {
	var c *chunk
	var size int
	flush := func() bool {
		if c == nil {
			return true
		}
		select {
		case ordered <- c:
		case <-ctx.Done():
			return false
		}
		select {
		case work <- c:
		case <-ctx.Done():
			return false
		}
		c, size = nil, 0
		return true
	}
	for pos := 0; ; pos++ {
		it, err := src.Next()
		if err != nil {
			if !flush() {
				return ctx.Err()
			}
			if errors.Is(err, io.EOF) {
				return nil
			}
			return err
		}
		if opts.PartitionN > 0 && pos%opts.PartitionN != opts.PartitionK-1 {
			continue
		}
		if c == nil {
			c = &chunk{done: make(chan struct{})}
		}
		c.items = append(c.items, it)
		size += len(it.Raw)
		if len(c.items) >= chunkMessages || size >= chunkBytes {
			if !flush() {
				return ctx.Err()
			}
		}
	}
}

// storing is how many batches writeBatches has in the store at once: one
// compressed while the other is written.
const storing = 2

// writeBatches stores the prepared chunks in input order, in batches, up
// to storing batches at a time, and records their outcomes in order. A
// store error stops it once the batches already started are done: those
// are counted and in the manifest, whether they were stored or not.
func writeBatches(ctx context.Context, ordered <-chan *chunk, opts ImportOptions) (Stats, error) {
	var total Stats
	var enc *json.Encoder
	if opts.Manifest != nil {
		enc = json.NewEncoder(opts.Manifest)
		enc.SetEscapeHTML(false)
	}
	type started struct {
		batch []Prepared
		p     *pending
	}
	var inFlight []started
	// record waits for the oldest batch in flight and counts its outcomes.
	record := func() error {
		b := inFlight[0]
		inFlight = inFlight[1:]
		out, err := b.p.wait()
		if err != nil {
			// The whole batch failed: so did its messages, in totals and manifest.
			if enc != nil {
				for _, p := range b.batch {
					enc.Encode(ManifestEntry{MessageID: bracket(p.Meta.MessageID), Status: Failed, Error: err.Error()})
				}
			}
			total.Failed += int64(len(b.batch))
			return err
		}
		var s Stats
		for i, o := range out {
			s.Bytes += int64(len(b.batch[i].Raw))
			e := ManifestEntry{MessageID: bracket(o.MessageID), Status: o.Status}
			switch o.Status {
			case Imported:
				s.Imported++
			case Duplicate:
				s.Duplicates++
				if o.OtherList != nil {
					s.OtherList++
					e.List = o.OtherList
				}
			case Removed:
				s.Duplicates++
				s.Removed++
			case Failed:
				s.Failed++
				e.Error = o.Err.Error()
				opts.Archiver.log.Warn("message not stored", "where", o.Where, "err", o.Err)
			}
			if o.Status != Failed {
				e.CallNumber = o.Number.String()
			}
			if enc != nil {
				if err := enc.Encode(e); err != nil {
					return fmt.Errorf("cannot write manifest: %w", err)
				}
			}
		}
		total.Add(s)
		if opts.OnBatch != nil {
			opts.OnBatch(total)
		}
		return nil
	}
	// finish records every batch in flight and returns the first error.
	finish := func(err error) (Stats, error) {
		for len(inFlight) > 0 {
			if rerr := record(); err == nil {
				err = rerr
			}
		}
		return total, err
	}
	var batch []Prepared
	var size int
	flush := func() error {
		if len(batch) == 0 {
			return nil
		}
		if len(inFlight) == storing {
			if err := record(); err != nil {
				return err
			}
		}
		inFlight = append(inFlight, started{batch, opts.Archiver.start(ctx, batch)})
		batch, size = nil, 0
		return nil
	}
	// Each batch is recorded as soon as it is stored (and those before
	// it), not when the next one needs its place: the manifest and the
	// progress keep up while the input is slow.
	stored := func() <-chan struct{} {
		if len(inFlight) == 0 {
			return nil
		}
		return inFlight[0].p.done
	}
	for {
		var c *chunk
		select {
		case <-stored():
			if err := record(); err != nil {
				return finish(err)
			}
			continue
		case <-ctx.Done():
			return finish(ctx.Err())
		case next, ok := <-ordered:
			if !ok {
				return finish(flush())
			}
			c = next
		}
	prepared:
		for {
			select {
			case <-c.done:
				break prepared
			case <-stored():
				if err := record(); err != nil {
					return finish(err)
				}
			case <-ctx.Done():
				return finish(ctx.Err())
			}
		}
		for _, p := range c.prepared {
			batch = append(batch, p)
			size += len(p.Raw)
			if len(batch) >= opts.BatchMessages || size >= opts.BatchBytes {
				if err := flush(); err != nil {
					return finish(err)
				}
			}
		}
	}
}

func bracket(id string) string {
	if id == "" {
		return ""
	}
	return "<" + id + ">"
}
