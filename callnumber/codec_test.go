package callnumber

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"testing"

	"github.com/chibrary/chibrary/shuffle"
)

// TestCodecGolden pins the public call numbers of a few fields under the
// tests' key, computed once and never to change (see package shuffle).
func TestCodecGolden(t *testing.T) {
	tests := []struct {
		scheme shuffle.Scheme
		fields Fields
		want   string
	}{
		{shuffle.Bits, Fields{Run: 1, Sequence: 0}, "00bVJxYW"},
		{shuffle.Bits, Fields{Run: 1, Sequence: 1}, "00c5ecCm"},
		{shuffle.Bits, Fields{Run: 1, Sequence: 16383}, "Li03XKmD"},
		{shuffle.Bits, Fields{Run: 2, Sequence: 0}, "4ziepp2G"},
		{shuffle.Bits, Fields{Run: 123456, Sequence: 789}, "1a0nL9Ws"},
		{shuffle.Bits, Fields{Run: 1073741823, Sequence: 16383}, "dsqWJG7b"},
		{shuffle.Mix, Fields{Run: 1, Sequence: 0}, "0PYeLGgR"},
		{shuffle.Mix, Fields{Run: 1, Sequence: 1}, "KIzbbRgv"},
		{shuffle.Mix, Fields{Run: 1, Sequence: 16383}, "89E99s5Q"},
		{shuffle.Mix, Fields{Run: 2, Sequence: 0}, "CAvQf59C"},
		{shuffle.Mix, Fields{Run: 123456, Sequence: 789}, "JjE0vKoe"},
		{shuffle.Mix, Fields{Run: 1073741823, Sequence: 16383}, "6QzEudVz"},
	}
	for _, tt := range tests {
		t.Run(fmt.Sprintf("%s/%v", tt.scheme, tt.fields), func(t *testing.T) {
			c := mustCodec(t, tt.scheme)
			n, err := c.Encode(tt.fields)
			if err != nil || n.String() != tt.want {
				t.Fatalf("Encode(%v) = %q, %v, want %q", tt.fields, n, err, tt.want)
			}
			gotN, f, err := c.Parse(tt.want)
			if err != nil || gotN != n || f != tt.fields {
				t.Fatalf("Parse(%q) = %d, %v, %v, want %d, %v", tt.want, gotN, f, err, n, tt.fields)
			}
		})
	}
}

func TestCodecRoundTrip(t *testing.T) {
	rng := rand.New(rand.NewPCG(5, 6))
	for _, scheme := range schemes {
		c := mustCodec(t, scheme)
		if c.Scheme() != scheme {
			t.Errorf("Scheme() = %q, want %q", c.Scheme(), scheme)
		}
		for range 100_000 {
			f := Fields{Run: 1 + rng.Uint32N(MaxRun), Sequence: uint16(rng.IntN(SequencesPerRun))}
			n, err := c.Encode(f)
			if err != nil {
				t.Fatalf("Encode(%v) = %v", f, err)
			}
			if n == 0 || uint64(n)>>Bits != 0 {
				t.Fatalf("Encode(%v) = %d, want 1..2^47-1", f, n)
			}
			packed, _ := Pack(f)
			if c.Packed(n) != packed || c.Number(packed) != n {
				t.Fatalf("Packed(%d) = %#x, Number(%#x) = %d, want %#x, %d", n, c.Packed(n), packed, c.Number(packed), packed, n)
			}
			s := n.String()
			gotN, got, err := c.Parse(s)
			if err != nil || gotN != n || got != f {
				t.Fatalf("Parse(%q) = %d, %v, %v, want %d, %v", s, gotN, got, err, n, f)
			}
			if got, err := c.Decode(n); err != nil || got != f {
				t.Fatalf("Decode(%d) = %v, %v, want %v", n, got, err, f)
			}
		}
	}
}

func TestCodecErrors(t *testing.T) {
	for _, scheme := range schemes {
		c := mustCodec(t, scheme)
		// Well-formed numbers whose unshuffled value is not a call number
		// of today.
		version1 := c.Number(1<<44 | 1<<14).String()
		version7 := c.Number(7<<44 | MaxRun<<14 | MaxSequence).String()
		run0 := c.Number(5).String()
		tests := []struct {
			name string
			in   string
			err  error
		}{
			{"version 1", version1, ErrVersion},
			{"version 7", version7, ErrVersion},
			{"run 0", run0, ErrRunZero},
			{"out of range", "zzzzzzzz", ErrRange},
			{"short", "abc", ErrLength},
			{"bad character", "abc_defg", ErrCharacter},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%s/%s", scheme, tt.name), func(t *testing.T) {
				n, f, err := c.Parse(tt.in)
				if !errors.Is(err, tt.err) {
					t.Fatalf("Parse(%q) = %d, %v, %v, want %v", tt.in, n, f, err, tt.err)
				}
				if n != 0 || f != (Fields{}) {
					t.Errorf("Parse(%q) = %d, %v on error, want zero values", tt.in, n, f)
				}
				var pe *ParseError
				if !errors.As(err, &pe) || pe.Input != tt.in {
					t.Errorf("Parse(%q) error %#v is not a *ParseError of the input", tt.in, err)
				}
			})
		}
		if scheme == shuffle.Bits {
			// A bit permutation keeps 0 at 0: version 0, run 0.
			if _, _, err := c.Parse("00000000"); !errors.Is(err, ErrRunZero) {
				t.Errorf("bits: Parse(%q) = %v, want %v", "00000000", err, ErrRunZero)
			}
		}
		if _, err := c.Decode(1 << Bits); !errors.Is(err, ErrRange) {
			t.Errorf("%s: Decode(2^47) = %v, want %v", scheme, err, ErrRange)
		}
		if _, err := c.Encode(Fields{Run: 0}); !errors.Is(err, ErrRunZero) {
			t.Errorf("%s: Encode(run 0) = %v, want %v", scheme, err, ErrRunZero)
		}
	}
	if _, err := NewCodec("rot13", testKey); !errors.Is(err, shuffle.ErrScheme) {
		t.Errorf("NewCodec(rot13) = %v, want %v", err, shuffle.ErrScheme)
	}
}

// TestCodecVersionsAreDistinct checks that a number of another version
// never decodes as a number of today: the permutation is a bijection, so
// the version bits survive Invert.
func TestCodecVersionsAreDistinct(t *testing.T) {
	rng := rand.New(rand.NewPCG(7, 7))
	for _, scheme := range schemes {
		c := mustCodec(t, scheme)
		for range 10_000 {
			f := Fields{Version: uint8(1 + rng.IntN(MaxVersion)), Run: 1 + rng.Uint32N(MaxRun), Sequence: uint16(rng.IntN(SequencesPerRun))}
			packed, err := Pack(f)
			if err != nil {
				t.Fatal(err)
			}
			if got, err := c.Decode(c.Number(packed)); !errors.Is(err, ErrVersion) {
				t.Fatalf("%s: Decode of %v = %v, %v, want %v", scheme, f, got, err, ErrVersion)
			}
		}
	}
}
