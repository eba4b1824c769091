package riakstore

// Moves (store.Store.Move). Records in packs are written once, so a move
// is kept beside them: first a ledger entry for the change feed, then
// ARCHIVE.moves/CALLNUMBER (w = all) with the list, the date and the
// entry's slot, which Get reads beside the pack; of siblings, the later
// slot wins, as in the feed. A mover killed between the two leaves Get
// answering the old list until the message is moved there again.

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// moveOf reads the latest move of n, or nil.
func (s *Store) moveOf(ctx context.Context, n callnumber.Number) (*store.Move, []byte, error) {
	f, err := s.fetch(ctx, s.b.types.KV, s.b.moves, n.String(), quick)
	if err != nil {
		return nil, nil, err
	}
	var best *store.Move
	var bestSlot uint64
	for _, v := range f.values {
		m, slot, err := record.UnmarshalMove(n, v.Value)
		if err != nil {
			return nil, nil, err
		}
		if best == nil || slot > bestSlot {
			best, bestSlot = &m, slot
		}
	}
	return best, f.vclock, nil
}

// Move implements store.Store.
func (s *Store) Move(ctx context.Context, n callnumber.Number, list string) (store.Move, error) {
	if err := s.begin(); err != nil {
		return store.Move{}, err
	}
	defer s.end()
	m, err := s.move(ctx, store.Move{Number: n, List: list}, false)
	if err != nil {
		return store.Move{}, fmt.Errorf("cannot move message %v in archive %q: %w", n, s.b.archive, err)
	}
	return m, nil
}

// RecordMove implements store.Store.
func (s *Store) RecordMove(ctx context.Context, m store.Move) (store.Move, error) {
	if err := s.begin(); err != nil {
		return store.Move{}, err
	}
	defer s.end()
	got, err := s.move(ctx, m, true)
	if err != nil {
		return store.Move{}, fmt.Errorf("cannot record the move of message %v in archive %q: %w", m.Number, s.b.archive, err)
	}
	return got, nil
}

func (s *Store) move(ctx context.Context, want store.Move, given bool) (store.Move, error) {
	n := want.Number
	if err := record.CheckMove(want, given); err != nil {
		return store.Move{}, err
	}
	bd, err := s.binding(ctx)
	if err != nil {
		return store.Move{}, err
	}
	if bd == nil {
		if given {
			return store.Move{}, fmt.Errorf("%w: this archive has no lease recorded at all", store.ErrUnknownRun)
		}
		return store.Move{}, store.ErrNotFound
	}
	cur := store.Move{Number: n}
	m, err := s.get(ctx, n)
	switch {
	case err == nil:
		cur.List = m.List
	case errors.Is(err, store.ErrNotFound) && given:
		f, err := bd.codec.Decode(n)
		if err != nil {
			return store.Move{}, fmt.Errorf("%w: call number %v does not decode under the archive's authority: %w", store.ErrInvalidMessage, n, err)
		}
		if l, err := s.lease(ctx, f.Run); err != nil {
			return store.Move{}, err
		} else if l == nil {
			return store.Move{}, fmt.Errorf("%w: run %d of %v", store.ErrUnknownRun, f.Run, n)
		}
	default:
		return store.Move{}, err
	}
	last, vclock, err := s.moveOf(ctx, n)
	if err != nil {
		return store.Move{}, err
	}
	if last != nil {
		cur.Moved = last.Moved
		cur.List = last.List
	}
	if cur.List == want.List {
		return cur, nil
	}
	out := record.NewMove(want, given, time.Now())
	slot, err := s.appendMove(ctx, out)
	if err != nil {
		return store.Move{}, err
	}
	if err := s.at("move-logged"); err != nil {
		return store.Move{}, err
	}
	v := record.MarshalMove(out, slot)
	_, err = s.do(ctx, func() (riak.Command, error) {
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.moves).WithKey(n.String()).
			WithContent(&riak.Object{ContentType: "application/json", Value: v, VClock: vclock}).
			WithW(rAll).WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return store.Move{}, fmt.Errorf("cannot store %s/%s/%s: %w", s.b.types.KV, s.b.moves, n, err)
	}
	s.written.Add(int64(len(v)))
	return out, nil
}

// appendMove appends a move entry to the ledger and returns its slot.
func (s *Store) appendMove(ctx context.Context, m store.Move) (uint64, error) {
	lg := &s.ledger
	lg.mu.Lock()
	defer lg.mu.Unlock()
	e := &entry{time: time.Now(), writer: s.writer, move: m}
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
			got, err := s.entry(ctx, slot)
			if err != nil {
				return 0, err
			}
			if got == nil {
				return 0, fmt.Errorf("ledger slot %d: create refused, yet not found", slot)
			}
			if got.nonce != e.nonce {
				continue // another writer's: the next sync folds it
			}
			e = got
		} else {
			e.time = e.time.Truncate(time.Millisecond)
			s.entries.add(slot, e)
		}
		lg.end = slot
		lg.fold(slot, e)
		return slot, nil
	}
}
