package catalog

import (
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// corpusArchive is a bolt store holding the shared corpus, built once per
// test binary (importing it takes a few seconds).
var corpusArchive struct {
	once  sync.Once
	dir   string
	a     *archive
	cns   []string
	bytes int64
	err   error
}

// loadCorpus returns an archive of the shared corpus, in batches as the
// importer writes it, and the call numbers in input order.
func loadCorpus(tb testing.TB) (*archive, []string, int64) {
	tb.Helper()
	path := testcorpus.Path(tb)
	corpusArchive.once.Do(func() {
		corpusArchive.dir, corpusArchive.err = os.MkdirTemp("", "catalog-corpus")
		if corpusArchive.err != nil {
			return
		}
		corpusArchive.a, corpusArchive.cns, corpusArchive.bytes, corpusArchive.err = importCorpus(tb, path, corpusArchive.dir)
	})
	if corpusArchive.err != nil {
		tb.Fatal(corpusArchive.err)
	}
	return corpusArchive.a, corpusArchive.cns, corpusArchive.bytes
}

func TestMain(m *testing.M) {
	code := m.Run()
	if corpusArchive.a != nil {
		corpusArchive.a.st.Close()
	}
	if corpusArchive.dir != "" {
		os.RemoveAll(corpusArchive.dir)
	}
	os.Exit(code)
}

func importCorpus(tb testing.TB, path, dir string) (*archive, []string, int64, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, nil, 0, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, nil, 0, err
	}
	a := newArchiveIn(tb, filepath.Join(dir, "messages.db"))
	r := mbox.NewReader(zr, mbox.Options{Name: path})
	var batch []store.Message
	var cns []string
	var total int64
	flush := func() error {
		res, err := a.st.Put(tb.Context(), batch)
		if err != nil {
			return err
		}
		for _, r := range res {
			cns = append(cns, r.Number.String())
		}
		batch = batch[:0]
		return nil
	}
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			return nil, nil, 0, err
		}
		if a.seq > callnumber.MaxSequence {
			if err := flush(); err != nil {
				return nil, nil, 0, err
			}
			a.newRun()
		}
		meta, _ := mailmsg.Parse(m.Raw)
		batch = append(batch, storetest.Message(a.auth.Number(tb, a.run, a.seq), m.Raw, meta.MessageID, "linux-mips"))
		a.seq++
		total += int64(len(m.Raw))
		if len(batch) == 1000 {
			if err := flush(); err != nil {
				return nil, nil, 0, err
			}
		}
	}
	if err := flush(); err != nil {
		return nil, nil, 0, err
	}
	return a, cns, total, nil
}

// TestCorpus indexes the shared corpus twice, once in pages of 37 messages
// and once in pages of 500: every message is in the catalog, and the
// threads do not depend on where pages end.
func TestCorpus(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the corpus")
	}
	a, cns, _ := loadCorpus(t)
	small := openCatalog(t)
	if n, err := small.Sync(t.Context(), a.st, SyncOptions{PageSize: 37}); err != nil || n != testcorpus.Messages {
		t.Fatalf("Sync(pages of 37) = %d, %v; want %d", n, err, testcorpus.Messages)
	}
	large := openCatalog(t)
	if n, err := large.Sync(t.Context(), a.st, SyncOptions{}); err != nil || n != testcorpus.Messages {
		t.Fatalf("Sync(pages of 500) = %d, %v; want %d", n, err, testcorpus.Messages)
	}
	// Every 50th message's thread is enough to see a difference.
	var sample []string
	for i := 0; i < len(cns); i += 50 {
		sample = append(sample, cns[i])
	}
	if got, want := snapshot(t, small, sample), snapshot(t, large, sample); !slices.Equal(got, want) {
		t.Errorf("threads differ with the page size")
	}
	s, err := large.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	// The sample is every 16th message of the list, so most threads lose
	// their other messages: but replies to one another must still join.
	if s.Messages != testcorpus.Messages || s.Threads >= s.Messages || s.Threads < s.Messages/2 || s.Lists != 1 {
		t.Errorf("Stats() = %+v: want %d messages in fewer threads (but not fewer than half), one list", s, testcorpus.Messages)
	}
	t.Logf("corpus: %d messages in %d threads", s.Messages, s.Threads)
	var headerDates int
	for _, cn := range sample {
		m, err := large.Message(t.Context(), cn)
		if err != nil {
			t.Fatal(err)
		}
		if m.DateSource == DateHeader {
			headerDates++
		}
		if m.Date.Year() < 1993 || m.Date.Year() > 2020 {
			t.Errorf("message %s dated %v (from %v), outside the list's years", cn, m.Date, m.DateSource)
		}
	}
	if headerDates < len(sample)*9/10 {
		t.Errorf("%d of %d sampled messages dated by their Date header, want nearly all", headerDates, len(sample))
	}
}

// BenchmarkRebuild rebuilds a catalog of the shared corpus, beside a bare
// read of the store's change feed (what any rebuild must at least do).
// make bench reports both and their ratio.
func BenchmarkRebuild(b *testing.B) {
	a, _, bytes := loadCorpus(b)
	var feed, rebuild time.Duration
	var size int64
	for range b.N {
		start := time.Now()
		var cursor store.Cursor
		n := 0
		for {
			p, err := a.st.Changes(b.Context(), cursor, DefaultPageSize)
			if err != nil {
				b.Fatal(err)
			}
			if len(p.Messages) == 0 {
				break
			}
			n += len(p.Messages)
			cursor = p.Next
		}
		feed += time.Since(start)
		path := filepath.Join(b.TempDir(), "catalog.db")
		start = time.Now()
		if m, err := Rebuild(b.Context(), path, a.st, SyncOptions{}, Options{}); err != nil || m != n {
			b.Fatalf("Rebuild = %d, %v; want %d", m, err, n)
		}
		rebuild += time.Since(start)
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
	}
	msgs := float64(testcorpus.Messages * b.N)
	b.ReportMetric(msgs/rebuild.Seconds(), "msg/s")
	b.ReportMetric(msgs/feed.Seconds(), "feed-msg/s")
	b.ReportMetric(rebuild.Seconds()/feed.Seconds(), "x-feed")
	b.ReportMetric(float64(size)/float64(bytes), "catalog-bytes/input-byte")
	b.ReportMetric(rebuild.Seconds()/float64(b.N)*84096/testcorpus.Messages, "s-for-84k")
}
