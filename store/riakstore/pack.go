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
// numbers of a run, so that a batch of consecutive numbers is written in a
// sixteenth of the requests, each a larger value (Riak's cost per request
// is mostly per request, not per byte: see the package doc). A message
// larger than largeMessage is kept in its own object, and its pack holds
// a stub (its record without the raw bytes).
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
//	        n        message record (store/internal/record), as the
//	                 store's Compressor made it: compressed on its own,
//	                 usually with the archive's dictionary; a large
//	                 message's stub is an uncompressed record without
//	                 raw bytes; a removed message's removal record
//	                 (record.MarshalRemoval), in place of the message
//
// Kind 2 came with removals: a program older than them refuses such a
// pack (an unknown kind is corrupt to it) rather than read the removed
// number as never stored.
//
// The pack itself is not compressed: each message is, so that one message
// is read and decompressed on its own. A large message's object is one
// byte, version 2, followed by its record.
//
// # Pack value, version 1
//
// Written before records were compressed, and read as it is:
//
//	offset  size     field
//	0       1        pack format version (1)
//	1       1        compression of the rest: 0 none, 1 DEFLATE (RFC 1951)
//	2                the entries, as in version 2 (every record
//	                 uncompressed, version 1), DEFLATE-compressed whole
//
// A large message's object of version 1 is the same two-byte header
// followed by its record (DEFLATE-compressed when the header says so).
//
// The key of a pack is "VERSION.RUN.PACK" in decimal, PACK being the
// sequence number divided by 16: the pack of a call number follows from the
// number alone. Each entry's Message-ID is in the pack's secondary index
// msgid_bin (see msgIDKey).

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
	// maxInflated bounds what a value may decompress to: a pack holds at
	// most 16 messages of at most largeMessage bytes inline, and a large
	// message object one message (the largest the importer reads is 64 MiB).
	maxInflated = 256 << 20
)

// body checks the header of a pack or large message value and returns
// what follows it, inflated if it is a deflated version 1 value.
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

// encodeLarge returns the value of a large message's object, given its
// record.
func encodeLarge(rec []byte) []byte {
	return append(append(make([]byte, 0, 1+len(rec)), packVersion), rec...)
}

// largeRecord returns the record of a large message's object.
func decodeLarge(v []byte) ([]byte, error) {
	_, b, err := body(v, "large message")
	return b, err
}

// packEntry is an entry of a pack: a message's record, still encoded,
// or the removal record of a message removed.
type packEntry struct {
	seq     uint16
	large   bool
	removed bool
	// rec is the message record; a large message's stub holds no raw
	// bytes; a removed message's entry holds its removal record. It may
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

// encodePack returns the value of a pack holding entries (sorted by
// sequence number).
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
// whose records alias the value (or its inflated copy). Records are
// decoded, and checked, only when read.
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

// decodeFunc decodes a message record and checks its digest (the
// store's Compressor, reading dictionaries from the archive).
type decodeFunc func(rec []byte) (record.Message, error)

// pack is a pack as read: its entries by sequence number, and the
// Message-ID index terms of its siblings.
type pack struct {
	entries map[uint16]packEntry
	terms   map[string]bool
	// stale is true when a sibling written without knowing of a removal
	// still holds the removed message's entry; suspect when an index
	// term may be a removed message's Message-ID. A writer of the pack
	// rewrites it without them (cleanTerms).
	stale, suspect bool
}

// mergePack reads the siblings of a pack into one. Siblings come from
// writes that did not see each other (two batches of one process sharing
// a pack, written at once; a replica that was behind); their entries are
// united, and so are their index terms. Two entries for one sequence
// number must be one message: two writers may have compressed it
// differently (another dictionary), so records that differ are decoded
// and their messages compared; different messages are a conflict
// (errConflict) that no reader resolves by choosing. Of two records of
// one message, the one that says it was added first is kept. A removal
// entry wins over a message entry of its sequence number, in whatever
// order the siblings come: a sibling written by a Put that read the pack
// before the removal never brings the message back.
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
					// Two removal records: there is one per number (created
					// once, in the consistent bucket type), so they differ
					// only if written otherwise; keep one of them whatever
					// the order.
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

// suspectTerms reports whether an index term of p may be the
// Message-ID of a message it holds the removal of: a term whose SHA-256
// (a hashed term's own) is a removal record's MessageIDSum. Whether
// another message of the pack has that Message-ID too takes decoding
// them: see cleanTerms.
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

// termSum returns the SHA-256 of the Message-ID an index term stands
// for (see msgIDKey).
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
// the Message-ID index terms (see msgIDKey) of its entries.
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
