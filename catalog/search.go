package catalog

// Search, in SQLite FTS5 (https://sqlite.org/fts5.html). The fts table is
// contentless (the store has the text). A message's own text and its
// quoted lines are separate columns, so that relevance ranks a message
// that says a word above one that quotes it.
//
// The body is the first column: FTS5 writes a word's positions in any
// other column after two bytes that name the column, and most of the
// index's words are in bodies alone.
//
// A row's rowid is its message's label (labels.go), in date order: FTS5
// walks matches in rowid order, so "newest first" is the index's own
// order, a page costs the same however many messages match, and a date
// range is a rowid range. A search reads the labels and the late labels
// each so, and merges the two.

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"html"
	"math"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/chibrary/chibrary/mailview"
)

// maxIndexedText bounds the text of one message that is indexed.
const maxIndexedText = 1 << 20

// Weights of the fts columns for sort=relevance (bm25), in the order of
// searchSchema's columns.
const bm25Weights = "1.0, 0.2, 10.0, 5.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 1.0, 0.0"

// searchSchema: fts has a message's text, split as public-inbox's search
// index is (diffindex.go): the text that is not quoted nor a diff line
// (body), quoted lines, subject, sender, the paths its patches touch
// (files), their removed, added and context lines and hunk headers,
// attachments' names, blob IDs and patch ID; then the pairs of common
// words of all of them (pairs.go), which rank nothing. fts_addr has its To and Cc
// and List-Id, in a table of their own: a word typed without a prefix
// is not looked for there, and needs no column filter (which costs FTS5
// a read of every place a word is) to leave them out.
const searchSchema = `
CREATE VIRTUAL TABLE fts USING fts5 (body, quoted, subject, sender, files,
	dfa, dfb, dfctx, dfhh, names, dfpre, dfpost, patchid, pairs,
	content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
CREATE VIRTUAL TABLE fts_addr USING fts5 (to_addr, cc_addr, list_id,
	content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2');
`

// dates returns the range of q's dates in Unix seconds, both included:
// after:X from the start of X, before:Y up to its start.
func (q *Query) dates() (lo, hi int64) {
	lo, hi = math.MinInt64, math.MaxInt64
	if q.After != nil {
		lo = q.After.Unix()
	}
	if q.Before != nil {
		hi = q.Before.Unix() - 1
	}
	return lo, hi
}

// span is a range of fts rowids, both included.
type span struct{ lo, hi int64 }

// spans returns the ranges of the labels and of the late labels of the
// messages dated lo to hi: the first from the messages' dates, the
// second from the late labels' own.
func spans(ctx context.Context, tx *sql.Tx, lo, hi int64) (labels, late span, err error) {
	labels, late = span{1, lateBase - 1}, span{lateLabel(lo, 0), lateLabel(hi, lateIDMask)}
	if hi < 0 || hi < lo {
		return span{1, 0}, span{1, 0}, nil
	}
	if lo != math.MinInt64 {
		err = tx.QueryRowContext(ctx, `SELECT label FROM messages WHERE date >= ? AND label < `+lateBaseSQL+` ORDER BY date, id LIMIT 1`, lo).Scan(&labels.lo)
		if errors.Is(err, sql.ErrNoRows) {
			labels, err = span{1, 0}, nil
		}
	}
	if err == nil && hi != math.MaxInt64 && labels.lo <= labels.hi {
		err = tx.QueryRowContext(ctx, `SELECT label FROM messages WHERE date <= ? AND label < `+lateBaseSQL+` ORDER BY date DESC, id DESC LIMIT 1`, hi).Scan(&labels.hi)
		if errors.Is(err, sql.ErrNoRows) {
			labels, err = span{1, 0}, nil
		}
	}
	return labels, late, err
}

// Text returns the text a reader searches in a message, at most about
// maxIndexedText bytes: its text parts, its HTML parts as text, and the
// text of enclosed messages (a forward, a list's DMARC wrapping).
func Text(v *mailview.Message) string {
	var b strings.Builder
	var parts func(v *mailview.Message)
	parts = func(v *mailview.Message) {
		for _, p := range v.Parts {
			if b.Len() >= maxIndexedText {
				return
			}
			var t string
			switch {
			case p.Message != nil:
				parts(p.Message)
				continue
			case p.HTML != "":
				t = htmlText(string(p.HTML))
			default:
				t = p.Text
			}
			b.WriteString(t)
			if t != "" && !strings.HasSuffix(t, "\n") {
				b.WriteByte('\n')
			}
		}
	}
	parts(v)
	return b.String()
}

// indexText splits a message's Text into its own and its quoted lines.
func indexText(v *mailview.Message) (body, quoted string) {
	var b, q strings.Builder
	left := maxIndexedText
	for line := range strings.Lines(Text(v)) {
		if left <= 0 {
			break
		}
		left -= len(line)
		if strings.HasPrefix(strings.TrimLeft(line, " \t"), ">") {
			q.WriteString(line)
		} else {
			b.WriteString(line)
		}
	}
	return b.String(), q.String()
}

// htmlText returns the text of sanitized HTML, block ends as line ends.
func htmlText(s string) string {
	var b strings.Builder
	for len(s) > 0 {
		i := strings.IndexByte(s, '<')
		if i < 0 {
			b.WriteString(html.UnescapeString(s))
			break
		}
		b.WriteString(html.UnescapeString(s[:i]))
		j := strings.IndexByte(s[i:], '>')
		if j < 0 {
			break
		}
		tag := strings.ToLower(strings.TrimLeft(s[i+1:i+j], "/"))
		if strings.HasPrefix(tag, "br") || strings.HasPrefix(tag, "p") || strings.HasPrefix(tag, "div") || strings.HasPrefix(tag, "li") || strings.HasPrefix(tag, "tr") {
			b.WriteByte('\n')
		} else {
			b.WriteByte(' ')
		}
		s = s[i+j+1:]
	}
	return b.String()
}

// SortOrder orders search results.
type SortOrder int

const (
	// Newest: the newest messages first (the default).
	Newest SortOrder = iota
	// Relevance: bm25 rank, subject and sender matches first.
	Relevance
)

// SearchOptions choose the page Search returns and how far it counts. The
// zero value: newest first, only the count, every match counted.
type SearchOptions struct {
	Sort SortOrder
	// Offset messages are skipped; at most Limit are returned.
	Offset, Limit int
	// CountLimit, if positive, stops the count there (SearchResult.More):
	// counting every match of a common word costs more than a page.
	CountLimit int
}

// SearchResult is a page of search results.
type SearchResult struct {
	Messages []Message `json:"messages"`
	// Total is the number of messages that match, or with More the
	// CountLimit that was reached.
	Total int `json:"total"`
	// More: more than Total messages match.
	More bool `json:"more,omitempty"`
}

// Search returns a page of the messages matching q.
func (c *Catalog) Search(ctx context.Context, q *Query, opts SearchOptions) (SearchResult, error) {
	what := "search results"
	// Searches wait for one of their own connections (page reads have
	// theirs), then have SearchTimeout to read.
	conn, err := c.s.Conn(ctx)
	if err != nil {
		return SearchResult{}, c.readErr(what, err)
	}
	defer conn.Close()
	qctx, cancel := context.WithTimeout(ctx, c.searchTimeout)
	defer cancel()
	fail := func(err error) (SearchResult, error) {
		if ctx.Err() == nil && qctx.Err() != nil {
			return SearchResult{}, fmt.Errorf("%w (%v): %w", ErrSearchCost, c.searchTimeout, err)
		}
		return SearchResult{}, c.readErr(what, err)
	}
	prefix := q.hasPrefix()
	if prefix {
		if err := ensureWordsTable(qctx, conn); err != nil {
			return fail(err)
		}
	}
	tx, err := conn.BeginTx(qctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return fail(err)
	}
	defer tx.Rollback()
	if prefix {
		// The words of the index, read in the transaction that searches.
		if q, err = withPrefixWords(qctx, tx, q); err != nil {
			return fail(err)
		}
	}
	count, countArgs, page, pageArgs, err := searchSQL(qctx, tx, q, opts)
	if err != nil {
		return fail(err)
	}
	var res SearchResult
	if err := tx.QueryRowContext(qctx, count, countArgs...).Scan(&res.Total); err != nil {
		return fail(err)
	}
	if opts.CountLimit > 0 && res.Total > opts.CountLimit {
		res.Total, res.More = opts.CountLimit, true
	}
	rows, err := tx.QueryContext(qctx, page, pageArgs...)
	if err != nil {
		return fail(err)
	}
	defer rows.Close()
	res.Messages = []Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return fail(err)
		}
		res.Messages = append(res.Messages, m)
	}
	if err := rows.Err(); err != nil {
		return fail(err)
	}
	return res, nil
}

// searchSQL returns the statements that count q's matches and read the
// page opts asks for, with their arguments.
func searchSQL(ctx context.Context, tx *sql.Tx, q *Query, opts SearchOptions) (count string, countArgs []any, page string, pageArgs []any, err error) {
	p := q.plan()
	lo, hi := p.lo, p.hi
	// The lists and the plan's further conditions on each message.
	var lists string
	var listArgs []any
	if len(q.Lists) > 0 {
		lists = " AND m.list IN (" + strings.TrimSuffix(strings.Repeat("?,", len(q.Lists)), ",") + ")"
		for _, l := range q.Lists {
			listArgs = append(listArgs, l)
		}
	}
	lists += p.where
	listArgs = append(listArgs, p.args...)
	// The count reads one past CountLimit, to know whether there are more
	// (SQLite's LIMIT -1: no limit).
	countLimit := -1
	if opts.CountLimit > 0 {
		countLimit = opts.CountLimit + 1
	}
	m := p.match
	if m == "" {
		// Only filters (and maybe exclusions): the messages table.
		where := "m.date >= ? AND m.date <= ?" + lists
		args := append([]any{lo, hi}, listArgs...)
		from := `FROM messages m WHERE ` + where
		count = `SELECT count(*) FROM (SELECT 1 ` + from + ` LIMIT ?)`
		page = `SELECT ` + messageColumns + ` ` + from + ` ORDER BY m.date DESC, m.id DESC LIMIT ? OFFSET ?`
		return count, append(slices.Clone(args), countLimit), page, append(args, opts.Limit, opts.Offset), nil
	}
	labels, late, err := spans(ctx, tx, lo, hi)
	if err != nil {
		return "", nil, "", nil, err
	}
	// Late labels are the exception (labels.go): most searches read one
	// run of labels, as the index was read before there were two.
	var lateOnes bool
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM messages WHERE label BETWEEN ? AND ?)`, late.lo, late.hi).Scan(&lateOnes); err != nil {
		return "", nil, "", nil, err
	}
	// The index the MATCH reads: fts, or fts_addr for a search of
	// recipients alone (querysql.go); both have the messages' labels.
	tbl, rank := p.table, "bm25(fts, "+bm25Weights+")"
	if tbl != "fts" {
		rank = "bm25(" + tbl + ")"
	}
	// CROSS JOIN: the index's matches drive, each message looked up by
	// its label. Left to itself, SQLite read a list's messages (by
	// messages_list_date) and asked the index about each, a search of
	// the whole list: "from:x list:l" took seconds where "from:x" took
	// milliseconds (TestSearchPlan).
	join := `FROM ` + tbl + ` CROSS JOIN messages m ON m.label = ` + tbl + `.rowid WHERE ` + tbl + ` MATCH ?`
	if !lateOnes {
		// Every message has a label: one run, read in rowid order.
		where, args := "", []any{m}
		if lo != math.MinInt64 || hi != math.MaxInt64 {
			where, args = " AND "+tbl+".rowid BETWEEN ? AND ?", append(args, labels.lo, labels.hi)
		}
		if lists == "" {
			// Without a list filter the join adds nothing to a count.
			count = `SELECT count(*) FROM (SELECT 1 FROM ` + tbl + ` WHERE ` + tbl + ` MATCH ?` + where + ` LIMIT ?)`
		} else {
			count = `SELECT count(*) FROM (SELECT 1 ` + join + where + lists + ` LIMIT ?)`
		}
		args = append(args, listArgs...)
		order := tbl + ".rowid DESC"
		if opts.Sort == Relevance {
			order = rank + ", " + tbl + ".rowid DESC"
		}
		page = `SELECT ` + messageColumns + ` ` + join + where + lists + ` ORDER BY ` + order + ` LIMIT ? OFFSET ?`
		return count, append(slices.Clone(args), countLimit), page, append(args, opts.Limit, opts.Offset), nil
	}
	// The labelled messages, then the late ones (whose labels may hold a
	// clamped date: their own dates are checked).
	inLabels, labelsArgs := join+` AND `+tbl+`.rowid BETWEEN ? AND ?`+lists, append([]any{m, labels.lo, labels.hi}, listArgs...)
	inLate, lateArgs := join+` AND `+tbl+`.rowid BETWEEN ? AND ? AND m.date BETWEEN ? AND ?`+lists, append([]any{m, late.lo, late.hi, lo, hi}, listArgs...)
	countLabels := inLabels
	if lists == "" {
		countLabels = `FROM ` + tbl + ` WHERE ` + tbl + ` MATCH ? AND rowid BETWEEN ? AND ?`
	}
	count = `SELECT (SELECT count(*) FROM (SELECT 1 ` + countLabels + ` LIMIT ?)) + (SELECT count(*) FROM (SELECT 1 ` + inLate + ` LIMIT ?))`
	countArgs = append(append(append(slices.Clone(labelsArgs), countLimit), lateArgs...), countLimit)
	if opts.Sort == Relevance {
		// One rank of every match, labelled or late.
		page = `SELECT ` + messageColumns + ` ` + join +
			` AND (` + tbl + `.rowid BETWEEN ? AND ? OR ` + tbl + `.rowid BETWEEN ? AND ? AND m.date BETWEEN ? AND ?)` + lists +
			` ORDER BY ` + rank + `, m.date DESC, m.id DESC LIMIT ? OFFSET ?`
		pageArgs = append(append([]any{m, labels.lo, labels.hi, late.lo, late.hi, lo, hi}, listArgs...), opts.Limit, opts.Offset)
		return count, countArgs, page, pageArgs, nil
	}
	// Newest first: each run in its rowid order, as far as the page
	// reaches, merged by date.
	reach := opts.Offset + opts.Limit
	page = `SELECT ` + messageColumns + ` FROM (` +
		`SELECT * FROM (SELECT m.* ` + inLabels + ` ORDER BY ` + tbl + `.rowid DESC LIMIT ?)` +
		` UNION ALL SELECT * FROM (SELECT m.* ` + inLate + ` ORDER BY ` + tbl + `.rowid DESC LIMIT ?)` +
		`) m ORDER BY m.date DESC, m.id DESC LIMIT ? OFFSET ?`
	pageArgs = append(append(append(slices.Clone(labelsArgs), reach), lateArgs...), reach, opts.Limit, opts.Offset)
	return count, countArgs, page, pageArgs, nil
}

// Fragment is a piece of an excerpt; Match marks a word searched for.
type Fragment struct {
	Text  string `json:"text"`
	Match bool   `json:"match,omitempty"`
}

// Excerpt returns about max bytes of text around the first line that has
// one of words (as Query.Words returns them), with every such word marked,
// or the start of the text if none matches. Quoted lines are used only if
// no other line matches.
func Excerpt(text string, words []string, max int) []Fragment {
	want := newWordSet(words)
	best := firstMatch(text, want)
	start := 0
	if best > max/3 {
		start = best - max/3
	}
	end := min(len(text), start+max)
	for start > 0 && !utf8.RuneStart(text[start]) {
		start++
	}
	for end < len(text) && !utf8.RuneStart(text[end]) {
		end--
	}
	window := strings.Join(strings.Fields(text[start:end]), " ")
	var out []Fragment
	if start > 0 {
		out = append(out, Fragment{Text: "… "})
	}
	last := 0
	for _, w := range wordSpans(window) {
		if want.has(fold(window[w[0]:w[1]])) {
			if w[0] > last {
				out = append(out, Fragment{Text: window[last:w[0]]})
			}
			out = append(out, Fragment{Text: window[w[0]:w[1]], Match: true})
			last = w[1]
		}
	}
	if last < len(window) {
		out = append(out, Fragment{Text: window[last:]})
	}
	if end < len(text) {
		out = append(out, Fragment{Text: " …"})
	}
	return out
}

// wordSet is the folded words and prefixes an excerpt marks.
type wordSet struct {
	whole    map[string]bool
	prefixes []string
	ascii    bool
}

// A string that is not one word, as the index reads words, is left out:
// the index matched no such thing, and a byte search would find it where
// the words of the text do not.
func newWordSet(words []string) wordSet {
	ws := wordSet{whole: map[string]bool{}, ascii: true}
	for _, w := range words {
		p, prefix := strings.CutSuffix(w, "*")
		if start, end, _ := nextWord(p, 0); start != 0 || end != len(p) {
			continue
		}
		if prefix {
			ws.prefixes = append(ws.prefixes, p)
		} else {
			ws.whole[w] = true
		}
		for i := 0; i < len(w); i++ {
			if w[i] >= utf8.RuneSelf {
				ws.ascii = false
			}
		}
	}
	return ws
}

func (ws wordSet) has(w string) bool {
	if ws.whole[w] {
		return true
	}
	for _, p := range ws.prefixes {
		if strings.HasPrefix(w, p) {
			return true
		}
	}
	return false
}

// firstMatch returns the offset of the first word of text in want,
// preferring unquoted lines, or -1. ASCII words are found by a byte search
// in a lower-cased copy; words beyond ASCII may match other forms (accents,
// case), so then every line is tokenized.
func firstMatch(text string, want wordSet) int {
	if !want.ascii || foldsToASCII(text) {
		return firstMatchTokenized(text, want)
	}
	lower := []byte(text)
	for i, c := range lower {
		if c >= 'A' && c <= 'Z' {
			lower[i] = c + 'a' - 'A'
		}
	}
	bestPlain, bestQuoted := -1, -1
	find := func(w string, prefix bool) {
		for pos := 0; ; pos++ {
			at, quoted := nextMatch(lower, pos, w, prefix)
			switch {
			case at < 0:
				return
			case !quoted:
				if bestPlain < 0 || at < bestPlain {
					bestPlain = at
				}
				return
			case bestQuoted < 0 || at < bestQuoted:
				bestQuoted = at
			}
			// A later one may be unquoted, on a later line.
			if pos = lineEnd(lower, at); pos < 0 {
				return
			}
		}
	}
	for w := range want.whole {
		find(w, false)
	}
	for _, p := range want.prefixes {
		find(p, true)
	}
	if bestPlain >= 0 {
		return bestPlain
	}
	return bestQuoted
}

// wordBefore reports whether the character before lower[at] is part of
// a word (words.go), so that a match there does not start one.
func wordBefore(lower []byte, at int) bool {
	for at > 0 {
		c := lower[at-1]
		if c < utf8.RuneSelf {
			return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
		}
		// The start of the character: back over continuation bytes to
		// the byte that leads them (SQLite's decoding reads them all);
		// without one, the last is a character of its own (decodeFTS).
		i := at - 1
		for i > 0 && lower[i]&0xc0 == 0x80 {
			i--
		}
		var r rune
		if lower[i] >= 0xc0 {
			r, _ = decodeFTS(string(lower[i:at]))
		} else {
			i, r = at-1, rune(lower[at-1])
		}
		if !isDiacritic(r) {
			return isWordRune(r)
		}
		at = i // a diacritic is a word's if what it follows is
	}
	return false
}

// wordGoesOn reports whether the character at lower[i] goes on a word
// that ends before it: a word's character, or diacritics before one (the
// index drops them, so a word that ends in them is the word without).
func wordGoesOn(lower []byte, i int) bool {
	i = pastDiacritics(lower, i)
	if i >= len(lower) {
		return false
	}
	if c := lower[i]; c < utf8.RuneSelf {
		return 'a' <= c && c <= 'z' || '0' <= c && c <= '9'
	}
	r, _ := decodeFTSBytes(lower[i:])
	return isWordRune(r)
}

// pastDiacritics returns the offset in lower of the first character at
// or after i that is not a diacritic (isDiacritic), or len(lower).
func pastDiacritics(lower []byte, i int) int {
	for i < len(lower) && lower[i] >= utf8.RuneSelf {
		r, n := decodeFTSBytes(lower[i:])
		if !isDiacritic(r) {
			break
		}
		i += n
	}
	return i
}

// seqLen returns the length of the character at the start of b (not
// empty) as SQLite reads UTF-8: a lead byte and all the continuation
// bytes after it (decodeFTS).
func seqLen(b []byte) int {
	n := 1
	if b[0] >= 0xc0 {
		for n < len(b) && b[n]&0xc0 == 0x80 {
			n++
		}
	}
	return n
}

// decodeFTSBytes is decodeFTS of the character at the start of b.
func decodeFTSBytes(b []byte) (rune, int) {
	return decodeFTS(string(b[:seqLen(b)]))
}

// nextMatch returns the offset of the first whole word w in lower (ASCII
// letters lower-cased) at or after from, a prefix bounded only before it,
// and whether its line is quoted; -1 if there is none.
func nextMatch(lower []byte, from int, w string, prefix bool) (at int, quoted bool) {
	if w == "" {
		return -1, false
	}
	for pos := from; pos < len(lower); {
		i := bytes.Index(lower[pos:], []byte(w))
		if i < 0 {
			break
		}
		at := pos + i
		pos = at + 1
		if wordBefore(lower, at) || !prefix && wordGoesOn(lower, at+len(w)) {
			continue
		}
		lineStart := bytes.LastIndexByte(lower[:at], '\n') + 1
		return at, bytes.HasPrefix(bytes.TrimLeft(lower[lineStart:at], " \t"), []byte(">"))
	}
	return -1, false
}

// lineEnd returns the offset of the newline that ends the line of at, or
// -1: past a quoted match, the next one looked at is on another line, lest
// one long line of matches take quadratic time.
func lineEnd(lower []byte, at int) int {
	if i := bytes.IndexByte(lower[at:], '\n'); i >= 0 {
		return at + i
	}
	return -1
}

// MatchSeen returns a test for mailview.Options.Enough that stops reading
// a message's text once Excerpt has what it needs: a word of words on an
// unquoted line with after (more than Excerpt's max) bytes behind it. It
// returns nil for words beyond ASCII, which Excerpt finds by tokenizing.
// The test keeps state between calls: one for each mailview.Parse.
func MatchSeen(words []string, after int) func(part []byte, added int) bool {
	want := newWordSet(words)
	if !want.ascii {
		return nil
	}
	longest := 0
	for _, w := range words {
		longest = max(longest, len(w))
	}
	var lower []byte // of the part read so far
	return func(part []byte, added int) bool {
		if len(lower) != len(part)-added {
			lower = lower[:0] // another part
			added = len(part)
		}
		for _, c := range part[len(part)-added:] {
			if c >= 'A' && c <= 'Z' {
				c += 'a' - 'A'
			}
			lower = append(lower, c)
		}
		// Where a match may start that the last call did not see with
		// after bytes behind it.
		from := max(0, len(lower)-added-after-longest)
		seen := func(w string, prefix bool) bool {
			for pos := from; ; pos++ {
				at, quoted := nextMatch(lower, pos, w, prefix)
				if at < 0 || at+len(w)+after > len(lower) {
					return false // the next call sees it again
				}
				if p := pastDiacritics(lower, at+len(w)); p == len(lower) || lower[p] >= utf8.RuneSelf && p+seqLen(lower[p:]) == len(lower) {
					// And the whole character after its diacritics,
					// which may go on the word.
					return false
				}
				if !quoted {
					return true
				}
				if pos = lineEnd(lower, at); pos < 0 {
					return false
				}
			}
		}
		for w := range want.whole {
			if seen(w, false) {
				return true
			}
		}
		for _, p := range want.prefixes {
			if seen(p, true) {
				return true
			}
		}
		return false
	}
}

// foldsToASCII reports whether text has a character beyond ASCII that
// the index folds to ASCII or drops: a Latin letter with an accent
// ("café" is the word cafe), a diacritic. An ASCII word may match there
// what a byte search does not see.
func foldsToASCII(text string) bool {
	for i := 0; i < len(text); {
		if text[i] < utf8.RuneSelf {
			i++
			continue
		}
		r, n := decodeFTS(text[i:])
		if isDiacritic(r) || isWordRune(r) && r <= unicode.MaxRune && foldRune(r) < utf8.RuneSelf {
			return true
		}
		i += n
	}
	return false
}

// firstMatchTokenized is firstMatch for words beyond ASCII, or text
// where an ASCII word may be written with accents.
func firstMatchTokenized(text string, want wordSet) int {
	for _, quotedPass := range []bool{false, true} {
		off := 0
		for line := range strings.Lines(text) {
			if strings.HasPrefix(strings.TrimLeft(line, " \t"), ">") == quotedPass {
				for _, w := range wordSpans(line) {
					if want.has(fold(line[w[0]:w[1]])) {
						return off + w[0]
					}
				}
			}
			off += len(line)
		}
	}
	return -1
}
