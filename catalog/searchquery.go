package catalog

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"
)

// Limits of a search query.
const (
	MaxQueryBytes = 1000
	MaxQueryTerms = 32
)

// ErrQuery: a search query that cannot be run. The error's text says why,
// in words for the person who typed it.
var ErrQuery = errors.New("bad search")

// Term is a word or phrase a search looks for (or, Negated, excludes).
type Term struct {
	// Text is the word or phrase as typed (without quotes).
	Text string
	// Phrase is set when it was typed in double quotes.
	Phrase bool
	// Field limits it to "subject" or "from"; "" is anywhere.
	Field   string
	Negated bool
}

// Query is a parsed search (ParseQuery).
type Query struct {
	Terms []Term
	// Lists limit the search to these lists (list:NAME, ListName form).
	Lists []string
	// After and Before bound the date: after:X finds messages from the
	// start of X on, before:X messages before the start of X. Zero: no
	// bound.
	After, Before time.Time
}

// Positive reports whether q looks for at least one word (as opposed to
// only excluding words or filtering by list and date).
func (q *Query) Positive() bool {
	for _, t := range q.Terms {
		if !t.Negated {
			return true
		}
	}
	return false
}

// SearchesText reports whether q looks for a word or phrase anywhere
// (not only in the subject or the sender), which a message's text may
// hold.
func (q *Query) SearchesText() bool {
	for _, t := range q.Terms {
		if !t.Negated && t.Field == "" {
			return true
		}
	}
	return false
}

// ParseQuery reads the search language:
//
//	word            messages with the word (all words must match)
//	"a phrase"      the words next to each other
//	-word, -"..."   messages without it
//	from:X          X in the sender's name or address (from:"Ralf B")
//	subject:X       X in the subject
//	list:NAME       only that list (several: any of them)
//	after:DATE      from DATE on; DATE is 2019, 2019-02 or 2019-02-03
//	before:DATE     before DATE
//
// Words match regardless of case and accents; a word is letters and
// digits, so "r4k_cache" is the phrase "r4k cache". Anything else with a
// colon is a word.
func ParseQuery(s string) (*Query, error) {
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
	q := &Query{}
	p := &queryParser{s: s}
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			break
		}
		start := p.i
		neg := false
		if p.s[p.i] == '-' && p.i+1 < len(p.s) && !isSpace(p.s[p.i+1]) {
			neg = true
			p.i++
		}
		field := ""
		if op, ok := p.operator(); ok {
			field = op
		}
		text, phrase, err := p.value()
		if err != nil {
			return nil, err
		}
		switch field {
		case "list":
			if neg {
				return nil, fmt.Errorf("%w: -list: is not supported; name the lists to search with list:", ErrQuery)
			}
			name := ListName(text)
			if name == "" {
				return nil, fmt.Errorf("%w: list:%s names no list (list names are letters, digits, '.', '_' and '-')", ErrQuery, text)
			}
			q.Lists = append(q.Lists, name)
			continue
		case "after", "before":
			if neg {
				return nil, fmt.Errorf("%w: -%s: makes no sense; use %s:", ErrQuery, field, map[string]string{"after": "before", "before": "after"}[field])
			}
			t, err := parseSearchDate(text)
			if err != nil {
				return nil, fmt.Errorf("%w: %s:%s: %v", ErrQuery, field, text, err)
			}
			if field == "after" {
				q.After = t
			} else {
				q.Before = t
			}
			continue
		}
		if !hasWordChar(text) {
			if field != "" || phrase {
				return nil, fmt.Errorf("%w: %q at position %d has no letter or digit to look for", ErrQuery, p.s[start:p.i], start+1)
			}
			continue // punctuation alone: nothing to match
		}
		q.Terms = append(q.Terms, Term{Text: text, Phrase: phrase, Field: field, Negated: neg})
		if len(q.Terms) > MaxQueryTerms {
			return nil, fmt.Errorf("%w: more than %d words; leave some out", ErrQuery, MaxQueryTerms)
		}
	}
	if len(q.Terms) == 0 && len(q.Lists) == 0 && q.After.IsZero() && q.Before.IsZero() {
		return nil, fmt.Errorf("%w: type a word to look for", ErrQuery)
	}
	if !q.After.IsZero() && !q.Before.IsZero() && !q.After.Before(q.Before) {
		return nil, fmt.Errorf("%w: after:%s is not before before:%s, so nothing can match", ErrQuery, q.After.Format(time.DateOnly), q.Before.Format(time.DateOnly))
	}
	return q, nil
}

type queryParser struct {
	s string
	i int
}

func isSpace(c byte) bool { return c == ' ' || c == '\t' || c == '\n' || c == '\r' }

func (p *queryParser) skipSpace() {
	for p.i < len(p.s) && isSpace(p.s[p.i]) {
		p.i++
	}
}

// operator consumes "from:", "subject:", "list:", "after:" or "before:"
// (case-insensitive) when followed by a value.
func (p *queryParser) operator() (string, bool) {
	rest := p.s[p.i:]
	for _, op := range []string{"from", "subject", "list", "after", "before"} {
		if len(rest) > len(op)+1 && strings.EqualFold(rest[:len(op)], op) && rest[len(op)] == ':' && !isSpace(rest[len(op)+1]) {
			p.i += len(op) + 1
			return op, true
		}
	}
	return "", false
}

// value consumes a quoted phrase or a word up to the next space.
func (p *queryParser) value() (string, bool, error) {
	if p.i < len(p.s) && p.s[p.i] == '"' {
		start := p.i
		end := strings.IndexByte(p.s[p.i+1:], '"')
		if end < 0 {
			return "", false, fmt.Errorf("%w: the quote at position %d is never closed", ErrQuery, start+1)
		}
		text := p.s[p.i+1 : p.i+1+end]
		p.i += end + 2
		return strings.TrimSpace(text), true, nil
	}
	start := p.i
	for p.i < len(p.s) && !isSpace(p.s[p.i]) {
		if p.s[p.i] == '"' {
			return "", false, fmt.Errorf("%w: a quote at position %d inside a word; put phrases in quotes: \"like this\"", ErrQuery, p.i+1)
		}
		p.i++
	}
	return p.s[start:p.i], false, nil
}

func hasWordChar(s string) bool {
	return strings.IndexFunc(s, func(r rune) bool { return unicode.IsLetter(r) || unicode.IsDigit(r) }) >= 0
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

// match returns the FTS5 expression of q's terms: every word and phrase
// quoted (so no text typed can be FTS5 syntax), fields as column filters,
// negations as NOT. It is "" when q has no positive term.
func (q *Query) match() string {
	var pos, neg []string
	for _, t := range q.Terms {
		e := ftsPhrase(t.Text)
		switch t.Field {
		case "subject":
			e = "subject : " + e
		case "from":
			e = "sender : " + e
		}
		if t.Negated {
			neg = append(neg, e)
		} else {
			pos = append(pos, e)
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

// negatives returns the FTS5 expression matching any negated term, or "".
func (q *Query) negatives() string {
	var neg []string
	for _, t := range q.Terms {
		if t.Negated {
			e := ftsPhrase(t.Text)
			switch t.Field {
			case "subject":
				e = "subject : " + e
			case "from":
				e = "sender : " + e
			}
			neg = append(neg, e)
		}
	}
	return strings.Join(neg, " OR ")
}

// ftsPhrase quotes text as an FTS5 string: inside double quotes, a double
// quote is written twice. The tokenizer splits it into words, matched
// next to each other.
func ftsPhrase(text string) string {
	return `"` + strings.ReplaceAll(text, `"`, `""`) + `"`
}

// Words returns the words q looks for (not the excluded ones), lower-case,
// for marking them in an excerpt.
func (q *Query) Words() []string {
	var out []string
	for _, t := range q.Terms {
		if t.Negated {
			continue
		}
		out = append(out, tokens(t.Text)...)
	}
	return out
}

// String writes q back in the search language.
func (q *Query) String() string {
	var parts []string
	for _, t := range q.Terms {
		s := t.Text
		if t.Phrase || strings.ContainsAny(s, " \t") {
			s = `"` + s + `"`
		}
		if t.Field != "" {
			s = t.Field + ":" + s
		}
		if t.Negated {
			s = "-" + s
		}
		parts = append(parts, s)
	}
	for _, l := range q.Lists {
		parts = append(parts, "list:"+l)
	}
	if !q.After.IsZero() {
		parts = append(parts, "after:"+q.After.Format(time.DateOnly))
	}
	if !q.Before.IsZero() {
		parts = append(parts, "before:"+q.Before.Format(time.DateOnly))
	}
	return strings.Join(parts, " ")
}
