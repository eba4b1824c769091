package storetest

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
)

var removalTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"Remove", testRemove},
	{"RemoveRefusesNumber", testRemoveRefusesNumber},
	{"RemoveErrors", testRemoveErrors},
	{"RemoveChanges", testRemoveChanges},
	{"RemoveLarge", testRemoveLarge},
	{"RecordRemoval", testRecordRemoval},
	{"RemoveSameMessage", testRemoveSameMessage},
}

// checkRemoved checks that Get of n answers the removal r.
func checkRemoved(t *testing.T, s store.Store, r store.Removal) {
	t.Helper()
	got, err := s.Get(t.Context(), r.Number)
	var re *store.RemovedError
	if !errors.Is(err, store.ErrRemoved) || !errors.As(err, &re) {
		t.Fatalf("Get(removed %v) = %d bytes, %v; want a *RemovedError", r.Number, len(got.Raw), err)
	}
	if !sameRemoval(re.Removal, r) {
		t.Errorf("Get(removed %v) says %+v, want %+v", r.Number, re.Removal, r)
	}
}

func sameRemoval(a, b store.Removal) bool {
	return a.Number == b.Number && a.Digest == b.Digest && a.MessageIDSum == b.MessageIDSum && a.Content == b.Content && a.Reason == b.Reason && a.Removed.Equal(b.Removed)
}

func checkRemovals(t *testing.T, s store.Store, want ...store.Removal) {
	t.Helper()
	got, err := s.Removals(t.Context())
	if err != nil {
		t.Fatalf("Removals() = %v", err)
	}
	if len(got) != len(want) {
		t.Fatalf("Removals() = %d records, want %d", len(got), len(want))
	}
	for i := range got {
		if !sameRemoval(got[i], want[i]) {
			t.Errorf("Removals()[%d] = %+v, want %+v", i, got[i], want[i])
		}
	}
}

// testRemove removes one of two messages that share a Message-ID: the
// record says what was removed, when and why; reads answer it; the
// Message-ID lists the other only; the digest stays known, so the same
// bytes are refused under any number; all of it survives a reopen.
func testRemove(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("shared@example.org", "the one removed"), "shared@example.org", "l")
	b := Message(f.auth.Number(t, 1, 1), Mail("shared@example.org", "the one kept"), "shared@example.org", "l")
	c := Message(f.auth.Number(t, 1, 2), Mail("", "no Message-ID"), "", "")
	mustPut(t, f.s, a, b, c)
	before := time.Now().Add(-time.Second)
	r, err := f.s.Remove(t.Context(), a.Number, "at the author's request")
	if err != nil {
		t.Fatalf("Remove(%v) = %v", a.Number, err)
	}
	want := store.Removal{Number: a.Number, Digest: a.Digest, MessageIDSum: store.MessageIDSum("shared@example.org"),
		Content: store.ContentOf(a.Raw, "shared@example.org"), Removed: r.Removed, Reason: "at the author's request"}
	if !sameRemoval(r, want) || r.Removed.Before(before) || time.Since(r.Removed) > time.Hour {
		t.Errorf("Remove(%v) = %+v, want %+v removed about now", a.Number, r, want)
	}
	// Removing it again changes nothing.
	if again, err := f.s.Remove(t.Context(), a.Number, "another reason"); err != nil || !sameRemoval(again, r) {
		t.Errorf("Remove(removed %v) = %+v, %v; want the first record %+v", a.Number, again, err, r)
	}
	rc, err := f.s.Remove(t.Context(), c.Number, "")
	if err != nil || rc.MessageIDSum != ([32]byte{}) || rc.Content != (store.Digest{}) || rc.Digest != c.Digest {
		t.Errorf("Remove(%v, no reason, no Message-ID) = %+v, %v", c.Number, rc, err)
	}

	check := func(t *testing.T, s store.Store) {
		t.Helper()
		checkRemoved(t, s, r)
		checkRemoved(t, s, rc)
		checkGet(t, s, b)
		checkByID(t, s, "shared@example.org", b.Number)
		if n, err := s.ByDigest(t.Context(), a.Digest); err != nil || n != a.Number {
			t.Errorf("ByDigest(removed) = %v, %v; want %v (the digest stays known)", n, err, a.Number)
		}
		checkCount(t, s, 1)
		checkRemovals(t, s, r, rc)
		// The same bytes again, under their number and under a new one:
		// removed, nothing written.
		again := Message(f.auth.Number(t, 1, 10), a.Raw, a.MessageID, a.List)
		checkResults(t, mustPut(t, s, a, again),
			store.Result{Number: a.Number, Duplicate: true, Removed: true},
			store.Result{Number: a.Number, Duplicate: true, Removed: true})
		checkNotFound(t, s, again.Number)
		checkCount(t, s, 1)
	}
	t.Run("same handle", func(t *testing.T) { check(t, f.s) })
	t.Run("another handle", func(t *testing.T) { check(t, mustOpen(t, open)) })
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	t.Run("reopened", func(t *testing.T) { check(t, mustOpen(t, open)) })
}

// testRemoveRefusesNumber: a removed number is never filled again: other
// bytes under it are refused, and nothing of their batch is written.
func testRemoveRefusesNumber(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "")
	mustPut(t, f.s, a)
	if _, err := f.s.Remove(t.Context(), a.Number, "spam"); err != nil {
		t.Fatal(err)
	}
	other := Message(a.Number, Mail("other@example.org", "other bytes"), "other@example.org", "")
	fresh := Message(f.auth.Number(t, 1, 1), Mail("fresh@example.org", "fresh"), "fresh@example.org", "")
	res, err := f.s.Put(t.Context(), []store.Message{fresh, other})
	if !errors.Is(err, store.ErrNumberTaken) {
		t.Fatalf("Put(other bytes under a removed number) = %v, %v; want %v", res, err, store.ErrNumberTaken)
	}
	checkNotFound(t, f.s, fresh.Number)
	checkByID(t, f.s, "other@example.org")
	checkCount(t, f.s, 0)
}

// testRemoveErrors: a number never stored is ErrNotFound; a reason that
// is not one short line is refused before anything changes.
func testRemoveErrors(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "")
	mustPut(t, f.s, a)
	if r, err := f.s.Remove(t.Context(), f.auth.Number(t, 1, 1), ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Remove(never stored) = %+v, %v; want %v", r, err, store.ErrNotFound)
	}
	if r, err := f.s.Remove(t.Context(), f.auth.Number(t, 5, 0), ""); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Remove(a run never leased) = %+v, %v; want %v", r, err, store.ErrNotFound)
	}
	for _, reason := range []string{"two\nlines", strings.Repeat("x", store.MaxReason+1), "bad \xff utf-8", "a\x00nul"} {
		if r, err := f.s.Remove(t.Context(), a.Number, reason); !errors.Is(err, store.ErrBadReason) {
			t.Errorf("Remove(reason %q) = %+v, %v; want %v", reason, r, err, store.ErrBadReason)
		}
	}
	checkGet(t, f.s, a)
	checkCount(t, f.s, 1)
	checkRemovals(t, f.s)
}

// testRemoveChanges: a follower that saw a message sees its removal; one
// that starts after it sees the removal and not the message.
func testRemoveChanges(t *testing.T, open Opener) {
	f := setup(t, open)
	var msgs []store.Message
	for i := range 5 {
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), Mail("", "m"+string(rune('a'+i))), "", ""))
	}
	mustPut(t, f.s, msgs...)
	early := newFollower(t, f.s, 2)
	early.await(msgs)
	r1, err := f.s.Remove(t.Context(), msgs[1].Number, "one")
	if err != nil {
		t.Fatal(err)
	}
	r3, err := f.s.Remove(t.Context(), msgs[3].Number, "three")
	if err != nil {
		t.Fatal(err)
	}
	// A page of removals only moves the cursor on.
	page, err := f.s.Changes(t.Context(), early.cursor, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 0 || len(page.Removals) != 2 || !sameRemoval(page.Removals[0], r1) || !sameRemoval(page.Removals[1], r3) || page.Next == early.cursor {
		t.Errorf("Changes after the removals = %d messages, removals %+v, next %q; want the two removals, in order, and a new cursor", len(page.Messages), page.Removals, page.Next)
	}
	if page, err := f.s.Changes(t.Context(), page.Next, 10); err != nil || !page.Empty() {
		t.Errorf("Changes after the end = %+v, %v; want an empty page", page, err)
	}
	// From the start: the kept messages, and the removals.
	late := newFollower(t, f.s, 2)
	late.await([]store.Message{msgs[0], msgs[2], msgs[4]})
	late.check([]store.Message{msgs[0], msgs[2], msgs[4]})
	if len(late.removals) != 2 || !sameRemoval(late.removals[0], r1) || !sameRemoval(late.removals[1], r3) {
		t.Errorf("a follower from the start saw removals %+v, want those of %v and %v", late.removals, r1.Number, r3.Number)
	}
}

// testRemoveLarge removes a message over 64 KiB (backends may keep such
// messages apart).
func testRemoveLarge(t *testing.T, open Opener) {
	f := setup(t, open)
	raw := append(Mail("large@example.org", "large"), []byte(strings.Repeat(randomHex(32)+"\n", 4000))...)
	m := Message(f.auth.Number(t, 1, 0), raw, "large@example.org", "")
	small := Message(f.auth.Number(t, 1, 1), Mail("small@example.org", "small"), "small@example.org", "")
	mustPut(t, f.s, m, small)
	r, err := f.s.Remove(t.Context(), m.Number, "too large")
	if err != nil {
		t.Fatal(err)
	}
	checkRemoved(t, f.s, r)
	checkGet(t, f.s, small)
	checkResults(t, mustPut(t, f.s, m), store.Result{Number: m.Number, Duplicate: true, Removed: true})
}

// testRecordRemoval records removals made elsewhere (a mirror's origin):
// of a message stored here, with the given date and reason; of a number
// never stored here, which is reserved with its digest all the same; and
// refuses one that does not match what is stored.
func testRecordRemoval(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "l")
	b := Message(f.auth.Number(t, 1, 1), Mail("b@example.org", "b"), "b@example.org", "l")
	mustPut(t, f.s, a, b)
	when := time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC)
	rm := f.s
	ra := store.Removal{Number: a.Number, Digest: a.Digest, MessageIDSum: store.MessageIDSum("a@example.org"), Removed: when, Reason: "spam"}
	got, err := rm.RecordRemoval(t.Context(), ra)
	ra.Content = store.ContentOf(a.Raw, a.MessageID) // given none: the message held says it
	if err != nil || !sameRemoval(got, ra) {
		t.Fatalf("RecordRemoval(stored message) = %+v, %v; want %+v", got, err, ra)
	}
	checkRemoved(t, f.s, ra)
	checkByID(t, f.s, "a@example.org")
	// A number never stored here: reserved, its digest refused.
	never := Mail("never@example.org", "never seen here")
	rn := store.Removal{Number: f.auth.Number(t, 1, 5), Digest: store.DigestOf(never), Removed: when.Add(time.Hour), Reason: "leak"}
	if got, err := rm.RecordRemoval(t.Context(), rn); err != nil || !sameRemoval(got, rn) {
		t.Fatalf("RecordRemoval(number never stored) = %+v, %v; want %+v", got, err, rn)
	}
	checkRemoved(t, f.s, rn)
	checkResults(t, mustPut(t, f.s, Message(f.auth.Number(t, 1, 6), never, "never@example.org", "")),
		store.Result{Number: rn.Number, Duplicate: true, Removed: true})
	if _, err := f.s.Put(t.Context(), []store.Message{Message(rn.Number, Mail("x@example.org", "other"), "", "")}); !errors.Is(err, store.ErrNumberTaken) {
		t.Errorf("Put(other bytes under a reserved number) = %v, want %v", err, store.ErrNumberTaken)
	}
	// Again: the first record stays.
	again := ra
	again.Reason, again.Removed = "another", when.Add(48*time.Hour)
	if got, err := rm.RecordRemoval(t.Context(), again); err != nil || !sameRemoval(got, ra) {
		t.Errorf("RecordRemoval(removed already) = %+v, %v; want the first %+v", got, err, ra)
	}
	// Refused: another digest than b's, a run without a lease, no date.
	bad := []struct {
		name string
		r    store.Removal
		want error
	}{
		{"other digest", store.Removal{Number: b.Number, Digest: a.Digest, Removed: when}, store.ErrNumberTaken},
		{"digest stored under another number", store.Removal{Number: f.auth.Number(t, 1, 9), Digest: b.Digest, Removed: when}, store.ErrNumberTaken},
		{"run never leased", store.Removal{Number: f.auth.Number(t, 7, 0), Digest: store.DigestOf([]byte("z")), Removed: when}, store.ErrUnknownRun},
		{"no date", store.Removal{Number: b.Number, Digest: b.Digest}, store.ErrInvalidMessage},
		{"bad reason", store.Removal{Number: b.Number, Digest: b.Digest, Removed: when, Reason: "a\nb"}, store.ErrBadReason},
	}
	for _, tt := range bad {
		if got, err := rm.RecordRemoval(t.Context(), tt.r); !errors.Is(err, tt.want) {
			t.Errorf("RecordRemoval(%s) = %+v, %v; want %v", tt.name, got, err, tt.want)
		}
	}
	checkGet(t, f.s, b)
	checkCount(t, f.s, 1)
	checkRemovals(t, f.s, ra, rn)
	late := newFollower(t, f.s, 10)
	late.await([]store.Message{b})
	if len(late.removals) != 2 {
		t.Errorf("the feed lists %d removals, want 2", len(late.removals))
	}
}

// testRemoveSameMessage: a removal covers the message, not only its
// bytes. A copy with the same Message-ID and body (store.ContentOf) but
// headers or whitespace added in transit is reported as the removed
// message, under its number, and not stored; a message with the same
// Message-ID and another body, or the same body and another Message-ID
// or none, is a message of its own. The same holds for a removal recorded
// from a mirror's origin, of a number never stored here.
func testRemoveSameMessage(t *testing.T, open Opener) {
	f := setup(t, open)
	const id = "leak@example.org"
	raw := []byte("From: poster@example.org\nTo: list@example.org\nSubject: my password\nMessage-ID: <" + id + ">\n\nIt is hunter2.\n\nDo not tell.\n>From here on, nothing.\n")
	a := Message(f.auth.Number(t, 1, 0), raw, id, "l")
	mustPut(t, f.s, a)
	r, err := f.s.Remove(t.Context(), a.Number, "a leaked password")
	if err != nil {
		t.Fatal(err)
	}
	if want := store.ContentOf(raw, id); r.Content != want || want == (store.Digest{}) {
		t.Fatalf("Remove(%v).Content = %v, want %v", a.Number, r.Content, want)
	}
	crlf := strings.ReplaceAll(string(raw), "\n", "\r\n")
	near := []struct{ name, raw string }{
		{"a blank line at the end", string(raw) + "\n"},
		{"a blank line inside the body", strings.Replace(string(raw), "Do not", "\nDo not", 1)},
		{"blank lines before the header", "\n\n" + string(raw)},
		{"another Received header", "Received: from relay.example.net by mx.example.org; Mon, 1 Jan 2024 00:00:00 +0000\n" + string(raw)},
		{"a header rewritten by the list", strings.Replace(string(raw), "Subject: my password", "Subject: [list] my password\nList-Id: <list.example.org>", 1)},
		{"CRLF line ends", crlf},
		{"CRLF and a blank line at the end", crlf + "\r\n"},
		{"spaces at line ends", strings.ReplaceAll(string(raw), ".\n", ". \t\n")},
		{"mboxo quoting left in", strings.Replace(string(raw), ">From here", ">>From here", 1)},
	}
	var batch []store.Message
	for i, c := range near {
		batch = append(batch, Message(f.auth.Number(t, 1, 10+i), []byte(c.raw), id, "l"))
	}
	check := func(t *testing.T, s store.Store) {
		t.Helper()
		for i, c := range near {
			res, err := s.Put(t.Context(), []store.Message{batch[i]})
			if err != nil || len(res) != 1 || res[0] != (store.Result{Number: a.Number, Duplicate: true, Removed: true}) {
				t.Errorf("Put(the removed message with %s) = %+v, %v; want the removed %v", c.name, res, err, a.Number)
			}
			checkNotFound(t, s, batch[i].Number)
		}
		// All at once, and beside a message of its own.
		other := Message(f.auth.Number(t, 1, 40), Mail("other@example.org", "other"), "other@example.org", "l")
		res := mustPut(t, s, append(append([]store.Message{}, batch...), other)...)
		for i := range batch {
			if res[i] != (store.Result{Number: a.Number, Duplicate: true, Removed: true}) {
				t.Errorf("Put(batch)[%d] (%s) = %+v, want the removed %v", i, near[i].name, res[i], a.Number)
			}
		}
		if last := res[len(res)-1]; last.Removed || last.Number != other.Number {
			t.Errorf("Put(batch): the other message = %+v, want it under %v", last, other.Number)
		}
		checkByID(t, s, id)
	}
	t.Run("same handle", func(t *testing.T) { check(t, f.s) })
	t.Run("another handle", func(t *testing.T) { check(t, mustOpen(t, open)) })

	// Messages of their own: another body under the same Message-ID, the
	// same body under another Message-ID or none.
	own := []store.Message{
		Message(f.auth.Number(t, 1, 50), []byte(strings.Replace(string(raw), "hunter2", "hunter3", 1)), id, "l"),
		Message(f.auth.Number(t, 1, 51), []byte(strings.Replace(string(raw), "<"+id+">", "<other-"+id+">", 1)), "other-"+id, "l"),
		Message(f.auth.Number(t, 1, 52), []byte(strings.Replace(string(raw), "Message-ID: <"+id+">\n", "", 1)), "", "l"),
	}
	res := mustPut(t, f.s, own...)
	for i, m := range own {
		if res[i] != (store.Result{Number: m.Number}) {
			t.Errorf("Put(a message of its own, %d) = %+v, want it stored under %v", i, res[i], m.Number)
		}
		checkGet(t, f.s, m)
	}
	checkByID(t, f.s, id, own[0].Number)

	// A removal recorded from a mirror's origin, of a number never
	// stored here: its content is refused too.
	const id2 = "elsewhere@example.org"
	raw2 := Mail(id2, "removed at the origin")
	rn := store.Removal{Number: f.auth.Number(t, 1, 60), Digest: store.DigestOf(raw2), MessageIDSum: store.MessageIDSum(id2),
		Content: store.ContentOf(raw2, id2), Removed: time.Date(2024, 3, 4, 5, 6, 7, 0, time.UTC), Reason: "spam"}
	if got, err := f.s.RecordRemoval(t.Context(), rn); err != nil || !sameRemoval(got, rn) {
		t.Fatalf("RecordRemoval(never stored, with its content) = %+v, %v; want %+v", got, err, rn)
	}
	copy2 := Message(f.auth.Number(t, 1, 61), append([]byte("Received: from somewhere\n"), raw2...), id2, "")
	checkResults(t, mustPut(t, f.s, copy2), store.Result{Number: rn.Number, Duplicate: true, Removed: true})
	checkNotFound(t, f.s, copy2.Number)
}
