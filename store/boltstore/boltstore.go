// Package boltstore is the embedded store.Store: one bbolt file,
// DATA/messages.db, and the packs beside it that hold the messages'
// records, shared by the processes of one machine.
//
// # Sharing the file
//
// The watcher, importers and the resolver share one data directory, and
// bbolt flocks its file while it is open, so a Store holds a handle while
// it reads or writes (shared within the process, handles.go), and idle
// only while no other process waits for the file: at most KeepIdle, and
// it looks every few Lingers. flock is not fair and bbolt polls for it, so a
// reading loop could starve a writer: a process waiting to open the file
// holds the turnstile PATH.lock, and a process that sees it taken stops
// reusing its handle and closes it once its running operations end.
//
// Opening stays cheap as the archive grows: the freelist is persisted, as
// otherwise every writable open would scan the file to rebuild it.
//
// # Layout
//
// Buckets of the file (the records themselves are in
// DATA/messages.packs/ID.pack, packs.go):
//
//	messages  key: the call number's unshuffled 47-bit value, 8 bytes
//	          big-endian (Codec.Packed). Within a run it grows with the
//	          sequence, so a run's messages are appended in key order.
//	          value: the locator of the message's record in a pack
//	          (first byte 0x80: pack ID, offset, length), or, in a file
//	          written before packs, the record itself (store/internal/
//	          record)
//	digests   key: the 32-byte Digest; value: the 8-byte packed number
//	msgids    key: idkey 0x00 packed; value: empty. idkey is the
//	          Message-ID itself, or for one over 512 bytes or starting
//	          with byte 0xff, 0xff followed by its SHA-256. A prefix scan
//	          lists a Message-ID's numbers in packed (run, sequence) order.
//	runs      key: the run, 4 bytes big-endian; value: the lease as JSON
//	          without the key
//	changes   the change feed: key: a sequence number (NextSequence),
//	          8 bytes big-endian, in commit order; value: the 8-byte
//	          packed number of a message written by that commit
//	packs     key: a pack's 8-byte ID; value: the length of it that
//	          committed transactions wrote, 8 bytes big-endian
//	dicts     compression dictionaries (dicts.go): key: the 8-byte
//	          record.DictID; value: the dictionary (record.StoredDict).
//	          Nothing is ever deleted.
//	removed   removal records (removals.go)
//	moves     the latest move of each moved message (moves.go)
//	recent    the index entries of the latest messages, in commit
//	          order, not merged into digests and msgids yet (recent.go)
//	meta      "format": see format; "binding": the authority, scheme
//	          and key as JSON; "count": the number of messages, 8 bytes
//	          big-endian, so Count is O(1); "backfilled": the last
//	          sequence number given by the upgrade from format 1
//	          (changes.go); "dict": the current dictionary
//	          (record.Current as JSON); "pack": the pack new records go
//	          to; "compaction": the ID of the compaction that wrote the
//	          file (compact.go); "recent": the recent bucket's ID
//
// The first writable open upgrades an older file; its records stay where
// they are until resolver compact (Compact) rewrites them. A reader
// refuses a format or record version it does not know.
//
// A backup copies the file and then the packs, in that order (or takes a
// file-system snapshot): packs only grow, and the file names only what
// was in them when it committed.
package boltstore

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"sync/atomic"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/batch"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

// ErrLocked: another process held the file's lock for longer than
// Options.LockTimeout.
var ErrLocked = fmt.Errorf("boltstore: messages database locked by another process (%w)", store.ErrUnavailable)

// ErrFormat: the file is not a message store this package can read.
var ErrFormat = errors.New("boltstore: not a chibrary message store")

// ErrInterrupted: a compaction stopped before it moved its copy into
// place. Nothing is lost, but the store is unavailable until Recover
// (which `resolver compact` runs) finishes the move.
var ErrInterrupted = fmt.Errorf("boltstore: a compaction stopped half-way, after retiring the file and before moving its copy (PATH.compact) into place; nothing is lost: run `resolver compact` on this store to finish it (%w)", store.ErrUnavailable)

// ErrMaintenance: a compaction or a removal of the store is running, in
// this process or another (Compact, Recover, Remove).
var ErrMaintenance = errors.New("boltstore: a compaction or removal of this store is running")

// format is the layout of a new file; the first writable open upgrades
// formatV1 (no change feed) and formatV2 (no packs). The first Remove sets
// formatRemovals, and the first Move formatMoves, so that a program that
// does not know them refuses the file rather than compact the records
// (and with them the refusal of removed bytes) away; the first Put sets
// formatRecent (recent.go). Each is later than the one before, and a
// file's format is never lowered. formatRetired marks a file Compact has
// replaced.
const (
	format         = "chibrary-messages/3"
	formatRemovals = "chibrary-messages/4"
	formatMoves    = "chibrary-messages/5"
	formatV2       = "chibrary-messages/2"
	formatV1       = "chibrary-messages/1"
	formatRetired  = "chibrary-messages/retired"
)

var (
	bucketMessages = []byte("messages")
	bucketDigests  = []byte("digests")
	bucketMsgIDs   = []byte("msgids")
	bucketRuns     = []byte("runs")
	bucketMeta     = []byte("meta")
	bucketChanges  = []byte("changes")
	bucketDicts    = []byte("dicts")

	keyFormat     = []byte("format")
	keyBinding    = []byte("binding")
	keyCount      = []byte("count")
	keyBackfilled = []byte("backfilled")
	keyDict       = []byte("dict")
)

// Fill percents: messages and runs are appended in key order, so their
// pages are filled whole; digests and Message-IDs arrive in random order
// and keep bbolt's default.
const appendFill = 1.0

// DefaultPageSize is the bbolt page size of a new file (Options.PageSize),
// and of a compaction's copy. The file holds only small values, but a
// merge of the recent keys (recent.go) rewrites most leaves of the two
// random-key indexes once they are large, and the same bytes in a
// quarter of the pages cost a merge about 0.6 times the time at a
// million keys (docs/performance.md, "Pages of 16 KiB").
const DefaultPageSize = 16 << 10

// checkPageSize refuses a page size bbolt cannot use well.
func checkPageSize(n int) error {
	if n < 1024 || n > 1<<20 || n&(n-1) != 0 {
		return fmt.Errorf("page size %d is not a power of two between 1 KiB and 1 MiB", n)
	}
	return nil
}

// DefaultKeepIdle is Options.KeepIdle's default.
const DefaultKeepIdle = time.Second

// maxInlineID is the longest Message-ID used as its own index key.
const maxInlineID = 512

// Options configure a Store. The zero value is ready to use.
type Options struct {
	// LockTimeout is how long an operation waits for another process's
	// lock on the file. Zero means one minute; negative means not at all.
	LockTimeout time.Duration
	// Linger is how long an idle handle may hold off another process that
	// waits for the file: an idle handle looks after Linger whether one
	// waits, and closes if so, then looks again as often as it has been
	// idle, at most 4 Linger apart. Zero means 5ms; negative, close at
	// once.
	Linger time.Duration
	// KeepIdle is how long an idle handle stays open while no other
	// process waits for the file, for the operations that follow: opening
	// the file maps it anew and faults its index pages in again, which
	// for a resolver answering now and then costs more than most reads.
	// Zero means one second; negative, Linger alone. Where flock is
	// missing (a waiting process cannot be seen), Linger alone.
	KeepIdle time.Duration
	// Logger receives warnings (a long wait for a lock). Nil discards them.
	Logger *slog.Logger
	// ReadOnly opens an existing store for reading only, without the
	// turnstile, for an archive nobody can write (a snapshot, a backup); see
	// CannotWrite. Writes fail with ErrReadOnly.
	ReadOnly bool
	// Compression says how messages are compressed (store.Compression). Zero
	// values mean LevelFastest (a compaction rewrites records harder), the
	// first dictionary at 10,000 messages and the compress package's defaults
	// otherwise: a newer one each time the store grows eightfold (or by
	// 10,000 messages), learnt from 2 MiB of mail.
	Compression store.Compression
	// PageSize is the bbolt page size of a file created now; an existing
	// file keeps its own. Zero means DefaultPageSize.
	PageSize int
	// MappedBudget is how many bytes of the file's pages a writer maps
	// before a write transaction lets go of them (the kernel keeps them
	// in its page cache, clean, and takes them back when it needs the
	// memory). Zero or less means DefaultMappedBudget, which bounds the
	// resident size of a long-running writer; a bulk import on a
	// machine with memory to spare gives more, as every batch looks up
	// and inserts keys all over the indexes, and once these outgrow the
	// budget each batch faults their pages in again (mapped.go).
	MappedBudget int64
	// RecentKeys is how many of the latest messages' index entries a
	// writer leaves apart, in the file and in the memory of every Store
	// that reads them (about 90 bytes each), before it merges them into
	// the indexes (recent.go): more merge fewer times, each page for
	// more keys. While merges fail, they are left to grow to four times
	// as many (at least 16,384); then a Put is refused until one
	// succeeds. Zero or less means DefaultRecentKeys.
	RecentKeys int
}

// DefaultRecentKeys is Options.RecentKeys's default.
const DefaultRecentKeys = 1 << 16

// compression fills in the bolt store's defaults (Options.Compression):
// records are written fast as messages arrive, and a compaction rewrites
// them harder, each era with a dictionary of its own; the first dictionary
// is trained late, as a training costs a small import more than it saves.
func compression(c store.Compression) store.Compression {
	if c.Level == store.LevelBackend {
		c.Level = store.LevelFastest
	}
	if c.TrainAt == 0 {
		c.TrainAt = 10000
	}
	return c
}

// Store is a store.Store in one bbolt file.
type Store struct {
	path  string
	h     *handles
	log   *slog.Logger
	comp  *compress.Compressor
	packs *packs
	// own is the pack of the Store's own that large batches write to
	// before they take the write lock (ownpack.go).
	own ownPack
	// mapped says when a write transaction releases the file's mapped
	// pages (mapped.go).
	mapped mappedPages
	// recent holds the index entries not merged into the indexes yet
	// (recent.go).
	recent recentKeys
	// mergeAt is Options.RecentKeys.
	mergeAt uint64

	// bound caches the binding once read: it never changes afterwards.
	bound atomic.Pointer[bound]
}

type bound struct {
	b     store.Binding
	codec *callnumber.Codec
}

var _ store.Store = (*Store)(nil)

// Open opens the message store at path, creating the file and its parent
// directory if missing.
func Open(ctx context.Context, path string, opts Options) (*Store, error) {
	switch {
	case opts.LockTimeout == 0:
		opts.LockTimeout = time.Minute
	case opts.LockTimeout < 0:
		opts.LockTimeout = 0
	}
	switch {
	case opts.Linger == 0:
		opts.Linger = 5 * time.Millisecond
	case opts.Linger < 0:
		opts.Linger = 0
	}
	switch {
	case opts.KeepIdle == 0:
		opts.KeepIdle = DefaultKeepIdle
	case opts.KeepIdle < 0:
		opts.KeepIdle = 0
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.PageSize == 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.MappedBudget <= 0 {
		opts.MappedBudget = DefaultMappedBudget
	}
	if err := checkPageSize(opts.PageSize); err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	if opts.ReadOnly {
		return openReadOnly(ctx, path, opts)
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the directory of %s: %w", path, err)
	}
	s := &Store{
		path:    path,
		log:     opts.Logger.With("store", path),
		packs:   newPacks(packDir(path), false),
		mapped:  mappedPages{budget: opts.MappedBudget},
		mergeAt: recentMergeAt,
	}
	if opts.RecentKeys > 0 {
		s.mergeAt = uint64(opts.RecentKeys)
	}
	turn, err := openTurnstile(path + ".lock")
	if err != nil {
		return nil, err
	}
	s.h = newHandles(path, turn, opts.LockTimeout, opts.Linger, opts.PageSize, s.log)
	s.h.keepIdle = opts.KeepIdle
	s.h.opened = s.packs.generation
	s.comp = compress.New(dicts{s}, compression(opts.Compression), s.log)
	if err := s.init(ctx); err != nil {
		s.comp.Close()
		s.h.close()
		s.packs.close()
		return nil, err
	}
	return s, nil
}

// init creates the buckets of a new file and checks an existing one's format.
func (s *Store) init(ctx context.Context) error {
	if fi, err := os.Stat(s.path); err == nil && fi.Size() > 0 {
		// Existing file: a read-only check, so as not to wait on writers.
		var v int
		err := s.view(ctx, func(tx *bolt.Tx) (err error) {
			v, err = checkFormat(tx)
			return err
		})
		if err != nil || v >= 3 {
			return err
		}
		return s.upgrade(ctx)
	}
	return s.update(ctx, func(tx *bolt.Tx) error {
		meta := tx.Bucket(bucketMeta)
		if meta != nil {
			// Another process created it first.
			v, err := checkFormat(tx)
			if err == nil && v < 3 {
				err = upgradeTx(tx, v)
			}
			return err
		}
		if c := tx.Cursor(); func() bool { k, _ := c.First(); return k != nil }() {
			return fmt.Errorf("%w: %s has buckets but no meta bucket", ErrFormat, s.path)
		}
		for _, name := range [][]byte{bucketMessages, bucketDigests, bucketMsgIDs, bucketRuns, bucketMeta, bucketChanges, bucketPacks} {
			if _, err := tx.CreateBucket(name); err != nil {
				return fmt.Errorf("cannot create bucket %s: %w", name, err)
			}
		}
		meta = tx.Bucket(bucketMeta)
		if err := meta.Put(keyFormat, []byte(format)); err != nil {
			return err
		}
		return meta.Put(keyCount, make([]byte, 8))
	})
}

// checkFormat checks that tx's file is a message store this program reads,
// and returns its format's version: 1 to 6.
func checkFormat(tx *bolt.Tx) (version int, err error) {
	meta := tx.Bucket(bucketMeta)
	if meta == nil {
		return 0, fmt.Errorf("%w: %s has no meta bucket", ErrFormat, tx.DB().Path())
	}
	f := string(meta.Get(keyFormat))
	switch f {
	case formatV1:
		version = 1
	case formatV2:
		version = 2
	case format:
		version = 3
	case formatRemovals:
		version = 4
	case formatMoves:
		version = 5
	case formatRecent:
		version = 6
	default:
		return 0, fmt.Errorf("%w: %s has format %q, this program reads %q, %q, %q, %q, %q and %q (was it written by a newer chibrary?)", ErrFormat, tx.DB().Path(), f, formatRecent, formatMoves, formatRemovals, format, formatV2, formatV1)
	}
	buckets := [][]byte{bucketMessages, bucketDigests, bucketMsgIDs, bucketRuns}
	if version >= 2 {
		buckets = append(buckets, bucketChanges)
	}
	if version >= 3 {
		buckets = append(buckets, bucketPacks)
	}
	if version == 4 {
		buckets = append(buckets, bucketRemoved)
	}
	if version >= 5 {
		buckets = append(buckets, bucketMoves)
	}
	for _, name := range buckets {
		if tx.Bucket(name) == nil {
			return 0, fmt.Errorf("%w: %s has no %s bucket", ErrFormat, tx.DB().Path(), name)
		}
	}
	return version, nil
}

// MappedBudget returns the store's Options.MappedBudget, its default filled in.
func (s *Store) MappedBudget() int64 { return s.mapped.budget }

// CachedDicts returns how many compression dictionaries the store keeps
// ready besides the current one: Options.Compression.CachedDicts, its
// default filled in.
func (s *Store) CachedDicts() int { return s.comp.CachedDicts() }

// Path returns the file's path.
func (s *Store) Path() string { return s.path }

func (s *Store) view(ctx context.Context, fn func(*bolt.Tx) error) error {
	db, err := s.h.acquire(ctx, false)
	if err != nil {
		return err
	}
	defer s.h.release(db)
	return db.View(fn)
}

func (s *Store) update(ctx context.Context, fn func(*bolt.Tx) error) error {
	db, err := s.h.acquire(ctx, true)
	if err != nil {
		return err
	}
	defer s.h.release(db)
	return db.Update(func(tx *bolt.Tx) error {
		s.mapped.release(tx)
		return fn(tx)
	})
}

// binding returns the store's binding read in tx, or nil if unbound.
func (s *Store) binding(tx *bolt.Tx) (*bound, error) {
	if b := s.bound.Load(); b != nil {
		return b, nil
	}
	v := tx.Bucket(bucketMeta).Get(keyBinding)
	if v == nil {
		return nil, nil
	}
	b, err := record.UnmarshalBinding(v)
	if err != nil {
		return nil, fmt.Errorf("cannot read the binding of %s: %w", s.path, err)
	}
	c, err := b.Codec()
	if err != nil {
		return nil, fmt.Errorf("cannot use the binding of %s: %w", s.path, err)
	}
	bd := &bound{b: b, codec: c}
	s.bound.Store(bd)
	return bd, nil
}

// RecordLease implements store.Store. A lease known or refused is settled
// by a read, without the write lock.
func (s *Store) RecordLease(ctx context.Context, l callnumber.Lease) error {
	var d batch.LeaseDecision
	err := s.view(ctx, func(tx *bolt.Tx) (err error) {
		d, err = s.checkLease(tx, l)
		return err
	})
	if err == nil && d == batch.Record {
		err = s.update(ctx, func(tx *bolt.Tx) error {
			d, err := s.checkLease(tx, l)
			if err != nil || d == batch.Known {
				return err
			}
			if b := tx.Bucket(bucketMeta); b.Get(keyBinding) == nil {
				bd := store.Binding{Authority: l.Authority, Scheme: l.Scheme, Key: l.Key}
				if err := b.Put(keyBinding, record.MarshalBinding(bd)); err != nil {
					return err
				}
			}
			runs := tx.Bucket(bucketRuns)
			runs.FillPercent = appendFill
			return runs.Put(runKey(l.Run), record.MarshalLease(l))
		})
	}
	if err != nil {
		return fmt.Errorf("cannot record lease of run %d in %s: %w", l.Run, s.path, err)
	}
	return nil
}

func (s *Store) checkLease(tx *bolt.Tx, l callnumber.Lease) (batch.LeaseDecision, error) {
	bd, err := s.binding(tx)
	if err != nil {
		return 0, err
	}
	var cur *store.Binding
	if bd != nil {
		cur = &bd.b
	}
	var old *callnumber.Lease
	if v := tx.Bucket(bucketRuns).Get(runKey(l.Run)); v != nil {
		o, err := record.UnmarshalLease(v)
		if err != nil {
			return 0, fmt.Errorf("cannot read the lease of run %d: %w", l.Run, err)
		}
		old = &o
	}
	return batch.CheckLease(cur, old, l)
}

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	var l callnumber.Lease
	err := s.view(ctx, func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketRuns).Get(runKey(run))
		if v == nil {
			return fmt.Errorf("%w: %s has none", store.ErrNotFound, s.path)
		}
		var err error
		l, err = record.UnmarshalLease(v)
		return err
	})
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease of run %d: %w", run, err)
	}
	return l, nil
}

// Binding implements store.Store.
func (s *Store) Binding(ctx context.Context) (store.Binding, error) {
	if b := s.bound.Load(); b != nil {
		if err := s.h.check(); err != nil {
			return store.Binding{}, err
		}
		return b.b, nil
	}
	var b store.Binding
	var berr error // binding's own errors say what they are about
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			berr = err
			return err
		}
		if bd == nil {
			return store.ErrUnbound
		}
		b = bd.b
		return nil
	})
	if err != nil && err != berr {
		return store.Binding{}, fmt.Errorf("cannot read the binding of %s: %w", s.path, err)
	}
	return b, err
}

// Put implements store.Store. A batch is one transaction; the costly work,
// hashing and compressing, is done before taking the file lock that other
// processes wait for, and skips messages whose digest is stored already.
func (s *Store) Put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	if err := s.h.check(); err != nil {
		return nil, err
	}
	if len(msgs) == 0 {
		return []store.Result{}, nil
	}
	if err := batch.CheckDigests(msgs); err != nil {
		return nil, fmt.Errorf("cannot put %d messages into %s: %w", len(msgs), s.path, err)
	}
	skip, err := s.known(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("cannot put %d messages into %s: %w", len(msgs), s.path, err)
	}
	now := time.Now().UTC()
	recs, err := s.comp.Encode(ctx, msgs, skip, now)
	if err != nil {
		return nil, fmt.Errorf("cannot put %d messages into %s: %w", len(msgs), s.path, err)
	}
	// Outside the lock, what can be: the records, to the Store's own pack
	// (only those the read plan writes: a removed message's bytes are
	// never written again).
	var pre *prewritten
	if skip != nil {
		if pre, err = s.own.write(recs); err != nil {
			// The pack is let go; the shared one says whether the
			// disk takes the records at all.
			s.log.Warn("cannot write to the store's own pack: the batch goes to the shared pack", "err", err)
		}
	}
	defer pre.done()
	if pre != nil && afterPrewrite != nil {
		afterPrewrite()
	}
	var (
		results []store.Result
		count   uint64
		started *startedPack
		recent  uint64 // the recent keys' sequence after the batch
	)
	put := func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if bd == nil {
			return fmt.Errorf("%w: this store has no lease recorded at all (it is not bound to a run authority yet): record the run's lease before putting messages under it", store.ErrUnknownRun)
		}
		if b := tx.Bucket(bucketRecent); b != nil && b.Sequence() >= s.recentLimit() {
			return errRecentFull
		}
		look, err := s.lookup(tx, bd)
		if err != nil {
			return err
		}
		plan, err := batch.Make(ctx, bd.codec, msgs, look)
		if err != nil {
			return err
		}
		results = plan.Results
		if pre != nil && !pre.listed(tx) {
			// A compaction replaced the file: what pre wrote is gone.
			pre = nil
		}
		count, err = s.write(ctx, tx, bd.codec, msgs, recs, now, plan, pre)
		if b := tx.Bucket(bucketRecent); b != nil {
			recent = b.Sequence()
		}
		if err != nil || pre != nil || skip == nil || recordBytes(recs) < ownPackMin {
			return err
		}
		// A large batch written to the shared pack: the next ones go to
		// a pack of the Store's own. (Not for one large message, which a
		// process that stores a message at a time may be given.) That is
		// for speed only: if it fails, the batch is stored all the same.
		if started, err = s.own.start(tx, s.packs); err != nil {
			s.log.Warn("cannot start a pack of the store's own: batches go to the shared pack", "err", err)
			started = nil
		}
		return nil
	}
	err = s.update(ctx, put)
	if errors.Is(err, errRecentFull) {
		// Merges have failed for a while (a Put's own merge only logs
		// why): this one waits for a merge, and says why it fails.
		if merr := s.mergeRecent(ctx, 0, true); merr != nil {
			err = fmt.Errorf("%w, and a merge fails: %w", errRecentFull, merr)
		} else {
			err = s.update(ctx, put)
		}
	}
	if err != nil {
		started.cleanup()
		return nil, fmt.Errorf("cannot put %d messages into %s: %w", len(msgs), s.path, err)
	}
	if count > 0 {
		s.comp.Stored(ctx, int64(count))
	}
	if s.recent.mergeDue(recent, s.mergeAt) {
		// The batch is stored: a merge that fails is tried again a
		// quarter of the threshold later (recentKeys.mergeDue), and
		// Puts are refused once recentLimit keys wait.
		if err := s.mergeRecent(ctx, 0, false); err != nil {
			s.recent.failed(recent)
			s.log.Warn("cannot merge the recent keys into the indexes", "err", err, "recent", recent)
		}
	}
	return results, nil
}

// known reports, for each message, whether it need not be compressed: by
// a plan of the batch made in a read transaction, what a write would not
// write (a digest stored already, a retry, a removed message). The plan
// may change by the time the batch's write transaction makes it again;
// that one decides. A single message, or a batch the read plan refuses,
// is left to the write transaction: then known returns nil.
func (s *Store) known(ctx context.Context, msgs []store.Message) ([]bool, error) {
	if len(msgs) < 2 {
		return nil, nil
	}
	var skip []bool
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return err
		}
		look, err := s.lookup(tx, bd)
		if err != nil {
			return err
		}
		plan, err := batch.Make(ctx, bd.codec, msgs, look)
		if err != nil {
			return nil // the write transaction says why
		}
		skip = make([]bool, len(msgs))
		for i, a := range plan.Actions {
			skip[i] = a != batch.Write
		}
		return nil
	})
	return skip, err
}

// write writes what plan says, and returns the store's message count after
// it (0 if nothing was written).
func (s *Store) write(ctx context.Context, tx *bolt.Tx, codec *callnumber.Codec, msgs []store.Message, recs [][]byte, now time.Time, plan batch.Plan, pre *prewritten) (uint64, error) {
	messages := tx.Bucket(bucketMessages)
	messages.FillPercent = appendFill
	recent := recentWriter{tx: tx}
	meta := tx.Bucket(bucketMeta)
	changes := tx.Bucket(bucketChanges)
	if changes == nil {
		// Open upgrades a format 1 file before anything is written, and
		// programs that write format 1 refuse format 2 files.
		return 0, fmt.Errorf("%w: %s has no changes bucket", ErrFormat, s.path)
	}
	changes.FillPercent = appendFill
	if tx.Bucket(bucketPacks) == nil {
		// Open upgrades an older file before anything is written, and
		// older programs refuse format 3 files.
		return 0, fmt.Errorf("%w: %s has no packs bucket", ErrFormat, s.path)
	}
	pw := s.packs.writer(tx)
	var written uint64
	for i := range msgs {
		if plan.Actions[i] != batch.Write {
			continue
		}
		m := &msgs[i]
		key := packedKey(codec.Packed(m.Number))
		rec := recs[i]
		var loc []byte
		if rec != nil && pre != nil {
			loc = pre.locator(i, len(rec))
		} else {
			if rec == nil {
				// Its digest was stored when Put looked: this cannot happen.
				var err error
				if rec, err = s.comp.EncodeOne(ctx, m, now); err != nil {
					return 0, err
				}
			}
			var err error
			if loc, err = pw.add(rec); err != nil {
				return 0, fmt.Errorf("cannot write message %v: %w", m.Number, err)
			}
		}
		// bbolt keeps a reference to the value until the commit.
		if err := messages.Put(key[:], loc); err != nil {
			return 0, fmt.Errorf("cannot write message %v: %w", m.Number, err)
		}
		if err := recent.add(key, m.Digest, m.MessageID); err != nil {
			return 0, fmt.Errorf("cannot index %v: %w", m.Number, err)
		}
		if err := appendChange(changes, key); err != nil {
			return 0, fmt.Errorf("cannot add %v to the change feed: %w", m.Number, err)
		}
		written++
	}
	if written == 0 {
		return 0, nil
	}
	// The records are durable before the transaction that names them.
	if err := pw.commit(); err != nil {
		return 0, err
	}
	if pre != nil {
		if err := pre.commit(tx); err != nil {
			return 0, err
		}
	}
	c := meta.Get(keyCount)
	if len(c) != 8 {
		return 0, fmt.Errorf("%w: message count of %d bytes", ErrFormat, len(c))
	}
	count := binary.BigEndian.Uint64(c) + written
	return count, meta.Put(keyCount, binary.BigEndian.AppendUint64(nil, count))
}

// txLookup answers batch.Make's questions inside a transaction.
type txLookup struct {
	s                       *Store
	tx                      *bolt.Tx
	codec                   *callnumber.Codec
	messages, digests, runs *bolt.Bucket
	recent                  recentView
}

// lookup returns a txLookup of tx.
func (s *Store) lookup(tx *bolt.Tx, bd *bound) (*txLookup, error) {
	recent, err := s.recent.view(tx)
	if err != nil {
		return nil, err
	}
	return &txLookup{s: s, tx: tx, codec: bd.codec, messages: tx.Bucket(bucketMessages), digests: tx.Bucket(bucketDigests), runs: tx.Bucket(bucketRuns), recent: recent}, nil
}

func (l *txLookup) HasLease(_ context.Context, run uint32) (bool, error) {
	return l.runs.Get(runKey(run)) != nil, nil
}

func (l *txLookup) Raw(_ context.Context, n callnumber.Number) ([]byte, bool, error) {
	key := packedKey(l.codec.Packed(n))
	v := l.messages.Get(key[:])
	if v == nil {
		return nil, false, nil
	}
	m, err := l.s.decode(l.tx, v)
	if err != nil {
		return nil, false, fmt.Errorf("cannot read message %v: %w", n, err)
	}
	return m.Raw, true, nil
}

// NoRemovals implements batch.NoRemovals: no removal record in the file.
func (l *txLookup) NoRemovals(context.Context) (bool, error) {
	b := l.tx.Bucket(bucketRemoved)
	if b == nil {
		return true, nil
	}
	k, _ := b.Cursor().First()
	return k == nil, nil
}

func (l *txLookup) Removal(_ context.Context, n callnumber.Number) (*store.Removal, error) {
	return removalOf(l.tx, n, packedKey(l.codec.Packed(n)))
}

func (l *txLookup) Digest(_ context.Context, d store.Digest) (callnumber.Number, bool, error) {
	if key, ok, err := l.recent.digest(d); err != nil || ok {
		return l.codec.Number(binary.BigEndian.Uint64(key[:])), ok, err
	}
	v := l.digests.Get(d[:])
	if v == nil {
		return 0, false, nil
	}
	if len(v) != 8 {
		return 0, false, fmt.Errorf("%w: digest entry %v of %d bytes", ErrFormat, d, len(v))
	}
	return l.codec.Number(binary.BigEndian.Uint64(v)), true, nil
}

// Get implements store.Store. The record is decoded after the read
// transaction, so that the file is held no longer than a read takes.
func (s *Store) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	var rec []byte
	list := "\x00" // none moved
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if bd == nil || uint64(n)>>callnumber.Bits != 0 {
			return store.ErrNotFound
		}
		key := packedKey(bd.codec.Packed(n))
		v := tx.Bucket(bucketMessages).Get(key[:])
		if v == nil {
			if r, err := removalOf(tx, n, key); err != nil || r != nil {
				if err == nil {
					err = &store.RemovedError{Removal: *r}
				}
				return err
			}
			return store.ErrNotFound
		}
		if mv, err := moveOf(tx, n, key); err != nil {
			return err
		} else if mv != nil {
			list = mv.List
		}
		if isLocator(v) {
			rec, err = s.readRecord(tx, v)
			return err
		}
		rec = append(make([]byte, 0, len(v)), v...)
		return nil
	})
	if err != nil {
		return store.Stored{}, fmt.Errorf("cannot get message %v: %w", n, err)
	}
	m, err := s.comp.Decode(rec, func(id record.DictID) ([]byte, error) { return dicts{s}.LoadDict(ctx, id) })
	if err != nil {
		return store.Stored{}, fmt.Errorf("cannot get message %v from %s: %w", n, s.path, err)
	}
	if list == "\x00" {
		list = m.List
	}
	return store.Stored{Number: n, Raw: m.Raw, Digest: m.Digest, MessageID: m.MessageID, List: list, Added: m.Added}, nil
}

// ByMessageID implements store.Store, in packed (run, sequence) order.
func (s *Store) ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error) {
	out := []callnumber.Number{}
	if id == "" {
		return out, s.h.check()
	}
	prefix := msgIDKey(id, nil)
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return err
		}
		recent, err := s.recent.view(tx)
		if err != nil {
			return err
		}
		keys, err := recent.msgIDs(prefix, nil)
		if err != nil {
			return err
		}
		c := tx.Bucket(bucketMsgIDs).Cursor()
		for k, _ := c.Seek(prefix); k != nil && bytes.HasPrefix(k, prefix); k, _ = c.Next() {
			// The length check skips longer Message-IDs that have this one
			// and a NUL byte as a prefix.
			if len(k) == len(prefix)+8 {
				keys = append(keys, [8]byte(k[len(prefix):]))
			}
		}
		// A key a merge has put into the index may still be recent.
		slices.SortFunc(keys, func(a, b [8]byte) int { return bytes.Compare(a[:], b[:]) })
		for _, k := range slices.Compact(keys) {
			out = append(out, bd.codec.Number(binary.BigEndian.Uint64(k[:])))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot look up Message-ID %q: %w", id, err)
	}
	return out, nil
}

// ByDigest implements store.Store.
func (s *Store) ByDigest(ctx context.Context, d store.Digest) (callnumber.Number, error) {
	var n callnumber.Number
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if bd == nil {
			return store.ErrNotFound
		}
		look, err := s.lookup(tx, bd)
		if err != nil {
			return err
		}
		var ok bool
		if n, ok, err = look.Digest(ctx, d); err == nil && !ok {
			err = store.ErrNotFound
		}
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cannot look up digest %v: %w", d, err)
	}
	return n, nil
}

// Count implements store.Store.
func (s *Store) Count(ctx context.Context) (int64, error) {
	var n int64
	err := s.view(ctx, func(tx *bolt.Tx) error {
		c := tx.Bucket(bucketMeta).Get(keyCount)
		if len(c) != 8 {
			return fmt.Errorf("%w: message count of %d bytes", ErrFormat, len(c))
		}
		n = int64(binary.BigEndian.Uint64(c))
		return nil
	})
	if err != nil {
		return 0, fmt.Errorf("cannot count messages: %w", err)
	}
	return n, nil
}

// Close implements store.Store; it waits for running operations.
func (s *Store) Close() error {
	s.releaseOwnPack()
	s.own.close()
	cerr := s.comp.Close()
	if err := s.h.close(); err != nil {
		return err
	}
	if err := s.packs.close(); cerr == nil {
		cerr = err
	}
	return cerr
}

// releaseOwnPack lists the Store's pack of its own as free for the next
// Store, waiting a few seconds at most for the file; if it cannot, the
// pack is only left as a crashed writer's would be.
func (s *Store) releaseOwnPack() {
	if !s.own.has() {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := s.update(ctx, s.own.release); err != nil {
		s.log.Debug("cannot list the store's own pack as free", "err", err)
	}
}

// afterPrewrite, if set, is called by Put between writing a batch's
// records to its own pack and taking the write lock (for tests).
var afterPrewrite func()

// recordBytes is what a batch's records add up to.
func recordBytes(recs [][]byte) int {
	n := 0
	for _, r := range recs {
		n += len(r)
	}
	return n
}

func packedKey(v uint64) [8]byte {
	var k [8]byte
	binary.BigEndian.PutUint64(k[:], v)
	return k
}

func runKey(run uint32) []byte { return binary.BigEndian.AppendUint32(nil, run) }

// msgIDKey returns the index key of id followed by suffix (a packed
// number, or nil for the prefix of a scan).
func msgIDKey(id string, suffix []byte) []byte {
	var k []byte
	if len(id) > maxInlineID || id[0] == 0xff {
		sum := sha256.Sum256([]byte(id))
		k = append(append(make([]byte, 0, 1+len(sum)+1+len(suffix)), 0xff), sum[:]...)
	} else {
		k = append(make([]byte, 0, len(id)+1+len(suffix)), id...)
	}
	k = append(k, 0)
	return append(k, suffix...)
}
