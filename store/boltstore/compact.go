package boltstore

// Compaction: a copy of the store with every record written anew, in
// place (the copy replaces the file) or into another file.
//
// It converts an archive written before compression (or with an older
// dictionary) to compressed records, and gives back the space bbolt never
// returns: bbolt reuses the pages it frees but never shrinks its file.
//
// The copy is made while other processes keep using the store. Messages
// are copied in key order, in chunks, each read in its own short read
// transaction, decoded (digest checked), compressed again on all CPUs,
// and written to the new file, which nobody else opens. Then, in place,
// Compact takes the file's write lock, copies what was stored meanwhile
// (found through the change feed), the leases and the meta records,
// syncs the copy, marks the old file retired in the same write
// transaction, renames the copy over it and only then lets go of the
// lock. A process that opens the path gets the copy; one that had opened
// the old file before the rename and gets its lock after sees the mark
// and opens the path again (handles.go). The change feed keeps its
// sequence numbers, so a follower's saved cursor stays valid.
//
// If Compact stops before the mark, the old file is untouched and the
// partial copy (PATH.compact) is deleted by the next Compact. If it stops
// between the mark and the rename, the old file refuses to open
// (ErrInterrupted) until Recover (resolver compact) renames the complete
// copy into place.

import (
	"bytes"
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
	"syscall"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

// keyCompaction names a compaction: in the retired file, the copy that
// replaced it; in the copy, itself.
var keyCompaction = []byte("compaction")

// compactSuffix is appended to the path of a store compacted in place.
const compactSuffix = ".compact"

// compactChunk bounds the messages copied per read transaction.
const compactChunk = 1000

// CompactOptions configure Compact. The zero value compacts in place,
// with the store's current dictionary (training one first if it has none).
type CompactOptions struct {
	// To is the path of a new file to copy the store into; the store
	// stays as it is, and what is stored after the copy's last read is
	// not in it. Empty means in place.
	To string
	// PageSize is the bbolt page size of the new file. Zero means
	// DefaultPageSize.
	PageSize int
	// Retrain trains a new dictionary from the store's newest messages
	// even if it has one. Without a dictionary the store trains one
	// anyway, if it holds enough messages.
	Retrain bool
	// Progress, if not nil, is called after every chunk with the
	// messages copied so far and the number the store held at the start.
	Progress func(done, total int64)
}

// CompactStats says what Compact did.
type CompactStats struct {
	// Messages is the number of messages copied.
	Messages int64
	// Dict is the dictionary the copy's records were compressed with,
	// or "" for none.
	Dict string
	// Before and After are the bytes on disk (blocks) of the old file
	// and of the copy.
	Before, After int64
	// Path is the copy's path (the store's own, in place).
	Path string
}

// Compact copies the store into a new file with every record written
// anew, and in place (opts.To empty) replaces the store's file by the
// copy, while other processes keep working. See compact.go's doc. It
// holds about 100 bytes per message in memory (what it copied, and index
// entries up to 64 MiB), and needs the disk space of the copy.
func (s *Store) Compact(ctx context.Context, opts CompactOptions) (CompactStats, error) {
	if err := s.h.check(); err != nil {
		return CompactStats{}, err
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	st, err := s.compact(ctx, opts)
	if err != nil {
		return st, fmt.Errorf("cannot compact %s: %w", s.path, err)
	}
	return st, nil
}

// copier holds the state of one compaction.
type copier struct {
	s     *Store
	dst   *bolt.DB
	id    []byte // the compaction's ID
	codec record.Codec
	dict  *record.Dictionary
	cur   []byte // the current-dictionary record of the copy, or nil

	copied map[uint64]bool // packed numbers copied
	index  indexes         // index entries not written yet
	done   atomic.Int64
	total  int64
	opts   CompactOptions
}

func (s *Store) compact(ctx context.Context, opts CompactOptions) (CompactStats, error) {
	inPlace := opts.To == ""
	to := opts.To
	if inPlace {
		to = s.path + compactSuffix
		if err := os.Remove(to); err == nil {
			s.log.Info("removed the partial copy of an interrupted compaction", "path", to)
		} else if !errors.Is(err, os.ErrNotExist) {
			return CompactStats{}, err
		}
	} else if _, err := os.Stat(to); err == nil {
		return CompactStats{}, fmt.Errorf("%s exists: the copy must go to a new file", to)
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
	c := &copier{s: s, dst: dst, copied: make(map[uint64]bool), opts: opts}
	c.id = make([]byte, 16)
	rand.Read(c.id)
	ok := false
	defer func() {
		if !ok {
			dst.Close()
			os.Remove(to)
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
		dst.View(func(tx *bolt.Tx) error { size = tx.Size(); return nil })
		if err := dst.Close(); err != nil {
			return err
		}
		// bbolt grows a file ahead of its pages: cut the copy to its
		// last page (a bbolt backup, Tx.WriteTo, is that long too), and
		// make it durable.
		return truncateSync(to, size)
	}
	before := blocks(s.path)
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
	st.After = blocks(st.Path)
	if c.dict != nil {
		st.Dict = c.dict.ID.String()
	}
	if c.opts.Progress != nil {
		c.opts.Progress(st.Messages, max(c.total, st.Messages))
	}
	s.log.Debug("compacted the message store", "to", st.Path, "messages", st.Messages, "dict", st.Dict, "before", st.Before, "after", st.After)
	return st, nil
}

// start chooses the dictionary and creates the copy's buckets.
func (c *copier) start(ctx context.Context) error {
	s := c.s
	var cur record.Current
	var have bool
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		if bd, err := s.binding(tx); err != nil || bd == nil {
			return fmt.Errorf("nothing to compact: %w", store.ErrUnbound)
		}
		c.total = int64(binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyCount)))
		if cur, have, err = currentDict(tx); err != nil || !have || c.opts.Retrain {
			return err
		}
		b, err := loadDict(tx, cur.ID)
		if err != nil {
			return err
		}
		c.dict, err = record.CheckDictionary(cur.ID, b)
		c.cur = bytes.Clone(tx.Bucket(bucketMeta).Get(keyDict))
		return err
	})
	if err != nil {
		return err
	}
	if s.comp.Off() {
		c.dict, c.cur = nil, nil
	} else if c.dict == nil {
		samples, err := dicts{s}.Sample(ctx, compress.MaxSamples, compress.RetrainSampleBytes)
		if err != nil {
			return err
		}
		if b, err := record.Train(ctx, samples); err != nil {
			s.log.Warn("no dictionary for the compacted store", "err", err)
		} else if c.dict, err = record.NewDictionary(b); err != nil {
			return err
		} else {
			c.cur = record.MarshalCurrent(record.Current{ID: c.dict.ID, Messages: c.total, Samples: len(samples), Trained: time.Now().UTC()})
		}
	}
	return c.dst.Update(func(tx *bolt.Tx) error {
		for _, name := range [][]byte{bucketMessages, bucketDigests, bucketMsgIDs, bucketRuns, bucketMeta, bucketChanges, bucketDicts} {
			if _, err := tx.CreateBucket(name); err != nil {
				return err
			}
		}
		meta := tx.Bucket(bucketMeta)
		if c.dict != nil {
			if err := tx.Bucket(bucketDicts).Put(c.dict.ID[:], c.dict.Bytes); err != nil {
				return err
			}
			if err := meta.Put(keyDict, c.cur); err != nil {
				return err
			}
		}
		if err := meta.Put(keyCompaction, c.id); err != nil {
			return err
		}
		return meta.Put(keyFormat, []byte(format))
	})
}

// bulk copies, chunk by chunk, every message stored when it starts (and
// some stored since), and the change feed up to its sequence then, which
// it returns.
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
	var after []byte // the last key copied
	for {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		var keys, recs [][]byte
		err := s.view(ctx, func(tx *bolt.Tx) error {
			cur := tx.Bucket(bucketMessages).Cursor()
			k, v := cur.First()
			if after != nil {
				if k, v = cur.Seek(after); bytes.Equal(k, after) {
					k, v = cur.Next()
				}
			}
			for ; k != nil && len(keys) < compactChunk; k, v = cur.Next() {
				keys, recs = append(keys, bytes.Clone(k)), append(recs, bytes.Clone(v))
			}
			return nil
		})
		if err != nil {
			return 0, err
		}
		if len(keys) == 0 {
			break
		}
		after = keys[len(keys)-1]
		load := func(id record.DictID) ([]byte, error) { return dicts{s}.LoadDict(ctx, id) }
		if err := c.copyChunk(keys, recs, load); err != nil {
			return 0, err
		}
	}
	// The change feed up to seq: entries there never change.
	var from uint64
	for from < seq {
		var keys, vals [][]byte
		err := s.view(ctx, func(tx *bolt.Tx) error {
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

// tail copies, within tx (the store's last transaction of the
// compaction), what was stored after the bulk copy, the leases and the
// meta records, and checks the count.
func (c *copier) tail(tx *bolt.Tx, seq uint64) error {
	messages := tx.Bucket(bucketMessages)
	var keys, recs, feedKeys, feedVals [][]byte
	if ch := tx.Bucket(bucketChanges); ch != nil {
		cur := ch.Cursor()
		for k, v := cur.Seek(seqKey(seq + 1)); k != nil; k, v = cur.Next() {
			feedKeys, feedVals = append(feedKeys, k), append(feedVals, v)
			if len(v) == 8 && !c.copied[binary.BigEndian.Uint64(v)] {
				if rec := messages.Get(v); rec != nil {
					keys, recs = append(keys, v), append(recs, rec)
				}
			}
		}
	}
	var mu sync.Mutex // a transaction is not safe for concurrent use
	load := func(id record.DictID) ([]byte, error) {
		mu.Lock()
		defer mu.Unlock()
		return loadDict(tx, id)
	}
	if err := c.copyChunk(keys, recs, load); err != nil {
		return err
	}
	if got, want := int64(len(c.copied)), int64(binary.BigEndian.Uint64(tx.Bucket(bucketMeta).Get(keyCount))); got != want {
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
		if err := meta.Put(keyCount, binary.BigEndian.AppendUint64(nil, uint64(len(c.copied)))); err != nil {
			return err
		}
		// Every dictionary of the store: a writer elsewhere may have
		// one cached that the copy's records do not name, and go on
		// writing records with it into the copy.
		if d := tx.Bucket(bucketDicts); d != nil {
			dd := dtx.Bucket(bucketDicts)
			if err := d.ForEach(func(k, v []byte) error { return dd.Put(k, v) }); err != nil {
				return err
			}
		}
		if c.dict == nil && from.Get(keyDict) != nil {
			// Records were written without a dictionary, yet the store
			// has one: keep it current for later writers.
			return meta.Put(keyDict, from.Get(keyDict))
		}
		return nil
	})
}

// copyChunk decodes records (checking their digests), writes them anew
// on all CPUs, and stores them with their indexes in the copy.
func (c *copier) copyChunk(keys, recs [][]byte, load compress.LoadFunc) error {
	if len(keys) == 0 {
		return nil
	}
	s := c.s
	msgs := make([]record.Message, len(keys))
	out := make([][]byte, len(keys))
	errs := make([]error, len(keys))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(keys)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(keys) {
					return
				}
				n := s.numberOf(keys[i])
				m, err := s.comp.Decode(recs[i], load)
				if err != nil {
					errs[i] = fmt.Errorf("cannot read message %s: %w", n, err)
					continue
				}
				m.Raw = bytes.Clone(m.Raw) // it may alias recs[i], a transaction's memory
				msgs[i] = m
				switch {
				case s.comp.Off():
					out[i] = record.AppendMessage(nil, m)
				default:
					out[i], err = c.codec.Append(nil, m, c.dict)
					if errors.Is(err, record.ErrVerify) {
						s.log.Warn("compressed message did not decode to itself: copied uncompressed", "callnumber", n, "err", err)
						out[i], err = record.AppendMessage(nil, m), nil
					}
					errs[i] = err
				}
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return err
	}
	err := c.dst.Update(func(tx *bolt.Tx) error {
		messages := tx.Bucket(bucketMessages)
		messages.FillPercent = appendFill
		for i, k := range keys {
			if err := messages.Put(k, out[i]); err != nil {
				return err
			}
			c.index.add(msgs[i].Digest, msgs[i].MessageID, k)
		}
		if c.index.size() >= indexBuffer {
			return c.index.flush(tx)
		}
		return nil
	})
	if err != nil {
		return fmt.Errorf("cannot write the copy: %w", err)
	}
	for _, k := range keys {
		c.copied[binary.BigEndian.Uint64(k)] = true
	}
	done := c.done.Add(int64(len(keys)))
	if c.opts.Progress != nil {
		c.opts.Progress(done, max(c.total, done))
	}
	return nil
}

// indexBuffer bounds the index entries a compaction keeps in memory (a
// hundred bytes or so per message) to write them in key order.
const indexBuffer = 64 << 20

// indexes are digest and Message-ID index entries to write in key order:
// the copy's index pages are then filled whole, where entries in the
// (random) order of the messages fill them by half to two thirds (on the
// 84,096-message archive: 18.2 MB of index pages, 10.9 MB in key order).
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

// flush writes the entries in key order within tx, and forgets them.
func (x *indexes) flush(tx *bolt.Tx) error {
	const w = 32 + 8
	n := len(x.digests) / w
	order := make([]int, n)
	for i := range order {
		order[i] = i * w
	}
	slices.SortFunc(order, func(a, b int) int { return bytes.Compare(x.digests[a:a+32], x.digests[b:b+32]) })
	digests := tx.Bucket(bucketDigests)
	digests.FillPercent = appendFill
	for _, at := range order {
		if err := digests.Put(x.digests[at:at+32], x.digests[at+32:at+w]); err != nil {
			return err
		}
	}
	key := func(i int) []byte {
		end := len(x.arena)
		if i+1 < len(x.msgids) {
			end = int(x.msgids[i+1])
		}
		return x.arena[x.msgids[i]:end]
	}
	ids := make([]int, len(x.msgids))
	for i := range ids {
		ids[i] = i
	}
	slices.SortFunc(ids, func(a, b int) int { return bytes.Compare(key(a), key(b)) })
	msgids := tx.Bucket(bucketMsgIDs)
	msgids.FillPercent = appendFill
	for _, i := range ids {
		if err := msgids.Put(key(i), nil); err != nil {
			return err
		}
	}
	// bbolt keeps references to keys and values until the commit: give
	// the next entries new buffers.
	*x = indexes{}
	return nil
}

// numberOf returns the call number under a messages key, for errors.
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
	d, err := os.Open(filepath.Dir(path))
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// truncateSync cuts the file at path to size bytes and syncs it.
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

// blocks returns the bytes on disk of the file at path.
func blocks(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}

// Recover finishes a compaction that stopped between retiring the store's
// file and moving its copy into place (ErrInterrupted): it checks that
// PATH.compact is the complete copy the retired file names, and renames it
// over the file. It holds the file's lock meanwhile. Nothing else runs on
// a retired file, so Recover is safe to call whenever Open says
// ErrInterrupted.
func Recover(ctx context.Context, path string, opts Options) error {
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
		return nil
	})
	cdb.Close()
	if err != nil {
		return fmt.Errorf("cannot recover %s: %w", path, err)
	}
	return moveInto(copy, path)
}
