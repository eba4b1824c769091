package riakstore

// Removals (store.Store.Remove). Riak has no transactions, so a removal
// is a sequence of steps, each of which a second Remove of the number
// redoes or finds done; a remover killed at any point leaves no removal
// or one that a second Remove completes:
//
//  1. Read the message's pack for its digest and Message-ID.
//  2. Create the removal's state (create-if-absent): of two removers,
//     both go on with the winner's record.
//  3. Write a copy of the record, indexed by time, for Removals.
//  4. Append a removal entry to the ledger, then note its slot in the
//     state (compare-and-set); the change feed hands out only that entry.
//  5. Rewrite the pack with a removal entry in place of the message and
//     without its index term.
//  5b. Index the removed message's content (store.ContentOf) in the
//     digest index, which a lookup believes once step 5 is done.
//  6. Delete a large message's own object.
//  7. Mark the state done (compare-and-set); the remover that does
//     decrements the count, so each removal counts once.

import (
	"context"
	"crypto/rand"
	"encoding/json"
	"errors"
	"fmt"
	"maps"
	"math"
	"slices"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// indexRemoved indexes removal record copies by time, in Unix seconds.
const indexRemoved = "removed_int"

// removalState is a removal's record and how far it got.
type removalState struct {
	removal store.Removal
	// Slot is the ledger slot of the removal's entry, 0 until noted
	// (step 4).
	Slot uint64
	// Done is set at step 7.
	Done bool
	// Reserved marks a RecordRemoval of a message never stored here,
	// which is not counted out.
	Reserved bool
}

type removalJSON struct {
	Record   json.RawMessage `json:"record"`
	Slot     uint64          `json:"slot,omitempty"`
	Done     bool            `json:"done,omitempty"`
	Reserved bool            `json:"reserved,omitempty"`
}

func (st removalState) marshal() []byte {
	b, err := json.Marshal(removalJSON{Record: record.MarshalRemoval(st.removal), Slot: st.Slot, Done: st.Done, Reserved: st.Reserved})
	if err != nil {
		panic(err) // plain data
	}
	return b
}

func unmarshalRemovalState(n callnumber.Number, b []byte) (*removalState, error) {
	var j removalJSON
	if err := json.Unmarshal(b, &j); err != nil {
		return nil, fmt.Errorf("%w: removal state of %v: %w", record.ErrCorrupt, n, err)
	}
	r, err := record.UnmarshalRemoval(n, j.Record)
	if err != nil {
		return nil, err
	}
	return &removalState{removal: r, Slot: j.Slot, Done: j.Done, Reserved: j.Reserved}, nil
}

// removalState reads n's removal state, or nil, and its causal context.
func (s *Store) removalState(ctx context.Context, n callnumber.Number) (*removalState, []byte, error) {
	v, vclock, err := s.fetchClaimContext(ctx, s.b.removed, n.String())
	if err != nil || v == nil {
		return nil, nil, err
	}
	st, err := unmarshalRemovalState(n, v)
	return st, vclock, err
}

// removalStates reads the removal states of numbers that have one.
func (s *Store) removalStates(ctx context.Context, numbers []callnumber.Number) (map[callnumber.Number]*removalState, error) {
	out := make(map[callnumber.Number]*removalState, len(numbers))
	var mu sync.Mutex
	err := parallel(ctx, len(numbers), s.opts.Parallel, func(ctx context.Context, i int) error {
		st, _, err := s.removalState(ctx, numbers[i])
		if err != nil || st == nil {
			return err
		}
		mu.Lock()
		out[numbers[i]] = st
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return out, nil
}

// Remove implements store.Store.
func (s *Store) Remove(ctx context.Context, n callnumber.Number, reason string) (store.Removal, error) {
	if err := s.begin(); err != nil {
		return store.Removal{}, err
	}
	defer s.end()
	r, err := s.remove(ctx, store.Removal{Number: n, Reason: reason})
	if err != nil {
		return store.Removal{}, fmt.Errorf("cannot remove message %v from archive %q: %w", n, s.b.archive, err)
	}
	return r, nil
}

func (s *Store) remove(ctx context.Context, want store.Removal) (store.Removal, error) {
	n := want.Number
	if err := record.CheckRemoval(want, false); err != nil {
		return store.Removal{}, err
	}
	bd, err := s.binding(ctx)
	if err != nil {
		return store.Removal{}, err
	}
	if bd == nil {
		return store.Removal{}, store.ErrNotFound
	}
	f, err := bd.codec.Decode(n)
	if err != nil {
		return store.Removal{}, fmt.Errorf("%w: %w", store.ErrNotFound, err)
	}
	st, vclock, err := s.removalState(ctx, n)
	if err != nil {
		return store.Removal{}, err
	}
	if st == nil {
		// Step 1.
		r, err := s.removalOf(ctx, f, want, false)
		if err != nil {
			return store.Removal{}, err
		}
		// Step 2: whether won, lost or won with a lost reply, the state
		// read next says which record holds.
		if _, err := s.create(ctx, s.b.removed, n.String(), removalState{removal: r}.marshal()); err != nil {
			return store.Removal{}, err
		}
		if st, vclock, err = s.removalState(ctx, n); err == nil && st == nil {
			err = fmt.Errorf("the removal state of %v was created, yet is not found", n)
		}
		if err != nil {
			return store.Removal{}, err
		}
		if err := s.at("remove: begun"); err != nil {
			return store.Removal{}, err
		}
	}
	if err := s.completeRemoval(ctx, n, f, st, vclock); err != nil {
		return store.Removal{}, err
	}
	return st.removal, nil
}

// RecordRemoval implements store.Store by the same steps as Remove; for a
// number never stored here, step 1 reserves the digest's index entry
// instead, and step 7 counts nothing out.
func (s *Store) RecordRemoval(ctx context.Context, r store.Removal) (store.Removal, error) {
	if err := s.begin(); err != nil {
		return store.Removal{}, err
	}
	defer s.end()
	got, err := s.recordRemoval(ctx, r)
	if err != nil {
		return store.Removal{}, fmt.Errorf("cannot record the removal of message %v in archive %q: %w", r.Number, s.b.archive, err)
	}
	return got, nil
}

func (s *Store) recordRemoval(ctx context.Context, want store.Removal) (store.Removal, error) {
	if err := record.CheckRemoval(want, true); err != nil {
		return store.Removal{}, err
	}
	n := want.Number
	bd, err := s.binding(ctx)
	if err != nil {
		return store.Removal{}, err
	}
	if bd == nil {
		return store.Removal{}, fmt.Errorf("%w: this archive has no lease recorded at all", store.ErrUnknownRun)
	}
	f, err := bd.codec.Decode(n)
	if err != nil {
		return store.Removal{}, fmt.Errorf("%w: call number %v does not decode under the archive's authority: %w", store.ErrInvalidMessage, n, err)
	}
	if l, err := s.lease(ctx, f.Run); err != nil {
		return store.Removal{}, err
	} else if l == nil {
		return store.Removal{}, fmt.Errorf("%w: run %d of %v", store.ErrUnknownRun, f.Run, n)
	}
	st, vclock, err := s.removalState(ctx, n)
	if err != nil {
		return store.Removal{}, err
	}
	if st == nil {
		r, err := s.removalOf(ctx, f, want, true)
		reserved := errors.Is(err, store.ErrNotFound)
		switch {
		case reserved:
			r = record.Reservation(want)
			// Never stored here: the digest must be free, or this
			// number's; reserve it.
			ds, err := s.lookupDigests(ctx, bd.codec, []store.Digest{want.Digest})
			if err != nil {
				return store.Removal{}, err
			}
			if other := ds[0].stored; other != 0 && other != n {
				return store.Removal{}, record.DigestElsewhere(want.Digest, other, n)
			}
			if ds[0].stored == 0 {
				if err := s.putDigest(ctx, want.Digest, n, ds[0].gen); err != nil {
					return store.Removal{}, err
				}
			}
		case err != nil:
			return store.Removal{}, err
		}
		if _, err := s.create(ctx, s.b.removed, n.String(), removalState{removal: r, Reserved: reserved}.marshal()); err != nil {
			return store.Removal{}, err
		}
		if st, vclock, err = s.removalState(ctx, n); err == nil && st == nil {
			err = fmt.Errorf("the removal state of %v was created, yet is not found", n)
		}
		if err != nil {
			return store.Removal{}, err
		}
	}
	if err := s.completeRemoval(ctx, n, f, st, vclock); err != nil {
		return store.Removal{}, err
	}
	return st.removal, nil
}

// removalOf returns the removal record (record.NewRemoval) of the
// message under want.Number, of fields f (step 1), or store.ErrNotFound.
func (s *Store) removalOf(ctx context.Context, f callnumber.Fields, want store.Removal, given bool) (store.Removal, error) {
	n := want.Number
	key := packKey(f)
	got, err := s.fetch(ctx, s.b.types.KV, s.b.packs, key, all)
	if err != nil {
		return store.Removal{}, err
	}
	p, err := mergePack(got.values, s.decoder(ctx))
	if err != nil {
		return store.Removal{}, fmt.Errorf("pack %s: %w", key, err)
	}
	e, ok := p.entries[f.Sequence]
	if !ok {
		return store.Removal{}, store.ErrNotFound
	}
	if e.removed {
		return store.Removal{}, fmt.Errorf("%w: pack %s holds a removal of %v that %s/%s does not record", record.ErrCorrupt, key, n, s.b.types.Claims, s.b.removed)
	}
	// A large message's stub holds the digest and Message-ID: its object
	// is read only for its content, if it has a Message-ID.
	var m record.Message
	if e.large {
		m, err = record.DecodeMessage(e.rec)
		if err == nil && m.MessageID != "" {
			m, err = s.entryMessage(ctx, n, e, s.decoder(ctx))
		}
	} else {
		m, err = s.decoder(ctx)(e.rec)
	}
	if err != nil {
		return store.Removal{}, fmt.Errorf("message %v: %w", n, err)
	}
	return record.NewRemoval(m, want, given, time.Now())
}

// maxNote bounds the compare-and-set rounds of a step: a state changes
// only twice, so few rounds can be lost.
const maxNote = 8

// completeRemoval does steps 3 to 7 of st, or finds them done.
func (s *Store) completeRemoval(ctx context.Context, n callnumber.Number, f callnumber.Fields, st *removalState, vclock []byte) error {
	if !st.Done {
		if err := s.putRemovalCopy(ctx, st.removal); err != nil {
			return err
		}
		if err := s.at("remove: listed"); err != nil {
			return err
		}
	}
	for round := 0; st.Slot == 0; round++ {
		if round == maxNote {
			return fmt.Errorf("the removal state of %v keeps changing", n)
		}
		slot, err := s.appendRemoval(ctx, st.removal)
		if err != nil {
			return err
		}
		if err := s.at("remove: logged"); err != nil {
			return err
		}
		next := *st
		next.Slot = slot
		if _, err := s.update(ctx, s.b.removed, n.String(), next.marshal(), vclock); err != nil {
			return err
		}
		// Whoever's entry got noted (this one's is otherwise left out of
		// the feed), read the state again.
		if st, vclock, err = s.removalState(ctx, n); err == nil && st == nil {
			err = fmt.Errorf("the removal state of %v is gone", n)
		}
		if err != nil {
			return err
		}
	}
	if err := s.at("remove: noted"); err != nil {
		return err
	}
	if err := s.removeFromPack(ctx, packKey(f), f.Sequence, st.removal); err != nil {
		return err
	}
	if err := s.at("remove: packed"); err != nil {
		return err
	}
	if err := s.indexContent(ctx, st.removal); err != nil {
		return err
	}
	if err := s.deleteLarge(ctx, n); err != nil {
		return err
	}
	if err := s.at("remove: deleted"); err != nil {
		return err
	}
	for round := 0; !st.Done; round++ {
		if round == maxNote {
			return fmt.Errorf("the removal state of %v keeps changing", n)
		}
		next := *st
		next.Done = true
		won, err := s.update(ctx, s.b.removed, n.String(), next.marshal(), vclock)
		if err != nil {
			return err
		}
		if won {
			if err := s.at("remove: done"); err != nil {
				return err
			}
			if st.Reserved {
				return nil
			}
			if _, err := s.addCount(ctx, -1); err != nil {
				return err
			}
			return nil
		}
		if st, vclock, err = s.removalState(ctx, n); err == nil && st == nil {
			err = fmt.Errorf("the removal state of %v is gone", n)
		}
		if err != nil {
			return err
		}
	}
	return nil
}

// indexContent writes r's content digest into the digest index (step
// 5b), unless it is zero or an entry believed already has it (this
// removal's, or another of the same message's).
func (s *Store) indexContent(ctx context.Context, r store.Removal) error {
	if r.Content == (store.Digest{}) {
		return nil
	}
	bd, err := s.binding(ctx)
	if err != nil || bd == nil {
		return err
	}
	ds, err := s.lookupDigests(ctx, bd.codec, []store.Digest{r.Content})
	if err != nil || ds[0].stored != 0 {
		return err
	}
	return s.putDigest(ctx, r.Content, r.Number, ds[0].gen)
}

// putRemovalCopy writes the copy of r that Removals finds (step 3).
func (s *Store) putRemovalCopy(ctx context.Context, r store.Removal) error {
	v := record.MarshalRemoval(r)
	f, err := s.fetch(ctx, s.b.types.KV, s.b.removals, r.Number.String(), sure)
	if err != nil {
		return err
	}
	if len(f.values) == 1 && string(f.values[0].Value) == string(v) {
		return nil
	}
	obj := &riak.Object{ContentType: "application/json", Value: v}
	obj.AddToIntIndex(indexRemoved, int(r.Removed.Unix()))
	_, err = s.do(ctx, func() (riak.Command, error) {
		o := *obj
		o.VClock = f.vclock
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.removals).WithKey(r.Number.String()).
			WithContent(&o).WithW(rAll).WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return fmt.Errorf("cannot store %s/%s/%s: %w", s.b.types.KV, s.b.removals, r.Number, err)
	}
	s.written.Add(int64(len(v)))
	return nil
}

// appendRemoval appends r's removal entry to the ledger and returns its
// slot.
func (s *Store) appendRemoval(ctx context.Context, r store.Removal) (uint64, error) {
	lg := &s.ledger
	lg.mu.Lock()
	defer lg.mu.Unlock()
	e := &entry{time: time.Now(), writer: s.writer, removal: r.Number}
	rand.Read(e.nonce[:])
	for {
		if err := s.syncLedger(ctx, 0); err != nil {
			return 0, err
		}
		slot := lg.end + 1
		created, err := s.create(ctx, s.b.log, slotKey(slot), appendEntry(nil, e))
		if err != nil {
			return 0, err
		}
		if !created {
			// Another writer's, or this one's with the reply lost.
			got, err := s.entry(ctx, slot)
			if err != nil {
				return 0, err
			}
			if got == nil {
				return 0, fmt.Errorf("ledger slot %d: create refused, yet not found", slot)
			}
			if got.nonce != e.nonce {
				continue // the next sync folds it
			}
			e = got
		} else {
			e.time = e.time.Truncate(time.Millisecond)
			s.entries.add(slot, e)
		}
		lg.end = slot
		lg.fold(slot, e)
		lg.remember(r.Digest) // as rememberRemovals would
		if r.Content != (store.Digest{}) {
			lg.remember(r.Content)
		}
		return slot, nil
	}
}

// removeFromPack replaces entry seq of the pack key with r's removal
// entry (step 5), until one value holding nothing of the message is left.
func (s *Store) removeFromPack(ctx context.Context, key string, seq uint16, r store.Removal) error {
	rec := record.MarshalRemoval(r)
	decode := s.decoder(ctx)
	for attempt := 0; ; attempt++ {
		f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, key, all)
		if err != nil {
			return err
		}
		p, err := mergePack(f.values, decode)
		if err != nil {
			return fmt.Errorf("pack %s: %w", key, err)
		}
		e, ok := p.entries[seq]
		clean := len(f.values) == 1 && ok && e.removed && !p.stale
		if !ok || !e.removed {
			p.entries[seq] = packEntry{seq: seq, removed: true, rec: rec}
		}
		terms, err := s.cleanTerms(ctx, p)
		if err != nil {
			return fmt.Errorf("pack %s: %w", key, err)
		}
		if clean && maps.Equal(terms, p.terms) {
			return nil
		}
		if attempt == maxSettle {
			return fmt.Errorf("%w: %s/%s/%s after %d writes", errUnsettled, s.b.types.KV, s.b.packs, key, attempt)
		}
		if err := s.at("remove: pack read"); err != nil {
			return err
		}
		vclock, _, err := s.putPack(ctx, key, p.entries, terms, f.vclock)
		if err != nil {
			return err
		}
		if vclock != nil {
			return nil // one value: this one
		}
		// A Put went in beside this write: read both and write again.
	}
}

// deleteLarge deletes n's large message object, if any (step 6), with
// the causal context of a read of every replica, so no sibling survives.
func (s *Store) deleteLarge(ctx context.Context, n callnumber.Number) error {
	for attempt := 0; ; attempt++ {
		f, err := s.fetch(ctx, s.b.types.KV, s.b.large, n.String(), all)
		if err != nil || !f.found() {
			return err
		}
		if attempt == maxSettle {
			return fmt.Errorf("%w: %s/%s/%s is still there after %d deletes", errUnsettled, s.b.types.KV, s.b.large, n, attempt)
		}
		_, err = s.do(ctx, func() (riak.Command, error) {
			return riak.NewDeleteValueCommandBuilder().
				WithBucketType(s.b.types.KV).WithBucket(s.b.large).WithKey(n.String()).
				WithVClock(f.vclock).WithW(rAll).WithTimeout(s.opts.Timeout).Build()
		})
		if err != nil {
			return fmt.Errorf("cannot delete %s/%s/%s: %w", s.b.types.KV, s.b.large, n, err)
		}
	}
}

// removalsPage is how many numbers one query of the removal index asks for.
const removalsPage = 1000

// Removals implements store.Store: the records by time, then call number,
// as in the bolt store.
func (s *Store) Removals(ctx context.Context) ([]store.Removal, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.removals(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot list the removals of archive %q: %w", s.b.archive, err)
	}
	return out, nil
}

func (s *Store) removals(ctx context.Context) ([]store.Removal, error) {
	out := []store.Removal{}
	bd, err := s.binding(ctx)
	if err != nil || bd == nil {
		return out, err
	}
	var (
		numbers []callnumber.Number
		cont    []byte
	)
	for {
		cmd, err := s.do(ctx, func() (riak.Command, error) {
			b := riak.NewSecondaryIndexQueryCommandBuilder().
				WithBucketType(s.b.types.KV).WithBucket(s.b.removals).
				WithIndexName(indexRemoved).WithIntRange(0, math.MaxInt64).
				WithMaxResults(s.removalsPage).WithTimeout(s.opts.Timeout)
			if cont != nil {
				b = b.WithContinuation(cont)
			}
			return b.Build()
		})
		if err != nil {
			return nil, err
		}
		r := cmd.(*riak.SecondaryIndexQueryCommand).Response
		if r == nil {
			break
		}
		for _, res := range r.Results {
			n, err := callnumber.Parse(string(res.ObjectKey))
			if err != nil {
				return nil, fmt.Errorf("%w: removal copy %q: %w", record.ErrCorrupt, res.ObjectKey, err)
			}
			numbers = append(numbers, n)
		}
		if len(r.Continuation) == 0 {
			break
		}
		cont = r.Continuation
	}
	slices.Sort(numbers)
	numbers = slices.Compact(numbers)
	out = make([]store.Removal, len(numbers))
	err = parallel(ctx, len(numbers), s.opts.Parallel, func(ctx context.Context, i int) error {
		n := numbers[i]
		f, err := s.fetch(ctx, s.b.types.KV, s.b.removals, n.String(), sure)
		if err != nil {
			return err
		}
		if !f.found() {
			return fmt.Errorf("%w: the removal index names %v, whose record copy is not found", record.ErrCorrupt, n)
		}
		// Siblings are copies of one record.
		out[i], err = record.UnmarshalRemoval(n, f.values[0].Value)
		return err
	})
	if err != nil {
		return nil, err
	}
	slices.SortStableFunc(out, func(a, b store.Removal) int {
		if c := a.Removed.Compare(b.Removed); c != 0 {
			return c
		}
		return int(int64(a.Number) - int64(b.Number))
	})
	return out, nil
}
