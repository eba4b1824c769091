package catalog

import (
	"database/sql"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mailview"
)

// searchFixture is a catalog of fixtures/search/search.mbox, whose
// messages are labelled s1..s7 by their Message-IDs.
func searchFixture(t testing.TB) (*archive, *Catalog) {
	t.Helper()
	a := newArchive(t)
	a.load(fixture("../search/search.mbox"), "")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	return a, c
}

// labels returns the Message-ID labels of messages.
func labels(ms []Message) []string {
	out := []string{}
	for _, m := range ms {
		l, _, _ := strings.Cut(m.MessageID, "@")
		out = append(out, l)
	}
	return out
}

func TestSearch(t *testing.T) {
	_, c := searchFixture(t)
	tests := []struct {
		q    string
		want []string // newest first
	}{
		{"cache", []string{"s2", "s7", "s6", "s1"}},
		{"CACHE", []string{"s2", "s7", "s6", "s1"}},
		{"indy cache", []string{"s7", "s1"}},
		{`"secondary cache"`, []string{"s7"}},
		{`"cache secondary"`, []string{}},
		{"r4k_cache", []string{"s2", "s1"}}, // the phrase "r4k cache"
		{"from:ralf", []string{"s1"}},
		{`from:"Maciej W."`, []string{"s2"}},
		{"from:linux-mips.org", []string{"s2", "s1"}},
		{"from:joerg@example.de", []string{"s3"}},
		{"FROM:jörg", []string{"s3"}},
		{"subject:panic", []string{"s4"}},
		{"subject:cache -from:ralf", []string{"s2", "s7"}},
		{"list:cake.lists.example.org", []string{"s3"}},
		{"list:Cake.Lists.Example.Org indy", []string{"s3"}},
		{"list:nope cache", []string{}},
		{"after:2019-02", []string{"s4", "s3"}},
		{"before:2019", []string{"s5"}},
		{"after:2019-01-16 before:2019-01-18", []string{"s7", "s6"}},
		{"cache after:2019-01-16 before:2019-01-18", []string{"s7", "s6"}},
		{"café", []string{"s3"}},
		{"cafe", []string{"s3"}},       // accents do not matter
		{"resume", []string{"s3"}},     // résumé, quoted-printable Latin-1
		{"gerat", []string{"s4"}},      // Gerät, base64 UTF-8
		{"großer", []string{"s4"}},     // ß is a letter of its own
		{"bootloader", []string{"s5"}}, // HTML only
		{"steal", []string{}},          // inside <script>: not text
		{"refill", []string{"s2", "s1"}},
		{"-cache indy", []string{"s3"}},
		{"list:linux-mips.vger.kernel.org -cache", []string{"s4", "s5"}},
		{"xss alert", []string{"s6"}},
		{"and or not", []string{}}, // lower case: words
		{`"AND" "OR"`, []string{}}, // in quotes too
		{"'; DROP TABLE messages; --", []string{}},
		// OR.
		{"panic OR bootloader", []string{"s4", "s5"}},
		{"indy OR panic cache", []string{"s7", "s1"}},              // (indy or panic) and cache
		{"subject:panic OR from:ralf", []string{"s4", "s1"}},       // fields too
		{"panic OR bootloader OR xss", []string{"s4", "s6", "s5"}}, // three
		{"panic OR bootloader -boot*", []string{}},
		{`"secondary cache" OR café`, []string{"s3", "s7"}},
		// Prefixes.
		{"boot*", []string{"s4", "s5"}},  // boot, bootloader
		{"flush*", []string{"s2", "s1"}}, // flush, flushes
		{"FLUSH**", []string{"s2", "s1"}},
		{"caf*", []string{"s3"}}, // café
		{"subject:pan*", []string{"s4"}},
		{"from:mac*", []string{"s2"}},
		{"-flush* indy", []string{"s3", "s7"}},
		{`"secondary cac"*`, []string{"s7"}},
		{"r4k_cac*", []string{"s2", "s1"}}, // the phrase "r4k cac..."
		{"list:linux-mips.vger.kernel.org -boot*", []string{"s2", "s7", "s6", "s1"}},
		// Dates: bounds past the years a message can have are no bound,
		// and a year before 1970 is 1970-01-01.
		{"before:2243", []string{"s4", "s3", "s2", "s7", "s6", "s1", "s5"}},
		{"before:9999-12-31", []string{"s4", "s3", "s2", "s7", "s6", "s1", "s5"}},
		{"indy before:9999", []string{"s3", "s7", "s1"}},
		{"after:2243", []string{}},
		{"after:9999 cache", []string{}},
		{"cache after:1000", []string{"s2", "s7", "s6", "s1"}},
		{"after:0001", []string{"s4", "s3", "s2", "s7", "s6", "s1", "s5"}},
		{"after:0000 before:2019", []string{"s5"}},
		{"after:1969 indy", []string{"s3", "s7", "s1"}},
		{"before:1969", []string{}},
		{"before:1970 cache", []string{}},
		{"after:1000 before:1970", []string{}},
		// public-inbox's AND and NOT.
		{"cache AND indy", []string{"s7", "s1"}},
		{"NOT cache", []string{"s4", "s3", "s5"}},
		{"NOT cache indy", []string{"s4", "s3", "s2", "s6", "s5"}}, // NOT (cache indy), as Xapian reads it
		{"indy NOT cache", []string{"s3"}},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Errorf("ParseQuery(%q) = %v", tt.q, err)
			continue
		}
		res, err := c.Search(t.Context(), q, SearchOptions{Limit: 100})
		if err != nil {
			t.Errorf("Search(%q) = %v", tt.q, err)
			continue
		}
		if got := labels(res.Messages); !slices.Equal(got, tt.want) || res.Total != len(tt.want) || res.More {
			t.Errorf("Search(%q) = %v (total %d, more %v), want %v", tt.q, got, res.Total, res.More, tt.want)
		}
		// A count that stops early says so, and still returns the page.
		for limit := 1; limit <= 3; limit++ {
			res, err := c.Search(t.Context(), q, SearchOptions{Limit: 100, CountLimit: limit})
			wantTotal, wantMore := min(len(tt.want), limit), len(tt.want) > limit
			if err != nil || res.Total != wantTotal || res.More != wantMore || !slices.Equal(labels(res.Messages), tt.want) {
				t.Errorf("Search(%q, count limit %d) = %v (total %d, more %v), %v; want %v (total %d, more %v)",
					tt.q, limit, labels(res.Messages), res.Total, res.More, err, tt.want, wantTotal, wantMore)
			}
		}
	}
	if s, err := c.Stats(t.Context()); err != nil || s.Messages != 7 {
		t.Fatalf("Stats = %+v, %v; want 7 messages (tables intact)", s, err)
	}
}

func TestSearchRelevanceAndPaging(t *testing.T) {
	_, c := searchFixture(t)
	q, _ := ParseQuery("refill")
	res, err := c.Search(t.Context(), q, SearchOptions{Sort: Relevance, Limit: 10})
	// s1 says it; s2 only quotes it.
	if err != nil || !slices.Equal(labels(res.Messages), []string{"s1", "s2"}) {
		t.Errorf("Search(refill, relevance) = %v, %v; want [s1 s2]", labels(res.Messages), err)
	}
	q, _ = ParseQuery("cache")
	res, err = c.Search(t.Context(), q, SearchOptions{Sort: Relevance, Limit: 10})
	// A subject match ranks above a match in the text alone.
	if err != nil || len(res.Messages) != 4 || labels(res.Messages)[3] != "s6" {
		t.Errorf("Search(cache, relevance) = %v, %v; want s6 (text only) last", labels(res.Messages), err)
	}
	var got []string
	for off := 0; off < 4; off += 3 {
		res, err := c.Search(t.Context(), q, SearchOptions{Sort: Newest, Offset: off, Limit: 3})
		if err != nil || res.Total != 4 {
			t.Fatalf("Search(cache, offset %d) = total %d, %v; want 4", off, res.Total, err)
		}
		got = append(got, labels(res.Messages)...)
	}
	if want := []string{"s2", "s7", "s6", "s1"}; !slices.Equal(got, want) {
		t.Errorf("Search(cache) in pages of 3 = %v, want %v", got, want)
	}
}

func TestParseQueryErrors(t *testing.T) {
	tests := []struct {
		q    string
		want string // in the error
	}{
		{`"unclosed phrase`, "never closed"},
		{`a"b`, "inside a word"},
		{strings.Repeat("x", 10000), "10000 bytes"},
		{"after:2019-13", "not a date"},
		{"before:yesterday", "not a date"},
		{"after:10000", "not a date"},
		{"", "type a word"},
		{"   \t ", "type a word"},
		{"-list:cake", "not supported"},
		{"-after:2019 x", "makes no sense"},
		{"after:2020 before:2019", "nothing can match"},
		{"after:2019 before:2019-01-01", "nothing can match"},
		{strings.Repeat("w ", 33), "more than 32"},
		{`from:"  "`, "no letter or digit"},
		{"list:!!!", "names no list"},
		{"\xff\xfe", "UTF-8"},
		// Another engine's syntax: said so, not read as words.
		{"OR crashes", "OR at character 1 joins nothing"},
		{"bugs OR", "OR at character 6 joins nothing"},
		{"bugs OR OR crashes", "OR at character 9 joins nothing"},
		{"-bugs OR crashes", "OR at character 7 joins nothing"},
		{"bugs OR -crashes", "cannot be one of two alternatives"},
		{"bugs OR list:x", "cannot be one of two alternatives"},
		{"dfn:setup*", "dfn: takes a path"},
		{"body:indy", "body: at character 1 is not a search prefix"},
		{"cache AND", "AND at character 7 joins nothing"},
		{"cache XOR tlb", "XOR at character 7 is not supported"},
		{"indy NEAR cache", "put words in quotes"},
		{"NEAR(indy cache)", "NEAR(...) is not supported"},
		{"NEAR(indy cache, 5)", "NEAR(...) is not supported"},
		{"^cache", "^ (a word at the start) is not supported"},
		{"subject:^linux", "subject:word"},
		{"-^cache x", "^ (a word"},
		// Prefixes need 3 letters or digits.
		{"ca*", "at least 3 letters or digits before the *"},
		{"r4k_ca*", "at least 3"},
		{`"secondary c"*`, "at least 3"},
		{"from:ra*", "at least 3"},
		{"list:linux*", "a * is for words"},
		{"after:2019*", "a * is for words"},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%.40q) = %v, %v; want an ErrQuery saying %q", tt.q, q, err, tt.want)
		}
	}
	// Punctuation alone among words is skipped, not an error; so is a
	// star alone.
	for _, s := range []string{"cache -- !!", "cache * **", "cache ^"} {
		q, err := ParseQuery(s)
		if err != nil || len(q.Terms) != 1 {
			t.Errorf("ParseQuery(%q) = %+v, %v; want one term", s, q, err)
		}
	}
}

// TestParseQueryErrorText: an error shows the piece of the search as it
// was typed and where it is in characters, not bytes.
func TestParseQueryErrorText(t *testing.T) {
	tests := []struct {
		q, want string
	}{
		{`from:""`, `bad search: from:"" at character 1 has no letter or digit to look for`},
		{`café subject:"  "`, `bad search: subject:"  " at character 6 has no letter or digit to look for`},
		{`é "unclosed`, "bad search: the quote at character 3 is never closed"},
		{`éé a"b`, `bad search: a quote at character 5 inside a word; put phrases in quotes: "like this"`},
		{"über ca*", "bad search: ca* at character 6: give at least 3 letters or digits before the * (a shorter start matches too many words)"},
		{"ça OR", `bad search: OR at character 4 joins nothing: write it between two words (bugs OR crashes)`},
		{"list:ÜÏ!", "bad search: list:ÜÏ! names no list (list names are letters, digits, '.', '_' and '-')"},
		{"after:2020 before:2019-06", "bad search: after:2020 is not before before:2019-06, so nothing can match"},
		{"before:2019-6", "bad search: before:2019-6: not a date: write 2019, 2019-02 or 2019-02-03"},
	}
	for _, tt := range tests {
		_, err := ParseQuery(tt.q)
		if err == nil || err.Error() != tt.want {
			t.Errorf("ParseQuery(%q) = %v,\nwant %s", tt.q, err, tt.want)
		}
	}
}

// TestParseQueryDates: dates are kept as typed, the year 0001 included
// (the zero time.Time, which is a bound all the same).
func TestParseQueryDates(t *testing.T) {
	tests := []struct {
		q             string
		after, before string // "" for no bound
	}{
		{"after:0001", "0001-01-01", ""},
		{"after:0000-02", "0000-02-01", ""},
		{"before:9999-12-31", "", "9999-12-31"},
		{"x after:1969 before:2243", "1969-01-01", "2243-01-01"},
		{"x", "", ""},
	}
	show := func(d *time.Time) string {
		if d == nil {
			return ""
		}
		return d.Format(time.DateOnly)
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Errorf("ParseQuery(%q) = %v", tt.q, err)
			continue
		}
		if a, b := show(q.After), show(q.Before); a != tt.after || b != tt.before {
			t.Errorf("ParseQuery(%q) = after %q, before %q; want %q, %q", tt.q, a, b, tt.after, tt.before)
		}
	}
}

// TestQueryDates: a search's dates are the seconds from the start of
// after:'s day up to the start of before:'s, whatever the dates.
func TestQueryDates(t *testing.T) {
	date := func(s string) *time.Time {
		d, err := time.Parse(time.DateOnly, s)
		if err != nil {
			t.Fatal(err)
		}
		return &d
	}
	tests := []struct {
		name          string
		after, before *time.Time
		lo, hi        int64
	}{
		{"no bounds", nil, nil, math.MinInt64, math.MaxInt64},
		{"2019", date("2019-01-01"), date("2020-01-01"), date("2019-01-01").Unix(), date("2020-01-01").Unix() - 1},
		{"before 1970", date("1000-01-01"), date("1969-01-01"), date("1000-01-01").Unix(), date("1969-01-01").Unix() - 1},
		{"far ahead", date("2243-01-01"), date("9999-12-31"), date("2243-01-01").Unix(), date("9999-12-31").Unix() - 1},
	}
	for _, tt := range tests {
		q := &Query{After: tt.after, Before: tt.before}
		if lo, hi := q.dates(); lo != tt.lo || hi != tt.hi {
			t.Errorf("%s: dates() = %d, %d; want %d, %d", tt.name, lo, hi, tt.lo, tt.hi)
		}
	}
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery(`Indy "secondary cache" -panic from:"Ralf B" subject:tlb list:linux-mips after:2019 before:2019-02-03 "foo:bar"`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Term{
		{Text: "Indy"},
		{Text: "secondary cache", Phrase: true},
		{Text: "panic", Negated: true},
		{Text: "Ralf B", Phrase: true, Field: "from"},
		{Text: "tlb", Field: "subject"},
		{Text: "foo:bar", Phrase: true},
	}
	if !slices.Equal(q.Terms, want) || !slices.Equal(q.Lists, []string{"linux-mips"}) || q.After == nil || q.Before == nil ||
		!q.After.Equal(time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)) || !q.Before.Equal(time.Date(2019, 2, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseQuery = %+v", q)
	}
	if got, want := q.String(), `Indy "secondary cache" -panic from:"Ralf B" subject:tlb "foo:bar" list:linux-mips after:2019-01-01 before:2019-02-03`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := q.Words(), []string{"indy", "secondary", "cache", "ralf", "b", "tlb", "foo", "bar"}; !slices.Equal(got, want) {
		t.Errorf("Words() = %q, want %q", got, want)
	}
	if got, want := q.match(), `("Indy" AND "secondary cache" AND sender : "Ralf B" AND subject : "tlb" AND "foo:bar") NOT "panic"`; got != want {
		t.Errorf("match() = %s, want %s", got, want)
	}
}

// TestParsePrefix: word* is a prefix search, written back as typed, sent
// to FTS5 as a prefix string and marked in excerpts as a prefix.
func TestParsePrefix(t *testing.T) {
	q, err := ParseQuery(`flush** -subject:tlb* "secondary cac"* from:Mac*`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Term{
		{Text: "flush", Prefix: true},
		{Text: "tlb", Field: "subject", Negated: true, Prefix: true},
		{Text: "secondary cac", Phrase: true, Prefix: true},
		{Text: "Mac", Field: "from", Prefix: true},
	}
	if !slices.Equal(q.Terms, want) {
		t.Errorf("ParseQuery terms = %+v, want %+v", q.Terms, want)
	}
	if got, want := q.String(), `flush* -subject:tlb* "secondary cac"* from:Mac*`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := q.match(), `("flush" * AND "secondary cac" * AND sender : "Mac" *) NOT subject : "tlb" *`; got != want {
		t.Errorf("match() = %s, want %s", got, want)
	}
	if got, want := q.Words(), []string{"flush*", "secondary", "cac*", "mac*"}; !slices.Equal(got, want) {
		t.Errorf("Words() = %q, want %q", got, want)
	}
	var marked []string
	for _, f := range Excerpt("The flushes of the secondary cache.\nflush! Flush it. unflush, reflush.\n", q.Words(), 200) {
		if f.Match {
			marked = append(marked, f.Text)
		}
	}
	if want := []string{"flushes", "secondary", "cache", "flush", "Flush"}; !slices.Equal(marked, want) {
		t.Errorf("Excerpt marks %q, want %q", marked, want)
	}
	// The first line that has a word that starts with the prefix: the
	// ASCII byte search and the tokenizing one agree.
	text := "nothing here\n> a quoted flushing\nunflush then reflush\nflushed é\n"
	for _, words := range [][]string{{"flush*"}, {"flush*", "é"}} {
		if at, want := firstMatch(text, newWordSet(words)), strings.Index(text, "flushed"); at != want {
			t.Errorf("firstMatch(%q) = %d, want %d", words, at, want)
		}
	}
}

func TestExcerpt(t *testing.T) {
	text := "Hello.\n> the Indy cache was quoted\n\nThe Indy has a 1 MB secondary Cache, café.\n" + strings.Repeat("filler ", 100)
	fr := Excerpt(text, []string{"cache", "cafe"}, 60)
	var all strings.Builder
	var marked []string
	for _, f := range fr {
		all.WriteString(f.Text)
		if f.Match {
			marked = append(marked, f.Text)
		}
	}
	// The unquoted line wins over the quoted one.
	if !strings.Contains(all.String(), "secondary Cache, café") || !slices.Equal(marked, []string{"Cache", "café"}) {
		t.Errorf("Excerpt = %q, marked %q; want the unquoted line with Cache and café marked", all.String(), marked)
	}
	if !strings.HasSuffix(all.String(), " …") || len(all.String()) > 80 {
		t.Errorf("Excerpt = %q (%d bytes): want about 60 bytes, cut with an ellipsis", all.String(), len(all.String()))
	}
	// Whole words only, as the index matches them: not "cacheline", but
	// "r4k_cache".
	fr = Excerpt("the cacheline is 32 bytes.\nthe r4k_cache code.\n", []string{"cache"}, 200)
	var got []string
	for _, f := range fr {
		if f.Match {
			got = append(got, f.Text)
		}
	}
	if all := fmt.Sprint(fr); !slices.Equal(got, []string{"cache"}) || !strings.Contains(all, "r4k_") {
		t.Errorf("Excerpt(cacheline, r4k_cache) = %+v; want r4k_cache's cache marked only", fr)
	}
	if at := firstMatch("the cacheline is 32 bytes.\nthe r4k_cache code.\n", newWordSet([]string{"cache"})); at != 35 {
		t.Errorf("firstMatch = %d, want 35 (cache in r4k_cache)", at)
	}
	// Nothing matches: the start of the text.
	fr = Excerpt("first words here", []string{"absent"}, 100)
	if len(fr) != 1 || fr[0].Text != "first words here" || fr[0].Match {
		t.Errorf("Excerpt(no match) = %+v", fr)
	}
	// A cut never splits a UTF-8 sequence.
	fr = Excerpt(strings.Repeat("é", 100)+" word", []string{"word"}, 11)
	for _, f := range fr {
		if !strings.Contains(f.Text, "…") && strings.ContainsRune(f.Text, '\uFFFD') {
			t.Errorf("Excerpt split a character: %q", f.Text)
		}
	}
}

// TestSearchWhileFollowing: a message is findable as soon as the catalog
// has it, and searching while the follower writes never fails.
func TestSearchWhileFollowing(t *testing.T) {
	a, c := searchFixture(t)
	q, _ := ParseQuery("pfzxqj")
	var wg sync.WaitGroup
	stop := make(chan struct{})
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := c.Search(t.Context(), q, SearchOptions{Limit: 10}); err != nil {
				t.Errorf("Search during writes = %v", err)
				return
			}
		}
	})
	for i := range 20 {
		a.put([]byte("Subject: word "+strings.Repeat("x", i)+"\nMessage-ID: <w"+strings.Repeat("x", i)+"@example.org>\n\npfzxqj\n"), "")
		mustSync(t, c, a.st)
	}
	close(stop)
	wg.Wait()
	res, err := c.Search(t.Context(), q, SearchOptions{Limit: 100})
	if err != nil || res.Total != 20 {
		t.Errorf("Search(new word) = %d, %v; want 20", res.Total, err)
	}
}

func FuzzParseQuery(f *testing.F) {
	for _, s := range []string{"cache", `"a b" -c from:x subject:"y z" list:l after:2019 before:2019-02-03`, `"`, "-", "--x", `from:""`, "after:", "a:b:c", "\x00", "é -é",
		"cach*", "ca*", `"a bcd"*`, "-from:abc**", "*", "NEAR(a b)", "a OR b", "^a", "after:0001", "before:9999 x"} {
		f.Add(s)
	}
	_, c := searchFixture(f)
	f.Fuzz(func(t *testing.T, s string) {
		q, err := ParseQuery(s)
		if err != nil {
			if !errors.Is(err, ErrQuery) {
				t.Fatalf("ParseQuery(%q) = %v, not an ErrQuery", s, err)
			}
			return
		}
		// Every query that parses runs: no text a reader types reaches
		// SQLite as FTS5 syntax.
		if _, err := c.Search(t.Context(), q, SearchOptions{Limit: 5}); err != nil {
			t.Fatalf("Search(%q) = %v", s, err)
		}
		if _, err := c.Search(t.Context(), q, SearchOptions{Sort: Relevance, Limit: 5}); err != nil {
			t.Fatalf("Search(%q, relevance) = %v", s, err)
		}
		// And it writes back to itself.
		again, err := ParseQuery(q.String())
		if err != nil || again.String() != q.String() {
			t.Fatalf("ParseQuery(%q).String() = %q, which parses to %v, %v", s, q.String(), again, err)
		}
	})
}

// TestSearchEnclosed: the text of an enclosed message (a list's DMARC
// wrapping puts the whole message there) is searched.
func TestSearchEnclosed(t *testing.T) {
	a := newArchive(t)
	raw, err := os.ReadFile(filepath.Join("..", "fixtures", "web", "dmarc.eml"))
	if err != nil {
		t.Fatal(err)
	}
	a.put(raw, "")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	q, err := ParseQuery("sprockets three")
	if err != nil {
		t.Fatal(err)
	}
	res, err := c.Search(t.Context(), q, SearchOptions{Limit: 10})
	if err != nil || res.Total != 1 || labels(res.Messages)[0] != "wrapper-1" {
		t.Errorf("Search(the enclosed message's words) = %+v, %v; want the wrapper", res, err)
	}
}

// TestText: HTML-only mail is searched by its text, without what the
// sanitizer drops; quoted lines are kept apart for the index.
func TestText(t *testing.T) {
	raws := readMbox(t, fixture("../search/search.mbox"))
	html := Text(mailview.Parse(raws[4], mailview.Options{}))
	if !strings.Contains(html, "bootloader") || strings.Contains(html, "steal") || strings.Contains(html, "<b>") {
		t.Errorf("Text(HTML only) = %q: want the words, without the script or tags", html)
	}
	body, quoted := indexText(mailview.Parse(raws[1], mailview.Options{}))
	if !strings.Contains(quoted, "TLB refill") || strings.Contains(body, "TLB refill") || !strings.Contains(body, "DECstation") {
		t.Errorf("indexText(reply) = body %q, quoted %q: want the quoted line apart", body, quoted)
	}
}

// TestSearchPlan: a search with a list filter is driven by the index's
// matches, each message looked up by its label; not by the list's
// messages, each asked of the index (a search of the whole list, seconds
// on a large one where the words alone take milliseconds).
func TestSearchPlan(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	// Indexed in two rounds, so that the index holds late labels too
	// (labels.go), which a search reads by a query of their own.
	for round := range 2 {
		for i := range 50 {
			// The second round's all between the first two of the first:
			// more than the gap between their labels holds.
			date := time.Date(2024, 1, 1, 10, i, 0, 0, time.UTC)
			if round == 1 {
				date = time.Date(2024, 1, 1, 10, 0, 1+i%50, 0, time.UTC)
			}
			a.put([]byte(fmt.Sprintf("From: A <a%d@example.org>\nSubject: cache %d\nMessage-ID: <p%d.%d@example.org>\nDate: %s\n\nflush the cache\n", i, i, round, i, date.Format(time.RFC1123Z))), []string{"l", "m"}[i%2])
		}
		mustSync(t, c, a.st)
	}
	var late int
	if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM messages WHERE label >= ?`, lateLabel(0, 0)).Scan(&late); err != nil || late == 0 {
		t.Fatalf("%d messages with late labels, %v: the test needs some", late, err)
	}
	for _, text := range []string{"cache flush list:l", "from:a1@example.org list:l", "f:a1@example.org list:l", "t:x list:l", "cache list:l list:m"} {
		q, err := ParseQuery(text)
		if err != nil {
			t.Fatal(err)
		}
		tx, err := c.r.BeginTx(t.Context(), &sql.TxOptions{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		count, countArgs, page, pageArgs, err := searchSQL(t.Context(), tx, q, SearchOptions{Limit: 20, CountLimit: 1000})
		if err != nil {
			t.Fatal(err)
		}
		for i, s := range []struct {
			sql  string
			args []any
		}{{count, countArgs}, {page, pageArgs}} {
			rows, err := tx.QueryContext(t.Context(), "EXPLAIN QUERY PLAN "+s.sql, s.args...)
			if err != nil {
				t.Fatal(err)
			}
			var plan []string
			for rows.Next() {
				var id, parent, notused int
				var detail string
				if err := rows.Scan(&id, &parent, &notused, &detail); err != nil {
					t.Fatal(err)
				}
				plan = append(plan, detail)
			}
			rows.Close()
			// The messages are read by their labels, one for each match
			// of the index (with a list:, by label and list, from
			// messages_label_list alone in a count): never by their list
			// or date, the index then asked of each.
			for _, step := range plan {
				if (strings.HasPrefix(step, "SEARCH m ") || strings.HasPrefix(step, "SCAN m")) && !strings.Contains(step, "(label=?)") && !strings.Contains(step, "(label=? AND list=?)") {
					t.Errorf("%q: the plan reads the messages by %q, not by the index's matches:\n%s", text, step, strings.Join(plan, "\n"))
				}
			}
			// The count of a search of lists never reads a message's row.
			if i == 0 && !slices.ContainsFunc(plan, func(step string) bool {
				return strings.HasPrefix(step, "SEARCH m USING COVERING INDEX messages_label_list ")
			}) {
				t.Errorf("%q: the count does not read messages_label_list alone:\n%s", text, strings.Join(plan, "\n"))
			}
		}
		tx.Rollback()
	}
}
