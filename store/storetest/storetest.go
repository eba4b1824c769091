package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// Opener opens the store under test. Called again, it opens the same
// underlying store, whether or not the handles it returned before are
// still open: several handles of one store at once stand for several
// processes sharing it.
type Opener func(ctx context.Context) (store.Store, error)

// Run runs the conformance suite. newStore is called once per subtest and
// returns an Opener of a new, empty store.
func Run(t *testing.T, newStore func(t *testing.T) Opener) {
	tests := []struct {
		name string
		fn   func(t *testing.T, open Opener)
	}{
		{"RoundTrip", testRoundTrip},
		{"LargeMessage", testLargeMessage},
		{"AddedKept", testAddedKept},
		{"MessageIDShared", testMessageIDShared},
		{"NoMessageID", testNoMessageID},
		{"Digest", testDigest},
		{"ZeroDigest", testZeroDigest},
		{"DuplicateInBatch", testDuplicateInBatch},
		{"RetriedBatch", testRetriedBatch},
		{"NumberTaken", testNumberTaken},
		{"NumberTakenInBatch", testNumberTakenInBatch},
		{"UnknownRun", testUnknownRun},
		{"Unbound", testUnbound},
		{"InvalidMessage", testInvalidMessage},
		{"ForeignAuthority", testForeignAuthority},
		{"RunReused", testRunReused},
		{"LeaseRoundTrip", testLeaseRoundTrip},
		{"PartialBatchWritesNothing", testPartialBatch},
		{"Reopen", testReopen},
		{"Closed", testClosed},
		{"Count", testCount},
		{"Concurrent", testConcurrent},
		{"ConcurrentSameDigest", testConcurrentSameDigest},
		{"Changes", testChanges},
		{"ChangesReopen", testChangesReopen},
		{"ChangesBadCursor", testChangesBadCursor},
		{"ChangesLarge", testChangesLarge},
		{"ChangesConcurrent", testChangesConcurrent},
	}
	tests = append(tests, recordTests...)
	tests = append(tests, removalTests...)
	tests = append(tests, moveTests...)
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.fn(t, newStore(t))
		})
	}
}

// fixture is a freshly opened store with one recorded lease of run 1.
type fixture struct {
	s    store.Store
	auth *Authority
}

func setup(t *testing.T, open Opener, runs ...uint32) fixture {
	t.Helper()
	s := mustOpen(t, open)
	a := NewAuthority(t, shuffle.Bits)
	if len(runs) == 0 {
		runs = []uint32{1}
	}
	for _, r := range runs {
		if err := s.RecordLease(t.Context(), a.Lease(r)); err != nil {
			t.Fatalf("RecordLease(run %d) = %v", r, err)
		}
	}
	return fixture{s: s, auth: a}
}

func mustOpen(t *testing.T, open Opener) store.Store {
	t.Helper()
	s, err := open(t.Context())
	if err != nil {
		t.Fatalf("open = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func mustPut(t *testing.T, s store.Store, msgs ...store.Message) []store.Result {
	t.Helper()
	res, err := s.Put(t.Context(), msgs)
	if err != nil {
		t.Fatalf("Put(%d messages) = %v", len(msgs), err)
	}
	if len(res) != len(msgs) {
		t.Fatalf("Put(%d messages) returned %d results", len(msgs), len(res))
	}
	return res
}

func checkResults(t *testing.T, got []store.Result, want ...store.Result) {
	t.Helper()
	if !slices.Equal(got, want) {
		t.Errorf("Put results = %v, want %v", got, want)
	}
}

func checkGet(t *testing.T, s store.Store, m store.Message) {
	t.Helper()
	got, err := s.Get(t.Context(), m.Number)
	if err != nil {
		t.Fatalf("Get(%v) = %v", m.Number, err)
	}
	if got.Number != m.Number || !bytes.Equal(got.Raw, m.Raw) || got.Digest != m.Digest || got.MessageID != m.MessageID || got.List != m.List {
		t.Errorf("Get(%v) = {%v, %d bytes, %v, %q, %q}, want {%v, %d bytes, %v, %q, %q}",
			m.Number, got.Number, len(got.Raw), got.Digest, got.MessageID, got.List,
			m.Number, len(m.Raw), m.Digest, m.MessageID, m.List)
	}
	if got.Added.IsZero() || time.Since(got.Added) > time.Hour || time.Until(got.Added) > time.Hour {
		t.Errorf("Get(%v).Added = %v, want about now", m.Number, got.Added)
	}
}

func checkNotFound(t *testing.T, s store.Store, n callnumber.Number) {
	t.Helper()
	if got, err := s.Get(t.Context(), n); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Get(%v) = %d bytes, %v; want %v", n, len(got.Raw), err, store.ErrNotFound)
	}
}

func checkCount(t *testing.T, s store.Store, want int64) {
	t.Helper()
	got, err := s.Count(t.Context())
	if err != nil || got != want {
		t.Errorf("Count() = %d, %v; want %d", got, err, want)
	}
}

func checkByID(t *testing.T, s store.Store, id string, want ...callnumber.Number) {
	t.Helper()
	got, err := s.ByMessageID(t.Context(), id)
	if err != nil {
		t.Fatalf("ByMessageID(%q) = %v", id, err)
	}
	if len(got) != len(want) || (len(want) > 0 && !slices.Equal(got, want)) {
		t.Errorf("ByMessageID(%q) = %v, want %v", id, got, want)
	}
}

func testRoundTrip(t *testing.T, open Opener) {
	f := setup(t, open)
	tests := []struct {
		name  string
		raw   []byte
		msgid string
		list  string
	}{
		{"plain LF", Mail("plain@example.org", "plain"), "plain@example.org", "linux-mips"},
		{"CRLF", []byte("From: a@example.org\r\nSubject: crlf\r\nMessage-ID: <crlf@example.org>\r\n\r\nline 1\r\nline 2\r\n"), "crlf@example.org", "list"},
		{"8-bit headers and body", []byte("From: J\xf6rg <j@example.org>\nSubject: \xe9t\xe9\n\nCaf\xe9 \xff\xfe\x00 binary\n"), "", ""},
		{"empty body", []byte("From: a@example.org\nSubject: nothing\n\n"), "", "x"},
		{"no trailing newline", []byte("Subject: cut\n\nno newline at end"), "", ""},
		{"mixed line ends", []byte("Subject: mixed\r\n\nbare LF\rbare CR\r\n"), "", ""},
		{"empty", []byte{}, "", ""},
		{"unicode Message-ID and list", Mail("ünï@example.org", "unicode"), "ünï@example.org", "liste-française"},
	}
	var msgs []store.Message
	for i, tt := range tests {
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), tt.raw, tt.msgid, tt.list))
	}
	res := mustPut(t, f.s, msgs...)
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if res[i] != (store.Result{Number: msgs[i].Number}) {
				t.Errorf("result = %v, want %v", res[i], store.Result{Number: msgs[i].Number})
			}
			checkGet(t, f.s, msgs[i])
			n, err := f.s.ByDigest(t.Context(), msgs[i].Digest)
			if err != nil || n != msgs[i].Number {
				t.Errorf("ByDigest = %v, %v; want %v", n, err, msgs[i].Number)
			}
		})
	}
	checkNotFound(t, f.s, f.auth.Number(t, 1, len(tests)))
	checkNotFound(t, f.s, f.auth.Number(t, 2, 0))
	checkCount(t, f.s, int64(len(tests)))
}

// testAddedKept: a message given the time it was first archived (a
// mirror copying its origin's) keeps it, small or large.
func testAddedKept(t *testing.T, open Opener) {
	f := setup(t, open)
	when := time.Date(2019, 7, 1, 12, 30, 45, 123000000, time.UTC)
	small := Message(f.auth.Number(t, 1, 0), Mail("small@example.org", "small"), "small@example.org", "")
	large := Message(f.auth.Number(t, 1, 1), append(Mail("large@example.org", "large"), bytes.Repeat([]byte(randomHex(40)+"\n"), 2000)...), "large@example.org", "")
	small.Added, large.Added = when, when.Add(time.Hour)
	mustPut(t, f.s, small, large)
	for _, m := range []store.Message{small, large} {
		got, err := f.s.Get(t.Context(), m.Number)
		if err != nil || !got.Added.Equal(m.Added) {
			t.Errorf("Get(%v).Added = %v, %v; want %v", m.Number, got.Added, err, m.Added)
		}
	}
}

func testLargeMessage(t *testing.T, open Opener) {
	f := setup(t, open)
	var b bytes.Buffer
	b.WriteString("From: big@example.org\r\nSubject: 20 MB\r\nMessage-ID: <big@example.org>\r\n\r\n")
	line := []byte("0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ\xe9\xff=\r\n")
	for i := 0; b.Len() < 20<<20; i++ {
		line[0] = byte(i)
		b.Write(line)
	}
	m := Message(f.auth.Number(t, 1, 0), b.Bytes(), "big@example.org", "")
	checkResults(t, mustPut(t, f.s, m), store.Result{Number: m.Number})
	checkGet(t, f.s, m)
}

func testMessageIDShared(t *testing.T, open Opener) {
	f := setup(t, open, 1, 2)
	const id = "shared@example.org"
	var want []callnumber.Number
	for batch := range 2 {
		var msgs []store.Message
		for i := range 3 {
			n := f.auth.Number(t, 1, batch*3+i)
			msgs = append(msgs, Message(n, Mail(id, fmt.Sprintf("copy %d/%d", batch, i)), id, ""))
			want = append(want, n)
		}
		// An unrelated message between them, and one whose Message-ID has
		// the shared one as a prefix.
		msgs = append(msgs, Message(f.auth.Number(t, 2, batch*2), Mail("other@example.org", fmt.Sprint("other", batch)), "other@example.org", ""))
		msgs = append(msgs, Message(f.auth.Number(t, 2, batch*2+1), Mail(id+"x", fmt.Sprint("prefix", batch)), id+"x", ""))
		mustPut(t, f.s, msgs...)
	}
	checkByID(t, f.s, id, want...)
	checkByID(t, f.s, "other@example.org", f.auth.Number(t, 2, 0), f.auth.Number(t, 2, 2))
	checkByID(t, f.s, id+"x", f.auth.Number(t, 2, 1), f.auth.Number(t, 2, 3))
	checkByID(t, f.s, "shared@example", nil...)
	checkByID(t, f.s, "unknown@example.org", nil...)

	// Message-IDs that could confuse an index keyed by prefix or length.
	long := strings.Repeat("x", 3000) + "@example.org"
	odd := []string{"a", "a\x00b", long, long[:len(long)-1]}
	var msgs []store.Message
	for i, id := range odd {
		msgs = append(msgs, Message(f.auth.Number(t, 1, 100+i), Mail(fmt.Sprint("odd", i), fmt.Sprint("odd", i)), id, ""))
	}
	mustPut(t, f.s, msgs...)
	for i, id := range odd {
		checkByID(t, f.s, id, msgs[i].Number)
	}
}

func testNoMessageID(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("", "no id 1"), "", "")
	b := Message(f.auth.Number(t, 1, 1), Mail("", "no id 2"), "", "")
	checkResults(t, mustPut(t, f.s, a, b), store.Result{Number: a.Number}, store.Result{Number: b.Number})
	checkGet(t, f.s, a)
	checkGet(t, f.s, b)
	checkByID(t, f.s, "", nil...)
	checkCount(t, f.s, 2)
}

func testDigest(t *testing.T, open Opener) {
	f := setup(t, open)
	lf := []byte("From: a@example.org\nSubject: twice\nMessage-ID: <twice@example.org>\n\nbody\n")
	crlf := bytes.ReplaceAll(lf, []byte("\n"), []byte("\r\n"))
	if store.DigestOf(lf) != store.DigestOf(crlf) {
		t.Fatalf("DigestOf(LF) != DigestOf(CRLF)")
	}
	a := Message(f.auth.Number(t, 1, 0), lf, "twice@example.org", "")
	checkResults(t, mustPut(t, f.s, a), store.Result{Number: a.Number})

	b := Message(f.auth.Number(t, 1, 1), crlf, "twice@example.org", "")
	checkResults(t, mustPut(t, f.s, b), store.Result{Number: a.Number, Duplicate: true})
	checkNotFound(t, f.s, b.Number)
	checkByID(t, f.s, "twice@example.org", a.Number)
	checkCount(t, f.s, 1)

	if n, err := f.s.ByDigest(t.Context(), a.Digest); err != nil || n != a.Number {
		t.Errorf("ByDigest(%v) = %v, %v; want %v", a.Digest, n, err, a.Number)
	}
	if n, err := f.s.ByDigest(t.Context(), store.DigestOf([]byte("never stored"))); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ByDigest(unknown) = %v, %v; want %v", n, err, store.ErrNotFound)
	}
}

// A message given without its digest is digested by Put, which sets the
// digest in the batch it was given; its duplicates are recognised alike.
func testZeroDigest(t *testing.T, open Opener) {
	f := setup(t, open)
	raw := Mail("zero@example.org", "zero")
	a := Message(f.auth.Number(t, 1, 0), raw, "zero@example.org", "")
	a.Digest = store.Digest{}
	msgs := []store.Message{a}
	checkResults(t, mustPut(t, f.s, msgs...), store.Result{Number: a.Number})
	if want := store.DigestOf(raw); msgs[0].Digest != want {
		t.Errorf("after Put, the batch's Digest = %v, want %v", msgs[0].Digest, want)
	}
	a.Digest = store.DigestOf(raw)
	checkGet(t, f.s, a)
	if n, err := f.s.ByDigest(t.Context(), a.Digest); err != nil || n != a.Number {
		t.Errorf("ByDigest(%v) = %v, %v; want %v", a.Digest, n, err, a.Number)
	}
	b := Message(f.auth.Number(t, 1, 1), bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n")), "zero@example.org", "")
	b.Digest = store.Digest{}
	checkResults(t, mustPut(t, f.s, b), store.Result{Number: a.Number, Duplicate: true})
	checkNotFound(t, f.s, b.Number)
	checkCount(t, f.s, 1)
}

func testDuplicateInBatch(t *testing.T, open Opener) {
	f := setup(t, open)
	raw := Mail("dup@example.org", "dup")
	a := Message(f.auth.Number(t, 1, 0), raw, "dup@example.org", "")
	other := Message(f.auth.Number(t, 1, 1), Mail("o@example.org", "other"), "o@example.org", "")
	b := Message(f.auth.Number(t, 1, 2), bytes.ReplaceAll(raw, []byte("\n"), []byte("\r\n")), "dup@example.org", "")
	c := Message(f.auth.Number(t, 1, 3), raw, "dup@example.org", "")
	res := mustPut(t, f.s, a, other, b, c)
	checkResults(t, res,
		store.Result{Number: a.Number},
		store.Result{Number: other.Number},
		store.Result{Number: a.Number, Duplicate: true},
		store.Result{Number: a.Number, Duplicate: true})
	checkNotFound(t, f.s, b.Number)
	checkNotFound(t, f.s, c.Number)
	checkByID(t, f.s, "dup@example.org", a.Number)
	checkCount(t, f.s, 2)
}

func testRetriedBatch(t *testing.T, open Opener) {
	f := setup(t, open)
	var msgs []store.Message
	var want []store.Result
	for i := range 5 {
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), Mail(fmt.Sprint("r", i), fmt.Sprint("r", i)), fmt.Sprint("r", i), ""))
		want = append(want, store.Result{Number: msgs[i].Number, Duplicate: true})
	}
	mustPut(t, f.s, msgs...)
	// The same batch again, as after a crash before the caller saw the
	// results, and with one new message at the end.
	extra := Message(f.auth.Number(t, 1, 5), Mail("new", "new"), "new", "")
	checkResults(t, mustPut(t, f.s, append(msgs, extra)...), append(want, store.Result{Number: extra.Number})...)
	for _, m := range msgs {
		checkGet(t, f.s, m)
		checkByID(t, f.s, m.MessageID, m.Number)
	}
	checkCount(t, f.s, 6)
}

func testNumberTaken(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a", "first"), "a", "")
	mustPut(t, f.s, a)
	tests := []struct {
		name string
		raw  []byte
	}{
		{"different bytes", Mail("b", "second")},
		// Same digest, different bytes: still a different message under
		// that number, so refused rather than silently taken as a retry.
		{"same digest other line ends", bytes.ReplaceAll(a.Raw, []byte("\n"), []byte("\r\n"))},
		{"empty", []byte{}},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fresh := Message(f.auth.Number(t, 1, 10+i), Mail(fmt.Sprint("fresh", i), "fresh"), fmt.Sprint("fresh", i), "")
			b := Message(a.Number, tt.raw, "b", "")
			res, err := f.s.Put(t.Context(), []store.Message{fresh, b})
			if !errors.Is(err, store.ErrNumberTaken) {
				t.Fatalf("Put(taken number) = %v, %v; want %v", res, err, store.ErrNumberTaken)
			}
			if !strings.Contains(err.Error(), a.Number.String()) {
				t.Errorf("error %q does not name the call number %v", err, a.Number)
			}
			checkGet(t, f.s, a)
			checkNotFound(t, f.s, fresh.Number)
			checkByID(t, f.s, "b", nil...)
			checkByID(t, f.s, fresh.MessageID, nil...)
		})
	}
	checkCount(t, f.s, 1)
}

func testNumberTakenInBatch(t *testing.T, open Opener) {
	f := setup(t, open)
	n := f.auth.Number(t, 1, 0)
	a := Message(n, Mail("a", "a"), "a", "")
	b := Message(n, Mail("b", "b"), "b", "")
	if res, err := f.s.Put(t.Context(), []store.Message{a, b}); !errors.Is(err, store.ErrNumberTaken) {
		t.Fatalf("Put(one number twice) = %v, %v; want %v", res, err, store.ErrNumberTaken)
	}
	checkNotFound(t, f.s, n)
	checkCount(t, f.s, 0)
	// The same bytes twice under one number is one message.
	checkResults(t, mustPut(t, f.s, a, a), store.Result{Number: n}, store.Result{Number: n, Duplicate: true})
	checkCount(t, f.s, 1)
}

func testUnknownRun(t *testing.T, open Opener) {
	f := setup(t, open)
	ok := Message(f.auth.Number(t, 1, 0), Mail("ok", "ok"), "ok", "")
	bad := Message(f.auth.Number(t, 7, 0), Mail("bad", "bad"), "bad", "")
	res, err := f.s.Put(t.Context(), []store.Message{ok, bad})
	if !errors.Is(err, store.ErrUnknownRun) {
		t.Fatalf("Put(run without lease) = %v, %v; want %v", res, err, store.ErrUnknownRun)
	}
	if !strings.Contains(err.Error(), "run 7") {
		t.Errorf("error %q does not name run 7", err)
	}
	checkNotFound(t, f.s, ok.Number)
	checkNotFound(t, f.s, bad.Number)
	checkCount(t, f.s, 0)
}

func testUnbound(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	a := NewAuthority(t, shuffle.Mix)
	if b, err := s.Binding(t.Context()); !errors.Is(err, store.ErrUnbound) {
		t.Errorf("Binding() of a new store = %v, %v; want %v", b, err, store.ErrUnbound)
	}
	m := Message(a.Number(t, 1, 0), Mail("x", "x"), "x", "")
	if res, err := s.Put(t.Context(), []store.Message{m}); !errors.Is(err, store.ErrUnknownRun) {
		t.Errorf("Put into an unbound store = %v, %v; want %v", res, err, store.ErrUnknownRun)
	}
	checkNotFound(t, s, m.Number)
	checkByID(t, s, "x", nil...)
	if n, err := s.ByDigest(t.Context(), m.Digest); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("ByDigest in an unbound store = %v, %v; want %v", n, err, store.ErrNotFound)
	}
	if l, err := s.Lease(t.Context(), 1); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lease(1) in an unbound store = %v, %v; want %v", l, err, store.ErrNotFound)
	}
	checkCount(t, s, 0)

	// A first lease without the key cannot bind the store.
	l := a.Lease(1)
	l.Key = shuffle.Key{}
	if err := s.RecordLease(t.Context(), l); !errors.Is(err, callnumber.ErrLease) {
		t.Errorf("RecordLease(first lease without key) = %v, want %v", err, callnumber.ErrLease)
	}
	if b, err := s.Binding(t.Context()); !errors.Is(err, store.ErrUnbound) {
		t.Errorf("Binding() after a refused lease = %v, %v; want %v", b, err, store.ErrUnbound)
	}
}

func testInvalidMessage(t *testing.T, open Opener) {
	f := setup(t, open)
	good := Message(f.auth.Number(t, 1, 0), Mail("g", "g"), "g", "")
	badDigest := Message(f.auth.Number(t, 1, 1), Mail("d", "d"), "d", "")
	badDigest.Digest[0] ^= 1
	tests := []struct {
		name string
		m    store.Message
	}{
		{"wrong digest", badDigest},
		{"zero number", Message(0, Mail("z", "z"), "z", "")},
		{"number beyond 47 bits", Message(1<<callnumber.Bits, Mail("z", "z"), "z", "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			res, err := f.s.Put(t.Context(), []store.Message{good, tt.m})
			if !errors.Is(err, store.ErrInvalidMessage) {
				t.Errorf("Put = %v, %v; want %v", res, err, store.ErrInvalidMessage)
			}
			checkNotFound(t, f.s, good.Number)
		})
	}
	checkCount(t, f.s, 0)
}

func testForeignAuthority(t *testing.T, open Opener) {
	f := setup(t, open)
	other := NewAuthority(t, shuffle.Bits)
	sameIDOtherKey := NewAuthority(t, shuffle.Bits)
	sameIDOtherKey.ID = f.auth.ID
	sameIDOtherScheme := NewAuthority(t, shuffle.Mix)
	sameIDOtherScheme.ID = f.auth.ID
	sameIDOtherScheme.Key = f.auth.Key
	tests := []struct {
		name string
		l    callnumber.Lease
	}{
		{"other authority", other.Lease(2)},
		{"other authority same run", other.Lease(1)},
		{"same ID other key", sameIDOtherKey.Lease(3)},
		{"same ID other scheme", sameIDOtherScheme.Lease(4)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := f.s.RecordLease(t.Context(), tt.l)
			if !errors.Is(err, store.ErrForeignAuthority) {
				t.Fatalf("RecordLease = %v, want %v", err, store.ErrForeignAuthority)
			}
			if l, err := f.s.Lease(t.Context(), tt.l.Run); tt.l.Run != 1 && !errors.Is(err, store.ErrNotFound) {
				t.Errorf("Lease(%d) after refusal = %v, %v; want %v", tt.l.Run, l, err, store.ErrNotFound)
			}
		})
	}
	if b, err := f.s.Binding(t.Context()); err != nil || b != f.auth.Binding() {
		t.Errorf("Binding() = %v, %v; want %v", b, err, f.auth.Binding())
	}
	// The refused leases' runs stay unknown.
	m := Message(f.auth.Number(t, 2, 0), Mail("m", "m"), "m", "")
	if _, err := f.s.Put(t.Context(), []store.Message{m}); !errors.Is(err, store.ErrUnknownRun) {
		t.Errorf("Put under a refused run = %v, want %v", err, store.ErrUnknownRun)
	}
}

func testRunReused(t *testing.T, open Opener) {
	f := setup(t, open)
	first, err := f.s.Lease(t.Context(), 1)
	if err != nil {
		t.Fatalf("Lease(1) = %v", err)
	}
	again := f.auth.Lease(1)
	again.Host = "restored-host"
	err = f.s.RecordLease(t.Context(), again)
	if !errors.Is(err, store.ErrRunReused) {
		t.Fatalf("RecordLease(run 1 again, new nonce) = %v, want %v", err, store.ErrRunReused)
	}
	for _, s := range []string{first.Nonce, again.Nonce, "restored-host", "backup"} {
		if !strings.Contains(err.Error(), s) {
			t.Errorf("error %q does not mention %q", err, s)
		}
	}
	got, err := f.s.Lease(t.Context(), 1)
	if err != nil || got.Nonce != first.Nonce {
		t.Errorf("Lease(1) after refusal = %v, %v; want nonce %s", got, err, first.Nonce)
	}
}

func testLeaseRoundTrip(t *testing.T, open Opener) {
	s := mustOpen(t, open)
	a := NewAuthority(t, shuffle.Mix)
	leases := []callnumber.Lease{a.Lease(1), a.Lease(callnumber.MaxRun), a.Lease(77)}
	leases[2].Program, leases[2].Host, leases[2].PID, leases[2].Note = "", "", 0, ""
	for _, l := range leases {
		if err := s.RecordLease(t.Context(), l); err != nil {
			t.Fatalf("RecordLease(run %d) = %v", l.Run, err)
		}
		// Recording the same lease again is a no-op.
		if err := s.RecordLease(t.Context(), l); err != nil {
			t.Fatalf("RecordLease(run %d) again = %v", l.Run, err)
		}
	}
	for _, want := range leases {
		got, err := s.Lease(t.Context(), want.Run)
		if err != nil {
			t.Fatalf("Lease(%d) = %v", want.Run, err)
		}
		if got.Key != (shuffle.Key{}) {
			t.Errorf("Lease(%d) carries the key; want it left out", want.Run)
		}
		want.Key = shuffle.Key{}
		if !got.IssuedAt.Equal(want.IssuedAt) {
			t.Errorf("Lease(%d).IssuedAt = %v, want %v", want.Run, got.IssuedAt, want.IssuedAt)
		}
		got.IssuedAt = want.IssuedAt
		if got != want {
			t.Errorf("Lease(%d) = %+v, want %+v", want.Run, got, want)
		}
	}
	if l, err := s.Lease(t.Context(), 2); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Lease(2) = %v, %v; want %v", l, err, store.ErrNotFound)
	}
	if b, err := s.Binding(t.Context()); err != nil || b != a.Binding() {
		t.Errorf("Binding() = %v, %v; want %v", b, err, a.Binding())
	}
	// A later lease may leave the key out: the store already has it.
	l := a.Lease(5)
	l.Key = shuffle.Key{}
	if err := s.RecordLease(t.Context(), l); err != nil {
		t.Errorf("RecordLease(lease without key, store bound) = %v", err)
	}
	// An invalid lease is refused.
	bad := a.Lease(6)
	bad.Nonce = ""
	if err := s.RecordLease(t.Context(), bad); !errors.Is(err, callnumber.ErrLease) {
		t.Errorf("RecordLease(no nonce) = %v, want %v", err, callnumber.ErrLease)
	}
}

func testPartialBatch(t *testing.T, open Opener) {
	f := setup(t, open)
	before := Message(f.auth.Number(t, 1, 0), Mail("before", "before"), "before", "")
	mustPut(t, f.s, before)
	var msgs []store.Message
	for i := 1; i <= 50; i++ {
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), Mail("p", fmt.Sprint("p", i)), "p", "l"))
	}
	// The refused message is the last: every earlier one was accepted by the
	// checks, and none may be left behind.
	msgs = append(msgs, Message(before.Number, Mail("clash", "clash"), "clash", ""))
	if _, err := f.s.Put(t.Context(), msgs); !errors.Is(err, store.ErrNumberTaken) {
		t.Fatalf("Put(batch ending in a taken number) = %v, want %v", err, store.ErrNumberTaken)
	}
	for _, m := range msgs[:50] {
		checkNotFound(t, f.s, m.Number)
		if n, err := f.s.ByDigest(t.Context(), m.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ByDigest(%v) = %v, %v; want %v", m.Digest, n, err, store.ErrNotFound)
		}
	}
	checkByID(t, f.s, "p", nil...)
	checkCount(t, f.s, 1)
	// Without the clash the batch lands whole.
	res := mustPut(t, f.s, msgs[:50]...)
	for i, r := range res {
		if r != (store.Result{Number: msgs[i].Number}) {
			t.Errorf("result %d = %v, want %v", i, r, store.Result{Number: msgs[i].Number})
		}
	}
	checkCount(t, f.s, 51)
}

func testReopen(t *testing.T, open Opener) {
	f := setup(t, open, 1, 2)
	a := Message(f.auth.Number(t, 1, 0), Mail("a", "a"), "a", "l")
	b := Message(f.auth.Number(t, 2, 0), Mail("a", "b"), "a", "l")
	mustPut(t, f.s, a, b)
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	for i := range 2 {
		s := mustOpen(t, open)
		checkGet(t, s, a)
		checkGet(t, s, b)
		checkByID(t, s, "a", a.Number, b.Number)
		checkCount(t, s, int64(2+i))
		if bd, err := s.Binding(t.Context()); err != nil || bd != f.auth.Binding() {
			t.Errorf("reopen %d: Binding() = %v, %v; want %v", i, bd, err, f.auth.Binding())
		}
		if err := s.RecordLease(t.Context(), f.auth.Lease(1)); !errors.Is(err, store.ErrRunReused) {
			t.Errorf("reopen %d: RecordLease(run 1, new nonce) = %v, want %v", i, err, store.ErrRunReused)
		}
		c := Message(f.auth.Number(t, 1, 1+i), Mail("c", fmt.Sprint("c", i)), "c", "")
		mustPut(t, s, c)
		if err := s.Close(); err != nil {
			t.Fatalf("Close() = %v", err)
		}
	}
	s := mustOpen(t, open)
	checkCount(t, s, 4)
}

func testClosed(t *testing.T, open Opener) {
	f := setup(t, open)
	m := Message(f.auth.Number(t, 1, 0), Mail("a", "a"), "a", "")
	mustPut(t, f.s, m)
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	ctx := t.Context()
	checks := []struct {
		name string
		err  error
	}{
		{"Put", func() error { _, err := f.s.Put(ctx, []store.Message{m}); return err }()},
		{"Get", func() error { _, err := f.s.Get(ctx, m.Number); return err }()},
		{"ByMessageID", func() error { _, err := f.s.ByMessageID(ctx, "a"); return err }()},
		{"ByDigest", func() error { _, err := f.s.ByDigest(ctx, m.Digest); return err }()},
		{"Count", func() error { _, err := f.s.Count(ctx); return err }()},
		{"Lease", func() error { _, err := f.s.Lease(ctx, 1); return err }()},
		{"Binding", func() error { _, err := f.s.Binding(ctx); return err }()},
		{"RecordLease", f.s.RecordLease(ctx, f.auth.Lease(2))},
	}
	for _, c := range checks {
		if !errors.Is(c.err, store.ErrClosed) {
			t.Errorf("%s after Close = %v, want %v", c.name, c.err, store.ErrClosed)
		}
	}
}

func testCount(t *testing.T, open Opener) {
	f := setup(t, open)
	checkCount(t, f.s, 0)
	seq := 0
	for batch, size := range []int{1, 10, 0, 100} {
		var msgs []store.Message
		for range size {
			msgs = append(msgs, Message(f.auth.Number(t, 1, seq), Mail("", fmt.Sprint("c", seq)), "", ""))
			seq++
		}
		if len(msgs) > 0 {
			// A duplicate in the batch does not count.
			msgs = append(msgs, Message(f.auth.Number(t, 1, 1000+batch), msgs[0].Raw, "", ""))
		}
		mustPut(t, f.s, msgs...)
		checkCount(t, f.s, int64(seq))
	}
}

// testConcurrent has several goroutines, each with its own run like
// separate importers, write batches while others read.
func testConcurrent(t *testing.T, open Opener) {
	const writers, batches, size = 4, 5, 20
	runs := make([]uint32, writers)
	for i := range runs {
		runs[i] = uint32(10 + i)
	}
	f := setup(t, open, runs...)
	ctx := t.Context()
	var wg sync.WaitGroup
	errs := make(chan error, 2*writers)
	done := make(chan struct{})
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var msgs []store.Message
				for i := range size {
					seq := b*size + i
					id := fmt.Sprintf("w%d-%d@example.org", w, seq%7)
					msgs = append(msgs, Message(f.auth.Number(t, runs[w], seq), Mail(id, fmt.Sprintf("w%d s%d", w, seq)), id, ""))
				}
				res, err := f.s.Put(ctx, msgs)
				if err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
				for i, r := range res {
					if r != (store.Result{Number: msgs[i].Number}) {
						errs <- fmt.Errorf("writer %d batch %d: result %d = %v, want %v", w, b, i, r, msgs[i].Number)
						return
					}
				}
			}
		})
	}
	var readers sync.WaitGroup
	for r := range writers {
		readers.Go(func() {
			for i := 0; ; i++ {
				select {
				case <-done:
					return
				default:
				}
				n := f.auth.Number(t, runs[r], i%(batches*size))
				if _, err := f.s.Get(ctx, n); err != nil && !errors.Is(err, store.ErrNotFound) {
					errs <- fmt.Errorf("reader %d: Get(%v) = %w", r, n, err)
					return
				}
				if _, err := f.s.Count(ctx); err != nil {
					errs <- fmt.Errorf("reader %d: Count() = %w", r, err)
					return
				}
			}
		})
	}
	wg.Wait()
	close(done)
	readers.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
	checkCount(t, f.s, writers*batches*size)
	for w := range writers {
		for seq := range batches * size {
			n := f.auth.Number(t, runs[w], seq)
			got, err := f.s.Get(ctx, n)
			if err != nil || !bytes.Equal(got.Raw, Mail(fmt.Sprintf("w%d-%d@example.org", w, seq%7), fmt.Sprintf("w%d s%d", w, seq))) {
				t.Errorf("Get(%v) = %d bytes, %v; want writer %d's message %d", n, len(got.Raw), err, w, seq)
			}
		}
		id := fmt.Sprintf("w%d-0@example.org", w)
		got, err := f.s.ByMessageID(ctx, id)
		if err != nil || len(got) != (batches*size+6)/7 {
			t.Errorf("ByMessageID(%q) = %d numbers, %v; want %d", id, len(got), err, (batches*size+6)/7)
		}
	}
}

// testConcurrentSameDigest has several writers put the same messages
// under their own numbers at once, as two importers started together on
// one file do: every message is stored exactly once, every writer's
// result names that one number, and the other numbers hold nothing. Each
// writer has a handle of its own, opened apart as another process would
// open it, so that nothing one handle shares among its callers (a lock, a
// cache) keeps the writers from racing.
func testConcurrentSameDigest(t *testing.T, open Opener) {
	const writers, size, rounds = 4, 30, 3
	runs := make([]uint32, writers)
	for i := range runs {
		runs[i] = uint32(20 + i)
	}
	f := setup(t, open, runs...)
	ctx := t.Context()
	handles := make([]store.Store, writers)
	for w := range handles {
		handles[w] = mustOpen(t, open)
	}
	fol := newFollower(t, f.s, 50)
	var stored []store.Message
	for round := range rounds {
		raw := func(i int) []byte { return Mail(fmt.Sprint("same", round, "-", i), fmt.Sprint("same ", round, " ", i)) }
		results := make([][]store.Result, writers)
		errs := make([]error, writers)
		var wg sync.WaitGroup
		for w := range writers {
			wg.Go(func() {
				var msgs []store.Message
				for i := range size {
					msgs = append(msgs, Message(f.auth.Number(t, runs[w], round*size+i), raw(i), fmt.Sprint("same", round, "-", i), ""))
				}
				results[w], errs[w] = handles[w].Put(ctx, msgs)
			})
		}
		wg.Wait()
		for w, err := range errs {
			if err != nil {
				t.Fatalf("round %d writer %d: Put = %v", round, w, err)
			}
		}
		for i := range size {
			d := store.DigestOf(raw(i))
			n, err := f.s.ByDigest(ctx, d)
			if err != nil {
				t.Fatalf("round %d: ByDigest(message %d) = %v", round, i, err)
			}
			written := 0
			for w := range writers {
				r := results[w][i]
				if r.Number != n {
					t.Errorf("round %d message %d: writer %d got %v (duplicate %v), digest index says %v", round, i, w, r.Number, r.Duplicate, n)
				}
				if !r.Duplicate {
					written++
				}
				if own := f.auth.Number(t, runs[w], round*size+i); own != n {
					checkNotFound(t, f.s, own)
				}
			}
			if written != 1 {
				t.Errorf("round %d message %d: %d writers report they stored it, want exactly 1", round, i, written)
			}
			checkByID(t, f.s, fmt.Sprint("same", round, "-", i), n)
			m := Message(n, raw(i), fmt.Sprint("same", round, "-", i), "")
			checkGet(t, f.s, m)
			stored = append(stored, m)
		}
	}
	checkCount(t, f.s, rounds*size)
	// The feed lists each message once, under its one number.
	fol.await(stored)
	fol.check(stored)
}
