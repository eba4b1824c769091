package shuffle

import "fmt"

const mixLabel = "chibrary/shuffle/mix/v1"

// FeistelPerm, scheme Mix, is a keyed unbalanced Feistel network over exactly
// width bits. Its round function is SplitMix64: obfuscation, not a cipher.
type FeistelPerm struct {
	width  int
	lw, rw uint   // widths of the left and right parts before round 0: ceil(width/2), floor(width/2)
	lm, rm uint64 // masks of lw and rw bits
	keys   [MixRounds]uint64
}

var _ Permutation = (*FeistelPerm)(nil)

// Apply computes rounds in pairs (the part widths alternate): MixRounds is even.
var _ [1 - MixRounds%2]struct{}

// NewMix derives the permutation of key for width 2..64 bits.
func NewMix(key Key, width int) (*FeistelPerm, error) {
	if width < 2 || width > MaxWidth {
		return nil, fmt.Errorf("%w: mix needs 2..%d, got %d", ErrWidth, MaxWidth, width)
	}
	lw, rw := (width+1)/2, width/2
	p := &FeistelPerm{width: width, lw: uint(lw), rw: uint(rw), lm: mask(lw), rm: mask(rw)}
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

// Apply runs the network forward: each round replaces (left, right) with
// (right, left ^ F(right)), so the left part's width alternates.
func (p *FeistelPerm) Apply(x uint64) uint64 {
	lm, rm := p.lm, p.rm
	l, r := (x>>p.rw)&lm, x&rm
	for i := 0; i < MixRounds; i += 2 {
		l, r = r, l^(round(r, p.keys[i])&lm)
		l, r = r, l^(round(r, p.keys[i+1])&rm)
	}
	return l<<p.rw | r
}

// Invert runs the network backward.
func (p *FeistelPerm) Invert(y uint64) uint64 {
	lm, rm := p.lm, p.rm
	l, r := (y>>p.rw)&lm, y&rm
	for i := MixRounds - 1; i > 0; i -= 2 {
		l, r = r^(round(l, p.keys[i])&rm), l
		l, r = r^(round(l, p.keys[i-1])&lm), l
	}
	return l<<p.rw | r
}

// Width returns the number of bits permuted.
func (p *FeistelPerm) Width() int { return p.width }

// Scheme returns Mix.
func (p *FeistelPerm) Scheme() Scheme { return Mix }
