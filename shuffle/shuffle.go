// Package shuffle provides keyed, stable permutations of n-bit words, which
// make consecutive call numbers look unrelated. A permutation is a pure
// function of its key, scheme and width, drawn from the stream of blocks
// SHA-256(key || label || uint8(width) || uint64be(i)) so that no Go release
// or platform can change it: archives depend on it never changing, and
// golden vectors in the tests pin it.
package shuffle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Scheme names a family of permutations, chosen when an authority is created.
type Scheme string

// The schemes.
const (
	Bits Scheme = "bits" // the seed's design, kept for compatibility
	Mix  Scheme = "mix"  // the default of a new authority
)

// MaxWidth is the widest word a permutation can work on.
const MaxWidth = 64

// MixRounds is part of the format: changing it changes every Mix permutation.
const MixRounds = 8

// KeySize is the size of a shuffle key in bytes.
const KeySize = 32

// Key is the secret from which a permutation is derived.
type Key [KeySize]byte

// Errors of ParseScheme, New and Key.UnmarshalText.
var (
	ErrScheme = errors.New("shuffle: unknown scheme")
	ErrWidth  = errors.New("shuffle: width out of range")
	ErrKey    = errors.New("shuffle: bad key")
)

// ParseScheme returns the scheme named s.
func ParseScheme(s string) (Scheme, error) {
	switch Scheme(s) {
	case Bits, Mix:
		return Scheme(s), nil
	}
	return "", fmt.Errorf("%w %q (want bits or mix)", ErrScheme, s)
}

// String returns the key in lower-case hex.
func (k Key) String() string { return hex.EncodeToString(k[:]) }

// MarshalText encodes the key as hex.
func (k Key) MarshalText() ([]byte, error) { return []byte(k.String()), nil }

// UnmarshalText decodes a key from 64 hex digits.
func (k *Key) UnmarshalText(b []byte) error {
	if hex.DecodedLen(len(b)) != KeySize {
		return fmt.Errorf("%w: want %d hex digits, got %d", ErrKey, 2*KeySize, len(b))
	}
	if _, err := hex.Decode(k[:], b); err != nil {
		return fmt.Errorf("%w: %v", ErrKey, err)
	}
	return nil
}

// Permutation is a bijection on words of Width bits; bits above Width are
// ignored. Apply and Invert are safe for concurrent use and do not allocate.
type Permutation interface {
	Apply(x uint64) uint64
	Invert(y uint64) uint64
	Width() int
	Scheme() Scheme
}

// New returns the permutation of the given scheme, key and width.
func New(s Scheme, key Key, width int) (Permutation, error) {
	switch s {
	case Bits:
		return NewBits(key, width)
	case Mix:
		return NewMix(key, width)
	}
	return nil, fmt.Errorf("%w %q", ErrScheme, s)
}

func mask(width int) uint64 {
	if width >= 64 {
		return ^uint64(0)
	}
	return 1<<width - 1
}

// stream is the deterministic key stream described in the package doc.
type stream struct {
	prefix []byte
	block  uint64
	buf    [sha256.Size]byte
	off    int
}

func newStream(key Key, label string, width int) *stream {
	p := make([]byte, 0, KeySize+len(label)+1)
	p = append(p, key[:]...)
	p = append(p, label...)
	p = append(p, byte(width))
	return &stream{prefix: p, off: sha256.Size}
}

func (s *stream) uint64() uint64 {
	if s.off == sha256.Size {
		h := sha256.New()
		h.Write(s.prefix)
		var ctr [8]byte
		binary.BigEndian.PutUint64(ctr[:], s.block)
		h.Write(ctr[:])
		h.Sum(s.buf[:0])
		s.block++
		s.off = 0
	}
	v := binary.BigEndian.Uint64(s.buf[s.off:])
	s.off += 8
	return v
}

// intn returns a uniform integer in [0, n), n > 0, by rejection sampling.
func (s *stream) intn(n uint64) uint64 {
	limit := ^uint64(0) - (^uint64(0)%n+1)%n // largest multiple of n, minus 1
	for {
		v := s.uint64()
		if v <= limit {
			return v % n
		}
	}
}
