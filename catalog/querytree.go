package catalog

// The search language as a tree: the archive's own (words, "phrases",
// word*, -word, OR, from: subject: dfn: list: after: before:) and
// public-inbox's (https://public-inbox.org/meta/_/text/help/, the
// prefixes of lib/PublicInbox/Search.pm in public-inbox 1.9, parsed as
// Xapian's QueryParser does with FLAG_BOOLEAN, FLAG_LOVEHATE,
// FLAG_PHRASE and FLAG_WILDCARD).
//
// The two differ in one place: the archive's OR binds tighter than the
// words around it ("cache OR tlb flush" is (cache or tlb) and flush),
// Xapian's binds looser (cache or (tlb and flush)). A query that uses
// any of public-inbox's syntax (a prefix of its own, AND, NOT, +word,
// parentheses) is read as Xapian reads it; any other as the archive
// always has.

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"
)

// Limits of a query's tree, besides MaxQueryBytes and MaxQueryWords: each
// node is a part of the SQL a search runs.
const (
	maxQueryNodes = 64
	maxQueryDepth = 8
)

// nodeOp is what a node of a query tree does.
type nodeOp uint8

const (
	opAnd nodeOp = iota
	opOr
	opNot
	// opText: a word or phrase (node.term) in the columns of its field.
	opText
	// opRange: node.col between node.lo and node.hi, both included.
	opRange
	// opMsgID: the message with Message-ID node.value.
	opMsgID
	// opList: the messages of the list node.value (ListName form).
	opList
)

type node struct {
	op   nodeOp
	kids []*node
	term Term
	// col is the messages column of an opRange: date, arrived or size.
	col    string
	lo, hi int64
	value  string
	// piece is the query text the node was read from, for String.
	piece string
}

// tokKind is a kind of token of the search language.
type tokKind uint8

const (
	tokTerm tokKind = iota
	tokOr
	tokAnd
	tokNot
	tokOpen
	tokClose
)

// qtoken is a token: an operator, a parenthesis or a term.
type qtoken struct {
	kind  tokKind
	start int // byte offset
	// sign is '-' or '+' before a term or '(' , or 0.
	sign byte
	// field is the prefix, lower-case, without ':' ("" for none).
	field string
	text  string
	// phrase: in double quotes; prefix: followed by '*'.
	phrase, prefix bool
	// piece is the term as typed.
	piece string
}

// prefixes are the search prefixes the archive knows: its own, and
// public-inbox's (the value: its kind, and whether it is public-inbox's
// alone, which makes a query read as Xapian reads it).
var prefixes = map[string]bool{
	// The archive's own (public-inbox's dfn: has the same name).
	"from": false, "subject": false, "dfn": false, "list": false, "after": false, "before": false,
	// public-inbox's.
	"s": true, "f": true, "t": true, "c": true, "a": true, "tc": true, "tcf": true,
	"b": true, "bs": true, "nq": true, "q": true, "n": true, "l": true, "lid": true,
	"m": true, "mid": true, "z": true, "d": true, "dt": true, "rt": true,
	"dfa": true, "dfb": true, "dfhh": true, "dfctx": true,
	"dfpre": true, "dfpost": true, "dfblob": true, "patchid": true,
}

// knownPrefixes lists the prefixes for an error message.
const knownPrefixes = "s: f: t: c: a: tc: b: bs: nq: q: n: l: m: z: d: dt: rt: dfn: dfa: dfb: dfhh: dfctx: dfpre: dfpost: dfblob: patchid:, and from: subject: list: after: before:"

// lexQuery splits a query into tokens. Errors name the part and where it is.
func lexQuery(s string) ([]qtoken, error) {
	p := &queryParser{s: s}
	var toks []qtoken
	depth := 0
	for {
		p.skipSpace()
		if p.i >= len(p.s) {
			return toks, nil
		}
		start := p.i
		if op, ok := p.operatorWord(depth); ok {
			switch op {
			case "OR":
				toks = append(toks, qtoken{kind: tokOr, start: start, piece: op})
			case "AND":
				toks = append(toks, qtoken{kind: tokAnd, start: start, piece: op})
			case "NOT":
				toks = append(toks, qtoken{kind: tokNot, start: start, piece: op})
			case "NEAR", "ADJ":
				if rest := p.s[p.i+len(op):]; op == "NEAR" && strings.HasPrefix(rest, "(") {
					word, _, _ := strings.Cut(p.s[p.i:], " ")
					return nil, fmt.Errorf("%w: %s at character %d: NEAR(...) is not supported; put words in quotes to find them next to each other (\"a phrase\")", ErrQuery, word, p.at(start))
				}
				return nil, fmt.Errorf("%w: %s at character %d is not supported: put words in quotes to find them next to each other (\"a phrase\") (to look for the word itself, write it in lower case or in quotes)", ErrQuery, op, p.at(start))
			case "XOR":
				return nil, fmt.Errorf("%w: XOR at character %d is not supported: write (a OR b) NOT (a AND b) (to look for the word itself, write it in lower case or in quotes)", ErrQuery, p.at(start))
			}
			p.i += len(op)
			continue
		}
		var sign byte
		if c := p.s[p.i]; (c == '-' || c == '+') && p.i+1 < len(p.s) && !isSpace(p.s[p.i+1]) {
			sign = c
			p.i++
		}
		if p.s[p.i] == '(' {
			if depth >= maxQueryDepth {
				return nil, fmt.Errorf("%w: parentheses at character %d are nested more than %d deep", ErrQuery, p.at(p.i), maxQueryDepth)
			}
			toks = append(toks, qtoken{kind: tokOpen, start: start, sign: sign, piece: p.s[start : p.i+1]})
			p.i++
			depth++
			continue
		}
		if sign == 0 && p.s[p.i] == ')' && depth > 0 {
			toks = append(toks, qtoken{kind: tokClose, start: start, piece: ")"})
			p.i++
			depth--
			continue
		}
		field, err := p.prefix()
		if err != nil {
			return nil, err
		}
		if field != "" && p.i < len(p.s) && p.s[p.i] == '(' {
			return nil, fmt.Errorf("%w: %s at character %d: a prefix takes a word or a \"phrase\", not (...): write %sa OR %sb", ErrQuery, p.s[start:p.i+1], p.at(start), p.s[start:p.i], p.s[start:p.i])
		}
		text, phrase, prefix, err := p.value(depth)
		if err != nil {
			return nil, err
		}
		switch field {
		case "d", "dt", "rt", "z", "after", "before":
			// A range may follow a quoted date: d:"2 weeks ago"..
			for ; phrase && !prefix && p.i < len(p.s) && !isSpace(p.s[p.i]) && !(depth > 0 && p.s[p.i] == ')'); p.i++ {
				if p.s[p.i] == '"' {
					return nil, fmt.Errorf("%w: a quote at character %d inside a word; put phrases in quotes: \"like this\"", ErrQuery, p.at(p.i))
				}
				text += p.s[p.i : p.i+1]
			}
		}
		t := qtoken{kind: tokTerm, start: start, sign: sign, field: field, text: text, phrase: phrase, prefix: prefix, piece: p.s[start:p.i]}
		if !phrase {
			if err := foreignSyntax(text, field == "" && sign == 0, t.piece, p.at(start)); err != nil {
				return nil, err
			}
		}
		toks = append(toks, t)
	}
}

// queryOperators are the words in capitals public-inbox's grammar reads
// as operators where they stand alone.
var queryOperators = []string{"OR", "AND", "NOT", "XOR", "NEAR", "ADJ"}

// operatorWord reports an operator in capitals standing alone at the
// parser's place: followed by a space, the end, or a parenthesis.
func (p *queryParser) operatorWord(depth int) (string, bool) {
	rest := p.s[p.i:]
	for _, op := range queryOperators {
		if !strings.HasPrefix(rest, op) {
			continue
		}
		if len(rest) == len(op) || isSpace(rest[len(op)]) || rest[len(op)] == '(' || rest[len(op)] == ')' && depth > 0 {
			return op, true
		}
	}
	return "", false
}

// prefix consumes a search prefix (letters, then ':' before a value) and
// returns it in lower case; "" if there is none. A prefix the archive
// does not know is an error: it is never read as a word.
func (p *queryParser) prefix() (string, error) {
	rest := p.s[p.i:]
	n := 0
	for n < len(rest) && (rest[n] >= 'a' && rest[n] <= 'z' || rest[n] >= 'A' && rest[n] <= 'Z') {
		n++
	}
	if n == 0 || n+1 >= len(rest) || rest[n] != ':' || isSpace(rest[n+1]) || rest[n+1] == ':' {
		return "", nil
	}
	name := strings.ToLower(rest[:n])
	if _, ok := prefixes[name]; !ok {
		return "", fmt.Errorf("%w: %s: at character %d is not a search prefix this archive knows (it knows %s); to look for the text itself, put it in quotes: \"%s\"", ErrQuery, rest[:n], p.at(p.i), knownPrefixes, strings.ReplaceAll(strings.Fields(rest)[0], `"`, ""))
	}
	p.i += n + 1
	return name, nil
}

// piDialect reports whether tokens use public-inbox's syntax.
func piDialect(toks []qtoken) bool {
	for _, t := range toks {
		if t.kind != tokTerm && t.kind != tokOr || t.sign == '+' || prefixes[t.field] {
			return true
		}
	}
	return false
}

// piParser reads public-inbox's grammar, as Xapian's QueryParser does:
//
//	or   = and { OR and }
//	and  = prob { (AND | NOT | AND NOT) prob }
//	prob = unary { unary }             (words next to each other: all must match)
//	unary = [+|-] ( "(" or ")" | [prefix:] value )
type piParser struct {
	toks  []qtoken
	i     int
	q     *queryParser // for positions
	now   time.Time
	nodes int
	words int
}

func (pp *piParser) peek() *qtoken {
	if pp.i < len(pp.toks) {
		return &pp.toks[pp.i]
	}
	return nil
}

func (pp *piParser) add(n *node) (*node, error) {
	if pp.nodes++; pp.nodes > maxQueryNodes {
		return nil, fmt.Errorf("%w: the search has more than %d parts; leave some out", ErrQuery, maxQueryNodes)
	}
	return n, nil
}

func (pp *piParser) join(op nodeOp, a, b *node) (*node, error) {
	if a.op == op {
		a.kids = append(a.kids, b)
		return a, nil
	}
	return pp.add(&node{op: op, kids: []*node{a, b}})
}

func (pp *piParser) parseOr() (*node, error) {
	left, err := pp.parseAnd()
	if err != nil {
		return nil, err
	}
	for t := pp.peek(); t != nil && t.kind == tokOr; t = pp.peek() {
		pp.i++
		if left == nil {
			return nil, pp.joinsNothing(t)
		}
		right, err := pp.parseAnd()
		if err != nil {
			return nil, err
		}
		if right == nil {
			return nil, pp.joinsNothing(t)
		}
		if isNot(left) || isNot(right) {
			return nil, fmt.Errorf("%w: OR at character %d: one of its sides only leaves messages out (-word or NOT); write a word on each side, or AND NOT", ErrQuery, pp.q.at(t.start))
		}
		if left, err = pp.join(opOr, left, right); err != nil {
			return nil, err
		}
	}
	return left, nil
}

func isNot(n *node) bool {
	if n.op == opNot {
		return true
	}
	if n.op != opAnd {
		return false
	}
	for _, k := range n.kids {
		if k.op != opNot {
			return false
		}
	}
	return true
}

func (pp *piParser) joinsNothing(t *qtoken) error {
	return fmt.Errorf("%w: %s at character %d joins nothing: write it between two words (bugs %s crashes)", ErrQuery, t.piece, pp.q.at(t.start), t.piece)
}

func (pp *piParser) parseAnd() (*node, error) {
	left, err := pp.parseProb()
	if err != nil {
		return nil, err
	}
	for t := pp.peek(); t != nil && (t.kind == tokAnd || t.kind == tokNot); t = pp.peek() {
		pp.i++
		neg := t.kind == tokNot
		if !neg {
			if n := pp.peek(); n != nil && n.kind == tokNot {
				pp.i++
				neg = true
			}
		}
		right, err := pp.parseProb()
		if err != nil {
			return nil, err
		}
		if right == nil {
			return nil, pp.joinsNothing(t)
		}
		if neg {
			if right, err = pp.add(&node{op: opNot, kids: []*node{right}}); err != nil {
				return nil, err
			}
		}
		if left == nil {
			// "NOT x" at the start: the messages without x, as -x.
			if t.kind != tokNot {
				return nil, pp.joinsNothing(t)
			}
			left = right
			continue
		}
		if left, err = pp.join(opAnd, left, right); err != nil {
			return nil, err
		}
	}
	return left, nil
}

// parseProb returns nil when no term is there.
func (pp *piParser) parseProb() (*node, error) {
	var out *node
	for t := pp.peek(); t != nil && (t.kind == tokTerm || t.kind == tokOpen); t = pp.peek() {
		n, err := pp.parseUnary()
		if err != nil {
			return nil, err
		}
		if n == nil {
			continue // punctuation alone
		}
		if out == nil {
			out = n
		} else if out, err = pp.join(opAnd, out, n); err != nil {
			return nil, err
		}
	}
	return out, nil
}

func (pp *piParser) parseUnary() (*node, error) {
	t := pp.peek()
	pp.i++
	var n *node
	var err error
	if t.kind == tokOpen {
		if n, err = pp.parseOr(); err != nil {
			return nil, err
		}
		c := pp.peek()
		if c == nil || c.kind != tokClose {
			return nil, fmt.Errorf("%w: the parenthesis at character %d is never closed", ErrQuery, pp.q.at(t.start+len(t.piece)-1))
		}
		pp.i++
		if n == nil {
			return nil, fmt.Errorf("%w: the parentheses at character %d hold nothing to look for", ErrQuery, pp.q.at(t.start+len(t.piece)-1))
		}
	} else if n, err = pp.leaf(t); err != nil || n == nil {
		return nil, err
	}
	if t.sign == '-' {
		return pp.add(&node{op: opNot, kids: []*node{n}})
	}
	return n, nil
}

// leaf returns the node of a term token; nil for punctuation alone.
func (pp *piParser) leaf(t *qtoken) (*node, error) {
	at := pp.q.at(t.start)
	star := func() error {
		if t.prefix {
			return fmt.Errorf("%w: %s at character %d: a * is for words; %s: takes no *", ErrQuery, t.piece, at, t.field)
		}
		return nil
	}
	switch t.field {
	case "d", "dt", "rt", "after", "before":
		if err := star(); err != nil {
			return nil, err
		}
		col := "date"
		if t.field == "rt" {
			col = "arrived"
		}
		lo, hi, err := dateRange(t.field, t.text, pp.now)
		if err != nil {
			return nil, fmt.Errorf("%w: %s at character %d: %v", ErrQuery, t.piece, at, err)
		}
		if lo > hi {
			return nil, fmt.Errorf("%w: %s at character %d: its start is after its end, so nothing can match", ErrQuery, t.piece, at)
		}
		return pp.add(&node{op: opRange, col: col, lo: lo, hi: hi, piece: t.field + ":" + quoteValue(t.text, t.phrase)})
	case "z":
		if err := star(); err != nil {
			return nil, err
		}
		lo, hi, err := sizeRange(t.text)
		if err != nil {
			return nil, fmt.Errorf("%w: %s at character %d: %v", ErrQuery, t.piece, at, err)
		}
		return pp.add(&node{op: opRange, col: "size", lo: lo, hi: hi, piece: t.field + ":" + quoteValue(t.text, t.phrase)})
	case "m", "mid":
		if err := star(); err != nil {
			return nil, err
		}
		// Angle brackets and blanks come off both ends however many
		// there are, so the Message-ID written back reads the same.
		id := strings.Trim(t.text, "<> \t")
		if id == "" {
			return nil, fmt.Errorf("%w: %s at character %d names no Message-ID", ErrQuery, t.piece, at)
		}
		return pp.add(&node{op: opMsgID, value: id, piece: "m:" + quoteValue(id, t.phrase || strings.ContainsAny(id, " \t()"))})
	case "list":
		if err := star(); err != nil {
			return nil, err
		}
		name := ListName(t.text)
		if name == "" {
			return nil, fmt.Errorf("%w: %s names no list (list names are letters, digits, '.', '_' and '-')", ErrQuery, t.piece)
		}
		return pp.add(&node{op: opList, value: name, piece: "list:" + name})
	case "dfpre", "dfpost", "dfblob", "patchid":
		if err := star(); err != nil {
			return nil, err
		}
		id := strings.ToLower(t.text)
		min := 7
		if t.field == "patchid" {
			min = 40
		}
		if len(id) < min || strings.Trim(id, "0123456789abcdef") != "" {
			return nil, fmt.Errorf("%w: %s at character %d: %s: takes a git object ID of at least %d hexadecimal digits", ErrQuery, t.piece, at, t.field, min)
		}
		pp.words++
		return pp.add(&node{op: opText, term: Term{Text: id, Field: t.field, Prefix: t.field != "patchid"}, piece: t.field + ":" + id})
	}
	if !HasWord(t.text) {
		if t.field != "" || t.phrase {
			return nil, fmt.Errorf("%w: %s at character %d has no letter or digit to look for", ErrQuery, t.piece, at)
		}
		return nil, nil
	}
	if t.prefix {
		if t.field == "dfn" {
			return nil, fmt.Errorf("%w: %s at character %d: a * is for words; dfn: takes a path or its last components (dfn:setup.c)", ErrQuery, t.piece, at)
		}
		if w := tokens(t.text); len(w) == 0 || utf8.RuneCountInString(w[len(w)-1]) < minPrefix {
			return nil, fmt.Errorf("%w: %s at character %d: give at least %d letters or digits before the * (a shorter start matches too many words)", ErrQuery, t.piece, at, minPrefix)
		}
	}
	if pp.words += countWords(t.text); pp.words > MaxQueryWords {
		return nil, fmt.Errorf("%w: more than %d words (those of a phrase each count); leave some out", ErrQuery, MaxQueryWords)
	}
	field := map[string]string{"s": "subject", "f": "from", "b": "body", "tcf": "a", "lid": "l"}[t.field]
	if field == "" {
		field = t.field
	}
	return pp.add(&node{op: opText, term: Term{Text: t.text, Phrase: t.phrase, Field: field, Prefix: t.prefix}})
}

// quoteValue writes a prefix's value back, in quotes if it was or must be
// (a value that begins with ':' would make the prefix a word: "m::x").
func quoteValue(v string, phrase bool) string {
	if phrase || strings.ContainsAny(v, " \t") || strings.HasPrefix(v, ":") {
		return `"` + v + `"`
	}
	return v
}

// parsePI parses tokens in public-inbox's grammar into q.
func parsePI(s string, toks []qtoken, now time.Time) (*Query, error) {
	pp := &piParser{toks: toks, q: &queryParser{s: s}, now: now}
	root, err := pp.parseOr()
	if err != nil {
		return nil, err
	}
	if t := pp.peek(); t != nil {
		// Only a ')' stops parseOr early.
		return nil, fmt.Errorf("%w: the parenthesis at character %d closes nothing", ErrQuery, pp.q.at(t.start))
	}
	q := &Query{}
	// Lists that all matches must be in are Query.Lists, which a list's
	// page sets when the query names none.
	if root != nil {
		kids := []*node{root}
		if root.op == opAnd {
			kids = root.kids
		}
		var keep []*node
		for _, k := range kids {
			if k.op == opList {
				q.Lists = append(q.Lists, k.value)
			} else {
				keep = append(keep, k)
			}
		}
		switch len(keep) {
		case 0:
			root = nil
		case 1:
			root = keep[0]
		default:
			root = &node{op: opAnd, kids: keep}
		}
	}
	if root == nil && len(q.Lists) == 0 {
		return nil, fmt.Errorf("%w: type a word to look for", ErrQuery)
	}
	q.root = root
	q.pi = true
	q.Terms = termsOf(root, false, nil)
	return q, nil
}

// termsOf lists the words and phrases of a tree, negated under a NOT.
func termsOf(n *node, neg bool, out []Term) []Term {
	if n == nil {
		return out
	}
	switch n.op {
	case opText:
		t := n.term
		t.Negated = neg
		out = append(out, t)
	case opNot:
		out = termsOf(n.kids[0], !neg, out)
	case opAnd, opOr:
		for i, k := range n.kids {
			start := len(out)
			out = termsOf(k, neg, out)
			if n.op == opOr && i > 0 && len(out) > start {
				out[start].Or = true
			}
		}
	}
	return out
}

// treeOfTerms returns the tree of a query given as Terms (the archive's
// grammar, or a Query built by hand): every term, OR joining a term to
// the one before.
func treeOfTerms(terms []Term) *node {
	var and []*node
	for i := 0; i < len(terms); i++ {
		t := terms[i]
		leaf := &node{op: opText, term: Term{Text: t.Text, Phrase: t.Phrase, Field: t.Field, Prefix: t.Prefix, words: t.words}}
		if t.Negated {
			and = append(and, &node{op: opNot, kids: []*node{leaf}})
			continue
		}
		if t.Or && len(and) > 0 && and[len(and)-1].op != opNot {
			last := and[len(and)-1]
			if last.op != opOr {
				last = &node{op: opOr, kids: []*node{last}}
				and[len(and)-1] = last
			}
			last.kids = append(last.kids, leaf)
			continue
		}
		and = append(and, leaf)
	}
	switch len(and) {
	case 0:
		return nil
	case 1:
		return and[0]
	}
	return &node{op: opAnd, kids: and}
}

// tree returns q's tree: parsed, or made of its Terms.
func (q *Query) tree() *node {
	if q.pi {
		return q.root
	}
	return treeOfTerms(q.Terms)
}

// String writes the tree back in public-inbox's grammar.
func (n *node) String() string {
	switch n.op {
	case opAnd, opOr:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			parts[i] = k.String()
			if k.op == opAnd || k.op == opOr {
				parts[i] = "(" + parts[i] + ")"
			}
		}
		if n.op == opOr {
			return strings.Join(parts, " OR ")
		}
		return strings.Join(parts, " AND ")
	case opNot:
		k := n.kids[0]
		if k.op == opAnd || k.op == opOr || k.op == opNot {
			return "-(" + k.String() + ")"
		}
		return "-" + k.String()
	case opText:
		if n.piece != "" {
			return n.piece
		}
		t := n.term
		s := t.Text
		// A word that starts with a sign ("++bb" is + and the word +bb),
		// holds a colon (A: at the end of a query is a word, before a
		// parenthesis a prefix), or is an operator in capitals ("+OR" is
		// + and the word OR) is quoted, or it would read back as
		// something else.
		if t.Phrase || strings.ContainsAny(s, " \t():") || strings.HasPrefix(s, "+") || strings.HasPrefix(s, "-") || slices.Contains(queryOperators, s) {
			s = `"` + s + `"`
		}
		if t.Prefix {
			s += "*"
		}
		if t.Field != "" {
			s = map[string]string{"subject": "s", "from": "f", "body": "b"}[t.Field] + ":" + s
			if s[0] == ':' {
				s = t.Field + s
			}
		}
		return s
	case opRange:
		return n.piece
	}
	return n.piece
}

// dateRange returns the Unix seconds, both included, that a date prefix
// (d: dt: rt: as public-inbox 1.9 reads them, Search.pm
// date_parse_prepare; after: and before: as the archive does) names.
//
//	d:20250825          that day and the next (public-inbox reads it as
//	                    d:20250825..20250826, both days whole)
//	d:2025-08-25..      from that day on; ..B up to the end of day B
//	d:2.weeks.ago..     from that instant on (any approxidate form makes
//	                    the range dt:'s, of instants)
//	dt:20250825120000.. instants; dt:X alone is X and the day after it
//	rt:1700000000..     the date the list had it, Unix seconds or dates
func dateRange(pfx, v string, now time.Time) (lo, hi int64, err error) {
	v = strings.Join(strings.Fields(v), ".")
	switch pfx {
	case "after", "before":
		t, err := parseSearchDate(v)
		if err != nil {
			return 0, 0, err
		}
		if pfx == "after" {
			return max(t.Unix(), minRangeDate), maxRangeDate, nil
		}
		return minRangeDate, t.Unix() - 1, nil
	}
	a, b, isRange := strings.Cut(v, "..")
	if !isRange {
		if pfx == "d" {
			if day, ok := ymd(a); ok {
				return day.Unix(), day.AddDate(0, 0, 2).Unix() - 1, nil
			}
		}
		t, err := instant(pfx, a, now)
		if err != nil {
			return 0, 0, err
		}
		return t, t + 86400, nil
	}
	if a == "" && b == "" {
		return 0, 0, fmt.Errorf("a range needs a start, an end or both (%s:20250825..)", pfx)
	}
	lo, hi = minRangeDate, maxRangeDate
	// d: of whole days, unless a bound is not YYYYMMDD or YYYY-MM-DD.
	days := pfx == "d"
	for _, x := range []string{a, b} {
		if _, ok := ymd(x); x != "" && !ok {
			days = false
		}
	}
	if a != "" {
		if days {
			d, _ := ymd(a)
			lo = d.Unix()
		} else if lo, err = instant(pfx, a, now); err != nil {
			return 0, 0, err
		}
	}
	if b != "" {
		if days {
			d, _ := ymd(b)
			hi = d.AddDate(0, 0, 1).Unix() - 1
		} else if hi, err = instant(pfx, b, now); err != nil {
			return 0, 0, err
		}
	}
	return lo, hi, nil
}

// Bounds of an open date range: far past and far future, not the extremes
// of int64, which String must write back as dates.
const (
	minRangeDate = -62135596800 // 0001-01-01
	maxRangeDate = 253402300799 // 9999-12-31 23:59:59
)

// ymd reads YYYYMMDD or YYYY-MM-DD.
func ymd(s string) (time.Time, bool) {
	for _, layout := range []string{"20060102", time.DateOnly} {
		if len(s) == len(layout) {
			if t, err := time.Parse(layout, s); err == nil {
				return t, true
			}
		}
	}
	return time.Time{}, false
}

// instant reads one bound of a date range: YYYYMMDDHHMMSS, YYYYMMDD,
// YYYY-MM-DD (midnight, UTC), 2019 or 2019-02 (their start), Unix seconds
// for rt:, or the forms of git's approxidate that lei and people send:
// now, today, yesterday, N.unit.ago (seconds to years), last.unit.
func instant(pfx, s string, now time.Time) (int64, error) {
	if pfx == "rt" && len(s) >= 5 && strings.Trim(s, "0123456789") == "" {
		n, err := strconv.ParseInt(s, 10, 64)
		if err == nil {
			return n, nil
		}
	}
	if len(s) == 14 && strings.Trim(s, "0123456789") == "" {
		if t, err := time.Parse("20060102150405", s); err == nil {
			return t.Unix(), nil
		}
	}
	if t, ok := ymd(s); ok {
		return t.Unix(), nil
	}
	for _, layout := range []string{"2006-01-02T15:04:05", "2006-01-02T15:04", "2006-01-02.15:04:05", "2006-01-02.15:04", "2006-01", "2006"} {
		if len(s) == len(layout) {
			if t, err := time.Parse(layout, s); err == nil {
				return t.Unix(), nil
			}
		}
	}
	if t, ok := approxidate(strings.ToLower(s), now); ok {
		return t.Unix(), nil
	}
	return 0, fmt.Errorf("not a date this archive reads: write 20250825, 2025-08-25, 20250825143000, 2.weeks.ago, yesterday or a range of them (A..B, A.., ..B)")
}

// approxidate reads the relative dates of git's approxidate the archive
// knows: now, today, yesterday, N.unit(s)[.ago], last.unit.
func approxidate(s string, now time.Time) (time.Time, bool) {
	switch s {
	case "now", "today":
		return now, true
	case "yesterday":
		return now.AddDate(0, 0, -1), true
	}
	f := strings.FieldsFunc(s, func(r rune) bool { return r == '.' || r == '_' || r == '-' })
	if len(f) == 3 && f[2] == "ago" {
		f = f[:2]
	}
	if len(f) != 2 {
		return time.Time{}, false
	}
	n := 1
	if f[0] != "last" {
		var err error
		if n, err = strconv.Atoi(f[0]); err != nil || n < 0 || n > 100000 {
			return time.Time{}, false
		}
	}
	switch strings.TrimSuffix(f[1], "s") {
	case "second", "sec":
		return now.Add(-time.Duration(n) * time.Second), true
	case "minute", "min":
		return now.Add(-time.Duration(n) * time.Minute), true
	case "hour":
		return now.Add(-time.Duration(n) * time.Hour), true
	case "day":
		return now.AddDate(0, 0, -n), true
	case "week":
		return now.AddDate(0, 0, -7*n), true
	case "month":
		return now.AddDate(0, -n, 0), true
	case "year":
		return now.AddDate(-n, 0, 0), true
	}
	return time.Time{}, false
}

// sizeRange reads z:A..B, z:A.., z:..B (bytes, k/m suffixes allowed).
func sizeRange(v string) (lo, hi int64, err error) {
	a, b, isRange := strings.Cut(v, "..")
	if !isRange {
		return 0, 0, fmt.Errorf("z: takes a range of sizes in bytes: z:1000..5000, z:10000.., z:..2000")
	}
	lo, hi = 0, 1<<62
	num := func(s string) (int64, error) {
		mul := int64(1)
		switch {
		case strings.HasSuffix(s, "k"), strings.HasSuffix(s, "K"):
			mul, s = 1<<10, s[:len(s)-1]
		case strings.HasSuffix(s, "m"), strings.HasSuffix(s, "M"):
			mul, s = 1<<20, s[:len(s)-1]
		}
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || n < 0 || n > 1<<40 {
			return 0, fmt.Errorf("%q is not a size in bytes", s)
		}
		return n * mul, nil
	}
	if a != "" {
		if lo, err = num(a); err != nil {
			return 0, 0, err
		}
	}
	if b != "" {
		if hi, err = num(b); err != nil {
			return 0, 0, err
		}
	}
	if a == "" && b == "" {
		return 0, 0, fmt.Errorf("z: takes a range of sizes in bytes: z:1000..5000")
	}
	return lo, hi, nil
}
