package callnumber

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/shuffle"
)

func mustNext(t *testing.T, g *Generator) Number {
	t.Helper()
	n, err := g.Next(context.Background())
	if err != nil {
		t.Fatalf("Next() = %v", err)
	}
	return n
}

func TestGeneratorHandOver(t *testing.T) {
	for _, scheme := range schemes {
		t.Run(string(scheme), func(t *testing.T) {
			const runA, runB = 41, 42
			src := newRunSource(scheme, runA)
			g := NewGenerator(src)
			c := mustCodec(t, scheme)
			if l, ok := g.Lease(); ok {
				t.Fatalf("Lease() before Next = %v, true, want false", l)
			}
			for seq := range SequencesPerRun {
				n := mustNext(t, g)
				f, err := c.Decode(n)
				if want := (Fields{Run: runA, Sequence: uint16(seq)}); err != nil || f != want {
					t.Fatalf("number %d: Decode(%s) = %v, %v, want %v", seq, n, f, err, want)
				}
			}
			if l, _ := g.Lease(); l.Run != runA {
				t.Errorf("Lease().Run after %d numbers = %d, want %d", SequencesPerRun, l.Run, runA)
			}
			n := mustNext(t, g)
			if f, err := c.Decode(n); err != nil || f != (Fields{Run: runB}) {
				t.Fatalf("number %d: Decode(%s) = %v, %v, want run %d sequence 0", SequencesPerRun, n, f, err, runB)
			}
			if l, ok := g.Lease(); !ok || l.Run != runB || l.Nonce != fmt.Sprintf("nonce-%d", runB) {
				t.Errorf("Lease() = %+v, %v, want run %d", l, ok, runB)
			}
			if got, want := src.runs(), []uint32{runA, runB}; !slices.Equal(got, want) {
				t.Errorf("runs taken = %v, want %v", got, want)
			}
		})
	}
}

// TestGeneratorConcurrent draws 1,000,000 numbers from 8 goroutines: none
// repeats, each decodes to a run the source issued, and every sequence
// number of the runs used up was handed out exactly once.
func TestGeneratorConcurrent(t *testing.T) {
	const goroutines, perGoroutine = 8, 125_000
	const total = goroutines * perGoroutine
	for _, scheme := range schemes {
		t.Run(string(scheme), func(t *testing.T) {
			if testing.Short() && scheme == shuffle.Mix {
				t.Skip("short: bits only")
			}
			src := newRunSource(scheme, 1000)
			g := NewGenerator(src)
			drawn := make([][]Number, goroutines)
			errs := make([]error, goroutines)
			var wg sync.WaitGroup
			for i := range goroutines {
				wg.Go(func() {
					out := make([]Number, 0, perGoroutine)
					for range perGoroutine {
						n, err := g.Next(context.Background())
						if err != nil {
							errs[i] = err
							return
						}
						out = append(out, n)
					}
					drawn[i] = out
				})
			}
			wg.Wait()
			if err := errors.Join(errs...); err != nil {
				t.Fatalf("Next() = %v", err)
			}
			c := mustCodec(t, scheme)
			seen := make(map[Number]struct{}, total)
			perRun := map[uint32]int{}
			for _, out := range drawn {
				for _, n := range out {
					if _, dup := seen[n]; dup {
						f, _ := c.Decode(n)
						t.Fatalf("%s (%v) handed out twice", n, f)
					}
					seen[n] = struct{}{}
					f, err := c.Decode(n)
					if err != nil {
						t.Fatalf("Decode(%s) = %v", n, err)
					}
					perRun[f.Run]++
				}
			}
			if len(seen) != total {
				t.Fatalf("drew %d distinct numbers, want %d", len(seen), total)
			}
			runs := src.runs()
			wantRuns := (total + SequencesPerRun - 1) / SequencesPerRun
			if len(runs) != wantRuns {
				t.Errorf("took %d runs, want %d", len(runs), wantRuns)
			}
			for i, run := range runs {
				want := SequencesPerRun
				if i == len(runs)-1 {
					want = total - (len(runs)-1)*SequencesPerRun
				}
				if perRun[run] != want {
					t.Errorf("run %d: %d numbers, want %d", run, perRun[run], want)
				}
			}
			if len(perRun) != len(runs) {
				t.Errorf("numbers come from %d runs, source issued %d", len(perRun), len(runs))
			}
		})
	}
}

func TestGeneratorSourceFailure(t *testing.T) {
	errDown := errors.New("authority unreachable")
	src := newRunSource(shuffle.Bits, 7)
	src.setFail(errDown)
	g := NewGenerator(src)

	// The first run cannot be had.
	if n, err := g.Next(context.Background()); !errors.Is(err, errDown) || n != 0 {
		t.Fatalf("Next() with a failing source = %s, %v, want 0, %v", n, err, errDown)
	}
	if _, ok := g.Lease(); ok {
		t.Errorf("Lease() after a failed first run = true, want false")
	}

	// The source recovers: run 7 is used up, then the source fails again.
	src.setFail(nil)
	for range SequencesPerRun {
		mustNext(t, g)
	}
	src.setFail(errDown)
	for i := range 3 {
		if n, err := g.Next(context.Background()); !errors.Is(err, errDown) || n != 0 {
			t.Fatalf("Next() #%d after run 7 with a failing source = %s, %v, want 0, %v", i, n, err, errDown)
		}
	}

	// It recovers again: the next number is the first of run 8.
	src.setFail(nil)
	c := mustCodec(t, shuffle.Bits)
	n := mustNext(t, g)
	if f, err := c.Decode(n); err != nil || f != (Fields{Run: 8}) {
		t.Errorf("Decode(%s) after recovery = %v, %v, want run 8 sequence 0", n, f, err)
	}
}

func TestGeneratorRefusesLeases(t *testing.T) {
	good := func(run uint32) Lease {
		return Lease{Run: run, Authority: "a1", Scheme: shuffle.Bits, Key: testKey, Nonce: fmt.Sprint("n", run)}
	}
	otherKey := testKey
	otherKey[0] ^= 1
	tests := []struct {
		name  string
		first Lease // taken before second, unless it is refused itself
		bad   func(l Lease) Lease
	}{
		{"run 0", good(1), func(l Lease) Lease { l.Run = 0; return l }},
		{"run 2^30", good(1), func(l Lease) Lease { l.Run = MaxRun + 1; return l }},
		{"version 1", good(1), func(l Lease) Lease { l.Version = 1; return l }},
		{"no authority", good(1), func(l Lease) Lease { l.Authority = ""; return l }},
		{"no nonce", good(1), func(l Lease) Lease { l.Nonce = ""; return l }},
		{"no scheme", good(1), func(l Lease) Lease { l.Scheme = ""; return l }},
		{"unknown scheme", good(1), func(l Lease) Lease { l.Scheme = "rot13"; return l }},
		{"different authority", good(1), func(l Lease) Lease { l.Authority = "a2"; return l }},
		{"different key", good(1), func(l Lease) Lease { l.Key = otherKey; return l }},
		{"different scheme", good(1), func(l Lease) Lease { l.Scheme = shuffle.Mix; return l }},
		{"same run again", good(1), func(l Lease) Lease { l.Run = 1; return l }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			second := tt.bad(good(2))
			// As the first lease: refused if invalid on its own.
			if err := second.Validate(); err != nil {
				if !errors.Is(err, ErrLease) {
					t.Errorf("Validate() = %v, want %v", err, ErrLease)
				}
				g := NewGenerator(RunSourceFunc(func(context.Context) (Lease, error) { return second, nil }))
				if n, err := g.Next(context.Background()); !errors.Is(err, ErrLease) || n != 0 {
					t.Errorf("Next() with first lease %+v = %s, %v, want 0, %v", second, n, err, ErrLease)
				}
				if _, ok := g.Lease(); ok {
					t.Errorf("Lease() after a refused first lease = true, want false")
				}
			}
			// As the lease after a good one: always refused.
			leases := []Lease{tt.first, second}
			g := NewGenerator(RunSourceFunc(func(context.Context) (Lease, error) {
				l := leases[0]
				if len(leases) > 1 {
					leases = leases[1:]
				}
				return l, nil
			}))
			for range SequencesPerRun {
				mustNext(t, g)
			}
			for range 2 {
				if n, err := g.Next(context.Background()); !errors.Is(err, ErrLease) || n != 0 {
					t.Fatalf("Next() with second lease %+v = %s, %v, want 0, %v", second, n, err, ErrLease)
				}
			}
			if l, _ := g.Lease(); l != tt.first {
				t.Errorf("Lease() = %+v, want the first lease %+v", l, tt.first)
			}
		})
	}
}

// TestGeneratorContext checks that a caller waiting for another caller's
// new run gives up when its context ends, and that the context reaches
// the source.
func TestGeneratorContext(t *testing.T) {
	entered, release := make(chan struct{}), make(chan struct{})
	src := newRunSource(shuffle.Mix, 1)
	g := NewGenerator(RunSourceFunc(func(ctx context.Context) (Lease, error) {
		close(entered)
		select {
		case <-release:
			return src.NewRun(ctx)
		case <-ctx.Done():
			return Lease{}, ctx.Err()
		}
	}))
	var wg sync.WaitGroup
	var firstErr error
	wg.Go(func() { _, firstErr = g.Next(context.Background()) })
	<-entered

	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if n, err := g.Next(ctx); !errors.Is(err, context.Canceled) || n != 0 {
		t.Errorf("Next(canceled) while another caller takes a run = %s, %v, want 0, %v", n, err, context.Canceled)
	}
	close(release)
	wg.Wait()
	if firstErr != nil {
		t.Fatalf("first Next() = %v", firstErr)
	}
	// The run is there now: a canceled context does not matter on the
	// fast path.
	if _, err := g.Next(ctx); err != nil {
		t.Errorf("Next(canceled) with a run at hand = %v, want nil", err)
	}
}

func TestGeneratorNoAllocs(t *testing.T) {
	g := NewGenerator(newRunSource(shuffle.Mix, 1))
	mustNext(t, g)
	ctx := context.Background()
	// 1000 calls stay within the first run.
	if a := testing.AllocsPerRun(1000, func() {
		n, _ := g.Next(ctx)
		if s := n.String(); len(s) != Length {
			panic("String() is not 8 characters")
		}
	}); a != 0 {
		t.Errorf("Next+String allocate %v times per call, want 0", a)
	}
}

// Lease returns the current lease, and false before the first run: what
// the tests check a run against.
func (g *Generator) Lease() (Lease, bool) {
	if r := g.cur.Load(); r != nil {
		return r.lease, true
	}
	return Lease{}, false
}
