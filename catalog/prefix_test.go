package catalog

import (
	"fmt"
	"slices"
	"testing"
)

// prefixFixture is mail whose words start alike: cpu, cpus, cpufreq,
// cpu0-cpu7 and cpuidle in the text, subjects and quoted lines, and 40
// words zzq000-zzq039, one or two a message.
func prefixFixture(t *testing.T) (*archive, *Catalog) {
	t.Helper()
	a := newArchive(t)
	starts := []string{"cpu", "cpus", "cpufreq", "CPU_hotplug", "cpuidle", "Cpus", "linux cpumask", "cpü"}
	for i := range 60 {
		w := starts[i%len(starts)]
		subject := fmt.Sprintf("message %d", i)
		if i%5 == 0 {
			subject = "about " + starts[(i/5)%len(starts)]
		}
		body := fmt.Sprintf("Some text with %s in it, and zzq%03d.\n", w, i%40)
		if i%7 == 0 {
			body += fmt.Sprintf("\n> quoted cpu%d and zzq%03d\n", i%8, (i+1)%40)
		}
		if i%9 == 0 {
			body = "Nothing of the kind here.\n"
		}
		raw := fmt.Sprintf("From: Dev %d <dev%d@example.org>\nSubject: %s\nDate: Mon, %d Jan 2024 10:00:00 +0000\nMessage-ID: <x%d@example.org>\n\n%s",
			i%3, i%3, subject, 1+i%28, i, body)
		a.put([]byte(raw), "lkml")
	}
	// Pair words (pairs.go) start with "the" too, and sort after the
	// ASCII words that do but before "theｑ" (U+FF51): a limit reached on
	// pair words is reached.
	a.put([]byte("From: p@example.org\nSubject: pairs\nDate: Mon, 1 Jan 2024 11:00:00 +0000\nMessage-ID: <pairs@example.org>\n\nthe of the and the is\n"), "lkml")
	a.put([]byte("From: p@example.org\nSubject: wide\nDate: Mon, 1 Jan 2024 12:00:00 +0000\nMessage-ID: <wide@example.org>\n\ntheｑ only\n"), "lkml")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	return a, c
}

var prefixQueries = []string{
	"cpu*", "CPU*", "cpus*", "cpuf*", "cpü*", "subject:cpu*", "-cpu* text", "cpu* -cpus",
	`"linux cpu"*`, `"text with cpu"*`, "cpu* OR zzq*", "zzq*", "zzq00*", "xyzzy*",
	"s:cpu*", "b:cpu*", "q:cpu*", "bs:cpu* AND zzq01*", "NOT cpu*", "a:cpu*", "from:dev*",
	"cpu* list:lkml", "cpu* after:2024-01-10", "the*",
}

// TestPrefixAsWords: a prefix read as the OR of its words finds what
// FTS5's own prefix query finds (maxPrefixWords 0), whatever the
// grammar, field, sort and count limit, and where there are more words
// than maxPrefixWords it is FTS5's prefix query again.
func TestPrefixAsWords(t *testing.T) {
	_, c := prefixFixture(t)
	search := func(q string, opts SearchOptions) SearchResult {
		t.Helper()
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatalf("ParseQuery(%q) = %v", q, err)
		}
		res, err := c.Search(t.Context(), pq, opts)
		if err != nil {
			t.Fatalf("Search(%q) = %v", q, err)
		}
		return res
	}
	t.Cleanup(func() { maxPrefixWords = 256 })
	for _, max := range []int{256, 3} {
		maxPrefixWords = max
		for _, q := range prefixQueries {
			for _, opts := range []SearchOptions{{Limit: 100}, {Limit: 5, Offset: 3, CountLimit: 7}, {Limit: 100, Sort: Relevance}} {
				got := search(q, opts)
				old := maxPrefixWords
				maxPrefixWords = 0
				want := search(q, opts)
				maxPrefixWords = old
				g, w := labels(got.Messages), labels(want.Messages)
				if opts.Sort == Relevance {
					// bm25 ranks an OR of words and a prefix alike only
					// where one word matches: the same set is asked.
					slices.Sort(g)
					slices.Sort(w)
				}
				if !slices.Equal(g, w) || got.Total != want.Total || got.More != want.More {
					t.Errorf("maxPrefixWords %d: Search(%q, %+v) = %v (total %d, more %v); FTS5's prefix query: %v (total %d, more %v)",
						max, q, opts, g, got.Total, got.More, w, want.Total, want.More)
				}
			}
		}
	}
	// The fixture matches: a test of nothing would pass too.
	if res := search("cpu*", SearchOptions{Limit: 100}); res.Total < 40 {
		t.Errorf("cpu* found %d messages, want most of 60", res.Total)
	}
}

// expandPrefixes returns pq with its prefixes replaced by the words of c's
// catalog they stand for, as a search reads them on a connection of its
// own.
func expandPrefixes(t *testing.T, c *Catalog, pq *Query) *Query {
	t.Helper()
	conn, err := c.s.Conn(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	if err := ensureWordsTable(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	tx, err := conn.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	defer tx.Rollback()
	wq, err := withPrefixWords(t.Context(), tx, pq)
	if err != nil {
		t.Fatal(err)
	}
	return wq
}

// TestPrefixWordsUsed: a prefix of few words is read as their OR, one of
// more than maxPrefixWords as FTS5's prefix, one of no word too.
func TestPrefixWordsUsed(t *testing.T) {
	_, c := prefixFixture(t)
	match := func(q string) string {
		t.Helper()
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		return expandPrefixes(t, c, pq).plan().match
	}
	tests := []struct{ q, want string }{
		{"cpuf*", `("cpuf" OR "cpufreq")`}, // the prefix itself, whether a word or not
		{"cpus*", `"cpus"`},                // Cpus folds to cpus
		{"cpü*", `("cpu" OR "cpu0" OR "cpu1" OR "cpu2" OR "cpu3" OR "cpu4" OR "cpu5" OR "cpu6" OR "cpu7" OR "cpufreq" OR "cpuidle" OR "cpumask" OR "cpus")`},
		{"subject:cpui*", `subject : ("cpui" OR "cpuidle")`},
		{`"linux cpum"*`, `("linux cpum" OR "linux cpumask")`},
		{"s:cpu* OR zzq03*", `(subject : ("cpu" OR "cpu0" OR "cpu1" OR "cpu2" OR "cpu3" OR "cpu4" OR "cpu5" OR "cpu6" OR "cpu7" OR "cpufreq" OR "cpuidle" OR "cpumask" OR "cpus") OR ("zzq03" OR "zzq030" OR "zzq031" OR "zzq032" OR "zzq033" OR "zzq034" OR "zzq035" OR "zzq036" OR "zzq037" OR "zzq038" OR "zzq039"))`},
		{"xyzzy*", `"xyzzy"`},         // no word: one that matches nothing
		{"the*", `("the" OR "theｑ")`}, // not the pairs
		{"zzq*", `"zzq" *`},           // 40 words, more than 30
	}
	old := maxPrefixWords
	maxPrefixWords = 30
	defer func() { maxPrefixWords = old }()
	for _, tt := range tests {
		if got := match(tt.q); got != tt.want {
			t.Errorf("%s: MATCH %s, want %s", tt.q, got, tt.want)
		}
	}
}

// TestPrefixConnsStayReadOnly: the words table is made in each search
// connection's temp schema with query_only lifted for it; every
// connection of the pool refuses writes afterwards.
func TestPrefixConnsStayReadOnly(t *testing.T) {
	_, c := prefixFixture(t)
	q, err := ParseQuery("cpu*")
	if err != nil {
		t.Fatal(err)
	}
	for range 3 * SearchConns() {
		if _, err := c.Search(t.Context(), q, SearchOptions{Limit: 10}); err != nil {
			t.Fatal(err)
		}
	}
	var tables int
	for range SearchConns() {
		conn, err := c.s.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		if _, err := conn.ExecContext(t.Context(), `CREATE TABLE temp.t (a)`); err == nil {
			t.Error("a search connection wrote to its temp schema after a prefix search")
		}
		if _, err := conn.ExecContext(t.Context(), `DELETE FROM meta`); err == nil {
			t.Error("a search connection deleted the catalog's meta table")
		}
		var n int
		if err := conn.QueryRowContext(t.Context(), `SELECT count(*) FROM temp.sqlite_schema WHERE name = 'fts_words'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		tables += n
	}
	if tables == 0 {
		t.Error("no search connection has the words table after prefix searches")
	}
}

func TestPrefixEnd(t *testing.T) {
	for _, tt := range []struct {
		p, want string
		ok      bool
	}{
		{"cpu", "cpv", true},
		{"cp\xff", "cq", true},
		{"caf\xc3\xa9", "caf\xc3\xaa", true},
		{"\xff\xff", "", false},
	} {
		if got, ok := prefixEnd(tt.p); got != tt.want || ok != tt.ok {
			t.Errorf("prefixEnd(%q) = %q, %v; want %q, %v", tt.p, got, ok, tt.want, tt.ok)
		}
	}
}

// TestPrefixCorpus: over the shared sample's vocabulary (twenty
// charsets, patches, 5,256 messages), prefixes read as their words find
// what FTS5's prefix query finds: every match counted, the newest page.
func TestPrefixCorpus(t *testing.T) {
	c := corpusCatalog(t)
	expanded := 0
	for _, q := range []string{"cpu*", "irq*", "mips*", "kern*", "r4k*", "conf*", "linu*", "s:fix*", "f:ralf*",
		`"signed off"*`, "b:regist*", "dfa:spin*", "the*", "zzz*", "0x8*", "caf*", "ext*"} {
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		if expandPrefixes(t, c, pq).plan().match != pq.plan().match {
			expanded++
		}
		opts := SearchOptions{Limit: 50}
		got, err := c.Search(t.Context(), pq, opts)
		if err != nil {
			t.Fatal(err)
		}
		old := maxPrefixWords
		maxPrefixWords = 0
		want, err := c.Search(t.Context(), pq, opts)
		maxPrefixWords = old
		if err != nil {
			t.Fatal(err)
		}
		if g, w := labels(got.Messages), labels(want.Messages); !slices.Equal(g, w) || got.Total != want.Total {
			t.Errorf("Search(%q) = %d matches, first %v; FTS5's prefix query: %d, first %v", q, got.Total, g[:min(3, len(g))], want.Total, w[:min(3, len(w))])
		}
	}
	// Most of them are read as words: a comparison of FTS5 with itself
	// would pass too.
	if expanded < 12 {
		t.Errorf("%d of 17 prefixes read as their words, want most", expanded)
	}
}
