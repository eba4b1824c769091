// Package store defines where the archive's messages live: the Store
// interface, its errors and the digest every backend indexes by. Backends
// are subpackages (boltstore, riakstore); storetest is the conformance
// suite every backend passes.
//
// A store keeps each message's raw bytes as received (mbox From_ line,
// separating blank line and >From quoting removed) under its call number,
// indexed by Message-ID (not unique) and by Digest. Every backend enforces:
//
//   - a call number is written once (ErrNumberTaken); a refused batch
//     writes nothing;
//   - a store is bound to the authority of its first lease
//     (ErrForeignAuthority), and a run is leased once (ErrRunReused);
//   - a message is accepted only under a run whose lease was recorded
//     (ErrUnknownRun), so the two rules above cover every write;
//   - a removed number is never filled again.
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
	// ErrForeignAuthority: the lease is from another authority than the store's.
	ErrForeignAuthority = errors.New("store: lease from a different run authority")
	// ErrRunReused: the run was already leased with another nonce.
	ErrRunReused = errors.New("store: run already leased to someone else")
	// ErrUnknownRun: a message's run has no lease recorded in this store.
	ErrUnknownRun = errors.New("store: no lease recorded for the run")
	// ErrUnbound: the store has no authority yet (nothing was written).
	ErrUnbound = errors.New("store: not bound to a run authority yet")
	// ErrClosed: the store was closed.
	ErrClosed = errors.New("store: closed")
	// ErrUnavailable: the store could not be reached in time (bbolt file
	// held elsewhere, Riak nodes silent); a server answers 503.
	ErrUnavailable = errors.New("store: unavailable")
	// ErrBadCursor: a cursor this store's change feed did not hand out. A
	// follower may restart from the empty cursor: it may see messages twice.
	ErrBadCursor = errors.New("store: not a cursor of this store's change feed")
	// ErrRemoved: the message was removed; the error is a *RemovedError.
	ErrRemoved = errors.New("store: message removed")
)

// Removal is what a removed message leaves in its place: never its content.
type Removal struct {
	Number callnumber.Number
	// Digest is that of the removed bytes, which the archive keeps refusing.
	Digest Digest
	// MessageIDSum is the SHA-256 of the Message-ID, zero for none: enough
	// to place the removed message in its thread without keeping the ID.
	MessageIDSum [sha256.Size]byte
	// Content is ContentOf the removed message, which the archive keeps
	// refusing too: a copy of it with headers or whitespace added in
	// transit is the same message. Zero for a message without a
	// Message-ID, and in a removal recorded before Content existed.
	Content Digest
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

// ErrBadReason: a reason CheckReason refuses.
var ErrBadReason = errors.New("store: a removal reason is one line of text of at most 300 bytes, without control or text-direction characters")

// CheckReason checks a removal reason: one public line of UTF-8 text of
// at most MaxReason bytes, without control characters nor the marks that
// set the direction of text (Unicode's Bidi_Control: an U+202E in a
// reason reversed the page around it).
func CheckReason(reason string) error {
	if len(reason) > MaxReason || !utf8.ValidString(reason) {
		return ErrBadReason
	}
	for _, r := range reason {
		if unicode.IsControl(r) || unicode.Is(unicode.Bidi_Control, r) {
			return ErrBadReason
		}
	}
	return nil
}

// Move is a message's change of list, correcting the list it was archived
// with; the bytes stay as they are.
type Move struct {
	Number callnumber.Number
	// List is the message's list from Moved on (see CheckList).
	List string
	// Moved is when it was moved (UTC); zero for a message never moved.
	Moved time.Time
}

// MaxList bounds the length of a list name.
const MaxList = 64

// ErrBadList: a list name a move cannot take.
var ErrBadList = errors.New("store: a list name is 1 to 64 lower-case letters, digits, '.', '_' and '-', starting and ending with a letter or digit")

// CheckList checks a list name: the form list names take in the catalog
// and in URLs.
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

// MessageIDSum returns the SHA-256 of a Message-ID for Removal, zero for none.
func MessageIDSum(id string) [sha256.Size]byte {
	if id == "" {
		return [sha256.Size]byte{}
	}
	return sha256.Sum256([]byte(id))
}

// ContentOf returns the digest of what makes a message the same message
// whatever happened to it in transit: its Message-ID (without angle
// brackets, as in Message.MessageID) and its body. The header is left out
// but for the Message-ID: relays add Received fields, lists their own,
// and rewrite others. The body, the lines after the first empty line
// (RFC 5322 section 2.1; empty lines before the header are skipped), is
// read line by line with CRLF read as LF, spaces and tabs at line ends
// dropped, lines left empty dropped (blank lines added or lost anywhere,
// as an mbox adds one at a message's end), and the ">" of mbox ">From "
// quoting dropped (RFC 4155 section 2: mboxo and mboxrd quote
// differently). A message without a Message-ID has no such digest: the
// zero Digest, and only its exact bytes (DigestOf) say it is the same.
//
// The prefix keeps it apart from every DigestOf, so both can share an
// index.
func ContentOf(raw []byte, messageID string) Digest {
	if messageID == "" {
		return Digest{}
	}
	h := sha256.New()
	h.Write([]byte("chibrary content v1\x00"))
	h.Write([]byte(messageID))
	h.Write([]byte{0})
	// Lines kept as they are, each with its LF, are hashed a run of
	// neighbours at a time: raw[run:runEnd].
	run, runEnd := 0, 0
	started, body := false, false
	for pos := 0; pos < len(raw); {
		start, end, next := pos, len(raw), len(raw)
		if i := bytes.IndexByte(raw[pos:], '\n'); i >= 0 {
			end, next = pos+i, pos+i+1
		}
		pos = next
		line := bytes.TrimRight(raw[start:end], " \t\r")
		switch {
		case len(line) == 0 && !started:
			continue // before the header
		case !body:
			started = true
			body = len(line) == 0
			continue
		case len(line) == 0:
			continue
		}
		if q := bytes.TrimLeft(line, ">"); len(q) < len(line) && bytes.HasPrefix(q, []byte("From ")) {
			line = q
		}
		if len(line) == end-start && next == end+1 && line[0] == raw[start] {
			if start != runEnd {
				h.Write(raw[run:runEnd])
				run = start
			}
			runEnd = next
			continue
		}
		h.Write(raw[run:runEnd])
		run, runEnd = 0, 0
		h.Write(line)
		h.Write([]byte{'\n'})
	}
	h.Write(raw[run:runEnd])
	var d Digest
	h.Sum(d[:0])
	return d
}

// Digest is the SHA-256 of a message's raw bytes with every CRLF read as
// LF, so that a message from an mbox and over IMAP has one digest.
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
	// Digest is DigestOf(Raw), or zero: Put then computes it (and sets
	// it in the batch given), so that a caller need not digest the bytes
	// as well as the store, which checks every digest it is given.
	Digest Digest
	// MessageID is the Message-ID without angle brackets, or "".
	MessageID string
	// List is the mailing list the message was archived for, or "".
	List string
	// Added is when the message was first archived (a mirror keeps its
	// origin's); zero means now.
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
	// Number is the call number given, or for a duplicate the one stored.
	Number callnumber.Number
	// Duplicate: the digest was stored or came earlier in the batch.
	Duplicate bool
	// Removed: with Duplicate, that message was removed.
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

// Cursor is a position in a store's change feed: opaque text, safe to save
// and to hand to another process. The empty cursor is the feed's beginning.
type Cursor string

// ChangePage is one answer of Changes.
type ChangePage struct {
	// Messages are the messages stored after the cursor, in feed order,
	// removed ones left out, each with the List it was stored with.
	Messages []Stored
	// Moves are the moves made after the cursor, in feed order; a follower
	// applies them after Messages and before Removals. A move may come before
	// its message (the feed hands some out late): remember it until then.
	Moves []Move
	// Removals are the removals made after the cursor, in feed order, always
	// after their message.
	Removals []Removal
	// Next is the cursor to continue from; the given one if nothing was new.
	Next Cursor
}

// Empty reports whether the follower has read the feed to its end.
func (p ChangePage) Empty() bool {
	return len(p.Messages) == 0 && len(p.Removals) == 0 && len(p.Moves) == 0
}

// Len is the number of messages, moves and removals the page holds.
func (p ChangePage) Len() int { return len(p.Messages) + len(p.Moves) + len(p.Removals) }

// Store is an archive's message store, safe for concurrent use; the bolt
// backend also shares its file with other processes.
type Store interface {
	// RecordLease binds the store to l's authority if it is unbound, and
	// remembers l; recording the same lease again is a no-op.
	RecordLease(ctx context.Context, l callnumber.Lease) error
	// Lease returns a run's recorded lease (without the key), or ErrNotFound.
	Lease(ctx context.Context, run uint32) (callnumber.Lease, error)
	// Binding returns the authority the store is bound to, or ErrUnbound.
	Binding(ctx context.Context) (Binding, error)

	// Put stores a batch: when it returns nil the whole batch is durable;
	// a refused batch writes nothing. Results are in the order of msgs.
	Put(ctx context.Context, msgs []Message) ([]Result, error)
	// Get returns the message under n, ErrNotFound, or a *RemovedError.
	Get(ctx context.Context, n callnumber.Number) (Stored, error)
	// ByMessageID returns the numbers of the messages with that Message-ID
	// (without angle brackets), in the order they were stored.
	ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error)
	// ByDigest returns the number of the message with digest d, or ErrNotFound.
	ByDigest(ctx context.Context, d Digest) (callnumber.Number, error)
	// Count returns the number of messages stored, removed ones not counted.
	Count(ctx context.Context) (int64, error)

	// Changes returns up to max messages (fewer when large) stored after the
	// position after, in feed order, and the cursor to continue from. A
	// follower passing each Next on sees every message stored, late runs'
	// included, at the latest one second after its Put returned; it may see a
	// message twice, and never a duplicate Put did not write.
	Changes(ctx context.Context, after Cursor, max int) (ChangePage, error)

	// Remove removes the message under n for good and returns its removal
	// record: Get answers a *RemovedError, ByMessageID no longer lists n, n
	// is never filled again and a Put of the same bytes, or of the same
	// message (ContentOf, Removal.Content), reports them Removed.
	// The removal enters the change feed; the bytes leave the disk as each
	// backend's doc says. Removing a removed number returns its record
	// (completing a removal cut short). Errors: ErrNotFound, ErrBadReason.
	Remove(ctx context.Context, n callnumber.Number, reason string) (Removal, error)
	// RecordRemoval records a removal made in a store holding the same
	// messages under the same numbers (a mirror's origin), as given (a zero
	// Content is ContentOf the message held, if any). A message under
	// r.Number must have r.Digest (ErrNumberTaken); with none, the number,
	// digest and content are reserved all the same. A number removed
	// already keeps its first record. The run needs a lease (ErrUnknownRun).
	RecordRemoval(ctx context.Context, r Removal) (Removal, error)
	// Removals returns every removal record, in the order they were made.
	Removals(ctx context.Context) ([]Removal, error)

	// Move puts the message under n in list from now on; the move goes into
	// the change feed after the message. Moving a message to its own list
	// writes nothing and returns where it is (Moved zero if stored there).
	// Errors: ErrNotFound, *RemovedError, ErrBadList.
	Move(ctx context.Context, n callnumber.Number, list string) (Move, error)
	// RecordMove records a move made in a mirror's origin, as given: as Move,
	// except that a number with no message here is moved all the same, since
	// a mirror may receive a move before its message. Errors: ErrUnknownRun,
	// *RemovedError.
	RecordMove(ctx context.Context, m Move) (Move, error)

	// Close releases the store. Calls after Close return ErrClosed.
	Close() error
}
