package shuffle

import (
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

func mustKey(t testing.TB, s string) Key {
	t.Helper()
	var k Key
	if err := k.UnmarshalText([]byte(s)); err != nil {
		t.Fatalf("UnmarshalText(%q) = %v", s, err)
	}
	return k
}

func mustNew(t testing.TB, s Scheme, k Key, width int) Permutation {
	t.Helper()
	p, err := New(s, k, width)
	if err != nil {
		t.Fatalf("New(%s, %s, %d) = %v", s, k, width, err)
	}
	return p
}

// testKeys are a few keys, each different from the others in one bit at
// least, to run the properties with.
func testKeys() []Key {
	keys := make([]Key, 4)
	for i := range keys[1] {
		keys[1][i] = byte(i)
	}
	keys[2][31] = 1
	keys[3] = sha256.Sum256([]byte("chibrary shuffle test key"))
	return keys
}

func TestGolden(t *testing.T) {
	for _, g := range golden {
		t.Run(fmt.Sprintf("%s/%d/%s", g.scheme, g.width, g.key[:8]), func(t *testing.T) {
			p := mustNew(t, g.scheme, mustKey(t, g.key), g.width)
			for _, v := range g.pairs {
				if got := p.Apply(v.in); got != v.out {
					t.Errorf("Apply(%#x) = %#x, want %#x", v.in, got, v.out)
				}
				if got := p.Invert(v.out); got != v.in {
					t.Errorf("Invert(%#x) = %#x, want %#x", v.out, got, v.in)
				}
			}
		})
	}
}

func TestGoldenPositions(t *testing.T) {
	p, err := NewBits(mustKey(t, goldenPositionsKey), 47)
	if err != nil {
		t.Fatal(err)
	}
	if got := p.Positions(); !slices.Equal(got, goldenPositions[:]) {
		t.Errorf("Positions() = %v, want %v", got, goldenPositions)
	}
	for in, out := range goldenPositions {
		if got := p.Apply(1 << in); got != 1<<out {
			t.Errorf("Apply(1<<%d) = %#x, want 1<<%d", in, got, out)
		}
	}
}

// referenceStream is the key stream as the package doc describes it,
// written independently of the implementation.
func referenceStream(key Key, label string, width int) func() uint64 {
	var block uint64
	var words []uint64
	return func() uint64 {
		if len(words) == 0 {
			msg := append(append(append([]byte{}, key[:]...), label...), byte(width))
			msg = binary.BigEndian.AppendUint64(msg, block)
			block++
			sum := sha256.Sum256(msg)
			for i := 0; i < len(sum); i += 8 {
				words = append(words, binary.BigEndian.Uint64(sum[i:]))
			}
		}
		w := words[0]
		words = words[1:]
		return w
	}
}

// TestBitsFollowsDoc derives the position table by the procedure of the
// package doc and compares it with NewBits.
func TestBitsFollowsDoc(t *testing.T) {
	for _, key := range testKeys() {
		for _, width := range []int{1, 2, 7, 16, 47, 64} {
			next := referenceStream(key, "chibrary/shuffle/bits/v1", width)
			uniform := func(n uint64) uint64 {
				// Reject words at or above the largest multiple of n
				// that fits in 64 bits (2^64 - 2^64 mod n).
				rem := (-n) % n // 2^64 mod n
				for {
					if w := next(); rem == 0 || w < -rem {
						return w % n
					}
				}
			}
			want := make([]int, width)
			for i := range want {
				want[i] = i
			}
			for i := width - 1; i >= 1; i-- {
				j := uniform(uint64(i + 1))
				want[i], want[j] = want[j], want[i]
			}
			p, err := NewBits(key, width)
			if err != nil {
				t.Fatal(err)
			}
			if got := p.Positions(); !slices.Equal(got, want) {
				t.Errorf("key %s width %d: Positions() = %v, want %v", key, width, got, want)
			}
		}
	}
}

// TestMixFollowsDoc computes the Feistel network as the package doc
// describes it, round by round on an explicit left and right part, and
// compares it with NewMix.
func TestMixFollowsDoc(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for _, key := range testKeys() {
		for _, width := range []int{2, 3, 16, 47, 64} {
			next := referenceStream(key, "chibrary/shuffle/mix/v1", width)
			var roundKeys [MixRounds]uint64
			for i := range roundKeys {
				roundKeys[i] = next()
			}
			splitmix := func(z uint64) uint64 {
				z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
				z = (z ^ (z >> 27)) * 0x94d049bb133111eb
				return z ^ (z >> 31)
			}
			reference := func(x uint64) uint64 {
				lw, rw := (width+1)/2, width/2
				left, right := x>>rw, x&(1<<rw-1)
				for i := 0; i < MixRounds; i++ {
					f := splitmix(right+roundKeys[i]) & (1<<lw - 1)
					left, right = right, left^f
					lw, rw = rw, lw
				}
				return left<<rw | right
			}
			p, err := NewMix(key, width)
			if err != nil {
				t.Fatal(err)
			}
			for range 1000 {
				x := rng.Uint64() & mask(width)
				if got, want := p.Apply(x), reference(x); got != want {
					t.Fatalf("key %s width %d: Apply(%#x) = %#x, want %#x", key, width, x, got, want)
				}
			}
		}
	}
}

func TestNew(t *testing.T) {
	var key Key
	tests := []struct {
		name   string
		scheme Scheme
		width  int
		err    error
	}{
		{"bits 1", Bits, 1, nil},
		{"bits 47", Bits, 47, nil},
		{"bits 64", Bits, 64, nil},
		{"bits 0", Bits, 0, ErrWidth},
		{"bits 65", Bits, 65, ErrWidth},
		{"mix 2", Mix, 2, nil},
		{"mix 47", Mix, 47, nil},
		{"mix 64", Mix, 64, nil},
		{"mix 1", Mix, 1, ErrWidth},
		{"mix 65", Mix, 65, ErrWidth},
		{"mix -1", Mix, -1, ErrWidth},
		{"unknown scheme", Scheme("aes"), 47, ErrScheme},
		{"empty scheme", Scheme(""), 47, ErrScheme},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			p, err := New(tt.scheme, key, tt.width)
			if !errors.Is(err, tt.err) {
				t.Fatalf("New(%q, %d) = %v, want %v", tt.scheme, tt.width, err, tt.err)
			}
			if err != nil {
				return
			}
			if p.Width() != tt.width || p.Scheme() != tt.scheme {
				t.Errorf("New(%q, %d) gives width %d scheme %q", tt.scheme, tt.width, p.Width(), p.Scheme())
			}
		})
	}
}

func TestParseScheme(t *testing.T) {
	tests := []struct {
		in   string
		want Scheme
		err  error
	}{
		{"bits", Bits, nil},
		{"mix", Mix, nil},
		{"", "", ErrScheme},
		{"Bits", "", ErrScheme},
		{"feistel", "", ErrScheme},
	}
	for _, tt := range tests {
		got, err := ParseScheme(tt.in)
		if got != tt.want || !errors.Is(err, tt.err) {
			t.Errorf("ParseScheme(%q) = %q, %v, want %q, %v", tt.in, got, err, tt.want, tt.err)
		}
	}
}

func TestKeyText(t *testing.T) {
	const hexKey = "000102030405060708090a0b0c0d0e0f101112131415161718191a1b1c1d1e1f"
	k := mustKey(t, hexKey)
	if k != testKeys()[1] {
		t.Errorf("UnmarshalText(%q) = %x", hexKey, k)
	}
	if got := k.String(); got != hexKey {
		t.Errorf("String() = %q, want %q", got, hexKey)
	}
	if got, _ := k.MarshalText(); string(got) != hexKey {
		t.Errorf("MarshalText() = %q, want %q", got, hexKey)
	}
	if got := mustKey(t, "000102030405060708090A0B0C0D0E0F101112131415161718191A1B1C1D1E1F"); got != k {
		t.Errorf("upper-case hex decodes to %x, want %x", got, k)
	}
	for _, bad := range []string{"", "00", hexKey + "00", hexKey[:63], hexKey[:62] + "zz", hexKey[:63] + " "} {
		var k Key
		if err := k.UnmarshalText([]byte(bad)); !errors.Is(err, ErrKey) {
			t.Errorf("UnmarshalText(%q) = %v, want %v", bad, err, ErrKey)
		}
	}
}

// TestBijectionExhaustive checks every input of every width up to 16 bits
// that the scheme supports: Apply is a bijection on [0, 2^width), Invert
// undoes it, and bits above the width are ignored.
func TestBijectionExhaustive(t *testing.T) {
	keys := testKeys()[:2]
	if testing.Short() {
		keys = keys[:1]
	}
	for _, scheme := range []Scheme{Bits, Mix} {
		for width := 1; width <= 16; width++ {
			if scheme == Mix && width < 2 {
				continue
			}
			for ki, key := range keys {
				t.Run(fmt.Sprintf("%s/%d/key%d", scheme, width, ki), func(t *testing.T) {
					p := mustNew(t, scheme, key, width)
					size := uint64(1) << width
					seen := make([]bool, size)
					for x := uint64(0); x < size; x++ {
						y := p.Apply(x)
						if y >= size {
							t.Fatalf("Apply(%#x) = %#x, not below 2^%d", x, y, width)
						}
						if seen[y] {
							t.Fatalf("Apply(%#x) = %#x, already the image of another input", x, y)
						}
						seen[y] = true
						if got := p.Invert(y); got != x {
							t.Fatalf("Invert(Apply(%#x)) = %#x", x, got)
						}
						if got := p.Apply(x | size); got != y {
							t.Fatalf("Apply(%#x) = %#x, want Apply(%#x) = %#x (high bits ignored)", x|size, got, x, y)
						}
					}
				})
			}
		}
	}
}

// TestProperties47 checks random 47-bit inputs.
func TestProperties47(t *testing.T) {
	const width, n = 47, 200_000
	rng := rand.New(rand.NewPCG(47, 47))
	for _, scheme := range []Scheme{Bits, Mix} {
		for ki, key := range testKeys() {
			t.Run(fmt.Sprintf("%s/key%d", scheme, ki), func(t *testing.T) {
				p := mustNew(t, scheme, key, width)
				for range n {
					x := rng.Uint64() & mask(width)
					y := p.Apply(x)
					if y>>width != 0 {
						t.Fatalf("Apply(%#x) = %#x, not below 2^47", x, y)
					}
					if got := p.Invert(y); got != x {
						t.Fatalf("Invert(Apply(%#x)) = %#x", x, got)
					}
					if got := p.Apply(p.Invert(x)); got != x {
						t.Fatalf("Apply(Invert(%#x)) = %#x", x, got)
					}
				}
			})
		}
	}
}

// TestKeysDiffer checks that keys differing in one bit give different
// permutations, and that the same key always gives the same one.
func TestKeysDiffer(t *testing.T) {
	const width = 47
	for _, scheme := range []Scheme{Bits, Mix} {
		keys := testKeys()
		for i := range keys {
			for j := range keys {
				p, q := mustNew(t, scheme, keys[i], width), mustNew(t, scheme, keys[j], width)
				differ := 0
				for b := range width {
					x := uint64(1)<<b | 1<<((b+1)%width)
					if p.Apply(x) != q.Apply(x) {
						differ++
					}
				}
				if i == j && differ != 0 {
					t.Errorf("%s: key %d gives two permutations (%d of %d inputs differ)", scheme, i, differ, width)
				}
				if i != j && differ == 0 {
					t.Errorf("%s: keys %d and %d give the same image of all %d test inputs", scheme, i, j, width)
				}
			}
		}
	}
	// Width and scheme are part of the derivation too.
	var key Key
	if a, b := mustNew(t, Mix, key, 47), mustNew(t, Mix, key, 48); a.Apply(1) == b.Apply(1) && a.Apply(2) == b.Apply(2) {
		t.Errorf("mix: widths 47 and 48 map 1 and 2 alike")
	}
}

func TestNoAllocs(t *testing.T) {
	for _, scheme := range []Scheme{Bits, Mix} {
		p := mustNew(t, scheme, testKeys()[3], 47)
		x := uint64(12345)
		if n := testing.AllocsPerRun(1000, func() { x = p.Invert(p.Apply(x) + 1) }); n != 0 {
			t.Errorf("%s: Apply+Invert allocate %v times, want 0", scheme, n)
		}
	}
}

// TestStreamIntn checks the rejection sampling on small ranges: every
// value appears, none is out of range.
func TestStreamIntn(t *testing.T) {
	var key Key
	s := newStream(key, "test", 1)
	for _, n := range []uint64{1, 2, 3, 7, 47, 64} {
		seen := make([]int, n)
		for range 100 * n {
			v := s.intn(n)
			if v >= n {
				t.Fatalf("intn(%d) = %d", n, v)
			}
			seen[v]++
		}
		for v, c := range seen {
			if c == 0 {
				t.Errorf("intn(%d) never gave %d in %d draws", n, v, 100*n)
			}
		}
	}
}

var sink uint64

func BenchmarkApply(b *testing.B) {
	for _, scheme := range []Scheme{Bits, Mix} {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			p := mustNew(b, scheme, testKeys()[3], 47)
			x := uint64(1 << 14)
			for b.Loop() {
				x = p.Apply(x+1) & (1<<47 - 1)
			}
			sink = x
		})
	}
}

func BenchmarkInvert(b *testing.B) {
	for _, scheme := range []Scheme{Bits, Mix} {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			p := mustNew(b, scheme, testKeys()[3], 47)
			x := uint64(1 << 14)
			for b.Loop() {
				x = p.Invert(x + 1)
			}
			sink = x
		})
	}
}

func BenchmarkNew(b *testing.B) {
	for _, scheme := range []Scheme{Bits, Mix} {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			key := testKeys()[3]
			for b.Loop() {
				if _, err := New(scheme, key, 47); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
