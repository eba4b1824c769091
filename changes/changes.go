// Package changes is the store's change feed over HTTP: the wire format
// of GET /api/v1/changes, which the resolver writes and mirrors read.
//
// An answer is a sequence of records, each a line of JSON (header, at most
// MaxHeader bytes); a message's line is followed by its Size bytes as
// stored and a line feed. The records, in this order:
//
//	feed     first: the authority and shuffle key, to decode call numbers
//	lease    a run's lease, before anything of that run
//	message  call number, SHA-256 (store.DigestOf), size, then the bytes
//	move     a move (store.Move), after its message if any
//	removal  a removal (store.Removal), after its message if any
//	end      last: the cursor to ask from next; more if cut at a limit
//
// An answer without its end record was cut short: a reader keeps what it
// verified and asks again from its cursor. Records come in the store's
// feed order (store.Store.Changes); a message may come twice.
package changes

import (
	"bufio"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"
	"unicode"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// Version is the format's version, in the feed record.
const Version = 1

// ContentType is the media type of an answer.
const ContentType = "application/vnd.chibrary.changes.v1"

// MaxHeader bounds a record's JSON line.
const MaxHeader = 64 << 10

// ErrFormat: the answer is damaged or not a change feed this package reads.
var ErrFormat = errors.New("changes: malformed change feed")

// ErrTruncated: the answer ended before its end record.
var ErrTruncated = errors.New("changes: the answer was cut short")

// Kinds of records.
const (
	KindFeed    = "feed"
	KindLease   = "lease"
	KindMessage = "message"
	KindRemoval = "removal"
	KindMove    = "move"
	KindEnd     = "end"
)

// header is a record's JSON line, every kind's fields together.
type header struct {
	Type string `json:"type"`
	// feed
	Version   int    `json:"version,omitempty"`
	Authority string `json:"authority,omitempty"`
	Scheme    string `json:"scheme,omitempty"`
	Key       string `json:"key,omitempty"`
	// lease
	Run      uint32    `json:"run,omitempty"`
	Nonce    string    `json:"nonce,omitempty"`
	Program  string    `json:"program,omitempty"`
	Host     string    `json:"host,omitempty"`
	PID      int       `json:"pid,omitempty"`
	Note     string    `json:"note,omitempty"`
	IssuedAt time.Time `json:"issued_at,omitzero"`
	// message, removal
	CallNumber   string    `json:"callnumber,omitempty"`
	Digest       string    `json:"digest,omitempty"`
	MessageID    string    `json:"message_id,omitempty"`
	List         string    `json:"list,omitempty"`
	Added        time.Time `json:"added,omitzero"`
	Size         int64     `json:"size,omitempty"`
	MessageIDSum string    `json:"message_id_sha256,omitempty"`
	Content      string    `json:"content,omitempty"` // store.Removal.Content
	RemovedAt    time.Time `json:"removed_at,omitzero"`
	Reason       string    `json:"reason,omitempty"`
	// move (and List)
	MovedAt time.Time `json:"moved_at,omitzero"`
	// end
	Next string `json:"next,omitempty"`
	More bool   `json:"more,omitempty"`
}

// Writer writes an answer.
type Writer struct {
	w     *bufio.Writer
	codec *callnumber.Codec
	err   error
}

// NewWriter starts an answer on w with the feed record of binding b.
func NewWriter(w io.Writer, b store.Binding) (*Writer, error) {
	codec, err := b.Codec()
	if err != nil {
		return nil, err
	}
	fw := &Writer{w: bufio.NewWriterSize(w, 64<<10), codec: codec}
	fw.header(header{Type: KindFeed, Version: Version, Authority: b.Authority, Scheme: string(b.Scheme), Key: hex.EncodeToString(b.Key[:])})
	return fw, fw.err
}

func (fw *Writer) header(h header) {
	if fw.err != nil {
		return
	}
	b, err := json.Marshal(h)
	if err != nil {
		fw.err = err
		return
	}
	b = append(b, '\n')
	_, fw.err = fw.w.Write(b)
}

// Lease writes a run's lease (its key is not written).
func (fw *Writer) Lease(l callnumber.Lease) error {
	fw.header(header{Type: KindLease, Run: l.Run, Nonce: l.Nonce, Program: l.Program, Host: l.Host, PID: l.PID, Note: l.Note, IssuedAt: l.IssuedAt.UTC()})
	return fw.err
}

// Message writes a message.
func (fw *Writer) Message(m store.Stored) error {
	fw.header(header{Type: KindMessage, CallNumber: m.Number.String(), Digest: m.Digest.String(), MessageID: m.MessageID,
		List: m.List, Added: m.Added.UTC(), Size: int64(len(m.Raw))})
	if fw.err == nil {
		_, fw.err = fw.w.Write(m.Raw)
	}
	if fw.err == nil {
		fw.err = fw.w.WriteByte('\n')
	}
	return fw.err
}

// Removal writes a removal.
func (fw *Writer) Removal(r store.Removal) error {
	h := header{Type: KindRemoval, CallNumber: r.Number.String(), Digest: r.Digest.String(), RemovedAt: r.Removed.UTC(), Reason: r.Reason}
	if r.MessageIDSum != ([32]byte{}) {
		h.MessageIDSum = hex.EncodeToString(r.MessageIDSum[:])
	}
	if r.Content != (store.Digest{}) {
		h.Content = r.Content.String()
	}
	fw.header(h)
	return fw.err
}

// Move writes a move.
func (fw *Writer) Move(m store.Move) error {
	fw.header(header{Type: KindMove, CallNumber: m.Number.String(), List: m.List, MovedAt: m.Moved.UTC()})
	return fw.err
}

// End ends the answer with the cursor to ask from next, and flushes.
func (fw *Writer) End(next store.Cursor, more bool) error {
	fw.header(header{Type: KindEnd, Next: string(next), More: more})
	if fw.err == nil {
		fw.err = fw.w.Flush()
	}
	return fw.err
}

// Flush sends what is buffered, so a slow answer's records go as they come.
func (fw *Writer) Flush() error {
	if fw.err == nil {
		fw.err = fw.w.Flush()
	}
	return fw.err
}

// Record is one record read by a Reader; Kind says which fields are set.
type Record struct {
	Kind    string
	Lease   callnumber.Lease // KindLease (without the key)
	Message store.Stored     // KindMessage: digest checked
	Removal store.Removal    // KindRemoval
	Move    store.Move       // KindMove
	// Next and More are the end record's.
	Next store.Cursor
	More bool
}

// Options bound what a Reader accepts.
type Options struct {
	// MaxMessage is the largest message accepted; 0 means 64 MiB.
	MaxMessage int64
}

// Reader reads an answer, checking each message's digest and size, and
// that call numbers decode under the feed's authority in runs leased before.
type Reader struct {
	r       *bufio.Reader
	opts    Options
	binding store.Binding
	codec   *callnumber.Codec
	leases  map[uint32]bool
	records int
	ended   bool
}

// NewReader reads the feed record of an answer.
func NewReader(r io.Reader, opts Options) (*Reader, error) {
	if opts.MaxMessage <= 0 {
		opts.MaxMessage = 64 << 20
	}
	fr := &Reader{r: bufio.NewReaderSize(r, 64<<10), opts: opts, leases: map[uint32]bool{}}
	h, err := fr.header()
	if err != nil {
		return nil, err
	}
	if h.Type != KindFeed {
		return nil, fmt.Errorf("%w: the answer starts with a %q record, not the feed's", ErrFormat, h.Type)
	}
	if h.Version != Version {
		return nil, fmt.Errorf("%w: format version %d, this program reads %d (is the origin newer?)", ErrFormat, h.Version, Version)
	}
	scheme, err := shuffle.ParseScheme(h.Scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	var key shuffle.Key
	if b, err := hex.DecodeString(h.Key); err != nil || len(b) != len(key) {
		return nil, fmt.Errorf("%w: the feed's key is not %d bytes of hex", ErrFormat, len(key))
	} else {
		copy(key[:], b)
	}
	if h.Authority == "" {
		return nil, fmt.Errorf("%w: the feed names no authority", ErrFormat)
	}
	fr.binding = store.Binding{Authority: h.Authority, Scheme: scheme, Key: key}
	if fr.codec, err = fr.binding.Codec(); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrFormat, err)
	}
	return fr, nil
}

// Binding returns the authority of the archive the answer is from.
func (fr *Reader) Binding() store.Binding { return fr.binding }

func (fr *Reader) header() (header, error) {
	line, err := fr.r.ReadSlice('\n')
	switch {
	case errors.Is(err, bufio.ErrBufferFull):
		return header{}, fmt.Errorf("%w: record %d: a line of more than %d bytes", ErrFormat, fr.records+1, MaxHeader)
	case errors.Is(err, io.EOF) && len(line) == 0:
		return header{}, fmt.Errorf("%w after %d records", ErrTruncated, fr.records)
	case errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF):
		return header{}, fmt.Errorf("%w inside record %d", ErrTruncated, fr.records+1)
	case err != nil:
		return header{}, fmt.Errorf("cannot read record %d: %w", fr.records+1, err)
	}
	fr.records++
	var h header
	if err := json.Unmarshal(line, &h); err != nil {
		return header{}, fmt.Errorf("%w: record %d: %v", ErrFormat, fr.records, err)
	}
	return h, nil
}

// Next returns the next record: io.EOF after the end record, ErrTruncated
// without one, ErrFormat (with the record's place) for anything inconsistent.
func (fr *Reader) Next() (Record, error) {
	if fr.ended {
		return Record{}, io.EOF
	}
	h, err := fr.header()
	if err != nil {
		return Record{}, err
	}
	bad := func(format string, args ...any) (Record, error) {
		return Record{}, fmt.Errorf("%w: record %d (%s %s): %s", ErrFormat, fr.records, h.Type, h.CallNumber, fmt.Sprintf(format, args...))
	}
	switch h.Type {
	case KindLease:
		if h.Run == 0 || h.Run > callnumber.MaxRun || h.Nonce == "" {
			return bad("run %d, nonce %q", h.Run, h.Nonce)
		}
		fr.leases[h.Run] = true
		return Record{Kind: KindLease, Lease: callnumber.Lease{Run: h.Run, Version: callnumber.CurrentVersion, Authority: fr.binding.Authority,
			Scheme: fr.binding.Scheme, Nonce: h.Nonce, Program: h.Program, Host: h.Host, PID: h.PID, Note: h.Note, IssuedAt: h.IssuedAt}}, nil
	case KindMessage:
		n, err := fr.number(h.CallNumber)
		if err != nil {
			return bad("%v", err)
		}
		d, err := parseDigest(h.Digest)
		if err != nil {
			return bad("%v", err)
		}
		if h.Size < 0 || h.Size > fr.opts.MaxMessage {
			return bad("%d bytes, more than the %d accepted", h.Size, fr.opts.MaxMessage)
		}
		raw := make([]byte, h.Size)
		if _, err := io.ReadFull(fr.r, raw); err != nil {
			return Record{}, fmt.Errorf("%w inside message %s (record %d)", ErrTruncated, h.CallNumber, fr.records)
		}
		if b, err := fr.r.ReadByte(); err != nil || b != '\n' {
			if err != nil {
				return Record{}, fmt.Errorf("%w after message %s (record %d)", ErrTruncated, h.CallNumber, fr.records)
			}
			return bad("%d bytes are not followed by a line feed: its size is wrong", h.Size)
		}
		if got := store.DigestOf(raw); got != d {
			return bad("its bytes have digest %v, the feed says %v", got, d)
		}
		return Record{Kind: KindMessage, Message: store.Stored{Number: n, Raw: raw, Digest: d, MessageID: h.MessageID, List: h.List, Added: h.Added}}, nil
	case KindRemoval:
		n, err := fr.number(h.CallNumber)
		if err != nil {
			return bad("%v", err)
		}
		d, err := parseDigest(h.Digest)
		if err != nil {
			return bad("%v", err)
		}
		r := store.Removal{Number: n, Digest: d, Removed: h.RemovedAt, Reason: h.Reason}
		if h.MessageIDSum != "" {
			b, err := hex.DecodeString(h.MessageIDSum)
			if err != nil || len(b) != len(r.MessageIDSum) {
				return bad("Message-ID sum %q", h.MessageIDSum)
			}
			copy(r.MessageIDSum[:], b)
		}
		if h.Content != "" {
			if r.Content, err = parseDigest(h.Content); err != nil {
				return bad("content %v", err)
			}
		}
		if r.Removed.IsZero() {
			return bad("a removal without its date")
		}
		// A reason an origin recorded before CheckReason refused the
		// marks that set the direction of text loses the marks, and the
		// removal still holds.
		r.Reason = strings.Map(func(c rune) rune {
			if unicode.Is(unicode.Bidi_Control, c) {
				return -1
			}
			return c
		}, r.Reason)
		if err := store.CheckReason(r.Reason); err != nil {
			return bad("%v", err)
		}
		return Record{Kind: KindRemoval, Removal: r}, nil
	case KindMove:
		n, err := fr.number(h.CallNumber)
		if err != nil {
			return bad("%v", err)
		}
		if err := store.CheckList(h.List); err != nil {
			return bad("list %q: %v", h.List, err)
		}
		if h.MovedAt.IsZero() {
			return bad("a move without its date")
		}
		return Record{Kind: KindMove, Move: store.Move{Number: n, List: h.List, Moved: h.MovedAt}}, nil
	case KindEnd:
		fr.ended = true
		return Record{Kind: KindEnd, Next: store.Cursor(h.Next), More: h.More}, nil
	}
	return bad("unknown kind of record")
}

// number parses a call number of the feed's authority whose run's lease
// came before.
func (fr *Reader) number(s string) (callnumber.Number, error) {
	n, f, err := fr.codec.Parse(s)
	if err != nil {
		return 0, err
	}
	if !fr.leases[f.Run] {
		return 0, fmt.Errorf("run %d has no lease before it in the answer", f.Run)
	}
	return n, nil
}

func parseDigest(s string) (store.Digest, error) {
	var d store.Digest
	b, err := hex.DecodeString(s)
	if err != nil || len(b) != len(d) {
		return d, fmt.Errorf("digest %q is not %d bytes of hex", s, len(d))
	}
	copy(d[:], b)
	return d, nil
}
