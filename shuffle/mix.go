package shuffle

import "fmt"

const mixLabel = "chibrary/shuffle/mix/v1"

// FeistelPerm is a keyed unbalanced Feistel network over exactly width bits
// (scheme Mix).
type FeistelPerm struct {
	width int
	lw    int // width of the left part before round 0: ceil(width/2)
	rw    int // width of the right part before round 0: floor(width/2)
	keys  [MixRounds]uint64
}

var _ Permutation = (*FeistelPerm)(nil)

// NewMix derives the Feistel permutation of the given key and width
// (2..64), as the package doc describes.
func NewMix(key Key, width int) (*FeistelPerm, error) {
	if width < 2 || width > MaxWidth {
		return nil, fmt.Errorf("%w: mix needs 2..%d, got %d", ErrWidth, MaxWidth, width)
	}
	p := &FeistelPerm{width: width, lw: (width + 1) / 2, rw: width / 2}
	s := newStream(key, mixLabel, width)
	for i := range p.keys {
		p.keys[i] = s.uint64()
	}
	return p, nil
}

// round is the keyed round function: the SplitMix64 finalizer of r + k.
func round(r, k uint64) uint64 {
	z := r + k
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// Apply runs the network forward.
func (p *FeistelPerm) Apply(x uint64) uint64 {
	x &= mask(p.width)
	lw, rw := p.lw, p.rw
	for i := 0; i < MixRounds; i++ {
		l, r := x>>rw, x&mask(rw)
		l ^= round(r, p.keys[i]) & mask(lw)
		// The right part becomes the left: widths swap.
		x = r<<lw | l
		lw, rw = rw, lw
	}
	return x
}

// Invert runs the network backward.
func (p *FeistelPerm) Invert(y uint64) uint64 {
	y &= mask(p.width)
	// After MixRounds rounds the parts' widths have swapped MixRounds times.
	lw, rw := p.lw, p.rw
	if MixRounds%2 == 1 {
		lw, rw = rw, lw
	}
	for i := MixRounds - 1; i >= 0; i-- {
		// Undo round i: before it the left part was lw' = rw and the
		// right part rw' = lw; after it, x = r<<lw' | (l ^ F(r)).
		plw, prw := rw, lw
		r, l := y>>plw, y&mask(plw)
		l ^= round(r, p.keys[i]) & mask(plw)
		y = l<<prw | r
		lw, rw = plw, prw
	}
	return y
}

// Width returns the number of bits permuted.
func (p *FeistelPerm) Width() int { return p.width }

// Scheme returns Mix.
func (p *FeistelPerm) Scheme() Scheme { return Mix }
