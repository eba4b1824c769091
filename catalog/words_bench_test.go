package catalog

import (
	"compress/gzip"
	"io"
	"os"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/mbox"
)

// corpusTexts returns the search text of the first n corpus messages.
func corpusTexts(b *testing.B, n int) []string {
	path := testcorpus.Path(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	r := mbox.NewReader(gz, mbox.Options{Name: path})
	var out []string
	for len(out) < n {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		out = append(out, Text(mailview.Parse(m.Raw, mailview.Options{})))
	}
	return out
}

// BenchmarkWords is the work the definition of a word does for a search
// and for indexing, over the text of 500 corpus messages each time: the
// pairs of common words a message gives the index (pairsText), an
// excerpt of each for an ASCII word and for one beyond ASCII (which
// reads every word of the text), and the words of queries.
func BenchmarkWords(b *testing.B) {
	texts := corpusTexts(b, 500)
	size := 0
	for _, t := range texts {
		size += len(t)
	}
	b.Run("pairs", func(b *testing.B) {
		b.SetBytes(int64(size))
		for b.Loop() {
			for _, t := range texts {
				pairsText([]string{t})
			}
		}
	})
	for _, w := range []string{"kernel", "café"} {
		b.Run("excerpt-"+w, func(b *testing.B) {
			b.SetBytes(int64(size))
			for b.Loop() {
				for _, t := range texts {
					Excerpt(t, []string{w}, 300)
				}
			}
		})
	}
	b.Run("query", func(b *testing.B) {
		for b.Loop() {
			for _, s := range []string{`kernel panic`, `"the of and" s:mips`, `from:ralf lin*`, `Grüße "über die" naïve*`} {
				q, err := ParseQuery(s)
				if err != nil {
					b.Fatal(err)
				}
				q.Words()
			}
		}
	})
}
