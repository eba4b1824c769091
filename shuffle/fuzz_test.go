package shuffle

import "testing"

// FuzzApplyInvert checks, for any key, width and input, that Apply stays
// below 2^width and Invert undoes it, in both schemes.
func FuzzApplyInvert(f *testing.F) {
	f.Add([]byte{}, uint8(47), uint64(0))
	f.Add([]byte("chibrary"), uint8(47), uint64(1<<47-1))
	f.Add([]byte{0xff}, uint8(64), ^uint64(0))
	f.Add([]byte{1, 2, 3}, uint8(2), uint64(3))
	f.Fuzz(func(t *testing.T, keyBytes []byte, w uint8, x uint64) {
		var key Key
		copy(key[:], keyBytes)
		width := int(w)%MaxWidth + 1
		for _, scheme := range []Scheme{Bits, Mix} {
			p, err := New(scheme, key, width)
			if err != nil {
				if scheme == Mix && width == 1 {
					continue
				}
				t.Fatalf("New(%s, %d) = %v", scheme, width, err)
			}
			y := p.Apply(x)
			if y&^mask(width) != 0 {
				t.Fatalf("%s/%d: Apply(%#x) = %#x, not below 2^%d", scheme, width, x, y, width)
			}
			if got := p.Invert(y); got != x&mask(width) {
				t.Fatalf("%s/%d: Invert(Apply(%#x)) = %#x", scheme, width, x, got)
			}
			if got := p.Apply(p.Invert(x)); got != x&mask(width) {
				t.Fatalf("%s/%d: Apply(Invert(%#x)) = %#x", scheme, width, x, got)
			}
		}
	})
}
