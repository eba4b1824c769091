package boltstore

// Packs: where the message records of a format 3 file live.
//
// A bbolt leaf page holds whole values, so the tails of pages that the
// next record does not fit in are lost, and compressed records of a few
// KiB lose much of the store that way. So records are appended end to end
// to pack files beside the bbolt file, and the messages bucket holds a
// locator for each (pack, offset, length); the bbolt file keeps small
// values only, in small pages.
//
// A pack is DIR/NAME.packs/ID.pack (packDir), its ID random so that a
// compaction's new packs never meet the old ones. The packs bucket lists a
// file's packs with the length of each that committed transactions wrote;
// meta "pack" names the one new records go to, until maxPackSize.
//
// A batch, within its write transaction (whose lock keeps other writers
// out), writes its records at the pack's committed length, syncs the pack,
// and puts the locators and the new length in the transaction, which
// commits. (A Store that puts large batches writes them to a pack of its
// own before the transaction instead: ownpack.go.) A crash before the
// commit leaves bytes past the committed length, which nothing references
// and the next batch writes over. Bytes below it never change, so readers
// need no lock of their own; they read within a read transaction of the
// file, whose shared lock keeps a compaction from deleting the pack
// meanwhile.

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
	// locatorTag is the first byte of a locator. Records begin with their
	// version (1 or 2), so a format 2 file's inline records are told apart.
	locatorTag = 0x80
	// packIDLen is the length of a pack's ID.
	packIDLen = 8
	// packExt ends a pack's file name.
	packExt = ".pack"
)

// maxPackSize is the size at which a writer starts a new pack: small
// enough for a backup to copy one quickly. (A variable for tests.)
var maxPackSize uint64 = 1 << 30

var (
	bucketPacks = []byte("packs")
	keyPack     = []byte("pack")
)

type packID [packIDLen]byte

func (id packID) String() string { return hex.EncodeToString(id[:]) }

func newPackID() packID {
	var id packID
	rand.Read(id[:])
	return id
}

// packDir is the directory of the packs of the bbolt file at path.
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

// packs keeps a Store's pack files open once used; forget closes those a
// replaced file listed.
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

// generation closes the packs of a file a compaction has replaced: they
// are deleted, and would hold their space while open.
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

// read returns the record l locates, reading it in tx: the pack must be
// one tx's file lists, and the record within its committed length.
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

// packWriter appends one write transaction's records to the current pack,
// and commits their length in that transaction.
type packWriter struct {
	p    *packs
	tx   *bolt.Tx
	id   packID
	at   uint64 // the committed length, where the next record goes
	f    *os.File
	n    uint64 // bytes written at at
	open bool
	// noSync leaves syncing to the caller (a compaction syncs its copy once).
	noSync bool
}

func (p *packs) writer(tx *bolt.Tx) *packWriter {
	return &packWriter{p: p, tx: tx}
}

// add writes rec to the pack and returns its locator; it is durable
// only after commit.
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

// next commits what was written to the pack in use, and moves to the
// current pack, or a new one when need bytes would take it past maxPackSize.
func (w *packWriter) next(need uint64) error {
	if w.open {
		if err := w.commit(); err != nil {
			return err
		}
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

// commit syncs the pack in use and records its new length in the transaction.
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
// those of a replaced file, and those of writers that crashed before
// committing. Call it only where no process can read a file that lists them.
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
