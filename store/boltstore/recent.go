package boltstore

import (
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/maphash"
	"math"
	"math/rand/v2"
	"slices"
	"sync"
	"sync/atomic"
	"weak"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/store"
)

// Recent keys (formatRecent). A batch's digests and Message-IDs arrive in
// random order: put straight into the digests and msgids buckets, each
// dirties a leaf page of its own once the indexes outgrow a batch, and at
// a million messages those pages, written and synced by every commit, are
// what an import waits for. So Put appends a written message's index
// entries to the bucket "recent", in commit order, and a Put that leaves
// recentMergeAt of them there merges them into the two indexes, sorted,
// many to a page.
//
//	recent  key: a sequence number (NextSequence), 8 bytes big-endian;
//	        value: the packed number (8 bytes), the digest (32) and the
//	        message's msgids key (msgIDKey), if it has a Message-ID
//	meta    "recent": the recent bucket's ID, 8 random bytes, new each
//	        time the bucket is created
//
// Every reader of the two indexes reads the recent keys too, from maps
// each Store keeps in memory (recentKeys): a transaction reads the
// entries past the last one the maps hold. The ID tells the maps apart:
// entries leave the recent bucket only all at once, when it is deleted,
// and a new bucket has a new ID, so maps of an older bucket are never
// taken for the current one, whatever happened to the file meanwhile (a
// merge, a removal, a compaction's copy). One thing the ID cannot tell:
// an older copy of the file put back under a running process (a backup
// restored), with the same bucket, then written to, holds other entries
// under sequence numbers the maps hold; so maps read through one handle
// are checked against each handle opened after it (recentMaps.agrees).
//
// A merge puts the entries into the indexes recentChunk at a time, in key
// order, each chunk a transaction of its own (the dirty pages of one
// transaction are held in memory until it commits), then deletes the
// recent bucket; entries added meanwhile go to a new one. Until then the
// entries already merged are in both places, which readers allow for. A
// merge that finds the bucket's ID changed stops: someone else merged.
// A merge that fails (a full disk) is tried again by the Put that leaves
// a quarter of recentMergeAt more keys, not by every one; once
// recentLimit keys wait, a Put waits for a merge first and is refused,
// with the merge's error, if that fails too.
// Remove merges every recent key in its own transaction before it
// changes the indexes, so that a removal never leaves an entry behind in
// a recent bucket or in anyone's maps.
var (
	bucketRecent = []byte("recent")
	keyRecent    = []byte("recent")
)

// formatRecent marks a file that may hold recent keys: a program that
// does not read them would miss messages by digest and Message-ID.
const formatRecent = "chibrary-messages/6"

// recentMergeAt is how many recent keys a Put leaves before it merges
// them, unless Options.RecentKeys says (a variable for tests). A merge rewrites each leaf page its keys
// fall on once, however many fall on it: the more keys a merge, the
// fewer pages a key, and the larger every reader's maps
// (docs/performance.md, "Recent keys").
var recentMergeAt uint64 = DefaultRecentKeys

// recentChunk is how many recent keys a merge puts in one transaction:
// it bounds the dirty pages a merge holds in memory (two leaf pages a
// key, at most, and their branches).
var recentChunk = 1 << 13

// recentKeys are a Store's maps of the recent keys, those of the recent
// bucket's current ID, and those of the ID before it while a transaction
// that began before a merge still reads the older bucket (a view holds
// them; once none does, the garbage collector frees them).
type recentKeys struct {
	mu   sync.Mutex
	cur  *recentMaps
	prev weak.Pointer[recentMaps]
	// merging is held while this Store merges.
	merging sync.Mutex
	// failedAt is the recent keys' sequence number after the batch whose
	// merge failed last, 0 if the last one did not.
	failedAt atomic.Uint64
}

// errRecentFull refuses a batch while recentLimit keys wait for a merge.
var errRecentFull = errors.New("too many recent index entries wait for a merge into the indexes")

// recentLimit is how many recent keys a Put leaves before it refuses to
// add more: merges that keep failing would otherwise let the bucket, and
// the maps of every Store that reads it, grow without end. Four times the
// threshold, and at least recentLimitMin, so that the batches writers add
// at once between merges never reach it.
func (s *Store) recentLimit() uint64 {
	if s.mergeAt > math.MaxUint64/4 {
		return math.MaxUint64
	}
	return max(4*s.mergeAt, recentLimitMin)
}

// recentLimitMin is the least recentLimit (a variable for tests).
var recentLimitMin uint64 = 1 << 14

// mergeDue reports whether a Put that leaves the recent keys at sequence
// number recent merges them: at mergeAt keys, and after a failed merge
// only once a quarter of mergeAt more have come (each attempt reads every
// recent key, and the cause, a full disk say, may last), or the bucket
// is a new one (someone else merged).
func (r *recentKeys) mergeDue(recent, mergeAt uint64) bool {
	f := r.failedAt.Load()
	return recent >= mergeAt && (f == 0 || recent < f || recent >= f+max(mergeAt/4, 1))
}

// failed records that the merge of a Put that left the recent keys at
// recent failed.
func (r *recentKeys) failed(recent uint64) { r.failedAt.Store(recent) }

// recentMaps hold the entries of one recent bucket, up to last, in
// memory without a pointer the garbage collector scans: each entry's
// sequence number in slots, found by a hash of its digest and one of its
// Message-ID (a seeded maphash, which a sender cannot aim at), and
// chained with the older entries of the same hash. A hash is a
// candidate, not an answer: the entry itself, read from the bucket by
// its sequence number, says whether its digest or Message-ID is the one
// looked up, and gives its packed number. So the maps hold 16 bytes an
// entry and the hashes' two map slots (docs/performance.md, "Recent
// keys"), where a map of digests and one of Message-ID strings held
// about 270.
type recentMaps struct {
	id   uint64
	seed maphash.Seed
	mu   sync.RWMutex
	last uint64
	// db is the handle through which the maps last read their bucket, and
	// tail the first 40 bytes of the entry with the highest sequence
	// number they hold, tailSeq. A handle opened since may be of another
	// copy of the file with the same bucket (a backup put back, then
	// written to): the maps are its bucket's only if it still holds that
	// entry (agrees).
	db      *bolt.DB
	tailSeq uint64
	tail    [40]byte
	// slots: the entries read, in sequence order.
	slots []recentSlot
	// digests and msgids: by hash, the index of the newest slot with it.
	digests, msgids map[uint64]int32
}

// recentHash hashes a digest or a msgids key prefix for the maps (a
// variable for tests, which make every key collide).
var recentHash = maphash.Bytes

// recentSlot is where a recent key is: the entry's sequence number in
// the recent bucket, and the next older slots of the same digest and
// Message-ID hash (-1: none).
type recentSlot struct {
	seq                uint64
	nextDigest, nextID int32
}

// recentView is the recent keys as one transaction sees them: those of
// m up to upto, in the transaction's bucket b. The zero value has none.
type recentView struct {
	m    *recentMaps
	b    *bolt.Bucket
	upto uint64
}

// view returns the recent keys that tx sees, reading into the maps those
// they do not hold yet.
func (r *recentKeys) view(tx *bolt.Tx) (recentView, error) {
	b := tx.Bucket(bucketRecent)
	if b == nil {
		return recentView{}, nil
	}
	id, err := recentID(tx)
	if err != nil {
		return recentView{}, err
	}
	upto := b.Sequence()
	m, err := r.mapsOf(id, tx.DB(), b)
	if err != nil {
		return recentView{}, err
	}
	if err := m.load(b, upto); err != nil {
		return recentView{}, err
	}
	return recentView{m: m, b: b, upto: upto}, nil
}

// recentID returns the ID of tx's recent bucket.
func recentID(tx *bolt.Tx) (uint64, error) {
	v := tx.Bucket(bucketMeta).Get(keyRecent)
	if len(v) != 8 {
		return 0, fmt.Errorf("%w: %s has recent keys with an ID of %d bytes", ErrFormat, tx.DB().Path(), len(v))
	}
	return binary.BigEndian.Uint64(v), nil
}

// mapsLocked returns the maps of bucket id: the current ones, the
// previous ones while a view holds them, or new ones. Called with r.mu
// held.
func (r *recentKeys) mapsLocked(id uint64) *recentMaps {
	if r.cur != nil && r.cur.id == id {
		return r.cur
	}
	if p := r.prev.Value(); p != nil && p.id == id {
		return p
	}
	return r.newMapsLocked(id)
}

// newMapsLocked starts new maps of bucket id as the current ones, the
// current ones becoming the previous. Called with r.mu held.
func (r *recentKeys) newMapsLocked(id uint64) *recentMaps {
	m := &recentMaps{id: id, seed: maphash.MakeSeed(), digests: map[uint64]int32{}, msgids: map[uint64]int32{}}
	if r.cur != nil {
		r.prev = weak.Make(r.cur)
	}
	r.cur = m
	return m
}

// mapsOf returns the maps of the bucket b of ID id, read through the
// handle db: those held, unless they are of another copy of the file
// (agrees), when it starts new ones. Views that hold the old ones read on
// in them, as the file they read (an older handle) is the old one too.
func (r *recentKeys) mapsOf(id uint64, db *bolt.DB, b *bolt.Bucket) (*recentMaps, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	m := r.mapsLocked(id)
	ok, err := m.agrees(db, b)
	if err != nil || ok {
		return m, err
	}
	m = r.newMapsLocked(id)
	m.db = db
	return m, nil
}

// agrees reports whether b, the bucket of the maps' ID as the handle db
// sees it, is the one the maps were read from: through the same handle,
// or through another whose bucket holds the maps' newest entry. A
// handle's bucket only grows, and every copy of a bucket (the same ID)
// began as one, so a copy that holds the entry the maps hold last holds
// every entry before it as the maps read it.
func (m *recentMaps) agrees(db *bolt.DB, b *bolt.Bucket) (bool, error) {
	m.mu.RLock()
	same := m.db == db
	m.mu.RUnlock()
	if same {
		return true, nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.db == db {
		return true, nil
	}
	if m.tailSeq > 0 {
		e := b.Get(seqKey(m.tailSeq))
		if e == nil {
			return false, nil
		}
		if len(e) < len(m.tail) {
			return false, fmt.Errorf("%w: recent key entry of %d bytes", ErrFormat, len(e))
		}
		if !bytes.Equal(e[:len(m.tail)], m.tail[:]) {
			return false, nil
		}
	}
	m.db = db
	return true, nil
}

// load reads b's entries past m.last, up to upto.
func (m *recentMaps) load(b *bolt.Bucket, upto uint64) error {
	m.mu.RLock()
	done := m.last >= upto
	m.mu.RUnlock()
	if done {
		return nil
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.slots) == 0 && upto > m.last {
		// Sized at once: a Store's first read of a bucket reads up to
		// recentMergeAt entries.
		n := int(min(upto-m.last, recentMergeAt))
		m.slots = make([]recentSlot, 0, n)
		m.digests = make(map[uint64]int32, n)
		m.msgids = make(map[uint64]int32, n)
	}
	c := b.Cursor()
	for k, v := c.Seek(seqKey(m.last + 1)); k != nil; k, v = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("%w: recent key entry of %d bytes", ErrFormat, len(k))
		}
		seq := binary.BigEndian.Uint64(k)
		if seq > upto {
			break
		}
		e, err := parseRecent(v)
		if err != nil {
			return err
		}
		if len(m.slots) == math.MaxInt32 {
			return fmt.Errorf("%w: more than %d recent keys", ErrFormat, math.MaxInt32)
		}
		i := int32(len(m.slots))
		s := recentSlot{seq: seq, nextDigest: -1, nextID: -1}
		h := recentHash(m.seed, e.digest[:])
		if j, ok := m.digests[h]; ok {
			s.nextDigest = j
		}
		m.digests[h] = i
		if e.msgid != nil {
			h := recentHash(m.seed, e.msgid[:len(e.msgid)-8])
			if j, ok := m.msgids[h]; ok {
				s.nextID = j
			}
			m.msgids[h] = i
		}
		m.slots = append(m.slots, s)
		m.tailSeq = seq
		copy(m.tail[:], v)
	}
	m.last = max(m.last, upto)
	return nil
}

// entry reads the recent bucket's entry seq, which the maps hold.
func (v recentView) entry(seq uint64) (recentValue, error) {
	e := v.b.Get(seqKey(seq))
	if e == nil {
		return recentValue{}, fmt.Errorf("%w: recent key %d is gone from its bucket", ErrFormat, seq)
	}
	return parseRecent(e)
}

// digest returns the packed number of the message with digest d, if it
// is a recent key.
func (v recentView) digest(d store.Digest) ([8]byte, bool, error) {
	if v.m == nil {
		return [8]byte{}, false, nil
	}
	v.m.mu.RLock()
	defer v.m.mu.RUnlock()
	i, ok := v.m.digests[recentHash(v.m.seed, d[:])]
	for ; ok && i >= 0; i = v.m.slots[i].nextDigest {
		s := v.m.slots[i]
		if s.seq > v.upto {
			continue
		}
		e, err := v.entry(s.seq)
		if err != nil {
			return [8]byte{}, false, err
		}
		if e.digest == d {
			return e.key, true, nil
		}
	}
	return [8]byte{}, false, nil
}

// msgIDs appends to out the packed numbers of the recent keys with the
// msgids key prefix p (msgIDKey(id, nil)).
func (v recentView) msgIDs(p []byte, out [][8]byte) ([][8]byte, error) {
	if v.m == nil {
		return out, nil
	}
	v.m.mu.RLock()
	defer v.m.mu.RUnlock()
	i, ok := v.m.msgids[recentHash(v.m.seed, p)]
	for ; ok && i >= 0; i = v.m.slots[i].nextID {
		s := v.m.slots[i]
		if s.seq > v.upto {
			continue
		}
		e, err := v.entry(s.seq)
		if err != nil {
			return out, err
		}
		if e.msgid != nil && bytes.Equal(e.msgid[:len(e.msgid)-8], p) {
			out = append(out, e.key)
		}
	}
	return out, nil
}

// recentValue is a recent bucket entry, parsed.
type recentValue struct {
	key    [8]byte
	digest store.Digest
	msgid  []byte // the msgids key, or nil
}

func parseRecent(v []byte) (recentValue, error) {
	if len(v) < 8+32 || (len(v) > 8+32 && len(v) < 8+32+1+8) {
		return recentValue{}, fmt.Errorf("%w: recent key of %d bytes", ErrFormat, len(v))
	}
	e := recentValue{key: [8]byte(v[:8]), digest: store.Digest(v[8:40])}
	if len(v) > 40 {
		e.msgid = v[40:]
		if !bytes.Equal(e.msgid[len(e.msgid)-8:], e.key[:]) || e.msgid[len(e.msgid)-9] != 0 {
			return recentValue{}, fmt.Errorf("%w: recent key's Message-ID entry does not end in its number", ErrFormat)
		}
	}
	return e, nil
}

// recentWriter appends a write transaction's index entries to the recent
// bucket, creating it (and raising the file's format) on the first.
type recentWriter struct {
	tx *bolt.Tx
	b  *bolt.Bucket
}

func (w *recentWriter) add(key [8]byte, d store.Digest, messageID string) error {
	if w.b == nil {
		if err := w.open(); err != nil {
			return err
		}
	}
	seq, err := w.b.NextSequence()
	if err != nil {
		return err
	}
	v := make([]byte, 0, 8+32+len(messageID)+1+8)
	v = append(append(v, key[:]...), d[:]...)
	if messageID != "" {
		v = append(v, msgIDKey(messageID, key[:])...)
	}
	return w.b.Put(seqKey(seq), v)
}

func (w *recentWriter) open() error {
	if w.b = w.tx.Bucket(bucketRecent); w.b != nil {
		w.b.FillPercent = appendFill
		return nil
	}
	if err := raiseFormat(w.tx, formatRecent); err != nil {
		return err
	}
	b, err := w.tx.CreateBucket(bucketRecent)
	if err != nil {
		return fmt.Errorf("cannot create the recent keys' bucket: %w", err)
	}
	b.FillPercent = appendFill
	w.b = b
	return w.tx.Bucket(bucketMeta).Put(keyRecent, binary.BigEndian.AppendUint64(nil, rand.Uint64()))
}

// formatOrder lists the formats a writer may raise a file to, in order.
var formatOrder = []string{format, formatRemovals, formatMoves, formatRecent}

// raiseFormat sets tx's file's format to f unless it is f or later
// already; a file raised past formatRemovals gets the moves bucket that
// checkFormat asks of it.
func raiseFormat(tx *bolt.Tx, f string) error {
	meta := tx.Bucket(bucketMeta)
	cur := slices.Index(formatOrder, string(meta.Get(keyFormat)))
	switch {
	case cur < 0:
		// Not upgraded at open, or retired by a compaction: not a file
		// to write to.
		return fmt.Errorf("%w: %s has format %q, which a writer does not raise", ErrFormat, tx.DB().Path(), meta.Get(keyFormat))
	case cur >= slices.Index(formatOrder, f):
		return nil
	}
	if f == formatMoves || f == formatRecent {
		if _, err := tx.CreateBucketIfNotExists(bucketMoves); err != nil {
			return err
		}
	}
	return meta.Put(keyFormat, []byte(f))
}

// recentState is a recent bucket's ID and its entries up to upto, copied.
type recentState struct {
	id      uint64
	upto    uint64
	entries []recentValue
}

// readRecent copies tx's recent keys; ok is false if there are none.
func readRecent(tx *bolt.Tx) (st recentState, ok bool, err error) {
	b := tx.Bucket(bucketRecent)
	if b == nil {
		return st, false, nil
	}
	if st.id, err = recentID(tx); err != nil {
		return st, false, err
	}
	st.upto = b.Sequence()
	err = b.ForEach(func(k, v []byte) error {
		if len(k) != 8 {
			return fmt.Errorf("%w: recent key entry of %d bytes", ErrFormat, len(k))
		}
		if binary.BigEndian.Uint64(k) > st.upto {
			return nil
		}
		e, err := parseRecent(v)
		if err != nil {
			return err
		}
		e.msgid = bytes.Clone(e.msgid)
		st.entries = append(st.entries, e)
		return nil
	})
	return st, err == nil, err
}

// sortedKeys returns entries sorted by digest, and their msgids keys
// sorted.
func sortedKeys(entries []recentValue) ([]recentValue, [][]byte) {
	slices.SortFunc(entries, func(a, b recentValue) int { return bytes.Compare(a.digest[:], b.digest[:]) })
	ids := make([][]byte, 0, len(entries))
	for _, e := range entries {
		if e.msgid != nil {
			ids = append(ids, e.msgid)
		}
	}
	slices.SortFunc(ids, bytes.Compare)
	return entries, ids
}

// putIndexed puts entries' digests, and the msgids keys ids, into the
// digests and msgids buckets (each sorted: the pages they share are
// written once). An entry put there already is put again, unchanged.
// bbolt keeps references to entries and ids until the commit.
func putIndexed(tx *bolt.Tx, entries []recentValue, ids [][]byte) error {
	digests := tx.Bucket(bucketDigests)
	for i := range entries {
		e := &entries[i]
		if err := digests.Put(e.digest[:], e.key[:]); err != nil {
			return fmt.Errorf("cannot merge a recent digest: %w", err)
		}
	}
	msgids := tx.Bucket(bucketMsgIDs)
	for _, k := range ids {
		if err := msgids.Put(k, nil); err != nil {
			return fmt.Errorf("cannot merge a recent Message-ID: %w", err)
		}
	}
	return nil
}

// dropRecent deletes tx's recent bucket, whose keys up to upto are
// merged; any past it go to a new bucket with a new ID.
func dropRecent(tx *bolt.Tx, upto uint64) error {
	b := tx.Bucket(bucketRecent)
	var rest [][]byte
	c := b.Cursor()
	for k, v := c.Seek(seqKey(upto + 1)); k != nil; k, v = c.Next() {
		rest = append(rest, bytes.Clone(v))
	}
	if err := tx.DeleteBucket(bucketRecent); err != nil {
		return fmt.Errorf("cannot delete the merged recent keys: %w", err)
	}
	if err := tx.Bucket(bucketMeta).Delete(keyRecent); err != nil {
		return err
	}
	if len(rest) == 0 {
		return nil
	}
	w := recentWriter{tx: tx}
	if err := w.open(); err != nil {
		return err
	}
	for _, v := range rest {
		seq, err := w.b.NextSequence()
		if err != nil {
			return err
		}
		if err := w.b.Put(seqKey(seq), v); err != nil {
			return err
		}
	}
	return nil
}

// mergeAllRecent merges every recent key of tx in tx (Remove's first step).
func mergeAllRecent(tx *bolt.Tx) error {
	st, ok, err := readRecent(tx)
	if err != nil || !ok {
		return err
	}
	entries, ids := sortedKeys(st.entries)
	if err := putIndexed(tx, entries, ids); err != nil {
		return err
	}
	return dropRecent(tx, st.upto)
}

// errRecentMoved stops a merge whose recent bucket someone else merged.
var errRecentMoved = errors.New("the recent keys were merged meanwhile")

// afterRecentChunk, if set, is called by a merge after each transaction
// of it that puts a chunk (for tests).
var afterRecentChunk func(chunk int) error

// mergeRecent merges the store's recent keys if there are at least least,
// recentChunk in a transaction, and deletes them. A merge of this Store's
// that is running already is left to finish alone, or with wait, waited
// for before this one looks at what is left.
func (s *Store) mergeRecent(ctx context.Context, least int, wait bool) error {
	if wait {
		s.recent.merging.Lock()
	} else if !s.recent.merging.TryLock() {
		return nil
	}
	defer s.recent.merging.Unlock()
	var (
		st recentState
		ok bool
	)
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		st, ok, err = readRecent(tx)
		return err
	})
	if err != nil || !ok || len(st.entries) < least {
		return err
	}
	// Each chunk a slice of each index's key space, so that its keys
	// share pages.
	entries, ids := sortedKeys(st.entries)
	same := func(tx *bolt.Tx) error {
		if tx.Bucket(bucketRecent) == nil {
			return errRecentMoved
		}
		id, err := recentID(tx)
		if err == nil && id != st.id {
			err = errRecentMoved
		}
		return err
	}
	for i, n := 0, 0; i < len(entries); i, n = i+recentChunk, n+1 {
		chunk := entries[i:min(i+recentChunk, len(entries))]
		idChunk := ids[min(i, len(ids)):min(i+recentChunk, len(ids))]
		err := s.update(ctx, func(tx *bolt.Tx) error {
			if err := same(tx); err != nil {
				return err
			}
			return putIndexed(tx, chunk, idChunk)
		})
		if err == nil && afterRecentChunk != nil {
			err = afterRecentChunk(n)
		}
		if errors.Is(err, errRecentMoved) {
			s.recent.failedAt.Store(0)
			return nil
		}
		if err != nil {
			return fmt.Errorf("cannot merge the recent keys into the indexes of %s: %w", s.path, err)
		}
	}
	err = s.update(ctx, func(tx *bolt.Tx) error {
		if err := same(tx); err != nil {
			return err
		}
		return dropRecent(tx, st.upto)
	})
	if err != nil && !errors.Is(err, errRecentMoved) {
		return fmt.Errorf("cannot delete the merged recent keys of %s: %w", s.path, err)
	}
	s.recent.failedAt.Store(0)
	return nil
}
