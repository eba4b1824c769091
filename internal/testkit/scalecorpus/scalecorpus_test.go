package scalecorpus

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

const demo = "../../../fixtures/mbox/demo.mbox"

type readMsg struct {
	list string
	meta mailmsg.Meta
	raw  []byte
	sep  string
}

func readLists(t *testing.T, res Result) []readMsg {
	t.Helper()
	var out []readMsg
	for _, l := range res.Lists {
		f, err := os.Open(l.Path)
		if err != nil {
			t.Fatal(err)
		}
		r := mbox.NewReader(f, mbox.Options{Name: l.Path, Format: mbox.FormatMboxrd})
		n := 0
		for {
			m, err := r.Next()
			if errors.Is(err, io.EOF) {
				break
			}
			if err != nil {
				t.Fatal(err)
			}
			meta, _ := mailmsg.Parse(m.Raw)
			out = append(out, readMsg{list: l.Name, meta: meta, raw: m.Raw, sep: m.Separator})
			n++
		}
		f.Close()
		if n != l.Messages {
			t.Errorf("%s holds %d messages, the result says %d", l.Path, n, l.Messages)
		}
	}
	return out
}

func TestGenerate(t *testing.T) {
	dir := t.TempDir()
	opts := Options{Corpus: demo, Dir: dir, Messages: 130, Lists: 5, CrossPost: 0.3, Seed: 7}
	res, err := Generate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if res.Messages != 130 || len(res.Lists) != 5 {
		t.Fatalf("Generate = %d messages in %d lists, want 130 in 5", res.Messages, len(res.Lists))
	}
	msgs := readLists(t, res)
	// A cross-post's copies share its Message-ID (the demo has messages
	// without one: those are not counted here).
	extra := res.Written - res.Messages
	if len(msgs) != res.Written || extra < res.CrossPosted || extra > 2*res.CrossPosted || extraCopies(msgs) > extra {
		t.Errorf("read %d messages (%d sharing a Message-ID), result says %d written, %d distinct, %d cross-posted",
			len(msgs), extraCopies(msgs), res.Written, res.Messages, res.CrossPosted)
	}
	if res.CrossPosted == 0 || res.CrossPosted == res.Messages {
		t.Errorf("%d of %d messages cross-posted with CrossPost 0.3", res.CrossPosted, res.Messages)
	}

	// Every message carries its own list's headers and none of the
	// sample's list's; a Message-ID is in at most 3 lists, once in each.
	lists := map[string]map[string]bool{}
	for _, m := range msgs {
		if want := "<" + m.list + "." + serverOf(res, m.list) + ">"; m.meta.ListID != want {
			t.Errorf("a message of %s has List-Id %q, want %q", m.list, m.meta.ListID, want)
		}
		if strings.Contains(strings.ToLower(string(m.raw)), "list-id: <linux-mips.") && m.list != "linux-mips" {
			t.Errorf("a message of %s keeps the sample's List-Id", m.list)
		}
		if m.meta.MessageID == "" {
			continue
		}
		if lists[m.meta.MessageID] == nil {
			lists[m.meta.MessageID] = map[string]bool{}
		}
		if lists[m.meta.MessageID][m.list] {
			t.Errorf("Message-ID %q twice in %s", m.meta.MessageID, m.list)
		}
		lists[m.meta.MessageID][m.list] = true
	}
	for id, ls := range lists {
		if len(ls) > 3 {
			t.Errorf("Message-ID %q in %d lists, want at most 3", id, len(ls))
		}
	}
	// Threads hold: a reference to a message of the sample names a
	// message of the same copy, which exists (the sample's own parents
	// are in it, the demo having its threads whole).
	for _, m := range msgs {
		k, _, _ := strings.Cut(m.meta.MessageID, ".")
		for _, ref := range append(m.meta.References, m.meta.InReplyTo...) {
			if rk, _, _ := strings.Cut(ref, "."); rk != k {
				t.Errorf("%s refers to %s, of another copy", m.meta.MessageID, ref)
			}
		}
	}
	// Dates spread: the copies' differ.
	dates := map[string]bool{}
	for _, m := range msgs {
		if tm, err := m.meta.Time(); err == nil {
			dates[tm.UTC().Format("2006-01-02T15")] = true
		}
	}
	if len(dates) < len(msgs)/2 {
		t.Errorf("%d distinct dates among %d messages", len(dates), len(msgs))
	}

	// The same options, the same bytes.
	opts.Dir = t.TempDir()
	again, err := Generate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for i, l := range res.Lists {
		a, _ := os.ReadFile(l.Path)
		b, _ := os.ReadFile(again.Lists[i].Path)
		if !bytes.Equal(a, b) {
			t.Errorf("%s differs between two runs with the same seed", l.Name)
		}
	}
	// Another seed, other bytes.
	opts.Dir, opts.Seed = t.TempDir(), 8
	other, err := Generate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	if a, _ := os.ReadFile(res.Lists[0].Path); bytes.Equal(a, mustRead(t, other.Lists[0].Path)) {
		t.Errorf("%s is the same with seeds 7 and 8", res.Lists[0].Name)
	}
	m, err := ReadManifest(dir)
	if err != nil {
		t.Fatal(err)
	}
	if m.Written != res.Written || m.Options.Seed != 7 || len(m.Lists) != 5 {
		t.Errorf("ReadManifest = %+v, want the result %+v", m, res)
	}
}

func extraCopies(msgs []readMsg) int {
	seen := map[string]int{}
	extra := 0
	for _, m := range msgs {
		if m.meta.MessageID == "" {
			continue
		}
		if seen[m.meta.MessageID] > 0 {
			extra++
		}
		seen[m.meta.MessageID]++
	}
	return extra
}

func serverOf(res Result, name string) string {
	for i := range res.Lists {
		if n, s, _ := listName(i); n == name {
			return s
		}
	}
	return ""
}

func mustRead(t *testing.T, path string) []byte {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestGenerateGzip(t *testing.T) {
	res, err := Generate(t.Context(), Options{Corpus: demo, Dir: t.TempDir(), Messages: 45, Lists: 2, Gzip: true})
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasSuffix(res.Lists[0].Path, ".mbox.gz") {
		t.Errorf("--gzip wrote %s", res.Lists[0].Path)
	}
	// The importer reads .gz; so does the mbox reader behind a gzip one.
	if got := len(readGzip(t, res.Lists[0].Path)) + len(readGzip(t, res.Lists[1].Path)); got != res.Written {
		t.Errorf("read %d messages back, wrote %d", got, res.Written)
	}
}

func TestGenerateOptions(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
		want error
	}{
		{"no messages", Options{Corpus: demo, Messages: 0}, ErrNoMessages},
		{"too many lists", Options{Corpus: demo, Messages: 5, Lists: 1001}, ErrLists},
		{"everything cross-posted", Options{Corpus: demo, Messages: 5, CrossPost: 1}, ErrCrossPost},
		{"empty sample", Options{Corpus: os.DevNull, Messages: 5}, ErrEmpty},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.Dir = t.TempDir()
			if _, err := Generate(t.Context(), tc.opts); !errors.Is(err, tc.want) {
				t.Errorf("Generate(%+v) = %v, want %v", tc.opts, err, tc.want)
			}
		})
	}
	if _, err := Generate(t.Context(), Options{Corpus: filepath.Join(t.TempDir(), "missing"), Dir: t.TempDir(), Messages: 5}); err == nil {
		t.Error("Generate with a missing sample succeeded")
	}
}

// TestGenerateSample writes 2.5 copies of the shared sample and checks
// the figures a benchmark relies on: the share cross-posted, and every
// list given messages.
func TestGenerateSample(t *testing.T) {
	corpus := testcorpus.Path(t)
	start := time.Now()
	res, err := Generate(t.Context(), Options{Corpus: corpus, Dir: t.TempDir(), Messages: testcorpus.Messages * 5 / 2, Lists: 11, Seed: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d messages, %.1f MB in %v", res.Written, float64(res.Bytes)/1e6, time.Since(start))
	share := float64(res.CrossPosted) / float64(res.Messages)
	if share < 0.04 || share > 0.10 {
		t.Errorf("%.3f of messages cross-posted, want about %.2f", share, DefaultCrossPost)
	}
	for _, l := range res.Lists {
		if l.Messages < res.Messages/11/2 {
			t.Errorf("%s has %d of %d messages", l.Name, l.Messages, res.Messages)
		}
	}
}

func readGzip(t *testing.T, path string) []readMsg {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		t.Fatal(err)
	}
	var out []readMsg
	r := mbox.NewReader(zr, mbox.Options{Name: path, Format: mbox.FormatMboxrd})
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, readMsg{raw: m.Raw})
	}
}
