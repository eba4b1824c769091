package catalog

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of a search query: its length, and its words, those of a phrase
// each counted, since FTS5 reads a list of places for each word of a phrase.
const (
	MaxQueryBytes = 1000
	MaxQueryWords = 32
)

// ErrQuery: a search query that cannot be run; the text says why.
var ErrQuery = errors.New("bad search")

// Term is a word or phrase a search looks for (or, Negated, excludes).
type Term struct {
	// Text is the word or phrase as typed (without quotes).
	Text string
	// Phrase is set when it was typed in double quotes.
	Phrase bool
	// Field limits it to "subject", "from", "dfn" (the paths a patch
	// touches) or "body" (the text and its quoted lines, for IMAP's BODY);
	// "" is anywhere.
	Field   string
	Negated bool
	// Prefix: its last word is the start of words (typed word*).
	Prefix bool
	// Or: this term or the one before it (typed "a OR b"); terms joined
	// by OR make one alternative, which must match as a word does.
	Or bool

	// words, for a prefix, is the FTS5 expression of the indexed words
	// that start with it (their OR, prefix.go), as Search read them: the
	// term in the fts table. "": FTS5's own prefix query.
	words string
}

// Query is a parsed search (ParseQuery).
type Query struct {
	Terms []Term
	// Lists limit the search to these lists (list:NAME, ListName form).
	Lists []string
	// After and Before bound the date: after:X from the start of X on,
	// before:X before the start of X; nil is no bound. Search clamps them
	// to the dates an fts rowid holds (Query.rowids).
	After, Before *time.Time

	// pi: the query was read in public-inbox's grammar, into root (nil
	// when only Lists filter); otherwise Terms are the query.
	pi   bool
	root *node
}

// Positive reports whether q looks for a word, not only excludes or filters.
func (q *Query) Positive() bool {
	for _, t := range q.Terms {
		if !t.Negated {
			return true
		}
	}
	return false
}

// SearchesText reports whether q looks for a word or phrase anywhere or
// in the text, not only in the subject or the sender.
func (q *Query) SearchesText() bool {
	for _, t := range q.Terms {
		if !t.Negated && inText(t.Field) && t.Field != "subject" && t.Field != "from" {
			return true
		}
	}
	return false
}

// inText reports whether a field's words are words of a message's text,
// its subject or its sender, which an excerpt marks.
func inText(field string) bool {
	switch field {
	case "", "subject", "from", "body", "bs", "nq", "q", "dfa", "dfb", "dfctx", "dfhh":
		return true
	}
	return false
}

// ParseQuery reads the search language, the archive's own:
//
//	word            messages with the word (all words must match)
//	a OR b          either (OR in capitals: "cache OR tlb flush" is
//	                (cache or tlb) and flush)
//	"a phrase"      the words next to each other
//	word*           words starting with word (3 letters or digits at least)
//	-word, -"..."   messages without it
//	from:X          X in the sender's name or address (from:"Ralf B")
//	subject:X       X in the subject
//	dfn:PATH        patches touching PATH, whole or by its last components
//	list:NAME       only that list (several: any of them)
//	after:DATE      from DATE on (2019, 2019-02 or 2019-02-03)
//	before:DATE     before DATE
//
// and public-inbox's (querytree.go): AND, NOT, +word, parentheses, and its
// prefixes s: f: t: c: a: tc: b: bs: nq: q: n: l: m: z: d: dt: rt: dfa:
// dfb: dfhh: dfctx: dfpre: dfpost: dfblob: patchid:. A query that uses
// any of these is read as public-inbox's Xapian reads it.
//
// Words are letters and digits ("r4k_cache" is the phrase "r4k cache"),
// matched regardless of case and accents. A prefix the archive does not
// know, and another search engine's syntax (NEAR, XOR, NEAR(...), a
// leading ^, an OR joining nothing), is refused with an ErrQuery that
// names it and says what to type instead.
func ParseQuery(s string) (*Query, error) { return parseQuery(s, time.Now()) }

// parseQuery is ParseQuery with relative dates (2.weeks.ago) from now.
func parseQuery(s string, now time.Time) (*Query, error) {
	if len(s) > MaxQueryBytes {
		return nil, fmt.Errorf("%w: the search is %d bytes long; at most %d are read", ErrQuery, len(s), MaxQueryBytes)
	}
	if !utf8.ValidString(s) {
		return nil, fmt.Errorf("%w: the search is not valid UTF-8 text", ErrQuery)
	}
	// Control characters are no part of a word, and a NUL would end an
	// FTS5 string early: read them as spaces.
	s = strings.Map(func(r rune) rune {
		if unicode.IsControl(r) {
			return ' '
		}
		return r
	}, s)
	toks, err := lexQuery(s)
	if err != nil {
		return nil, err
	}
	if piDialect(toks) {
		return parsePI(s, toks, now)
	}
	return parseArchive(s, toks)
}

// parseArchive reads tokens in the archive's own grammar: terms, OR
// joining two, list:, after: and before: filters.
func parseArchive(s string, toks []qtoken) (*Query, error) {
	q := &Query{}
	p := &queryParser{s: s}
	var afterText, beforeText string
	words := 0
	// or is where an OR was read that the next term takes, or -1.
	or := -1
	for _, tok := range toks {
		start := tok.start
		if tok.kind == tokOr {
			if or >= 0 || len(q.Terms) == 0 || q.Terms[len(q.Terms)-1].Negated {
				return nil, fmt.Errorf("%w: OR at character %d joins nothing: write it between two words (bugs OR crashes); -word cannot be one of them (to look for the word itself, write it in lower case or in quotes)", ErrQuery, p.at(start))
			}
			or = start
			continue
		}
		neg := tok.sign == '-'
		field, text, phrase, prefix, piece := tok.field, tok.text, tok.phrase, tok.prefix, tok.piece
		if or >= 0 && (neg || field == "list" || field == "after" || field == "before") {
			return nil, fmt.Errorf("%w: OR at character %d: %s cannot be one of two alternatives; OR joins words, phrases and from:, subject: or dfn: terms", ErrQuery, p.at(or), piece)
		}
		if prefix && field == "dfn" {
			return nil, fmt.Errorf("%w: %s at character %d: a * is for words; dfn: takes a path or its last components (dfn:setup.c)", ErrQuery, piece, p.at(start))
		}
		if prefix && (field == "list" || field == "after" || field == "before") {
			return nil, fmt.Errorf("%w: %s at character %d: a * is for words; %s: takes a whole %s", ErrQuery, piece, p.at(start), field, map[string]string{"list": "list name", "after": "date", "before": "date"}[field])
		}
		switch field {
		case "list":
			if neg {
				return nil, fmt.Errorf("%w: -list: is not supported; name the lists to search with list:NAME", ErrQuery)
			}
			name := ListName(text)
			if name == "" {
				return nil, fmt.Errorf("%w: %s names no list (list names are letters, digits, '.', '_' and '-')", ErrQuery, piece)
			}
			q.Lists = append(q.Lists, name)
			continue
		case "after", "before":
			if neg {
				return nil, fmt.Errorf("%w: -%s: makes no sense; use %s:DATE", ErrQuery, field, map[string]string{"after": "before", "before": "after"}[field])
			}
			t, err := parseSearchDate(text)
			if err != nil {
				return nil, fmt.Errorf("%w: %s: %v", ErrQuery, piece, err)
			}
			if field == "after" {
				q.After, afterText = &t, piece
			} else {
				q.Before, beforeText = &t, piece
			}
			continue
		}
		if !HasWord(text) {
			if field != "" || phrase {
				return nil, fmt.Errorf("%w: %s at character %d has no letter or digit to look for", ErrQuery, piece, p.at(start))
			}
			continue // punctuation alone: nothing to match
		}
		if prefix {
			if w := tokens(text); len(w) == 0 || utf8.RuneCountInString(w[len(w)-1]) < minPrefix {
				return nil, fmt.Errorf("%w: %s at character %d: give at least %d letters or digits before the * (a shorter start matches too many words)", ErrQuery, piece, p.at(start), minPrefix)
			}
		}
		q.Terms = append(q.Terms, Term{Text: text, Phrase: phrase, Field: field, Negated: neg, Prefix: prefix, Or: or >= 0})
		or = -1
		if words += countWords(text); words > MaxQueryWords {
			return nil, fmt.Errorf("%w: more than %d words (those of a phrase each count); leave some out", ErrQuery, MaxQueryWords)
		}
	}
	if or >= 0 {
		return nil, fmt.Errorf("%w: OR at character %d joins nothing: write it between two words (bugs OR crashes)", ErrQuery, p.at(or))
	}
	if len(q.Terms) == 0 && len(q.Lists) == 0 && q.After == nil && q.Before == nil {
		return nil, fmt.Errorf("%w: type a word to look for", ErrQuery)
	}
	if q.After != nil && q.Before != nil && !q.After.Before(*q.Before) {
		return nil, fmt.Errorf("%w: %s is not before %s, so nothing can match", ErrQuery, afterText, beforeText)
	}
	return q, nil
}

// minPrefix is how many letters or digits a prefix search (word*) needs:
// FTS5 reads every word that starts with the prefix.
const minPrefix = 3

// foreignSyntax refuses an unquoted word that another search syntax
// (FTS5's, a web search engine's) reads as an operator, saying what to
// type instead. Standalone (no field, no '-') words only are operators.
func foreignSyntax(text string, standalone bool, piece string, at int) error {
	if standalone {
		if strings.HasPrefix(text, "NEAR(") {
			return fmt.Errorf("%w: %s at character %d: NEAR(...) is not supported; put words in quotes to find them next to each other (\"a phrase\")", ErrQuery, piece, at)
		}
	}
	if strings.HasPrefix(text, "^") && HasWord(text) {
		return fmt.Errorf("%w: %s at character %d: ^ (a word at the start) is not supported; subject:word looks in the subject", ErrQuery, piece, at)
	}
	return nil
}

type queryParser struct {
	s string
	i int
}

// at returns where byte offset i is in the query, in characters from 1.
func (p *queryParser) at(i int) int { return utf8.RuneCountInString(p.s[:i]) + 1 }

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *queryParser) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// value consumes a quoted phrase or a word up to the next space (or a
// ')' inside parentheses, depth deep), and the '*' of a prefix search
// after either (prefix).
func (p *queryParser) value(depth int) (text string, phrase, prefix bool, err error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		start := p.i
		end := strings.IndexByte(p.s[p.i+1:], '"')
		if end < 0 {
			return "", false, false, fmt.Errorf("%w: the quote at character %d is never closed", ErrQuery, p.at(start))
		}
		text = p.s[p.i+1 : p.i+1+end]
		p.i += end + 2
		for p.i < len(p.s) && p.s[p.i] == '*' {
			p.i++
			prefix = true
		}
		return strings.TrimSpace(text), true, prefix, nil
	}
	start := p.i
	for p.i < len(p.s) && !isSpace(p.s[p.i]) && !(depth > 0 && p.s[p.i] == ')') {
		if p.s[p.i] == '"' {
			return "", false, false, fmt.Errorf("%w: a quote at character %d inside a word; put phrases in quotes: \"like this\"", ErrQuery, p.at(p.i))
		}
		p.i++
	}
	text = p.s[start:p.i]
	if trimmed := strings.TrimRight(text, "*"); trimmed != text && HasWord(trimmed) {
		text, prefix = trimmed, true
	}
	return text, false, prefix, nil
}

// parseSearchDate reads 2019, 2019-02 or 2019-02-03 as the first instant
// of that year, month or day, UTC.
func parseSearchDate(s string) (time.Time, error) {
	for _, layout := range []string{"2006-01-02", "2006-01", "2006"} {
		if len(s) == len(layout) {
			if t, err := time.Parse(layout, s); err == nil {
				return t, nil
			}
		}
	}
	return time.Time{}, errors.New("not a date: write 2019, 2019-02 or 2019-02-03")
}

// match returns the FTS5 expression of q's terms, "" if none is positive.
// Every word and phrase is quoted, so that no text typed can be FTS5
// syntax; fields are column filters, negations NOT.
func (q *Query) match() string {
	var pos, neg []string
	for i, t := range q.Terms {
		e := t.fts()
		switch {
		case t.Negated:
			neg = append(neg, e)
		case t.Or && len(pos) > 0:
			pos[len(pos)-1] += " OR " + e
		default:
			pos = append(pos, e)
		}
		// An alternative is one term to AND with the others.
		if !t.Negated && (i+1 == len(q.Terms) || !q.Terms[i+1].Or) && strings.Contains(pos[len(pos)-1], " OR ") && !strings.HasPrefix(pos[len(pos)-1], "(") {
			pos[len(pos)-1] = "(" + pos[len(pos)-1] + ")"
		}
	}
	if len(pos) == 0 {
		return ""
	}
	s := strings.Join(pos, " AND ")
	for _, n := range neg {
		s = "(" + s + ") NOT " + n
	}
	return s
}

// fts returns the FTS5 expression of one term in the fts table, whether
// or not negated (its field's columns there: querysql.go).
func (t Term) fts() string {
	main, _ := fieldColumns(t.Field)
	return t.ftsMain(main)
}

// ftsMain returns the FTS5 expression of t in the columns cols of the
// fts table ("" for all): ftsIn's, and for a phrase with pairs of common
// words, those pairs too, so that FTS5 checks the phrase only where they
// all are (pairs.go).
func (t Term) ftsMain(cols string) string {
	e := t.ftsWith(cols, t.words)
	if t.Field == "dfn" {
		return e
	}
	pairs := phrasePairs(t.Text, t.Prefix)
	if len(pairs) == 0 {
		return e
	}
	for i, p := range pairs {
		pairs[i] = ftsPhrase(p)
	}
	return "(pairs : (" + strings.Join(pairs, " AND ") + ") AND " + e + ")"
}

// ftsIn returns the FTS5 expression of t in the columns cols ("" for all),
// of the fts or the fts_addr table.
func (t Term) ftsIn(cols string) string { return t.ftsWith(cols, "") }

// ftsWith is ftsIn, a prefix read as words (the OR of the words of the
// fts table it starts, prefix.go) unless words is "".
func (t Term) ftsWith(cols string, words string) string {
	if cols == "" && strings.Contains(t.Text, pairSep) {
		// Words with pairSep are what the pairs column holds
		// (pairs.go), not what a reader typed: not looked for there.
		cols = "- {pairs}"
	}
	e := ftsPhrase(t.Text)
	switch {
	case t.Prefix && words != "":
		e = words
	case t.Prefix:
		// https://sqlite.org/fts5.html#fts5_prefix_queries: the last
		// word of the string is a prefix.
		e += " *"
	}
	if t.Field == "dfn" {
		// The path's words, then the word that ends every path: its
		// last components (search.go, fileEnd).
		e = ftsPhrase(strings.Join(tokens(t.Text), " ") + " " + fileEnd)
	}
	if cols != "" {
		e = cols + " : " + e
	}
	return e
}

// ftsPhrase quotes text as an FTS5 string, whose words are matched next
// to each other; inside double quotes, a double quote is written twice.
func ftsPhrase(text string) string {
	return `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
}

// Words returns the lower-case words q looks for, to mark them (Excerpt);
// a prefix search's last word ends in '*'.
func (q *Query) Words() []string {
	var out []string
	for _, t := range q.Terms {
		if t.Negated || !inText(t.Field) {
			continue
		}
		w := tokens(t.Text)
		if t.Prefix && len(w) > 0 {
			w[len(w)-1] += "*"
		}
		out = append(out, w...)
	}
	return out
}

// String writes q back in the search language.
func (q *Query) String() string {
	var parts []string
	if q.pi && q.root != nil {
		root := q.root.String()
		if q.root.op == opOr && (len(q.Lists) > 0 || q.After != nil || q.Before != nil) {
			root = "(" + root + ")" // AND binds tighter than OR
		}
		parts = append(parts, root)
	}
	for _, t := range q.Terms {
		if q.pi {
			break
		}
		s := t.Text
		if t.Phrase || strings.ContainsAny(s, " \t") {
			s = `"` + s + `"`
		}
		if t.Prefix {
			s += "*"
		}
		if t.Field != "" {
			s = t.Field + ":" + s
		}
		if t.Negated {
			s = "-" + s
		}
		if t.Or {
			parts = append(parts, "OR")
		}
		parts = append(parts, s)
	}
	for _, l := range q.Lists {
		parts = append(parts, "list:"+l)
	}
	if q.After != nil {
		parts = append(parts, "after:"+q.After.Format(time.DateOnly))
	}
	if q.Before != nil {
		parts = append(parts, "before:"+q.Before.Format(time.DateOnly))
	}
	if q.pi {
		// In public-inbox's grammar, "a AND b c" groups as a AND (b c):
		// the lists and dates taken out of the tree go back beside it.
		return strings.Join(parts, " AND ")
	}
	return strings.Join(parts, " ")
}
