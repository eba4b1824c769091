package callnumber

import (
	"fmt"

	"github.com/chibrary/chibrary/shuffle"
)

// Codec shuffles Fields into public Numbers and back; safe for concurrent use.
type Codec struct {
	perm shuffle.Permutation
	// The concrete type, so that the hot paths make inlinable calls.
	bits *shuffle.BitPerm
	mix  *shuffle.FeistelPerm
}

// NewCodec returns the codec of an authority's scheme and key.
func NewCodec(scheme shuffle.Scheme, key shuffle.Key) (*Codec, error) {
	p, err := shuffle.New(scheme, key, Bits)
	if err != nil {
		return nil, fmt.Errorf("cannot make codec: %w", err)
	}
	c := &Codec{perm: p}
	switch p := p.(type) {
	case *shuffle.BitPerm:
		c.bits = p
	case *shuffle.FeistelPerm:
		c.mix = p
	}
	return c, nil
}

func (c *Codec) apply(v uint64) Number {
	switch {
	case c.bits != nil:
		return Number(c.bits.Apply(v))
	case c.mix != nil:
		return Number(c.mix.Apply(v))
	}
	return Number(c.perm.Apply(v))
}

func (c *Codec) invert(n Number) uint64 {
	switch {
	case c.bits != nil:
		return c.bits.Invert(uint64(n))
	case c.mix != nil:
		return c.mix.Invert(uint64(n))
	}
	return c.perm.Invert(uint64(n))
}

// Scheme returns the codec's shuffle scheme.
func (c *Codec) Scheme() shuffle.Scheme { return c.perm.Scheme() }

// Encode packs and shuffles f.
func (c *Codec) Encode(f Fields) (Number, error) {
	v, err := Pack(f)
	if err != nil {
		return 0, err
	}
	return c.apply(v), nil
}

// Decode unshuffles and unpacks n, refusing other versions and run 0.
func (c *Codec) Decode(n Number) (Fields, error) {
	if uint64(n)>>Bits != 0 {
		return Fields{}, fmt.Errorf("%w: %d >= 2^%d", ErrRange, uint64(n), Bits)
	}
	f, err := Unpack(c.invert(n))
	if err != nil {
		return Fields{}, err
	}
	if f.Version != CurrentVersion {
		return Fields{}, fmt.Errorf("%w %d", ErrVersion, f.Version)
	}
	return f, nil
}

// Packed returns n unshuffled: monotonic within a run, a good storage key.
func (c *Codec) Packed(n Number) uint64 { return c.invert(n) }

// Number returns the public Number of an unshuffled 47-bit value.
func (c *Codec) Number(packed uint64) Number { return c.apply(packed) }

// Parse is the package's Parse that also checks the version and run.
func (c *Codec) Parse(s string) (Number, Fields, error) {
	n, err := Parse(s)
	if err != nil {
		return 0, Fields{}, err
	}
	f, err := c.Decode(n)
	if err != nil {
		return 0, Fields{}, &ParseError{Input: s, Pos: -1, Err: err}
	}
	return n, f, nil
}
