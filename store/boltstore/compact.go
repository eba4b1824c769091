package boltstore

// Compaction: a copy of the store with every record written anew, in
// place (the copy replaces the file) or into another file. It compresses
// each era of the archive harder than records written as messages arrive,
// with a dictionary trained on that era; it converts older files, and gives
// back the space bbolt frees but never returns.
//
// The copy is made while other processes keep using the store: messages
// are copied in key order, in chunks of short read transactions, into a new
// file nobody else opens. It streams: an era is read twice, once for its
// size and its dictionary's sample and once to be copied, and the copy's
// indexes are sorted on disk (compactsort.go), so that what a compaction
// holds in memory does not grow with the archive. Then, in place, Compact takes the write lock,
// copies what was stored meanwhile (through the change feed), the leases
// and the meta records, syncs the copy, marks the old file retired in the
// same transaction, renames the copy over it and only then lets go of the
// lock. A process that had opened the old file sees the mark once it gets
// the lock, and opens the path again (handles.go). The change feed keeps
// its sequence numbers, so saved cursors stay valid.
//
// If Compact stops before the mark, the old file is untouched and the next
// Compact deletes the partial copy (PATH.compact). If it stops between the
// mark and the rename, the old file refuses to open (ErrInterrupted) until
// Recover renames the complete copy into place.

import (
	"bytes"
	"cmp"
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/internal/lockfile"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

// keyCompaction names a compaction: in the retired file, the copy that
// replaced it; in the copy, itself.
var keyCompaction = []byte("compaction")

// compactSuffix is appended to the path of a store compacted in place.
const compactSuffix = ".compact"

// compactChunk and compactChunkBytes bound the messages read per read
// transaction, and so what a compaction holds in memory.
const (
	compactChunk      = 1000
	compactChunkBytes = 8 << 20
)

// Eras: a compaction cuts the store, in key order, into eras of at least
// eraMessages and at most maxEras of them, each compressed at record.Strong
// with a dictionary trained on itself: a list's mail changes over the
// years, and records written as messages arrive only had older messages'.
const (
	eraMessages = 1500
	maxEras     = 16
	// eraBytes ends an era early when its messages add up to this many
	// bytes: a dictionary learns from a sample of eraSampleBytes.
	eraBytes = 64 << 20
	// eraSampleBytes is how much of an era its dictionary learns from.
	eraSampleBytes = 2 << 20
)

// CompactOptions configure Compact. The zero value compacts in place.
type CompactOptions struct {
	// To is the path of a new file to copy the store into, leaving the store
	// as it is. Empty means in place.
	To string
	// PageSize is the new file's bbolt page size; zero means DefaultPageSize.
	PageSize int
	// Progress, if not nil, is called after every chunk of messages copied
	// with the messages copied so far and the number the store held at the
	// start.
	Progress func(done, total int64)

	// sortBuffer, if not zero, replaces sortBuffer (for tests).
	sortBuffer int
}

// CompactStats says what Compact did.
type CompactStats struct {
	// Messages is the number of messages copied.
	Messages int64
	// Dicts is the number of dictionaries the copy's records use, one per era.
	Dicts int
	// Before and After are the bytes on disk of the old file and the copy.
	Before, After int64
	// Path is the copy's path (the store's own, in place).
	Path string
}

// Compact copies the store into a new file with every record written
// anew, and in place (opts.To empty) replaces the store's file by the
// copy, while other processes keep working. What it holds in memory does
// not grow with the archive; it needs the disk space of the copy, and
// for a while that of its indexes again.
func (s *Store) Compact(ctx context.Context, opts CompactOptions) (CompactStats, error) {
	if err := s.h.check(); err != nil {
		return CompactStats{}, err
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if err := checkPageSize(opts.PageSize); err != nil {
		return CompactStats{}, fmt.Errorf("cannot compact %s: %w", s.path, err)
	}
	lock, err := takeMaintenance(s.path, "compaction")
	if err != nil {
		return CompactStats{}, fmt.Errorf("cannot compact %s: %w", s.path, err)
	}
	defer lock.Release()
	st, err := s.compact(ctx, opts)
	if err != nil {
		return st, fmt.Errorf("cannot compact %s: %w", s.path, err)
	}
	return st, nil
}

// maintenanceSuffix names the lock file (PATH.compact.lock) that Compact
// and Recover hold for their whole run: two at once would each take the
// other's copy for an abandoned one, and the first to finish would move the
// other's partial copy into place and delete the packs it does not list.
const maintenanceSuffix = ".compact.lock"

// takeMaintenance takes the maintenance lock of the store at path, or
// says at once who holds it (ErrMaintenance).
func takeMaintenance(path, what string) (*lockfile.Lock, error) {
	l, err := lockfile.Take(path+maintenanceSuffix, what)
	if he := (*lockfile.HeldError)(nil); errors.As(err, &he) {
		holder := he.Holder
		if holder == "" {
			holder = "another process"
		}
		return nil, fmt.Errorf("%w: %s holds %s; wait for it to end (a compaction that is killed lets go of it)", ErrMaintenance, holder, he.Path)
	}
	return l, err
}

// copier holds the state of one compaction.
type copier struct {
	s     *Store
	dst   *bolt.DB
	packs *packs // the copy's
	id    []byte // the compaction's ID
	codec record.Codec
	cur   []byte // the store's current-dictionary record, or nil

	eraSize int                // messages per era
	last    *record.Dictionary // of the last era written, or nil
	dicts   int                // trained and saved in the copy

	listed map[packID]bool // the copy's packs, once complete
	sort   *sorter         // the bulk copy's index entries
	merged bool            // sort merged into the copy: index holds the tail's
	index  indexes         // the tail's index entries
	done   atomic.Int64    // messages copied
	total  int64
	opts   CompactOptions
}

func (s *Store) compact(ctx context.Context, opts CompactOptions) (CompactStats, error) {
	inPlace := opts.To == ""
	to := opts.To
	// Before the copy's packs join the store's in their directory.
	before := blocks(s.path) + packBlocks(packDir(s.path))
	if inPlace {
		to = s.path + compactSuffix
		if err := os.Remove(to); err == nil {
			s.log.Info("removed the partial copy of an interrupted compaction", "path", to)
		} else if !errors.Is(err, os.ErrNotExist) {
			return CompactStats{}, err
		}
		if err := os.RemoveAll(to + sortSuffix); err != nil {
			return CompactStats{}, err
		}
	} else if _, err := os.Stat(to); err == nil {
		return CompactStats{}, fmt.Errorf("%s exists: the copy must go to a new file", to)
	} else if _, err := os.Stat(to + sortSuffix); err == nil {
		return CompactStats{}, fmt.Errorf("%s exists (left by a compaction that was interrupted?): delete it, the copy's index runs go there", to+sortSuffix)
	} else if ents, _ := os.ReadDir(packDir(to)); len(ents) > 0 {
		return CompactStats{}, fmt.Errorf("%s holds files: the copy's packs must go to a new directory", packDir(to))
	}
	if err := os.MkdirAll(filepath.Dir(to), 0o755); err != nil {
		return CompactStats{}, err
	}
	dst, err := bolt.Open(to, 0o644, &bolt.Options{
		Timeout: time.Second, PageSize: opts.PageSize, FreelistType: bolt.FreelistMapType,
		NoSync: true, // synced once, before it is used
	})
	if err != nil {
		return CompactStats{}, fmt.Errorf("cannot create %s: %w", to, err)
	}
	dst.AllocSize = 16 << 20
	// In place, the copy's packs go beside the store's, under new names.
	final := to
	if inPlace {
		final = s.path
	}
	c := &copier{s: s, dst: dst, packs: newPacks(packDir(final), false), opts: opts}
	c.sort = &sorter{dir: to + sortSuffix, limit: cmp.Or(opts.sortBuffer, sortBuffer)}
	defer c.packs.close()
	defer os.RemoveAll(c.sort.dir)
	c.id = make([]byte, 16)
	rand.Read(c.id)
	ok := false
	defer func() {
		if !ok {
			dst.Close()
			os.Remove(to)
			c.removePacks()
		}
	}()
	if err := c.start(ctx); err != nil {
		return CompactStats{}, err
	}
	seq, err := c.bulk(ctx)
	if err != nil {
		return CompactStats{}, err
	}
	finish := func(tx *bolt.Tx) error {
		if err := c.tail(tx, seq); err != nil {
			return err
		}
		var size int64
		dst.View(func(tx *bolt.Tx) error { size = tx.Size(); c.listed = listedPacks(tx); return nil })
		if err := dst.Close(); err != nil {
			return err
		}
		if err := c.syncPacks(); err != nil {
			return err
		}
		// bbolt grows a file ahead of its pages: cut the copy to its last
		// page, and make it durable.
		return truncateSync(to, size)
	}
	if inPlace {
		err = s.h.exclusive(ctx, func(db *bolt.DB) error {
			err := db.Update(func(tx *bolt.Tx) error {
				if err := finish(tx); err != nil {
					return err
				}
				meta := tx.Bucket(bucketMeta)
				if err := meta.Put(keyCompaction, c.id); err != nil {
					return err
				}
				return meta.Put(keyFormat, []byte(formatRetired))
			})
			if err != nil {
				return err
			}
			// The old file is retired: from here on only the copy is
			// the store, and the lock is held until it is in place.
			ok = true
			// Nobody can be in a transaction of the old file, nor open the copy
			// yet: delete the packs the copy does not list (the old file's, and
			// those of crashed writers) before the copy can create its own.
			if n, err := removeUnlisted(c.packs.dir, c.listed); err != nil {
				s.log.Warn("cannot delete the packs of the old file: delete those the store does not list by hand", "dir", c.packs.dir, "err", err)
			} else if n > 0 {
				s.log.Debug("deleted the packs of the old file", "packs", n)
			}
			return moveInto(to, s.path)
		})
	} else {
		err = s.view(ctx, finish)
		ok = err == nil
	}
	if err != nil {
		return CompactStats{}, err
	}
	st := CompactStats{Messages: c.done.Load(), Before: before, Path: to}
	if inPlace {
		st.Path = s.path
	}
	st.After = blocks(st.Path) + packBlocks(packDir(st.Path))
	st.Dicts = c.dicts
	if c.opts.Progress != nil {
		c.opts.Progress(st.Messages, max(c.total, st.Messages))
	}
	s.log.Debug("compacted the message store", "to", st.Path, "messages", st.Messages, "dicts", st.Dicts, "before", st.Before, "after", st.After)
	return st, nil
}

// start reads what the copy needs of the store and creates its buckets.
func (c *copier) start(ctx context.Context) error {
	s := c.s
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if bd, err := s.binding(tx); err != nil || bd == nil {
			return fmt.Errorf("nothing to compact: %w", store.ErrUnbound)
		}
		count := tx.Bucket(bucketMeta).Get(keyCount)
		if len(count) != 8 {
			return fmt.Errorf("%w: message count of %d bytes", ErrFormat, len(count))
		}
		c.total = int64(binary.BigEndian.Uint64(count))
		c.cur = bytes.Clone(tx.Bucket(bucketMeta).Get(keyDict))
		return nil
	})
	if err != nil {
		return err
	}
	c.eraSize = max(eraMessages, int((c.total+maxEras-1)/maxEras))
	return c.dst.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMessages, bucketDigests, bucketMsgIDs, bucketRuns, bucketMeta, bucketChanges, bucketDicts, bucketPacks} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Put(keyCompaction, c.id); err != nil {
			return err
		}
		return meta.Put(keyFormat, []byte(format))
	})
}

// bulk copies every message stored when it starts (and some stored
// since), and the change feed up to its sequence then, which it returns.
func (c *copier) bulk(ctx context.Context) (uint64, error) {
	s := c.s
	var seq uint64
	if err := s.view(ctx, func(tx *bolt.Tx) error {
		if ch := tx.Bucket(bucketChanges); ch != nil {
			seq = ch.Sequence()
		}
		return nil
	}); err != nil {
		return 0, err
	}
	// Era by era: its extent and sample, its dictionary, then its copy.
	var after []byte // the last key copied
	for {
		e, err := c.survey(ctx, after)
		if err != nil {
			return 0, err
		}
		if e.count == 0 {
			break
		}
		d := c.last
		// The last era, if less than half an era, shares the one before's.
		if !c.s.comp.Off() && (d == nil || e.full || e.count >= c.eraSize/2) {
			if d, err = c.train(ctx, e.samples); err != nil {
				return 0, err
			}
		}
		if c.last != nil && c.last != d {
			c.last.ReleaseEncoder()
		}
		c.last = d
		if err := c.copyRange(ctx, after, e.end, d); err != nil {
			return 0, err
		}
		after = e.end
	}
	if err := c.sort.merge(ctx, c.dst); err != nil {
		return 0, err
	}
	c.merged = true
	// The change feed up to seq: entries there never change.
	var from uint64
	for from < seq {
		var keys, vals [][]byte
		err := s.view(ctx, func(tx *bolt.Tx) error {
			releaseMapped(tx)
			cur := tx.Bucket(bucketChanges).Cursor()
			for k, v := cur.Seek(seqKey(from + 1)); k != nil && binary.BigEndian.Uint64(k) <= seq && len(keys) < 10*compactChunk; k, v = cur.Next() {
				keys, vals = append(keys, bytes.Clone(k)), append(vals, bytes.Clone(v))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if len(keys) == 0 {
			break
		}
		from = binary.BigEndian.Uint64(keys[len(keys)-1])
		err = c.dst.Update(func(tx *bolt.Tx) error {
			changes := tx.Bucket(bucketChanges)
			changes.FillPercent = appendFill
			for i := range keys {
				if err := changes.Put(keys[i], vals[i]); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
	}
	return seq, nil
}

// tail copies, within the store's last transaction of the compaction,
// what was stored after the bulk copy, the leases and the meta records.
func (c *copier) tail(tx *bolt.Tx, seq uint64) error {
	messages := tx.Bucket(bucketMessages)
	var keys, recs, feedKeys, feedVals [][]byte
	if ch := tx.Bucket(bucketChanges); ch != nil {
		// A message stored since the bulk copy began is in the copy if
		// the bulk copy met it.
		err := c.dst.View(func(dtx *bolt.Tx) error {
			copied := dtx.Bucket(bucketMessages)
			tail := make(map[uint64]bool)
			cur := ch.Cursor()
			for k, v := cur.Seek(seqKey(seq + 1)); k != nil; k, v = cur.Next() {
				feedKeys, feedVals = append(feedKeys, k), append(feedVals, v)
				if len(v) != 8 || tail[binary.BigEndian.Uint64(v)] || copied.Get(v) != nil {
					continue
				}
				if rec := messages.Get(v); rec != nil {
					rec, err := c.s.recordCopy(tx, rec)
					if err != nil {
						return fmt.Errorf("cannot read message %s: %w", c.s.numberOf(v), err)
					}
					keys, recs = append(keys, v), append(recs, rec)
					tail[binary.BigEndian.Uint64(v)] = true
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
	}
	var mu sync.Mutex // a transaction is not safe for concurrent use
	load := func(id record.DictID) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		return loadDict(tx, id)
	}
	// What was stored meanwhile joins the last era.
	msgs, err := c.decode(keys, recs, load, true)
	if err != nil {
		return err
	}
	if err := c.write(keys, msgs, c.last); err != nil {
		return err
	}
	count := tx.Bucket(bucketMeta).Get(keyCount)
	if len(count) != 8 {
		return fmt.Errorf("%w: message count of %d bytes", ErrFormat, len(count))
	}
	if got, want := c.done.Load(), int64(binary.BigEndian.Uint64(count)); got != want {
		return fmt.Errorf("%w: copied %d messages, the store counts %d", ErrFormat, got, want)
	}
	return c.dst.Update(func(dtx *bolt.Tx) error {
		if err := c.index.flush(dtx); err != nil {
			return err
		}
		changes := dtx.Bucket(bucketChanges)
		changes.FillPercent = appendFill
		for i := range feedKeys {
			if err := changes.Put(feedKeys[i], feedVals[i]); err != nil {
				return err
			}
		}
		if ch := tx.Bucket(bucketChanges); ch != nil {
			if err := changes.SetSequence(ch.Sequence()); err != nil {
				return err
			}
		}
		runs := dtx.Bucket(bucketRuns)
		runs.FillPercent = appendFill
		err := tx.Bucket(bucketRuns).ForEach(func(k, v []byte) error { return runs.Put(k, v) })
		if err != nil {
			return err
		}
		meta, from := dtx.Bucket(bucketMeta), tx.Bucket(bucketMeta)
		for _, k := range [][]byte{keyBinding, keyBackfilled} {
			if v := from.Get(k); v != nil {
				if err := meta.Put(k, v); err != nil {
					return err
				}
			}
		}
		if err := meta.Put(keyCount, binary.BigEndian.AppendUint64(nil, uint64(c.done.Load()))); err != nil {
			return err
		}
		// The removal records, and the digests and contents of what they
		// removed, which stay refused. (No removal runs now: both hold the maintenance lock.)
		if rb := tx.Bucket(bucketRemoved); rb != nil {
			drb, err := dtx.CreateBucketIfNotExists(bucketRemoved)
			if err != nil {
				return err
			}
			digests := dtx.Bucket(bucketDigests)
			err = rb.ForEach(func(k, v []byte) error {
				if len(k) != 8 {
					return fmt.Errorf("%w: removal key of %d bytes", ErrFormat, len(k))
				}
				r, err := record.UnmarshalRemoval(0, v)
				if err != nil {
					return err
				}
				if err := drb.Put(bytes.Clone(k), bytes.Clone(v)); err != nil {
					return err
				}
				if err := putContent(digests, r.Content, [8]byte(k)); err != nil {
					return err
				}
				return digests.Put(bytes.Clone(r.Digest[:]), bytes.Clone(k))
			})
			if err != nil {
				return err
			}
			if err := raiseFormat(dtx, formatRemovals); err != nil {
				return err
			}
		}
		// The moves, which the messages' records do not hold.
		if mb := tx.Bucket(bucketMoves); mb != nil {
			dmb, err := dtx.CreateBucketIfNotExists(bucketMoves)
			if err != nil {
				return err
			}
			if err := mb.ForEach(func(k, v []byte) error { return dmb.Put(bytes.Clone(k), bytes.Clone(v)) }); err != nil {
				return err
			}
			if err := raiseFormat(dtx, formatMoves); err != nil {
				return err
			}
		}
		// Every dictionary of the store: a writer elsewhere may have one
		// cached that the copy's records do not name, and go on writing
		// records with it into the copy.
		if d := tx.Bucket(bucketDicts); d != nil {
			dd := dtx.Bucket(bucketDicts)
			err := d.ForEach(func(k, v []byte) error {
				if dd.Get(k) != nil || len(k) != len(record.DictID{}) {
					return nil
				}
				dict, err := record.CheckDictionary(record.DictID(k), v)
				if err != nil {
					return fmt.Errorf("cannot copy dictionary %x: %w", k, err)
				}
				return dd.Put(bytes.Clone(k), record.StoredDict(dict.Bytes))
			})
			if err != nil {
				return err
			}
		}
		// Writers go on with the store's current dictionary, trained on its
		// newest messages; a store without one gets the last era's.
		cur := from.Get(keyDict)
		if cur == nil && c.last != nil {
			cur = record.MarshalCurrent(record.Current{ID: c.last.ID, Messages: c.done.Load(), Samples: -1, Trained: time.Now().UTC()})
		}
		if cur != nil {
			return meta.Put(keyDict, bytes.Clone(cur))
		}
		return nil
	})
}

// era is what survey found of the next era.
type era struct {
	end     []byte   // its last key
	count   int      // its messages
	full    bool     // ended by eraSize or eraBytes, not by the last message
	samples [][]byte // for its dictionary
}

// survey reads the era after the key after (the first if nil): where it
// ends, and a sample spread over it for its dictionary. It holds a chunk
// and the sample, never the era.
func (c *copier) survey(ctx context.Context, after []byte) (era, error) {
	var e era
	var smp sampler
	size := 0
	for !e.full {
		keys, recs, err := c.read(ctx, after, nil)
		if err != nil {
			return era{}, err
		}
		if len(keys) == 0 {
			break
		}
		after = keys[len(keys)-1]
		// The digests are checked as the era is copied.
		msgs, err := c.decode(keys, recs, c.load(ctx), false)
		if err != nil {
			return era{}, err
		}
		for i, m := range msgs {
			e.end, e.count = keys[i], e.count+1
			size += len(m.Raw)
			smp.add(m.Raw)
			if e.count >= c.eraSize || size >= eraBytes {
				e.full = true
				break
			}
		}
	}
	e.samples = smp.samples()
	return e, nil
}

// copyRange copies the messages after the key after up to end, with d.
func (c *copier) copyRange(ctx context.Context, after, end []byte, d *record.Dictionary) error {
	for {
		keys, recs, err := c.read(ctx, after, end)
		if err != nil {
			return err
		}
		if len(keys) == 0 {
			return nil
		}
		after = keys[len(keys)-1]
		// Each message's digest is checked: the copy vouches for them.
		msgs, err := c.decode(keys, recs, c.load(ctx), true)
		if err != nil {
			return err
		}
		if err := c.write(keys, msgs, d); err != nil {
			return err
		}
	}
}

// load loads the store's dictionaries, each in a read transaction.
func (c *copier) load(ctx context.Context) compress.LoadFunc {
	return func(id record.DictID) ([]byte, error) { return dicts{c.s}.LoadDict(ctx, id) }
}

// read reads, in a read transaction, the records of a chunk of messages
// after the key after (the first if nil), up to end if not nil.
func (c *copier) read(ctx context.Context, after, end []byte) (keys, recs [][]byte, err error) {
	if err := ctx.Err(); err != nil {
		return nil, nil, err
	}
	s := c.s
	err = s.view(ctx, func(tx *bolt.Tx) error {
		// The bulk copy reads every page of the messages bucket, once.
		releaseMapped(tx)
		cur := tx.Bucket(bucketMessages).Cursor()
		k, v := cur.First()
		if after != nil {
			if k, v = cur.Seek(after); bytes.Equal(k, after) {
				k, v = cur.Next()
			}
		}
		size := 0
		for ; k != nil && len(keys) < compactChunk && size < compactChunkBytes; k, v = cur.Next() {
			if end != nil && bytes.Compare(k, end) > 0 {
				break
			}
			rec, err := s.recordCopy(tx, v)
			if err != nil {
				return fmt.Errorf("cannot read message %s: %w", s.numberOf(k), err)
			}
			keys, recs = append(keys, bytes.Clone(k)), append(recs, rec)
			size += len(rec)
		}
		return nil
	})
	return keys, recs, err
}

// sampler keeps a sample spread evenly over the messages it is given:
// every stride-th small enough to learn from, the stride doubling
// whenever the sample outgrows twice eraSampleBytes.
type sampler struct {
	stride int // keeps the small messages whose index is a multiple
	n      int // small messages seen
	size   int // their bytes
	kept   [][]byte
	bytes  int // of kept
}

func (s *sampler) add(raw []byte) {
	if len(raw) > record.MaxSample {
		return
	}
	s.stride = max(s.stride, 1)
	if s.n%s.stride == 0 {
		s.kept = append(s.kept, bytes.Clone(raw))
		s.bytes += len(raw)
	}
	s.n++
	s.size += len(raw)
	for s.bytes > 2*eraSampleBytes {
		s.stride *= 2
		j, b := 0, 0
		for i := 0; i < len(s.kept); i += 2 {
			s.kept[j] = s.kept[i]
			b += len(s.kept[j])
			j++
		}
		clear(s.kept[j:])
		s.kept, s.bytes = s.kept[:j], b
	}
}

// samples returns about eraSampleBytes of the sample, every stride-th
// small message for the stride the whole era calls for.
func (s *sampler) samples() [][]byte {
	if s.stride == 0 {
		return nil
	}
	step := max(1, s.size/eraSampleBytes/s.stride)
	var out [][]byte
	for i := 0; i < len(s.kept); i += step {
		out = append(out, s.kept[i])
	}
	return out
}

// train trains an era's dictionary on its samples and saves it in the
// copy; an era too small or uniform to learn from gets the one before
// (or nil).
func (c *copier) train(ctx context.Context, samples [][]byte) (*record.Dictionary, error) {
	b, err := record.Train(ctx, samples)
	if err != nil {
		if ctx.Err() != nil {
			return nil, ctx.Err()
		}
		c.s.log.Debug("no dictionary for an era of the compacted store", "samples", len(samples), "err", err)
		return c.last, nil
	}
	d, err := record.NewDictionary(b)
	if err != nil {
		return nil, err
	}
	err = c.dst.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketDicts).Put(d.ID[:], record.StoredDict(d.Bytes))
	})
	if err != nil {
		return nil, fmt.Errorf("cannot save a dictionary in the copy: %w", err)
	}
	c.dicts++
	return d, nil
}

// decode decodes records (which recordCopy read) on all CPUs, checking
// every message's digest if digests.
func (c *copier) decode(keys, recs [][]byte, load compress.LoadFunc, digests bool) ([]record.Message, error) {
	s := c.s
	dec := s.comp.Decode
	if digests {
		dec = s.comp.DecodeDigest
	}
	msgs := make([]record.Message, len(keys))
	errs := make([]error, len(keys))
	parallel(len(keys), func(i int) {
		m, err := dec(recs[i], load)
		if err != nil {
			errs[i] = fmt.Errorf("cannot read message %s: %w", s.numberOf(keys[i]), err)
			return
		}
		msgs[i] = m // Raw may alias recs[i], which is the copier's
	})
	return msgs, errors.Join(errs...)
}

// write compresses messages anew on all CPUs, with d at record.Strong,
// and stores them with their indexes in the copy.
func (c *copier) write(keys [][]byte, msgs []record.Message, d *record.Dictionary) error {
	if len(keys) == 0 {
		return nil
	}
	s := c.s
	out := make([][]byte, len(keys))
	errs := make([]error, len(keys))
	parallel(len(keys), func(i int) {
		if s.comp.Off() {
			out[i] = record.AppendMessage(nil, msgs[i])
			return
		}
		var err error
		out[i], err = c.codec.AppendLevel(nil, msgs[i], d, record.Strong)
		if errors.Is(err, record.ErrVerify) {
			s.log.Warn("compressed message did not decode to itself: copied uncompressed", "callnumber", s.numberOf(keys[i]), "err", err)
			out[i], err = record.AppendMessage(nil, msgs[i]), nil
		}
		errs[i] = err
	})
	if err := errors.Join(errs...); err != nil {
		return err
	}
	err := c.dst.Update(func(tx *bolt.Tx) error {
		releaseMapped(tx)
		messages := tx.Bucket(bucketMessages)
		messages.FillPercent = appendFill
		pw := c.packs.writer(tx)
		pw.noSync = true // syncPacks syncs them all at the end
		for i, k := range keys {
			loc, err := pw.add(out[i])
			if err != nil {
				return err
			}
			if err := messages.Put(k, loc); err != nil {
				return err
			}
		}
		return pw.commit()
	})
	if err != nil {
		return fmt.Errorf("cannot write the copy: %w", err)
	}
	for i, k := range keys {
		if c.merged {
			c.index.add(msgs[i].Digest, msgs[i].MessageID, k)
		} else if err := c.sort.add(msgs[i].Digest, msgs[i].MessageID, k); err != nil {
			return err
		}
	}
	done := c.done.Add(int64(len(keys)))
	if c.opts.Progress != nil {
		c.opts.Progress(done, max(c.total, done))
	}
	return nil
}

func parallel(n int, fn func(i int)) {
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), n) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					return
				}
				fn(i)
			}
		})
	}
	wg.Wait()
}

// indexes are digest and Message-ID index entries, to be written in key
// order so that the copy's index pages are filled whole rather than by
// half to two thirds.
type indexes struct {
	digests []byte   // entries of 32-byte digest and 8-byte key
	arena   []byte   // Message-ID index keys, end to end
	msgids  []uint32 // where each starts in arena
}

func (x *indexes) add(d store.Digest, msgid string, key []byte) {
	x.digests = append(append(x.digests, d[:]...), key...)
	if msgid != "" {
		x.msgids = append(x.msgids, uint32(len(x.arena)))
		x.arena = append(x.arena, msgIDKey(msgid, key)...)
	}
}

func (x *indexes) size() int { return len(x.digests) + len(x.arena) + 4*len(x.msgids) }

// sortedDigests returns where each digest entry starts, in key order.
func (x *indexes) sortedDigests() []int {
	order := make([]int, len(x.digests)/digestEntry)
	for i := range order {
		order[i] = i * digestEntry
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(x.digests[a:a+32], x.digests[b:b+32]) })
	return order
}

func (x *indexes) msgIDKey(i int) []byte {
	end := len(x.arena)
	if i+1 < len(x.msgids) {
		end = int(x.msgids[i+1])
	}
	return x.arena[x.msgids[i]:end]
}

// sortedMsgIDs returns the Message-ID entries' numbers in key order.
func (x *indexes) sortedMsgIDs() []int {
	ids := make([]int, len(x.msgids))
	for i := range ids {
		ids[i] = i
	}
	slices.SortFunc(ids, func(a, b int) int { return bytes.Compare(x.msgIDKey(a), x.msgIDKey(b)) })
	return ids
}

// flush puts the entries into the copy's index buckets.
func (x *indexes) flush(tx *bolt.Tx) error {
	digests := tx.Bucket(bucketDigests)
	digests.FillPercent = appendFill
	for _, at := range x.sortedDigests() {
		if err := digests.Put(x.digests[at:at+32], x.digests[at+32:at+digestEntry]); err != nil {
			return err
		}
	}
	msgids := tx.Bucket(bucketMsgIDs)
	msgids.FillPercent = appendFill
	for _, i := range x.sortedMsgIDs() {
		if err := msgids.Put(x.msgIDKey(i), nil); err != nil {
			return err
		}
	}
	// bbolt keeps references to keys and values until the commit: give
	// the next entries new buffers.
	*x = indexes{}
	return nil
}

// recordCopy returns, in memory of its own, the record a messages bucket
// value is or locates.
func (s *Store) recordCopy(tx *bolt.Tx, v []byte) ([]byte, error) {
	if isLocator(v) {
		return s.readRecord(tx, v)
	}
	return bytes.Clone(v), nil
}

func (c *copier) syncPacks() error {
	c.packs.mu.Lock()
	defer c.packs.mu.Unlock()
	for id, f := range c.packs.files {
		if err := f.Sync(); err != nil {
			return fmt.Errorf("cannot sync pack %v: %w", id, err)
		}
	}
	if len(c.packs.files) == 0 {
		return nil
	}
	return syncDir(c.packs.dir)
}

func (c *copier) removePacks() {
	c.packs.mu.Lock()
	defer c.packs.mu.Unlock()
	for id, f := range c.packs.files {
		f.Close()
		os.Remove(c.packs.path(id))
		delete(c.packs.files, id)
	}
}

func (s *Store) numberOf(key []byte) string {
	if b := s.bound.Load(); b != nil && len(key) == 8 {
		return b.codec.Number(binary.BigEndian.Uint64(key)).String()
	}
	return hex.EncodeToString(key)
}

// moveInto renames the copy over the store's file and syncs the
// directory, so that the rename survives a crash.
func moveInto(copy, path string) error {
	if err := os.Rename(copy, path); err != nil {
		return err
	}
	return syncDir(filepath.Dir(path))
}

func truncateSync(path string, size int64) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	if err := f.Truncate(size); err != nil {
		f.Close()
		return err
	}
	return errors.Join(f.Sync(), f.Close())
}

// Recover finishes a compaction that stopped between retiring the store's
// file and moving its copy into place (ErrInterrupted): it checks that
// PATH.compact is the complete copy the retired file names and renames it
// over the file. It is safe whenever Open says ErrInterrupted.
func Recover(ctx context.Context, path string, opts Options) error {
	lock, err := takeMaintenance(path, "recovery of an interrupted compaction")
	if err != nil {
		return fmt.Errorf("cannot recover %s: %w", path, err)
	}
	defer lock.Release()
	timeout := opts.LockTimeout
	if timeout <= 0 {
		timeout = time.Minute
	}
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: timeout, FreelistType: bolt.FreelistMapType})
	if err != nil {
		return fmt.Errorf("cannot recover %s: %w", path, err)
	}
	defer db.Close()
	if err := ctx.Err(); err != nil {
		return err
	}
	var id []byte
	err = db.View(func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta == nil || string(meta.Get(keyFormat)) != formatRetired {
			return fmt.Errorf("%s is not a compacted store's old file: nothing to recover", path)
		}
		id = bytes.Clone(meta.Get(keyCompaction))
		return nil
	})
	if err != nil {
		return err
	}
	copy := path + compactSuffix
	var keep map[packID]bool
	cdb, err := bolt.Open(copy, 0o644, &bolt.Options{Timeout: time.Second, ReadOnly: true})
	if err != nil {
		return fmt.Errorf("cannot recover %s: its copy %s: %w", path, copy, err)
	}
	err = cdb.View(func(tx *bolt.Tx) error {
		if _, err := checkFormat(tx); err != nil {
			return err
		}
		if got := tx.Bucket(bucketMeta).Get(keyCompaction); !bytes.Equal(got, id) {
			return fmt.Errorf("%s is not the copy %s was replaced by (compaction %x, want %x)", copy, path, got, id)
		}
		keep = listedPacks(tx)
		return nil
	})
	cdb.Close()
	if err != nil {
		return fmt.Errorf("cannot recover %s: %w", path, err)
	}
	// Nobody uses the retired file, whose lock this holds: delete the
	// packs the copy does not list, as the compaction would have.
	if _, err := removeUnlisted(packDir(path), keep); err != nil {
		return fmt.Errorf("cannot recover %s: %w", path, err)
	}
	return moveInto(copy, path)
}
