package shuffle

import "fmt"

const bitsLabel = "chibrary/shuffle/bits/v1"

// BitPerm, scheme Bits, is a Fisher-Yates shuffle of bit positions. It moves
// bits but never mixes them, so a few numbers of a run reveal the rest.
type BitPerm struct {
	width int
	perm  []uint8 // input bit i goes to output bit perm[i]
	fwd   [8][256]uint64
	inv   [8][256]uint64
}

var _ Permutation = (*BitPerm)(nil)

// NewBits derives the permutation of key for width 1..64 bits.
func NewBits(key Key, width int) (*BitPerm, error) {
	if width < 1 || width > MaxWidth {
		return nil, fmt.Errorf("%w: bits needs 1..%d, got %d", ErrWidth, MaxWidth, width)
	}
	perm := make([]uint8, width)
	for i := range perm {
		perm[i] = uint8(i)
	}
	s := newStream(key, bitsLabel, width)
	for i := width - 1; i >= 1; i-- {
		j := s.intn(uint64(i + 1))
		perm[i], perm[j] = perm[j], perm[i]
	}
	p := &BitPerm{width: width, perm: perm}
	inverse := make([]uint8, width)
	for i, o := range perm {
		inverse[o] = uint8(i)
	}
	fillTables(&p.fwd, perm)
	fillTables(&p.inv, inverse)
	return p, nil
}

func fillTables(t *[8][256]uint64, perm []uint8) {
	for b := 0; b < 8; b++ {
		for v := 0; v < 256; v++ {
			var out uint64
			for k := 0; k < 8; k++ {
				in := b*8 + k
				if in < len(perm) && v&(1<<k) != 0 {
					out |= 1 << perm[in]
				}
			}
			t[b][v] = out
		}
	}
}

func lookup(t *[8][256]uint64, x uint64, width int) uint64 {
	y := t[0][byte(x)] | t[1][byte(x>>8)] | t[2][byte(x>>16)] |
		t[3][byte(x>>24)] | t[4][byte(x>>32)] | t[5][byte(x>>40)]
	if width > 48 { // the upper two tables are all zero below that
		y |= t[6][byte(x>>48)] | t[7][byte(x>>56)]
	}
	return y
}

// Apply moves every bit of x to its permuted position.
func (p *BitPerm) Apply(x uint64) uint64 { return lookup(&p.fwd, x&mask(p.width), p.width) }

// Invert undoes Apply.
func (p *BitPerm) Invert(y uint64) uint64 { return lookup(&p.inv, y&mask(p.width), p.width) }

// Width returns the number of bits permuted.
func (p *BitPerm) Width() int { return p.width }

// Scheme returns Bits.
func (p *BitPerm) Scheme() Scheme { return Bits }

// Positions returns a copy of the permutation: bit i goes to Positions()[i].
func (p *BitPerm) Positions() []int {
	out := make([]int, len(p.perm))
	for i, o := range p.perm {
		out[i] = int(o)
	}
	return out
}
