package catalog

// A query tree as SQL. The words of most queries are in the fts table:
// its part of the tree that is all fts words (the conjuncts at the top
// that are) becomes one FTS5 MATCH that drives the search in label
// order, as before the tree; the rest (words in fts_addr, Message-IDs,
// sizes, dates below the top, OR and NOT across tables) are conditions
// on each message the MATCH finds, or, without such a MATCH, on the
// messages in date order.

import (
	"fmt"
	"strings"
)

// Columns of the fts table a field searches, in FTS5's column filter
// syntax ("" for every column), and of the fts_addr table.
const (
	// nonQuoted is public-inbox's "nq:" (Search.pm, $non_quoted_body):
	// the text, the diffs' paths, lines, hunk headers and object IDs.
	nonQuoted = "body files dfa dfb dfctx dfhh dfpre dfpost patchid"
)

// fieldColumns returns the columns of fts and of fts_addr a field
// searches: main "" is every fts column, "-" none.
func fieldColumns(field string) (main, addr string) {
	switch field {
	case "":
		return "", "-"
	case "subject":
		return "subject", "-"
	case "from":
		return "sender", "-"
	case "dfn":
		return "files", "-"
	case "body": // IMAP's BODY, public-inbox's b:
		return "{" + nonQuoted + " quoted}", "-"
	case "bs":
		return "{" + nonQuoted + " quoted subject}", "-"
	case "nq":
		return "{" + nonQuoted + "}", "-"
	case "q":
		return "quoted", "-"
	case "n":
		return "names", "-"
	case "dfa", "dfb", "dfctx", "dfhh", "dfpre", "dfpost", "patchid":
		return field, "-"
	case "dfblob":
		return "{dfpre dfpost}", "-"
	case "t":
		return "-", "to_addr"
	case "c":
		return "-", "cc_addr"
	case "tc":
		return "-", "{to_addr cc_addr}"
	case "a":
		return "sender", "{to_addr cc_addr}"
	case "l":
		return "-", "list_id"
	}
	return "-", "-"
}

// mainFTS returns the FTS5 expression of a subtree that is all words of
// the fts table, and whether it is; an AND must have a word that is not
// negated, an OR none that is.
func mainFTS(n *node) (string, bool) {
	switch n.op {
	case opText:
		main, addr := fieldColumns(n.term.Field)
		if main == "-" || addr != "-" {
			return "", false
		}
		return n.term.ftsMain(main), true
	case opOr:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			e, ok := mainFTS(k)
			if !ok || k.op == opNot {
				return "", false
			}
			parts[i] = e
		}
		return "(" + strings.Join(parts, " OR ") + ")", true
	case opAnd:
		var pos, neg []string
		for _, k := range n.kids {
			if k.op == opNot {
				e, ok := mainFTS(k.kids[0])
				if !ok {
					return "", false
				}
				neg = append(neg, e)
				continue
			}
			e, ok := mainFTS(k)
			if !ok {
				return "", false
			}
			pos = append(pos, e)
		}
		if len(pos) == 0 {
			return "", false
		}
		return withNot(strings.Join(pos, " AND "), neg), true
	}
	return "", false
}

// addrFTS returns the FTS5 expression of a subtree that is all words of
// the fts_addr table, and whether it is (no NOT).
func addrFTS(n *node) (string, bool) {
	switch n.op {
	case opText:
		main, addr := fieldColumns(n.term.Field)
		if main != "-" || addr == "-" {
			return "", false
		}
		return n.term.ftsIn(addr), true
	case opOr, opAnd:
		parts := make([]string, len(n.kids))
		for i, k := range n.kids {
			e, ok := addrFTS(k)
			if !ok {
				return "", false
			}
			parts[i] = e
		}
		if n.op == opOr {
			return "(" + strings.Join(parts, " OR ") + ")", true
		}
		return strings.Join(parts, " AND "), true
	}
	return "", false
}

// withNot returns the FTS5 expression pos without the matches of any of neg.
func withNot(pos string, neg []string) string {
	for _, n := range neg {
		pos = "(" + pos + ") NOT " + n
	}
	return pos
}

// sqlCond returns an SQL condition on the messages row m that holds for
// the messages n matches, and its arguments.
func sqlCond(n *node) (string, []any) {
	if e, ok := mainFTS(n); ok {
		return `m.label IN (SELECT rowid FROM fts WHERE fts MATCH ?)`, []any{e}
	}
	switch n.op {
	case opText:
		main, addr := fieldColumns(n.term.Field)
		var sets []string
		var args []any
		if main != "-" {
			sets = append(sets, `SELECT rowid FROM fts WHERE fts MATCH ?`)
			args = append(args, n.term.ftsMain(main))
		}
		if addr != "-" {
			sets = append(sets, `SELECT rowid FROM fts_addr WHERE fts_addr MATCH ?`)
			args = append(args, n.term.ftsIn(addr))
		}
		// One set of labels (a: reads both tables), which SQLite can
		// look the messages up by.
		return "m.label IN (" + strings.Join(sets, " UNION ") + ")", args
	case opRange:
		if n.col == "size" {
			// public-inbox's size is IMAP's RFC822.SIZE, with CRLF line
			// ends: the wire table's.
			return "((SELECT w.size FROM wire w WHERE w.msg = m.id) BETWEEN ? AND ?)", []any{n.lo, n.hi}
		}
		return "(m." + n.col + " BETWEEN ? AND ?)", []any{n.lo, n.hi}
	case opMsgID:
		return `(m.msgid_key = ? AND m.msgid = ?)`, []any{textKey(n.value), n.value}
	case opList:
		return `(m.list = ?)`, []any{n.value}
	case opNot:
		c, args := sqlCond(n.kids[0])
		return "(NOT " + c + ")", args
	}
	join := " AND "
	if n.op == opOr {
		join = " OR "
	}
	conds := make([]string, len(n.kids))
	var args []any
	for i, k := range n.kids {
		c, a := sqlCond(k)
		conds[i] = c
		args = append(args, a...)
	}
	return "(" + strings.Join(conds, join) + ")", args
}

// queryPlan is how Search runs a query.
type queryPlan struct {
	// match is the FTS5 expression whose matches in table (fts or
	// fts_addr) are read in label order; "" to read the messages in
	// date order.
	match, table string
	// where are further conditions on the messages row m (" AND ..."),
	// with their arguments.
	where string
	args  []any
	// lo and hi bound the date (Unix seconds, both included).
	lo, hi int64
}

// plan returns how Search runs q: the conjuncts at the top of its tree
// that are words of the fts table make the MATCH, negated ones taken out
// of it with NOT; dates there narrow the label range; the rest are
// conditions.
func (q *Query) plan() queryPlan {
	p := queryPlan{table: "fts"}
	p.lo, p.hi = q.dates()
	root := q.tree()
	if root == nil {
		return p
	}
	conj := []*node{root}
	if root.op == opAnd {
		conj = root.kids
	}
	var pos, neg []string
	var rest []*node
	for _, n := range conj {
		switch {
		case n.op == opRange && n.col == "date":
			p.lo, p.hi = max(p.lo, n.lo), min(p.hi, n.hi)
			continue
		case n.op == opNot:
			if e, ok := mainFTS(n.kids[0]); ok {
				neg = append(neg, e)
				continue
			}
		default:
			if e, ok := mainFTS(n); ok {
				pos = append(pos, e)
				continue
			}
		}
		rest = append(rest, n)
	}
	if len(pos) == 0 {
		// Without words of fts, words of fts_addr alone (t:, c:, tc:)
		// drive the search in label order, rather than the messages in
		// date order each looked up in them.
		var addr []string
		keep := rest[:0]
		for _, n := range rest {
			if e, ok := addrFTS(n); ok {
				addr = append(addr, e)
			} else {
				keep = append(keep, n)
			}
		}
		rest = keep
		if len(addr) > 0 {
			p.match, p.table = strings.Join(addr, " AND "), "fts_addr"
		}
	}
	if len(pos) > 0 {
		p.match = withNot(strings.Join(pos, " AND "), neg)
	} else if len(neg) > 0 {
		p.where += ` AND m.label NOT IN (SELECT rowid FROM fts WHERE fts MATCH ?)`
		p.args = append(p.args, strings.Join(neg, " OR "))
	}
	for _, n := range rest {
		c, args := sqlCond(n)
		p.where += " AND " + c
		p.args = append(p.args, args...)
	}
	return p
}

// String shows a plan, for tests.
func (p queryPlan) String() string {
	return fmt.Sprintf("match %s where%s %v", p.match, p.where, p.args)
}
