package pisource

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"github.com/klauspost/compress/zlib"
	"io"
	"os"
	"path/filepath"
	"slices"
	"strings"
)

// Reading messages straight from an epoch's packs, in this process.
//
// git cat-file, asked for public-inbox's messages in the order of the
// history, inflates most of them twice: git fast-import (public-inbox's
// writer) stores each message as a delta on the one before, and git's
// delta base cache keeps the bases it used, never the object it hands
// out, so the next message's base is rebuilt from its own base. packs
// keeps the objects it built, bases and results alike, in a cache bounded
// in bytes, so that a chain read in order is inflated once.
//
// The formats, from git's Documentation/gitformat-pack.txt
// ("pack-*.pack files have the following format", "Version 2 pack-*.idx
// files support packs larger than 4 GiB"):
//
//	idx v2:  "\377tOc" 00 00 00 02, fanout[256] (uint32, big-endian: the
//	         number of names whose first byte is <= i), names[N] (sorted),
//	         crc32[N], offset32[N] (the high bit set: an index into
//	         offset64), offset64[...], the pack's checksum, its own
//	         checksum
//	pack:    "PACK" version(2 or 3) N, then N entries, then a checksum
//	entry:   a header (type in bits 4-6 of the first byte, the size in
//	         its low 4 bits then 7 bits a byte while the high bit is set),
//	         for OFS_DELTA the base's distance back (7 bits a byte, plus
//	         one for each byte after the first), for REF_DELTA the base's
//	         name, then the data, zlib-compressed (for a delta: the
//	         delta, whose size is the header's)
//	delta:   the base's size and the result's (7 bits a byte, low bits
//	         first), then instructions: 1xxxxxxx copies from the base
//	         (offset bytes per bits 0-3, size bytes per bits 4-6, a size
//	         of 0 meaning 0x10000), 0xxxxxxx (not 0) inserts that many
//	         bytes that follow.
//
// Anything else (a loose object, an object of an alternate, a pack
// without its index, a version not above, an object larger than the
// limit) is not found here, and the caller asks git cat-file instead.

// Object types of a pack entry.
const (
	objCommit   = 1
	objTree     = 2
	objBlob     = 3
	objTag      = 4
	objOfsDelta = 6
	objRefDelta = 7
)

// errNotHere: packs cannot give the object (see above): ask git.
var errNotHere = errors.New("pisource: not in a pack this reader reads")

// ErrBadPack: a pack or its index is not as gitformat-pack describes.
var ErrBadPack = errors.New("pisource: malformed pack")

// maxChain bounds the deltas followed to build one object (git's own
// packs have chains of at most 50; --depth allows up to 4095).
const maxChain = 4096

// packFile is one pack and its index, both in memory (mapped).
type packFile struct {
	name    string
	idx     []byte
	pack    []byte
	hashLen int
	n       int
	names   int // offset of the names in idx
	off32   int
	off64   int
	unmap   func()
}

// parseIdx checks idx (a version 2 index of pack, for names of hashLen
// bytes) and returns the pack with its tables located.
func parseIdx(idx, pack []byte, hashLen int) (*packFile, error) {
	if len(idx) < 8+256*4 || !bytes.Equal(idx[:8], []byte{0xff, 't', 'O', 'c', 0, 0, 0, 2}) {
		return nil, fmt.Errorf("%w: not a version 2 index", ErrBadPack)
	}
	p := &packFile{idx: idx, pack: pack, hashLen: hashLen}
	prev := uint32(0)
	for i := range 256 {
		v := binary.BigEndian.Uint32(idx[8+4*i:])
		if v < prev {
			return nil, fmt.Errorf("%w: index fanout decreases", ErrBadPack)
		}
		prev = v
	}
	n := int64(prev)
	p.names = 8 + 256*4
	// names, crc32s, offsets, then two checksums: at least this long
	// (the 64-bit offsets are checked when read).
	if int64(len(idx)) < int64(p.names)+n*int64(hashLen+8)+2*int64(hashLen) {
		return nil, fmt.Errorf("%w: index shorter than its %d names", ErrBadPack, n)
	}
	p.n = int(n)
	p.off32 = p.names + p.n*hashLen + p.n*4
	p.off64 = p.off32 + p.n*4
	if len(pack) < 12+hashLen || string(pack[:4]) != "PACK" {
		return nil, fmt.Errorf("%w: not a pack", ErrBadPack)
	}
	if v := binary.BigEndian.Uint32(pack[4:]); v != 2 && v != 3 {
		return nil, fmt.Errorf("%w: pack version %d", ErrBadPack, v)
	}
	if c := binary.BigEndian.Uint32(pack[8:]); int64(c) != n {
		return nil, fmt.Errorf("%w: pack of %d objects, index of %d", ErrBadPack, c, n)
	}
	return p, nil
}

// lookup finds name (hashLen bytes) and returns its offset in the pack.
func (p *packFile) lookup(name []byte) (int64, bool, error) {
	if len(name) != p.hashLen {
		return 0, false, nil
	}
	lo := 0
	if name[0] > 0 {
		lo = int(binary.BigEndian.Uint32(p.idx[8+4*(int(name[0])-1):]))
	}
	hi := int(binary.BigEndian.Uint32(p.idx[8+4*int(name[0]):]))
	for lo < hi {
		mid := int(uint(lo+hi) >> 1)
		at := p.names + mid*p.hashLen
		switch c := bytes.Compare(p.idx[at:at+p.hashLen], name); {
		case c == 0:
			off, err := p.offset(mid)
			return off, err == nil, err
		case c < 0:
			lo = mid + 1
		default:
			hi = mid
		}
	}
	return 0, false, nil
}

// offset is the pack offset of the i-th name.
func (p *packFile) offset(i int) (int64, error) {
	v := binary.BigEndian.Uint32(p.idx[p.off32+4*i:])
	if v&0x80000000 == 0 {
		return int64(v), nil
	}
	at := int64(p.off64) + 8*int64(v&0x7fffffff)
	if at+8 > int64(len(p.idx)-2*p.hashLen) {
		return 0, fmt.Errorf("%w: 64-bit offset %d beyond the index", ErrBadPack, v&0x7fffffff)
	}
	off := binary.BigEndian.Uint64(p.idx[at:])
	if off > uint64(len(p.pack)) {
		return 0, fmt.Errorf("%w: offset %d beyond the pack", ErrBadPack, off)
	}
	return int64(off), nil
}

// entryHeader reads the header of the entry at off: its type, its size
// (of the object, or of the delta), where its data starts, and for a
// delta its base (an offset, or a name for REF_DELTA).
type entryHeader struct {
	typ     int
	size    int64
	data    int64
	baseOff int64
	baseRef []byte
}

func (p *packFile) header(off int64) (entryHeader, error) {
	end := int64(len(p.pack) - p.hashLen) // the checksum ends the pack
	bad := func(why string) (entryHeader, error) {
		return entryHeader{}, fmt.Errorf("%w: entry at %d: %s", ErrBadPack, off, why)
	}
	if off < 12 || off >= end {
		return bad("outside the pack")
	}
	pos := off
	c := p.pack[pos]
	pos++
	h := entryHeader{typ: int(c>>4) & 7, size: int64(c & 15)}
	for shift := 4; c&0x80 != 0; shift += 7 {
		if pos >= end || shift > 56 {
			return bad("size runs on")
		}
		c = p.pack[pos]
		pos++
		h.size |= int64(c&0x7f) << shift
	}
	switch h.typ {
	case objCommit, objTree, objBlob, objTag:
	case objOfsDelta:
		if pos >= end {
			return bad("truncated")
		}
		c = p.pack[pos]
		pos++
		back := int64(c & 0x7f)
		for c&0x80 != 0 {
			if pos >= end || back >= 1<<55 {
				return bad("base offset runs on")
			}
			c = p.pack[pos]
			pos++
			back = (back+1)<<7 | int64(c&0x7f)
		}
		if back <= 0 || back > off-12 {
			return bad("base outside the pack")
		}
		h.baseOff = off - back
	case objRefDelta:
		if pos+int64(p.hashLen) > end {
			return bad("truncated")
		}
		h.baseRef = p.pack[pos : pos+int64(p.hashLen)]
		pos += int64(p.hashLen)
	default:
		return bad(fmt.Sprintf("type %d", h.typ))
	}
	if h.size < 0 {
		return bad("size")
	}
	h.data = pos
	return h, nil
}

// packs reads objects from the packs of one git directory.
type packs struct {
	dir   string // the git directory, for its loose objects
	files []*packFile
	limit int64 // no object larger is built here
	cache baseCache
	zr    io.ReadCloser // reused: zlib.Resetter
	// scratch holds the delta being applied (not kept)
	scratch []byte
	br      bytes.Reader
}

// openPacks maps every pack of dir that has a version 2 index; a pack
// that cannot be read is left to git (logged by the caller: err lists
// them). limit bounds each object built here, cacheBytes the cache.
func openPacks(dir string, hashLen int, limit, cacheBytes int64) (*packs, error) {
	ps := &packs{dir: dir, limit: limit, cache: baseCache{max: cacheBytes}}
	idxs, err := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.idx"))
	if err != nil {
		return ps, err
	}
	var errs []error
	for _, name := range idxs {
		p, err := openPack(name, hashLen)
		if err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", filepath.Base(name), err))
			continue
		}
		ps.files = append(ps.files, p)
	}
	return ps, errors.Join(errs...)
}

func openPack(idxName string, hashLen int) (*packFile, error) {
	idx, unmapIdx, err := mapFile(idxName)
	if err != nil {
		return nil, err
	}
	pack, unmapPack, err := mapFile(strings.TrimSuffix(idxName, ".idx") + ".pack")
	if err != nil {
		unmapIdx()
		return nil, err
	}
	p, err := parseIdx(idx, pack, hashLen)
	if err != nil {
		unmapPack()
		unmapIdx()
		return nil, err
	}
	p.name = filepath.Base(idxName)
	p.unmap = func() { unmapPack(); unmapIdx() }
	return p, nil
}

func (ps *packs) close() {
	for _, p := range ps.files {
		if p.unmap != nil {
			p.unmap()
		}
	}
	ps.files = nil
	ps.cache.clear()
}

// find looks name up in every pack.
func (ps *packs) find(name []byte) (*packFile, int64, error) {
	for _, p := range ps.files {
		off, ok, err := p.lookup(name)
		if err != nil {
			return nil, 0, err
		}
		if ok {
			return p, off, nil
		}
	}
	return nil, 0, errNotHere
}

// blob returns the blob named oid (hex), built from its delta chain.
// The cache may keep the slice to build the next object: the caller
// reads it and never changes it. errNotHere: ask git.
func (ps *packs) blob(oid string) ([]byte, error) {
	name, err := hex.DecodeString(oid)
	if err != nil {
		return nil, errNotHere
	}
	p, off, err := ps.find(name)
	if err != nil {
		return nil, err
	}
	typ, data, err := ps.object(p, off, true)
	if err != nil {
		return nil, err
	}
	if typ != objBlob {
		return nil, fmt.Errorf("%w: %s is not a blob (type %d)", ErrBadPack, oid, typ)
	}
	return data, nil
}

// link is one delta of a chain being built.
type link struct {
	p   *packFile
	off int64
	h   entryHeader
}

// object builds the object at off of p: it follows the deltas down to a
// cached object or a whole one, then applies them back up, caching each
// object it builds (the result too, if keep: it is read only).
func (ps *packs) object(p *packFile, off int64, keep bool) (int, []byte, error) {
	var chain []link
	var typ int
	var base []byte
	for {
		if t, b, ok := ps.cache.get(p, off); ok {
			typ, base = t, b
			break
		}
		h, err := p.header(off)
		if err != nil {
			return 0, nil, err
		}
		if h.size > ps.limit {
			return 0, nil, errNotHere // git says how large, or reads it
		}
		if h.typ != objOfsDelta && h.typ != objRefDelta {
			b, err := ps.inflate(p, h, nil)
			if err != nil {
				return 0, nil, err
			}
			typ, base = h.typ, b
			if keep || len(chain) > 0 {
				ps.cache.put(p, off, typ, b)
			}
			break
		}
		if len(chain) >= maxChain {
			return 0, nil, errNotHere
		}
		chain = append(chain, link{p, off, h})
		if h.typ == objOfsDelta {
			off = h.baseOff
			continue
		}
		bp, boff, err := ps.find(h.baseRef)
		if err != nil {
			return 0, nil, err
		}
		p, off = bp, boff
	}
	for i := len(chain) - 1; i >= 0; i-- {
		l := chain[i]
		// A delta is not kept: it is inflated into the same buffer each
		// time (unless large: the buffer would stay large).
		var buf []byte
		if l.h.size <= maxScratch {
			if int64(cap(ps.scratch)) < l.h.size {
				ps.scratch = make([]byte, maxScratch)
			}
			buf = ps.scratch[:l.h.size]
		}
		delta, err := ps.inflate(l.p, l.h, buf)
		if err != nil {
			return 0, nil, err
		}
		out, err := applyDelta(base, delta, ps.limit)
		if err != nil {
			return 0, nil, fmt.Errorf("%s, entry at %d: %w", l.p.name, l.off, err)
		}
		if keep || i > 0 {
			ps.cache.put(l.p, l.off, typ, out)
		}
		base = out
	}
	// The cache keeps base too: the next message of public-inbox's packs
	// is a delta on it.
	return typ, base, nil
}

// maxScratch is the largest delta inflated into packs.scratch.
const maxScratch = 1 << 20

// inflate reads the zlib data of the entry h, exactly h.size bytes,
// into out (h.size long), or a new slice if out is nil.
func (ps *packs) inflate(p *packFile, h entryHeader, out []byte) ([]byte, error) {
	ps.br.Reset(p.pack[h.data : len(p.pack)-p.hashLen])
	if ps.zr == nil {
		zr, err := zlib.NewReader(&ps.br)
		if err != nil {
			return nil, fmt.Errorf("%w: entry at %d: %v", ErrBadPack, h.data, err)
		}
		ps.zr = zr
	} else if err := ps.zr.(zlib.Resetter).Reset(&ps.br, nil); err != nil {
		return nil, fmt.Errorf("%w: entry at %d: %v", ErrBadPack, h.data, err)
	}
	if out == nil {
		out = make([]byte, h.size)
	}
	if _, err := io.ReadFull(ps.zr, out); err != nil {
		return nil, fmt.Errorf("%w: entry at %d: %v", ErrBadPack, h.data, err)
	}
	// The stream ends there, and its checksum (of what was inflated)
	// holds, as git checks (Z_STREAM_END).
	var one [1]byte
	if n, err := ps.zr.Read(one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("longer than its header says")
		}
		return nil, fmt.Errorf("%w: entry at %d: %v", ErrBadPack, h.data, err)
	}
	return out, nil
}

// ErrBadDelta: a delta that does not apply to its base.
var ErrBadDelta = errors.New("pisource: malformed delta")

// applyDelta applies delta (gitformat-pack, "Deltified representation")
// to base; the result is at most limit bytes.
func applyDelta(base, delta []byte, limit int64) ([]byte, error) {
	pos := 0
	varint := func() (int64, bool) {
		var v int64
		for shift := 0; pos < len(delta) && shift < 63; shift += 7 {
			c := delta[pos]
			pos++
			v |= int64(c&0x7f) << shift
			if c&0x80 == 0 {
				return v, v >= 0
			}
		}
		return 0, false
	}
	srcSize, ok := varint()
	if !ok || srcSize != int64(len(base)) {
		return nil, fmt.Errorf("%w: base of %d bytes, the delta's is %d", ErrBadDelta, len(base), srcSize)
	}
	dstSize, ok := varint()
	if !ok {
		return nil, fmt.Errorf("%w: no result size", ErrBadDelta)
	}
	if dstSize > limit {
		return nil, errNotHere
	}
	out := make([]byte, 0, dstSize)
	for pos < len(delta) {
		c := delta[pos]
		pos++
		switch {
		case c&0x80 != 0:
			var off, size int64
			for i := range 4 {
				if c&(1<<i) != 0 {
					if pos >= len(delta) {
						return nil, fmt.Errorf("%w: truncated copy", ErrBadDelta)
					}
					off |= int64(delta[pos]) << (8 * i)
					pos++
				}
			}
			for i := range 3 {
				if c&(0x10<<i) != 0 {
					if pos >= len(delta) {
						return nil, fmt.Errorf("%w: truncated copy", ErrBadDelta)
					}
					size |= int64(delta[pos]) << (8 * i)
					pos++
				}
			}
			if size == 0 {
				size = 0x10000
			}
			if off+size > int64(len(base)) || int64(len(out))+size > dstSize {
				return nil, fmt.Errorf("%w: copy of %d bytes at %d out of bounds", ErrBadDelta, size, off)
			}
			out = append(out, base[off:off+size]...)
		case c != 0:
			n := int(c)
			if pos+n > len(delta) || int64(len(out)+n) > dstSize {
				return nil, fmt.Errorf("%w: insert of %d bytes out of bounds", ErrBadDelta, n)
			}
			out = append(out, delta[pos:pos+n]...)
			pos += n
		default:
			return nil, fmt.Errorf("%w: instruction 0", ErrBadDelta)
		}
	}
	if int64(len(out)) != dstSize {
		return nil, fmt.Errorf("%w: result of %d bytes, the delta's is %d", ErrBadDelta, len(out), dstSize)
	}
	return out, nil
}

// baseCache keeps the objects built last, up to max bytes, the oldest
// going first: a chain read in order needs only the last few.
type baseCache struct {
	max   int64
	size  int64
	byKey map[cacheKey]cached
	order []cacheKey // oldest first
}

type cacheKey struct {
	p   *packFile
	off int64
}

type cached struct {
	typ  int
	data []byte
}

func (c *baseCache) get(p *packFile, off int64) (int, []byte, bool) {
	e, ok := c.byKey[cacheKey{p, off}]
	return e.typ, e.data, ok
}

func (c *baseCache) put(p *packFile, off int64, typ int, data []byte) {
	k := cacheKey{p, off}
	if _, ok := c.byKey[k]; ok || int64(len(data)) > c.max {
		return
	}
	if c.byKey == nil {
		c.byKey = map[cacheKey]cached{}
	}
	c.byKey[k] = cached{typ, data}
	c.order = append(c.order, k)
	c.size += int64(len(data))
	drop := 0
	for c.size > c.max {
		old := c.order[drop]
		c.size -= int64(len(c.byKey[old].data))
		delete(c.byKey, old)
		drop++
	}
	if drop > 0 {
		// Move the rest down once it is half the slice, not on every drop.
		c.order = c.order[drop:]
		if cap(c.order) > 2*len(c.order)+64 {
			c.order = slices.Clone(c.order)
		}
	}
}

func (c *baseCache) clear() {
	c.byKey, c.order, c.size = nil, nil, 0
}

// mapFile maps name into memory read-only; unmap releases it. A pack
// is never changed in place (git writes a new one and renames it, and
// removes old ones), so the mapping stays valid while the file is open.
func mapFile(name string) (b []byte, unmap func(), err error) {
	f, err := os.Open(name)
	if err != nil {
		return nil, nil, err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return nil, nil, err
	}
	return mapOpen(f, fi.Size())
}
