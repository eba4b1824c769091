// Package shuffle provides keyed, stable permutations of n-bit words.
//
// A call number's 47 bits are passed through one of these permutations so
// that consecutive numbers do not look consecutive. Each permutation is a
// pure function of a 32-byte key, the scheme and the width: it is derived by
// the fixed procedure documented below, from SHA-256 alone, so no Go
// release, platform or library upgrade can change it. Golden vectors in the
// tests pin it; an existing archive depends on it never changing.
//
// # Key stream
//
// Both schemes draw their parameters from the same deterministic stream:
// block i (i = 0, 1, 2, ...) is
//
//	SHA-256(key || label || uint8(width) || uint64be(i))
//
// where label is "chibrary/shuffle/bits/v1" or "chibrary/shuffle/mix/v1".
// The stream is read as consecutive big-endian uint64 words, four per block.
// A uniform integer in [0, n) is drawn by rejection: words at or above the
// largest multiple of n that fits in 64 bits are skipped, and the remainder
// modulo n of the first word below it is the result.
//
// # Schemes
//
// Bits (the seed's design) is a permutation of bit positions: a
// Fisher-Yates shuffle of the positions 0..width-1, swapping position i
// (from width-1 down to 1) with a uniform position j in [0, i]. Input bit i
// becomes output bit perm[i]. It moves bits but never mixes them: an
// outsider who sees a handful of call numbers learns which output positions
// vary and can enumerate a run. See the callnumber package for figures.
//
// Mix is a keyed, unbalanced Feistel network over exactly width bits, with
// MixRounds rounds. The word is split into a left part of ceil(width/2) bits
// and a right part of floor(width/2) bits; each round replaces the left part
// with left XOR F(round, right) and swaps the parts, so the widths of the
// two parts alternate. F is the SplitMix64 finalizer applied to
// right + roundKey, truncated to the width of the left part. Every round is
// a bijection, so the network is one, whatever F is. Neighbouring inputs
// give unrelated-looking outputs.
package shuffle

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
)

// Scheme names a family of permutations. It is chosen when an authority is
// created and recorded with it.
type Scheme string

const (
	// Bits permutes bit positions: the seed's design, kept for
	// compatibility; a few numbers of a run reveal the rest.
	Bits Scheme = "bits"
	// Mix is a keyed Feistel network: the default of a new authority.
	Mix Scheme = "mix"
)

// MaxWidth is the widest word a permutation can work on.
const MaxWidth = 64

// MixRounds is the number of Feistel rounds of the Mix scheme. Changing it
// changes every Mix permutation: it is part of the format.
const MixRounds = 8

// KeySize is the size of a shuffle key in bytes.
const KeySize = 32

// Key is the secret from which a permutation is derived.
type Key [KeySize]byte

var (
	// ErrScheme is returned for a scheme name other than "bits" or "mix".
	ErrScheme = errors.New("shuffle: unknown scheme")
	// ErrWidth is returned for a width the scheme cannot work on.
	ErrWidth = errors.New("shuffle: width out of range")
	// ErrKey is returned when a key cannot be parsed.
	ErrKey = errors.New("shuffle: bad key")
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

// Permutation is a bijection on the words of Width bits. Apply and Invert
// are exact inverses on [0, 2^Width); bits above Width are ignored. Both are
// safe for concurrent use and do not allocate.
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
