// Package batch holds the decisions every store backend shares: what a Put
// does with each message of a batch, and whether a lease may be recorded,
// so that bolt and Riak refuse the same batches with the same words.
package batch

import (
	"bytes"
	"context"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// Lookup reads what a backend has stored: over a transaction (bolt) or
// prefetched values (Riak).
type Lookup interface {
	// HasLease reports whether a lease is recorded for run.
	HasLease(ctx context.Context, run uint32) (bool, error)
	// Raw returns the raw bytes stored under n, and false if n is free.
	Raw(ctx context.Context, n callnumber.Number) ([]byte, bool, error)
	// Digest returns the call number indexed under d, and false if none:
	// d a message's digest, or a removed message's content (ContentOf),
	// which shares the index.
	Digest(ctx context.Context, d store.Digest) (callnumber.Number, bool, error)
	// Removal returns the removal record of n, or nil.
	Removal(ctx context.Context, n callnumber.Number) (*store.Removal, error)
}

// NoRemovals may be implemented by a Lookup that can tell cheaply that its
// store holds no removal record at all. Then Make does not look up each
// new message's content (store.ContentOf): only a removal indexes one, so
// none could be found, and the lookup is a second random read of the
// digest index for every message, whose cost grows with the archive.
type NoRemovals interface {
	NoRemovals(ctx context.Context) (bool, error)
}

// Action is what Put does with one message.
type Action uint8

const (
	// Write: the message is new; store it and index it.
	Write Action = iota
	// Duplicate: the digest is stored under another number, or came earlier.
	Duplicate
	// Retried: the same bytes are stored under this very number already (a
	// retried batch); a backend without transactions may repair its indexes.
	Retried
)

// Plan is the decision for a batch, per message in the batch's order.
type Plan struct {
	Actions []Action
	Results []store.Result
	Fields  []callnumber.Fields
}

// CheckDigests sets each zero Digest to DigestOf(Raw) and refuses a batch
// in which another Digest is not (ErrInvalidMessage): a wrong digest could
// pass a new message off as a duplicate, unstored. It needs no lock: call
// it before taking one.
func CheckDigests(msgs []store.Message) error {
	workers := min(runtime.GOMAXPROCS(0), len(msgs))
	errs := make([]error, len(msgs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(msgs); i += workers {
				m := &msgs[i]
				d := store.DigestOf(m.Raw)
				if m.Digest == (store.Digest{}) {
					m.Digest = d
				} else if d != m.Digest {
					errs[i] = fmt.Errorf("%w: message %d of the batch (call number %v): its Digest %.16s… is not the digest of its %d raw bytes (%.16s…); nothing of this batch was written", store.ErrInvalidMessage, i+1, m.Number, m.Digest, len(m.Raw), d)
				}
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Make decides what Put does with msgs, or returns the error that refuses
// the whole batch: a number that does not decode (ErrInvalidMessage), a run
// without a lease (ErrUnknownRun), a number given other bytes than it holds,
// held before its removal, or got earlier in the batch (ErrNumberTaken).
// The same bytes under the same number are a retry; a digest seen earlier
// or stored is a duplicate of that number, Removed if it was removed; a
// message whose content (store.ContentOf) is a removed message's is a
// duplicate of that one, Removed.
func Make(ctx context.Context, codec *callnumber.Codec, msgs []store.Message, look Lookup) (Plan, error) {
	p := Plan{
		Actions: make([]Action, len(msgs)),
		Results: make([]store.Result, len(msgs)),
		Fields:  make([]callnumber.Fields, len(msgs)),
	}
	leased := make(map[uint32]bool)
	byNumber := make(map[callnumber.Number]int, len(msgs)) // first index in batch
	byDigest := make(map[store.Digest]callnumber.Number, len(msgs))
	removed := make(map[callnumber.Number]bool) // of the numbers in byDigest
	contents := true                            // look up new messages' contents
	if nr, ok := look.(NoRemovals); ok {
		none, err := nr.NoRemovals(ctx)
		if err != nil {
			return Plan{}, err
		}
		contents = !none
	}
	for i := range msgs {
		m := &msgs[i]
		f, err := codec.Decode(m.Number)
		if err != nil {
			return Plan{}, fmt.Errorf("%w: message %d of the batch: call number %v does not decode under the store's authority: %w; nothing of this batch was written", store.ErrInvalidMessage, i+1, m.Number, err)
		}
		p.Fields[i] = f
		known, ok := leased[f.Run]
		if !ok {
			if known, err = look.HasLease(ctx, f.Run); err != nil {
				return Plan{}, err
			}
			leased[f.Run] = known
		}
		if !known {
			return Plan{}, fmt.Errorf("%w: call number %v (%v) is in run %d, and no lease for run %d was recorded in this store: record the run's lease before putting messages under it (a program must take its runs from the store's authority); nothing of this batch was written", store.ErrUnknownRun, m.Number, f, f.Run, f.Run)
		}
		p.Results[i] = store.Result{Number: m.Number}
		if j, ok := byNumber[m.Number]; ok {
			if !bytes.Equal(msgs[j].Raw, m.Raw) {
				return Plan{}, fmt.Errorf("%w: call number %v (%v) is given to messages %d and %d of the same batch, with different bytes: the program numbering them handed a number out twice; nothing of this batch was written", store.ErrNumberTaken, m.Number, f, j+1, i+1)
			}
			p.Actions[i] = Retried
			p.Results[i].Duplicate = true
			continue
		}
		byNumber[m.Number] = i
		raw, stored, err := look.Raw(ctx, m.Number)
		if err != nil {
			return Plan{}, err
		}
		if !stored {
			r, err := look.Removal(ctx, m.Number)
			if err != nil {
				return Plan{}, err
			}
			if r != nil && r.Digest != m.Digest {
				return Plan{}, fmt.Errorf("%w: call number %v (%v) held a message that was removed on %s, and is never filled again; the batch gives it other bytes (digest %.16s…): was the run leased twice? Check the run's lease with `resolver inspect %v`; nothing of this batch was written", store.ErrNumberTaken, m.Number, f, r.Removed.UTC().Format(time.RFC3339), m.Digest, m.Number)
			}
			if r != nil {
				p.Actions[i] = Duplicate // nothing to write or repair
				p.Results[i] = store.Result{Number: m.Number, Duplicate: true, Removed: true}
				byDigest[m.Digest] = m.Number
				removed[m.Number] = true
				continue
			}
		}
		if stored {
			if !bytes.Equal(raw, m.Raw) {
				return Plan{}, fmt.Errorf("%w: call number %v (%v) already holds a %d-byte message with digest %.16s…; the batch gives it %d bytes with digest %.16s…: was the run leased twice (a run authority restored from an old backup, or two authorities sharing an ID)? Check the run's lease with `resolver inspect %v`; nothing of this batch was written", store.ErrNumberTaken, m.Number, f, len(raw), store.DigestOf(raw), len(m.Raw), m.Digest, m.Number)
			}
			p.Actions[i] = Retried
			p.Results[i].Duplicate = true
			byDigest[m.Digest] = m.Number
			continue
		}
		if n, ok := byDigest[m.Digest]; ok {
			p.Actions[i] = Duplicate
			p.Results[i] = store.Result{Number: n, Duplicate: true, Removed: removed[n]}
			continue
		}
		n, ok, err := look.Digest(ctx, m.Digest)
		if err != nil {
			return Plan{}, err
		}
		if ok {
			r, err := look.Removal(ctx, n)
			if err != nil {
				return Plan{}, err
			}
			p.Actions[i] = Duplicate
			p.Results[i] = store.Result{Number: n, Duplicate: true, Removed: r != nil}
			byDigest[m.Digest] = n
			removed[n] = r != nil
			continue
		}
		// Only a removal indexes a content: none to find if nothing was removed.
		if contents {
			if n, ok, err := removedContent(ctx, m, look); err != nil {
				return Plan{}, err
			} else if ok {
				p.Actions[i] = Duplicate
				p.Results[i] = store.Result{Number: n, Duplicate: true, Removed: true}
				byDigest[m.Digest] = n
				removed[n] = true
				continue
			}
		}
		p.Actions[i] = Write
		byDigest[m.Digest] = m.Number
	}
	return p, nil
}

// removedContent returns the number of the removed message m is a copy
// of (store.ContentOf, store.Removal.Content), and false if none.
func removedContent(ctx context.Context, m *store.Message, look Lookup) (callnumber.Number, bool, error) {
	c := store.ContentOf(m.Raw, m.MessageID)
	if c == (store.Digest{}) {
		return 0, false, nil
	}
	n, ok, err := look.Digest(ctx, c)
	if err != nil || !ok {
		return 0, false, err
	}
	r, err := look.Removal(ctx, n)
	if err != nil || r == nil || r.Content != c {
		return 0, false, err
	}
	return n, true, nil
}

// LeaseDecision is what RecordLease does.
type LeaseDecision uint8

const (
	// Record: remember the lease (and bind the store if it is unbound).
	Record LeaseDecision = iota
	// Known: the same lease is already recorded; do nothing.
	Known
)

// CheckLease decides whether l may be recorded in a store bound to bound
// (nil if unbound) that has old recorded for l.Run (nil if none).
func CheckLease(bound *store.Binding, old *callnumber.Lease, l callnumber.Lease) (LeaseDecision, error) {
	if err := l.Validate(); err != nil {
		return 0, fmt.Errorf("cannot record lease of run %d: %w", l.Run, err)
	}
	if bound == nil {
		if l.Key == ([32]byte{}) {
			return 0, fmt.Errorf("cannot record lease of run %d: %w: the first lease of a store must carry the authority's key, which the store is bound to", l.Run, callnumber.ErrLease)
		}
	} else {
		switch {
		case l.Authority != bound.Authority:
			return 0, fmt.Errorf("%w: run %d (%s) comes from run authority %s, and this store is bound to authority %s: point the program at the authority that fills this store (--coordinator or --data), or use another store", store.ErrForeignAuthority, l.Run, describe(l), l.Authority, bound.Authority)
		case l.Scheme != bound.Scheme:
			return 0, fmt.Errorf("%w: run %d comes from authority %s with shuffle scheme %q, and this store holds scheme %q for that authority: the authority's database was replaced or tampered with", store.ErrForeignAuthority, l.Run, l.Authority, l.Scheme, bound.Scheme)
		case l.Key != ([32]byte{}) && l.Key != bound.Key:
			return 0, fmt.Errorf("%w: run %d comes from authority %s with another shuffle key than the one this store is bound to: the authority's database was replaced or tampered with", store.ErrForeignAuthority, l.Run, l.Authority)
		}
	}
	if old != nil {
		if old.Nonce == l.Nonce && old.Authority == l.Authority {
			return Known, nil
		}
		return 0, fmt.Errorf("%w: run %d: this store recorded lease nonce %s (%s), and the new lease has nonce %s (%s): was the run authority (runs.db) restored from an old backup? It would hand out runs again and overwrite messages; refusing. Check the authority's next run against the highest run in this store", store.ErrRunReused, l.Run, old.Nonce, describe(*old), l.Nonce, describe(l))
	}
	return Record, nil
}

func describe(l callnumber.Lease) string {
	s := l.Program
	if s == "" {
		s = "a program"
	}
	if l.Host != "" {
		s += " on " + l.Host
	}
	if l.PID != 0 {
		s += fmt.Sprintf(" pid %d", l.PID)
	}
	if !l.IssuedAt.IsZero() {
		s += ", issued " + l.IssuedAt.UTC().Format(time.RFC3339)
	}
	return s
}
