// Package record encodes the values the store backends keep: a message
// record and the lease and binding records. The bolt and Riak backends
// share these layouts, so a message moved between them keeps its bytes.
// A message record has one of two layouts, told apart by its first byte;
// readers read both and refuse versions they do not know.
//
// # Message record, version 1: uncompressed
//
//	offset  size      field
//	0       1         format version (1)
//	1       32        digest: SHA-256 of the raw bytes, CRLF read as LF
//	33      8         added: Unix time in nanoseconds, big-endian int64
//	41      rest      the payload (below), as it is
//
// # Message record, version 2: compressed
//
//	offset  size      field
//	0       1         format version (2)
//	1       1         compression: 1 zstd, 2 zstd with a dictionary,
//	                  3 s2, 4 s2 with a dictionary
//	2       32        digest, as in version 1
//	34      8         added, as in version 1
//	42      8         the dictionary's ID (compressions 2 and 4 only; see
//	                  DictID)
//	        rest      the payload, compressed as one zstd frame (RFC 8878;
//	                  compressions 1 and 2) or one S2 block (3 and 4)
//
// An S2 record's dictionary is the S2 dictionary of the zstd one's
// content. Frames carry no meaningful dictionary ID: the header names the
// dictionary, which is never deleted. Blocks and the frames of messages
// under LargeMessage carry no checksum: the digest covers the decoded
// bytes. The frames of larger messages written since Decode learnt of it
// carry zstd's content checksum (the low 32 bits of XXH64), checked as
// they decode, which readers check instead of the digest: on a message of
// many megabytes SHA-256 would cost several times the decoding, for the
// same assurance against damage. (What vouches for a message's identity, a
// compaction, checks the digest all the same: DecodeDigest.)
//
// # Payload
//
//	uvarint   length of the Message-ID (without angle brackets)
//	n         Message-ID bytes
//	uvarint   length of the list name
//	n         list name bytes
//	rest      the raw message bytes, exactly as received
//
// The raw bytes come last so that they need no length; the Message-ID is
// compressed with them, which repeat it.
//
// Codec.Decode recomputes the digest of the raw bytes (or checks the
// frame's checksum, above) and refuses a record whose bytes differ
// (ErrCorrupt): a damaged record is an error, never other bytes. (As the
// digest reads CRLF as LF, a CR added or removed before an LF would pass;
// no bit flip does that.)
package record

import (
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// Message record versions.
const (
	// Version1 is the uncompressed layout.
	Version1 = 1
	// Version2 is the compressed layout.
	Version2 = 2
)

// Compression of a version 2 record's payload.
type Compression uint8

const (
	// Zstd: one zstd frame, made without a dictionary.
	Zstd Compression = 1
	// ZstdDict: one zstd frame, made with the dictionary the record names.
	ZstdDict Compression = 2
	// S2: one S2 block (Snappy's format, extended), without a dictionary.
	S2 Compression = 3
	// S2Dict: one S2 block, with the S2 dictionary of the record's one.
	S2Dict Compression = 4
)

func (c Compression) String() string {
	switch c {
	case Zstd:
		return "zstd"
	case ZstdDict:
		return "zstd+dictionary"
	case S2:
		return "s2"
	case S2Dict:
		return "s2+dictionary"
	}
	return fmt.Sprintf("compression %d", uint8(c))
}

// ErrCorrupt is returned for a value that is not a record this package
// wrote, or whose bytes do not match the digest it carries.
var ErrCorrupt = errors.New("store: corrupt record")

// ErrNoDictionary: the record's dictionary is not in the store (or given).
var ErrNoDictionary = errors.New("store: compression dictionary missing")

const (
	v1HeaderLen = 1 + 32 + 8
	v2HeaderLen = 2 + 32 + 8
	dictIDLen   = 8
)

// Message is a decoded message record. Raw may alias the decoded buffer.
type Message struct {
	Digest    store.Digest
	Added     time.Time
	MessageID string
	List      string
	Raw       []byte
}

// Header is what a record says about itself before its payload.
type Header struct {
	Version     uint8
	Compression Compression // version 2 only
	Dict        DictID      // compression ZstdDict only
	Digest      store.Digest
	Added       time.Time
}

// AppendMessage appends the version 1 (uncompressed) record of m to dst.
func AppendMessage(dst []byte, m Message) []byte {
	dst = append(dst, Version1)
	dst = append(dst, m.Digest[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Added.UnixNano()))
	return appendPayload(dst, m)
}

// Size returns the length of the version 1 record of m.
func Size(m Message) int {
	return v1HeaderLen + payloadSize(m)
}

func appendPayload(dst []byte, m Message) []byte {
	dst = binary.AppendUvarint(dst, uint64(len(m.MessageID)))
	dst = append(dst, m.MessageID...)
	dst = binary.AppendUvarint(dst, uint64(len(m.List)))
	dst = append(dst, m.List...)
	return append(dst, m.Raw...)
}

func payloadSize(m Message) int {
	return uvarintLen(len(m.MessageID)) + len(m.MessageID) + uvarintLen(len(m.List)) + len(m.List) + len(m.Raw)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

func appendHeader2(dst []byte, c Compression, dict DictID, m Message) []byte {
	dst = append(dst, Version2, byte(c))
	dst = append(dst, m.Digest[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Added.UnixNano()))
	if c == ZstdDict || c == S2Dict {
		dst = append(dst, dict[:]...)
	}
	return dst
}

// ParseHeader reads the header of a message record and returns it with
// the still encoded payload.
func ParseHeader(b []byte) (Header, []byte, error) {
	if len(b) == 0 {
		return Header{}, nil, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	var h Header
	h.Version = b[0]
	var rest []byte
	switch b[0] {
	case Version1:
		if len(b) < v1HeaderLen {
			return Header{}, nil, fmt.Errorf("%w: version 1 message record of %d bytes, shorter than its %d-byte header", ErrCorrupt, len(b), v1HeaderLen)
		}
		copy(h.Digest[:], b[1:33])
		h.Added = time.Unix(0, int64(binary.BigEndian.Uint64(b[33:41]))).UTC()
		rest = b[v1HeaderLen:]
	case Version2:
		if len(b) < v2HeaderLen {
			return Header{}, nil, fmt.Errorf("%w: version 2 message record of %d bytes, shorter than its %d-byte header", ErrCorrupt, len(b), v2HeaderLen)
		}
		h.Compression = Compression(b[1])
		copy(h.Digest[:], b[2:34])
		h.Added = time.Unix(0, int64(binary.BigEndian.Uint64(b[34:42]))).UTC()
		rest = b[v2HeaderLen:]
		switch h.Compression {
		case Zstd, S2:
		case ZstdDict, S2Dict:
			if len(rest) < dictIDLen {
				return Header{}, nil, fmt.Errorf("%w: version 2 message record of %d bytes, too short to name its dictionary", ErrCorrupt, len(b))
			}
			copy(h.Dict[:], rest)
			rest = rest[dictIDLen:]
		default:
			return Header{}, nil, fmt.Errorf("%w: version 2 message record with unknown compression %d (was the store written by a newer chibrary?)", ErrCorrupt, b[1])
		}
	default:
		return Header{}, nil, fmt.Errorf("%w: message record version %d, this program reads versions %d and %d (was the store written by a newer chibrary?)", ErrCorrupt, b[0], Version1, Version2)
	}
	return h, rest, nil
}

// DecodeMessage decodes a record that needs no dictionary without checking
// its digest, for a record whose raw bytes are kept elsewhere (a Riak
// pack's); Codec.Decode checks it. The returned Raw may alias b.
func DecodeMessage(b []byte) (Message, error) {
	return defaultCodec.decode(b, nil, checkNothing)
}

// defaultCodec decodes records without a dictionary for DecodeMessage.
var defaultCodec = &Codec{}

func decodePayload(m *Message, p []byte) error {
	var err error
	if m.MessageID, p, err = field(p, "Message-ID"); err != nil {
		return err
	}
	if m.List, p, err = field(p, "list"); err != nil {
		return err
	}
	m.Raw = p
	return nil
}

func verify(m Message, h Header) error {
	if d := store.DigestOf(m.Raw); d != m.Digest {
		what := fmt.Sprintf("version %d", h.Version)
		if h.Version == Version2 {
			what += ", " + h.Compression.String()
			if h.Compression == ZstdDict {
				what += " " + h.Dict.String()
			}
		}
		return fmt.Errorf("%w: the %d raw bytes of the message record (%s) have digest %.16s…, the record says %.16s…: the stored value is damaged", ErrCorrupt, len(m.Raw), what, d, m.Digest)
	}
	return nil
}

func field(b []byte, name string) (string, []byte, error) {
	n, k := binary.Uvarint(b)
	if k <= 0 || n > uint64(len(b)-k) {
		return "", nil, fmt.Errorf("%w: bad %s length", ErrCorrupt, name)
	}
	return string(b[k : k+int(n)]), b[k+int(n):], nil
}

// Stored returns m as a store.Stored under n, copying Raw so that it
// outlives the buffer m was decoded from.
func (m Message) Stored(n callnumber.Number) store.Stored {
	return store.Stored{
		Number:    n,
		Raw:       append(make([]byte, 0, len(m.Raw)), m.Raw...),
		Digest:    m.Digest,
		MessageID: m.MessageID,
		List:      m.List,
		Added:     m.Added,
	}
}

// binding is the JSON form of a store.Binding.
type binding struct {
	Authority string         `json:"authority"`
	Scheme    shuffle.Scheme `json:"scheme"`
	Key       shuffle.Key    `json:"key"`
}

// MarshalBinding returns the JSON record of b.
func MarshalBinding(b store.Binding) []byte {
	out, err := json.Marshal(binding(b))
	if err != nil {
		panic(err) // strings and a fixed-size key always marshal
	}
	return out
}

// UnmarshalBinding decodes a binding record.
func UnmarshalBinding(b []byte) (store.Binding, error) {
	var v binding
	if err := json.Unmarshal(b, &v); err != nil {
		return store.Binding{}, fmt.Errorf("%w: binding: %w", ErrCorrupt, err)
	}
	if v.Authority == "" {
		return store.Binding{}, fmt.Errorf("%w: binding without authority", ErrCorrupt)
	}
	return store.Binding(v), nil
}

// MarshalLease returns the JSON record of l without its key, which the binding holds.
func MarshalLease(l callnumber.Lease) []byte {
	l.Key = shuffle.Key{}
	out, err := json.Marshal(l)
	if err != nil {
		panic(err) // a Lease is plain data and always marshals
	}
	return out
}

// UnmarshalLease decodes a lease record.
func UnmarshalLease(b []byte) (callnumber.Lease, error) {
	var l callnumber.Lease
	if err := json.Unmarshal(b, &l); err != nil {
		return callnumber.Lease{}, fmt.Errorf("%w: lease: %w", ErrCorrupt, err)
	}
	return l, nil
}

// removalJSON is a removal record as the backends keep it.
type removalJSON struct {
	Digest       string    `json:"digest"`
	MessageIDSum string    `json:"message_id_sha256,omitempty"`
	Content      string    `json:"content,omitempty"`
	Removed      time.Time `json:"removed_at"`
	Reason       string    `json:"reason,omitempty"`
}

// MarshalRemoval encodes a removal record (kept under its number).
func MarshalRemoval(r store.Removal) []byte {
	j := removalJSON{Digest: r.Digest.String(), Removed: r.Removed.UTC(), Reason: r.Reason}
	if r.MessageIDSum != ([32]byte{}) {
		j.MessageIDSum = hex.EncodeToString(r.MessageIDSum[:])
	}
	if r.Content != (store.Digest{}) {
		j.Content = r.Content.String()
	}
	out, err := json.Marshal(j)
	if err != nil {
		panic(err) // plain data
	}
	return out
}

// UnmarshalRemoval decodes a removal record of the message n.
func UnmarshalRemoval(n callnumber.Number, b []byte) (store.Removal, error) {
	var j removalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return store.Removal{}, fmt.Errorf("%w: removal of %v: %w", ErrCorrupt, n, err)
	}
	r := store.Removal{Number: n, Removed: j.Removed, Reason: j.Reason}
	if d, err := hex.DecodeString(j.Digest); err != nil || len(d) != len(r.Digest) {
		return store.Removal{}, fmt.Errorf("%w: removal of %v: digest %q", ErrCorrupt, n, j.Digest)
	} else {
		copy(r.Digest[:], d)
	}
	if j.MessageIDSum != "" {
		if d, err := hex.DecodeString(j.MessageIDSum); err != nil || len(d) != len(r.MessageIDSum) {
			return store.Removal{}, fmt.Errorf("%w: removal of %v: Message-ID sum %q", ErrCorrupt, n, j.MessageIDSum)
		} else {
			copy(r.MessageIDSum[:], d)
		}
	}
	if j.Content != "" {
		if d, err := hex.DecodeString(j.Content); err != nil || len(d) != len(r.Content) {
			return store.Removal{}, fmt.Errorf("%w: removal of %v: content digest %q", ErrCorrupt, n, j.Content)
		} else {
			copy(r.Content[:], d)
		}
	}
	return r, nil
}

// moveJSON is a move record as the backends keep it.
type moveJSON struct {
	List  string    `json:"list"`
	Moved time.Time `json:"moved_at"`
	// Slot is the Riak ledger slot of the move's entry, 0 elsewhere: of
	// two values of one key, the later move's wins.
	Slot uint64 `json:"slot,omitempty"`
}

// MarshalMove encodes a move record (kept under its number) with the
// ledger slot of its entry, 0 where there is none.
func MarshalMove(m store.Move, slot uint64) []byte {
	out, err := json.Marshal(moveJSON{List: m.List, Moved: m.Moved.UTC(), Slot: slot})
	if err != nil {
		panic(err) // plain data
	}
	return out
}

// UnmarshalMove decodes a move record of the message n, and its ledger slot.
func UnmarshalMove(n callnumber.Number, b []byte) (store.Move, uint64, error) {
	var j moveJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return store.Move{}, 0, fmt.Errorf("%w: move of %v: %w", ErrCorrupt, n, err)
	}
	if err := store.CheckList(j.List); err != nil {
		return store.Move{}, 0, fmt.Errorf("%w: move of %v: list %q", ErrCorrupt, n, j.List)
	}
	return store.Move{Number: n, List: j.List, Moved: j.Moved}, j.Slot, nil
}
