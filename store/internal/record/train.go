package record

import (
	"context"
	"encoding/binary"
	"fmt"
	"slices"

	"github.com/klauspost/compress/zstd"
)

// Training a dictionary: which bytes of the samples go into it.
//
// Train selects the dictionary's content as zstd's own trainer does
// (fastCover, after Liao, Petri, Moffat and Wirth, "Effective construction
// of Relative Lempel-Ziv dictionaries", WWW 2016): it counts in how many
// samples each 8-byte string (d-mer) occurs, then repeatedly appends the
// 256-byte segment whose distinct d-mers are worth most and forgets the
// d-mers it covers, so that nothing is learnt twice. Epochs of the samples
// take turns, so that the dictionary draws on all of them; a string of one
// sample only is worth nothing. zstd.BuildDict then adds the entropy tables.
// Unlike github.com/klauspost/compress/dict, it gives the same dictionary
// for the same samples: two writers training on the same messages store one.
const (
	coverSegment = 256 // k: bytes per selected segment
	coverDmer    = 8   // d: bytes per counted string
	coverHashLog = 20  // the counters' table has 2^20 entries
	coverPasses  = 4   // segments each epoch gives, about
	// statsBytes bounds the samples zstd.BuildDict compresses to learn the
	// entropy tables: more takes time and teaches little.
	statsBytes = 1 << 20
	// minContent is the least content worth a dictionary.
	minContent = 1 << 10
)

// Train builds a dictionary from samples, the raw bytes of stored messages
// (those over MaxSample left out), failing if they share too little.
func Train(ctx context.Context, samples [][]byte) (b []byte, err error) {
	var in [][]byte
	total := 0
	for _, s := range samples {
		if len(s) <= MaxSample && len(s) >= coverDmer {
			in = append(in, s)
			total += len(s)
		}
	}
	if len(in) < 2 {
		return nil, fmt.Errorf("cannot train a dictionary on %d messages", len(in))
	}
	content, err := coverContent(ctx, in, DictSize)
	if err != nil {
		return nil, err
	}
	if len(content) < minContent {
		return nil, fmt.Errorf("cannot train a dictionary: %d messages share only %d bytes worth learning", len(in), len(content))
	}
	// About statsBytes of samples, spread over all.
	var stats [][]byte
	step := max(1, total/statsBytes)
	for i := 0; i < len(in); i += step {
		stats = append(stats, in[i])
	}
	defer func() {
		if r := recover(); r != nil {
			// zstd.BuildDict has panicked (index out of range) on a large
			// sample: a failed training must cost nothing but the dictionary.
			b, err = nil, fmt.Errorf("cannot train a dictionary: zstd.BuildDict failed: %v", r)
		}
	}()
	b, err = zstd.BuildDict(zstd.BuildDictOptions{
		ID:       zstdDictID,
		Contents: stats,
		History:  content,
		Offsets:  [3]int{1, 4, 8}, // zstd's initial repeat offsets
		Level:    zstd.SpeedFastest,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot train a dictionary on %d messages: %w", len(in), err)
	}
	return b, nil
}

const noDmer = ^uint32(0)

// coverContent returns at most size bytes of the samples, chosen as the top
// of this file says, the best segment last, where zstd reaches it with the
// shortest offsets. At most 65,535 samples.
func coverContent(ctx context.Context, samples [][]byte, size int) ([]byte, error) {
	samples = samples[:min(len(samples), 1<<16-1)]
	// Positions run through the samples end to end: sample si covers
	// [ends[si-1], ends[si]).
	ends := make([]int, len(samples))
	total := 0
	for i, s := range samples {
		total += len(s)
		ends[i] = total
	}
	// cnt[h] holds two counters of the d-mers of hash h: in its low 16 bits
	// in how many samples they occur, in its high 16 bits how many times they
	// are in the window at hand. One table, so the window's scan misses the
	// cache once per d-mer, not twice.
	cnt := make([]uint32, 1<<coverHashLog)
	seen := make([]uint16, 1<<coverHashLog) // the last sample counted, + 1
	for si, s := range samples {
		for i := 0; i+coverDmer <= len(s); i++ {
			if h := dmerHash(s[i:]); seen[h] != uint16(si+1) {
				seen[h] = uint16(si + 1)
				cnt[h]++
			}
		}
	}
	seen = nil
	// A string of one sample only teaches nothing about the others.
	for i, f := range cnt {
		if f < 2 {
			cnt[i] = 0
		}
	}
	// at returns the sample holding position i and where it starts.
	sample := 0
	at := func(i int) (int, int) {
		for sample > 0 && i < ends[sample-1] {
			sample--
		}
		for i >= ends[sample] {
			sample++
		}
		if sample == 0 {
			return 0, 0
		}
		return sample, ends[sample-1]
	}
	// dmer returns the d-mer at i, or noDmer where none starts.
	dmer := func(i int) uint32 {
		si, start := at(i)
		s := samples[si]
		if i-start+coverDmer > len(s) {
			return noDmer
		}
		return dmerHash(s[i-start:])
	}
	epochs := max(1, size/coverSegment/coverPasses)
	if total/epochs < 4*coverSegment {
		epochs = max(1, total/(4*coverSegment))
	}
	epochSize := total / epochs

	dict := make([]byte, size)
	free := size // dict[free:] is filled
	// hashes[i-begin] is the hash of the d-mer at position i of the epoch.
	hashes := make([]uint32, epochSize+epochs)
	for epoch, barren := 0, 0; free > 0 && barren < epochs; epoch = (epoch + 1) % epochs {
		if err := ctx.Err(); err != nil {
			return nil, err
		}
		begin, end := epoch*epochSize, min((epoch+1)*epochSize, total)
		hs := hashDmers(samples, ends, begin, end, hashes)
		h := func(i int) uint32 { return hs[i-begin] }
		// The window of at most coverSegment-coverDmer+1 d-mers with the
		// greatest sum of frequencies over its distinct d-mers.
		var score, best uint64
		bestAt := -1
		lo := begin
		for hi := begin; hi < end; hi++ {
			if d := h(hi); d != noDmer {
				v := cnt[d]
				if v < inWindow { // not in the window yet: v is its frequency
					score += uint64(v)
				}
				cnt[d] = v + inWindow
			}
			if hi-lo+1 > coverSegment-coverDmer+1 {
				if d := h(lo); d != noDmer {
					v := cnt[d] - inWindow
					if cnt[d] = v; v < inWindow {
						score -= uint64(v)
					}
				}
				lo++
			}
			if score > best {
				best, bestAt = score, lo
			}
		}
		for i := lo; i < end; i++ {
			if d := h(i); d != noDmer {
				cnt[d] &= freqMask
			}
		}
		if bestAt < 0 || best == 0 {
			barren++
			continue
		}
		barren = 0
		// Trim d-mers worth nothing from both ends. The segment may run
		// past the epoch's end, where d-mers are hashed as needed.
		from, to := bestAt, min(bestAt+coverSegment, total)
		dm := func(i int) uint32 {
			if i < end {
				return h(i)
			}
			return dmer(i)
		}
		for from < to && worthless(dm(from), cnt) {
			from++
		}
		for to-coverDmer > from && worthless(dm(to-coverDmer), cnt) {
			to--
		}
		for i := from; i+coverDmer <= to; i++ {
			if d := dm(i); d != noDmer {
				cnt[d] &^= freqMask
			}
		}
		from = max(from, to-free)
		free -= to - from
		// Copy [from, to), which may span samples.
		for w := free; from < to; {
			si, start := at(from)
			n := copy(dict[w:w+to-from], samples[si][from-start:])
			w, from = w+n, from+n
		}
	}
	return dict[free:], nil
}

// hashDmers returns the d-mer hashes of positions [begin, end) of the
// samples end to end (noDmer where none starts within one sample), in buf
// if large enough.
func hashDmers(samples [][]byte, ends []int, begin, end int, buf []uint32) []uint32 {
	if cap(buf) < end-begin {
		buf = make([]uint32, end-begin)
	}
	buf = buf[:end-begin]
	si, _ := slices.BinarySearch(ends, begin+1) // the first sample ending past begin
	for i := begin; i < end; si++ {
		start := 0
		if si > 0 {
			start = ends[si-1]
		}
		s := samples[si]
		stop := min(end, ends[si])
		last := start + len(s) - coverDmer // the last position a d-mer starts at
		for ; i < stop; i++ {
			if i <= last {
				buf[i-begin] = dmerHash(s[i-start:])
			} else {
				buf[i-begin] = noDmer
			}
		}
	}
	return buf
}

func worthless(h uint32, cnt []uint32) bool { return h == noDmer || cnt[h]&freqMask == 0 }

// The two counters of coverContent's cnt: a d-mer's frequency (its low
// bits) and its count in the window (inWindow apiece).
const (
	freqMask = 1<<16 - 1
	inWindow = 1 << 16
)

func dmerHash(b []byte) uint32 {
	const prime8 = 0xcf1bbcdcb7a56463
	return uint32((binary.LittleEndian.Uint64(b) * prime8) >> (64 - coverHashLog))
}
