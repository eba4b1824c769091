package ingest_test

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// newArchive opens a real bbolt store and local run authority in a temp
// directory, as `importer --data DIR` does.
func newArchive(tb testing.TB) (store.Store, callnumber.RunSource) {
	tb.Helper()
	dir := tb.TempDir()
	st, err := boltstore.Open(context.Background(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { st.Close() })
	runs := authority.NewLocal(filepath.Join(dir, "runs.db"), authority.Holder{Program: "ingest-test"}, authority.LocalOptions{})
	return st, runs
}

func newArchiver(tb testing.TB, st store.Store, runs callnumber.RunSource) *ingest.Archiver {
	tb.Helper()
	a, err := ingest.NewArchiver(ingest.Options{Store: st, Runs: runs, List: "test-list"})
	if err != nil {
		tb.Fatal(err)
	}
	return a
}

// items is a Source over a slice, ending with err (io.EOF if nil).
type items struct {
	list []ingest.Item
	err  error
}

func (s *items) Next() (ingest.Item, error) {
	if len(s.list) == 0 {
		if s.err != nil {
			return ingest.Item{}, s.err
		}
		return ingest.Item{}, io.EOF
	}
	it := s.list[0]
	s.list = s.list[1:]
	return it, nil
}

func msg(id, body string) []byte {
	h := ""
	if id != "" {
		h = "Message-ID: <" + id + ">\n"
	}
	return []byte(h + "Subject: " + body + "\nFrom: a@example.org\n\n" + body + "\n")
}

func readManifest(t *testing.T, b []byte) []ingest.ManifestEntry {
	t.Helper()
	var out []ingest.ManifestEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	for sc.Scan() {
		var e ingest.ManifestEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			t.Fatalf("manifest line %q: %v", sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

func TestImportStatusesAndManifest(t *testing.T) {
	ctx := context.Background()
	st, runs := newArchive(t)
	a := msg("a@x", "first")
	crlf := bytes.ReplaceAll(a, []byte("\n"), []byte("\r\n"))
	src := &items{list: []ingest.Item{
		{Raw: a, Where: "in:1"},
		{Raw: msg("b@x", "second"), Where: "in:7"},
		{Raw: crlf, Where: "in:13"}, // the same message with CRLF line ends
		{Where: "in:19", Err: errors.New("message too large")},
		{Raw: msg("", "no id"), Where: "in:40"},
	}}
	var manifest bytes.Buffer
	got, err := ingest.Import(ctx, src, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &manifest})
	if err != nil {
		t.Fatalf("Import() error = %v", err)
	}
	want := ingest.Stats{Imported: 3, Duplicates: 1, Failed: 1, Bytes: int64(len(a) + len(msg("b@x", "second")) + len(crlf) + len(msg("", "no id")))}
	if got != want {
		t.Errorf("Import() = %+v, want %+v", got, want)
	}
	m := readManifest(t, manifest.Bytes())
	wantStatus := []ingest.Status{ingest.Imported, ingest.Imported, ingest.Duplicate, ingest.Failed, ingest.Imported}
	wantID := []string{"<a@x>", "<b@x>", "<a@x>", "", ""}
	if len(m) != len(wantStatus) {
		t.Fatalf("manifest has %d lines, want %d: %s", len(m), len(wantStatus), manifest.String())
	}
	for i, e := range m {
		if e.Status != wantStatus[i] || e.MessageID != wantID[i] {
			t.Errorf("manifest[%d] = %+v, want status %s, message_id %q", i, e, wantStatus[i], wantID[i])
		}
	}
	if m[2].CallNumber != m[0].CallNumber {
		t.Errorf("duplicate's call number = %s, want the stored one %s", m[2].CallNumber, m[0].CallNumber)
	}
	if m[3].CallNumber != "" || !strings.Contains(m[3].Error, "too large") {
		t.Errorf("failed entry = %+v, want no call number and the reason", m[3])
	}
	for i, raw := range [][]byte{a, msg("b@x", "second"), nil, nil, msg("", "no id")} {
		if raw == nil {
			continue
		}
		n, err := callnumber.Parse(m[i].CallNumber)
		if err != nil {
			t.Fatalf("manifest[%d] call number: %v", i, err)
		}
		s, err := st.Get(ctx, n)
		if err != nil {
			t.Fatalf("Get(%s) error = %v", n, err)
		}
		if !bytes.Equal(s.Raw, raw) || s.List != "test-list" {
			t.Errorf("Get(%s) = %q (list %q), want %q (list test-list)", n, s.Raw, s.List, raw)
		}
	}
}

func TestImportOrderAcrossWorkersAndBatches(t *testing.T) {
	st, runs := newArchive(t)
	const n = 1000
	var list []ingest.Item
	for i := range n {
		list = append(list, ingest.Item{Raw: msg(fmt.Sprintf("m%d@x", i), fmt.Sprint("body ", i)), Where: fmt.Sprint("in:", i)})
	}
	var manifest bytes.Buffer
	var batches int
	s, err := ingest.Import(context.Background(), &items{list: list}, ingest.ImportOptions{
		Archiver: newArchiver(t, st, runs), Workers: 4, BatchMessages: 7, Manifest: &manifest,
		OnBatch: func(ingest.Stats) { batches++ },
	})
	if err != nil || s.Imported != n {
		t.Fatalf("Import() = %+v, %v; want %d imported", s, err, n)
	}
	if want := (n + 6) / 7; batches != want {
		t.Errorf("OnBatch called %d times, want %d", batches, want)
	}
	seen := map[string]bool{}
	for i, e := range readManifest(t, manifest.Bytes()) {
		if want := fmt.Sprintf("<m%d@x>", i); e.MessageID != want {
			t.Fatalf("manifest[%d].message_id = %s, want %s (input order)", i, e.MessageID, want)
		}
		if seen[e.CallNumber] {
			t.Fatalf("call number %s handed out twice", e.CallNumber)
		}
		seen[e.CallNumber] = true
	}
}

func TestImportPartition(t *testing.T) {
	ctx := context.Background()
	st, runs := newArchive(t)
	var list []ingest.Item
	for i := range 10 {
		list = append(list, ingest.Item{Raw: msg(fmt.Sprintf("p%d@x", i), fmt.Sprint(i))})
	}
	for _, tt := range []struct{ k, n, want int }{{1, 3, 4}, {2, 3, 3}, {3, 3, 3}} {
		src := &items{list: append([]ingest.Item(nil), list...)}
		s, err := ingest.Import(ctx, src, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), PartitionK: tt.k, PartitionN: tt.n})
		if err != nil || s.Imported != int64(tt.want) || s.Duplicates != 0 {
			t.Errorf("Import(partition %d/%d) = %+v, %v; want %d imported, no duplicates", tt.k, tt.n, s, err, tt.want)
		}
	}
	if c, err := st.Count(ctx); err != nil || c != 10 {
		t.Errorf("Count() = %d, %v after all partitions; want 10", c, err)
	}
	for _, bad := range [][2]int{{0, 3}, {4, 3}, {1, -1}} {
		_, err := ingest.Import(ctx, &items{}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), PartitionK: bad[0], PartitionN: bad[1]})
		if !errors.Is(err, ingest.ErrPartition) {
			t.Errorf("Import(partition %d/%d) error = %v, want ErrPartition", bad[0], bad[1], err)
		}
	}
}

func TestImportReadErrorKeepsWhatWasRead(t *testing.T) {
	st, runs := newArchive(t)
	readErr := errors.New("disk went away")
	src := &items{list: []ingest.Item{{Raw: msg("r1@x", "1")}, {Raw: msg("r2@x", "2")}}, err: readErr}
	s, err := ingest.Import(context.Background(), src, ingest.ImportOptions{Archiver: newArchiver(t, st, runs)})
	if !errors.Is(err, readErr) {
		t.Errorf("Import() error = %v, want %v", err, readErr)
	}
	if s.Imported != 2 {
		t.Errorf("Import() imported %d before the read error, want 2", s.Imported)
	}
}

// failingStore refuses every Put of a batch holding the message whose
// Message-ID is bad.
type failingStore struct {
	store.Store
	bad string
}

var errFull = errors.New("no space left on device")

func (f *failingStore) Put(ctx context.Context, m []store.Message) ([]store.Result, error) {
	for _, msg := range m {
		if msg.MessageID == f.bad {
			return nil, errFull
		}
	}
	return f.Store.Put(ctx, m)
}

// A batch the store refuses stops the import. The batch begun while it
// was written (batches are stored two at a time) is stored all the same,
// and said so; none after it is begun.
func TestImportStoreErrorStops(t *testing.T) {
	ctx := context.Background()
	st, runs := newArchive(t)
	fs := &failingStore{Store: st, bad: "f10@x"}
	var list []ingest.Item
	for i := range 45 {
		list = append(list, ingest.Item{Raw: msg(fmt.Sprintf("f%d@x", i), fmt.Sprint(i))})
	}
	var manifest bytes.Buffer
	s, err := ingest.Import(ctx, &items{list: list}, ingest.ImportOptions{
		Archiver: newArchiver(t, fs, runs), BatchMessages: 10, Manifest: &manifest,
	})
	if !errors.Is(err, errFull) {
		t.Fatalf("Import() error = %v, want %v", err, errFull)
	}
	if s.Imported != 20 || s.Failed != 10 {
		t.Errorf("Import() imported %d, failed %d; want 20 (the first batch and the third, begun with the second), 10 (the batch the store refused)", s.Imported, s.Failed)
	}
	m := readManifest(t, manifest.Bytes())
	for i, e := range m {
		want := ingest.Imported
		if i >= 10 && i < 20 {
			want = ingest.Failed
		}
		if e.Status != want || e.MessageID != fmt.Sprintf("<f%d@x>", i) || (want == ingest.Failed) != strings.Contains(e.Error, errFull.Error()) {
			t.Errorf("manifest[%d] = %+v, want %s <f%d@x>", i, e, want, i)
		}
	}
	if len(m) != 30 {
		t.Errorf("manifest = %d lines, want 30 (nothing of the fourth batch, never begun)", len(m))
	}
	if c, _ := st.Count(ctx); c != 20 {
		t.Errorf("Count() = %d, want 20", c)
	}
}

// More messages than one run numbers: the importer takes a second run
// without the caller noticing, and records both leases in the store.
func TestImportTakesNewRuns(t *testing.T) {
	if testing.Short() {
		t.Skip("imports 17,000 messages")
	}
	ctx := context.Background()
	st, runs := newArchive(t)
	const n = callnumber.SequencesPerRun + 616
	var list []ingest.Item
	for i := range n {
		list = append(list, ingest.Item{Raw: []byte(fmt.Sprintf("Message-ID: <r%d@x>\n\n%d\n", i, i))})
	}
	var manifest bytes.Buffer
	s, err := ingest.Import(ctx, &items{list: list}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &manifest})
	if err != nil || s.Imported != n {
		t.Fatalf("Import() = %+v, %v; want %d imported", s, err, n)
	}
	b, err := st.Binding(ctx)
	if err != nil {
		t.Fatal(err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	perRun := map[uint32]int{}
	seen := map[string]bool{}
	for _, e := range readManifest(t, manifest.Bytes()) {
		if seen[e.CallNumber] {
			t.Fatalf("call number %s handed out twice", e.CallNumber)
		}
		seen[e.CallNumber] = true
		_, f, err := codec.Parse(e.CallNumber)
		if err != nil {
			t.Fatal(err)
		}
		perRun[f.Run]++
	}
	if len(perRun) != 2 {
		t.Fatalf("messages spread over runs %v, want two runs", perRun)
	}
	for run := range perRun {
		if _, err := st.Lease(ctx, run); err != nil {
			t.Errorf("Lease(%d) error = %v, want the recorded lease", run, err)
		}
	}
}

func corpusItems(tb testing.TB) []ingest.Item {
	tb.Helper()
	src, err := mailsource.Open(context.Background(), testcorpus.Path(tb), mailsource.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	var out []ingest.Item
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, ingest.Item{Raw: it.Raw, Where: it.Where, Err: it.Err})
	}
}

// The shared corpus round trip: every message read back equals the
// original bytes, and a second import finds 5,256 duplicates under the
// same call numbers.
func TestImportCorpusRoundTrip(t *testing.T) {
	ctx := context.Background()
	list := corpusItems(t)
	if len(list) != testcorpus.Messages {
		t.Fatalf("corpus has %d messages, want %d", len(list), testcorpus.Messages)
	}
	st, runs := newArchive(t)
	var first, second bytes.Buffer
	s, err := ingest.Import(ctx, &items{list: list}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &first})
	if err != nil || s.Imported != testcorpus.Messages || s.Failed != 0 {
		t.Fatalf("first Import() = %+v, %v; want %d imported", s, err, testcorpus.Messages)
	}
	m1 := readManifest(t, first.Bytes())
	for i, e := range m1 {
		n, err := callnumber.Parse(e.CallNumber)
		if err != nil {
			t.Fatal(err)
		}
		got, err := st.Get(ctx, n)
		if err != nil {
			t.Fatalf("Get(%s) error = %v", n, err)
		}
		if !bytes.Equal(got.Raw, list[i].Raw) {
			t.Fatalf("message %d (%s) read back differs from the original (%d vs %d bytes)", i, list[i].Where, len(got.Raw), len(list[i].Raw))
		}
	}
	s, err = ingest.Import(ctx, &items{list: list}, ingest.ImportOptions{Archiver: newArchiver(t, st, runs), Manifest: &second})
	if err != nil || s.Duplicates != testcorpus.Messages || s.Imported != 0 {
		t.Fatalf("second Import() = %+v, %v; want %d duplicates", s, err, testcorpus.Messages)
	}
	for i, e := range readManifest(t, second.Bytes()) {
		if e.CallNumber != m1[i].CallNumber {
			t.Fatalf("re-import of message %d gave %s, want the stored %s", i, e.CallNumber, m1[i].CallNumber)
		}
	}
	if c, err := st.Count(ctx); err != nil || c != testcorpus.Messages {
		t.Errorf("Count() = %d, %v; want %d", c, err, testcorpus.Messages)
	}
}

// BenchmarkImportCorpus imports the corpus (already in memory) into a
// fresh store: the pipeline and store alone, without reading the file.
func BenchmarkImportCorpus(b *testing.B) {
	list := corpusItems(b)
	var size int64
	for _, it := range list {
		size += int64(len(it.Raw))
	}
	b.SetBytes(size)
	b.ReportAllocs()
	for b.Loop() {
		b.StopTimer()
		st, runs := newArchive(b)
		a := newArchiver(b, st, runs)
		b.StartTimer()
		s, err := ingest.Import(context.Background(), &items{list: list}, ingest.ImportOptions{Archiver: a})
		if err != nil || s.Imported != int64(len(list)) {
			b.Fatalf("Import() = %+v, %v", s, err)
		}
	}
	b.ReportMetric(float64(len(list)*b.N)/b.Elapsed().Seconds(), "msgs/s")
}

func TestParsePartition(t *testing.T) {
	for _, tt := range []struct {
		in   string
		k, n int
	}{{"", 0, 0}, {"1/1", 1, 1}, {"2/4", 2, 4}, {"4/4", 4, 4}} {
		if k, n, err := ingest.ParsePartition(tt.in); err != nil || k != tt.k || n != tt.n {
			t.Errorf("ParsePartition(%q) = %d, %d, %v; want %d, %d", tt.in, k, n, err, tt.k, tt.n)
		}
	}
	for _, bad := range []string{"0/2", "3/2", "1/0", "-1/2", "1/-2", "two", "1/2/3", "/2", "1/", " 1/2"} {
		if _, _, err := ingest.ParsePartition(bad); !errors.Is(err, ingest.ErrPartition) {
			t.Errorf("ParsePartition(%q) error = %v, want ErrPartition", bad, err)
		}
	}
}

func FuzzParsePartition(f *testing.F) {
	for _, s := range []string{"", "1/2", "0/0", "9/3", "1/2/3"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		k, n, err := ingest.ParsePartition(s)
		if err != nil {
			return
		}
		if s == "" {
			if k != 0 || n != 0 {
				t.Fatalf("ParsePartition(%q) = %d/%d, want 0/0", s, k, n)
			}
			return
		}
		if k < 1 || k > n {
			t.Fatalf("ParsePartition(%q) = %d/%d, outside 1 <= K <= N", s, k, n)
		}
		k2, n2, err := ingest.ParsePartition(fmt.Sprintf("%d/%d", k, n))
		if err != nil || k2 != k || n2 != n {
			t.Fatalf("ParsePartition(%q) = %d/%d, which reads back as %d/%d, %v", s, k, n, k2, n2, err)
		}
	})
}

// stalling yields its messages, then blocks until release hands it more
// (or is closed): an input that stops coming for a while (a pipe, a slow
// disk).
type stalling struct {
	items
	release chan []ingest.Item
}

func (s *stalling) Next() (ingest.Item, error) {
	if len(s.list) == 0 {
		s.list = <-s.release
	}
	return s.items.Next()
}

// Every batch stored is in the manifest (and the progress) at once, even
// while the input stalls and no later batch comes to take its place.
func TestManifestKeepsUp(t *testing.T) {
	st, runs := newArchive(t)
	src := &stalling{release: make(chan []ingest.Item, 1)}
	// Two whole chunks reach the writer (chunkMessages is 128): four
	// batches of 64, stored while the input stalls.
	var all []ingest.Item
	for i := range 300 {
		all = append(all, ingest.Item{Raw: msg(fmt.Sprintf("k%d@x", i), fmt.Sprint(i))})
	}
	src.list = all[:256]
	var manifest syncbuf.Buffer
	var batches atomic.Int64
	done := make(chan error, 1)
	go func() {
		_, err := ingest.Import(t.Context(), src, ingest.ImportOptions{
			Archiver: newArchiver(t, st, runs), BatchMessages: 64, Manifest: &manifest,
			OnBatch: func(ingest.Stats) { batches.Add(1) },
		})
		done <- err
	}()
	deadline := time.Now().Add(20 * time.Second)
	for len(readManifest(t, manifest.Bytes())) < 256 {
		if time.Now().After(deadline) {
			t.Fatalf("while the input stalls, the manifest has %d entries, want the 256 of the 4 batches stored", len(readManifest(t, manifest.Bytes())))
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := batches.Load(); n != 4 {
		t.Errorf("OnBatch called %d times while the input stalls, want 4", n)
	}
	src.release <- all[256:]
	close(src.release)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	if m := readManifest(t, manifest.Bytes()); len(m) != 300 {
		t.Errorf("manifest = %d entries, want 300", len(m))
	}
}
