package boltstore

// Packs: where the message records of a format 3 file live.
//
// A bbolt leaf page holds whole values: a page's tail that the next record
// does not fit in is lost, a record larger than a page takes whole pages,
// and every bucket, the meta and the freelist take a page of their own.
// With compressed records of 1 to 10 KiB that costs a fifth of the store
// on 4 KiB pages, and even on 64 KiB pages (DefaultPageSize before packs)
// the compacted linux-mips sample lost 3.0 MB of 19.8 to it, 0.074 bytes
// per input byte. So records are appended, end to end, to pack files
// beside the bbolt file, and the messages bucket holds for each message a
// locator: which pack, where, how long. The bbolt file keeps the indexes
// and locators only, in small pages.
//
// A pack is DIR/NAME.packs/ID.pack (packDir), ID 16 hex digits, random,
// so that a compaction's new packs never meet the old ones. The packs
// bucket lists a file's packs with the length of each that its
// transactions have committed; meta "pack" names the one new records go
// to, until it reaches maxPackSize.
//
// Writing a batch (within its bbolt write transaction, whose lock keeps
// other writers out): the records are written at the pack's committed
// length, the pack is synced, the locators and the new length go into
// the transaction, which commits (synced). A crash before the commit
// leaves bytes past the committed length, which nothing references and
// the next batch writes over. Bytes below it never change, so a reader
// reads them without a lock of their own; it reads them within a read
// transaction of the file that references them, whose shared lock keeps
// a compaction from deleting the pack meanwhile (compact.go).

import (
	"bytes"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"

	bolt "go.etcd.io/bbolt"
)

const (
	// locatorTag is the first byte of a locator in the messages bucket.
	// Message records begin with their version (1 or 2), so a value is
	// told apart by it: a format 2 file's records stay where they are.
	locatorTag = 0x80
	// packIDLen is the length of a pack's ID.
	packIDLen = 8
	// packExt ends a pack's file name.
	packExt = ".pack"
)

// maxPackSize is the size at which a writer starts a new pack: small
// enough for a backup to copy a file in a few seconds, large enough that an
// archive has few of them. (A variable for tests.)
var maxPackSize uint64 = 1 << 30

var (
	bucketPacks = []byte("packs")
	keyPack     = []byte("pack")
)

// packID names a pack.
type packID [packIDLen]byte

func (id packID) String() string { return hex.EncodeToString(id[:]) }

func newPackID() packID {
	var id packID
	rand.Read(id[:])
	return id
}

// packDir is the directory of the packs of the bbolt file at path:
// messages.db's are in messages.packs.
func packDir(path string) string {
	return strings.TrimSuffix(path, ".db") + ".packs"
}

// locator says where a record is: in pack, n bytes at off.
type locator struct {
	pack packID
	off  uint64
	n    uint64
}

func appendLocator(dst []byte, l locator) []byte {
	dst = append(dst, locatorTag)
	dst = append(dst, l.pack[:]...)
	dst = binary.AppendUvarint(dst, l.off)
	return binary.AppendUvarint(dst, l.n)
}

func isLocator(v []byte) bool { return len(v) > 0 && v[0] == locatorTag }

func parseLocator(v []byte) (locator, error) {
	if len(v) < 1+packIDLen+2 || v[0] != locatorTag {
		return locator{}, fmt.Errorf("%w: a locator of %d bytes", ErrFormat, len(v))
	}
	var l locator
	copy(l.pack[:], v[1:])
	rest := v[1+packIDLen:]
	var k int
	if l.off, k = binary.Uvarint(rest); k <= 0 {
		return locator{}, fmt.Errorf("%w: a locator's offset does not parse", ErrFormat)
	}
	rest = rest[k:]
	if l.n, k = binary.Uvarint(rest); k <= 0 || k != len(rest) {
		return locator{}, fmt.Errorf("%w: a locator's length does not parse", ErrFormat)
	}
	return l, nil
}

// packs keeps a Store's open pack files. Files are opened on first use
// and kept open; forget closes those of packs a replaced file listed.
type packs struct {
	dir      string
	readOnly bool

	mu    sync.Mutex
	files map[packID]*os.File
	gen   string // the compaction ID of the file the open packs are of
}

func newPacks(dir string, readOnly bool) *packs {
	return &packs{dir: dir, readOnly: readOnly, files: map[packID]*os.File{}}
}

func (p *packs) path(id packID) string { return filepath.Join(p.dir, id.String()+packExt) }

// file returns the open file of pack id.
func (p *packs) file(id packID) (*os.File, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if f := p.files[id]; f != nil {
		return f, nil
	}
	flag := os.O_RDWR
	if p.readOnly {
		flag = os.O_RDONLY
	}
	f, err := os.OpenFile(p.path(id), flag, 0)
	if err != nil {
		return nil, err
	}
	p.files[id] = f
	return f, nil
}

// create creates the file of a new pack, and syncs its directory so that
// the file is there after a crash before a commit names it.
func (p *packs) create(id packID) error {
	if err := os.MkdirAll(p.dir, 0o755); err != nil {
		return err
	}
	f, err := os.OpenFile(p.path(id), os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return err
	}
	p.mu.Lock()
	p.files[id] = f
	p.mu.Unlock()
	return syncDir(p.dir)
}

// generation closes the files of the packs of an earlier file when the
// store's file is not the one they were opened for (a compaction has
// replaced it): they are deleted, and would hold their space while open.
func (p *packs) generation(gen string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if gen == p.gen {
		return
	}
	p.closeLocked()
	p.gen = gen
}

func (p *packs) closeLocked() error {
	var errs []error
	for id, f := range p.files {
		errs = append(errs, f.Close())
		delete(p.files, id)
	}
	return errors.Join(errs...)
}

func (p *packs) close() error {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.closeLocked()
}

// read returns the record l locates, reading it in tx (see the file's
// doc): the pack must be one tx's file lists, and the record within its
// committed length.
func (p *packs) read(tx *bolt.Tx, l locator) ([]byte, error) {
	committed, ok := packLength(tx, l.pack)
	if !ok {
		return nil, fmt.Errorf("%w: a locator names pack %v, which %s does not list", ErrFormat, l.pack, tx.DB().Path())
	}
	if l.n > maxPackSize || l.off > committed || l.n > committed-l.off {
		return nil, fmt.Errorf("%w: a locator names bytes %d to %d of pack %v, which has %d", ErrFormat, l.off, l.off+l.n, l.pack, committed)
	}
	f, err := p.file(l.pack)
	if err != nil {
		return nil, fmt.Errorf("cannot open pack %v: %w", l.pack, err)
	}
	b := make([]byte, l.n)
	if _, err := f.ReadAt(b, int64(l.off)); err != nil {
		if errors.Is(err, io.EOF) {
			err = fmt.Errorf("%w: %s is shorter than its %d committed bytes: the file was cut", ErrFormat, f.Name(), committed)
		}
		return nil, fmt.Errorf("cannot read pack %v: %w", l.pack, err)
	}
	return b, nil
}

// packLength returns the committed length of pack id in tx's file.
func packLength(tx *bolt.Tx, id packID) (uint64, bool) {
	b := tx.Bucket(bucketPacks)
	if b == nil {
		return 0, false
	}
	v := b.Get(id[:])
	if len(v) != 8 {
		return 0, false
	}
	return binary.BigEndian.Uint64(v), true
}

// packWriter appends the records of one write transaction to the current
// pack, and commits their length in that transaction.
type packWriter struct {
	p    *packs
	tx   *bolt.Tx
	id   packID
	at   uint64 // the committed length, where the next record goes
	f    *os.File
	n    uint64 // bytes written at at
	open bool
	// noSync leaves syncing the pack to the caller (a compaction syncs
	// its copy once, before it is used).
	noSync bool
}

// writer returns a packWriter for tx: new records go to the current pack,
// or to a new one if there is none or it is full.
func (p *packs) writer(tx *bolt.Tx) *packWriter {
	return &packWriter{p: p, tx: tx}
}

// add writes rec to the pack and returns its locator. The record is
// durable only after sync.
func (w *packWriter) add(rec []byte) ([]byte, error) {
	if !w.open || w.at+w.n+uint64(len(rec)) > maxPackSize && w.at+w.n > 0 {
		if err := w.next(uint64(len(rec))); err != nil {
			return nil, err
		}
	}
	l := locator{pack: w.id, off: w.at + w.n, n: uint64(len(rec))}
	if _, err := w.f.WriteAt(rec, int64(l.off)); err != nil {
		return nil, fmt.Errorf("cannot write pack %v: %w", w.id, err)
	}
	w.n += l.n
	return appendLocator(nil, l), nil
}

// next commits what was written to the pack in use, if any, and moves to
// the current pack, or a new one when there is none or need bytes would
// take it past maxPackSize.
func (w *packWriter) next(need uint64) error {
	if w.open {
		if err := w.commit(); err != nil {
			return err
		}
		// The current pack is full: start another.
		return w.start()
	}
	w.open = true
	meta := w.tx.Bucket(bucketMeta)
	cur := meta.Get(keyPack)
	if len(cur) != packIDLen {
		return w.start()
	}
	w.id = packID(cur)
	at, ok := packLength(w.tx, w.id)
	if !ok {
		return fmt.Errorf("%w: the current pack %v is not listed", ErrFormat, w.id)
	}
	if at > 0 && at+need > maxPackSize {
		return w.start()
	}
	f, err := w.p.file(w.id)
	if err != nil {
		return fmt.Errorf("cannot open pack %v: %w", w.id, err)
	}
	w.f, w.at, w.n = f, at, 0
	return nil
}

// start makes a new pack current.
func (w *packWriter) start() error {
	id := newPackID()
	if err := w.p.create(id); err != nil {
		return fmt.Errorf("cannot create a pack: %w", err)
	}
	f, err := w.p.file(id)
	if err != nil {
		return err
	}
	packs, err := w.tx.CreateBucketIfNotExists(bucketPacks)
	if err != nil {
		return err
	}
	if err := packs.Put(id[:], make([]byte, 8)); err != nil {
		return err
	}
	if err := w.tx.Bucket(bucketMeta).Put(keyPack, bytes.Clone(id[:])); err != nil {
		return err
	}
	w.id, w.f, w.at, w.n = id, f, 0, 0
	return nil
}

// commit syncs what was written to the pack in use and records its new
// length in the transaction.
func (w *packWriter) commit() error {
	if !w.open || w.n == 0 {
		return nil
	}
	if !w.noSync {
		if err := w.f.Sync(); err != nil {
			return fmt.Errorf("cannot sync pack %v: %w", w.id, err)
		}
	}
	w.at += w.n
	w.n = 0
	return w.tx.Bucket(bucketPacks).Put(w.id[:], binary.BigEndian.AppendUint64(nil, w.at))
}

// listedPacks returns the IDs of the packs tx's file lists.
func listedPacks(tx *bolt.Tx) map[packID]bool {
	out := map[packID]bool{}
	if b := tx.Bucket(bucketPacks); b != nil {
		b.ForEach(func(k, _ []byte) error {
			if len(k) == packIDLen {
				out[packID(k)] = true
			}
			return nil
		})
	}
	return out
}

// removeUnlisted deletes the pack files in dir that keep does not list:
// those of a file a compaction replaced, and those a writer created and
// then crashed before committing. Call it only where no process can read
// a file that lists them (compact.go).
func removeUnlisted(dir string, keep map[packID]bool) (int, error) {
	ents, err := os.ReadDir(dir)
	if errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	removed := 0
	var errs []error
	for _, e := range ents {
		name, ok := strings.CutSuffix(e.Name(), packExt)
		if !ok || len(name) != 2*packIDLen {
			continue
		}
		b, err := hex.DecodeString(name)
		if err != nil || keep[packID(b)] {
			continue
		}
		if err := os.Remove(filepath.Join(dir, e.Name())); err != nil {
			errs = append(errs, err)
			continue
		}
		removed++
	}
	if removed > 0 {
		errs = append(errs, syncDir(dir))
	}
	return removed, errors.Join(errs...)
}

// syncDir syncs the directory dir, so that a file created or renamed in it
// is there after a crash.
func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	defer d.Close()
	return d.Sync()
}

// packBlocks returns the bytes on disk of the pack files in dir.
func packBlocks(dir string) int64 {
	ents, err := os.ReadDir(dir)
	if err != nil {
		return 0
	}
	var n int64
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), packExt) {
			n += blocks(filepath.Join(dir, e.Name()))
		}
	}
	return n
}
