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
// The pairs must see the words as FTS5's unicode61 tokenizer does
// (remove_diacritics 2): where the two disagree the pairs may hold one
// FTS5 would not (harmless), and FuzzPairs checks against FTS5 itself
// that they never lack one it sees.

import (
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"
)

// pairSep joins the two words of a pair: a private-use character, which
// unicode61 reads as part of a word (its token categories are letters,
// numbers and private use) and which no query parsed by ParseQuery keeps
// in a word, so that no word a reader types is a pair.
const pairSep = "\ue000"

// commonWords are the words whose pairs are indexed: English function
// words, the commonest words of mail bodies in the sample (fts5vocab),
// skipping the technical ones (mips, arch, kernel...) that only some
// lists share. Changing the set needs a new SchemaVersion: the pairs of
// a catalog are what its writer's set made them.
var commonWords = func() map[string]bool {
	m := map[string]bool{}
	for _, w := range strings.Fields(`a about after all also am an and any are as at
		be been but by can could did do does for from had has have he her his how
		i if in into is it its just may me more my no not now of on one only or
		other our out over she should so some such than that the their them then
		there these they this those to up us was we were what when where which
		who will with would you your s t`) {
		m[w] = true
	}
	return m
}()

// maxPairs bounds the distinct pairs a message gives: a message of
// hostile text gives no more than this many words to the index.
const maxPairs = 4096

// pairsText returns the pairs of common words that follow each other in
// any of cols, each once, space-separated, in the order first seen.
func pairsText(cols []string) string {
	seen := map[string]bool{}
	var b strings.Builder
	for _, c := range cols {
		prev := ""
		forEachWord(c, func(w string) bool {
			if !commonWords[w] {
				prev = ""
				return true
			}
			if prev != "" {
				p := prev + pairSep + w
				if !seen[p] {
					if len(seen) == maxPairs {
						return false
					}
					seen[p] = true
					b.WriteString(p)
					b.WriteByte(' ')
				}
			}
			prev = w
			return true
		})
		if len(seen) == maxPairs {
			break
		}
	}
	return strings.TrimSuffix(b.String(), " ")
}

// phrasePairs returns the pair words of the common words that follow
// each other in words (as tokens returns them), each once.
func phrasePairs(words []string) []string {
	var out []string
	for i := 1; i < len(words); i++ {
		if commonWords[words[i-1]] && commonWords[words[i]] {
			p := words[i-1] + pairSep + words[i]
			if !slices.Contains(out, p) {
				out = append(out, p)
			}
		}
	}
	return out
}

// isTokenRune reports a character that unicode61 reads as a word's:
// ASCII letters and digits, and beyond ASCII letters, numbers and private
// use (its default categories, "L* N* Co").
func isTokenRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return unicode.IsLetter(r) || unicode.IsNumber(r) || unicode.Is(unicode.Co, r)
}

// isDiacritic reports a combining mark that unicode61 keeps in the word
// it follows (and remove_diacritics takes out): those of U+0300-U+0331
// its table of diacritics names (sqlite3Fts5UnicodeIsdiacritic). Any
// other combining mark, or one that starts no word, ends a word.
func isDiacritic(r rune) bool {
	switch r {
	case 0x300, 0x301, 0x302, 0x303, 0x304, 0x306, 0x307, 0x308, 0x309, 0x30a, 0x30b, 0x30c, 0x30f, 0x311, 0x31b,
		0x323, 0x324, 0x325, 0x326, 0x327, 0x328, 0x32d, 0x32e, 0x330, 0x331:
		return true
	}
	return false
}

// forEachWord calls f with each word of s, folded as fold does, until f
// returns false. Words of ASCII letters, which are all of the common
// words, are folded without allocating beyond the word itself.
func forEachWord(s string, f func(w string) bool) {
	start, ascii := -1, true
	emit := func(end int) bool {
		w := s[start:end]
		if ascii {
			// Lower-case without allocating when already lower-case.
			lower := true
			for i := 0; i < len(w); i++ {
				if 'A' <= w[i] && w[i] <= 'Z' {
					lower = false
					break
				}
			}
			if !lower {
				w = strings.ToLower(w)
			}
		} else {
			w = fold(w)
		}
		return f(w)
	}
	for i := 0; i < len(s); {
		r, n := rune(s[i]), 1
		if r >= utf8.RuneSelf {
			r, n = utf8.DecodeRuneInString(s[i:])
		}
		if isTokenRune(r) || start >= 0 && isDiacritic(r) {
			if start < 0 {
				start, ascii = i, true
			}
			if r >= utf8.RuneSelf {
				ascii = false
			}
		} else if start >= 0 {
			if !emit(i) {
				return
			}
			start = -1
		}
		i += n
	}
	if start >= 0 {
		emit(len(s))
	}
}
