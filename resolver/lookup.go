package resolver

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync/atomic"
	"text/tabwriter"
	"time"
	"unicode"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// ErrMalformed is wrapped by the error for a string that is not shaped
// like a call number: not 8 base62 characters.
var ErrMalformed = errors.New("resolver: malformed call number")

// CheckSyntax checks that s is 8 base62 characters, the shape of a call
// number; the error wraps ErrMalformed and the *callnumber.ParseError
// saying why.
func CheckSyntax(s string) error {
	_, err := callnumber.Parse(s)
	if errors.Is(err, callnumber.ErrLength) || errors.Is(err, callnumber.ErrCharacter) {
		return fmt.Errorf("%w: %w", ErrMalformed, err)
	}
	return nil
}

// malformed says to a reader why err's text is not a call number.
func malformed(err error) string {
	var pe *callnumber.ParseError
	if errors.As(err, &pe) {
		return "Not a call number: " + pe.Explain() + "."
	}
	return "Not a call number."
}

// Resolve parses s as a call number of st's archive. An s that is not 8
// base62 characters gives an error wrapping ErrMalformed (and the
// *callnumber.ParseError saying why). One that is, but that this archive
// cannot have issued (out of range, of an unknown version, of run 0),
// gives an error wrapping store.ErrNotFound: to a reader it is simply no
// message (most likely a typo), as much as a number never issued. An
// unbound store (nothing written yet) has no codec: every s in range
// resolves, with zero Fields, and is then not found.
func Resolve(ctx context.Context, st store.Store, s string) (callnumber.Number, callnumber.Fields, error) {
	return newCodecCache(st).resolve(ctx, s)
}

// codecCache remembers the codec of the store's binding: a store is bound
// once and forever, so after the first success the store is not asked
// again (each question is a file open for the bolt backend).
type codecCache struct {
	st    store.Store
	codec atomic.Pointer[callnumber.Codec]
}

func newCodecCache(st store.Store) *codecCache { return &codecCache{st: st} }

func (c *codecCache) get(ctx context.Context) (*callnumber.Codec, error) {
	if cd := c.codec.Load(); cd != nil {
		return cd, nil
	}
	b, err := c.st.Binding(ctx)
	if err != nil {
		return nil, err
	}
	cd, err := b.Codec()
	if err != nil {
		return nil, fmt.Errorf("cannot use the store's binding: %w", err)
	}
	c.codec.Store(cd)
	return cd, nil
}

func (c *codecCache) resolve(ctx context.Context, s string) (callnumber.Number, callnumber.Fields, error) {
	if err := CheckSyntax(s); err != nil {
		return 0, callnumber.Fields{}, err
	}
	n, err := callnumber.Parse(s)
	if err != nil { // out of range
		return 0, callnumber.Fields{}, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	cd, err := c.get(ctx)
	if errors.Is(err, store.ErrUnbound) {
		return n, callnumber.Fields{}, nil
	}
	if err != nil {
		return 0, callnumber.Fields{}, fmt.Errorf("cannot read the store's binding: %w", err)
	}
	n, f, err := cd.Parse(s)
	if err != nil { // a version or run this archive does not have
		return 0, callnumber.Fields{}, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	return n, f, nil
}

// Inspection is what `resolver inspect` shows about a call number.
type Inspection struct {
	CallNumber callnumber.Number `json:"callnumber"`
	Version    uint8             `json:"version"`
	Run        uint32            `json:"run"`
	Sequence   uint16            `json:"sequence"`
	// Lease is the lease of the run as the store recorded it (no key).
	Lease     callnumber.Lease `json:"lease"`
	MessageID string           `json:"message_id"`
	List      string           `json:"list"`
	Digest    string           `json:"digest"`
	Size      int              `json:"size"`
	Added     time.Time        `json:"added"`
	// Removed says when and why the message was removed; its
	// Message-ID, list, size and time of archiving are gone with it.
	Removed *InspectedRemoval `json:"removed,omitempty"`
}

// InspectedRemoval is the removal of an inspected message.
type InspectedRemoval struct {
	RemovedAt time.Time `json:"removed_at"`
	Reason    string    `json:"reason"`
}

// Inspect looks up a stored message and the lease of its run. It fails
// with ErrMalformed for a malformed s and store.ErrNotFound for a message
// the store does not hold (see Resolve).
func Inspect(ctx context.Context, st store.Store, s string) (Inspection, error) {
	n, f, err := Resolve(ctx, st, s)
	if err != nil {
		return Inspection{}, err
	}
	m, err := st.Get(ctx, n)
	var removed *store.RemovedError
	if errors.As(err, &removed) {
		m, err = store.Stored{Digest: removed.Removal.Digest}, nil
	}
	if err != nil {
		return Inspection{}, err // the store's errors name the message
	}
	l, err := st.Lease(ctx, f.Run)
	if err != nil {
		return Inspection{}, err // and the run
	}
	l.Key = [32]byte{} // never shown, whatever a backend returns
	in := Inspection{
		CallNumber: n, Version: f.Version, Run: f.Run, Sequence: f.Sequence,
		Lease: l, MessageID: m.MessageID, List: m.List, Digest: m.Digest.String(),
		Size: len(m.Raw), Added: m.Added,
	}
	if removed != nil {
		in.Removed = &InspectedRemoval{RemovedAt: removed.Removal.Removed.UTC(), Reason: removed.Removal.Reason}
	}
	return in, nil
}

// WriteText writes the inspection as aligned "name value" lines. Values
// that came from mail or from a lease's holder are shown with control
// characters replaced, so they cannot drive a terminal.
func (in Inspection) WriteText(w io.Writer) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	line := func(name string, v any) { fmt.Fprintf(tw, "%s\t%s\n", name, printable(fmt.Sprint(v))) }
	line("callnumber", in.CallNumber)
	line("version", in.Version)
	line("run", in.Run)
	line("sequence", in.Sequence)
	if r := in.Removed; r != nil {
		line("removed", formatTime(r.RemovedAt))
		line("removed.reason", r.Reason)
		line("digest", "sha256:"+in.Digest)
	} else {
		line("message-id", in.MessageID)
		line("list", in.List)
		line("digest", "sha256:"+in.Digest)
		line("size", fmt.Sprintf("%d bytes", in.Size))
		line("added", formatTime(in.Added))
	}
	line("lease.authority", in.Lease.Authority)
	line("lease.scheme", in.Lease.Scheme)
	line("lease.nonce", in.Lease.Nonce)
	line("lease.program", in.Lease.Program)
	line("lease.host", in.Lease.Host)
	line("lease.pid", in.Lease.PID)
	line("lease.note", in.Lease.Note)
	line("lease.issued-at", formatTime(in.Lease.IssuedAt))
	return tw.Flush()
}

func formatTime(t time.Time) string {
	if t.IsZero() {
		return "-"
	}
	return t.UTC().Format(time.RFC3339)
}

func printable(s string) string {
	return strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return '?'
		}
		return r
	}, s)
}
