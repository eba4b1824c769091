package callnumber

import (
	"errors"
	"fmt"
	"strconv"
	"unicode/utf8"
)

// Alphabet is the base62 alphabet, in digit order.
const Alphabet = "0123456789ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz"

// Length is the number of characters of every call number.
const Length = 8

// Syntax errors of Parse.
var (
	ErrLength    = errors.New("callnumber: wrong length")
	ErrCharacter = errors.New("callnumber: bad character")
)

// Number is a call number: a shuffled 47-bit value. Zero is never issued.
type Number uint64

var decode = func() (t [256]byte) {
	for i := range t {
		t[i] = 0xff
	}
	for i := 0; i < len(Alphabet); i++ {
		t[Alphabet[i]] = byte(i)
	}
	return t
}()

var pairs = func() (t [62 * 62][2]byte) {
	for i := range t {
		t[i] = [2]byte{Alphabet[i/62], Alphabet[i%62]}
	}
	return t
}()

const (
	pow4 = 62 * 62 * 62 * 62 // 14,776,336 < 2^24
	pow8 = pow4 * pow4       // 218,340,105,584,896 > 2^47
)

// Array returns the 8 base62 characters of n (modulo 62^8).
func (n Number) Array() [Length]byte {
	v := uint64(n)
	if v >= pow8 {
		v %= pow8
	}
	hi := uint32(v / pow4)
	lo := uint32(v - uint64(hi)*pow4)
	hh, lh := hi/(62*62), lo/(62*62)
	a, b := pairs[hh], pairs[hi-hh*(62*62)]
	c, d := pairs[lh], pairs[lo-lh*(62*62)]
	return [Length]byte{a[0], a[1], b[0], b[1], c[0], c[1], d[0], d[1]}
}

// String returns the 8 base62 characters of n.
func (n Number) String() string {
	b := n.Array()
	return string(b[:])
}

// AppendText appends the 8 base62 characters of n to dst.
func (n Number) AppendText(dst []byte) ([]byte, error) {
	b := n.Array()
	return append(dst, b[:]...), nil
}

// MarshalText returns the 8 base62 characters of n.
func (n Number) MarshalText() ([]byte, error) { return n.AppendText(nil) }

// UnmarshalText parses 8 base62 characters, as Parse does.
func (n *Number) UnmarshalText(b []byte) error {
	v, err := parse(b)
	if err != nil {
		return err
	}
	*n = v
	return nil
}

// ParseError says why and where a string is not a call number.
type ParseError struct {
	Input string
	Pos   int // 0-based byte offset of the bad character, or -1 (the message counts from 1)
	Err   error
}

func (e *ParseError) Error() string {
	in := e.Input
	if len(in) > 32 {
		in = in[:32] + "..."
	}
	switch {
	case errors.Is(e.Err, ErrCharacter):
		c := strconv.Quote(e.Input[e.Pos : e.Pos+1])
		if r, size := utf8.DecodeRuneInString(e.Input[e.Pos:]); size > 1 {
			c = strconv.Quote(string(r))
		}
		return fmt.Sprintf("%v %s at position %d of %q (want 0-9, A-Z or a-z)", e.Err, c, e.Pos+1, in)
	case errors.Is(e.Err, ErrLength):
		return fmt.Sprintf("%v: %q has %d characters, want %d", e.Err, in, len(e.Input), Length)
	}
	return fmt.Sprintf("%v: %q", e.Err, in)
}

func (e *ParseError) Unwrap() error { return e.Err }

// Explain says what is wrong in one sentence, without the package prefix.
func (e *ParseError) Explain() string {
	in := e.Input
	if len(in) > 32 {
		in = in[:32] + "..."
	}
	const shape = "a call number is 8 letters and digits, like 3kTMd2xB"
	switch {
	case errors.Is(e.Err, ErrCharacter):
		c := strconv.Quote(e.Input[e.Pos : e.Pos+1])
		if r, size := utf8.DecodeRuneInString(e.Input[e.Pos:]); size > 1 {
			c = strconv.Quote(string(r))
		}
		return fmt.Sprintf("%q has %s at position %d; %s (0-9, A-Z, a-z)", in, c, e.Pos+1, shape)
	case errors.Is(e.Err, ErrLength):
		return fmt.Sprintf("%q is %d characters long; %s", in, utf8.RuneCountInString(e.Input), shape)
	case errors.Is(e.Err, ErrRange):
		return fmt.Sprintf("%q is beyond the last call number (zzzz is never reached: a call number is below 2^47)", in)
	}
	return fmt.Sprintf("%q is not a call number", in)
}

// Parse checks syntax and range only (Codec.Parse also checks version and
// run). Errors are *ParseError wrapping ErrLength, ErrCharacter or ErrRange.
func Parse(s string) (Number, error) {
	return parse(s)
}

func parse[T string | []byte](s T) (Number, error) {
	if len(s) != Length {
		return 0, &ParseError{Input: string(s), Pos: -1, Err: ErrLength}
	}
	var v uint64
	for i := 0; i < Length; i++ {
		d := decode[s[i]]
		if d == 0xff {
			return 0, &ParseError{Input: string(s), Pos: i, Err: ErrCharacter}
		}
		v = v*62 + uint64(d)
	}
	// 62^8 < 2^64, so v did not overflow.
	if v>>Bits != 0 {
		return 0, &ParseError{Input: string(s), Pos: -1, Err: fmt.Errorf("%w: above 2^%d-1", ErrRange, Bits)}
	}
	return Number(v), nil
}
