package riakstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

// Tests of what only this backend does: the claims in the ledger and what
// follows from a writer that dies or stalls between claiming and writing.

var errCrash = errors.New("simulated crash")

// shortClaims are options with claims that expire after 2.5 s.
func shortClaims(t *testing.T) Options {
	o := testOptions(t)
	o.ClaimTimeout, o.MaxClockSkew = 2*time.Second, 500*time.Millisecond
	return o
}

func open(t testing.TB, o Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open = %v", err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

func recordLease(t *testing.T, s *Store, a *storetest.Authority, run uint32) {
	t.Helper()
	if err := s.RecordLease(t.Context(), a.Lease(run)); err != nil {
		t.Fatalf("RecordLease(run %d) = %v", run, err)
	}
}

// batchOf returns n messages under run, their bytes distinct per tag.
func batchOf(t *testing.T, a *storetest.Authority, run uint32, tag string, n int) []store.Message {
	var msgs []store.Message
	for i := range n {
		id := fmt.Sprintf("%s-%d@example.org", tag, i)
		msgs = append(msgs, storetest.Message(a.Number(t, run, i), storetest.Mail(id, id), id, "l"))
	}
	return msgs
}

// sameBytes returns msgs renumbered under run.
func sameBytes(t *testing.T, a *storetest.Authority, run uint32, msgs []store.Message) []store.Message {
	out := make([]store.Message, len(msgs))
	for i, m := range msgs {
		out[i] = m
		out[i].Number = a.Number(t, run, i)
	}
	return out
}

// TestCrashAfterClaim: a writer claims a batch and dies before writing
// it. Another writer (a re-run of the import) waits for the claim to
// expire, takes the messages over and stores them, once; the feed lists
// its copies and never the dead writer's numbers.
func TestCrashAfterClaim(t *testing.T) {
	o := shortClaims(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	dead := open(t, o)
	recordLease(t, dead, a, 1)
	msgs := batchOf(t, a, 1, "crash", 40)
	dead.hook = func(point string) error {
		if point == "claimed" {
			return errCrash
		}
		return nil
	}
	if _, err := dead.Put(t.Context(), msgs); !errors.Is(err, errCrash) {
		t.Fatalf("Put with a crash after the claim = %v, want %v", err, errCrash)
	}
	dead.Close()

	rerun := open(t, o)
	recordLease(t, rerun, a, 2)
	again := sameBytes(t, a, 2, msgs)
	start := time.Now()
	res, err := rerun.Put(t.Context(), again)
	took := time.Since(start)
	if err != nil {
		t.Fatalf("Put after the crash = %v", err)
	}
	t.Logf("the re-run waited %v for the dead writer's claim", took.Round(10*time.Millisecond))
	if took < 1500*time.Millisecond || took > 20*time.Second {
		t.Errorf("the re-run took %v: want it to wait for the claim to expire (2.5 s after it was made), and no longer than that by much", took)
	}
	for i, r := range res {
		if r != (store.Result{Number: again[i].Number}) {
			t.Errorf("result %d = %v, want %v stored", i, r, again[i].Number)
		}
		n, err := rerun.ByDigest(t.Context(), again[i].Digest)
		if err != nil || n != again[i].Number {
			t.Errorf("ByDigest(message %d) = %v, %v; want %v", i, n, err, again[i].Number)
		}
		if _, err := rerun.Get(t.Context(), msgs[i].Number); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%v) of the dead writer = %v, want %v", msgs[i].Number, err, store.ErrNotFound)
		}
	}
	seen := storetest.Feed(t, rerun, 7)
	if len(seen) != len(again) {
		t.Errorf("the feed lists %d messages, want the %d stored", len(seen), len(again))
	}
	for _, m := range again {
		if got, ok := seen[m.Number]; !ok || !bytes.Equal(got.Raw, m.Raw) {
			t.Errorf("the feed lacks %v", m.Number)
		}
	}
	if n, err := rerun.Count(t.Context()); err != nil || n != int64(len(again)) {
		t.Errorf("Count() = %d, %v; want %d", n, err, len(again))
	}
}

// TestCrashAfterIndex: a writer dies after its digest entries and before
// its packs. Much later (its claims expired and forgotten), a re-run finds
// entries naming messages that are not stored, replaces them and stores
// the messages, once, without waiting.
func TestCrashAfterIndex(t *testing.T) {
	o := shortClaims(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	dead := open(t, o)
	recordLease(t, dead, a, 1)
	msgs := batchOf(t, a, 1, "index", 40)
	dead.hook = func(point string) error {
		if point == "pack" {
			return errCrash
		}
		return nil
	}
	if _, err := dead.Put(t.Context(), msgs); !errors.Is(err, errCrash) {
		t.Fatalf("Put with a crash before the packs = %v, want %v", err, errCrash)
	}
	dead.Close()
	if _, err := open(t, o).ByDigest(t.Context(), msgs[0].Digest); !errors.Is(err, store.ErrNotFound) {
		t.Fatalf("ByDigest of a message whose writer died before storing it = %v, want %v", err, store.ErrNotFound)
	}
	time.Sleep(dead.retention() + 100*time.Millisecond)

	rerun := open(t, o)
	recordLease(t, rerun, a, 2)
	again := sameBytes(t, a, 2, msgs)
	start := time.Now()
	res, err := rerun.Put(t.Context(), again)
	if err != nil {
		t.Fatalf("Put after the crash = %v", err)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("the re-run took %v: there was no claim left to wait for", took)
	}
	for i, r := range res {
		if r != (store.Result{Number: again[i].Number}) {
			t.Errorf("result %d = %v, want %v stored", i, r, again[i].Number)
		}
		if n, err := rerun.ByDigest(t.Context(), again[i].Digest); err != nil || n != again[i].Number {
			t.Errorf("ByDigest(message %d) = %v, %v; want %v", i, n, err, again[i].Number)
		}
	}
	if seen := storetest.Feed(t, rerun, 7); len(seen) != len(again) {
		t.Errorf("the feed lists %d messages, want the %d stored", len(seen), len(again))
	}
	// A third import of the same messages finds them.
	third := open(t, o)
	recordLease(t, third, a, 3)
	res, err = third.Put(t.Context(), sameBytes(t, a, 3, msgs))
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r != (store.Result{Number: again[i].Number, Duplicate: true}) {
			t.Errorf("third import: result %d = %v, want a duplicate of %v", i, r, again[i].Number)
		}
	}
}

// TestSlowWriter: a writer whose claim is half its timeout old before it
// writes claims again instead of writing under an old claim; a second
// writer that arrived meanwhile waits, and gets the first one's numbers.
func TestSlowWriter(t *testing.T) {
	o := shortClaims(t)
	a := storetest.NewAuthority(t, shuffle.Bits)
	slow := open(t, o)
	other := open(t, o)
	recordLease(t, slow, a, 1)
	recordLease(t, other, a, 2)
	msgs := batchOf(t, a, 1, "slow", 20)
	var stalls atomic.Int32
	claimed := make(chan struct{})
	slow.hook = func(point string) error {
		if point == "claimed" && stalls.Add(1) == 1 {
			close(claimed)
			time.Sleep(1500 * time.Millisecond) // past ClaimTimeout/2
		}
		return nil
	}
	var slowRes []store.Result
	var slowErr error
	var wg sync.WaitGroup
	wg.Go(func() { slowRes, slowErr = slow.Put(t.Context(), msgs) })
	<-claimed
	again := sameBytes(t, a, 2, msgs)
	res, err := other.Put(t.Context(), again)
	wg.Wait()
	if slowErr != nil || err != nil {
		t.Fatalf("Put = %v (slow writer), %v (other)", slowErr, err)
	}
	if stalls.Load() < 2 {
		t.Errorf("the slow writer passed the claim point %d times, want it to claim again", stalls.Load())
	}
	for i := range msgs {
		if slowRes[i] != (store.Result{Number: msgs[i].Number}) {
			t.Errorf("slow writer's result %d = %v, want %v stored", i, slowRes[i], msgs[i].Number)
		}
		if res[i] != (store.Result{Number: msgs[i].Number, Duplicate: true}) {
			t.Errorf("other writer's result %d = %v, want a duplicate of %v", i, res[i], msgs[i].Number)
		}
		if _, err := other.Get(t.Context(), again[i].Number); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%v) = %v, want %v", again[i].Number, err, store.ErrNotFound)
		}
	}
	if n, err := other.Count(t.Context()); err != nil || n != int64(len(msgs)) {
		t.Errorf("Count() = %d, %v; want %d", n, err, len(msgs))
	}
}

// TestStalledWriterResidue shows what the package doc says is not
// guaranteed: a writer that stalls after its last look at the clock, for
// longer than the claim timeout, and then writes, leaves its messages
// stored twice, and says so in its log, even when it stalled for so long
// that it no longer keeps the claim that took them over.
func TestStalledWriterResidue(t *testing.T) {
	for _, tt := range []struct {
		name  string
		after time.Duration // stalled still after the other writer's Put
	}{
		{"taken over", 0},
		{"longer than the retention", 4300 * time.Millisecond},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := shortClaims(t)
			if tt.after > 0 && tt.after <= (&Store{opts: o}).retention() {
				t.Fatalf("stall of %v after the take-over: want more than the retention", tt.after)
			}
			var logs syncbuf.Buffer
			o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			a := storetest.NewAuthority(t, shuffle.Bits)
			stalled := open(t, o)
			recordLease(t, stalled, a, 1)
			o.Logger = nil
			other := open(t, o)
			recordLease(t, other, a, 2)
			msgs := batchOf(t, a, 1, "stall", 5)
			claimed := make(chan struct{})
			release := make(chan struct{})
			stalled.hook = func(point string) error {
				if point == "writing" {
					close(claimed)
					<-release
				}
				return nil
			}
			var wg sync.WaitGroup
			var stalledErr error
			wg.Go(func() { _, stalledErr = stalled.Put(t.Context(), msgs) })
			<-claimed
			again := sameBytes(t, a, 2, msgs)
			res, err := other.Put(t.Context(), again) // takes the expired claim over
			time.Sleep(tt.after)
			close(release)
			wg.Wait()
			if err != nil || stalledErr != nil {
				t.Fatalf("Put = %v (other), %v (stalled)", err, stalledErr)
			}
			for i := range msgs {
				if res[i] != (store.Result{Number: again[i].Number}) {
					t.Errorf("other writer's result %d = %v, want %v stored (taken over)", i, res[i], again[i].Number)
				}
				for _, n := range []callnumber.Number{msgs[i].Number, again[i].Number} {
					if _, err := other.Get(t.Context(), n); err != nil {
						t.Errorf("Get(%v) = %v: want both copies stored", n, err)
					}
				}
			}
			if got := strings.Count(logs.String(), "message stored twice"); got != len(msgs) {
				t.Errorf("the stalled writer logged %d messages stored twice, want %d; log:\n%s", got, len(msgs), logs.String())
			}
		})
	}
}

// TestFeedPending: a follower polling while a Put is between its claim and
// its writes sees nothing of it yet, is not held back by it (messages of
// a later batch come through), and sees its messages once it returns.
func TestFeedPending(t *testing.T) {
	o := testOptions(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	w1 := open(t, o)
	w2 := open(t, o)
	reader := open(t, o)
	recordLease(t, w1, a, 1)
	recordLease(t, w2, a, 2)
	first := batchOf(t, a, 1, "first", 30)
	later := batchOf(t, a, 2, "later", 3)
	claimed := make(chan struct{})
	release := make(chan struct{})
	w1.hook = func(point string) error {
		if point == "claimed" {
			close(claimed)
			<-release
		}
		return nil
	}
	var wg sync.WaitGroup
	var err1 error
	wg.Go(func() { _, err1 = w1.Put(t.Context(), first) })
	<-claimed
	// The first batch is claimed, not written: an empty page, the cursor
	// unmoved.
	page, err := reader.Changes(t.Context(), "", 10)
	if err != nil || len(page.Messages) != 0 || page.Next != "" {
		t.Fatalf("Changes while a batch is claimed and unwritten = %d messages, next %q, %v; want none", len(page.Messages), page.Next, err)
	}
	if _, err := w2.Put(t.Context(), later); err != nil {
		t.Fatal(err)
	}
	page, err = reader.Changes(t.Context(), "", 10)
	if err != nil || len(page.Messages) != len(later) {
		t.Fatalf("Changes after a later batch = %d messages, %v; want its %d, not held back by the unwritten one", len(page.Messages), err, len(later))
	}
	for i, m := range page.Messages {
		if m.Number != later[i].Number {
			t.Errorf("message %d = %v, want %v", i, m.Number, later[i].Number)
		}
	}
	cur := page.Next
	if !strings.Contains(string(cur), "~") {
		t.Errorf("cursor %q names no pending items", cur)
	}
	close(release)
	wg.Wait()
	if err1 != nil {
		t.Fatal(err1)
	}
	var got []callnumber.Number
	for {
		page, err := reader.Changes(t.Context(), cur, 8)
		if err != nil {
			t.Fatal(err)
		}
		if len(page.Messages) == 0 {
			break
		}
		for _, m := range page.Messages {
			got = append(got, m.Number)
		}
		cur = page.Next
	}
	if len(got) != len(first) {
		t.Fatalf("after the first batch was written the feed lists %d more messages, want its %d", len(got), len(first))
	}
	for i, n := range got {
		if n != first[i].Number {
			t.Errorf("message %d = %v, want %v", i, n, first[i].Number)
		}
	}
	if strings.Contains(string(cur), "~") {
		t.Errorf("cursor %q still names pending items", cur)
	}
}

// TestFeedForgetsDeadClaims: the items of a writer that died after its
// claim are pending until the claim expires, then dropped from cursors.
func TestFeedForgetsDeadClaims(t *testing.T) {
	o := shortClaims(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	dead := open(t, o)
	w := open(t, o)
	recordLease(t, dead, a, 1)
	recordLease(t, w, a, 2)
	dead.hook = func(point string) error {
		if point == "claimed" {
			return errCrash
		}
		return nil
	}
	if _, err := dead.Put(t.Context(), batchOf(t, a, 1, "dead", 4)); !errors.Is(err, errCrash) {
		t.Fatalf("Put = %v, want %v", err, errCrash)
	}
	one := batchOf(t, a, 2, "one", 1)
	if _, err := w.Put(t.Context(), one); err != nil {
		t.Fatal(err)
	}
	page, err := w.Changes(t.Context(), "", 10)
	if err != nil || len(page.Messages) != 1 || !strings.Contains(string(page.Next), "~") {
		t.Fatalf("Changes = %d messages, next %q, %v; want the one stored, the dead writer's pending", len(page.Messages), page.Next, err)
	}
	time.Sleep(o.ClaimTimeout + o.MaxClockSkew + 200*time.Millisecond)
	two := store.Message{Number: a.Number(t, 2, 1), Raw: storetest.Mail("two", "two")}
	two.Digest = store.DigestOf(two.Raw)
	if _, err := w.Put(t.Context(), []store.Message{two}); err != nil {
		t.Fatal(err)
	}
	page, err = w.Changes(t.Context(), page.Next, 10)
	if err != nil || len(page.Messages) != 1 || page.Messages[0].Number != two.Number {
		t.Fatalf("Changes after the claim expired = %d messages, %v; want the next one stored", len(page.Messages), err)
	}
	if strings.Contains(string(page.Next), "~") {
		t.Errorf("cursor %q still names the dead writer's items after their claim expired", page.Next)
	}
}

// TestFirstLeaseInterleaved: a program recording the first lease of a
// store while another authority binds it and records its own lease of
// the same run, between the program's two reads, is told the store
// belongs to another authority, not that the run was reused.
func TestFirstLeaseInterleaved(t *testing.T) {
	o := testOptions(t)
	loser, winner := open(t, o), open(t, o)
	mine := storetest.NewAuthority(t, shuffle.Mix)
	theirs := storetest.NewAuthority(t, shuffle.Mix)
	once := true
	loser.hook = func(point string) error {
		if point == "lease read" && once {
			once = false
			if err := winner.RecordLease(t.Context(), theirs.Lease(1)); err != nil {
				t.Errorf("the other authority's lease: %v", err)
			}
		}
		return nil
	}
	err := loser.RecordLease(t.Context(), mine.Lease(1))
	if !errors.Is(err, store.ErrForeignAuthority) {
		t.Errorf("RecordLease = %v, want %v", err, store.ErrForeignAuthority)
	}
	if once {
		t.Error("RecordLease never reached the point between its reads")
	}
}

// TestLeaseRace: of several programs recording different leases of one
// run at once (an authority restored from a backup, twice), exactly one
// succeeds; of several binding an empty store to different authorities
// at once, exactly one.
func TestLeaseRace(t *testing.T) {
	o := testOptions(t)
	const racers = 6
	stores := make([]*Store, racers)
	auths := make([]*storetest.Authority, racers)
	for i := range stores {
		stores[i] = open(t, o)
		auths[i] = storetest.NewAuthority(t, shuffle.Mix)
	}
	race := func(lease func(i int) callnumber.Lease) []error {
		errs := make([]error, racers)
		var wg sync.WaitGroup
		for i := range racers {
			wg.Go(func() { errs[i] = stores[i].RecordLease(t.Context(), lease(i)) })
		}
		wg.Wait()
		return errs
	}
	errs := race(func(i int) callnumber.Lease { return auths[i].Lease(1) })
	winner := -1
	for i, err := range errs {
		switch {
		case err == nil:
			if winner >= 0 {
				t.Errorf("binding: racers %d and %d both succeeded", winner, i)
			}
			winner = i
		case !errors.Is(err, store.ErrForeignAuthority):
			t.Errorf("binding: racer %d = %v, want success or %v", i, err, store.ErrForeignAuthority)
		}
	}
	if winner < 0 {
		t.Fatalf("binding: nobody won: %v", errs)
	}
	a := auths[winner]
	errs = race(func(int) callnumber.Lease { return a.Lease(7) })
	won := 0
	for i, err := range errs {
		switch {
		case err == nil:
			won++
		case !errors.Is(err, store.ErrRunReused):
			t.Errorf("run 7: racer %d = %v, want success or %v", i, err, store.ErrRunReused)
		}
	}
	if won != 1 {
		t.Errorf("run 7 leased %d times at once, want exactly 1", won)
	}
}

// TestArchivesApart: two archives in one cluster see nothing of each
// other.
func TestArchivesApart(t *testing.T) {
	o1, o2 := testOptions(t), testOptions(t)
	s1, s2 := open(t, o1), open(t, o2)
	a := storetest.NewAuthority(t, shuffle.Mix)
	recordLease(t, s1, a, 1)
	msgs := batchOf(t, a, 1, "apart", 3)
	if _, err := s1.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	if _, err := s2.Binding(ctx); !errors.Is(err, store.ErrUnbound) {
		t.Errorf("Binding() of the other archive = %v, want %v", err, store.ErrUnbound)
	}
	for _, m := range msgs {
		if _, err := s2.Get(ctx, m.Number); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("Get(%v) in the other archive = %v, want %v", m.Number, err, store.ErrNotFound)
		}
		if _, err := s2.ByDigest(ctx, m.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Errorf("ByDigest in the other archive = %v, want %v", err, store.ErrNotFound)
		}
		if ns, err := s2.ByMessageID(ctx, m.MessageID); err != nil || len(ns) != 0 {
			t.Errorf("ByMessageID in the other archive = %v, %v; want none", ns, err)
		}
	}
	if n, err := s2.Count(ctx); err != nil || n != 0 {
		t.Errorf("Count() of the other archive = %d, %v; want 0", n, err)
	}
	if page, err := s2.Changes(ctx, "", 10); err != nil || len(page.Messages) != 0 {
		t.Errorf("Changes of the other archive = %d messages, %v; want none", len(page.Messages), err)
	}
	page, err := s1.Changes(ctx, "", 1)
	if err != nil || len(page.Messages) != 1 {
		t.Fatalf("Changes = %d messages, %v", len(page.Messages), err)
	}
	if _, err := s2.Changes(ctx, page.Next, 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("Changes of the other archive with this one's cursor = %v, want %v", err, store.ErrBadCursor)
	}
}

// TestOpenChecks: Open names a missing or wrongly configured bucket type.
func TestOpenChecks(t *testing.T) {
	tests := []struct {
		name  string
		types Types
		want  []string
	}{
		{"missing type", Types{Claims: "chibrary_no_such_type"}, []string{"chibrary_no_such_type", "missing", "riak eval", "riak-admin bucket-type create"}},
		{"plain values in a counter type", Types{KV: TypeCounters}, []string{TypeCounters, "counter data types"}},
		{"counters in a plain type", Types{Counters: TypeKV}, []string{TypeKV, "datatype is none, want counter"}},
		{"the digest index in a counter type", Types{Once: TypeCounters}, []string{TypeCounters, "the digest index", "counter data types"}},
		{"the digest index missing", Types{Once: "chibrary_no_once"}, []string{"chibrary_no_once", "missing", `write_once`}},
		{"claims in a type that is not consistent", Types{Claims: TypeKV}, []string{TypeKV, "consistent is false"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			o := testOptions(t)
			o.Types = tt.types
			s, err := Open(t.Context(), o)
			if err == nil {
				s.Close()
				t.Fatalf("Open(%+v) = nil error, want %v", tt.types, ErrSetup)
			}
			if !errors.Is(err, ErrSetup) {
				t.Errorf("Open(%+v) = %v, want %v", tt.types, err, ErrSetup)
			}
			for _, w := range tt.want {
				if !strings.Contains(err.Error(), w) {
					t.Errorf("Open(%+v) = %v\nwant it to say %q", tt.types, err, w)
				}
			}
		})
	}
	if _, err := Open(t.Context(), Options{Nodes: []string{riakAddr(t)}, Archive: "Bad.Name"}); !errors.Is(err, ErrArchiveName) {
		t.Errorf("Open(archive Bad.Name) = %v, want %v", err, ErrArchiveName)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
	defer cancel()
	if s, err := Open(ctx, Options{Nodes: []string{"127.0.0.1:1"}, RetryFor: time.Second}); err == nil {
		s.Close()
		t.Errorf("Open(no node listening) = nil error")
	}
}

// TestOpenChecksUpdatable: a bucket type whose properties an update can
// set right is named, with the update that does it on today's Riak (riak
// eval: `riak admin bucket-type update` garbles its JSON argument) and on
// 2.x.
func TestOpenChecksUpdatable(t *testing.T) {
	const lossy = "chibrary_test_lossy"
	riaktest.BucketType(t, lossy, `{"props":{"allow_mult":false}}`)
	o := testOptions(t)
	o.Types.KV = lossy
	s, err := Open(t.Context(), o)
	if err == nil {
		s.Close()
		t.Fatalf("Open(messages in a type with allow_mult false) = nil error, want %v", ErrSetup)
	}
	if !errors.Is(err, ErrSetup) {
		t.Errorf("Open = %v, want %v", err, ErrSetup)
	}
	for _, w := range []string{
		"bucket type " + lossy + " (for messages)", "allow_mult is false",
		`riak eval 'riak_kv_console:bucket_type_update(["` + lossy + `", "{\"props\":{\"allow_mult\":true,\"last_write_wins\":false}}"]).'`,
		`riak-admin bucket-type update ` + lossy + ` '{"props":{"allow_mult":true,"last_write_wins":false}}'`,
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open = %v\nwant it to say %s", err, w)
		}
	}
	if strings.Contains(err.Error(), "riak admin bucket-type") {
		t.Errorf("Open = %v\nit recommends riak admin bucket-type, which garbles its argument on Riak 3", err)
	}
}

// TestOpenNoConsensus: on a node with strong consistency off, whose
// bucket types are all there (the claims type consistent, as created by
// the book), Open says in plain words that strong consistency is off, in
// about consensusWait rather than RetryFor.
func TestOpenNoConsensus(t *testing.T) {
	addr := riaktest.NoConsensus(t)
	start := time.Now()
	s, err := Open(t.Context(), Options{Nodes: []string{addr}, Archive: testArchive()})
	took := time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Open(strong consistency off) = nil error, want %v", ErrSetup)
	}
	t.Logf("Open gave up after %v: %v", took.Round(100*time.Millisecond), err)
	if !errors.Is(err, ErrSetup) {
		t.Errorf("Open = %v, want %v", err, ErrSetup)
	}
	for _, w := range []string{
		"bucket type " + TypeClaims, "strong consistency is off", "strong_consistency = on",
		"riak eval 'riak_ensemble_manager:enabled().'", "riak-admin ensemble-status",
	} {
		if !strings.Contains(err.Error(), w) {
			t.Errorf("Open = %v\nwant it to say %s", err, w)
		}
	}
	if took > consensusWait+10*time.Second {
		t.Errorf("Open took %v to give up, want about %v", took, consensusWait)
	}

	// With a node that does not answer, the consensus may be electing
	// leaders without it: Open waits as long as for any request, and says
	// which node was missing rather than that the setup is wrong.
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	dead := ln.Addr().String()
	ln.Close()
	retryFor := consensusWait + 10*time.Second
	start = time.Now()
	s, err = Open(t.Context(), Options{Nodes: []string{addr, dead}, Archive: testArchive(), RetryFor: retryFor})
	took = time.Since(start)
	if err == nil {
		s.Close()
		t.Fatalf("Open(strong consistency off, a node down) = nil error")
	}
	t.Logf("with %s down, Open gave up after %v: %v", dead, took.Round(100*time.Millisecond), err)
	if errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), dead+" did not answer") {
		t.Errorf("Open = %v\nwant it to name %s as not answering, not the setup as wrong", err, dead)
	}
	if took < consensusWait+5*time.Second {
		t.Errorf("Open gave up after %v with a node down, want about RetryFor (%v), longer than %v", took, retryFor, consensusWait)
	}
}

func riakAddr(t *testing.T) string { return testOptions(t).Nodes[0] }

// TestRequestBudget pins the requests a batch costs: about one per new
// message (a digest entry; the packs add one per 16; a writer that read
// the ledger from its first slot looks up only digests some entry
// claimed, see unclaimed), and one per message already stored (a digest
// lookup; the pack of the number it names, to see that the message is
// there, one per 16).
//
// The batch brings the archive to 1,000 messages, where it would train its
// first compression dictionary: once in an archive's life, reading the
// newest messages back (a pack read per 16, 0.07 per message of this
// batch). That is not a Put's budget: this archive never trains.
func TestRequestBudget(t *testing.T) {
	o := testOptions(t)
	o.Compression.TrainAt = -1
	s := open(t, o)
	a := storetest.NewAuthority(t, shuffle.Mix)
	recordLease(t, s, a, 1)
	recordLease(t, s, a, 2)
	const n = 1000
	msgs := batchOf(t, a, 1, "budget", n)
	before := s.Requests()
	if _, err := s.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	perNew := float64(s.Requests()-before) / n
	before = s.Requests()
	res, err := s.Put(t.Context(), sameBytes(t, a, 2, msgs))
	if err != nil {
		t.Fatal(err)
	}
	perDup := float64(s.Requests()-before) / n
	t.Logf("requests per message: %.3f new, %.3f already stored", perNew, perDup)
	for i, r := range res {
		if !r.Duplicate || r.Number != msgs[i].Number {
			t.Fatalf("result %d = %v, want a duplicate of %v", i, r, msgs[i].Number)
		}
	}
	if perNew > 1.2 {
		t.Errorf("a batch of %d new messages took %.3f requests per message, want at most 1.2", n, perNew)
	}
	if perDup > 1.2 {
		t.Errorf("a batch of %d stored messages took %.3f requests per message, want at most 1.2", n, perDup)
	}
}

// TestUnclaimed: a writer that read the ledger from its first slot looks
// up only the digests some entry claimed, or a removal reserved, and
// finds those stored; one that did not (the ledger was longer than half
// its first batch) looks every digest up.
func TestUnclaimed(t *testing.T) {
	o := testOptions(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	first := open(t, o)
	for run := uint32(1); run <= 4; run++ {
		recordLease(t, first, a, run)
	}
	stored := batchOf(t, a, 1, "stored", 4)
	if _, err := first.Put(t.Context(), stored); err != nil {
		t.Fatal(err)
	}
	// A new handle, a batch of 10: it reads the ledger's one slot.
	reader := open(t, o)
	batch := append(sameBytes(t, a, 2, stored), batchOf(t, a, 2, "new", 10)[4:]...)
	res, err := reader.Put(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		want := store.Result{Number: batch[i].Number}
		if i < len(stored) {
			want = store.Result{Number: stored[i].Number, Duplicate: true}
		}
		if r != want {
			t.Errorf("result %d = %v, want %v", i, r, want)
		}
	}
	if got := reader.skipped.Load(); got != 6 {
		t.Errorf("digests not looked up = %d, want the 6 new ones", got)
	}
	// A removal recorded by another handle reserves a digest no claim
	// names: the reader, which follows the ledger, looks it up.
	reserved := storetest.Mail("reserved@example.org", "removed elsewhere")
	rn := store.Removal{Number: a.Number(t, 3, 0), Digest: store.DigestOf(reserved), Removed: time.Now().UTC().Truncate(time.Second), Reason: "spam"}
	if _, err := first.RecordRemoval(t.Context(), rn); err != nil {
		t.Fatal(err)
	}
	before := reader.skipped.Load()
	res, err = reader.Put(t.Context(), []store.Message{storetest.Message(a.Number(t, 2, 10), reserved, "reserved@example.org", "l")})
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Result{Number: rn.Number, Duplicate: true, Removed: true}); res[0] != want {
		t.Errorf("Put(bytes of a recorded removal) = %v, want %v", res[0], want)
	}
	if got := reader.skipped.Load() - before; got != 0 {
		t.Errorf("digests not looked up = %d, want 0", got)
	}
	// A new handle whose first batch is one message: the ledger (3 slots)
	// is too long to read whole for it.
	late := open(t, o)
	res, err = late.Put(t.Context(), sameBytes(t, a, 4, stored[:1]))
	if err != nil {
		t.Fatal(err)
	}
	if want := (store.Result{Number: stored[0].Number, Duplicate: true}); res[0] != want {
		t.Errorf("late writer's result = %v, want %v", res[0], want)
	}
	res, err = late.Put(t.Context(), batchOf(t, a, 4, "late", 2)[1:])
	if err != nil || res[0].Duplicate {
		t.Errorf("late writer's Put(new message) = %v, %v; want it stored", res, err)
	}
	if got := late.skipped.Load(); got != 0 {
		t.Errorf("late writer's digests not looked up = %d, want 0", got)
	}
}

// TestDamagedPack: a pack whose bytes were damaged on disk is read as an
// error, never as other bytes.
func TestDamagedPack(t *testing.T) {
	o := testOptions(t)
	s := open(t, o)
	a := storetest.NewAuthority(t, shuffle.Mix)
	recordLease(t, s, a, 1)
	msgs := batchOf(t, a, 1, "damaged", 3)
	if _, err := s.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	key := packKey(callnumber.Fields{Run: 1, Sequence: 0})
	got, err := s.fetch(t.Context(), s.b.types.KV, s.b.packs, key, sure)
	if err != nil || !got.found() {
		t.Fatalf("fetch pack %s = %v, %v", key, got.found(), err)
	}
	p, err := mergePack(got.values, s.decoder(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	e := p.entries[1]
	rec := bytes.Clone(e.rec)
	rec[len(rec)-len(rec)/4] ^= 0x20 // one flipped bit, as a disk does
	e.rec = rec
	p.entries[1] = e
	if _, _, err := s.putPack(t.Context(), key, p.entries, p.terms, got.vclock); err != nil {
		t.Fatal(err)
	}
	if m, err := s.Get(t.Context(), msgs[1].Number); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("Get(damaged message) = %d bytes, %v; want %v", len(m.Raw), err, record.ErrCorrupt)
	}
	if m, err := s.Get(t.Context(), msgs[0].Number); err != nil || !bytes.Equal(m.Raw, msgs[0].Raw) {
		t.Errorf("Get(its undamaged neighbour) = %d bytes, %v; want its bytes", len(m.Raw), err)
	}
}

// TestStalledLookup: a writer that stalls between looking its digests up
// and claiming them, for longer than it keeps the claims it has read,
// while another writer stores the same messages, does not store them a
// second time: it looks them up again, and reports duplicates of the
// other writer's numbers. Once as its handle's first write (the ledger
// read back from its end) and once with the ledger followed since an
// earlier write.
func TestStalledLookup(t *testing.T) {
	for _, followed := range []bool{false, true} {
		t.Run(fmt.Sprintf("followed=%v", followed), func(t *testing.T) {
			o := shortClaims(t)
			a := storetest.NewAuthority(t, shuffle.Mix)
			stalled := open(t, o)
			other := open(t, o)
			recordLease(t, stalled, a, 1)
			recordLease(t, other, a, 2)
			if followed {
				if _, err := stalled.Put(t.Context(), batchOf(t, a, 1, "earlier", 1)); err != nil {
					t.Fatal(err)
				}
			}
			msgs := batchOf(t, a, 1, "lookup", 8)
			if followed {
				for i := range msgs {
					msgs[i] = storetest.Message(a.Number(t, 1, 1+i), msgs[i].Raw, msgs[i].MessageID, msgs[i].List)
				}
			}
			reached := make(chan struct{})
			release := make(chan struct{})
			var stalls atomic.Int32
			stalled.hook = func(point string) error {
				if point == "claiming" && stalls.Add(1) == 1 {
					close(reached)
					<-release
				}
				return nil
			}
			var wg sync.WaitGroup
			var res []store.Result
			var stalledErr error
			wg.Go(func() { res, stalledErr = stalled.Put(t.Context(), msgs) })
			<-reached
			again := sameBytes(t, a, 2, msgs)
			otherRes, err := other.Put(t.Context(), again)
			if err != nil {
				close(release)
				wg.Wait()
				t.Fatal(err)
			}
			// Until the stalled writer no longer keeps the other's claims.
			time.Sleep(stalled.retention() + 300*time.Millisecond)
			close(release)
			wg.Wait()
			if stalledErr != nil {
				t.Fatalf("Put after a stall before the claim = %v", stalledErr)
			}
			for i := range msgs {
				if otherRes[i] != (store.Result{Number: again[i].Number}) {
					t.Errorf("other writer's result %d = %v, want %v stored", i, otherRes[i], again[i].Number)
				}
				if res[i] != (store.Result{Number: again[i].Number, Duplicate: true}) {
					t.Errorf("stalled writer's result %d = %v, want a duplicate of %v", i, res[i], again[i].Number)
				}
				if _, err := other.Get(t.Context(), msgs[i].Number); !errors.Is(err, store.ErrNotFound) {
					t.Errorf("Get(%v) of the stalled writer = %v, want %v: stored twice", msgs[i].Number, err, store.ErrNotFound)
				}
			}
			want := int64(len(msgs))
			if followed {
				want++
			}
			if n, err := other.Count(t.Context()); err != nil || n != want {
				t.Errorf("Count() = %d, %v; want %d", n, err, want)
			}
		})
	}
}
