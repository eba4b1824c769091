package callnumber

import (
	"errors"
	"math/rand/v2"
	"strings"
	"testing"
)

// base62 is a plain reference encoder: repeated division, most significant
// digit first, of v modulo 62^8.
func base62(v uint64) string {
	var b [Length]byte
	for i := Length - 1; i >= 0; i-- {
		b[i] = Alphabet[v%62]
		v /= 62
	}
	return string(b[:])
}

func TestAlphabet(t *testing.T) {
	want := "0123456789" + "ABCDEFGHIJKLMNOPQRSTUVWXYZ" + "abcdefghijklmnopqrstuvwxyz"
	if Alphabet != want {
		t.Errorf("Alphabet = %q, want %q", Alphabet, want)
	}
}

func TestNumberString(t *testing.T) {
	tests := []struct {
		n    Number
		want string
	}{
		{0, "00000000"},
		{1, "00000001"},
		{61, "0000000z"},
		{62, "00000010"},
		{3843, "000000zz"},
		{3844, "00000100"},
		{14776335, "0000zzzz"},
		{14776336, "00010000"},
		{140737488355327, "dxlGgaI3"},
		{1250999896491, "0M1WO4jL"},
	}
	for _, tt := range tests {
		if got := tt.n.String(); got != tt.want {
			t.Errorf("Number(%d).String() = %q, want %q", tt.n, got, tt.want)
		}
		if got := tt.n.Array(); string(got[:]) != tt.want {
			t.Errorf("Number(%d).Array() = %q, want %q", tt.n, got, tt.want)
		}
		if got, err := tt.n.MarshalText(); err != nil || string(got) != tt.want {
			t.Errorf("Number(%d).MarshalText() = %q, %v, want %q", tt.n, got, err, tt.want)
		}
		if got, err := tt.n.AppendText([]byte("/")); err != nil || string(got) != "/"+tt.want {
			t.Errorf("Number(%d).AppendText(%q) = %q, %v, want %q", tt.n, "/", got, err, "/"+tt.want)
		}
		got, err := Parse(tt.want)
		if err != nil || got != tt.n {
			t.Errorf("Parse(%q) = %d, %v, want %d", tt.want, got, err, tt.n)
		}
		var u Number
		if err := u.UnmarshalText([]byte(tt.want)); err != nil || u != tt.n {
			t.Errorf("UnmarshalText(%q) = %d, %v, want %d", tt.want, u, err, tt.n)
		}
	}
}

// TestRange shows why some 8-character strings are out of range: 62^8 is
// larger than 2^47, so the largest call number already prints as 8
// characters and the largest 8-character string is above it.
func TestRange(t *testing.T) {
	p := uint64(1)
	for range Length {
		p *= 62
	}
	if p <= 1<<Bits {
		t.Fatalf("62^8 = %d, not above 2^47 = %d", p, uint64(1)<<Bits)
	}
	if p/62 >= 1<<Bits {
		t.Fatalf("62^7 = %d >= 2^47: 7 characters would do", p/62)
	}
	const largest = Number(1<<Bits - 1)
	s := largest.String()
	if len(s) != Length || s != "dxlGgaI3" {
		t.Errorf("Number(2^47-1).String() = %q, want the 8 characters %q", s, "dxlGgaI3")
	}
	if n, err := Parse(s); err != nil || n != largest {
		t.Errorf("Parse(%q) = %d, %v, want %d", s, n, err, largest)
	}
	for _, in := range []string{"dxlGgaI4", "dxlGgaJ0", "e0000000", "zzzzzzzz"} {
		if n, err := Parse(in); !errors.Is(err, ErrRange) {
			t.Errorf("Parse(%q) = %d, %v, want %v", in, n, err, ErrRange)
		}
	}
}

func TestParseErrors(t *testing.T) {
	tests := []struct {
		in      string
		err     error
		pos     int
		message string // a part of the error message
	}{
		{"", ErrLength, -1, `"" has 0 characters, want 8`},
		{"1234567", ErrLength, -1, "has 7 characters"},
		{"123456789", ErrLength, -1, "has 9 characters"},
		{"3kTMd2xB ", ErrLength, -1, "has 9 characters"},
		{"ééé", ErrLength, -1, "has 6 characters"},
		{strings.Repeat("x", 100), ErrLength, -1, "...\" has 100 characters"},
		{"-1234567", ErrCharacter, 0, `"-" at position 1`},
		{"1234 678", ErrCharacter, 4, `" " at position 5`},
		{"1234567-", ErrCharacter, 7, `"-" at position 8`},
		{"12\xff45678", ErrCharacter, 2, `"\xff" at position 3`},
		{"éééé", ErrCharacter, 0, `"é" at position 1`},
		{"1234567\x00", ErrCharacter, 7, `"\x00" at position 8`},
		{"zzzzzzzz", ErrRange, -1, "out of range"},
		{"dxlGgaI4", ErrRange, -1, "out of range"},
	}
	for _, tt := range tests {
		t.Run(tt.in, func(t *testing.T) {
			n, err := Parse(tt.in)
			if !errors.Is(err, tt.err) || n != 0 {
				t.Fatalf("Parse(%q) = %d, %v, want 0, %v", tt.in, n, err, tt.err)
			}
			var pe *ParseError
			if !errors.As(err, &pe) {
				t.Fatalf("Parse(%q) error %T is not a *ParseError", tt.in, err)
			}
			if pe.Pos != tt.pos || pe.Input != tt.in {
				t.Errorf("Parse(%q): Pos %d, Input %q, want %d, %q", tt.in, pe.Pos, pe.Input, tt.pos, tt.in)
			}
			if msg := err.Error(); !strings.Contains(msg, tt.message) {
				t.Errorf("Parse(%q) error %q does not contain %q", tt.in, msg, tt.message)
			}
			var u Number
			if err := u.UnmarshalText([]byte(tt.in)); !errors.Is(err, tt.err) {
				t.Errorf("UnmarshalText(%q) = %v, want %v", tt.in, err, tt.err)
			}
		})
	}
}

// TestEveryCharacter parses every alphabet character at every position,
// and checks that every other byte is refused there.
func TestEveryCharacter(t *testing.T) {
	for pos := range Length {
		for c := 0; c < 256; c++ {
			b := []byte("00000000")
			b[pos] = byte(c)
			n, err := Parse(string(b))
			d := strings.IndexByte(Alphabet, byte(c))
			switch {
			case d < 0:
				if !errors.Is(err, ErrCharacter) {
					t.Errorf("Parse(%q) = %d, %v, want %v", b, n, err, ErrCharacter)
				}
			case pos == 0 && d >= 40: // 40 * 62^7 > 2^47
				if !errors.Is(err, ErrRange) {
					t.Errorf("Parse(%q) = %d, %v, want %v", b, n, err, ErrRange)
				}
			default:
				want := uint64(d)
				for range Length - 1 - pos {
					want *= 62
				}
				if err != nil || uint64(n) != want {
					t.Errorf("Parse(%q) = %d, %v, want %d", b, n, err, want)
				}
				if got := n.String(); got != string(b) {
					t.Errorf("Number(%d).String() = %q, want %q", n, got, b)
				}
			}
		}
	}
}

// TestStringParseRandom checks String against the reference encoder and
// the String/Parse round trip on random values, all 47-bit widths, and
// (String only) on values above 2^47, which print modulo 62^8.
func TestStringParseRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(62, 8))
	for i := range 1_000_000 {
		v := rng.Uint64() >> (17 + i%47) // every magnitude below 2^47
		n := Number(v)
		s := n.String()
		if want := base62(v); s != want {
			t.Fatalf("Number(%d).String() = %q, want %q", v, s, want)
		}
		if got, err := Parse(s); err != nil || got != n {
			t.Fatalf("Parse(%q) = %d, %v, want %d", s, got, err, n)
		}
		if big := rng.Uint64(); Number(big).String() != base62(big) {
			t.Fatalf("Number(%d).String() = %q, want %q", big, Number(big).String(), base62(big))
		}
	}
}

func TestNoAllocs(t *testing.T) {
	n := Number(0x123456789ab)
	buf := make([]byte, 0, 16)
	var l int
	checks := map[string]func(){
		"String":     func() { s := n.String(); l += len(s) },
		"Array":      func() { a := n.Array(); l += int(a[0]) },
		"AppendText": func() { buf, _ = n.AppendText(buf[:0]) },
		"Parse":      func() { m, _ := Parse("3kTMd2xB"); l += int(m) },
	}
	for name, f := range checks {
		if a := testing.AllocsPerRun(1000, f); a != 0 {
			t.Errorf("%s allocates %v times per call, want 0", name, a)
		}
	}
}
