package catalog

import (
	"errors"
	"fmt"
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
		{"AND OR NOT", []string{}}, // words, not operators
		{"NEAR(indy cache)", []string{}},
		{"'; DROP TABLE messages; --", []string{}},
		{"body:indy", []string{}}, // not an operator: the phrase "body indy"
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
		{"", "type a word"},
		{"   \t ", "type a word"},
		{"-list:cake", "not supported"},
		{"-after:2019 x", "makes no sense"},
		{"after:2020 before:2019", "nothing can match"},
		{strings.Repeat("w ", 33), "more than 32"},
		{`from:"  "`, "no letter or digit"},
		{"list:!!!", "names no list"},
		{"\xff\xfe", "UTF-8"},
	}
	for _, tt := range tests {
		q, err := ParseQuery(tt.q)
		if !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("ParseQuery(%.40q) = %v, %v; want an ErrQuery saying %q", tt.q, q, err, tt.want)
		}
	}
	// Punctuation alone among words is skipped, not an error.
	q, err := ParseQuery("cache -- !!")
	if err != nil || len(q.Terms) != 1 {
		t.Errorf("ParseQuery(punctuation) = %+v, %v; want one term", q, err)
	}
}

func TestParseQuery(t *testing.T) {
	q, err := ParseQuery(`Indy "secondary cache" -panic from:"Ralf B" subject:tlb list:linux-mips after:2019 before:2019-02-03 foo:bar`)
	if err != nil {
		t.Fatal(err)
	}
	want := []Term{
		{Text: "Indy"},
		{Text: "secondary cache", Phrase: true},
		{Text: "panic", Negated: true},
		{Text: "Ralf B", Phrase: true, Field: "from"},
		{Text: "tlb", Field: "subject"},
		{Text: "foo:bar"},
	}
	if !slices.Equal(q.Terms, want) || !slices.Equal(q.Lists, []string{"linux-mips"}) ||
		!q.After.Equal(time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)) || !q.Before.Equal(time.Date(2019, 2, 3, 0, 0, 0, 0, time.UTC)) {
		t.Errorf("ParseQuery = %+v", q)
	}
	if got, want := q.String(), `Indy "secondary cache" -panic from:"Ralf B" subject:tlb foo:bar list:linux-mips after:2019-01-01 before:2019-02-03`; got != want {
		t.Errorf("String() = %q, want %q", got, want)
	}
	if got, want := q.Words(), []string{"indy", "secondary", "cache", "ralf", "b", "tlb", "foo", "bar"}; !slices.Equal(got, want) {
		t.Errorf("Words() = %q, want %q", got, want)
	}
	if got, want := q.match(), `("Indy" AND "secondary cache" AND sender : "Ralf B" AND subject : "tlb" AND "foo:bar") NOT "panic"`; got != want {
		t.Errorf("match() = %s, want %s", got, want)
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
	if at := firstMatch("the cacheline is 32 bytes.\nthe r4k_cache code.\n", []string{"cache"}, map[string]bool{"cache": true}); at != 35 {
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
	for _, s := range []string{"cache", `"a b" -c from:x subject:"y z" list:l after:2019 before:2019-02-03`, `"`, "-", "--x", `from:""`, "after:", "a:b:c", "\x00", "é -é"} {
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
