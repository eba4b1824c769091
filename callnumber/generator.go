package callnumber

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Generator hands out call numbers, taking a new run from its RunSource when
// one is used up; it is safe for concurrent use. It refuses with ErrLease a
// lease of another authority, scheme or key, or a repeated run.
type Generator struct {
	src RunSource

	// sem serialises refills; not a mutex, so that a waiter can give up.
	sem chan struct{}
	cur atomic.Pointer[genRun]
}

type genRun struct {
	lease Lease
	codec *Codec
	// next only grows; 64 bits so that callers retrying while the source
	// fails can never wrap it around into numbers already handed out.
	next atomic.Uint64
}

// NewGenerator returns a generator that takes its runs from src.
func NewGenerator(src RunSource) *Generator {
	return &Generator{src: src, sem: make(chan struct{}, 1)}
}

// Next returns a call number no generator of the authority handed out
// before. Source errors are wrapped; an unusable lease gives ErrLease.
func (g *Generator) Next(ctx context.Context) (Number, error) {
	for {
		r := g.cur.Load()
		if r != nil {
			if seq := r.next.Add(1) - 1; seq < SequencesPerRun {
				return r.number(seq), nil
			}
		}
		if err := g.refill(ctx, r); err != nil {
			return 0, err
		}
	}
}

func (r *genRun) number(seq uint64) Number {
	v := uint64(r.lease.Version)<<versionShift | uint64(r.lease.Run)<<runShift | seq
	return r.codec.apply(v)
}

// refill replaces the exhausted run old, unless another goroutine did.
func (g *Generator) refill(ctx context.Context, old *genRun) error {
	select {
	case g.sem <- struct{}{}:
	case <-ctx.Done():
		return fmt.Errorf("cannot take a new run: %w", context.Cause(ctx))
	}
	defer func() { <-g.sem }()
	if g.cur.Load() != old {
		return nil
	}
	l, err := g.src.NewRun(ctx)
	if err != nil {
		return fmt.Errorf("cannot take a new run: %w", err)
	}
	if err := l.Validate(); err != nil {
		return fmt.Errorf("cannot use run %d: %w", l.Run, err)
	}
	var codec *Codec
	if old != nil {
		switch p := old.lease; {
		case p.Authority != l.Authority:
			return fmt.Errorf("%w: run %d comes from authority %s, earlier runs from %s", ErrLease, l.Run, l.Authority, p.Authority)
		case p.Scheme != l.Scheme || p.Key != l.Key:
			return fmt.Errorf("%w: run %d of authority %s has another shuffle scheme or key than run %d", ErrLease, l.Run, l.Authority, p.Run)
		case p.Run == l.Run:
			return fmt.Errorf("%w: run %d of authority %s issued twice", ErrLease, l.Run, l.Authority)
		}
		codec = old.codec
	} else if codec, err = NewCodec(l.Scheme, l.Key); err != nil {
		return err
	}
	g.cur.Store(&genRun{lease: l, codec: codec})
	return nil
}
