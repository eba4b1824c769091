package main

import (
	"strings"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// TestMeasure runs a small measurement, checks the facts the package doc
// states about each scheme, and logs the report (go test -v).
func TestMeasure(t *testing.T) {
	if testing.Short() {
		t.Skip("short: the measurement takes seconds")
	}
	o := Options{Keys: 200, StatKeys: 3, ArchiveKeys: 2, Seed: 1}
	r, err := Measure(o)
	if err != nil {
		t.Fatal(err)
	}
	var b strings.Builder
	r.Write(&b)
	t.Log("\n" + b.String())

	for _, s := range r.Schemes {
		if len(s.RunObservations) != o.Keys || len(s.ArchiveObservations) != o.ArchiveKeys {
			t.Errorf("%s: %d and %d simulations, want %d and %d", s.Scheme, len(s.RunObservations), len(s.ArchiveObservations), o.Keys, o.ArchiveKeys)
		}
		for _, st := range []SampleStats{s.OneRun, s.Across} {
			if st.Reachable[0] != 40 || st.Reachable[1] != 62 {
				t.Errorf("%s: reachable first characters %d, second %d, want 40, 62", s.Scheme, st.Reachable[0], st.Reachable[1])
			}
		}
		switch s.Scheme {
		case shuffle.Bits:
			// A bit permutation moves the packed value's bits: neighbours
			// differ in as many bits as before shuffling (2 on average:
			// 1 + 1/2 + 1/4 + ...), and one run varies in 14 positions.
			if s.OneRun.BitFlips > 0.05 || s.ConstantBits != callnumber.Bits-callnumber.SequenceBits {
				t.Errorf("bits: flips %.3f, constant bits %.1f, want < 0.05 and 33", s.OneRun.BitFlips, s.ConstantBits)
			}
			if !s.RunEnumerated {
				t.Errorf("bits: the observed positions did not span exactly the run")
			}
			if s.HitRate < 0.25 {
				t.Errorf("bits: hit rate %g, want at least 1/4", s.HitRate)
			}
		case shuffle.Mix:
			for _, st := range []SampleStats{s.OneRun, s.Across} {
				if st.BitFlips < 0.47 || st.BitFlips > 0.53 {
					t.Errorf("mix: neighbours differ in %.3f of bits, want about 0.5", st.BitFlips)
				}
				for pos, c := range st.ChiPerDF {
					if c > 2 {
						t.Errorf("mix: character %d has chi-square/df %.2f, want about 1", pos+1, c)
					}
				}
			}
			if s.ConstantBits != 0 || s.ArchivePositions != callnumber.Bits {
				t.Errorf("mix: %.1f constant bits in a run, %.1f varying positions in the archive, want 0, 47", s.ConstantBits, s.ArchivePositions)
			}
		}
	}
}

// TestExpected checks the exact digit probabilities against a direct
// count on a small case and their sums.
func TestExpected(t *testing.T) {
	for pos := range callnumber.Length {
		var sum float64
		for _, p := range expected(pos) {
			sum += p
		}
		if sum < 0.999999 || sum > 1.000001 {
			t.Errorf("position %d: probabilities sum to %v", pos, sum)
		}
	}
	p := expected(0)
	for d := range 62 {
		if (p[d] > 0) != (d < 40) {
			t.Errorf("first character %q: probability %g", callnumber.Alphabet[d], p[d])
		}
	}
}
