package resolver

import (
	"html"
	"html/template"
	"strings"
	"testing"

	xhtml "golang.org/x/net/html"

	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/internal/testkit/htmlcheck"
	"github.com/chibrary/chibrary/mailview"
)

// renderText is writeText into a string.
func renderText(s string, o textOptions) template.HTML {
	var b strings.Builder
	writeText(&b, s, o)
	return template.HTML(b.String())
}

func TestRenderText(t *testing.T) {
	tests := []struct {
		name   string
		in     string
		fold   int
		has    []string
		hasNot []string
	}{
		{"escaped", "a <b> & \"c\"\n", 0, []string{`<pre>a &lt;b&gt; &amp; &#34;c&#34;` + "\n</pre>"}, []string{"<b>"}},
		{"link", "see https://example.org/a?b=1&c=2.\n", 0,
			[]string{`see <a href="https://example.org/a?b=1&amp;c=2" rel="nofollow noopener noreferrer">https://example.org/a?b=1&amp;c=2</a>.`}, nil},
		{"http and case", "HTTP://Example.org/X\n", 0, []string{`<a href="http://Example.org/X" rel="nofollow noopener noreferrer">HTTP://Example.org/X</a>`}, nil},
		{"in parentheses", "(see https://example.org/wiki/A_(b))\n", 0, []string{`href="https://example.org/wiki/A_(b)"`, `</a>)`}, nil},
		{"in angle brackets", "<https://example.org/x>\n", 0, []string{`&lt;<a href="https://example.org/x" rel="nofollow noopener noreferrer">https://example.org/x</a>&gt;`}, nil},
		{"no host", "https:/x and https:// and http://:80/ and https://user@evil.example/\n", 0, nil, []string{"<a "}},
		{"not a word inside", "xhttps://example.org\n", 0, nil, []string{"<a "}},
		{"script url in query", "https://example.org/?q=javascript:alert(1)\n", 0, nil, []string{"<a "}},
		{"quote levels", "hi\n> one\n> > two\n>>> three\n>>>>> five\nback\n", 0, []string{
			"<pre>hi\n</pre>", `<pre class="q q1">&gt; one` + "\n</pre>", `<pre class="q q2">&gt; &gt; two`, `<pre class="q q3">&gt;&gt;&gt; three`,
			`<pre class="q q4">&gt;&gt;&gt;&gt;&gt; five`, "<pre>back\n</pre>"}, nil},
		{"signature", "text\n-- \nSig Nature\n> not a quote level in a sig? still quoted\n", 0, []string{"<pre>text\n</pre>", `<pre class="sig">-- ` + "\nSig Nature\n</pre>"}, nil},
		{"fold", "x\n> 1\n> 2\n> 3\n> 4\ny\n", 3, []string{`<details class="quote"><summary>4 quoted lines</summary><pre class="q q1">`}, nil},
		{"no fold when short", "x\n> 1\n> 2\ny\n", 3, nil, []string{"<details"}},
		{"no final newline", "last", 0, []string{"<pre>last</pre>"}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := string(renderText(tt.in, textOptions{Fold: tt.fold}))
			for _, s := range tt.has {
				if !strings.Contains(got, s) {
					t.Errorf("renderText(%q) = %s\nwant it to contain %s", tt.in, got, s)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(got, s) {
					t.Errorf("renderText(%q) = %s\nwant no %s", tt.in, got, s)
				}
			}
			checkRendered(t, tt.in, got, tt.fold > 0)
		})
	}
}

// checkRendered checks renderText's output: nothing executable or remote
// but http(s) links, and, without folding, exactly the input as its
// text.
func checkRendered(t *testing.T, in, out string, folded bool) {
	t.Helper()
	if err := htmlcheck.Check(out, htmlcheck.Options{}); err != nil {
		t.Fatalf("renderText(%q) is unsafe: %v\n%s", in, err, out)
	}
	if folded {
		return
	}
	var text strings.Builder
	z := xhtml.NewTokenizer(strings.NewReader(out))
	for tt := z.Next(); tt != xhtml.ErrorToken; tt = z.Next() {
		if tt == xhtml.TextToken {
			text.WriteString(html.UnescapeString(string(z.Raw())))
		}
	}
	if text.String() != in {
		t.Fatalf("renderText(%q) shows the text %q", in, text.String())
	}
}

// FuzzRenderText: whatever the text, the HTML is safe and shows exactly
// that text.
func FuzzRenderText(f *testing.F) {
	for _, s := range []string{
		"plain\n", "it's <a> & \"b\"\n", "> q\n>> qq\n", "see https://example.org/x_(y).\n", "-- \nsig\n", "<script>alert(1)</script>\n",
		"https://a.example/?q=\"><script>\n", "http://[::1]:80/\n", "https://example.org\u00a0next\n",
		"diff --git a/x b/x\n--- a/x\n+++ b/x\n@@ -1,2 +1,2 @@\n-<b>\n+https://example.org/\n \n-- \n2.39\n",
		"--- a\n+++ b\n@@ garbled @@\n+> quoted\n-- \n",
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		// renderText gets mailview's cleaned text: valid UTF-8, no control
		// characters but newline and tab.
		s = strings.ToValidUTF8(s, "\uFFFD")
		s = strings.Map(func(r rune) rune {
			if r < 0x20 && r != '\n' && r != '\t' || r == 0x7f {
				return -1
			}
			return r
		}, s)
		checkRendered(t, s, string(renderText(s, textOptions{})), false)
		var b strings.Builder
		if escape(&b, s); b.String() != html.EscapeString(s) {
			t.Fatalf("escape(%q) = %q, html.EscapeString gives %q", s, b.String(), html.EscapeString(s))
		}
		if err := htmlcheck.Check(string(renderText(s, textOptions{Fold: 2})), htmlcheck.Options{}); err != nil {
			t.Fatalf("folded renderText(%q) is unsafe: %v", s, err)
		}
	})
}

// TestBigPatchBounded: a patch of 40 MB is coloured in its first 2 MiB
// only, and its diffstat counts what was read there.
func TestBigPatchBounded(t *testing.T) {
	m := hostile.BigPatch(hostile.BigPatchSize)
	v := mailview.Parse(m.Raw(), mailview.Options{})
	text := v.Parts[0].Text
	out := string(renderText(text, textOptions{}))
	const line = "+\tadded_line"
	added := strings.Count(out, `<span class="da">`)
	if max := maxDiffBytes / (len(line) + 10); added == 0 || added > max {
		t.Errorf("%d added lines coloured of a %d-byte text, want some and at most %d (the first %d bytes)", added, len(text), max, maxDiffBytes)
	}
	ds := diffstatOf(v)
	if ds == nil || ds.Changed != 1 || !ds.Truncated || ds.Added != added || ds.Files[0].Path != "drivers/big.c" {
		t.Errorf("diffstat = %+v, want one file, truncated, %d lines added", ds, added)
	}
}
