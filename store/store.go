// Package store defines where the archive's messages live: the Store
// interface, its sentinel errors and the digest every backend indexes by.
// Backends are subpackages (boltstore, riakstore); storetest is the
// conformance suite every backend passes.
//
// A store keeps the raw bytes of each message exactly as received (an mbox
// From_ line, the separating blank line and mboxrd >From quoting removed;
// nothing else changed) under its call number, with indexes from
// Message-ID (not unique) and from the Digest of the raw bytes.
//
// Safety rules every backend enforces:
//
//   - a call number is written once: a Put that would give a stored call
//     number different bytes is refused with ErrNumberTaken, and nothing
//     of that batch is written;
//   - a store is bound to the authority of the first lease recorded in it
//     (RecordLease); a lease from another authority is refused with
//     ErrForeignAuthority;
//   - a store remembers the lease of every run it has seen; a second lease
//     for the same run with another nonce is refused with ErrRunReused;
//   - a message is only accepted under a run whose lease was recorded
//     (ErrUnknownRun otherwise), so the two rules above cover every write.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// Sentinel errors. Backends wrap them with details; test with errors.Is.
var (
	// ErrNotFound: no such call number, Message-ID, digest or lease.
	ErrNotFound = errors.New("store: not found")
	// ErrNumberTaken: the call number already holds different bytes.
	ErrNumberTaken = errors.New("store: call number already holds different bytes")
	// ErrForeignAuthority: the lease comes from another authority than the
	// one this store is bound to.
	ErrForeignAuthority = errors.New("store: lease from a different run authority")
	// ErrRunReused: the run was already leased with another nonce.
	ErrRunReused = errors.New("store: run already leased to someone else")
	// ErrUnknownRun: a message's run has no lease recorded in this store.
	ErrUnknownRun = errors.New("store: no lease recorded for the run")
	// ErrUnbound: the store has no authority yet (nothing was written).
	ErrUnbound = errors.New("store: not bound to a run authority yet")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable: the store could not be reached in time (another
	// process holds the bbolt file, Riak nodes do not answer). The
	// operation may succeed later; a server answers 503.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrBadCursor: a cursor given to Changes is not one this store's
	// change feed handed out (another backend's, or garbled). A follower
	// can start again from the beginning: seeing a message twice is
	// allowed.
	ErrBadCursor = errors.New("store: not a cursor of this store's change feed")
)

// Digest is the SHA-256 of a message's raw bytes with every CRLF read as
// LF, so that the same message from an mbox (LF) and over IMAP (CRLF) has
// one digest.
type Digest [sha256.Size]byte

// DigestOf returns the digest of raw.
func DigestOf(raw []byte) Digest {
	h := sha256.New()
	for len(raw) > 0 {
		i := bytes.Index(raw, []byte("\r\n"))
		if i < 0 {
			h.Write(raw)
			break
		}
		h.Write(raw[:i])
		raw = raw[i+1:] // keep the LF
	}
	var d Digest
	h.Sum(d[:0])
	return d
}

// String returns the digest in hex.
func (d Digest) String() string { return hex.EncodeToString(d[:]) }

// Message is one message to store.
type Message struct {
	Number callnumber.Number
	Raw    []byte
	// Digest must be DigestOf(Raw).
	Digest Digest
	// MessageID is the Message-ID without angle brackets, or "".
	MessageID string
	// List is the mailing list the message was archived for, or "".
	List string
}

// Stored is a message as the store keeps it.
type Stored struct {
	Number    callnumber.Number
	Raw       []byte
	Digest    Digest
	MessageID string
	List      string
	Added     time.Time
}

// Result is what Put did with one message.
type Result struct {
	// Number is the message's call number: the one it was given, or for a
	// duplicate, the one already stored.
	Number callnumber.Number
	// Duplicate is true when a message with the same digest was already
	// stored (or came earlier in the same batch); nothing was written.
	Duplicate bool
}

// Binding is the run authority a store is bound to.
type Binding struct {
	Authority string
	Scheme    shuffle.Scheme
	Key       shuffle.Key
}

// Codec returns the codec of the bound authority.
func (b Binding) Codec() (*callnumber.Codec, error) {
	return callnumber.NewCodec(b.Scheme, b.Key)
}

// Cursor is a position in a store's change feed: opaque text, safe to
// save and to hand to another process using the same store. The empty
// cursor is the beginning of the feed.
type Cursor string

// ChangePage is one answer of Changes.
type ChangePage struct {
	// Messages are the messages stored after the cursor, in feed order.
	Messages []Stored
	// Next is the cursor to continue from: pass it to the next call. It
	// equals the cursor given when there was nothing new.
	Next Cursor
}

// Store is an archive's message store. Implementations are safe for
// concurrent use by several goroutines; the bolt backend also shares its
// file with other processes.
type Store interface {
	// RecordLease binds the store to l's authority if it is not bound yet,
	// and remembers l. Recording the same lease again is a no-op. It fails
	// with ErrForeignAuthority or ErrRunReused as the package doc says.
	RecordLease(ctx context.Context, l callnumber.Lease) error
	// Lease returns the recorded lease of a run (without the key), or
	// ErrNotFound.
	Lease(ctx context.Context, run uint32) (callnumber.Lease, error)
	// Binding returns the authority the store is bound to, or ErrUnbound.
	Binding(ctx context.Context) (Binding, error)

	// Put stores a batch of messages. Either the whole batch is durable when
	// Put returns nil (it survives a crash), or an error is returned; a
	// batch refused by a safety rule writes nothing. Results are in the
	// order of msgs.
	Put(ctx context.Context, msgs []Message) ([]Result, error)
	// Get returns the message stored under n, or ErrNotFound.
	Get(ctx context.Context, n callnumber.Number) (Stored, error)
	// ByMessageID returns the call numbers of the messages with that
	// Message-ID (without angle brackets), in the order they were stored,
	// or an empty slice.
	ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error)
	// ByDigest returns the call number of the message with that digest,
	// or ErrNotFound.
	ByDigest(ctx context.Context, d Digest) (callnumber.Number, error)
	// Count returns the number of messages stored.
	Count(ctx context.Context) (int64, error)

	// Changes is the change feed: it returns up to max messages stored
	// after the position after (fewer when they are large, none when
	// nothing new was stored), in feed order, and the cursor to continue
	// from. The promise to a follower that passes each answer's Next to
	// its next call (and may save it, to carry on after a restart): it
	// sees every message stored, including messages stored under an old
	// run after others were stored under newer ones (a long-lived
	// watcher's beside importers'), and a message appears once its Put
	// has returned, at the latest one second later. It may see a message
	// twice. A duplicate, which Put did not write, never appears. The
	// empty cursor starts at the beginning; a cursor this store did not
	// hand out is refused with ErrBadCursor.
	Changes(ctx context.Context, after Cursor, max int) (ChangePage, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}
