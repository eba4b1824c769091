package riakstore

import (
	"context"
	"fmt"
	"strconv"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/batch"
	"github.com/chibrary/chibrary/store/internal/record"
)

// The binding and the leases are created with create-if-absent on the
// consistent bucket type: of two racing programs exactly one succeeds,
// and the other checks its own against the winner's.

const bindingKey = "binding"

// binding returns the store's binding, or nil if unbound; once seen it is
// cached, since it never changes.
func (s *Store) binding(ctx context.Context) (*bound, error) {
	s.cache.Lock()
	bd := s.bound
	s.cache.Unlock()
	if bd != nil {
		return bd, nil
	}
	v, err := s.fetchClaim(ctx, s.b.meta, bindingKey)
	if err != nil || v == nil {
		return nil, err
	}
	b, err := record.UnmarshalBinding(v)
	if err != nil {
		return nil, err
	}
	c, err := b.Codec()
	if err != nil {
		return nil, fmt.Errorf("cannot use the store's binding: %w", err)
	}
	bd = &bound{b: b, codec: c}
	s.cache.Lock()
	s.bound = bd
	s.cache.Unlock()
	return bd, nil
}

func (s *Store) lease(ctx context.Context, run uint32) (*callnumber.Lease, error) {
	v, err := s.fetchClaim(ctx, s.b.runs, strconv.FormatUint(uint64(run), 10))
	if err != nil || v == nil {
		return nil, err
	}
	l, err := record.UnmarshalLease(v)
	if err != nil {
		return nil, err
	}
	return &l, nil
}

// RecordLease implements store.Store.
func (s *Store) RecordLease(ctx context.Context, l callnumber.Lease) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	if err := s.recordLease(ctx, l); err != nil {
		return fmt.Errorf("cannot record lease of run %d: %w", l.Run, err)
	}
	return nil
}

func (s *Store) recordLease(ctx context.Context, l callnumber.Lease) error {
	// Bind, then record, and one more round for a lost reply.
	for range 4 {
		// The lease before the binding: a store is bound before any
		// lease is recorded in it, so a lease read here comes with its
		// binding. The other way round, a program racing the first
		// lease of a store against another authority's could read no
		// binding, then that authority's lease, and blame a reused run.
		old, err := s.lease(ctx, l.Run)
		if err != nil {
			return err
		}
		if err := s.at("lease read"); err != nil {
			return err
		}
		bd, err := s.binding(ctx)
		if err != nil {
			return err
		}
		var cur *store.Binding
		if bd != nil {
			cur = &bd.b
		}
		d, err := batch.CheckLease(cur, old, l)
		if err != nil {
			return err
		}
		if d == batch.Known {
			s.markKnown(l.Run)
			return nil
		}
		if bd == nil {
			b := store.Binding{Authority: l.Authority, Scheme: l.Scheme, Key: l.Key}
			if _, err := s.create(ctx, s.b.meta, bindingKey, record.MarshalBinding(b)); err != nil {
				return err
			}
			continue // won or lost: check the lease against what is there
		}
		if _, err := s.create(ctx, s.b.runs, strconv.FormatUint(uint64(l.Run), 10), record.MarshalLease(l)); err != nil {
			return err
		}
		// Whatever the outcome, the next round reads the lease back.
	}
	return fmt.Errorf("lease records of run %d keep changing under concurrent writers", l.Run)
}

func (s *Store) markKnown(run uint32) {
	s.cache.Lock()
	s.known[run] = true
	s.cache.Unlock()
}

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	if err := s.begin(); err != nil {
		return callnumber.Lease{}, err
	}
	defer s.end()
	l, err := s.lease(ctx, run)
	if err == nil && l == nil {
		err = fmt.Errorf("%w: archive %s has none", store.ErrNotFound, s.b.archive)
	}
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease of run %d: %w", run, err)
	}
	return *l, nil
}

// Binding implements store.Store.
func (s *Store) Binding(ctx context.Context) (store.Binding, error) {
	if err := s.begin(); err != nil {
		return store.Binding{}, err
	}
	defer s.end()
	bd, err := s.binding(ctx)
	if err == nil && bd == nil {
		err = store.ErrUnbound
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("cannot read the store's binding: %w", err)
	}
	return bd.b, nil
}
