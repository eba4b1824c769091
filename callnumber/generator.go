package callnumber

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
)

// Generator hands out call numbers from run leases. It takes a run from its
// RunSource on first use and whenever the 16,384 sequence numbers of its
// current run are used up, transparently to the caller. It is safe for
// concurrent use; Next does not allocate except when it takes a new run.
type Generator struct {
	src RunSource

	mu  sync.Mutex // serialises taking a new run
	cur atomic.Pointer[genRun]
}

type genRun struct {
	lease Lease
	codec *Codec
	next  atomic.Uint32 // next sequence number to hand out
}

// NewGenerator returns a generator that takes its runs from src.
func NewGenerator(src RunSource) *Generator {
	return &Generator{src: src}
}

// Next returns a call number never handed out before by any generator of
// the same authority. A failure of the run source is returned as is.
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

func (r *genRun) number(seq uint32) Number {
	v := uint64(r.lease.Version)<<versionShift | uint64(r.lease.Run)<<runShift | uint64(seq)
	return Number(r.codec.perm.Apply(v))
}

// refill replaces the exhausted run old with a new one, unless another
// goroutine already did.
func (g *Generator) refill(ctx context.Context, old *genRun) error {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.cur.Load() != old {
		return nil
	}
	l, err := g.src.NewRun(ctx)
	if err != nil {
		return fmt.Errorf("cannot take a new run: %w", err)
	}
	if err := l.Validate(); err != nil {
		return err
	}
	var codec *Codec
	if old != nil && old.lease.Scheme == l.Scheme && old.lease.Key == l.Key {
		codec = old.codec
	} else if codec, err = NewCodec(l.Scheme, l.Key); err != nil {
		return err
	}
	if old != nil && old.lease.Authority != l.Authority {
		return fmt.Errorf("%w: run %d comes from authority %s, earlier runs from %s", ErrLease, l.Run, l.Authority, old.lease.Authority)
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
