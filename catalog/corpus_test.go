package catalog

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // message.CharsetReader: every charset
	"github.com/emersion/go-message/mail"
	"golang.org/x/net/html"
	"golang.org/x/text/encoding/charmap"
	"golang.org/x/text/unicode/norm"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
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

	catOnce sync.Once
	cat     *Catalog
	catErr  error
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

// corpusCatalog returns a catalog of the corpus archive, indexed in pages
// of 500 once per test binary.
func corpusCatalog(tb testing.TB) *Catalog {
	tb.Helper()
	a, _, _ := loadCorpus(tb)
	corpusArchive.catOnce.Do(func() {
		var c *Catalog
		// The corpus tests check answers, not speed: a loaded machine
		// (the race detector, other test binaries) must not turn a slow
		// answer into a refusal. The budget's own tests are in
		// hostile_test.go.
		c, corpusArchive.catErr = Open(tb.Context(), filepath.Join(corpusArchive.dir, "catalog.db"), Options{SearchTimeout: time.Minute})
		if corpusArchive.catErr != nil {
			return
		}
		corpusArchive.cat = c
		var n int
		if n, corpusArchive.catErr = c.Sync(tb.Context(), a.st, SyncOptions{}); corpusArchive.catErr == nil && n != corpusLimit {
			corpusArchive.catErr = fmt.Errorf("Sync(corpus) indexed %d messages, want %d", n, corpusLimit)
		}
	})
	if corpusArchive.catErr != nil {
		tb.Fatal(corpusArchive.catErr)
	}
	return corpusArchive.cat
}

func TestMain(m *testing.M) {
	code := m.Run()
	if corpusArchive.cat != nil {
		corpusArchive.cat.Close()
	}
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
	return importMbox(tb, zr, path, dir, corpusLimit)
}

// importMbox stores up to limit messages of an mbox into a new archive in
// dir, in batches of 1,000 as the importer does.
func importMbox(tb testing.TB, zr io.Reader, path, dir string, limit int) (*archive, []string, int64, error) {
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
	for n := 0; n < limit; n++ {
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
	if n, err := small.Sync(t.Context(), a.st, SyncOptions{PageSize: 37}); err != nil || n != corpusLimit {
		t.Fatalf("Sync(pages of 37) = %d, %v; want %d", n, err, corpusLimit)
	}
	large := corpusCatalog(t)
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
	if s.Messages != corpusLimit || s.Threads >= s.Messages || s.Threads < s.Messages/2 || s.Lists != 1 {
		t.Errorf("Stats() = %+v: want %d messages in fewer threads (but not fewer than half), one list", s, corpusLimit)
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
	var feed, rebuild, cpu time.Duration
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
		cpu0 := cpuTime()
		if m, err := Rebuild(b.Context(), path, a.st, SyncOptions{}, Options{}); err != nil || m != n {
			b.Fatalf("Rebuild = %d, %v; want %d", m, err, n)
		}
		rebuild += time.Since(start)
		cpu += cpuTime() - cpu0
		fi, err := os.Stat(path)
		if err != nil {
			b.Fatal(err)
		}
		size = fi.Size()
	}
	msgs := float64(corpusLimit * b.N)
	b.ReportMetric(msgs/rebuild.Seconds(), "msg/s")
	b.ReportMetric(msgs/feed.Seconds(), "feed-msg/s")
	b.ReportMetric(rebuild.Seconds()/feed.Seconds(), "x-feed")
	b.ReportMetric(float64(size)/float64(bytes), "catalog-bytes/input-byte")
	b.ReportMetric(rebuild.Seconds()/float64(b.N)*84096/corpusLimit, "s-for-84k")
	// CPU seconds hardly change when other processes share the machine;
	// on 2 idle cores the wall time is between a half and all of them.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "cpu-s")
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// corpusWords are words of the linux-mips sample to count: common and
// rare, in subjects, senders, text and quotes, and words with letters
// beyond ASCII, in text of several charsets (matched without their
// accents, as search matches them).
var corpusWords = []string{"cache", "kernel", "indy", "r4000", "decstation", "tlb", "octeon", "bootloader", "ralf", "sgi", "segfault", "ip22", "ftp", "thanks", "mips64",
	"écrit", "krčmář", "bürger", "rullgård", "rafał", "写道"}

// independentWords returns the words of a message as a reader finds
// them, decoded without the archive's own code (mailview, the catalog's
// indexing): by go-message, which reads the MIME structure and the
// transfer encodings and, with its charset package, the charsets; text
// that declares no charset and is not UTF-8 read as windows-1252; HTML
// through x/net/html. The words are those of the decoded Subject and
// From fields, of the text/plain and text/html parts that are not
// attachments (of a multipart/alternative, the first with plain text,
// else the first with any), and of the messages enclosed as
// message/rfc822, folded as a search folds them: lower case, without
// accents.
func independentWords(raw []byte) map[string]bool {
	var text strings.Builder
	e, err := message.Read(bytes.NewReader(raw))
	if e == nil {
		// Not even a header: all of it is text.
		text.WriteString(string(raw))
		_ = err
	} else {
		h := mail.Header{Header: e.Header}
		if s, err := h.Subject(); err == nil {
			text.WriteString(s + "\n")
		} else {
			text.WriteString(h.Get("Subject") + "\n")
		}
		if s, err := h.Text("From"); err == nil {
			text.WriteString(s + "\n")
		} else {
			text.WriteString(h.Get("From") + "\n")
		}
		for _, p := range entityTexts(e, 0) {
			text.WriteString(p.text + "\n")
		}
	}
	words := map[string]bool{}
	for _, w := range strings.FieldsFunc(text.String(), func(r rune) bool {
		return !unicode.IsLetter(r) && !unicode.IsNumber(r) && !unicode.Is(unicode.Mn, r)
	}) {
		words[foldIndependently(w)] = true
	}
	return words
}

// foldIndependently lower-cases w and takes off its accents (Unicode
// decomposition, without the combining marks), as the index's
// remove_diacritics does.
func foldIndependently(w string) string {
	var b strings.Builder
	for _, r := range norm.NFD.String(strings.ToLower(w)) {
		if !unicode.Is(unicode.Mn, r) {
			b.WriteRune(r)
		}
	}
	return b.String()
}

// textPiece is the text of one part, and whether it was HTML.
type textPiece struct {
	text string
	html bool
}

// entityTexts returns the texts of an entity and the entities in it
// (RFC 2046), in order.
func entityTexts(e *message.Entity, depth int) []textPiece {
	if depth > 20 {
		return nil
	}
	mediaType, params, err := e.Header.ContentType()
	if err != nil || mediaType == "" {
		mediaType = "text/plain" // RFC 2045 section 5.2
	}
	disposition, dparams, _ := e.Header.ContentDisposition()
	attachment := strings.EqualFold(disposition, "attachment")
	named := dparams["filename"] != "" || params["name"] != ""
	switch {
	case strings.HasPrefix(mediaType, "multipart/"):
		mr := e.MultipartReader()
		if mr == nil {
			return nil
		}
		var parts [][]textPiece
		for {
			p, err := mr.NextPart()
			if p == nil || err != nil && !message.IsUnknownCharset(err) && !message.IsUnknownEncoding(err) {
				break
			}
			parts = append(parts, entityTexts(p, depth+1))
		}
		if mediaType != "multipart/alternative" {
			return slices.Concat(parts...)
		}
		// RFC 2046 section 5.1.4: one of them.
		for _, want := range []func(textPiece) bool{
			func(p textPiece) bool { return !p.html },
			func(textPiece) bool { return true },
		} {
			for _, alt := range parts {
				if slices.ContainsFunc(alt, want) {
					return alt
				}
			}
		}
		return nil
	case mediaType == "text/plain" && !attachment, mediaType == "text/html" && !attachment && !named:
		b, _ := io.ReadAll(e.Body)
		if !utf8.Valid(b) {
			// Undeclared 8-bit text (an unknown charset is not
			// converted either).
			b, _ = charmap.Windows1252.NewDecoder().Bytes(b)
		}
		t := string(b)
		if mediaType == "text/html" {
			t = htmlTextIndependently(t)
		}
		if strings.TrimSpace(t) == "" {
			return nil
		}
		return []textPiece{{text: t, html: mediaType == "text/html"}}
	case mediaType == "message/rfc822" || mediaType == "message/global":
		inner, _ := message.Read(e.Body)
		if inner == nil {
			return nil
		}
		return entityTexts(inner, depth+1)
	}
	return nil
}

// htmlTextIndependently returns the text of an HTML document, without
// what a browser would run or style.
func htmlTextIndependently(s string) string {
	var b strings.Builder
	z := html.NewTokenizer(strings.NewReader(s))
	skip := ""
	for {
		switch z.Next() {
		case html.ErrorToken:
			return b.String()
		case html.StartTagToken:
			if name, _ := z.TagName(); string(name) == "script" || string(name) == "style" {
				skip = string(name)
			}
			b.WriteByte(' ')
		case html.EndTagToken:
			if name, _ := z.TagName(); string(name) == skip {
				skip = ""
			}
			b.WriteByte(' ')
		case html.TextToken:
			if skip == "" {
				b.Write(z.Text())
			}
		}
	}
}

// TestCorpusSearchCounts: for a sample of words, the number of messages
// search finds equals the number whose decoded text has the word, as
// decoded independently of the archive's own code (independentWords).
// Without -race it reads the whole corpus (under the race detector, the
// first corpusLimit messages).
func TestCorpusSearchCounts(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the corpus")
	}
	checkCorpusSearchCounts(t, corpusCatalog(t), corpusWordCounts(t))
}

// BenchmarkCorpusSearchCounts is TestCorpusSearchCounts in make bench:
// the counts of the sampled words, checked against the independent
// decoding, timed per word.
func BenchmarkCorpusSearchCounts(b *testing.B) {
	c := corpusCatalog(b)
	start := time.Now()
	want := corpusWordCounts(b)
	decode := time.Since(start)
	b.ResetTimer()
	for range b.N {
		checkCorpusSearchCounts(b, c, want)
	}
	b.ReportMetric(float64(b.Elapsed().Microseconds())/1000/float64(b.N*len(corpusWords)), "ms/word")
	b.ReportMetric(decode.Seconds(), "independent-decode-s")
	b.ReportMetric(float64(corpusLimit), "messages")
}

// eachCorpusMessage calls fn with each message of the corpus archive, in
// feed order, and returns how many there were.
func eachCorpusMessage(tb testing.TB, fn func(m store.Stored)) int {
	tb.Helper()
	a, _, _ := loadCorpus(tb)
	var cursor store.Cursor
	n := 0
	for {
		p, err := a.st.Changes(tb.Context(), cursor, 500)
		if err != nil {
			tb.Fatal(err)
		}
		if len(p.Messages) == 0 {
			return n
		}
		for _, m := range p.Messages {
			fn(m)
		}
		n += len(p.Messages)
		cursor = p.Next
	}
}

// corpusWordCounts returns how many messages of the corpus archive have
// each of corpusWords, by independentWords.
func corpusWordCounts(tb testing.TB) map[string]int {
	want := map[string]int{}
	n := eachCorpusMessage(tb, func(m store.Stored) {
		words := independentWords(m.Raw)
		for _, w := range corpusWords {
			if words[foldIndependently(w)] {
				want[w]++
			}
		}
	})
	if n != corpusLimit {
		tb.Fatalf("the corpus archive's feed has %d messages, want %d", n, corpusLimit)
	}
	return want
}

// checkCorpusSearchCounts checks the search counts of corpusWords in c
// against want.
func checkCorpusSearchCounts(tb testing.TB, c *Catalog, want map[string]int) {
	tb.Helper()
	absent := 0
	for _, w := range corpusWords {
		q, err := ParseQuery(w)
		if err != nil {
			tb.Fatal(err)
		}
		res, err := c.Search(tb.Context(), q, SearchOptions{Limit: 1})
		if err != nil {
			tb.Fatal(err)
		}
		if res.Total != want[w] || res.More {
			tb.Errorf("Search(%q) finds %d messages (more: %v); %d have the word", w, res.Total, res.More, want[w])
		}
		// Counted up to a limit: exact below it, "more" past it.
		for _, limit := range []int{want[w] / 2, want[w]} {
			if limit == 0 {
				continue
			}
			res, err := c.Search(tb.Context(), q, SearchOptions{Limit: 1, CountLimit: limit})
			if wantMore := want[w] > limit; err != nil || res.Total != limit || res.More != wantMore {
				tb.Errorf("Search(%q, count limit %d) = total %d, more %v, %v; want %d, %v", w, limit, res.Total, res.More, err, limit, wantMore)
			}
		}
		if want[w] == 0 {
			absent++
		}
	}
	// Words the first messages lack (under -race) are fine; a sample that
	// finds nothing checks nothing.
	if absent > len(corpusWords)/3 {
		tb.Errorf("%d of the %d sampled words are in no message: pick others", absent, len(corpusWords))
	}
}

// searchKinds are the queries the search benchmarks time, by kind.
var searchKinds = []struct {
	name    string
	queries []string
}{
	{"word", []string{"cache", "kernel", "thanks", "tlb", "octeon"}},
	{"two-words", []string{"indy cache", "kernel panic", "r4000 tlb", "linux patch"}},
	{"phrase", []string{`"secondary cache"`, `"kernel panic"`, `"cross compiler"`, `"works for me"`}},
	// Phrases of common words (pairs.go), some that few messages hold.
	{"common-phrase", []string{`"the of and"`, `"it is in the"`, `"if you have"`, `"this is a"`}},
	{"from", []string{"from:ralf", "from:macro", "from:linux-mips.org", "from:gmail"}},
}

// benchCountLimit is how far the benchmarks count, as the resolver's
// search pages do.
const benchCountLimit = 1000

// searchLatency runs n searches of the first page of results, newest
// first, from the given number of concurrent clients, and returns the p50
// and p99 latency in milliseconds.
func searchLatency(b *testing.B, c *Catalog, queries []string, clients, n int) (p50, p99 float64) {
	lat := make([][]time.Duration, clients)
	var wg sync.WaitGroup
	per := max(n/clients, 1)
	for w := range clients {
		wg.Go(func() {
			for i := range per {
				q, err := ParseQuery(queries[(w+i)%len(queries)])
				if err != nil {
					b.Error(err)
					return
				}
				start := time.Now()
				if _, err := c.Search(b.Context(), q, SearchOptions{Limit: 20, CountLimit: benchCountLimit}); err != nil {
					b.Error(err)
					return
				}
				lat[w] = append(lat[w], time.Since(start))
			}
		})
	}
	wg.Wait()
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	slices.Sort(all)
	ms := func(d time.Duration) float64 { return float64(d.Microseconds()) / 1000 }
	return ms(all[len(all)/2]), ms(all[len(all)*99/100])
}

// BenchmarkSearch runs one-word, two-word, phrase and from: queries on the
// corpus catalog with 16 clients and reports the p50 and p99 latency of
// each kind.
func BenchmarkSearch(b *testing.B) {
	c := corpusCatalog(b)
	for _, k := range searchKinds {
		b.Run(k.name, func(b *testing.B) {
			p50, p99 := searchLatency(b, c, k.queries, 16, max(b.N, 16))
			b.ReportMetric(p50, "p50-ms")
			b.ReportMetric(p99, "p99-ms")
		})
	}
}

// BenchmarkScaled measures a rebuild and searches on an archive the size
// of the whole linux-mips list: the sample 16 times over with distinct
// Message-IDs (testcorpus.WriteScaled), 84,096 messages. Importing it
// takes a minute or two, so it runs only with CHIBRARY_BENCH_SCALED=1
// (make bench sets it).
func BenchmarkScaled(b *testing.B) {
	if os.Getenv("CHIBRARY_BENCH_SCALED") == "" {
		b.Skip("set CHIBRARY_BENCH_SCALED=1 to build the 84k-message archive")
	}
	path := testcorpus.Path(b)
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(testcorpus.WriteScaled(pw, path, testcorpus.ScaledCopies)) }()
	a, cns, bytes, err := importMbox(b, pr, "scaled corpus", b.TempDir(), testcorpus.ScaledCopies*testcorpus.Messages)
	pr.Close()
	if err != nil {
		b.Fatal(err)
	}
	defer a.st.Close()
	cat := filepath.Join(b.TempDir(), "catalog.db")
	var took, cpu time.Duration
	for range b.N {
		start, cpu0 := time.Now(), cpuTime()
		n, err := Rebuild(b.Context(), cat, a.st, SyncOptions{}, Options{})
		if err != nil || n != len(cns) {
			b.Fatalf("Rebuild = %d, %v; want %d", n, err, len(cns))
		}
		took += time.Since(start)
		cpu += cpuTime() - cpu0
	}
	fi, err := os.Stat(cat)
	if err != nil {
		b.Fatal(err)
	}
	b.ReportMetric(float64(len(cns)), "messages")
	b.ReportMetric(took.Seconds()/float64(b.N), "rebuild-s")
	// CPU time: what other jobs on the machine hardly change.
	b.ReportMetric(cpu.Seconds()/float64(b.N), "rebuild-cpu-s")
	b.ReportMetric(float64(fi.Size())/float64(bytes), "catalog-bytes/input-byte")
	c, err := Open(b.Context(), cat, Options{ReadOnly: true})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	for _, k := range searchKinds {
		p50, p99 := searchLatency(b, c, k.queries, 16, 400)
		b.ReportMetric(p50, k.name+"-p50-ms")
		b.ReportMetric(p99, k.name+"-p99-ms")
	}
}

// TestIndependentWords: the independent decoding reads what the search
// fixture's messages say: quoted-printable Latin-1, base64 UTF-8, an
// RFC 2047 subject, HTML without its script, the plain alternative, and
// an enclosed message.
func TestIndependentWords(t *testing.T) {
	raws := readMbox(t, fixture("../search/search.mbox"))
	dmarc, err := os.ReadFile(filepath.Join("..", "fixtures", "web", "dmarc.eml"))
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name      string
		raw       []byte
		has, hasn []string
	}{
		{"plain", raws[0], []string{"ralf", "baechle", "r4k", "cache", "indy", "refill"}, []string{"r4k_cache"}},
		{"quoted-printable Latin-1, RFC 2047 sender and subject", raws[2], []string{"cafe", "creme", "resume", "naive", "pret", "jorg", "muller"}, []string{"caf", "r"}},
		{"base64 UTF-8", raws[3], []string{"gerat", "großer", "ubertragungsrate", "panics"}, nil},
		{"HTML only", raws[4], []string{"bootloader", "octeon", "board"}, []string{"steal", "script", "b", "body"}},
		{"alternative", raws[6], []string{"secondary", "cache"}, []string{"p"}},
		{"enclosed message", dmarc, []string{"sprockets", "three"}, nil},
	}
	for _, tt := range tests {
		words := independentWords(tt.raw)
		for _, w := range tt.has {
			if !words[w] {
				t.Errorf("%s: independentWords lacks %q: %v", tt.name, w, slices.Sorted(maps.Keys(words)))
			}
		}
		for _, w := range tt.hasn {
			if words[w] {
				t.Errorf("%s: independentWords has %q", tt.name, w)
			}
		}
	}
}

// TestTextKeyCollisions indexes the corpus with a textKey of 16 values:
// every lookup by Message-ID, reference or base subject then finds a
// sixteenth of the rows, and must still keep only the text's own.
// The threads, how their messages joined them, and each message's copies
// are those of the corpus's catalog.
func TestTextKeyCollisions(t *testing.T) {
	if testing.Short() {
		t.Skip("-short: skipping the corpus")
	}
	a, cns, _ := loadCorpus(t)
	want := corpusCatalog(t)
	key := textKey
	defer func() { textKey = key }()
	textKey = func(s string) int64 { return key(s) & 15 }
	got := openCatalog(t)
	if n, err := got.Sync(t.Context(), a.st, SyncOptions{}); err != nil || n != corpusLimit {
		t.Fatalf("Sync = %d, %v; want %d", n, err, corpusLimit)
	}
	if g, w := snapshot(t, got, cns), snapshot(t, want, cns); !slices.Equal(g, w) {
		t.Errorf("threads differ when every text has the same key")
	}
	joined := map[JoinedBy]int{}
	for _, cn := range cns {
		g, err := got.Place(t.Context(), cn)
		if err != nil {
			t.Fatal(err)
		}
		w, err := want.Place(t.Context(), cn)
		if err != nil {
			t.Fatal(err)
		}
		gm, wm := g.Thread.Nodes[g.Thread.Index(cn)].Message, w.Thread.Nodes[w.Thread.Index(cn)].Message
		if gm.Joined != wm.Joined || len(g.Copies) != len(w.Copies) {
			t.Errorf("%s: joined %v with %d copies; want %v with %d", cn, gm.Joined, len(g.Copies), wm.Joined, len(w.Copies))
		}
		joined[wm.Joined]++
		for _, m := range []*Message{gm} {
			es, err := got.EntriesByMessageID(t.Context(), m.MessageID)
			if err != nil || m.MessageID != "" && !slices.ContainsFunc(es, func(e Entry) bool { return e.CallNumber == cn }) {
				t.Errorf("EntriesByMessageID(%q) = %d entries, %v; want %s among them", m.MessageID, len(es), err, cn)
			}
		}
	}
	// The corpus joins messages in every way, so every lookup was made.
	if joined[JoinedByID] == 0 || joined[JoinedBySubject] == 0 || joined[JoinedQuoting]+joined[JoinedSameSubject] == 0 {
		t.Errorf("the corpus's messages joined their threads %v: want by ID and by subject", joined)
	}
}
