package callnumber

import (
	"errors"
	"testing"

	"github.com/chibrary/chibrary/shuffle"
)

// FuzzParse checks that Parse and Codec.Parse never panic, refuse with a
// *ParseError wrapping one of the documented errors, and that whatever
// they accept prints back as the input.
func FuzzParse(f *testing.F) {
	for _, s := range []string{"00000000", "3kTMd2xB", "dxlGgaI3", "dxlGgaI4", "zzzzzzzz", "", "1234567", "123456789", "abc_defg", "éééé", "00bVJxYW", "0PYeLGgR"} {
		f.Add(s)
	}
	codecs := []*Codec{mustCodec(f, shuffle.Bits), mustCodec(f, shuffle.Mix)}
	f.Fuzz(func(t *testing.T, s string) {
		n, err := Parse(s)
		if err != nil {
			var pe *ParseError
			if !errors.As(err, &pe) || pe.Input != s {
				t.Fatalf("Parse(%q) error %#v is not a *ParseError of the input", s, err)
			}
			if !errors.Is(err, ErrLength) && !errors.Is(err, ErrCharacter) && !errors.Is(err, ErrRange) {
				t.Fatalf("Parse(%q) = %v, not one of the documented errors", s, err)
			}
			if pe.Error() == "" {
				t.Fatalf("Parse(%q): empty message", s)
			}
			for _, c := range codecs {
				if _, _, cerr := c.Parse(s); cerr == nil || cerr.Error() != err.Error() {
					t.Fatalf("%s: Codec.Parse(%q) = %v, want Parse's error %v", c.Scheme(), s, cerr, err)
				}
			}
			return
		}
		if got := n.String(); got != s {
			t.Fatalf("Parse(%q) = %d, which prints as %q", s, n, got)
		}
		if uint64(n)>>Bits != 0 {
			t.Fatalf("Parse(%q) = %d, not below 2^47", s, n)
		}
		for _, c := range codecs {
			cn, fields, err := c.Parse(s)
			if err != nil {
				if !errors.Is(err, ErrVersion) && !errors.Is(err, ErrRunZero) {
					t.Fatalf("%s: Codec.Parse(%q) = %v, want nil, ErrVersion or ErrRunZero", c.Scheme(), s, err)
				}
				continue
			}
			if cn != n {
				t.Fatalf("%s: Codec.Parse(%q) = %d, Parse gave %d", c.Scheme(), s, cn, n)
			}
			if back, err := c.Encode(fields); err != nil || back != n {
				t.Fatalf("%s: Encode(%v) = %d, %v, want %d", c.Scheme(), fields, back, err, n)
			}
		}
	})
}

// FuzzRoundTrip checks Fields -> Encode -> String -> Codec.Parse ->
// Decode in both schemes, for any key: valid fields come back, invalid
// ones are refused by Encode.
func FuzzRoundTrip(f *testing.F) {
	f.Add([]byte{}, uint8(0), uint32(1), uint16(0))
	f.Add([]byte("key"), uint8(0), uint32(MaxRun), uint16(MaxSequence))
	f.Add([]byte{1}, uint8(0), uint32(0), uint16(5))
	f.Add([]byte{2}, uint8(3), uint32(77), uint16(16384))
	f.Add([]byte{3}, uint8(0), uint32(1<<30), uint16(1))
	f.Fuzz(func(t *testing.T, keyBytes []byte, version uint8, run uint32, seq uint16) {
		var key shuffle.Key
		copy(key[:], keyBytes)
		in := Fields{Version: version, Run: run, Sequence: seq}
		_, packErr := Pack(in)
		for _, scheme := range schemes {
			c, err := NewCodec(scheme, key)
			if err != nil {
				t.Fatal(err)
			}
			n, err := c.Encode(in)
			if packErr != nil {
				if err == nil {
					t.Fatalf("%s: Encode(%v) = %d, but Pack refuses it: %v", scheme, in, n, packErr)
				}
				continue
			}
			if err != nil {
				t.Fatalf("%s: Encode(%v) = %v", scheme, in, err)
			}
			s := n.String()
			if len(s) != Length {
				t.Fatalf("%s: String() = %q", scheme, s)
			}
			gotN, got, err := c.Parse(s)
			if version != CurrentVersion {
				if !errors.Is(err, ErrVersion) {
					t.Fatalf("%s: Parse(%q) of %v = %v, want %v", scheme, s, in, err, ErrVersion)
				}
				continue
			}
			if err != nil || gotN != n || got != in {
				t.Fatalf("%s: Parse(%q) = %d, %v, %v, want %d, %v", scheme, s, gotN, got, err, n, in)
			}
			if got, err := c.Decode(n); err != nil || got != in {
				t.Fatalf("%s: Decode(%d) = %v, %v, want %v", scheme, n, got, err, in)
			}
		}
	})
}
