package catalog

import (
	"database/sql"
	"slices"
	"strings"
	"testing"
)

func TestPairsText(t *testing.T) {
	for _, tt := range []struct {
		name string
		cols []string
		want []string
	}{
		{"none", []string{"kernel panic at boot"}, nil},
		{"two", []string{"Kernel OF the boot"}, []string{"of the"}},
		{"each once, in order", []string{"it is the end of the road, it is"}, []string{"it is", "is the", "of the"}},
		{"not across columns", []string{"this is", "a test"}, []string{"this is"}},
		{"separators", []string{"the-of, and:the\n\tof"}, []string{"the of", "of and", "and the"}},
		{"broken by another word", []string{"the 2 of"}, nil},
		{"folded", []string{"Thé ÓF"}, []string{"the of"}},
		{"underscore joins nothing", []string{"the_of"}, []string{"the of"}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			got := pairsText(tt.cols)
			var want []string
			for _, w := range tt.want {
				want = append(want, strings.Replace(w, " ", pairSep, 1))
			}
			if w := strings.Join(want, " "); got != w {
				t.Errorf("pairsText(%q) = %q, want %q", tt.cols, got, w)
			}
		})
	}
}

// TestPairsTextBounded: a message gives each pair once, and so at most
// every pair of common words, whatever its size.
func TestPairsTextBounded(t *testing.T) {
	var b strings.Builder
	for range 3 {
		for _, a := range commonWords {
			for _, c := range commonWords {
				b.WriteString(a + " " + c + ", ")
			}
		}
	}
	got := strings.Fields(pairsText([]string{b.String(), b.String()}))
	if n := len(commonWords) * len(commonWords); len(got) != n {
		t.Errorf("pairsText of every pair, three times over, gave %d pairs, want %d", len(got), n)
	}
}

// ftsPairsDB returns a database with an fts5 table as the catalog's fts,
// reduced to one text column and the pairs.
func ftsPairsDB(tb testing.TB) *sql.DB {
	tb.Helper()
	db, err := sql.Open("sqlite", ":memory:")
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { db.Close() })
	db.SetMaxOpenConns(1)
	if _, err := db.Exec(`CREATE VIRTUAL TABLE fts USING fts5 (body, pairs, content='', contentless_delete=1, tokenize='unicode61 remove_diacritics 2')`); err != nil {
		tb.Fatal(err)
	}
	return db
}

// checkPairs indexes doc and checks that searching phrase with its pairs
// finds it exactly when searching the phrase alone does.
func checkPairs(t *testing.T, db *sql.DB, doc, phrase string, prefix bool) {
	if _, err := db.Exec(`DELETE FROM fts`); err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`INSERT INTO fts (rowid, body, pairs) VALUES (1, ?, ?)`, doc, pairsText([]string{doc})); err != nil {
		t.Fatal(err)
	}
	term := Term{Text: phrase, Phrase: true, Prefix: prefix}
	count := func(match string) (int, error) {
		var n int
		err := db.QueryRow(`SELECT count(*) FROM fts WHERE fts MATCH ?`, match).Scan(&n)
		return n, err
	}
	plain, errPlain := count(term.ftsIn("body"))
	with, errWith := count(term.ftsMain("body"))
	if errPlain != nil {
		return // not a phrase FTS5 takes (an empty one)
	}
	if errWith != nil || with != plain {
		t.Errorf("doc %q, phrase %q (prefix %v): with its pairs (%s) %d, %v; alone %d\npairs %q",
			doc, phrase, prefix, term.ftsMain("body"), with, errWith, plain, pairsText([]string{doc}))
	}
}

// TestPairsAgainstFTS5: a phrase is found with its pairs where FTS5 finds
// it alone, and not where it does not.
func TestPairsAgainstFTS5(t *testing.T) {
	db := ftsPairsDB(t)
	for _, tt := range []struct{ doc, phrase string }{
		{"what the of and does", "the of and"},
		{"what the of but and does", "the of and"},
		{"THE\u00a0Of—and", "the of and"},
		{"the\u0301 of", "the of"},
		{"t\u0301he of", "the of"},
		{"thé of", "the of"},
		{"the ½ of", "the of"},
		{"the \u0301 of", "the of"},
		{"the \ue000 of", "the of"},
		{"the\ue000of", "the of"},
		{"it is in the tree", "it is in the"},
		{"it is in a tree, the", "it is in the"},
		{"if you have", "if you ha"},
		{"øf the", "of the"},
		{"ıf you", "if you"},
		{"đo not", "do not"},
		{"ĳ the", "i the"},
		{"ǒf the", "of the"},
		{"ｏｆ the", "of the"},
		{"ó́́́́́́́f the", "of the"},
	} {
		checkPairs(t, db, tt.doc, tt.phrase, false)
		checkPairs(t, db, tt.doc, tt.phrase, true)
	}
}

// FuzzPairs: whatever the text, a phrase in it is found with its pairs
// exactly when FTS5 finds it alone; the pairs never lack one that FTS5's
// tokenizer sees.
func FuzzPairs(f *testing.F) {
	for _, s := range [][3]string{
		{"what ", "the of and", " does"},
		{"", "It is\u00a0in THE", " tree"},
		{"t\u0301", "he of", ""},
		{"the \u0301", " of ", "and"},
		{"", "the ½ of", ""},
		{"x", "ǅ is ﬁ the", ""},
	} {
		f.Add(s[0], s[1], s[2], false)
	}
	db := ftsPairsDB(f)
	f.Fuzz(func(t *testing.T, before, phrase, after string, prefix bool) {
		if len(before)+len(phrase)+len(after) > 1<<12 {
			return
		}
		checkPairs(t, db, before+phrase+after, phrase, prefix)
	})
}

// TestPairsCorpus: over the corpus, phrases of common words find the same
// messages with their pairs as without, and Search gives them.
func TestPairsCorpus(t *testing.T) {
	c := corpusCatalog(t)
	labels := func(match string) []int64 {
		t.Helper()
		rows, err := c.r.QueryContext(t.Context(), `SELECT rowid FROM fts WHERE fts MATCH ? ORDER BY rowid DESC`, match)
		if err != nil {
			t.Fatalf("MATCH %s: %v", match, err)
		}
		defer rows.Close()
		var out []int64
		for rows.Next() {
			var l int64
			if err := rows.Scan(&l); err != nil {
				t.Fatal(err)
			}
			out = append(out, l)
		}
		if err := rows.Err(); err != nil {
			t.Fatal(err)
		}
		return out
	}
	some := 0
	for _, s := range []string{`"the of and"`, `"this is a"`, `"it is in the"`, `"if you have"`, `"I am not sure"`,
		`"of the kernel"`, `s:"for the"`, `"is that the"`, `"to be*"`, `"there is no"`} {
		q, err := ParseQuery(s)
		if err != nil {
			t.Fatal(err)
		}
		term := q.Terms[0]
		main, _ := fieldColumns(term.Field)
		if !strings.Contains(term.ftsMain(main), "pairs :") {
			t.Fatalf("%s: %s has no pairs", s, term.ftsMain(main))
		}
		plain, with := labels(term.ftsIn(main)), labels(term.ftsMain(main))
		if !slices.Equal(plain, with) {
			t.Errorf("%s: %d messages with its pairs, %d without; they differ", s, len(with), len(plain))
		}
		some += len(plain)
		res, err := c.Search(t.Context(), q, SearchOptions{Limit: 20, CountLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		if want := min(len(plain), 1000); res.Total != want || res.More != (len(plain) > 1000) {
			t.Errorf("Search(%s) = %d (more %v), want %d of %d", s, res.Total, res.More, want, len(plain))
		}
	}
	if some == 0 {
		t.Error("no phrase matched any message of the corpus")
	}
}
