package compress

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// memDicts is a store's dictionaries in memory, with the messages it
// holds to sample from.
type memDicts struct {
	mu       sync.Mutex
	dicts    map[record.DictID][]byte
	cur      *record.Current
	msgs     [][]byte
	saves    int
	sets     int
	loads    atomic.Int64
	failLoad error
}

func newMem() *memDicts { return &memDicts{dicts: map[record.DictID][]byte{}} }

func (m *memDicts) LoadDict(_ context.Context, id record.DictID) ([]byte, error) {
	m.loads.Add(1)
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.failLoad != nil {
		return nil, m.failLoad
	}
	b, ok := m.dicts[id]
	if !ok {
		return nil, fmt.Errorf("%w: dictionary %v", store.ErrNotFound, id)
	}
	return b, nil
}

func (m *memDicts) SaveDict(_ context.Context, id record.DictID, b []byte) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	// What a store keeps is the stored form: compressed, smaller.
	d, err := record.CheckDictionary(id, b)
	if err != nil {
		return fmt.Errorf("SaveDict(%v): %w", id, err)
	}
	if len(b) >= len(d.Bytes) {
		return fmt.Errorf("SaveDict(%v) of %d bytes, the dictionary's own %d: want its stored (compressed) form", id, len(b), len(d.Bytes))
	}
	m.saves++
	m.dicts[id] = bytes.Clone(b)
	return nil
}

func (m *memDicts) CurrentDict(context.Context) (record.Current, bool, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.cur == nil {
		return record.Current{}, false, nil
	}
	return *m.cur, true, nil
}

func (m *memDicts) SetCurrentDict(_ context.Context, c record.Current) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.dicts[c.ID]; !ok {
		return fmt.Errorf("SetCurrentDict(%v): not saved", c.ID)
	}
	m.sets++
	m.cur = &c
	return nil
}

func (m *memDicts) Sample(_ context.Context, n int, maxBytes int64) ([][]byte, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out [][]byte
	var size int64
	for i := len(m.msgs) - 1; i >= 0 && len(out) < n && size < maxBytes; i-- {
		if len(m.msgs[i]) > record.MaxSample {
			continue
		}
		out = append(out, m.msgs[i])
		size += int64(len(m.msgs[i]))
	}
	return out, nil
}

// put encodes msgs with c, "stores" them in m and tells c.
func (m *memDicts) put(t *testing.T, c *Compressor, msgs []store.Message) [][]byte {
	t.Helper()
	recs, err := c.Encode(t.Context(), msgs, nil, time.Now())
	if err != nil {
		t.Fatalf("Encode = %v", err)
	}
	m.mu.Lock()
	for _, msg := range msgs {
		m.msgs = append(m.msgs, msg.Raw)
	}
	n := len(m.msgs)
	m.mu.Unlock()
	c.Stored(t.Context(), int64(n))
	return recs
}

func mail(i int) []byte {
	return fmt.Appendf(nil, "Received: from mail.linux-mips.org ([127.0.0.1]:40%03d \"EHLO mail.linux-mips.org\")\n"+
		"\tby eddie.linux-mips.org with ESMTP id S23%05dAbc; Mon, 3 Nov 2008 10:%02d:00 +0000\n"+
		"From: Developer %d <dev%d@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH] MIPS: frobnicate %d\n"+
		"Message-ID: <%d@example.org>\nSender: linux-mips-bounce@linux-mips.org\nPrecedence: bulk\nX-list: linux-mips\n\n"+
		"%s\n", i%1000, i, i%60, i%17, i%17, i, i, strings.Repeat(fmt.Sprintf("body line %d\n", i%7), 10))
}

func batch(from, n int) []store.Message {
	var msgs []store.Message
	for i := from; i < from+n; i++ {
		raw := mail(i)
		msgs = append(msgs, store.Message{Number: callnumber.Number(i + 1), Raw: raw, Digest: store.DigestOf(raw), MessageID: fmt.Sprint(i, "@example.org"), List: "linux-mips"})
	}
	return msgs
}

func header(t *testing.T, rec []byte) record.Header {
	t.Helper()
	h, _, err := record.ParseHeader(rec)
	if err != nil {
		t.Fatalf("ParseHeader = %v", err)
	}
	return h
}

func decodeAll(t *testing.T, c *Compressor, m *memDicts, msgs []store.Message, recs [][]byte) {
	t.Helper()
	for i, rec := range recs {
		got, err := c.Decode(rec, func(id record.DictID) ([]byte, error) { return m.LoadDict(t.Context(), id) })
		if err != nil || !bytes.Equal(got.Raw, msgs[i].Raw) || got.MessageID != msgs[i].MessageID || got.List != msgs[i].List {
			t.Fatalf("Decode(record %d) = %q, %v; want the message back", i, got.Raw, err)
		}
	}
}

// TestLifeCycle: no dictionary before TrainAt; the Put that reaches it
// trains one before returning and later records use it; a newer one comes
// once the store has grown Retrain times; old records stay readable.
func TestLifeCycle(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{TrainAt: 100}, nil)
	defer c.Close()

	first := batch(0, 60)
	recs := m.put(t, c, first)
	for i, r := range recs {
		if h := header(t, r); h.Compression != record.Zstd {
			t.Fatalf("record %d before TrainAt: %v, want zstd without dictionary", i, h.Compression)
		}
	}
	if m.saves != 0 {
		t.Fatalf("a dictionary was saved below TrainAt")
	}
	second := batch(60, 60) // the store reaches 120 >= TrainAt
	recs2 := m.put(t, c, second)
	if m.saves != 1 || m.sets != 1 || m.cur == nil {
		t.Fatalf("after reaching TrainAt: %d saved, %d set current; want 1, 1", m.saves, m.sets)
	}
	if m.cur.Messages != 120 || m.cur.Samples != 120 {
		t.Errorf("current = %+v, want trained at 120 messages on 120 samples", *m.cur)
	}
	firstDict := m.cur.ID
	third := batch(120, 50)
	recs3 := m.put(t, c, third)
	var sizeDict, sizePlain int
	for i, r := range recs3 {
		h := header(t, r)
		if h.Compression != record.ZstdDict || h.Dict != firstDict {
			t.Fatalf("record %d after training: %v %v, want the dictionary %v", i, h.Compression, h.Dict, firstDict)
		}
		sizeDict += len(r)
	}
	for _, r := range recs2 {
		sizePlain += len(r)
	}
	if sizeDict*10 > sizePlain*6 {
		t.Errorf("50 records with the dictionary: %d bytes; 60 without: %d", sizeDict, sizePlain)
	}
	decodeAll(t, c, m, first, recs)
	decodeAll(t, c, m, third, recs3)

	// Grow to eight times the size at training: a newer dictionary, in
	// the background.
	for i := 170; i < 960; i += 100 {
		m.put(t, c, batch(i, 100))
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		m.mu.Lock()
		id := m.cur.ID
		m.mu.Unlock()
		if id != firstDict {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no newer dictionary after the store grew eight times")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if m.cur.Messages < 8*120 {
		t.Errorf("newer dictionary trained at %d messages, want at least %d", m.cur.Messages, 8*120)
	}
	// A new Compressor (another process) reads both kinds of record.
	c2 := New(m, store.Compression{}, nil)
	defer c2.Close()
	decodeAll(t, c2, m, third, recs3)
	last := batch(2000, 3)
	recs4, err := c2.Encode(t.Context(), last, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	if h := header(t, recs4[0]); h.Dict != m.cur.ID {
		t.Errorf("another process writes with %v, want the current %v", h.Dict, m.cur.ID)
	}
	decodeAll(t, c2, m, last, recs4)
}

// TestTwoWritersTrain: two processes reaching TrainAt at once each train;
// the last to set the current dictionary wins, both dictionaries stay,
// and every record reads back.
func TestTwoWritersTrain(t *testing.T) {
	m := newMem()
	a := New(m, store.Compression{TrainAt: 100}, nil)
	b := New(m, store.Compression{TrainAt: 100}, nil)
	defer a.Close()
	defer b.Close()
	m.put(t, a, batch(0, 50))
	m.put(t, b, batch(50, 50)) // b trains at 100
	m.mu.Lock()
	m.cur = nil // as if a had not seen it: make a train too
	m.mu.Unlock()
	a.mu.Lock()
	a.checked = time.Time{}
	a.mu.Unlock()
	m.put(t, a, batch(100, 10))
	if len(m.dicts) != 2 && len(m.dicts) != 1 {
		t.Fatalf("%d dictionaries saved, want 1 or 2", len(m.dicts))
	}
	if m.saves != 2 {
		t.Errorf("%d saves, want 2 (each writer trained)", m.saves)
	}
	msgs := batch(200, 20)
	ra, _ := a.Encode(t.Context(), msgs, nil, time.Now())
	// b still uses its own until it rereads the current one.
	rb, _ := b.Encode(t.Context(), msgs, nil, time.Now())
	c := New(m, store.Compression{}, nil)
	defer c.Close()
	decodeAll(t, c, m, msgs, ra)
	decodeAll(t, c, m, msgs, rb)
}

func TestRetrainDue(t *testing.T) {
	tests := []struct {
		trainedAt, count, retrain int64
		want                      bool
	}{
		{1000, 7999, 8, false},
		{1000, 8000, 8, true},
		{8000, 17999, 8, false},
		{8000, 18000, 8, true},
		{500000, 509999, 8, false},
		{500000, 510000, 8, true},
		{0, 7, 8, false},
		{0, 8, 8, true},
		// Doubling (a Riak store): 2,000, 4,000, 8,000, then every 10,000.
		{1000, 1999, 2, false},
		{1000, 2000, 2, true},
		{4000, 8000, 2, true},
		{8000, 15999, 2, false},
		{8000, 16000, 2, true},
		{16000, 25999, 2, false},
		{16000, 26000, 2, true},
	}
	for _, tt := range tests {
		if got := retrainDue(record.Current{Messages: tt.trainedAt}, tt.count, tt.retrain); got != tt.want {
			t.Errorf("retrainDue(trained at %d, %d messages, x%d) = %v, want %v", tt.trainedAt, tt.count, tt.retrain, got, tt.want)
		}
	}
	// The options: zero is the default, and less than 2 never retrains at
	// every Put.
	for _, tt := range []struct{ opt, want int64 }{{0, DefaultRetrain}, {1, 2}, {-5, 2}, {2, 2}, {3, 3}} {
		if c := New(newMem(), store.Compression{Retrain: tt.opt}, nil); c.retrain != tt.want {
			t.Errorf("New(Retrain: %d).retrain = %d, want %d", tt.opt, c.retrain, tt.want)
		}
	}
}

// TestRetrainDoubling: a store set to retrain as it doubles trains at
// TrainAt, then at twice that, in the background, and its later records
// name the newer dictionary.
func TestRetrainDoubling(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{TrainAt: 100, Retrain: 2}, nil)
	defer c.Close()
	m.put(t, c, batch(0, 120)) // trains the first, at 120
	first := m.cur.ID
	m.put(t, c, batch(120, 100)) // 220 < 240: no newer one
	c.wg.Wait()
	if m.saves != 1 {
		t.Fatalf("%d dictionaries saved at 220 messages, trained at 120; want 1", m.saves)
	}
	m.put(t, c, batch(220, 30)) // 250 >= 240: a newer one, in the background
	c.wg.Wait()
	if m.saves != 2 || m.cur.ID == first || m.cur.Messages != 250 {
		t.Fatalf("after doubling: %d saved, current %+v; want a second one, trained at 250", m.saves, *m.cur)
	}
	c.checked = time.Time{} // read the current one again at the next Put
	recs := m.put(t, c, batch(250, 5))
	if h := header(t, recs[0]); h.Dict != m.cur.ID {
		t.Errorf("record after retraining names %v, want the newer dictionary %v", h.Dict, m.cur.ID)
	}
}

func TestOff(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{Off: true, TrainAt: 10}, nil)
	defer c.Close()
	msgs := batch(0, 30)
	recs := m.put(t, c, msgs)
	for i, r := range recs {
		if h := header(t, r); h.Version != record.Version1 {
			t.Fatalf("record %d with compression off: version %d, want 1", i, h.Version)
		}
	}
	if m.saves != 0 {
		t.Errorf("a dictionary was trained with compression off")
	}
	decodeAll(t, c, m, msgs, recs)
}

func TestNeverTrain(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{TrainAt: -1}, nil)
	defer c.Close()
	recs := m.put(t, c, batch(0, 1200))
	if m.saves != 0 {
		t.Errorf("a dictionary was trained with TrainAt < 0")
	}
	if h := header(t, recs[len(recs)-1]); h.Compression != record.Zstd {
		t.Errorf("record with TrainAt < 0: %v, want zstd", h.Compression)
	}
}

func TestSkip(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{}, nil)
	defer c.Close()
	msgs := batch(0, 5)
	recs, err := c.Encode(t.Context(), msgs, []bool{false, true, false, true, true}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range recs {
		if (r == nil) != (i == 1 || i >= 3) {
			t.Errorf("record %d: %d bytes; want nil exactly for the skipped", i, len(r))
		}
	}
}

// TestMissingDictionary: a record naming a dictionary the store lacks is
// an error that names it; a damaged dictionary is refused; a dictionary
// is read from the store once per process.
func TestMissingDictionary(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{TrainAt: 50}, nil)
	defer c.Close()
	m.put(t, c, batch(0, 60))
	msgs := batch(100, 3)
	recs := m.put(t, c, msgs)
	id := header(t, recs[0]).Dict

	other := New(m, store.Compression{}, nil) // another process
	defer other.Close()
	loads := m.loads.Load()
	decodeAll(t, other, m, msgs, recs)
	if got := m.loads.Load() - loads; got != 1 {
		t.Errorf("3 records with one dictionary: %d loads, want 1", got)
	}

	saved := m.dicts[id]
	delete(m.dicts, id)
	fresh := New(m, store.Compression{}, nil)
	defer fresh.Close()
	_, err := fresh.Decode(recs[0], func(id record.DictID) ([]byte, error) { return m.LoadDict(t.Context(), id) })
	if !errors.Is(err, record.ErrNoDictionary) || !strings.Contains(err.Error(), id.String()) {
		t.Errorf("Decode(record of a missing dictionary) = %v; want %v naming %v", err, record.ErrNoDictionary, id)
	}
	damaged := bytes.Clone(saved)
	damaged[len(damaged)-10] ^= 1
	m.dicts[id] = damaged
	_, err = fresh.Decode(recs[0], func(id record.DictID) ([]byte, error) { return m.LoadDict(t.Context(), id) })
	if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), id.String()) {
		t.Errorf("Decode(record of a damaged dictionary) = %v; want %v naming %v", err, record.ErrCorrupt, id)
	}
	m.failLoad = errors.New("network down")
	_, err = fresh.Decode(recs[0], func(id record.DictID) ([]byte, error) { return m.LoadDict(t.Context(), id) })
	if err == nil || errors.Is(err, record.ErrNoDictionary) || !strings.Contains(err.Error(), "network down") {
		t.Errorf("Decode while the dictionary cannot be read = %v; want that error, not a missing dictionary", err)
	}
}

// failing makes Sample fail, to test that a failed training is retried
// only once the store has doubled.
type failing struct {
	*memDicts
	samples atomic.Int64
}

func (f *failing) Sample(context.Context, int, int64) ([][]byte, error) {
	f.samples.Add(1)
	return nil, errors.New("disk on fire")
}

func TestTrainingFails(t *testing.T) {
	f := &failing{memDicts: newMem()}
	var logs bytes.Buffer
	c := New(f, store.Compression{TrainAt: 10}, slog.New(slog.NewTextHandler(&logs, nil)))
	defer c.Close()
	msgs := batch(0, 10)
	recs, err := c.Encode(t.Context(), msgs, nil, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	c.Stored(t.Context(), 10)
	c.Stored(t.Context(), 15)
	c.Stored(t.Context(), 19)
	if n := f.samples.Load(); n != 1 {
		t.Errorf("%d trainings before the store doubled, want 1", n)
	}
	c.Stored(t.Context(), 20)
	if n := f.samples.Load(); n != 2 {
		t.Errorf("%d trainings once the store doubled, want 2", n)
	}
	if !strings.Contains(logs.String(), "disk on fire") {
		t.Errorf("log %q does not say why training failed", logs.String())
	}
	decodeAll(t, c, f.memDicts, msgs, recs)
}

// The store's Level decides how hard its records are compressed: each
// level's records read back, and a harder level's are smaller.
func TestLevel(t *testing.T) {
	msgs := batch(0, 80)
	var sizes []int
	for _, l := range []store.CompressionLevel{store.LevelFastest, store.LevelStrong} {
		m := newMem()
		c := New(m, store.Compression{TrainAt: -1, Level: l}, nil)
		recs := m.put(t, c, msgs)
		decodeAll(t, c, m, msgs, recs)
		n := 0
		for _, r := range recs {
			n += len(r)
		}
		sizes = append(sizes, n)
		c.Close()
	}
	if sizes[1] >= sizes[0] {
		t.Errorf("80 records at the fastest (S2) and strong (zstd) levels: %v bytes; want the strong level's smaller", sizes)
	}
	for _, l := range []store.CompressionLevel{store.LevelBackend, store.CompressionLevel(9)} {
		if got := recordLevel(l); got != record.Fast {
			t.Errorf("recordLevel(%d) = %v, want record.Fast", l, got)
		}
	}
}

// TestDictCacheBounded: a Compressor keeps at most DefaultCachedDicts
// dictionaries besides the current one, however many its records name,
// and a record of one let go still reads (the dictionary read again).
func TestDictCacheBounded(t *testing.T) {
	m := newMem()
	c := New(m, store.Compression{TrainAt: -1}, nil)
	defer c.Close()
	const dicts = DefaultCachedDicts + 3
	msgs, recs := eras(t, m, c, dicts)
	// Read them all, twice over, oldest first: each a dictionary let go.
	loads := m.loads.Load()
	for range 2 {
		decodeAll(t, c, m, msgs, recs)
		if n := c.cache.len(); n > DefaultCachedDicts {
			t.Fatalf("%d dictionaries cached after reading records of %d; want at most %d", n, dicts, DefaultCachedDicts)
		}
	}
	if got := m.loads.Load() - loads; got < 2*(dicts-DefaultCachedDicts-1) {
		t.Errorf("%d dictionaries read again for records of %d, with %d cached; want those let go read again", got, dicts, DefaultCachedDicts)
	}
	// The current one is never read again, cached or not.
	loads = m.loads.Load()
	for range 3 {
		m.put(t, c, batch(100000, 2))
	}
	if got := m.loads.Load() - loads; got != 0 {
		t.Errorf("the current dictionary read %d times more to encode; want 0", got)
	}
}

// eras stores two messages through c in each of n eras, each era with a
// dictionary of its own made current before it, and returns the messages
// and their records. c's cache stays within its bound throughout.
func eras(t *testing.T, m *memDicts, c *Compressor, n int) ([]store.Message, [][]byte) {
	t.Helper()
	var msgs []store.Message
	var recs [][]byte
	for k := range n {
		var samples [][]byte
		for _, msg := range batch(1000*k, 150) {
			samples = append(samples, msg.Raw)
		}
		b, err := record.Train(t.Context(), samples)
		if err != nil {
			t.Fatal(err)
		}
		id := record.IDOf(b)
		if err := m.SaveDict(t.Context(), id, record.StoredDict(b)); err != nil {
			t.Fatal(err)
		}
		if err := m.SetCurrentDict(t.Context(), record.Current{ID: id}); err != nil {
			t.Fatal(err)
		}
		c.checked = time.Time{} // read the current one again
		b1 := batch(1000*k+500, 2)
		r := m.put(t, c, b1)
		if h := header(t, r[0]); h.Dict != id {
			t.Fatalf("record names dictionary %v, want the current %v", h.Dict, id)
		}
		msgs, recs = append(msgs, b1...), append(recs, r...)
		if got := c.cache.len(); got > c.cache.max {
			t.Fatalf("%d dictionaries cached after %d made current; want at most %d", got, k+1, c.cache.max)
		}
	}
	if len(m.dicts) != n {
		t.Fatalf("%d distinct dictionaries trained, want %d", len(m.dicts), n)
	}
	return msgs, recs
}

// TestCachedDicts: store.Compression.CachedDicts sets how many
// dictionaries a Compressor keeps, so that a reader keeping as many as the
// records it reads name reads each once, and one keeping fewer reads
// them again; zero or less keeps DefaultCachedDicts.
func TestCachedDicts(t *testing.T) {
	m := newMem()
	w := New(m, store.Compression{TrainAt: -1}, nil)
	const dicts = DefaultCachedDicts + 4
	msgs, recs := eras(t, m, w, dicts)
	w.Close()
	for _, tc := range []struct {
		cached, want int // want: the cache's bound
	}{{0, DefaultCachedDicts}, {-3, DefaultCachedDicts}, {3, 3}, {dicts, dicts}} {
		r := New(m, store.Compression{TrainAt: -1, CachedDicts: tc.cached}, nil)
		loads := m.loads.Load()
		for range 3 {
			decodeAll(t, r, m, msgs, recs)
			if n := r.cache.len(); n > tc.want {
				t.Errorf("CachedDicts %d: %d dictionaries cached; want at most %d", tc.cached, n, tc.want)
			}
		}
		// Each pass reads its eras oldest first, so that a cache of fewer
		// than all of them has let go of each before it is read again.
		got := int(m.loads.Load() - loads)
		switch {
		case tc.want >= dicts && got > dicts:
			t.Errorf("CachedDicts %d: %d dictionaries read for three passes over %d; want each once", tc.cached, got, dicts)
		case tc.want < dicts && got < 3*(dicts-tc.want-1):
			t.Errorf("CachedDicts %d: %d dictionaries read for three passes over %d; want at least %d", tc.cached, got, dicts, 3*(dicts-tc.want-1))
		}
		r.Close()
	}
}

func TestDictCache(t *testing.T) {
	c := dictCache{max: 3}
	var ds []*record.Dictionary
	b := dictionaryFor(t).Bytes
	for i := range 6 {
		d, err := record.NewDictionary(b)
		if err != nil {
			t.Fatal(err)
		}
		d.ID = record.DictID{byte(i + 1)} // six to tell apart
		ds = append(ds, d)
	}
	for i, d := range ds[:5] {
		c.put(d)
		if c.len() > 3 || len(c.order) != c.len() {
			t.Fatalf("after %d puts: %d cached, order %d; want at most 3, the same", i+1, c.len(), len(c.order))
		}
	}
	// 2, 3, 4 remain; using 2 makes 3 the least recently used.
	if c.get(ds[0].ID) != nil || c.get(ds[1].ID) != nil || c.get(ds[2].ID) != ds[2] {
		t.Fatalf("cache of 3 after 5 puts: want the last 3 only")
	}
	c.put(ds[5])
	if c.get(ds[3].ID) != nil || c.get(ds[2].ID) != ds[2] || c.get(ds[4].ID) != ds[4] || c.get(ds[5].ID) != ds[5] {
		t.Errorf("after using 2 and putting 5: want 2, 4 and 5 cached, 3 let go")
	}
	c.put(ds[5]) // again: no double entry
	if c.len() != 3 || len(c.order) != 3 {
		t.Errorf("after putting one cached again: %d cached, order %d; want 3", c.len(), len(c.order))
	}
}

// dictionaryFor trains a small dictionary.
func dictionaryFor(t *testing.T) *record.Dictionary {
	var samples [][]byte
	for _, msg := range batch(0, 300) {
		samples = append(samples, msg.Raw)
	}
	b, err := record.Train(t.Context(), samples)
	if err != nil {
		t.Fatal(err)
	}
	d, err := record.NewDictionary(b)
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// TestDictLoadedOnce: records decoded at once that need one dictionary not
// yet cached (a page of search results just after start) read and check
// it once between them; a caller whose load fails does not fail the
// others, which read it for themselves.
func TestDictLoadedOnce(t *testing.T) {
	m := newMem()
	d := dictionaryFor(t)
	if err := m.SaveDict(t.Context(), d.ID, record.StoredDict(d.Bytes)); err != nil {
		t.Fatal(err)
	}
	if err := m.SetCurrentDict(t.Context(), record.Current{ID: d.ID}); err != nil {
		t.Fatal(err)
	}
	w := New(m, store.Compression{TrainAt: -1}, nil)
	defer w.Close()
	msgs := batch(5000, 16)
	recs := m.put(t, w, msgs)

	// The first load is held until a second one starts, or for 300 ms:
	// reading each on its own, the 16 would load it up to 16 times.
	r := New(m, store.Compression{TrainAt: -1}, nil)
	defer r.Close()
	var loads atomic.Int64
	second := make(chan struct{})
	load := func(id record.DictID) ([]byte, error) {
		switch loads.Add(1) {
		case 1:
			select {
			case <-second:
			case <-time.After(300 * time.Millisecond):
			}
		case 2:
			close(second)
		}
		return m.LoadDict(t.Context(), id)
	}
	var wg sync.WaitGroup
	errs := make([]error, len(recs))
	for i, rec := range recs {
		wg.Go(func() {
			got, err := r.Decode(rec, load)
			if err == nil && !bytes.Equal(got.Raw, msgs[i].Raw) {
				err = errors.New("decoded another message")
			}
			errs[i] = err
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	if n := loads.Load(); n != 1 {
		t.Errorf("the dictionary read %d times for %d records decoded at once; want once", n, len(recs))
	}

	// A load that fails is that caller's: one waiting on it reads the
	// dictionary itself.
	r2 := New(m, store.Compression{TrainAt: -1}, nil)
	defer r2.Close()
	started := make(chan struct{})
	failing := func(record.DictID) ([]byte, error) {
		close(started)
		time.Sleep(100 * time.Millisecond)
		return nil, context.Canceled
	}
	var failErr error
	wg.Go(func() { _, failErr = r2.Decode(recs[0], failing) })
	<-started
	got, err := r2.Decode(recs[1], func(id record.DictID) ([]byte, error) { return m.LoadDict(t.Context(), id) })
	wg.Wait()
	if !errors.Is(failErr, context.Canceled) {
		t.Errorf("the failing load's caller got %v; want its own error", failErr)
	}
	if err != nil || !bytes.Equal(got.Raw, msgs[1].Raw) {
		t.Errorf("a caller beside a failing load got %v; want its message", err)
	}
}
