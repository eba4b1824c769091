package boltstore

// The copy's digest and Message-ID indexes, sorted outside memory. A
// compaction meets their entries in the order of the messages' keys,
// which is random for both; put as they come, they would fill the copy's
// index pages by half to two thirds, and held until the end to be put in
// order, they would hold the archive's index in memory. So the entries
// are gathered in a bounded buffer, written sorted to a run file when it
// is full, and the runs merged into the copy once every message is in
// it: each index is then written in key order, in transactions of a
// bounded number of entries, and its pages filled whole.
//
// A run is the buffer's entries end to end, in key order: for digests,
// the 32-byte digest and the message's 8-byte key; for Message-IDs, the
// uvarint length of the index key (msgIDKey) and the key. The runs are
// in a directory beside the copy (COPY.sort), which nobody else uses:
// the compaction deletes it once merged, and a compaction or a recovery
// that finds one deletes it, as it does a partial copy.

import (
	"bufio"
	"bytes"
	"container/heap"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"

	bolt "go.etcd.io/bbolt"
)

// sortSuffix names the directory of a compaction's runs (COPY.sort).
const sortSuffix = ".sort"

// sortBuffer bounds the index entries gathered before they are written
// to a run.
const sortBuffer = 16 << 20

// mergeBatch bounds the entries put into the copy per transaction.
const mergeBatch = 50000

// digestEntry is the length of a digest index entry in a run.
const digestEntry = 32 + 8

// maxMsgIDKey bounds the length of a Message-ID index key: a longer
// Message-ID is keyed by its SHA-256 (msgIDKey).
const maxMsgIDKey = maxInlineID + 1 + 8

// sorter gathers index entries and writes them to runs in dir.
type sorter struct {
	dir   string
	limit int // bytes of entries gathered before a run is written
	buf   indexes
	runs  int // written, named 0, 1, ... in dir
}

func (s *sorter) add(d [32]byte, msgid string, key []byte) error {
	s.buf.add(d, msgid, key)
	if s.buf.size() >= s.limit {
		return s.spill()
	}
	return nil
}

func (s *sorter) runPath(kind string, n int) string {
	return filepath.Join(s.dir, fmt.Sprintf("%s-%d", kind, n))
}

// spill writes the entries gathered to a run of each index.
func (s *sorter) spill() error {
	x := &s.buf
	if len(x.digests) == 0 && len(x.msgids) == 0 {
		return nil
	}
	if err := os.MkdirAll(s.dir, 0o755); err != nil {
		return err
	}
	write := func(kind string, n int, entry func(w *bufio.Writer, i int)) error {
		f, err := os.OpenFile(s.runPath(kind, s.runs), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o644)
		if err != nil {
			return err
		}
		w := bufio.NewWriterSize(f, 256<<10)
		for i := range n {
			entry(w, i)
		}
		return errors.Join(w.Flush(), f.Close())
	}
	digests := x.sortedDigests()
	err := write("digests", len(digests), func(w *bufio.Writer, i int) {
		w.Write(x.digests[digests[i] : digests[i]+digestEntry])
	})
	if err != nil {
		return fmt.Errorf("cannot write a run of the digest index: %w", err)
	}
	ids := x.sortedMsgIDs()
	var n [binary.MaxVarintLen64]byte
	err = write("msgids", len(ids), func(w *bufio.Writer, i int) {
		k := x.msgIDKey(ids[i])
		w.Write(n[:binary.PutUvarint(n[:], uint64(len(k)))])
		w.Write(k)
	})
	if err != nil {
		return fmt.Errorf("cannot write a run of the Message-ID index: %w", err)
	}
	s.runs++
	*x = indexes{}
	return nil
}

// merge writes every run into the copy's index buckets, in key order,
// and deletes the runs.
func (s *sorter) merge(ctx context.Context, dst *bolt.DB) error {
	if err := s.spill(); err != nil {
		return err
	}
	if err := s.mergeKind(ctx, "digests", readDigestEntry, putBatch(dst, bucketDigests)); err != nil {
		return fmt.Errorf("cannot merge the digest index: %w", err)
	}
	if err := s.mergeKind(ctx, "msgids", readMsgIDEntry, putBatch(dst, bucketMsgIDs)); err != nil {
		return fmt.Errorf("cannot merge the Message-ID index: %w", err)
	}
	return os.RemoveAll(s.dir)
}

// putBatch puts a batch of entries, keys and values end to end in arena
// (ends: where each key and value ends, in turn), into the bucket of dst
// in one transaction; bbolt keeps references to them until the commit.
func putBatch(dst *bolt.DB, bucket []byte) func(arena []byte, ends []int) error {
	return func(arena []byte, ends []int) error {
		return dst.Update(func(tx *bolt.Tx) error {
			releaseMapped(tx)
			b := tx.Bucket(bucket)
			b.FillPercent = appendFill
			at := 0
			for i := 0; i < len(ends); i += 2 {
				k, v := arena[at:ends[i]], arena[ends[i]:ends[i+1]]
				if len(v) == 0 {
					v = nil
				}
				if err := b.Put(k, v); err != nil {
					return err
				}
				at = ends[i+1]
			}
			return nil
		})
	}
}

// readEntry reads the next entry of a run into buf[:0], returning its
// index key and value (which alias buf), or io.EOF after the last.
type readEntry func(r *bufio.Reader, buf []byte) (key, value []byte, err error)

func readDigestEntry(r *bufio.Reader, buf []byte) ([]byte, []byte, error) {
	buf = slices.Grow(buf[:0], digestEntry)[:digestEntry]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, fmt.Errorf("%w: a run's digest entry cut short", ErrFormat)
		}
		return nil, nil, err
	}
	return buf[:32], buf[32:], nil
}

func readMsgIDEntry(r *bufio.Reader, buf []byte) ([]byte, []byte, error) {
	n, err := binary.ReadUvarint(ioErrs{r})
	var ioErr readErr
	switch {
	case err == io.EOF: // at an entry's start: the end
		return nil, nil, err
	case errors.As(err, &ioErr):
		return nil, nil, ioErr.err // the run unreadable: not a format error
	case err != nil:
		// Cut short, or a length of more than 64 bits.
		return nil, nil, fmt.Errorf("%w: a run's Message-ID entry: %w", ErrFormat, err)
	}
	if n == 0 || n > maxMsgIDKey {
		return nil, nil, fmt.Errorf("%w: a run's Message-ID entry of %d bytes", ErrFormat, n)
	}
	buf = slices.Grow(buf[:0], int(n))[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, nil, fmt.Errorf("%w: a run's Message-ID entry cut short", ErrFormat)
		}
		return nil, nil, err
	}
	return buf, nil, nil
}

// ioErrs tells the errors of reading a run apart from binary.ReadUvarint's
// own: it passes io.EOF through, which ReadUvarint needs to see, and
// wraps any other in a readErr.
type ioErrs struct{ r *bufio.Reader }

func (e ioErrs) ReadByte() (byte, error) {
	b, err := e.r.ReadByte()
	if err != nil && err != io.EOF {
		err = readErr{err}
	}
	return b, err
}

// readErr is an error of the reader under binary.ReadUvarint.
type readErr struct{ err error }

func (e readErr) Error() string { return e.err.Error() }
func (e readErr) Unwrap() error { return e.err }

// runHead is a run being merged and its next entry.
type runHead struct {
	r          *bufio.Reader
	buf        []byte
	key, value []byte
}

type runHeap []*runHead

func (h runHeap) Len() int           { return len(h) }
func (h runHeap) Less(i, j int) bool { return bytes.Compare(h[i].key, h[j].key) < 0 }
func (h runHeap) Swap(i, j int)      { h[i], h[j] = h[j], h[i] }
func (h *runHeap) Push(x any)        { *h = append(*h, x.(*runHead)) }
func (h *runHeap) Pop() any {
	old := *h
	x := old[len(old)-1]
	*h = old[:len(old)-1]
	return x
}

// mergeKind merges the runs of one index, giving put batches of at most
// mergeBatch entries in key order, each in an arena of its own.
func (s *sorter) mergeKind(ctx context.Context, kind string, read readEntry, put func(arena []byte, ends []int) error) error {
	var h runHeap
	for n := range s.runs {
		f, err := os.Open(s.runPath(kind, n))
		if err != nil {
			return err
		}
		defer f.Close()
		rh := &runHead{r: bufio.NewReaderSize(f, 64<<10)}
		if rh.key, rh.value, err = read(rh.r, rh.buf); errors.Is(err, io.EOF) {
			continue
		} else if err != nil {
			return fmt.Errorf("%s: %w", f.Name(), err)
		}
		rh.buf = rh.key[:cap(rh.key)]
		h = append(h, rh)
	}
	heap.Init(&h)
	return mergeRuns(ctx, &h, read, put)
}

func mergeRuns(ctx context.Context, h *runHeap, read readEntry, put func(arena []byte, ends []int) error) error {
	var arena []byte
	var ends []int // of each entry's key and value in arena, in turn
	var last []byte
	for h.Len() > 0 {
		if err := ctx.Err(); err != nil {
			return err
		}
		arena, ends = arena[:0], ends[:0]
		for h.Len() > 0 && len(ends) < 2*mergeBatch {
			rh := (*h)[0]
			if last != nil && bytes.Compare(rh.key, last) <= 0 {
				return fmt.Errorf("%w: index key %x twice, or out of order in a run", ErrFormat, rh.key)
			}
			arena = append(arena, rh.key...)
			ends = append(ends, len(arena))
			arena = append(arena, rh.value...)
			ends = append(ends, len(arena))
			last = arena[ends[len(ends)-2]-len(rh.key) : ends[len(ends)-2]]
			var err error
			if rh.key, rh.value, err = read(rh.r, rh.buf); errors.Is(err, io.EOF) {
				heap.Pop(h)
			} else if err != nil {
				return err
			} else {
				rh.buf = rh.key[:cap(rh.key)]
				heap.Fix(h, 0)
			}
		}
		if err := put(arena, ends); err != nil {
			return err
		}
		// The next batch gets an arena of its own; last is copied out of
		// this one.
		last = bytes.Clone(last)
		arena, ends = nil, nil
	}
	return nil
}
