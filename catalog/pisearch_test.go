package catalog

import (
	"errors"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"
)

// piMail is hand-made mail for public-inbox's prefixes: p1 a patch, p2 a
// reply quoting it, p3 a message with an attachment on another list, p4 a
// large message, p5 a patch of the same change as p1 in another context.
var piMail = []string{
	`From: Alice Example <alice@example.org>
To: Bob Builder <bob@example.net>
Cc: linux-mips@vger.kernel.org
List-Id: Linux MIPS <linux-mips.vger.kernel.org>
Subject: [PATCH v2] MIPS: fix cache flush
Date: Mon, 25 Aug 2025 10:00:00 +0000
Message-ID: <p1@example.org>

The flush was wrong.

Signed-off-by: Alice Example <alice@example.org>
---
 arch/mips/mm/cache.c | 2 +-
 1 file changed, 1 insertion(+), 1 deletion(-)

diff --git a/arch/mips/mm/cache.c b/arch/mips/mm/cache.c
index 1234567..89abcde 100644
--- a/arch/mips/mm/cache.c
+++ b/arch/mips/mm/cache.c
@@ -10,7 +10,7 @@ static void r4k_flush(void)
 	int zebra;
 	int yak;
 	int xerus;
-	old_line_removed();
+	new_line_added();
 	int walrus;
 	int vole;
 	int urchin;
-- 
2.40.0
`,
	`From: Bob Builder <bob@example.net>
To: Alice Example <alice@example.org>
Cc: Carol <carol@example.com>, linux-mips@vger.kernel.org
List-Id: <linux-mips.vger.kernel.org>
Subject: Re: [PATCH v2] MIPS: fix cache flush
Date: Tue, 26 Aug 2025 09:00:00 +0000
Message-ID: <p2@example.org>
In-Reply-To: <p1@example.org>
References: <p1@example.org>

> The flush was wrong.

Reviewed-by: Bob Builder <bob@example.net>
`,
	`From: Carol <carol@example.com>
To: dave@example.org
List-Id: Other things <other.lists.example.org>
Subject: kernel config
Date: Sun, 02 Nov 2025 12:00:00 +0000
Message-ID: <p3@example.org>
MIME-Version: 1.0
Content-Type: multipart/mixed; boundary="b"

--b
Content-Type: text/plain

change-id: 20251102-foo-bar
--b
Content-Type: application/octet-stream; name="config-gzipped.bin"
Content-Disposition: attachment; filename="config-gzipped.bin"
Content-Transfer-Encoding: base64

AAECAwQF
--b--
`,
	`From: Dave <dave@example.org>
To: carol@example.com
Subject: a long story
Date: Mon, 01 Jan 2024 00:00:00 +0000
Message-ID: <p4@example.org>

` + strings.Repeat("story words go on and on\n", 250),
	`From: Eve <eve@example.org>
To: Bob Builder <bob@example.net>
Subject: [PATCH] MIPS: fix cache flush (backport)
Date: Wed, 27 Aug 2025 10:00:00 +0000
Message-ID: <p5@example.org>

Backported.
---
diff --git a/arch/mips/mm/cache.c b/arch/mips/mm/cache.c
index 7654321..fedcba9 100644
--- a/arch/mips/mm/cache.c
+++ b/arch/mips/mm/cache.c
@@ -20,7 +20,7 @@ static void r4k_flush(void)
 	int zebra;
 	int yak;
 	int xerus;
-	old_line_removed();
+	new_line_added();
 	int walrus;
 	int vole;
 	int urchin;
`,
}

func piFixture(t testing.TB) *Catalog {
	t.Helper()
	a := newArchive(t)
	for _, m := range piMail {
		a.put([]byte(m), "")
	}
	c := openCatalog(t)
	mustSync(t, c, a.st)
	return c
}

// TestSearchPrefixes: every public-inbox prefix finds what public-inbox
// finds with it, on hand-made mail.
func TestSearchPrefixes(t *testing.T) {
	c := piFixture(t)
	p1body := piMail[0][strings.Index(piMail[0], "\n\n")+2:]
	id := patchID(p1body)
	if id == "" {
		t.Fatal("patchID(p1) = \"\"")
	}
	tests := []struct {
		name, q string
		want    []string // newest first
	}{
		{"s", "s:cache", []string{"p5", "p2", "p1"}},
		{"s phrase", `s:"fix cache flush"`, []string{"p5", "p2", "p1"}},
		{"s wildcard", "s:flu*", []string{"p5", "p2", "p1"}},
		{"f", "f:alice", []string{"p1"}},
		{"f address", `f:"alice@example.org"`, []string{"p1"}},
		{"f unquoted address", "f:alice@example.org", []string{"p1"}},
		{"from (the archive's)", "from:alice", []string{"p1"}},
		{"t", "t:bob", []string{"p5", "p1"}},
		{"c", "c:carol", []string{"p2"}},
		{"c list", "c:linux-mips@vger.kernel.org", []string{"p2", "p1"}},
		{"tc", "tc:carol", []string{"p2", "p4"}},
		{"a", "a:carol", []string{"p3", "p2", "p4"}},
		{"tcf", "tcf:carol", []string{"p3", "p2", "p4"}},
		{"b", "b:wrong", []string{"p2", "p1"}},
		{"b diff line", "b:new_line_added", []string{"p5", "p1"}},
		{"nq", "nq:wrong", []string{"p1"}},
		{"nq diff line", "nq:new_line_added", []string{"p5", "p1"}},
		{"q", "q:wrong", []string{"p2"}},
		{"bs", "bs:backport", []string{"p5"}},
		{"bs body", "bs:backported", []string{"p5"}},
		{"n", "n:config", []string{"p3"}},
		{"n whole name", `n:"config-gzipped.bin"`, []string{"p3"}},
		{"name in default", "gzipped", []string{"p3"}},
		{"l", "l:linux-mips.vger.kernel.org", []string{"p2", "p1"}},
		{"l part", "l:other", []string{"p3"}},
		{"lid", "lid:other.lists.example.org", []string{"p3"}},
		{"m", "m:p1@example.org", []string{"p1"}},
		{"m brackets", "m:<p2@example.org>", []string{"p2"}},
		{"mid", "mid:p3@example.org", []string{"p3"}},
		{"z from", "z:3000..", []string{"p4"}},
		{"z to", "z:..3000", []string{"p3", "p5", "p2", "p1"}},
		{"d day (and the next, as public-inbox reads it)", "d:20250825", []string{"p2", "p1"}},
		{"d range of days", "d:20250825..20250825", []string{"p1"}},
		{"d from", "d:20251101..", []string{"p3"}},
		{"d to", "d:..2024-12-31", []string{"p4"}},
		{"d ISO range", "d:2025-08-26..2025-08-27", []string{"p5", "p2"}},
		{"dt", "dt:20250825000000..20250825235959", []string{"p1"}},
		{"dt day", "dt:20250826090000", []string{"p2"}},
		{"dt day, a second later", "dt:20250826090001", []string{}},
		{"rt", "rt:2025-08-26..", []string{"p3", "p5", "p2"}},
		{"rt seconds", "rt:..1704067200", []string{"p4"}},
		{"rt seconds, a second before", "rt:..1704067199", []string{}},
		{"dfn", "dfn:cache.c", []string{"p5", "p1"}},
		{"dfa", "dfa:old_line_removed", []string{"p5", "p1"}},
		{"dfa not added", "dfa:new_line_added", []string{}},
		{"dfb", "dfb:new_line_added", []string{"p5", "p1"}},
		{"dfctx", "dfctx:zebra", []string{"p5", "p1"}},
		{"dfctx not changed", "dfctx:new_line_added", []string{}},
		{"dfhh", "dfhh:r4k_flush", []string{"p5", "p1"}},
		{"dfpre", "dfpre:1234567", []string{"p1"}},
		{"dfpre not post", "dfpre:89abcde", []string{}},
		{"dfpost", "dfpost:89abcde", []string{"p1"}},
		{"dfblob", "dfblob:89abcde", []string{"p1"}},
		{"dfblob pre", "dfblob:7654321", []string{"p5"}},
		{"patchid: the same change in two contexts", "patchid:" + id, []string{"p5", "p1"}},
		{"diff lines in a word search", "new_line_added", []string{"p5", "p1"}},
		{"hunk numbers are not words", "urchin", []string{"p5", "p1"}},
		// Booleans.
		{"b4 am -c", `(s:"fix cache flush" AND f:"alice@example.org") AND d:20250825..`, []string{"p1"}},
		{"b4 change-id", `nq:"change-id: 20251102-foo-bar"`, []string{"p3"}},
		{"phrase of change-id", `"change-id: 20251102-foo-bar"`, []string{"p3"}},
		{"AND NOT", "s:cache AND NOT f:bob", []string{"p5", "p1"}},
		{"NOT", "s:cache NOT f:bob", []string{"p5", "p1"}},
		{"minus", "s:cache -f:bob", []string{"p5", "p1"}},
		{"plus", "+s:cache +f:bob", []string{"p2"}},
		{"OR", "f:alice OR f:carol", []string{"p3", "p1"}},
		{"OR across tables", "t:dave OR c:carol", []string{"p3", "p2"}},
		{"OR binds looser than words", "f:carol OR s:cache f:bob", []string{"p3", "p2"}},
		{"parentheses", "(f:carol OR s:cache) f:bob", []string{"p2"}},
		{"nested", "((s:cache AND (f:alice OR f:eve)) OR m:p4@example.org) -d:2025-08-27..", []string{"p1", "p4"}},
		{"only NOT and a date", "-s:cache d:2025-01-01..", []string{"p3"}},
		{"NOT of another table", "s:cache -t:bob", []string{"p2"}},
		{"date below the top", "f:carol OR (s:cache d:2025-08-27..)", []string{"p3", "p5"}},
		{"list: inside OR", "list:other.lists.example.org OR f:dave", []string{"p3", "p4"}},
		{"lei", "s:cache d:20250826..", []string{"p5", "p2"}},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Errorf("%s: ParseQuery(%q) = %v", tt.name, tt.q, err)
			continue
		}
		for _, sort := range []SortOrder{Newest, Relevance} {
			res, err := c.Search(t.Context(), q, SearchOptions{Limit: 100, Sort: sort})
			if err != nil {
				t.Errorf("%s: Search(%q) = %v", tt.name, tt.q, err)
				continue
			}
			got := labels(res.Messages)
			if sort == Relevance {
				got, want := slices.Sorted(slices.Values(got)), slices.Sorted(slices.Values(tt.want))
				if !slices.Equal(got, want) {
					t.Errorf("%s: Search(%q, relevance) = %v, want %v", tt.name, tt.q, got, want)
				}
				continue
			}
			if !slices.Equal(got, tt.want) || res.Total != len(tt.want) {
				t.Errorf("%s: Search(%q) = %v (total %d), want %v", tt.name, tt.q, got, res.Total, tt.want)
			}
		}
	}
}

// TestParsePI: public-inbox's grammar, as Xapian's QueryParser groups it,
// written back with its grouping spelt out.
func TestParsePI(t *testing.T) {
	tests := []struct {
		name, q, want string
	}{
		{"implicit AND", "s:a b", "s:a AND b"},
		{"OR looser than words", "s:a b OR c", "(s:a AND b) OR c"},
		{"OR looser than words, after", "c OR s:a b", "c OR (s:a AND b)"},
		{"AND tighter than OR", "s:a AND b OR c AND d", "(s:a AND b) OR (c AND d)"},
		{"NOT takes the words after it", "s:a NOT b c", "s:a AND -(b AND c)"},
		{"AND NOT", "s:a AND NOT b", "s:a AND -b"},
		{"leading NOT", "NOT s:a", "-s:a"},
		{"parentheses", "(s:a OR b) c", "(s:a OR b) AND c"},
		{"minus group", "s:a -(b OR c)", "s:a AND -(b OR c)"},
		{"plus", "+s:a +b", "s:a AND b"},
		{"b4", `(s:"foo bar" AND f:"metze@samba.org") AND d:20250825..`, `s:"foo bar" AND f:"metze@samba.org" AND d:20250825..`},
		{"prefixes named as typed", "S:x F:y", "s:x AND f:y"},
		{"archive prefixes in a public-inbox query", "from:x subject:y AND z", "f:x AND s:y AND z"},
		{"ranges", "z:1k..2k rt:1700000000.. dt:..20250101000000", "z:1k..2k AND rt:1700000000.. AND dt:..20250101000000"},
		{"quoted date", `d:"2 weeks ago"..`, `d:"2 weeks ago.."`},
		{"message-id", "m:<a@b>", "m:a@b"},
		{"hex", "dfpre:ABCDEF0 patchid:" + strings.Repeat("a", 40), "dfpre:abcdef0 AND patchid:" + strings.Repeat("a", 40)},
		{"a word with parentheses", "s:x foo()", `s:x AND "foo()"`},
		{"punctuation alone", "s:x -- !!", "s:x"},
		{"a list at the top is a filter", "s:x list:linux-mips", "s:x AND list:linux-mips"},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Errorf("%s: ParseQuery(%q) = %v", tt.name, tt.q, err)
			continue
		}
		if got := q.String(); got != tt.want {
			t.Errorf("%s: ParseQuery(%q).String() = %q, want %q", tt.name, tt.q, got, tt.want)
		}
	}
	// The archive's own grammar is kept where a query uses none of
	// public-inbox's: there OR binds tighter than the words around it.
	q, err := ParseQuery("cache OR tlb flush")
	if err != nil || q.pi || len(q.Terms) != 3 || !q.Terms[1].Or || q.Terms[2].Or {
		t.Errorf("ParseQuery(cache OR tlb flush) = %+v, %v; want the archive's grammar, (cache or tlb) and flush", q, err)
	}
}

// TestParsePIErrors: what the archive cannot answer is an ErrQuery that
// names the part; a prefix it does not know is never read as a word.
func TestParsePIErrors(t *testing.T) {
	tests := []struct {
		name, q, want string
	}{
		{"unknown prefix", "foo:bar", "foo: at character 1 is not a search prefix"},
		{"unknown prefix later", "s:x kw:seen", "kw: at character 5 is not a search prefix"},
		{"unknown prefix in parentheses", "(s:x OR uid:1..5)", "uid: at character 9 is not a search prefix"},
		{"unknown prefix negated", "s:x -zz:y", "zz: at character 6 is not a search prefix"},
		{"lei label", "L:inbox", ""}, // L: reads as l:, the List-Id
		{"XOR", "a XOR b", "XOR at character 3 is not supported"},
		{"NEAR", "s:a NEAR b", "NEAR at character 5 is not supported"},
		{"ADJ", "s:a ADJ b", "ADJ at character 5 is not supported"},
		{"unclosed parenthesis", "(s:a OR b", "never closed"},
		{"empty parentheses", "s:a ()", "hold nothing"},
		{"stray close", "s:a b) c", ""}, // a ')' outside parentheses is punctuation
		{"AND at the end", "s:a AND", "AND at character 5 joins nothing"},
		{"OR at the start", "OR s:a", "OR at character 1 joins nothing"},
		{"OR with a NOT side", "s:a OR -b", "only leaves messages out"},
		{"bad date", "d:someday", "d:someday at character 1: not a date"},
		{"bad date in a range", "d:20250101..soon", "not a date"},
		{"date range backwards", "d:20250102..20250101", "start is after its end"},
		{"empty range", "d:..", "needs a start, an end or both"},
		{"z without a range", "z:1000", "z: takes a range"},
		{"z not a number", "z:big..", "not a size"},
		{"short blob", "dfpre:abc", "at least 7 hexadecimal digits"},
		{"not hex", "dfblob:xyz12345", "hexadecimal"},
		{"short patch ID", "patchid:abcdef0", "at least 40"},
		{"empty message-id", `m:"<>"`, "names no Message-ID"},
		{"star on a date", "d:2025*", "a * is for words"},
		{"short prefix", "s:ab*", "at least 3 letters"},
		{"prefix with a group", "s:(a b)", "not (...)"},
		{"too deep", strings.Repeat("(", 9) + "a" + strings.Repeat(")", 9), "nested more than 8 deep"},
		{"too many parts", "s:a" + strings.Repeat(" AND m:x", 70), "more than 64 parts"},
		{"too many words", "s:a" + strings.Repeat(" b", 32), "more than 32 words"},
		{"list with no name", "s:a list:!!", "names no list"},
		{"nothing to look for", "()", "hold nothing"},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if tt.want == "" {
			if err != nil {
				t.Errorf("%s: ParseQuery(%q) = %v, want no error", tt.name, tt.q, err)
			}
			continue
		}
		if !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("%s: ParseQuery(%q) = %v, %v; want an ErrQuery saying %q", tt.name, tt.q, q, err, tt.want)
		}
	}
}

// TestDateRange: the date forms b4 and lei send, as public-inbox 1.9
// reads them (Search.pm, date_parse_prepare).
func TestDateRange(t *testing.T) {
	now := time.Date(2025, 11, 20, 15, 30, 0, 0, time.UTC)
	day := func(s string) int64 {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return d.Unix()
	}
	tests := []struct {
		name, pfx, v string
		lo, hi       int64
	}{
		{"a day is that day and the next", "d", "20250825", day("2025-08-25"), day("2025-08-27") - 1},
		{"ISO day", "d", "2025-08-25", day("2025-08-25"), day("2025-08-27") - 1},
		{"from a day", "d", "20250825..", day("2025-08-25"), maxRangeDate},
		{"up to a day, included", "d", "..20250825", minRangeDate, day("2025-08-26") - 1},
		{"days", "d", "20250825..2025-08-30", day("2025-08-25"), day("2025-08-31") - 1},
		{"weeks ago", "d", "2.weeks.ago..", now.AddDate(0, 0, -14).Unix(), maxRangeDate},
		{"approxidate makes instants", "d", "20250825..yesterday", day("2025-08-25"), now.AddDate(0, 0, -1).Unix()},
		{"one approxidate: a day from it", "d", "3.days.ago", now.AddDate(0, 0, -3).Unix(), now.AddDate(0, 0, -3).Unix() + 86400},
		{"last week", "d", "last.week..", now.AddDate(0, 0, -7).Unix(), maxRangeDate},
		{"months", "dt", "6.months.ago..now", now.AddDate(0, -6, 0).Unix(), now.Unix()},
		{"dt instants", "dt", "20250825101500..20250825120000", day("2025-08-25") + 10*3600 + 15*60, day("2025-08-25") + 12*3600},
		{"rt seconds", "rt", "1700000000..1700000100", 1700000000, 1700000100},
		{"rt day", "rt", "2025-08-25", day("2025-08-25"), day("2025-08-26")},
		{"after", "after", "2019-02", day("2019-02-01"), maxRangeDate},
		{"before", "before", "2019", minRangeDate, day("2019-01-01") - 1},
	}
	for _, tt := range tests {
		lo, hi, err := dateRange(tt.pfx, tt.v, now)
		if err != nil || lo != tt.lo || hi != tt.hi {
			t.Errorf("%s: dateRange(%s, %q) = %d, %d, %v; want %d, %d", tt.name, tt.pfx, tt.v, lo, hi, err, tt.lo, tt.hi)
		}
	}
}

// TestPatchID: patchID agrees with `git patch-id --stable`.
func TestPatchID(t *testing.T) {
	git, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	patches := []string{
		piMail[0][strings.Index(piMail[0], "\n\n")+2:],
		piMail[4][strings.Index(piMail[4], "\n\n")+2:],
		// Two files, a new one, a hunk without counts, no newline at the end.
		`Two files.
---
diff --git a/a.c b/a.c
index 1111111..2222222 100644
--- a/a.c
+++ b/a.c
@@ -1 +1 @@
-one
+uno
diff --git a/b.txt b/b.txt
new file mode 100644
index 0000000..3333333
--- /dev/null
+++ b/b.txt
@@ -0,0 +1,2 @@
+first  line
+	second line
\ No newline at end of file
`,
	}
	for i, p := range patches {
		cmd := exec.Command(git, "patch-id", "--stable")
		cmd.Stdin = strings.NewReader(p)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git patch-id: %v", err)
		}
		want, _, _ := strings.Cut(string(out), " ")
		if got := patchID(p); got != want {
			t.Errorf("patch %d: patchID = %q, git patch-id --stable = %q", i, got, want)
		}
	}
	if got := patchID("no patch here\n"); got != "" {
		t.Errorf("patchID(no patch) = %q, want \"\"", got)
	}
}

// TestSplitDiff: a patch's lines go where public-inbox's index_diff puts
// them.
func TestSplitDiff(t *testing.T) {
	rest, d := splitDiff(piMail[0][strings.Index(piMail[0], "\n\n")+2:])
	for _, tt := range []struct {
		name, got, want string
	}{
		{"removed", d.removed.String(), "\told_line_removed();\n"},
		{"added", d.added.String(), "\tnew_line_added();\n"},
		{"hunk header", d.hunks.String(), "static void r4k_flush(void)\n"},
		{"pre", d.pre.String(), "1234567\n"},
		{"post", d.post.String(), "89abcde\n"},
	} {
		if tt.got != tt.want {
			t.Errorf("splitDiff %s = %q, want %q", tt.name, tt.got, tt.want)
		}
	}
	if !strings.Contains(d.context.String(), "\tint zebra;\n") || strings.Contains(rest, "zebra") || strings.Contains(rest, "@@") {
		t.Errorf("splitDiff: context %q, rest %q; want the context lines in context only", d.context.String(), rest)
	}
	if !strings.Contains(rest, "The flush was wrong.") || !strings.Contains(rest, "diff --git a/arch/mips/mm/cache.c") {
		t.Errorf("splitDiff rest = %q, want the text and the diff --git line", rest)
	}
	if rest, d := splitDiff("no diff\n-here\n"); rest != "no diff\n-here\n" || d.removed.Len() != 0 {
		t.Errorf("splitDiff(no diff) = %q, %q", rest, d.removed.String())
	}
}

func FuzzParsePI(f *testing.F) {
	for _, s := range []string{
		`(s:"foo bar" AND f:"metze@samba.org") AND d:20250825..`,
		"s:smbdirect d:20251101..", "f:rafael", "a OR b c", "NOT a", "-(a OR b) c", "+a +b",
		"d:2.weeks.ago..", "dt:20250101000000..20250102000000", "rt:1700000000..", "z:1k..",
		"m:<x@y>", "l:linux-mips", "dfpre:1234567", "patchid:" + strings.Repeat("0", 40),
		"((a)", "a)", "s:(x)", "NEAR(a b)", "x:y", `nq:"change-id: 1"`, "dfn:a/b.c dfa:x dfb:y dfhh:z dfctx:w",
		"t:a c:b tc:c n:d q:e bs:f b:g", "list:a OR list:b", "after:2019 AND before:2020",
	} {
		f.Add(s)
	}
	c := piFixture(f)
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("ParseQuery(%q) = %v, not an ErrQuery", s, err)
			}
			return
		}
		// Every query that parses runs: no text typed reaches SQLite as
		// syntax, and every part the parser accepts has its SQL.
		if _, err := c.Search(t.Context(), q, SearchOptions{Limit: 5, CountLimit: 10}); err != nil {
			t.Fatalf("Search(%q) = %v", s, err)
		}
		// It writes back to a query that reads the same.
		again, err := ParseQuery(q.String())
		if err != nil || again.String() != q.String() {
			t.Fatalf("ParseQuery(%q).String() = %q, which parses to %v, %v", s, q.String(), again, err)
		}
	})
}

// piSearchKinds are public-inbox queries as b4 and lei send them, and
// those that read the fts_addr table or join both.
var piSearchKinds = []struct {
	name    string
	queries []string
}{
	{"b4", []string{`(s:"MIPS: fix" AND f:"ralf@linux-mips.org") AND d:20150101..`, `(nq:"change-id: 2019" OR (s:"PATCH" AND f:"macro")) AND d:..20190101`}},
	{"lei", []string{"s:mips d:20180101..", "f:ralf d:2016-01-01..2016-12-31", "s:octeon AND NOT f:ralf"}},
	{"to-cc", []string{"t:ralf", "c:linux-mips", "tc:kernel.org"}},
	{"any-address", []string{"a:ralf", "a:maciej OR a:macro"}},
	{"diff", []string{"dfb:unlikely", "dfctx:spin_lock", `dfa:"return 0"`, "dfn:Makefile"}},
	{"mixed", []string{"s:cache -t:ralf", "t:ralf OR s:tlb", "m:20190101000000.GA1234@example.org", "z:100000.."}},
}

// BenchmarkPISearch runs public-inbox's queries on the corpus catalog with
// 16 clients and reports the p50 and p99 latency of each kind, as
// BenchmarkSearch does for the archive's own.
func BenchmarkPISearch(b *testing.B) {
	c := corpusCatalog(b)
	for _, k := range piSearchKinds {
		b.Run(k.name, func(b *testing.B) {
			p50, p99 := searchLatency(b, c, k.queries, 16, max(b.N, 16))
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p99, "p99-ms")
		})
	}
}
