package boltstore

// A pack of a writer's own: where a process that stores large batches
// writes their records before it takes the write lock.
//
// The shared pack (packs.go) is written within the write transaction,
// since another process may append to it next; so each batch's records,
// and the sync that makes them durable, are part of the time the file is
// locked, and one batch's writing waits for the other's. A Store that puts
// a batch of at least ownPackMin bytes of records lists a pack of its own
// in that batch's transaction, which no other writer appends to (meta
// "pack" never names it). Its later batches reserve the next bytes of it,
// write and sync their records there while other batches hold the lock,
// and in their transaction only put the locators and raise the pack's
// committed length to the end of what they wrote.
//
// The file's format is the same: a pack is listed with a committed length
// and read as any other, by any program. What differs:
//   - Bytes below the committed length are not all referenced: a batch
//     whose transaction failed, or whose messages turned out to be stored
//     already, leaves its records unreferenced, and a later batch's commit
//     raises the length past them. Nothing reads a pack but by locator, and
//     a compaction copies referenced records only.
//   - Each process that stores large batches at the same time has a pack
//     of its own (up to maxPackSize). One that closes lists it as free
//     (bucketFreePacks), and the next one takes it on; a crashed one's is
//     left as it is, until a compaction gathers the packs into its own.
//   - A compaction in place deletes the packs its copy does not list, this
//     one with them, even while its writer holds it open. A batch checks in
//     its transaction that its pack is still listed; if not, the records it
//     wrote went to a deleted file, and it writes them again, to the shared
//     pack, as a batch without a pack of its own does.
//
// Killed at any line: before the transaction that lists the pack commits,
// the file is unlisted and the next compaction deletes it; after, bytes
// past the committed length are as a crashed writer of the shared pack
// leaves them, except that nobody writes over them.

import (
	"bytes"
	"encoding/binary"
	"fmt"
	"os"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// ownPackMin is the least a batch's records add up to for its Store to
// write into a pack of its own: so that a process storing a few messages
// at a time leaves no small pack behind. (A variable for tests.)
var ownPackMin = 512 << 10

// ownPack is a Store's pack of its own, once it has one.
type ownPack struct {
	mu   sync.Mutex
	cur  *ownFile // nil: none yet, or the last one was let go
	next uint64   // where the next batch's records go in cur
	// starting: a transaction started one, not installed yet (bbolt
	// runs OnCommit after it lets go of the write lock, so the next
	// transaction may come first).
	starting bool
}

// ownFile is an open pack of a Store's own, closed once it is let go and
// no batch that wrote to it is still running: a compaction deletes the
// packs its copy does not list, and an open file keeps its space.
type ownFile struct {
	id   packID
	f    *os.File
	refs int  // batches written to it and not yet done; under ownPack.mu
	gone bool // let go: close when refs reaches 0
}

// prewritten is a batch's records written to the Store's own pack: rec i
// at offs[i], the whole within [start, end). done must be called once
// the batch's transaction is over, whatever its outcome.
type prewritten struct {
	o          *ownPack
	file       *ownFile
	offs       []uint64
	start, end uint64
}

// write writes the batch's records (nil ones are skipped) to the pack and
// syncs it, outside any transaction. It returns nil, and writes nothing,
// when the Store has no pack of its own or the batch would take it past
// maxPackSize (then the batch goes to the shared pack, and starts a new
// pack of its own).
func (o *ownPack) write(recs [][]byte) (*prewritten, error) {
	var n uint64
	for _, r := range recs {
		n += uint64(len(r))
	}
	if n == 0 {
		return nil, nil
	}
	o.mu.Lock()
	cur := o.cur
	if cur == nil {
		o.mu.Unlock()
		return nil, nil
	}
	if o.next+n > maxPackSize {
		o.letGoLocked(cur)
		o.mu.Unlock()
		return nil, nil
	}
	p := &prewritten{o: o, file: cur, offs: make([]uint64, len(recs)), start: o.next, end: o.next + n}
	o.next = p.end
	cur.refs++
	o.mu.Unlock()

	buf := make([]byte, 0, n)
	for i, r := range recs {
		if r != nil {
			p.offs[i] = p.start + uint64(len(buf))
			buf = append(buf, r...)
		}
	}
	err := func() error {
		if _, err := cur.f.WriteAt(buf, int64(p.start)); err != nil {
			return fmt.Errorf("cannot write pack %v: %w", cur.id, err)
		}
		if err := cur.f.Sync(); err != nil {
			return fmt.Errorf("cannot sync pack %v: %w", cur.id, err)
		}
		return nil
	}()
	if err != nil {
		// Bytes past the committed length that nothing will reference;
		// the pack is let go, as a write error may repeat.
		o.mu.Lock()
		o.letGoLocked(cur)
		o.mu.Unlock()
		p.done()
		return nil, err
	}
	return p, nil
}

// listed reports whether tx's file still lists the pack p was written to;
// if not (a compaction replaced the file), the Store lets that pack go.
func (p *prewritten) listed(tx *bolt.Tx) bool {
	if _, ok := packLength(tx, p.file.id); ok {
		return true
	}
	p.o.mu.Lock()
	p.o.letGoLocked(p.file)
	p.o.mu.Unlock()
	return false
}

// locator returns the locator of record i.
func (p *prewritten) locator(i int, n int) []byte {
	return appendLocator(nil, locator{pack: p.file.id, off: p.offs[i], n: uint64(n)})
}

// commit raises the pack's committed length to the end of p, in tx.
func (p *prewritten) commit(tx *bolt.Tx) error {
	at, _ := packLength(tx, p.file.id)
	if at >= p.end {
		return nil // a batch written after it committed first
	}
	return tx.Bucket(bucketPacks).Put(p.file.id[:], binary.BigEndian.AppendUint64(nil, p.end))
}

// done ends the batch's use of the pack.
func (p *prewritten) done() {
	if p == nil {
		return
	}
	p.o.mu.Lock()
	defer p.o.mu.Unlock()
	p.file.refs--
	p.file.closeIfDone()
}

// bucketFreePacks lists the packs of their own that Stores let go of as
// they closed: the next Store to start a pack of its own takes one of them
// on, so that importers run one after the other share one pack rather
// than leave one each. (Only a crashed writer's pack is left behind.)
// Programs that do not know it ignore it, and a compaction, whose copy
// lists none of the old packs, leaves it out.
var bucketFreePacks = []byte("freepacks")

// start makes the Store a pack of its own in tx, unless it has one: a
// free one (bucketFreePacks), or a new one, listed in tx. The caller holds
// the write lock. The Store writes to it once tx commits; if tx does not,
// started's cleanup deletes a new file, which nothing lists.
func (o *ownPack) start(tx *bolt.Tx, p *packs) (sp *startedPack, err error) {
	o.mu.Lock()
	busy := o.cur != nil || o.starting
	o.starting = !busy
	o.mu.Unlock()
	if busy {
		return nil, nil
	}
	defer func() {
		if sp == nil {
			o.mu.Lock()
			o.starting = false
			o.mu.Unlock()
		}
	}()
	if sp, err := o.reuse(tx, p); sp != nil || err != nil {
		return sp, err
	}
	id := newPackID()
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return nil, fmt.Errorf("cannot create a pack: %w", err)
	}
	path := p.path(id)
	f, err := createPack(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create a pack: %w", err)
	}
	sp = &startedPack{o: o, file: &ownFile{id: id, f: f}, path: path}
	// The directory is synced so that the file is there after a crash
	// once the commit lists it.
	if err := syncDir(p.dir); err != nil {
		sp.cleanup()
		return nil, fmt.Errorf("cannot create a pack: %w", err)
	}
	if err := tx.Bucket(bucketPacks).Put(id[:], make([]byte, 8)); err != nil {
		sp.cleanup()
		return nil, err
	}
	tx.OnCommit(sp.install)
	return sp, nil
}

// reuse takes on a free pack in tx, the first with room for a large
// batch, and takes those it passes over (full, or deleted by a
// compaction) off the list.
func (o *ownPack) reuse(tx *bolt.Tx, p *packs) (*startedPack, error) {
	b := tx.Bucket(bucketFreePacks)
	if b == nil {
		return nil, nil
	}
	var ids [][]byte
	b.ForEach(func(k, _ []byte) error {
		ids = append(ids, bytes.Clone(k))
		return nil
	})
	for _, k := range ids {
		if err := b.Delete(k); err != nil {
			return nil, err
		}
		if len(k) != packIDLen {
			continue
		}
		id := packID(k)
		at, ok := packLength(tx, id)
		if !ok || at+uint64(ownPackMin) > maxPackSize {
			continue
		}
		f, err := os.OpenFile(p.path(id), os.O_RDWR, 0)
		if err != nil {
			continue // a pack without its file reads as damaged: not ours to mend
		}
		// Bytes past its committed length are no one's: a batch of the
		// Store that let it go failed there.
		sp := &startedPack{o: o, file: &ownFile{id: id, f: f}, next: at, reused: true}
		tx.OnCommit(sp.install)
		return sp, nil
	}
	return nil, nil
}

// release lets go of the Store's pack of its own and lists it as free in
// tx, for the next Store (Store.Close). A pack that a batch of the Store
// is still writing to is only let go: the next Store would write over
// what that batch commits.
func (o *ownPack) release(tx *bolt.Tx) error {
	o.mu.Lock()
	cur := o.cur
	if cur == nil {
		o.mu.Unlock()
		return nil
	}
	busy := cur.refs > 0
	o.letGoLocked(cur)
	o.mu.Unlock()
	if busy {
		return nil
	}
	if at, ok := packLength(tx, cur.id); !ok || at+uint64(ownPackMin) > maxPackSize {
		return nil
	}
	b, err := tx.CreateBucketIfNotExists(bucketFreePacks)
	if err != nil {
		return err
	}
	return b.Put(cur.id[:], []byte{})
}

// createPack creates a new pack's file (a variable for tests).
var createPack = func(path string) (*os.File, error) {
	return os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
}

// startedPack is a pack of a Store's own, new or reused, listed in a
// transaction not yet committed.
type startedPack struct {
	o         *ownPack
	file      *ownFile
	path      string // of a new pack
	next      uint64 // where the Store's first batch goes
	reused    bool
	installed bool
}

// install makes the pack the Store's own (tx.OnCommit).
func (sp *startedPack) install() {
	sp.installed = true
	sp.o.mu.Lock()
	defer sp.o.mu.Unlock()
	sp.o.starting = false
	if sp.o.cur != nil {
		sp.o.letGoLocked(sp.o.cur)
	}
	sp.o.cur, sp.o.next = sp.file, sp.next
}

// cleanup, if the pack's transaction did not commit, closes it, and
// deletes a new one: no file lists it, and nobody else knows its name.
func (sp *startedPack) cleanup() {
	if sp == nil || sp.installed {
		return
	}
	sp.o.mu.Lock()
	sp.o.starting = false
	sp.o.mu.Unlock()
	sp.file.f.Close()
	if !sp.reused {
		os.Remove(sp.path)
	}
}

// letGoLocked stops new batches from using f, and closes it once the
// batches that wrote to it are done; the caller holds o.mu.
func (o *ownPack) letGoLocked(f *ownFile) {
	if o.cur == f {
		o.cur = nil
	}
	f.gone = true
	f.closeIfDone()
}

func (f *ownFile) closeIfDone() {
	if f.gone && f.refs == 0 && f.f != nil {
		f.f.Close()
		f.f = nil
	}
}

// close lets go of the pack; the Store's batches are done.
func (o *ownPack) close() {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.cur != nil {
		o.letGoLocked(o.cur)
	}
}

// has reports whether the Store has a pack of its own.
func (o *ownPack) has() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	return o.cur != nil
}
