package catalog

import (
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"regexp"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/mbox"
)

// threadingHeaders matches the References and In-Reply-To fields of a
// header, with their continuation lines.
var threadingHeaders = regexp.MustCompile(`(?im)^(references|in-reply-to):.*\n([ \t].*\n)*`)

// TestPipermailLikeCorpus: the shared corpus made a pipermail-era list,
// every References and In-Reply-To taken out: of the replies whose parent
// the sample has, at least 70% join their parent's thread by subject
// alone, and few join another thread (docs/reading.md, "Threads of mail
// without threading headers", has the figures).
func TestPipermailLikeCorpus(t *testing.T) {
	path := testcorpus.Path(t)
	if testing.Short() {
		t.Skip("indexes the whole corpus")
	}
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	gz, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	r := mbox.NewReader(gz, mbox.Options{Name: path})
	a := newArchive(t)
	c := openCatalog(t)
	type reply struct{ cn, parent string }
	var replies []reply
	byID := map[string]string{}
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		v := mailview.Parse(m.Raw, mailview.Options{})
		raw := m.Raw
		if i := bytes.Index(raw, []byte("\n\n")); i > 0 {
			raw = append(threadingHeaders.ReplaceAll(raw[:i+1:i+1], nil), raw[i+1:]...)
		}
		cn := a.put(raw, "pipermail")
		if v.MessageID != "" {
			byID[v.MessageID] = cn
		}
		switch {
		case len(v.References) > 0:
			replies = append(replies, reply{cn, v.References[len(v.References)-1]})
		case len(v.InReplyTo) > 0:
			replies = append(replies, reply{cn, v.InReplyTo[0]})
		}
	}
	mustSync(t, c, a.st)
	thread := func(cn string) (Message, int64) {
		m, err := c.Message(t.Context(), cn)
		if err != nil {
			t.Fatal(err)
		}
		return m, m.ThreadID()
	}
	var total, joined, wrong int
	for _, r := range replies {
		p, ok := byID[r.parent]
		if !ok {
			continue
		}
		total++
		m, mt := thread(r.cn)
		pm, pt := thread(p)
		switch {
		case mt == pt:
			joined++
		case m.Joined != JoinedByID:
			wrong++
			t.Logf("joined another thread: %q, whose parent is %q", m.Subject, pm.Subject)
		}
	}
	t.Logf("%d replies with their parent in the sample: %d joined its thread (%.0f%%), %d another", total, joined, 100*float64(joined)/float64(max(total, 1)), wrong)
	if total == 0 || joined*10 < total*7 {
		t.Errorf("%d of %d replies joined their parent's thread by subject, want 70%% or more", joined, total)
	}
}
