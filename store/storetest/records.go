package storetest

// Conformance tests of what a backend keeps beneath the Store interface:
// records of every format the store has written, compression and its
// dictionaries, and damaged records. The tests that plant records need
// the store under test to be a Tamperer; they skip otherwise.

import (
	"bytes"
	"context"
	"embed"
	"encoding/json"
	"errors"
	"fmt"
	"path"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Tamperer is implemented by a store under test (usually a wrapper in
// the backend's test) to let the suite reach beneath the Store interface:
// to plant the records an older version wrote, or the damage a disk does.
type Tamperer interface {
	// Record returns the value stored for message n, as the backend
	// keeps it (a store/internal/record message record).
	Record(ctx context.Context, n callnumber.Number) ([]byte, error)
	// SetRecord replaces the value stored for message n, bypassing every
	// check. The message's indexes are left as they are.
	SetRecord(ctx context.Context, n callnumber.Number, v []byte) error
	// SaveDict stores b as the compression dictionary id, unchecked.
	SaveDict(ctx context.Context, id record.DictID, b []byte) error
	// Compression returns the store's compression options as it uses
	// them: with the backend's own defaults in place of zero values.
	Compression() store.Compression
}

var recordTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"RecordFormats", testRecordFormats},
	{"MissingDictionary", testMissingDictionary},
	{"CorruptRecord", testCorruptRecord},
	{"Compression", testCompression},
	{"ConcurrentTraining", testConcurrentTraining},
}

//go:embed testdata/records
var fixtureFS embed.FS

// recordFixture is a frozen record of testdata/records and what it
// holds.
type recordFixture struct {
	Record    string    `json:"record"`
	RawFile   string    `json:"raw"`
	DictFile  string    `json:"dict"`
	Version   uint8     `json:"version"`
	MessageID string    `json:"message_id"`
	List      string    `json:"list"`
	Added     time.Time `json:"added"`

	rec, raw, dict []byte
}

func fixtures(t *testing.T) []recordFixture {
	t.Helper()
	read := func(name string) []byte {
		b, err := fixtureFS.ReadFile(path.Join("testdata/records", name))
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	var fx []recordFixture
	if err := json.Unmarshal(read("records.json"), &fx); err != nil {
		t.Fatal(err)
	}
	for i := range fx {
		fx[i].rec, fx[i].raw = read(fx[i].Record), read(fx[i].RawFile)
		if fx[i].DictFile != "" {
			fx[i].dict = read(fx[i].DictFile)
		}
	}
	return fx
}

func tamperer(t *testing.T, s store.Store) Tamperer {
	t.Helper()
	tp, ok := s.(Tamperer)
	if !ok {
		t.Skipf("the test cannot put damaged records into this store (%T does not implement storetest.Tamperer)", s)
	}
	return tp
}

// plant puts fx's message under n, then replaces its record by fx's (and
// saves fx's dictionary if withDict).
func plant(t *testing.T, f tampered, fx recordFixture, n callnumber.Number, withDict bool) store.Message {
	t.Helper()
	m := Message(n, fx.raw, fx.MessageID, fx.List)
	mustPut(t, f.s, m)
	if withDict && fx.dict != nil {
		if err := f.tp.SaveDict(t.Context(), record.IDOf(fx.dict), fx.dict); err != nil {
			t.Fatalf("SaveDict = %v", err)
		}
	}
	if err := f.tp.SetRecord(t.Context(), n, fx.rec); err != nil {
		t.Fatalf("SetRecord(%v) = %v", n, err)
	}
	return m
}

// tampered is a fixture whose store is a Tamperer.
type tampered struct {
	fixture
	tp Tamperer
}

func setupTamper(t *testing.T, open Opener) tampered {
	t.Helper()
	f := setup(t, open)
	return tampered{fixture: f, tp: tamperer(t, f.s)}
}

// testRecordFormats: a store reads the records of every format it has
// ever written, byte for byte, through every way of reading; a retried
// Put finds them; and they survive a reopen.
func testRecordFormats(t *testing.T, open Opener) {
	f := setupTamper(t, open)
	fx := fixtures(t)
	versions := map[uint8]bool{}
	var planted []store.Message
	for i, x := range fx {
		m := plant(t, f, x, f.auth.Number(t, 1, i), true)
		planted = append(planted, m)
		versions[x.Version] = true
	}
	for _, v := range []uint8{record.Version1, record.Version2} {
		if !versions[v] {
			t.Errorf("no fixture of record version %d", v)
		}
	}
	check := func(t *testing.T, s store.Store) {
		for i, x := range fx {
			t.Run(x.Record, func(t *testing.T) {
				m := planted[i]
				got, err := s.Get(t.Context(), m.Number)
				if err != nil {
					t.Fatalf("Get(%v) = %v", m.Number, err)
				}
				if got.Number != m.Number || !bytes.Equal(got.Raw, m.Raw) || got.Digest != m.Digest || got.MessageID != m.MessageID || got.List != m.List || !got.Added.Equal(x.Added) {
					t.Errorf("Get(%v) = {%v, %q, %v, %q, %q, %v}, want {%v, %q, %v, %q, %q, %v}", m.Number,
						got.Number, got.Raw, got.Digest, got.MessageID, got.List, got.Added,
						m.Number, m.Raw, m.Digest, m.MessageID, m.List, x.Added)
				}
				if n, err := s.ByDigest(t.Context(), planted[i].Digest); err != nil || n != planted[i].Number {
					t.Errorf("ByDigest = %v, %v; want %v", n, err, planted[i].Number)
				}
			})
		}
		page, err := s.Changes(t.Context(), "", len(fx)+1)
		if err != nil {
			t.Fatalf("Changes = %v", err)
		}
		if len(page.Messages) != len(fx) {
			t.Fatalf("Changes: %d messages, want %d", len(page.Messages), len(fx))
		}
		for i, m := range page.Messages {
			if m.Number != planted[i].Number || !bytes.Equal(m.Raw, planted[i].Raw) || m.MessageID != planted[i].MessageID || m.List != planted[i].List {
				t.Errorf("Changes message %d = %v %q, want %v %q", i, m.Number, m.Raw, planted[i].Number, planted[i].Raw)
			}
		}
		// A retried batch compares the stored bytes: old records too.
		res := mustPut(t, s, planted...)
		for i, r := range res {
			if r != (store.Result{Number: planted[i].Number, Duplicate: true}) {
				t.Errorf("Put(planted message %d again) = %v, want a duplicate of itself", i, r)
			}
		}
	}
	check(t, f.s)
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("reopened", func(t *testing.T) { check(t, mustOpen(t, open)) })
}

// testMissingDictionary: a record whose dictionary the store does not
// have is an error that names the dictionary, never bytes.
func testMissingDictionary(t *testing.T, open Opener) {
	f := setupTamper(t, open)
	var x recordFixture
	for _, fx := range fixtures(t) {
		if fx.dict != nil {
			x = fx
		}
	}
	if x.dict == nil {
		t.Fatal("no fixture with a dictionary")
	}
	m := plant(t, f, x, f.auth.Number(t, 1, 0), false)
	id := record.IDOf(x.dict).String()
	got, err := f.s.Get(t.Context(), m.Number)
	if !errors.Is(err, record.ErrNoDictionary) || !strings.Contains(err.Error(), id) {
		t.Errorf("Get(record of a missing dictionary) = %q, %v; want %v naming dictionary %s", got.Raw, err, record.ErrNoDictionary, id)
	}
	if errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(record of a missing dictionary) = %v: the message exists, it is not %v", err, store.ErrNotFound)
	}
	if page, err := f.s.Changes(t.Context(), "", 10); !errors.Is(err, record.ErrNoDictionary) || !strings.Contains(err.Error(), id) {
		t.Errorf("Changes over it = %d messages, %v; want %v naming %s", len(page.Messages), err, record.ErrNoDictionary, id)
	}
	// Once the dictionary is back, the message is.
	if err := f.tp.SaveDict(t.Context(), record.IDOf(x.dict), x.dict); err != nil {
		t.Fatal(err)
	}
	got, err = f.s.Get(t.Context(), m.Number)
	if err != nil || !bytes.Equal(got.Raw, m.Raw) || got.Digest != m.Digest || got.MessageID != m.MessageID || !got.Added.Equal(x.Added) {
		t.Errorf("Get(%v) with the dictionary back = %q %v %q %v, %v; want %q %v %q %v", m.Number,
			got.Raw, got.Digest, got.MessageID, got.Added, err, m.Raw, m.Digest, m.MessageID, x.Added)
	}
}

// testCorruptRecord: a damaged record is an error, never other bytes:
// every read checks the digest.
func testCorruptRecord(t *testing.T, open Opener) {
	f := setupTamper(t, open)
	var c record.Codec
	raw := bytes.Repeat([]byte("a compressible line of a message body\n"), 40)
	raw = append(Mail("corrupt@example.org", "corrupt"), raw...)
	base := record.Message{Digest: store.DigestOf(raw), Added: time.Now().UTC(), MessageID: "corrupt@example.org", Raw: raw}
	v1 := record.AppendMessage(nil, base)
	z, err := c.Append(nil, base, nil)
	if err != nil || z[0] != record.Version2 {
		t.Fatalf("Append = version %d, %v; want a compressed record", z[0], err)
	}
	var dictFx recordFixture
	for _, fx := range fixtures(t) {
		if fx.dict != nil {
			dictFx = fx
		}
	}
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x04
		return b
	}
	tests := []struct {
		name string
		rec  []byte
	}{
		{"version 1, a raw byte flipped", flip(v1, len(v1)-10)},
		{"version 1, truncated", v1[:len(v1)-7]},
		{"version 1, digest flipped", flip(v1, 3)},
		{"zstd, a frame byte flipped", flip(z, len(z)-6)},
		{"zstd, truncated", z[:len(z)-5]},
		{"dictionary, a frame byte flipped", flip(dictFx.rec, len(dictFx.rec)-4)},
		{"unknown version", append([]byte{9}, v1[1:]...)},
		{"empty", []byte{}},
	}
	if err := f.tp.SaveDict(t.Context(), record.IDOf(dictFx.dict), dictFx.dict); err != nil {
		t.Fatal(err)
	}
	get := func(t *testing.T, s store.Store, n callnumber.Number, want error) {
		t.Helper()
		got, err := s.Get(t.Context(), n)
		if !errors.Is(err, want) {
			t.Errorf("Get(damaged record) = %d bytes %.40q, %v; want %v", len(got.Raw), got.Raw, err, want)
		}
		if err == nil || got.Raw != nil {
			t.Errorf("Get(damaged record) returned %d bytes", len(got.Raw))
		} else if !strings.Contains(err.Error(), n.String()) {
			t.Errorf("error %q does not name call number %v", err, n)
		}
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n := f.auth.Number(t, 1, i)
			mustPut(t, f.s, Message(n, Mail("", fmt.Sprint("corrupt ", i)), "", ""))
			if err := f.tp.SetRecord(t.Context(), n, tt.rec); err != nil {
				t.Fatal(err)
			}
			get(t, f.s, n, record.ErrCorrupt)
		})
	}
	t.Run("dictionary damaged", func(t *testing.T) {
		n := f.auth.Number(t, 1, len(tests))
		mustPut(t, f.s, Message(n, Mail("", "damaged dictionary"), "", ""))
		if err := f.tp.SetRecord(t.Context(), n, dictFx.rec); err != nil {
			t.Fatal(err)
		}
		if err := f.tp.SaveDict(t.Context(), record.IDOf(dictFx.dict), flip(dictFx.dict, len(dictFx.dict)-20)); err != nil {
			t.Fatal(err)
		}
		// Another handle (a process that has not read the dictionary
		// while it was whole).
		get(t, mustOpen(t, open), n, record.ErrCorrupt)
	})
}

// compressible returns a message of a mailing list, with the header
// lines its neighbours share, distinct per i.
func compressible(i int) []byte {
	return fmt.Appendf(nil, "Received: from mail.linux-mips.org ([127.0.0.1]:40%03d \"EHLO mail.linux-mips.org\")\n"+
		"\tby eddie.linux-mips.org with ESMTP id S23%05dAbc; Mon, 3 Nov 2008 10:%02d:00 +0000\n"+
		"From: Developer %d <dev%d@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH %d/9] MIPS: frobnicate %d\n"+
		"Message-ID: <c%d@example.org>\nSender: linux-mips-bounce@linux-mips.org\nErrors-to: linux-mips-bounce@linux-mips.org\n"+
		"X-archive-position: %d\nPrecedence: bulk\nX-list: linux-mips\n\n%s\n-- \nSigned-off-by: Developer %d <dev%d@example.org>\n",
		i%1000, i, i%60, i%17, i%17, i%9, i, i, i, strings.Repeat(fmt.Sprintf("line %d of the patch\n", i%13), 5+i%11), i%17, i%17)
}

// testCompression: enough messages for the store to train a dictionary
// (the default TrainAt is 1,000) all read back byte for byte, by Get and
// by the change feed; a Tamperer also shows they were stored compressed,
// the later ones with a dictionary.
func testCompression(t *testing.T, open Opener) {
	f := setup(t, open)
	const total, size = 1200, 100
	var all []store.Message
	for b := 0; b < total/size; b++ {
		var msgs []store.Message
		for i := b * size; i < (b+1)*size; i++ {
			msgs = append(msgs, Message(f.auth.Number(t, 1, i), compressible(i), fmt.Sprintf("c%d@example.org", i), "linux-mips"))
		}
		mustPut(t, f.s, msgs...)
		all = append(all, msgs...)
	}
	for _, i := range []int{0, 1, 499, 999, 1000, 1199} {
		checkGet(t, f.s, all[i])
	}
	var after store.Cursor
	seen := 0
	for {
		page, err := f.s.Changes(t.Context(), after, 500)
		if err != nil {
			t.Fatalf("Changes(%q) = %v", after, err)
		}
		if len(page.Messages) == 0 {
			break
		}
		for _, m := range page.Messages {
			if m.Number != all[seen].Number || !bytes.Equal(m.Raw, all[seen].Raw) {
				t.Fatalf("Changes message %d = %v, %d bytes; want %v, %d bytes", seen, m.Number, len(m.Raw), all[seen].Number, len(all[seen].Raw))
			}
			seen++
		}
		after = page.Next
	}
	if seen != total {
		t.Errorf("Changes gave %d messages, want %d", seen, total)
	}
	tp, ok := f.s.(Tamperer)
	if !ok {
		return
	}
	off := tp.Compression().Off
	trained := trainings(tp.Compression(), total)
	var stored, raw int // of the records made with a dictionary
	dicts := map[record.DictID]bool{}
	for i, m := range all {
		rec, err := tp.Record(t.Context(), m.Number)
		if err != nil {
			t.Fatalf("Record(%v) = %v", m.Number, err)
		}
		h, _, err := record.ParseHeader(rec)
		if err != nil {
			t.Fatalf("record %d: %v", i, err)
		}
		switch {
		case off && h.Version != record.Version1:
			t.Fatalf("record %d with compression off: version %d, want 1 (uncompressed)", i, h.Version)
		case !off && h.Version != record.Version2:
			t.Fatalf("record %d: version %d, want compressed (2)", i, h.Version)
		case !off && trained > 0 && i >= total-size && h.Compression != record.ZstdDict && h.Compression != record.S2Dict:
			t.Fatalf("record %d, after the store trained a dictionary: %v, want one with a dictionary", i, h.Compression)
		case trained == 0 && (h.Compression == record.ZstdDict || h.Compression == record.S2Dict):
			t.Fatalf("record %d: %v, but the store trains no dictionary by %d messages", i, h.Compression, total)
		}
		if h.Compression == record.ZstdDict || h.Compression == record.S2Dict {
			dicts[h.Dict] = true
			stored += len(rec)
			raw += len(m.Raw)
		}
	}
	if off || trained == 0 {
		return
	}
	// The first training is done before the Put that reaches TrainAt
	// returns; later ones run in the background, and may finish after
	// the last Put.
	if len(dicts) < 1 || len(dicts) > trained {
		t.Errorf("records name %d dictionaries, want 1 to %d (the trainings due by %d messages)", len(dicts), trained, total)
	}
	// These messages are mostly what their neighbours say: zstd makes a
	// sixth of them with the dictionary, S2 a third.
	if stored*2 > raw {
		t.Errorf("messages of %d bytes stored with the dictionary in %d bytes: want less than half", raw, stored)
	}
}

// trainings returns how many dictionaries a store with compression c
// trains as it grows to n messages (see store/internal/compress).
func trainings(c store.Compression, n int64) int {
	at, grow := c.TrainAt, c.Retrain
	if at == 0 {
		at = compress.DefaultTrainAt
	}
	if grow == 0 {
		grow = compress.DefaultRetrain
	}
	grow = max(grow, 2)
	k := 0
	for ; at > 0 && at <= n; k++ {
		at = min(at*grow, at+compress.RetrainEvery)
	}
	return k
}

// testConcurrentTraining: two writers (two handles of one store, like two
// importers) reach the training threshold at once: each may train and
// store its dictionary; every message reads back, from either handle and
// after a reopen.
func testConcurrentTraining(t *testing.T, open Opener) {
	f := setup(t, open, 1, 2)
	if tp, ok := f.s.(Tamperer); ok && trainings(tp.Compression(), 1400) == 0 {
		t.Skip("this configuration trains its first compression dictionary after more messages than this test writes; the other configurations of the conformance run cover it")
	}
	other := mustOpen(t, open)
	a := f.auth
	stores := []store.Store{f.s, other}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		errs []error
		all  []store.Message
	)
	for w := range 2 {
		wg.Go(func() {
			for b := range 7 {
				var msgs []store.Message
				for i := b * 100; i < (b+1)*100; i++ {
					msgs = append(msgs, Message(a.Number(t, uint32(w+1), i), compressible(10000*w+i), fmt.Sprintf("w%d-%d@example.org", w, i), ""))
				}
				if _, err := stores[w].Put(context.Background(), msgs); err != nil {
					mu.Lock()
					errs = append(errs, fmt.Errorf("writer %d batch %d: %w", w, b, err))
					mu.Unlock()
					return
				}
				mu.Lock()
				all = append(all, msgs...)
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	for _, err := range errs {
		t.Error(err)
	}
	check := func(s store.Store) {
		for i, m := range all {
			if i%7 == 0 || i > len(all)-150 {
				checkGet(t, s, m)
			}
		}
	}
	check(f.s)
	check(other)
	checkCount(t, other, int64(len(all)))
	f.s.Close()
	other.Close()
	check(mustOpen(t, open))
}
