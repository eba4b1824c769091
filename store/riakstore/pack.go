package riakstore

import (
	"bytes"
	"compress/flate"
	"crypto/sha256"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Messages are kept in packs: one Riak object per 16 consecutive sequence
// numbers of a run, because Riak's cost is mostly per request, not per
// byte. A message larger than largeMessage is kept in its own object, and
// its pack holds a stub (its record without the raw bytes).
//
// # Pack value, version 2
//
//	offset  size     field
//	0       1        pack format version (2)
//	1       uvarint  number of entries
//	        then per entry, in sequence order:
//	        2        sequence number, big-endian
//	        1        kind: 0 the raw bytes are in the record, 1 they are in
//	                 the large bucket under the call number, 2 the
//	                 message was removed (remove.go)
//	        uvarint  length of the record
//	        n        message record (store/internal/record), compressed
//	                 on its own; a large message's stub, uncompressed; or
//	                 a removal record (record.MarshalRemoval)
//
// Programs older than removals refuse kind 2 as corrupt rather than read
// the removed number as never stored. A large message's object is one
// byte, version 2, followed by its record.
//
// # Pack value, version 1
//
// Written before records were compressed, and still read: the version
// (1), a compression byte (0 none, 1 DEFLATE), then the entries as in
// version 2 with uncompressed records, compressed whole as that byte
// says. A large message's object of version 1 has the same header.
//
// The key of a pack is "VERSION.RUN.PACK" in decimal, PACK being the
// sequence number divided by 16, so a call number alone names its pack.
// Each entry's Message-ID is in the pack's secondary index msgid_bin (see
// msgIDKey).

const (
	packShift    = 4
	packVersion1 = 1
	packVersion  = 2
	largeMessage = 64 << 10
	indexMsgID   = "msgid_bin"
)

const (
	kindInline  = 0
	kindLarge   = 1
	kindRemoved = 2
)

// Compression of a version 1 value.
const (
	compressNone    = 0
	compressDeflate = 1
	// maxInflated bounds what a value may decompress to, above the
	// largest pack or large message.
	maxInflated = 256 << 20
)

// body checks the header of a pack or large message value and returns
// what follows it, inflated if need be.
func body(v []byte, what string) (version byte, b []byte, err error) {
	if len(v) == 0 || v[0] != packVersion && v[0] != packVersion1 {
		ver := -1
		if len(v) > 0 {
			ver = int(v[0])
		}
		return 0, nil, fmt.Errorf("%w: %s format version %d, this program reads versions %d and %d (was the archive written by a newer chibrary?)", record.ErrCorrupt, what, ver, packVersion1, packVersion)
	}
	if v[0] == packVersion {
		return packVersion, v[1:], nil
	}
	if len(v) < 2 {
		return 0, nil, fmt.Errorf("%w: %s of version 1 without its compression byte", record.ErrCorrupt, what)
	}
	switch v[1] {
	case compressNone:
		return packVersion1, v[2:], nil
	case compressDeflate:
		br := bytes.NewReader(v[2:]) // an io.ByteReader: flate reads no further than its end
		r := flate.NewReader(br)
		defer r.Close()
		b, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %s: %w", record.ErrCorrupt, what, err)
		}
		if br.Len() != 0 {
			return 0, nil, fmt.Errorf("%w: %s: %d bytes after the compressed data", record.ErrCorrupt, what, br.Len())
		}
		if len(b) > maxInflated {
			return 0, nil, fmt.Errorf("%w: %s inflates to more than %d bytes", record.ErrCorrupt, what, maxInflated)
		}
		return packVersion1, b, nil
	}
	return 0, nil, fmt.Errorf("%w: %s: compression %d", record.ErrCorrupt, what, v[1])
}

// encodeLarge returns the value of a large message's object.
func encodeLarge(rec []byte) []byte {
	return append(append(make([]byte, 0, 1+len(rec)), packVersion), rec...)
}

// largeRecord returns the record of a large message's object.
func decodeLarge(v []byte) ([]byte, error) {
	_, b, err := body(v, "large message")
	return b, err
}

// packEntry is an entry of a pack.
type packEntry struct {
	seq     uint16
	large   bool
	removed bool
	// rec is the encoded message record, stub or removal record. It may
	// alias the value it was read from.
	rec []byte
}

// packKey names the pack holding f.
func packKey(f callnumber.Fields) string {
	return strconv.Itoa(int(f.Version)) + "." + strconv.FormatUint(uint64(f.Run), 10) + "." + strconv.Itoa(int(f.Sequence>>packShift))
}

// parsePackKey reads a pack key back.
func parsePackKey(k string) (version uint8, run uint32, pack uint16, err error) {
	parts := strings.Split(k, ".")
	if len(parts) != 3 {
		return 0, 0, 0, fmt.Errorf("%w: pack key %q", record.ErrCorrupt, k)
	}
	v, err1 := strconv.ParseUint(parts[0], 10, 8)
	r, err2 := strconv.ParseUint(parts[1], 10, 32)
	p, err3 := strconv.ParseUint(parts[2], 10, 16)
	if err1 != nil || err2 != nil || err3 != nil || p >= 1<<(callnumber.SequenceBits-packShift) {
		return 0, 0, 0, fmt.Errorf("%w: pack key %q", record.ErrCorrupt, k)
	}
	return uint8(v), uint32(r), uint16(p), nil
}

// encodePack returns the value of a pack holding entries.
func encodePack(entries []packEntry) []byte {
	size := 1 + binary.MaxVarintLen64
	for _, e := range entries {
		size += 3 + binary.MaxVarintLen64 + len(e.rec)
	}
	b := make([]byte, 0, size)
	b = append(b, packVersion)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, e.seq)
		kind := byte(kindInline)
		switch {
		case e.removed:
			kind = kindRemoved
		case e.large:
			kind = kindLarge
		}
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(len(e.rec)))
		b = append(b, e.rec...)
	}
	return b
}

// decodePack reads a pack value of either version into its entries,
// whose records alias the value and are decoded only when read.
func decodePack(v []byte) ([]packEntry, error) {
	_, b, err := body(v, "pack")
	if err != nil {
		return nil, err
	}
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)) {
		return nil, fmt.Errorf("%w: pack: bad entry count", record.ErrCorrupt)
	}
	rest := b[k:]
	entries := make([]packEntry, 0, n)
	for range n {
		if len(rest) < 3 {
			return nil, fmt.Errorf("%w: pack: entry cut short", record.ErrCorrupt)
		}
		e := packEntry{seq: binary.BigEndian.Uint16(rest), large: rest[2] == kindLarge, removed: rest[2] == kindRemoved}
		if rest[2] > kindRemoved {
			return nil, fmt.Errorf("%w: pack: entry kind %d", record.ErrCorrupt, rest[2])
		}
		size, k := binary.Uvarint(rest[3:])
		if k <= 0 || size > uint64(len(rest)-3-k) {
			return nil, fmt.Errorf("%w: pack: bad record length", record.ErrCorrupt)
		}
		e.rec = rest[3+k : 3+k+int(size) : 3+k+int(size)]
		entries = append(entries, e)
		rest = rest[3+k+int(size):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: pack: %d bytes after the last entry", record.ErrCorrupt, len(rest))
	}
	return entries, nil
}

// decodeFunc decodes a message record and checks its digest.
type decodeFunc func(rec []byte) (record.Message, error)

// pack is a pack as read, its siblings merged.
type pack struct {
	entries map[uint16]packEntry
	terms   map[string]bool
	// stale: a sibling written without knowing of a removal still holds
	// the removed message; suspect: an index term may be a removed
	// message's Message-ID. A writer of the pack drops both (cleanTerms).
	stale, suspect bool
}

// mergePack unites the siblings of a pack. Two records of one sequence
// number may differ only in compression, so they are decoded and
// compared: different messages are a conflict (errConflict). A removal
// entry wins in any order, so a Put that read the pack before a removal
// never brings the message back.
func mergePack(values []*riak.Object, decode decodeFunc) (pack, error) {
	out := pack{entries: make(map[uint16]packEntry), terms: make(map[string]bool)}
	for _, v := range values {
		entries, err := decodePack(v.Value)
		if err != nil {
			return pack{}, err
		}
		for _, t := range v.Indexes[indexMsgID] {
			out.terms[t] = true
		}
		for _, e := range entries {
			old, ok := out.entries[e.seq]
			if !ok {
				out.entries[e.seq] = e
				continue
			}
			if bytes.Equal(old.rec, e.rec) && old.large == e.large && old.removed == e.removed {
				continue
			}
			if old.removed || e.removed {
				switch {
				case !old.removed:
					out.stale = true
					out.entries[e.seq] = e
				case !e.removed:
					out.stale = true
				case bytes.Compare(e.rec, old.rec) < 0:
					// Removal records are created once per number, so
					// these should not differ; keep one in any order.
					out.entries[e.seq] = e
				}
				continue
			}
			earlier, err := sameMessage(e.seq, old, e, decode)
			if err != nil {
				return pack{}, err
			}
			if earlier {
				out.entries[e.seq] = e
			}
		}
	}
	out.suspect = suspectTerms(out)
	return out, nil
}

// suspectTerms reports whether an index term of p may be the Message-ID
// of a removed message, its SHA-256 being a removal record's
// MessageIDSum. Another message may share it; cleanTerms decides.
func suspectTerms(p pack) bool {
	sums := make(map[[sha256.Size]byte]bool)
	for _, e := range p.entries {
		if !e.removed {
			continue
		}
		r, err := record.UnmarshalRemoval(0, e.rec)
		if err != nil {
			return true // an error where it is read; cleaned meanwhile
		}
		if r.MessageIDSum != ([sha256.Size]byte{}) {
			sums[r.MessageIDSum] = true
		}
	}
	if len(sums) == 0 {
		return false
	}
	for t := range p.terms {
		if sums[termSum(t)] {
			return true
		}
	}
	return false
}

// termSum returns the SHA-256 of the Message-ID an index term stands for.
func termSum(t string) [sha256.Size]byte {
	if len(t) == 1+sha256.Size && t[0] == 0xff {
		return [sha256.Size]byte([]byte(t[1:]))
	}
	return sha256.Sum256([]byte(t))
}

// sameMessage checks that two records of one sequence number hold one
// message, and reports whether b says it was added before a.
func sameMessage(seq uint16, a, b packEntry, decode decodeFunc) (bool, error) {
	ha, _, err := record.ParseHeader(a.rec)
	if err != nil {
		return false, fmt.Errorf("sequence %d: %w", seq, err)
	}
	hb, _, err := record.ParseHeader(b.rec)
	if err != nil {
		return false, fmt.Errorf("sequence %d: %w", seq, err)
	}
	same := ha.Digest == hb.Digest && a.large == b.large
	if same && !a.large {
		// One digest, and yet perhaps other bytes (CRLF for LF): compare.
		ma, err := decode(a.rec)
		if err != nil {
			return false, fmt.Errorf("sequence %d: %w", seq, err)
		}
		mb, err := decode(b.rec)
		if err != nil {
			return false, fmt.Errorf("sequence %d: %w", seq, err)
		}
		same = bytes.Equal(ma.Raw, mb.Raw)
	}
	if !same {
		return false, fmt.Errorf("%w: sequence %d holds two messages (digests %.16s… and %.16s…)", errConflict, seq, ha.Digest, hb.Digest)
	}
	return hb.Added.Before(ha.Added), nil
}

// packObject returns the Riak object of a pack holding entries, with
// their Message-ID index terms.
func packObject(entries map[uint16]packEntry, terms map[string]bool) *riak.Object {
	sorted := make([]packEntry, 0, len(entries))
	for _, e := range entries {
		sorted = append(sorted, e)
	}
	slices.SortFunc(sorted, func(a, b packEntry) int { return int(a.seq) - int(b.seq) })
	obj := &riak.Object{ContentType: "application/octet-stream", Value: encodePack(sorted)}
	for k := range terms {
		obj.AddToIndex(indexMsgID, k)
	}
	return obj
}
