package resolver

import (
	"reflect"
	"testing"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// wholeExcerpt is the excerpt of raw cut from all of its first
// excerptTextBytes of text: what cutExcerpt must give while decoding less.
func wholeExcerpt(raw []byte, words []string) ([]catalog.Fragment, string) {
	mv := mailview.Parse(raw, mailview.Options{TextOnly: true, SkipAttachments: true, MaxTextBytes: excerptTextBytes})
	text := catalog.Text(mv)
	return catalog.Excerpt(text, words, excerptBytes), text
}

// TestCutExcerptCorpus checks, on every message of the shared corpus of
// real mail (20 charsets, quoted-printable, base64, HTML), that an
// excerpt that stops decoding at the first match is the excerpt of the
// whole text, and counts how often it stopped early.
func TestCutExcerptCorpus(t *testing.T) {
	msgs := readCorpus(t, 0)
	queries := [][]string{{"cache"}, {"kernel"}, {"thanks"}, {"tlb"}, {"signed", "off"}, {"patch*"}, {"the"}}
	stopped, total := 0, 0
	for _, words := range queries {
		for i, raw := range msgs {
			ex, text, cut := cutExcerpt(raw, mailview.Options{}, words, true)
			want, whole := wholeExcerpt(raw, words)
			if !reflect.DeepEqual(ex, want) {
				t.Errorf("message %d, %q: excerpt %+v\nwant (the whole text) %+v", i, words, ex, want)
			}
			total++
			if cut {
				stopped++
				if len(text) >= len(whole) {
					t.Errorf("message %d, %q: said cut, but decoded %d bytes of %d", i, words, len(text), len(whole))
				}
			}
		}
	}
	t.Logf("%d of %d excerpts stopped decoding before the end of the text", stopped, total)
	if stopped == 0 {
		t.Error("no excerpt stopped early: the test shows nothing")
	}
}
