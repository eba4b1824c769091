package catalog

// Prefix searches (word*) as the OR of the words they start.
//
// FTS5 answers a prefix query by merging the doclists of every word
// that starts with it into one, in memory, before it returns its first
// row, whatever the LIMIT: `cpu*` read every message with cpu, cpus,
// cpufreq... for a page of 20 and a count that stops at 1,001, and cost
// as much more as the archive grew (docs/performance.md, Scale). An OR
// of the same words is read as other searches are, each word's doclist
// in rowid order and only as far as the count and the page reach.
//
// So Search first lists the words of the index that start with the
// prefix, from an fts5vocab table over fts (one per search connection,
// in its temp schema: the catalog is not changed), and writes the term
// as their OR. The OR matches the same messages as the prefix: those
// are the words FTS5's prefix query merges, in the same columns. Where
// there are more than maxPrefixWords (a short, common start), the term
// stays FTS5's prefix query.

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"errors"
	"fmt"
	"strings"
)

// maxPrefixWords is how many words a prefix is read as, at most. An OR
// node of FTS5 steps each of its words at each row it returns, and
// listing the words reads each one's doclist (fts5vocab counts them):
// both grow with the words.
var maxPrefixWords = 256

// wordsTable is the fts5vocab table of fts's words, in a search
// connection's temp schema (ensureWordsTable).
const wordsTable = "temp.fts_words"

// ensureWordsTable makes wordsTable on conn, unless there. Search
// connections are query_only, which refuses the temp schema too: it is
// lifted for that one statement.
func ensureWordsTable(ctx context.Context, conn *sql.Conn) (err error) {
	var n int
	if err := conn.QueryRowContext(ctx, `SELECT count(*) FROM temp.sqlite_schema WHERE name = 'fts_words'`).Scan(&n); err != nil || n > 0 {
		return err
	}
	if _, err := conn.ExecContext(ctx, `PRAGMA query_only = 0`); err != nil {
		return err
	}
	defer func() {
		if _, e := conn.ExecContext(context.WithoutCancel(ctx), `PRAGMA query_only = 1`); e != nil {
			// A connection that cannot be made read-only again is not
			// given back to the pool: Raw closes it on ErrBadConn.
			conn.Raw(func(any) error { return driver.ErrBadConn })
			err = errors.Join(err, fmt.Errorf("cannot make a search connection read-only again: %w", e))
		}
	}()
	_, err = conn.ExecContext(ctx, `CREATE VIRTUAL TABLE `+wordsTable+` USING fts5vocab(main, fts, row)`)
	return err
}

// hasPrefix reports whether q has a prefix term that reads the fts
// table (those withPrefixWords may write as an OR).
func (q *Query) hasPrefix() bool {
	found := false
	q.eachTerm(func(t *Term) {
		found = found || expandable(*t)
	})
	return found
}

// eachTerm calls f with each term of q's tree (the one plan reads).
func (q *Query) eachTerm(f func(*Term)) {
	if !q.pi {
		for i := range q.Terms {
			f(&q.Terms[i])
		}
		return
	}
	var walk func(n *node)
	walk = func(n *node) {
		if n == nil {
			return
		}
		if n.op == opText {
			f(&n.term)
		}
		for _, k := range n.kids {
			walk(k)
		}
	}
	walk(q.root)
}

// expandable reports whether t is a prefix withPrefixWords may write as
// an OR of words: one in the fts table (not dfn:, whose prefix is
// refused, nor only fts_addr's columns) with a last word to start.
func expandable(t Term) bool {
	if !t.Prefix || t.Field == "dfn" || strings.Contains(t.Text, pairSep) {
		return false
	}
	main, _ := fieldColumns(t.Field)
	return main != "-" && len(tokens(t.Text)) > 0
}

// withPrefixWords returns q with each of its prefix terms written as the
// OR of its words (Term.words), read from wordsTable in tx, where they
// are at most maxPrefixWords; q itself is not changed.
func withPrefixWords(ctx context.Context, tx *sql.Tx, q *Query) (*Query, error) {
	out := *q
	if q.pi {
		out.root = cloneTree(q.root)
	} else {
		out.Terms = append([]Term(nil), q.Terms...)
	}
	read := map[string][]string{}
	var err error
	out.eachTerm(func(t *Term) {
		if err != nil || !expandable(*t) {
			return
		}
		w := tokens(t.Text)
		prefix := w[len(w)-1]
		words, ok := read[prefix]
		if !ok {
			words, err = prefixWords(ctx, tx, prefix)
			read[prefix] = words
		}
		if words != nil {
			t.words = prefixOr(t.Text, words)
		}
	})
	if err != nil {
		return nil, err
	}
	return &out, nil
}

// prefixWords returns the words of the fts table that start with prefix
// (folded, as tokens returns it), in order, prefix itself first whether
// or not the index has it (an absent word matches nothing); nil if there
// are more than maxPrefixWords.
//
// The others are read from the word after prefix on: fts5vocab reads
// each word's matches to count them, and prefix is often the commonest
// of its words (cpu: 270,000 of the matches at a million messages, half
// the time of listing cpu*'s 98 words). No word has a character below
// 0x01 after prefix (words.go), so that bound leaves out prefix alone.
func prefixWords(ctx context.Context, tx *sql.Tx, prefix string) ([]string, error) {
	cond, args := `term >= ?`, []any{prefix + "\x01"}
	if end, ok := prefixEnd(prefix); ok {
		cond, args = cond+` AND term < ?`, append(args, end)
	}
	rows, err := tx.QueryContext(ctx, `SELECT term FROM `+wordsTable+` WHERE `+cond+` LIMIT ?`, append(args, maxPrefixWords)...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	words := []string{prefix}
	read := 0
	for rows.Next() {
		read++
		var w string
		if err := rows.Scan(&w); err != nil {
			return nil, err
		}
		if !strings.HasPrefix(w, prefix) {
			break
		}
		if strings.Contains(w, pairSep) {
			// A pair of common words (pairs.go) starts with a word of
			// the same message's text: the OR has that one. It still
			// counts against the LIMIT: words may follow it.
			continue
		}
		words = append(words, w)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	if read >= maxPrefixWords {
		// The LIMIT was reached: there may be more.
		return nil, nil
	}
	return words, nil
}

// prefixEnd returns the least string greater than every string that
// starts with p, and false if there is none (p all 0xff bytes).
func prefixEnd(p string) (string, bool) {
	b := []byte(p)
	for i := len(b) - 1; i >= 0; i-- {
		if b[i] < 0xff {
			b[i]++
			return string(b[:i+1]), true
		}
	}
	return "", false
}

// prefixOr returns the FTS5 expression of the phrase text whose last word
// is one of words: their OR, each a phrase as ftsPhrase writes it.
func prefixOr(text string, words []string) string {
	w := tokens(text)
	head := strings.Join(w[:len(w)-1], " ")
	if head != "" {
		head += " "
	}
	parts := make([]string, len(words))
	for i, word := range words {
		parts[i] = ftsPhrase(head + word)
	}
	if len(parts) == 1 {
		return parts[0]
	}
	return "(" + strings.Join(parts, " OR ") + ")"
}

// cloneTree returns a copy of the tree at n whose nodes can be changed
// without changing n's.
func cloneTree(n *node) *node {
	if n == nil {
		return nil
	}
	c := *n
	if n.kids != nil {
		c.kids = make([]*node, len(n.kids))
		for i, k := range n.kids {
			c.kids[i] = cloneTree(k)
		}
	}
	return &c
}
