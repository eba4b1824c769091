// Package authoritytest is the conformance suite of run authority
// backends (authority.Issuer): every backend runs the same tests, as the
// stores run package store/storetest's.
package authoritytest

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// Opener opens the authority of one place (a file, an archive) as a new
// process would: it creates it on the first call, with scheme ("" for
// the default), and opens what is there afterwards (failing with
// authority.ErrScheme for another scheme than its own, "" accepting any).
type Opener func(ctx context.Context, scheme shuffle.Scheme) (authority.Issuer, error)

// Backend is what the suite needs of a backend.
type Backend struct {
	// New returns the opener of a new, empty place.
	New func(t *testing.T) Opener
	// StartAt returns the opener of a place holding an authority of the
	// default scheme whose next run is next and that has issued none
	// below it: for the tests of the end of the run space.
	StartAt func(t *testing.T, next uint64) Opener
	// Several says whether several handles of one authority may be open
	// at once (a bbolt file is held by one process; a cluster serves
	// any number).
	Several bool
}

// Run runs the conformance suite.
func Run(t *testing.T, b Backend) {
	tests := []struct {
		name string
		fn   func(*testing.T, Backend)
	}{
		{"FirstRuns", testFirstRuns},
		{"Lease", testLease},
		{"Reopen", testReopen},
		{"Scheme", testScheme},
		{"Concurrent", testConcurrent},
		{"Exhaustion", testExhaustion},
		{"Cancelled", testCancelled},
		{"Closed", testClosed},
		{"Runs", testRuns},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) { tc.fn(t, b) })
	}
}

var holder = authority.Holder{Program: "authoritytest", Host: "h1", PID: 42, Note: "a note"}

func mustOpen(t *testing.T, open Opener, scheme shuffle.Scheme) authority.Issuer {
	t.Helper()
	a, err := open(t.Context(), scheme)
	if err != nil {
		t.Fatalf("cannot open the authority: %v", err)
	}
	t.Cleanup(func() { a.Close() })
	return a
}

func mustIssue(t *testing.T, a authority.Issuer, h authority.Holder) callnumber.Lease {
	t.Helper()
	l, err := a.Issue(t.Context(), h)
	if err != nil {
		t.Fatalf("Issue() = %v", err)
	}
	return l
}

// sameLease compares what an authority keeps of a lease.
func sameLease(got, want callnumber.Lease) error {
	if !got.IssuedAt.Equal(want.IssuedAt) {
		return fmt.Errorf("issued at %v, want %v", got.IssuedAt, want.IssuedAt)
	}
	got.IssuedAt = want.IssuedAt
	if got != want {
		return fmt.Errorf("got %+v, want %+v", got, want)
	}
	return nil
}

func testFirstRuns(t *testing.T, b Backend) {
	a := mustOpen(t, b.New(t), "")
	if id, err := hex.DecodeString(a.ID()); err != nil || len(id) != 16 {
		t.Errorf("ID() = %q, want 32 hex digits", a.ID())
	}
	if a.Scheme() != authority.DefaultScheme {
		t.Errorf("Scheme() = %q, want the default %q", a.Scheme(), authority.DefaultScheme)
	}
	if a.Key() == (shuffle.Key{}) {
		t.Error("Key() is all zero")
	}
	if err := a.Check(t.Context()); err != nil {
		t.Errorf("Check() = %v", err)
	}
	nonces := map[string]bool{}
	var last uint32
	for i := range 5 {
		l := mustIssue(t, a, holder)
		if err := l.Validate(); err != nil {
			t.Errorf("lease %d: %v", i, err)
		}
		if i == 0 && l.Run != 1 {
			t.Errorf("first run of a new authority = %d, want 1", l.Run)
		}
		if l.Run <= last {
			t.Errorf("run %d issued after %d by one handle, one at a time: want increasing", l.Run, last)
		}
		last = l.Run
		if l.Authority != a.ID() || l.Scheme != a.Scheme() || l.Key != a.Key() {
			t.Errorf("lease %d names authority %s %s, want %s %s and its key", l.Run, l.Authority, l.Scheme, a.ID(), a.Scheme())
		}
		if l.Program != holder.Program || l.Host != holder.Host || l.PID != holder.PID || l.Note != holder.Note {
			t.Errorf("lease %d holder = %q %q %d %q, want %+v", l.Run, l.Program, l.Host, l.PID, l.Note, holder)
		}
		if n, err := hex.DecodeString(l.Nonce); err != nil || len(n) != 16 || nonces[l.Nonce] {
			t.Errorf("lease %d nonce %q: want 32 new hex digits", l.Run, l.Nonce)
		}
		nonces[l.Nonce] = true
		if l.IssuedAt.IsZero() {
			t.Errorf("lease %d has no issued-at", l.Run)
		}
	}
	// A backend may reserve runs ahead (riakauthority does), so the next
	// run is above the last one issued, not necessarily just above.
	next, err := a.NextRun(t.Context())
	if err != nil || next <= uint64(last) || next > callnumber.MaxRun {
		t.Errorf("NextRun() after issuing up to %d = %d, %v; want above it", last, next, err)
	}
}

func testLease(t *testing.T, b Backend) {
	a := mustOpen(t, b.New(t), "")
	var issued []callnumber.Lease
	for i := range 3 {
		h := holder
		h.PID = i + 1
		issued = append(issued, mustIssue(t, a, h))
	}
	for _, want := range issued {
		got, err := a.Lease(t.Context(), want.Run)
		if err != nil {
			t.Errorf("Lease(%d) = %v", want.Run, err)
			continue
		}
		if err := sameLease(got, want); err != nil {
			t.Errorf("Lease(%d): %v", want.Run, err)
		}
	}
	for _, run := range []uint32{issued[2].Run + 1, issued[2].Run + 1000, callnumber.MaxRun} {
		if _, err := a.Lease(t.Context(), run); !errors.Is(err, authority.ErrNotIssued) {
			t.Errorf("Lease(%d), never issued, = %v; want ErrNotIssued", run, err)
		}
	}
}

func testReopen(t *testing.T, b Backend) {
	open := b.New(t)
	a, err := open(t.Context(), shuffle.Bits)
	if err != nil {
		t.Fatal(err)
	}
	first := mustIssue(t, a, holder)
	id, key := a.ID(), a.Key()
	if err := a.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	a = mustOpen(t, open, "")
	if a.ID() != id || a.Key() != key || a.Scheme() != shuffle.Bits {
		t.Errorf("reopened: authority %s %s, want %s bits and the same key", a.ID(), a.Scheme(), id)
	}
	got, err := a.Lease(t.Context(), first.Run)
	if err != nil {
		t.Fatalf("Lease(%d) after reopening = %v", first.Run, err)
	}
	if err := sameLease(got, first); err != nil {
		t.Errorf("Lease(%d) after reopening: %v", first.Run, err)
	}
	if l := mustIssue(t, a, holder); l.Run <= first.Run {
		t.Errorf("run %d issued after reopening, want above %d", l.Run, first.Run)
	}
}

func testScheme(t *testing.T, b Backend) {
	open := b.New(t)
	a, err := open(t.Context(), shuffle.Bits)
	if err != nil {
		t.Fatal(err)
	}
	if a.Scheme() != shuffle.Bits {
		t.Errorf("Scheme() = %q, want bits", a.Scheme())
	}
	a.Close()
	if a, err := open(t.Context(), shuffle.Mix); !errors.Is(err, authority.ErrScheme) {
		if err == nil {
			a.Close()
		}
		t.Errorf("opening a bits authority for mix = %v, want ErrScheme", err)
	}
	a = mustOpen(t, open, shuffle.Bits)
	mustIssue(t, a, holder)
}

// testConcurrent issues from 8 goroutines on each of 3 handles (one when
// the backend holds its authority in one process): every run once.
func testConcurrent(t *testing.T, b Backend) {
	open := b.New(t)
	handles := []authority.Issuer{mustOpen(t, open, "")}
	if b.Several {
		handles = append(handles, mustOpen(t, open, ""), mustOpen(t, open, ""))
	}
	const perGoroutine = 12
	var (
		mu   sync.Mutex
		runs = map[uint32]callnumber.Lease{}
		wg   sync.WaitGroup
	)
	for hi, a := range handles {
		for g := range 8 {
			wg.Go(func() {
				h := holder
				h.PID = hi*100 + g
				for range perGoroutine {
					l, err := a.Issue(t.Context(), h)
					if err != nil {
						t.Errorf("Issue() = %v", err)
						return
					}
					mu.Lock()
					if prev, ok := runs[l.Run]; ok {
						t.Errorf("run %d issued twice: to %d and to %d", l.Run, prev.PID, l.PID)
					}
					runs[l.Run] = l
					mu.Unlock()
				}
			})
		}
	}
	wg.Wait()
	if want := len(handles) * 8 * perGoroutine; len(runs) != want {
		t.Errorf("%d distinct runs issued, want %d", len(runs), want)
	}
	// Every lease reads back the same from every handle.
	for run, want := range runs {
		got, err := handles[int(run)%len(handles)].Lease(t.Context(), run)
		if err != nil {
			t.Errorf("Lease(%d) = %v", run, err)
			continue
		}
		if err := sameLease(got, want); err != nil {
			t.Errorf("Lease(%d): %v", run, err)
		}
	}
}

func testExhaustion(t *testing.T, b Backend) {
	a := mustOpen(t, b.StartAt(t, callnumber.MaxRun-1), "")
	for _, want := range []uint32{callnumber.MaxRun - 1, callnumber.MaxRun} {
		if l := mustIssue(t, a, holder); l.Run != want {
			t.Errorf("Issue() = run %d, want %d", l.Run, want)
		}
	}
	for range 2 {
		if l, err := a.Issue(t.Context(), holder); !errors.Is(err, authority.ErrExhausted) {
			t.Errorf("Issue() past run 2^30-1 = run %d, %v; want ErrExhausted", l.Run, err)
		}
	}
	if next, err := a.NextRun(t.Context()); err != nil || next != callnumber.MaxRun+1 {
		t.Errorf("NextRun() when exhausted = %d, %v; want 2^30", next, err)
	}
	if _, err := a.Lease(t.Context(), callnumber.MaxRun); err != nil {
		t.Errorf("Lease(2^30-1) = %v", err)
	}
}

func testCancelled(t *testing.T, b Backend) {
	a := mustOpen(t, b.New(t), "")
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if l, err := a.Issue(ctx, holder); !errors.Is(err, context.Canceled) {
		t.Errorf("Issue(cancelled) = run %d, %v; want context.Canceled", l.Run, err)
	}
	if l := mustIssue(t, a, holder); l.Run != 1 {
		t.Errorf("first run after a cancelled Issue = %d, want 1 (nothing issued)", l.Run)
	}
}

func testClosed(t *testing.T, b Backend) {
	open := b.New(t)
	a, err := open(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	l := mustIssue(t, a, holder)
	if err := a.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	if _, err := a.Issue(t.Context(), holder); !errors.Is(err, authority.ErrClosed) {
		t.Errorf("Issue() after Close = %v, want ErrClosed", err)
	}
	if _, err := a.Lease(t.Context(), l.Run); !errors.Is(err, authority.ErrClosed) {
		t.Errorf("Lease() after Close = %v, want ErrClosed", err)
	}
	if err := a.Check(t.Context()); !errors.Is(err, authority.ErrClosed) {
		t.Errorf("Check() after Close = %v, want ErrClosed", err)
	}
}

func testRuns(t *testing.T, b Backend) {
	a, err := b.New(t)(t.Context(), "")
	if err != nil {
		t.Fatal(err)
	}
	src := authority.Runs(a, holder)
	l1, err := src.NewRun(t.Context())
	if err != nil {
		t.Fatalf("NewRun() = %v", err)
	}
	l2, err := src.NewRun(t.Context())
	if err != nil || l2.Run == l1.Run || l2.Program != holder.Program {
		t.Errorf("NewRun() twice = %d, %d (%q), %v; want two runs of %q", l1.Run, l2.Run, l2.Program, err, holder.Program)
	}
	if err := src.Close(); err != nil {
		t.Errorf("Close() = %v", err)
	}
	if _, err := a.Issue(t.Context(), holder); !errors.Is(err, authority.ErrClosed) {
		t.Errorf("Issue() after the source's Close = %v, want ErrClosed", err)
	}
}
