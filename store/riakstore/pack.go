package riakstore

import (
	"bytes"
	"compress/flate"
	"encoding/binary"
	"fmt"
	"io"
	"slices"
	"strconv"
	"strings"
	"sync"

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
// # Pack value, version 1
//
//	offset  size     field
//	0       1        pack format version (1)
//	1       1        compression of the rest: 0 none, 1 DEFLATE (RFC 1951)
//	2       uvarint  number of entries
//	        then per entry, in sequence order:
//	        2        sequence number, big-endian
//	        1        kind: 0 the raw bytes are in the record, 1 they are in
//	                 the large bucket under the call number
//	        uvarint  length of the record
//	        n        message record (store/internal/record)
//
// Packs are compressed because Riak's cost per byte is high (the leveled
// backend compresses what it stores, on every replica): DEFLATE at its
// fastest level keeps 41% of the sample's bytes and halves the node's CPU
// time per pack written. A large message's object is the same two-byte
// header (version 1, compression) followed by its record.
//
// The key of a pack is "VERSION.RUN.PACK" in decimal, PACK being the
// sequence number divided by 16: the pack of a call number follows from the
// number alone. Each entry's Message-ID is in the pack's secondary index
// msgid_bin (see msgIDKey).

const (
	packShift    = 4
	packVersion  = 1
	largeMessage = 64 << 10
	indexMsgID   = "msgid_bin"
)

const (
	kindInline = 0
	kindLarge  = 1
)

const (
	compressNone    = 0
	compressDeflate = 1
	// maxInflated bounds what a value may decompress to: a pack holds at
	// most 16 messages of at most largeMessage bytes inline, and a large
	// message object one message (the largest the importer reads is 64 MiB).
	maxInflated = 256 << 20
)

var deflaters = sync.Pool{New: func() any {
	w, _ := flate.NewWriter(nil, flate.BestSpeed)
	return w
}}

// compress returns a value of the two-byte header and body, deflated
// when that saves at least a tenth.
func compress(body []byte) []byte {
	var out bytes.Buffer
	out.Grow(2 + len(body)/2)
	out.Write([]byte{packVersion, compressDeflate})
	w := deflaters.Get().(*flate.Writer)
	w.Reset(&out)
	w.Write(body)
	w.Close()
	deflaters.Put(w)
	if out.Len()-2 < len(body)-len(body)/10 {
		return out.Bytes()
	}
	return append([]byte{packVersion, compressNone}, body...)
}

// decompress reads the two-byte header of a value and returns its body.
func decompress(v []byte, what string) ([]byte, error) {
	if len(v) < 2 || v[0] != packVersion {
		ver := -1
		if len(v) > 0 {
			ver = int(v[0])
		}
		return nil, fmt.Errorf("%w: %s format version %d, this program reads version %d (was the archive written by a newer chibrary?)", record.ErrCorrupt, what, ver, packVersion)
	}
	switch v[1] {
	case compressNone:
		return v[2:], nil
	case compressDeflate:
		br := bytes.NewReader(v[2:]) // an io.ByteReader: flate reads no further than its end
		r := flate.NewReader(br)
		defer r.Close()
		body, err := io.ReadAll(io.LimitReader(r, maxInflated+1))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", record.ErrCorrupt, what, err)
		}
		if br.Len() != 0 {
			return nil, fmt.Errorf("%w: %s: %d bytes after the compressed data", record.ErrCorrupt, what, br.Len())
		}
		if len(body) > maxInflated {
			return nil, fmt.Errorf("%w: %s inflates to more than %d bytes", record.ErrCorrupt, what, maxInflated)
		}
		return body, nil
	}
	return nil, fmt.Errorf("%w: %s: compression %d", record.ErrCorrupt, what, v[1])
}

// encodeLarge returns the value of a large message's object.
func encodeLarge(rec record.Message) []byte {
	return compress(record.AppendMessage(make([]byte, 0, record.Size(rec)), rec))
}

// decodeLarge reads a large message's object.
func decodeLarge(v []byte) (record.Message, error) {
	b, err := decompress(v, "large message")
	if err != nil {
		return record.Message{}, err
	}
	return record.DecodeMessage(b)
}

type packEntry struct {
	seq   uint16
	large bool
	rec   record.Message // Raw is empty when large
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
	size := binary.MaxVarintLen64
	for _, e := range entries {
		size += 3 + binary.MaxVarintLen64 + record.Size(e.rec)
	}
	b := make([]byte, 0, size)
	b = binary.AppendUvarint(b, uint64(len(entries)))
	for _, e := range entries {
		b = binary.BigEndian.AppendUint16(b, e.seq)
		kind := byte(kindInline)
		if e.large {
			kind = kindLarge
		}
		b = append(b, kind)
		b = binary.AppendUvarint(b, uint64(record.Size(e.rec)))
		b = record.AppendMessage(b, e.rec)
	}
	return compress(b)
}

// decodePack reads a pack value. Records alias the value, or its
// decompressed copy.
func decodePack(v []byte) ([]packEntry, error) {
	b, err := decompress(v, "pack")
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
		e := packEntry{seq: binary.BigEndian.Uint16(rest), large: rest[2] == kindLarge}
		if rest[2] > kindLarge {
			return nil, fmt.Errorf("%w: pack: entry kind %d", record.ErrCorrupt, rest[2])
		}
		size, k := binary.Uvarint(rest[3:])
		if k <= 0 || size > uint64(len(rest)-3-k) {
			return nil, fmt.Errorf("%w: pack: bad record length", record.ErrCorrupt)
		}
		rec, err := record.DecodeMessage(rest[3+k : 3+k+int(size)])
		if err != nil {
			return nil, fmt.Errorf("pack entry of sequence %d: %w", e.seq, err)
		}
		e.rec = rec
		entries = append(entries, e)
		rest = rest[3+k+int(size):]
	}
	if len(rest) != 0 {
		return nil, fmt.Errorf("%w: pack: %d bytes after the last entry", record.ErrCorrupt, len(rest))
	}
	return entries, nil
}

// mergePack reads the siblings of a pack into one map by sequence number.
// Siblings come from writes that did not see each other (two batches of
// one process sharing a pack, written at once; a replica that was behind);
// their entries are united. Two entries for one sequence number must be
// one message: different ones are a conflict (errConflict) that no reader
// resolves by choosing.
func mergePack(values []*riak.Object) (map[uint16]packEntry, error) {
	out := make(map[uint16]packEntry)
	for _, v := range values {
		entries, err := decodePack(v.Value)
		if err != nil {
			return nil, err
		}
		for _, e := range entries {
			old, ok := out[e.seq]
			if !ok {
				out[e.seq] = e
				continue
			}
			if old.rec.Digest != e.rec.Digest || old.large != e.large || !bytes.Equal(old.rec.Raw, e.rec.Raw) {
				return nil, fmt.Errorf("%w: sequence %d holds two messages (%d and %d bytes, digests %.16s… and %.16s…)", errConflict, e.seq, len(old.rec.Raw), len(e.rec.Raw), old.rec.Digest, e.rec.Digest)
			}
			if e.rec.Added.Before(old.rec.Added) {
				old.rec.Added = e.rec.Added // when it was first stored
				out[e.seq] = old
			}
		}
	}
	return out, nil
}

// packObject returns the Riak object of a pack holding entries, with the
// Message-ID index.
func packObject(entries map[uint16]packEntry) *riak.Object {
	sorted := make([]packEntry, 0, len(entries))
	for _, e := range entries {
		sorted = append(sorted, e)
	}
	slices.SortFunc(sorted, func(a, b packEntry) int { return int(a.seq) - int(b.seq) })
	obj := &riak.Object{ContentType: "application/octet-stream", Value: encodePack(sorted)}
	seen := make(map[string]bool)
	for _, e := range sorted {
		if e.rec.MessageID == "" {
			continue
		}
		k := msgIDKey(e.rec.MessageID)
		if !seen[k] {
			seen[k] = true
			obj.AddToIndex(indexMsgID, k)
		}
	}
	return obj
}
