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
//     (ErrUnknownRun otherwise), so the two rules above cover every write;
//   - a removed number (Remove) is never filled again: its removal record
//     stays in its place, the same bytes are reported Removed, other
//     bytes are refused with ErrNumberTaken.
//
// Removal takes a message's bytes out of the store and leaves a record
// (number, digest, the SHA-256 of the Message-ID, date, reason) in the
// message's place and in the change feed. What "out of the store" means
// on disk differs by backend: the bolt store drops the bytes at its next
// compaction; the Riak store rewrites or deletes the values at once, and
// Riak itself keeps old values on disk for a while (the riakstore package
// doc says how long, and what an operator can do). Copies made before
// (backups, mirrors, downloads) are out of its reach.
package store

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"time"
	"unicode"
	"unicode/utf8"

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
	// ErrRemoved: the message under that call number was removed
	// (Remove). The error is a *RemovedError carrying the removal record.
	ErrRemoved = errors.New("store: message removed")
)

// Removal is what a removed message leaves in its place: never its
// content.
type Removal struct {
	Number callnumber.Number
	// Digest is the digest of the bytes removed: the archive keeps
	// refusing them (Put reports them Removed).
	Digest Digest
	// MessageIDSum is the SHA-256 of the removed message's Message-ID
	// (without angle brackets), zero when it had none: enough for a
	// catalog rebuilt from the change feed to show the removed message's
	// place in its thread, without the ID itself.
	MessageIDSum [sha256.Size]byte
	// Removed is when it was removed (UTC).
	Removed time.Time
	// Reason is the public reason given, or "" (CheckReason).
	Reason string
}

// RemovedError is the error of a read of a removed message.
type RemovedError struct{ Removal Removal }

func (e *RemovedError) Error() string {
	s := fmt.Sprintf("message %v was removed on %s", e.Removal.Number, e.Removal.Removed.UTC().Format("2006-01-02"))
	if e.Removal.Reason != "" {
		s += " (" + e.Removal.Reason + ")"
	}
	return s
}

// Is makes errors.Is(err, ErrRemoved) true.
func (e *RemovedError) Is(target error) bool { return target == ErrRemoved }

// MaxReason bounds the length in bytes of a removal's reason.
const MaxReason = 300

// ErrBadReason: a removal reason that is too long, not UTF-8, or holds
// control characters (it is one public line).
var ErrBadReason = errors.New("store: a removal reason is one line of text of at most 300 bytes")

// CheckReason checks a removal reason: one line of UTF-8 text of at most
// MaxReason bytes (public: "at the author's request", "spam").
func CheckReason(reason string) error {
	if len(reason) > MaxReason || !utf8.ValidString(reason) {
		return ErrBadReason
	}
	for _, r := range reason {
		if unicode.IsControl(r) {
			return ErrBadReason
		}
	}
	return nil
}

// Move is a message's change of list (Store.Move): from Moved on, the
// message is in List. It corrects the --list a message was archived
// with; the bytes stay as they are.
type Move struct {
	Number callnumber.Number
	// List is the list the message is in from then on: a list name as
	// CheckList accepts it.
	List string
	// Moved is when it was moved (UTC); zero for a message never moved.
	Moved time.Time
}

// MaxList bounds the length of a list name.
const MaxList = 64

// ErrBadList: a list name a move cannot take.
var ErrBadList = errors.New("store: a list name is 1 to 64 lower-case letters, digits, '.', '_' and '-', starting and ending with a letter or digit")

// CheckList checks the list name of a move: the form list names take in
// the catalog and in URLs (lower-case [a-z0-9._-], at most MaxList
// bytes, no punctuation at either end).
func CheckList(list string) error {
	if list == "" || len(list) > MaxList {
		return ErrBadList
	}
	for i := 0; i < len(list); i++ {
		c := list[i]
		if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-') {
			return ErrBadList
		}
	}
	if end := func(c byte) bool { return c == '.' || c == '_' || c == '-' }; end(list[0]) || end(list[len(list)-1]) {
		return ErrBadList
	}
	return nil
}

// MessageIDSum returns the SHA-256 of a Message-ID for Removal, zero for
// none.
func MessageIDSum(id string) [sha256.Size]byte {
	if id == "" {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256([]byte(id))
}

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
	// Added is when the message was first archived, kept by a store that
	// copies another's (a mirror); zero means now.
	Added time.Time
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
	// Removed is true, with Duplicate, when that message was removed:
	// the archive does not take it again.
	Removed bool
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
	// Messages are the messages stored after the cursor, in feed order
	// (a message removed since is left out), each with the List it was
	// stored with: its moves since come later in the feed (Moves).
	Messages []Stored
	// Moves are the moves made after the cursor, in feed order. A
	// follower applies them after Messages and before Removals: a move
	// always comes after its message in the feed, and before its
	// removal, if any. (Where the feed hands out a message late, after
	// its move, a follower remembers a move of a message it does not
	// have yet.)
	Moves []Move
	// Removals are the removals made after the cursor, in feed order. A
	// follower applies them after Messages and Moves: a removal always
	// comes after its message in the feed, so a message of this page or
	// of an earlier one.
	Removals []Removal
	// Next is the cursor to continue from: pass it to the next call. It
	// equals the cursor given when there was nothing new.
	Next Cursor
}

// Empty reports whether the page holds nothing: the follower has read
// the feed to its end.
func (p ChangePage) Empty() bool {
	return len(p.Messages) == 0 && len(p.Removals) == 0 && len(p.Moves) == 0
}

// Len is the number of things the page holds: messages, moves and
// removals.
func (p ChangePage) Len() int { return len(p.Messages) + len(p.Moves) + len(p.Removals) }

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
	// Get returns the message stored under n, or ErrNotFound, or for a
	// removed message a *RemovedError.
	Get(ctx context.Context, n callnumber.Number) (Stored, error)
	// ByMessageID returns the call numbers of the messages with that
	// Message-ID (without angle brackets), in the order they were stored,
	// or an empty slice.
	ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error)
	// ByDigest returns the call number of the message with that digest,
	// or ErrNotFound.
	ByDigest(ctx context.Context, d Digest) (callnumber.Number, error)
	// Count returns the number of messages stored (removed ones not
	// counted).
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

	// Remove removes the message stored under n for good, and returns
	// the removal record it leaves: Get then answers a *RemovedError
	// with that record, ByMessageID no longer lists n, the bytes leave
	// the store (the bolt store's at its next compaction; the Riak
	// store's at once, up to what Riak itself keeps of old values: see
	// each backend's doc), and n is never filled again. The digest
	// stays known: a Put of the same bytes reports them Removed, under
	// n. The removal goes into the change feed. Removing a removed
	// number returns its record as it was (and completes the removal if
	// it was cut short, on a backend without transactions); a number
	// with no message is ErrNotFound; a reason CheckReason refuses is
	// ErrBadReason.
	Remove(ctx context.Context, n callnumber.Number, reason string) (Removal, error)
	// RecordRemoval records a removal made in another store that holds
	// the same messages under the same numbers (a mirror's origin), with
	// its date and reason as given: the message under r.Number, if
	// stored, must have r.Digest (ErrNumberTaken otherwise) and is
	// removed as Remove removes it; if none is, the number and the digest
	// are reserved all the same (the number never filled, the digest
	// refused), so that a store that never saw the message refuses it
	// too. The number's run must have a recorded lease (ErrUnknownRun).
	// A number removed already keeps its first record, which is
	// returned.
	RecordRemoval(ctx context.Context, r Removal) (Removal, error)
	// Removals returns every removal record, in the order they were made.
	Removals(ctx context.Context) ([]Removal, error)

	// Move puts the message stored under n in list from now on, and
	// returns the move: Get answers the message with that List, and the
	// move goes into the change feed (ChangePage.Moves), after the
	// message. Moving a message to the list it is in writes nothing and
	// returns where it is (Moved is when it was moved there, zero if it
	// was stored there). A number with no message is ErrNotFound, a
	// removed one a *RemovedError, a list CheckList refuses ErrBadList.
	Move(ctx context.Context, n callnumber.Number, list string) (Move, error)
	// RecordMove records a move made in another store that holds the same
	// messages under the same numbers (a mirror's origin), with its date
	// as given: as Move, except that a number with no message here is
	// moved all the same (Get answers the message in m.List once it is
	// stored: a mirror may receive a move before its message). The
	// number's run must have a recorded lease (ErrUnknownRun); a removed
	// number is a *RemovedError.
	RecordMove(ctx context.Context, m Move) (Move, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}
