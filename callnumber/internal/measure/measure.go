// Command measure computes what each shuffle scheme hides of consecutive
// call numbers (the figures in docs/design.md): how many bits and characters
// neighbours share, how uniform each character is, and how many numbers an
// outsider must see to enumerate a run or guess a real number. It is
// deterministic: keys are SHA-256("chibrary measure key" || i), the rest
// comes from -seed.
//
//	go run ./callnumber/internal/measure [-keys 1000] [-stat-keys 20] [-archive-keys 100]
package main

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"flag"
	"fmt"
	"io"
	"math"
	"math/bits"
	"math/rand/v2"
	"os"
	"slices"
	"strings"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

func main() {
	var o Options
	flag.IntVar(&o.Keys, "keys", 1000, "number of keys for the enumeration simulations")
	flag.IntVar(&o.StatKeys, "stat-keys", 20, "number of keys the bit and character statistics are averaged over")
	flag.IntVar(&o.ArchiveKeys, "archive-keys", 100, "number of keys for the archive simulation")
	flag.Uint64Var(&o.Seed, "seed", 1, "seed of the choices that are not keys")
	flag.Parse()
	r, err := Measure(o)
	if err != nil {
		fmt.Fprintln(os.Stderr, "measure:", err)
		os.Exit(1)
	}
	r.Write(os.Stdout)
}

// Options sizes a measurement. Zero values mean the defaults of main.
type Options struct {
	Keys        int    // keys for the one-run simulation (default 1000)
	StatKeys    int    // keys the statistics are averaged over (default 20)
	ArchiveKeys int    // keys for the archive simulation (default 100)
	Seed        uint64 // seed of runs and draws (0 is a valid seed)
}

const (
	ArchiveRuns = 64      // runs 1..64 make the simulated archive
	AcrossRuns  = 100_000 // consecutive numbers drawn from a Generator
)

// Report holds the figures of both schemes.
type Report struct {
	Options
	Schemes []SchemeReport
}

// SchemeReport holds the figures of one scheme.
type SchemeReport struct {
	Scheme shuffle.Scheme
	// Statistics over one run and over AcrossRuns numbers, mean of StatKeys.
	OneRun, Across SampleStats
	ConstantBits   float64 // output bits equal in all numbers of a run
	// RunObservations (one per key, sorted) counts the random numbers of a
	// run an observer saw before the positions varying among them were all
	// that vary in the run; RunEnumerated says those positions spanned
	// exactly the run for every key. ArchiveObservations is the same for
	// runs 1..ArchiveRuns.
	RunObservations     []int
	RunEnumerated       bool
	ArchiveObservations []int
	// HitRate is the chance that a guess spanned by the ArchivePositions
	// varying positions names a real call number.
	ArchivePositions float64
	HitRate          float64
}

// SampleStats are statistics of a sequence of consecutive call numbers.
type SampleStats struct {
	N         int     // numbers in the sample
	BitFlips  float64 // mean share of the 47 bits that differ between neighbours
	CharFlips float64 // mean share of the 8 characters that differ between neighbours
	// Per character position: digits reachable below 2^47, digits seen,
	// chi-square per degree of freedom, max/min count (+Inf if min is 0).
	Reachable [callnumber.Length]int
	Seen      [callnumber.Length]float64
	ChiPerDF  [callnumber.Length]float64
	MaxMin    [callnumber.Length]float64
}

func key(i int) shuffle.Key {
	var b [8]byte
	binary.BigEndian.PutUint64(b[:], uint64(i))
	return sha256.Sum256(append([]byte("chibrary measure key"), b[:]...))
}

// Measure computes the report.
func Measure(o Options) (*Report, error) {
	if o.Keys <= 0 {
		o.Keys = 1000
	}
	if o.StatKeys <= 0 {
		o.StatKeys = 20
	}
	if o.ArchiveKeys <= 0 {
		o.ArchiveKeys = 100
	}
	o.StatKeys = min(o.StatKeys, o.Keys)
	o.ArchiveKeys = min(o.ArchiveKeys, o.Keys)
	r := &Report{Options: o}
	for _, scheme := range []shuffle.Scheme{shuffle.Bits, shuffle.Mix} {
		s, err := measureScheme(o, scheme)
		if err != nil {
			return nil, err
		}
		r.Schemes = append(r.Schemes, *s)
	}
	return r, nil
}

func measureScheme(o Options, scheme shuffle.Scheme) (*SchemeReport, error) {
	rng := rand.New(rand.NewPCG(o.Seed, uint64(len(scheme))))
	sr := &SchemeReport{Scheme: scheme, RunEnumerated: scheme == shuffle.Bits}
	var oneRuns, acrosses []SampleStats
	for k := range o.Keys {
		c, err := callnumber.NewCodec(scheme, key(k))
		if err != nil {
			return nil, err
		}
		run := 1 + rng.Uint32N(callnumber.MaxRun-ArchiveRuns)
		nums := make([]callnumber.Number, callnumber.SequencesPerRun)
		for seq := range nums {
			if nums[seq], err = c.Encode(callnumber.Fields{Run: run, Sequence: uint16(seq)}); err != nil {
				return nil, err
			}
		}
		if k < o.StatKeys {
			oneRuns = append(oneRuns, stats(nums))
			across, err := fromGenerator(scheme, key(k), run, AcrossRuns)
			if err != nil {
				return nil, err
			}
			acrosses = append(acrosses, stats(across))
			var varying uint64
			for _, n := range nums {
				varying |= uint64(n ^ nums[0])
			}
			sr.ConstantBits += float64(callnumber.Bits-bits.OnesCount64(varying)) / float64(o.StatKeys)
		}

		// An observer of one run.
		want := 14
		if scheme == shuffle.Mix {
			want = callnumber.Bits
		}
		seen, mask := observe(rng, nums, want)
		sr.RunObservations = append(sr.RunObservations, seen)
		if scheme == shuffle.Bits && !enumerates(nums, mask) {
			sr.RunEnumerated = false
		}

		if k >= o.ArchiveKeys {
			continue
		}
		// An observer of an archive of runs 1..ArchiveRuns.
		archive := make([]callnumber.Number, 0, ArchiveRuns*callnumber.SequencesPerRun)
		for run := uint32(1); run <= ArchiveRuns; run++ {
			for seq := range callnumber.SequencesPerRun {
				n, err := c.Encode(callnumber.Fields{Run: run, Sequence: uint16(seq)})
				if err != nil {
					return nil, err
				}
				archive = append(archive, n)
			}
		}
		var all uint64
		for _, n := range archive {
			all |= uint64(n ^ archive[0])
		}
		positions := bits.OnesCount64(all)
		seen, _ = observe(rng, archive, positions)
		sr.ArchiveObservations = append(sr.ArchiveObservations, seen)
		sr.ArchivePositions += float64(positions) / float64(o.ArchiveKeys)
		sr.HitRate += float64(len(archive)) / math.Ldexp(1, positions) / float64(o.ArchiveKeys)
	}
	slices.Sort(sr.RunObservations)
	slices.Sort(sr.ArchiveObservations)
	sr.OneRun = mean(oneRuns)
	sr.Across = mean(acrosses)
	return sr, nil
}

// fromGenerator draws n numbers from runs first, first+1, ...
func fromGenerator(scheme shuffle.Scheme, k shuffle.Key, first uint32, n int) ([]callnumber.Number, error) {
	next := first
	g := callnumber.NewGenerator(callnumber.RunSourceFunc(func(context.Context) (callnumber.Lease, error) {
		l := callnumber.Lease{Run: next, Authority: "measure", Scheme: scheme, Key: k, Nonce: fmt.Sprint(next)}
		next++
		return l, nil
	}))
	out := make([]callnumber.Number, n)
	for i := range out {
		var err error
		if out[i], err = g.Next(context.Background()); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// observe draws numbers of nums at random until want output positions vary
// among them, and returns how many it drew (at most len(nums)) and those.
func observe(rng *rand.Rand, nums []callnumber.Number, want int) (int, uint64) {
	order := rng.Perm(len(nums))
	first := nums[order[0]]
	var varying uint64
	for i, j := range order {
		varying |= uint64(nums[j] ^ first)
		if bits.OnesCount64(varying) == want {
			return i + 1, varying
		}
	}
	return len(nums), varying
}

// enumerates reports whether the numbers that agree with nums[0] outside
// the varying positions, which an observer can list, are exactly nums.
func enumerates(nums []callnumber.Number, varying uint64) bool {
	if bits.OnesCount64(varying) != callnumber.SequenceBits {
		return false
	}
	fixed := uint64(nums[0]) &^ varying
	want := make(map[uint64]bool, len(nums))
	for _, n := range nums {
		want[uint64(n)] = true
	}
	// Every subset of the varying positions (Knuth's subset walk).
	count := 0
	for sub := uint64(0); ; sub = (sub - varying) & varying {
		if !want[fixed|sub] {
			return false
		}
		count++
		if sub == varying {
			break
		}
	}
	return count == len(nums)
}

// expected returns, for character position pos, the probability of each
// digit when the value is uniform over [0, 2^47).
func expected(pos int) [62]float64 {
	const total = uint64(1) << callnumber.Bits
	w := uint64(1) // 62^(Length-1-pos)
	for range callnumber.Length - 1 - pos {
		w *= 62
	}
	var p [62]float64
	for d := range uint64(62) {
		// w values of each block of 62w, plus those of the partial last block.
		full := total / (62 * w) * w
		rest := total % (62 * w)
		partial := uint64(0)
		if rest > d*w {
			partial = min(rest-d*w, w)
		}
		p[d] = float64(full+partial) / float64(total)
	}
	return p
}

func stats(nums []callnumber.Number) SampleStats {
	s := SampleStats{N: len(nums)}
	var counts [callnumber.Length][62]int
	var prev [callnumber.Length]byte
	var bitFlips, charFlips int
	for i, n := range nums {
		a := n.Array()
		for pos, c := range a {
			counts[pos][strings.IndexByte(callnumber.Alphabet, c)]++
			if i > 0 && c != prev[pos] {
				charFlips++
			}
		}
		if i > 0 {
			bitFlips += bits.OnesCount64(uint64(n ^ nums[i-1]))
		}
		prev = a
	}
	pairs := float64(len(nums) - 1)
	s.BitFlips = float64(bitFlips) / pairs / callnumber.Bits
	s.CharFlips = float64(charFlips) / pairs / callnumber.Length
	for pos := range callnumber.Length {
		p := expected(pos)
		var chi float64
		lo, hi := math.MaxInt, 0
		for d, pd := range p {
			if pd == 0 {
				continue
			}
			s.Reachable[pos]++
			c := counts[pos][d]
			if c > 0 {
				s.Seen[pos]++
			}
			e := pd * float64(len(nums))
			chi += (float64(c) - e) * (float64(c) - e) / e
			lo, hi = min(lo, c), max(hi, c)
		}
		s.ChiPerDF[pos] = chi / float64(s.Reachable[pos]-1)
		s.MaxMin[pos] = float64(hi) / float64(lo)
	}
	return s
}

func mean(ss []SampleStats) SampleStats {
	var m SampleStats
	f := 1 / float64(len(ss))
	for _, s := range ss {
		m.N = s.N
		m.BitFlips += s.BitFlips * f
		m.CharFlips += s.CharFlips * f
		m.Reachable = s.Reachable
		for pos := range callnumber.Length {
			m.Seen[pos] += s.Seen[pos] * f
			m.ChiPerDF[pos] += s.ChiPerDF[pos] * f
			m.MaxMin[pos] += s.MaxMin[pos] * f
		}
	}
	return m
}

// quantiles returns the mean, median, 90th percentile and max of sorted
// values.
func quantiles(v []int) (mean float64, median, p90, maximum int) {
	for _, x := range v {
		mean += float64(x)
	}
	return mean / float64(len(v)), v[len(v)/2], v[len(v)*9/10], v[len(v)-1]
}

// Write prints the report as plain text.
func (r *Report) Write(w io.Writer) {
	fmt.Fprintf(w, "Call-number shuffles measured (statistics over %d keys, one-run observer over %d keys, archive observer over %d keys, seed %d)\n\n", r.StatKeys, r.Keys, r.ArchiveKeys, r.Seed)
	fmt.Fprintf(w, "Neighbours (ideal: 50%% of bits, 98.4%% of characters):\n")
	fmt.Fprintf(w, "  %-6s %-28s %-28s\n", "scheme", "one run (16,384)", fmt.Sprintf("across runs (%d)", AcrossRuns))
	for _, s := range r.Schemes {
		fmt.Fprintf(w, "  %-6s bits %5.1f%%, chars %5.1f%%    bits %5.1f%%, chars %5.1f%%\n", s.Scheme,
			100*s.OneRun.BitFlips, 100*s.OneRun.CharFlips, 100*s.Across.BitFlips, 100*s.Across.CharFlips)
	}
	fmt.Fprintf(w, "\nCharacters: digits seen of reachable, chi-square per degree of freedom (about 1 if uniform)\n")
	fmt.Fprintf(w, "  position 1 can only be 0-9, A-Z, a-d: 2^47 / 62^7 = %.2f\n", math.Ldexp(1, callnumber.Bits)/math.Pow(62, 7))
	for _, s := range r.Schemes {
		for _, x := range []struct {
			name string
			st   SampleStats
		}{{"one run", s.OneRun}, {"across", s.Across}} {
			fmt.Fprintf(w, "  %-4s %-8s", s.Scheme, x.name)
			for pos := range callnumber.Length {
				fmt.Fprintf(w, " %2.0f/%d %7.1f |", x.st.Seen[pos], x.st.Reachable[pos], x.st.ChiPerDF[pos])
			}
			fmt.Fprintln(w)
		}
	}
	fmt.Fprintf(w, "\nOne run: output bits constant over all 16,384 numbers (the observer learns them at once)\n")
	for _, s := range r.Schemes {
		fmt.Fprintf(w, "  %-4s %.1f of 47\n", s.Scheme, s.ConstantBits)
	}
	fmt.Fprintf(w, "\nObserver of one run: random numbers seen until the varying output positions are\n")
	fmt.Fprintf(w, "the 14 of the sequence (bits) or all 47 (mix); mean, median, 90th percentile, max\n")
	for _, s := range r.Schemes {
		m, med, p90, mx := quantiles(s.RunObservations)
		fmt.Fprintf(w, "  %-4s %.1f, %d, %d, %d", s.Scheme, m, med, p90, mx)
		if s.Scheme == shuffle.Bits {
			fmt.Fprintf(w, "; the 2^14 numbers they span are exactly the run: %v", s.RunEnumerated)
		}
		fmt.Fprintln(w)
	}
	fmt.Fprintf(w, "\nObserver of an archive of runs 1..%d (%d numbers): seen until all varying positions are known,\n", ArchiveRuns, ArchiveRuns*callnumber.SequencesPerRun)
	fmt.Fprintf(w, "how many positions vary, and the chance that a number spanned by them is real\n")
	for _, s := range r.Schemes {
		m, med, p90, mx := quantiles(s.ArchiveObservations)
		fmt.Fprintf(w, "  %-4s %.1f, %d, %d, %d seen; %.1f positions; hit rate %.3g\n", s.Scheme, m, med, p90, mx, s.ArchivePositions, s.HitRate)
	}
}
