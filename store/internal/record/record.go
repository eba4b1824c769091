// Package record encodes the values the store backends keep: a message
// record and the lease and binding records. The bolt and Riak backends
// share these layouts, so a message moved between them keeps its bytes.
//
// # Message record, version 1
//
//	offset  size      field
//	0       1         format version (1)
//	1       32        digest: SHA-256 of the raw bytes, CRLF read as LF
//	33      8         added: Unix time in nanoseconds, big-endian int64
//	41      uvarint   length of the Message-ID (without angle brackets)
//	        n         Message-ID bytes
//	        uvarint   length of the list name
//	        n         list name bytes
//	        rest      the raw message bytes, exactly as received
//
// The raw bytes come last so that they need no length and can be sliced
// without a copy. A reader refuses versions it does not know rather than
// guess; a new layout gets a new version byte.
package record

import (
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// Version is the message record layout written today.
const Version = 1

// ErrCorrupt is returned for a value that is not a record this package
// wrote.
var ErrCorrupt = errors.New("store: corrupt record")

const headerLen = 1 + 32 + 8

// Message is a decoded message record. Raw aliases the decoded buffer.
type Message struct {
	Digest    store.Digest
	Added     time.Time
	MessageID string
	List      string
	Raw       []byte
}

// AppendMessage appends the version 1 record of m to dst.
func AppendMessage(dst []byte, m Message) []byte {
	dst = append(dst, Version)
	dst = append(dst, m.Digest[:]...)
	dst = binary.BigEndian.AppendUint64(dst, uint64(m.Added.UnixNano()))
	dst = binary.AppendUvarint(dst, uint64(len(m.MessageID)))
	dst = append(dst, m.MessageID...)
	dst = binary.AppendUvarint(dst, uint64(len(m.List)))
	dst = append(dst, m.List...)
	return append(dst, m.Raw...)
}

// Size returns the length of the record of m.
func Size(m Message) int {
	return headerLen + uvarintLen(len(m.MessageID)) + len(m.MessageID) +
		uvarintLen(len(m.List)) + len(m.List) + len(m.Raw)
}

func uvarintLen(n int) int {
	var b [binary.MaxVarintLen64]byte
	return binary.PutUvarint(b[:], uint64(n))
}

// DecodeMessage decodes a message record. The returned Raw aliases b.
func DecodeMessage(b []byte) (Message, error) {
	if len(b) == 0 {
		return Message{}, fmt.Errorf("%w: empty value", ErrCorrupt)
	}
	if b[0] != Version {
		return Message{}, fmt.Errorf("%w: message record version %d, this program reads version %d (was the store written by a newer chibrary?)", ErrCorrupt, b[0], Version)
	}
	if len(b) < headerLen {
		return Message{}, fmt.Errorf("%w: message record of %d bytes, shorter than its %d-byte header", ErrCorrupt, len(b), headerLen)
	}
	var m Message
	copy(m.Digest[:], b[1:33])
	m.Added = time.Unix(0, int64(binary.BigEndian.Uint64(b[33:41]))).UTC()
	rest := b[41:]
	var err error
	if m.MessageID, rest, err = field(rest, "Message-ID"); err != nil {
		return Message{}, err
	}
	if m.List, rest, err = field(rest, "list"); err != nil {
		return Message{}, err
	}
	m.Raw = rest
	return m, nil
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

// MarshalLease returns the JSON record of l without its key: a store
// keeps the key once, in its binding.
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
