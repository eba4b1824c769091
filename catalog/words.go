package catalog

// What a word is: what the fts tables' tokenizer, FTS5's unicode61 with
// remove_diacritics 2 and no tokenchars or separators
// (https://sqlite.org/fts5.html#unicode61_tokenizer), reads as one. The
// catalog asks the question in several places: the words of a query
// (how many, how long the start of a word* is), the words an excerpt
// marks, the pairs of common words (pairs.go). If its answer differs from
// the tokenizer's, a query's word count or a prefix's length is not what
// FTS5 reads (a limit bypassed), and an excerpt marks words FTS5 did not
// match or misses those it did. So there is one answer, here, and
// FuzzWords and TestWordTables hold it to SQLite's.
//
// unicode61, in fts5_unicode2.c and fts5_tokenize.c of SQLite:
//
//   - A word starts at a letter, number or private-use character (the
//     categories "L* N* Co"), or at a character its tables do not know:
//     its Unicode is older than Go's, so a character assigned since, of
//     whatever kind, is part of words; so is any code point from
//     U+100000 up, and any a malformed UTF-8 sequence decodes to there.
//     In ASCII, only letters and digits: '_' separates.
//   - A word goes on through those characters and the combining marks of
//     isDiacritic; any other character ends it.
//   - Each character of a word is folded alone: lower case (ASCII, and by
//     SQLite's own case table beyond), then without its diacritics (a
//     table of Latin letters only: Greek and Cyrillic keep their
//     accents), the marks of isDiacritic dropped.
//   - UTF-8 is read as SQLite reads it (decodeFTS), malformed or not.
//
// The tables beyond ASCII (words_tables.go) are derived from the SQLite
// this module links, by asking it to tokenize every code point:
// `go test ./catalog -run TestWordTables -update-words` writes them again
// after an upgrade of modernc.org/sqlite, and TestWordTables fails until
// they match.

import (
	"slices"
	"unicode"
	"unicode/utf8"
)

// isWordRune reports a character that starts a word, and is part of one.
func isWordRune(r rune) bool {
	if r < utf8.RuneSelf {
		return 'a' <= r && r <= 'z' || 'A' <= r && r <= 'Z' || '0' <= r && r <= '9'
	}
	return r > unicode.MaxRune || unicode.Is(ftsWordRunes, r)
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

// decodeFTS returns the character at the start of s (not empty) as
// SQLite's READ_UTF8 reads it, and its length in bytes: a lead byte and
// every continuation byte after it, however many; a stray continuation
// byte is the character of its value (0x80-0xBF); a decoded value below
// 0x80, a surrogate or U+FFFE/U+FFFF is U+FFFD. On valid UTF-8 it is
// utf8.DecodeRuneInString.
func decodeFTS(s string) (r rune, n int) {
	c := uint32(s[0])
	if c < 0xc0 {
		return rune(c), 1
	}
	if r, n := utf8.DecodeRuneInString(s); r != utf8.RuneError || n > 1 {
		if n == len(s) || s[n]&0xc0 != 0x80 {
			return r, n
		}
	}
	c = uint32(utf8Trans1[c-0xc0])
	n = 1
	for ; n < len(s) && s[n]&0xc0 == 0x80; n++ {
		c = c<<6 + uint32(s[n]&0x3f)
	}
	if c < 0x80 || c&0xfffff800 == 0xd800 || c&0xfffffffe == 0xfffe {
		c = 0xfffd
	}
	if c > unicode.MaxRune {
		// Beyond Unicode, where rune and SQLite's u32 part: any such
		// value is a word's character (category 0) folded to itself.
		return unicode.MaxRune + 1, n
	}
	return rune(c), n
}

// utf8Trans1 is SQLite's sqlite3Utf8Trans1: the bits a lead byte from
// 0xC0 up gives a character.
var utf8Trans1 = [64]byte{
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x10, 0x11, 0x12, 0x13, 0x14, 0x15, 0x16, 0x17, 0x18, 0x19, 0x1a, 0x1b, 0x1c, 0x1d, 0x1e, 0x1f,
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x08, 0x09, 0x0a, 0x0b, 0x0c, 0x0d, 0x0e, 0x0f,
	0x00, 0x01, 0x02, 0x03, 0x04, 0x05, 0x06, 0x07, 0x00, 0x01, 0x02, 0x03, 0x00, 0x01, 0x00, 0x00,
}

// nextWord returns the byte range of the first word of s at or after
// from, and whether it is all ASCII; start is -1 when there is none.
// ASCII, which is most of mail, is read a byte at a time without
// decoding.
func nextWord(s string, from int) (start, end int, ascii bool) {
	i := from
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				break
			}
			i++
			continue
		}
		r, n := decodeFTS(s[i:])
		if isWordRune(r) {
			break
		}
		i += n
	}
	if i >= len(s) {
		return -1, -1, false
	}
	start, ascii = i, true
	for i < len(s) {
		c := s[i]
		if c < utf8.RuneSelf {
			if 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || '0' <= c && c <= '9' {
				i++
				continue
			}
			break
		}
		r, n := decodeFTS(s[i:])
		if !isWordRune(r) && !isDiacritic(r) {
			break
		}
		ascii = false
		i += n
	}
	return start, i, ascii
}

// wordSpans returns the byte ranges of the words of s.
func wordSpans(s string) [][2]int {
	var out [][2]int
	for start, end, _ := nextWord(s, 0); start >= 0; start, end, _ = nextWord(s, end) {
		out = append(out, [2]int{start, end})
	}
	return out
}

// countWords returns how many words s has.
func countWords(s string) int {
	n := 0
	for start, end, _ := nextWord(s, 0); start >= 0; start, end, _ = nextWord(s, end) {
		n++
	}
	return n
}

// HasWord reports whether s has a word, as the index reads words: a
// search for a string without one cannot find anything.
func HasWord(s string) bool {
	start, _, _ := nextWord(s, 0)
	return start >= 0
}

// tokens returns the words of s, folded.
func tokens(s string) []string {
	var out []string
	for start, end, _ := nextWord(s, 0); start >= 0; start, end, _ = nextWord(s, end) {
		out = append(out, fold(s[start:end]))
	}
	return out
}

// fold returns the word w as the tokenizer writes it in the index: each
// character lower-cased and without its diacritics, by SQLite's tables.
func fold(w string) string {
	folded := true // lower-case ASCII already
	for i := 0; i < len(w) && folded; i++ {
		c := w[i]
		folded = c < utf8.RuneSelf && !('A' <= c && c <= 'Z')
	}
	if folded {
		return w
	}
	b := make([]byte, 0, len(w))
	for i := 0; i < len(w); {
		if c := w[i]; c < utf8.RuneSelf {
			if 'A' <= c && c <= 'Z' {
				c += 'a' - 'A'
			}
			b = append(b, c)
			i++
			continue
		}
		r, n := decodeFTS(w[i:])
		i += n
		if r > unicode.MaxRune {
			b = append(b, w[i-n:i]...) // SQLite writes such a value its own way; it matches only itself
			continue
		}
		if f := foldRune(r); f != 0 {
			b = utf8.AppendRune(b, f)
		}
	}
	return string(b)
}

// foldRune returns the character r (beyond ASCII) is written as in the
// index, or 0 for none.
func foldRune(r rune) rune {
	i, ok := slices.BinarySearchFunc(ftsFolds[:], r, func(f [2]rune, r rune) int { return int(f[0] - r) })
	if ok {
		return ftsFolds[i][1]
	}
	return r
}
