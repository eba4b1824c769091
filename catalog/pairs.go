package catalog

// Pairs of common words, for phrases made of them.
//
// FTS5 finds a phrase by reading the documents that hold all of its
// words and checking their positions in each. For a phrase of common
// words ("the of and", "it is in the") that is most of the archive, and
// when few or none of them hold the phrase, no page fills early: the
// search costs what the archive holds (issue 37). So each message also
// gives the fts table's last column, pairs, one word for every distinct
// pair of common words that follow each other in any of its columns
// (as Lucene's CommonGrams does, without positions): "of the" is the
// word of + pairSep + the. A phrase that has such pairs is searched as
// those pair words AND the phrase (Term.ftsMain): the pair words are rare
// beside the words they join, and FTS5 checks the phrase only where
// they all are, so its cost is that of its rarest pair, not of its
// commonest words. The pairs are a necessary condition, never a
// sufficient one: the phrase is still checked, so the answers do not
// change.
//
// The pairs must see the words as FTS5's unicode61 tokenizer does: they
// read them with nextWord and fold (words.go), which FuzzWords holds to
// FTS5's, and FuzzPairs checks against FTS5 itself that they never lack
// a pair it sees.

import (
	"cmp"
	"slices"
	"strings"
)

// pairSep joins the two words of a pair: a private-use character, which
// unicode61 reads as part of a word (its token categories are letters,
// numbers and private use). A reader may type it too: a term with it is
// not looked for in the pairs column (Term.ftsIn), so that no word a
// reader types finds a pair.
const pairSep = "\ue000"

// commonWords are the words whose pairs are indexed: English function
// words, the commonest words of mail bodies in the sample (fts5vocab),
// skipping the technical ones (mips, arch, kernel...) that only some
// lists share. Changing them needs a new SchemaVersion: the pairs of a
// catalog are what its writer's words made them. A message gives at most
// every pair of them once, whatever its size.
var commonWords = strings.Fields(`a about after all also am an and any are as at
	be been but by can could did do does for from had has have he her his how
	i if in into is it its just may me more my no not now of on one only or
	other our out over she should so some such than that the their them then
	there these they this those to up us was we were what when where which
	who will with would you your s t`)

// commonIndex is the index in commonWords of each, commonKeys their
// packed words (packWord) in order, for a lookup that neither hashes nor
// allocates, and maxCommonLen the length of the longest.
var commonIndex, commonKeys, maxCommonLen = func() (map[string]int, []commonKey, int) {
	m, longest := map[string]int{}, 0
	var keys []commonKey
	for i, w := range commonWords {
		m[w] = i
		longest = max(longest, len(w))
		keys = append(keys, commonKey{packWord(w), i})
	}
	slices.SortFunc(keys, func(a, b commonKey) int { return cmp.Compare(a.key, b.key) })
	return m, keys, longest
}()

type commonKey struct {
	key   uint64
	index int
}

// packWord returns the word w of at most 8 ASCII bytes as a number,
// lower-cased.
func packWord(w string) uint64 {
	var k uint64
	for i := 0; i < len(w); i++ {
		c := w[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		k = k<<8 | uint64(c)
	}
	return k
}

// asciiCommon returns the index in commonWords of the ASCII word w, in
// any case, or -1.
func asciiCommon(w string) int {
	if len(w) > maxCommonLen {
		return -1
	}
	k := packWord(w)
	i, ok := slices.BinarySearchFunc(commonKeys, k, func(e commonKey, k uint64) int { return cmp.Compare(e.key, k) })
	if !ok {
		return -1
	}
	return commonKeys[i].index
}

// pairsText returns the pairs of common words that follow each other in
// any of cols, each once, space-separated, in the order first seen.
func pairsText(cols []string) string {
	n := len(commonWords)
	seen := make([]uint64, (n*n+63)/64)
	var b strings.Builder
	for _, c := range cols {
		prev := -1
		forEachWord(c, func(w int) {
			if w >= 0 && prev >= 0 {
				if p := prev*n + w; seen[p/64]&(1<<(p%64)) == 0 {
					seen[p/64] |= 1 << (p % 64)
					if b.Len() > 0 {
						b.WriteByte(' ')
					}
					b.WriteString(commonWords[prev])
					b.WriteString(pairSep)
					b.WriteString(commonWords[w])
				}
			}
			prev = w
		})
	}
	return b.String()
}

// phrasePairs returns the pair words of the common words that follow
// each other in text, each once, for a phrase search; with prefix, the
// last word of text is the start of a word and pairs with nothing.
func phrasePairs(text string, prefix bool) []string {
	var words []int
	forEachWord(text, func(w int) { words = append(words, w) })
	if prefix && len(words) > 0 {
		words = words[:len(words)-1]
	}
	var out []string
	for i := 1; i < len(words); i++ {
		if words[i-1] >= 0 && words[i] >= 0 {
			p := commonWords[words[i-1]] + pairSep + commonWords[words[i]]
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// forEachWord calls f with each word of s, as unicode61 with
// remove_diacritics 2 reads them: the index in commonWords of one that is
// a common word, else -1. ASCII words, which are most, are looked up
// without allocating.
func forEachWord(s string, f func(common int)) {
	for start, end, ascii := nextWord(s, 0); start >= 0; start, end, ascii = nextWord(s, end) {
		w := s[start:end]
		common := -1
		switch {
		case ascii:
			common = asciiCommon(w)
		case letters(w) <= maxCommonLen:
			// Letters with diacritics may fold to a common word.
			if k, ok := commonIndex[fold(w)]; ok {
				common = k
			}
		}
		f(common)
	}
}

// letters returns how many characters of the word w are not diacritics.
func letters(w string) int {
	n := 0
	for _, r := range w {
		if !isDiacritic(r) {
			n++
		}
	}
	return n
}
