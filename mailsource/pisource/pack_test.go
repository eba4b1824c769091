package pisource

import (
	"bytes"
	"crypto/sha1"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"testing"
)

// The packs of testdata/pack hold the same six blobs (a message and five
// differing from it in a few bytes): fi as git fast-import (public-inbox's
// writer) writes them, each a delta on the one before (chains of 1 to 5),
// ofs and ref as git pack-objects does, deltas on the first, by offset
// (OFS_DELTA) and by name (REF_DELTA).
var testPacks = []string{"fi", "ofs", "ref"}

func readTestPack(t testing.TB, name string) (idx, pack []byte) {
	t.Helper()
	idx, err := os.ReadFile(filepath.Join("testdata", "pack", name+".idx"))
	if err != nil {
		t.Fatal(err)
	}
	pack, err = os.ReadFile(filepath.Join("testdata", "pack", name+".pack"))
	if err != nil {
		t.Fatal(err)
	}
	return idx, pack
}

// gitName is the name git gives a blob (SHA-1).
func gitName(data []byte) []byte {
	h := sha1.New()
	fmt.Fprintf(h, "blob %d\x00", len(data))
	h.Write(data)
	return h.Sum(nil)
}

// names lists the names of an index.
func (p *packFile) allNames() [][]byte {
	var ns [][]byte
	for i := range p.n {
		at := p.names + i*p.hashLen
		ns = append(ns, p.idx[at:at+p.hashLen])
	}
	return ns
}

// TestPackBlobs reads every blob of the test packs, each in the order of
// the index and then again (from the cache), and checks that its bytes
// have its name.
func TestPackBlobs(t *testing.T) {
	for _, name := range testPacks {
		t.Run(name, func(t *testing.T) {
			idx, pack := readTestPack(t, name)
			p, err := parseIdx(idx, pack, sha1.Size)
			if err != nil {
				t.Fatal(err)
			}
			ps := &packs{files: []*packFile{p}, limit: 1 << 20, cache: baseCache{max: 1 << 20}}
			if p.n != 6 {
				t.Fatalf("%d objects, want 6", p.n)
			}
			for round := range 2 {
				for _, n := range p.allNames() {
					b, err := ps.blob(hex.EncodeToString(n))
					if err != nil {
						t.Fatalf("round %d: blob(%x): %v", round, n, err)
					}
					if got := gitName(b); !bytes.Equal(got, n) {
						t.Errorf("round %d: blob(%x) read %d bytes named %x", round, n, len(b), got)
					}
				}
			}
			// Not there, or not a name: git is asked.
			for _, oid := range []string{"0123456789012345678901234567890123456789", "xyz"} {
				if _, err := ps.blob(oid); !errors.Is(err, errNotHere) {
					t.Errorf("blob(%s) = %v, want errNotHere", oid, err)
				}
			}
			// Larger than the limit: git is asked.
			small := &packs{files: []*packFile{p}, limit: 100, cache: baseCache{max: 1 << 20}}
			if _, err := small.blob(hex.EncodeToString(p.allNames()[0])); !errors.Is(err, errNotHere) {
				t.Errorf("blob over the limit = %v, want errNotHere", err)
			}
		})
	}
}

// TestBadPacks: an index or pack cut short or changed is refused, or its
// objects are, with ErrBadPack or ErrBadDelta, never read wrong.
func TestBadPacks(t *testing.T) {
	idx, pack := readTestPack(t, "fi")
	cut := func(b []byte, n int) []byte { return bytes.Clone(b[:n]) }
	set := func(b []byte, at int, v byte) []byte { b = bytes.Clone(b); b[at] = v; return b }
	for _, tc := range []struct {
		name      string
		idx, pack []byte
	}{
		{"index cut", cut(idx, len(idx)/2), pack},
		{"index of version 1", set(idx, 7, 1), pack},
		{"fanout decreasing", set(idx, 8+4*10+3, 0xff), pack},
		{"not a pack", idx, set(pack, 0, 'X')},
		{"pack version 4", idx, set(pack, 7, 4)},
		{"pack count", idx, set(pack, 11, 7)},
	} {
		if _, err := parseIdx(tc.idx, tc.pack, sha1.Size); !errors.Is(err, ErrBadPack) {
			t.Errorf("%s: parseIdx = %v, want ErrBadPack", tc.name, err)
		}
	}
	p, err := parseIdx(idx, pack, sha1.Size)
	if err != nil {
		t.Fatal(err)
	}
	// Every byte of the entries changed in turn: each blob is read
	// with its own bytes, or refused.
	for at := 12; at < len(pack)-sha1.Size; at++ {
		bad := set(pack, at, pack[at]^0x5a)
		bp, err := parseIdx(idx, bad, sha1.Size)
		if err != nil {
			t.Fatal(err)
		}
		ps := &packs{files: []*packFile{bp}, limit: 1 << 20, cache: baseCache{max: 1 << 20}}
		for _, n := range p.allNames() {
			b, err := ps.blob(hex.EncodeToString(n))
			if err != nil {
				if !errors.Is(err, ErrBadPack) && !errors.Is(err, ErrBadDelta) && !errors.Is(err, errNotHere) {
					t.Errorf("byte %d changed: blob(%x) = %v, want ErrBadPack, ErrBadDelta or errNotHere", at, n, err)
				}
				continue
			}
			// zlib's checksum catches a changed byte of the data; a
			// changed size or base is caught by the delta's sizes or
			// the inflated length. What is read is never another blob.
			if got := gitName(b); !bytes.Equal(got, n) {
				t.Errorf("byte %d changed: blob(%x) read %d bytes named %x", at, n, len(b), got)
			}
		}
	}
}

// TestApplyDelta: deltas by hand, good and bad.
func TestApplyDelta(t *testing.T) {
	base := []byte("0123456789abcdef")
	for _, tc := range []struct {
		name  string
		delta []byte
		want  string
		err   error
	}{
		{"copy and insert", []byte{16, 7, 0x91, 2, 4, 3, 'x', 'y', 'z'}, "2345xyz", nil},
		{"copy all", []byte{16, 16, 0x90, 16}, "0123456789abcdef", nil},
		{"insert only", []byte{16, 2, 2, 'h', 'i'}, "hi", nil},
		{"empty result", []byte{16, 0}, "", nil},
		{"wrong base size", []byte{15, 2, 2, 'h', 'i'}, "", ErrBadDelta},
		{"no result size", []byte{16}, "", ErrBadDelta},
		{"result longer than said", []byte{16, 1, 2, 'h', 'i'}, "", ErrBadDelta},
		{"result shorter than said", []byte{16, 3, 2, 'h', 'i'}, "", ErrBadDelta},
		{"copy beyond the base", []byte{16, 4, 0x91, 14, 4}, "", ErrBadDelta},
		{"copy truncated", []byte{16, 4, 0x91, 14}, "", ErrBadDelta},
		{"insert truncated", []byte{16, 4, 4, 'a'}, "", ErrBadDelta},
		{"instruction 0", []byte{16, 4, 0}, "", ErrBadDelta},
		{"size runs on", []byte{0x90, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80, 0x80}, "", ErrBadDelta},
	} {
		got, err := applyDelta(base, tc.delta, 1<<20)
		if !errors.Is(err, tc.err) || err == nil && string(got) != tc.want {
			t.Errorf("%s: applyDelta = %q, %v; want %q, %v", tc.name, got, err, tc.want, tc.err)
		}
	}
	// A result larger than the limit is left to git.
	if _, err := applyDelta(base, []byte{16, 0x80, 0x80, 0x40}, 1<<19); !errors.Is(err, errNotHere) {
		t.Errorf("applyDelta of a 1 MiB result = %v, want errNotHere", err)
	}
}

// makeDelta writes a delta of target on base: a copy of their common
// prefix, then inserts.
func makeDelta(base, target []byte) []byte {
	var d []byte
	d = binary.AppendUvarint(d, uint64(len(base)))
	d = binary.AppendUvarint(d, uint64(len(target)))
	common := 0
	for common < len(base) && common < len(target) && base[common] == target[common] {
		common++
	}
	for off := 0; off < common; {
		n := min(common-off, 0xffff)
		d = append(d, 0x80|0x0f|0x30, byte(off), byte(off>>8), byte(off>>16), byte(off>>24), byte(n), byte(n>>8))
		off += n
	}
	for rest := target[common:]; len(rest) > 0; {
		n := min(len(rest), 127)
		d = append(d, byte(n))
		d = append(d, rest[:n]...)
		rest = rest[n:]
	}
	return d
}

// FuzzApplyDelta: any delta on any base is applied or refused without a
// panic, its result as long as it says; a delta made of base and target
// gives the target.
func FuzzApplyDelta(f *testing.F) {
	f.Add([]byte("0123456789abcdef"), []byte("0123xyz"), []byte{16, 7, 0x91, 2, 4, 3, 'x', 'y', 'z'})
	f.Add([]byte("From: a\n\nbody\n"), []byte("From: b\n\nbody\n"), []byte{14, 2, 2, 'h', 'i'})
	f.Fuzz(func(t *testing.T, base, target, delta []byte) {
		out, err := applyDelta(base, delta, 1<<20)
		if err == nil {
			// The sizes are LEB128, as binary.Uvarint reads them.
			_, n := binary.Uvarint(delta)
			size, _ := binary.Uvarint(delta[n:])
			if uint64(len(out)) != size {
				t.Fatalf("applyDelta: %d bytes, the delta says %d", len(out), size)
			}
		}
		got, err := applyDelta(base, makeDelta(base, target), 1<<20)
		if err != nil || !bytes.Equal(got, target) {
			t.Fatalf("applyDelta(base, makeDelta(base, %q)) = %q, %v", target, got, err)
		}
	})
}

// FuzzPack: any index and pack are read without a panic, within the
// limits.
func FuzzPack(f *testing.F) {
	for _, name := range testPacks {
		idx, pack := readTestPack(f, name)
		f.Add(idx, pack)
	}
	f.Fuzz(func(t *testing.T, idx, pack []byte) {
		p, err := parseIdx(idx, pack, sha1.Size)
		if err != nil {
			return
		}
		ps := &packs{files: []*packFile{p}, limit: 1 << 20, cache: baseCache{max: 1 << 16}}
		for i, n := range p.allNames() {
			if i >= 64 {
				break
			}
			// A pack can lie about names (git cat-file does not check
			// them either): only the bounds are checked.
			if b, err := ps.blob(hex.EncodeToString(n)); err == nil && int64(len(b)) > ps.limit {
				t.Fatalf("blob(%x): %d bytes, over the limit", n, len(b))
			}
		}
		if ps.cache.size > ps.cache.max {
			t.Fatalf("cache of %d bytes, over its %d", ps.cache.size, ps.cache.max)
		}
	})
}
