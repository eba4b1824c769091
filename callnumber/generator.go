package callnumber

import (
	"context"
	"fmt"
	"sync/atomic"
)

// Generator hands out call numbers from run leases. It takes a run from its
// RunSource on first use and whenever the 16,384 sequence numbers of its
// current run are used up, transparently to the caller. It is safe for
// concurrent use; Next does not allocate except when it takes a new run.
//
// Every lease it takes must come from the same authority, with the same
// scheme and key, and must not repeat the run it replaces: a Generator
// refuses anything else with ErrLease rather than risk handing out a number
// twice. Make one with NewGenerator; the zero Generator has no source.
type Generator struct {
	src RunSource

	// sem serialises taking a new run (a one-slot semaphore rather than a
	// mutex, so that a caller waiting for another's refill can give up when
	// its context ends).
	sem chan struct{}
	cur atomic.Pointer[genRun]
}

type genRun struct {
	lease Lease
	codec *Codec
	// next is the next sequence number to hand out. It only grows; 64 bits
	// so that callers that keep trying while the run source fails can
	// never wrap it around into numbers already handed out.
	next atomic.Uint64
}

// NewGenerator returns a generator that takes its runs from src.
func NewGenerator(src RunSource) *Generator {
	return &Generator{src: src, sem: make(chan struct{}, 1)}
}

// Next returns a call number never handed out before by any generator of
// the same authority. A failure of the run source is returned wrapped, so
// errors.Is finds the source's error; a lease the Generator cannot use is
// refused with ErrLease.
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

// refill replaces the exhausted run old with a new one, unless another
// goroutine already did.
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

// Lease returns the generator's current lease, and false before its first
// run.
func (g *Generator) Lease() (Lease, bool) {
	if r := g.cur.Load(); r != nil {
		return r.lease, true
	}
	return Lease{}, false
}
