package storetest

import (
	"errors"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
)

var moveTests = []struct {
	name string
	fn   func(t *testing.T, open Opener)
}{
	{"Move", testMove},
	{"MoveErrors", testMoveErrors},
	{"MoveChanges", testMoveChanges},
	{"RecordMove", testRecordMove},
}

func sameMove(a, b store.Move) bool {
	return a.Number == b.Number && a.List == b.List && a.Moved.Equal(b.Moved)
}

// testMove moves a message to another list: Get answers it there, from
// every handle and after a reopen; moving it where it is writes nothing;
// moving it again moves it again; the bytes and the rest stay.
func testMove(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "wrong")
	b := Message(f.auth.Number(t, 1, 1), Mail("b@example.org", "b"), "b@example.org", "")
	mustPut(t, f.s, a, b)
	before := time.Now().Add(-time.Second)
	m, err := f.s.Move(t.Context(), a.Number, "right")
	if err != nil {
		t.Fatalf("Move(%v, right) = %v", a.Number, err)
	}
	if m.Number != a.Number || m.List != "right" || m.Moved.Before(before) || time.Since(m.Moved) > time.Hour {
		t.Errorf("Move(%v, right) = %+v, want it moved to right about now", a.Number, m)
	}
	if again, err := f.s.Move(t.Context(), a.Number, "right"); err != nil || !sameMove(again, m) {
		t.Errorf("Move(%v, right) again = %+v, %v; want the first move %+v", a.Number, again, err, m)
	}
	// A message stored without a list, moved into one.
	mb, err := f.s.Move(t.Context(), b.Number, "b-list")
	if err != nil || mb.List != "b-list" {
		t.Fatalf("Move(%v, b-list) = %+v, %v", b.Number, mb, err)
	}
	// Stored where it is: a move to it writes nothing, Moved is zero.
	c := Message(f.auth.Number(t, 1, 2), Mail("c@example.org", "c"), "c@example.org", "here")
	mustPut(t, f.s, c)
	if mc, err := f.s.Move(t.Context(), c.Number, "here"); err != nil || mc.List != "here" || !mc.Moved.IsZero() {
		t.Errorf("Move(%v, the list it was stored in) = %+v, %v; want it there, never moved", c.Number, mc, err)
	}
	movedA, movedB := a, b
	movedA.List, movedB.List = "right", "b-list"
	check := func(t *testing.T, s store.Store) {
		t.Helper()
		checkGet(t, s, movedA)
		checkGet(t, s, movedB)
		checkGet(t, s, c)
		checkByID(t, s, "a@example.org", a.Number)
		checkCount(t, s, 3)
		// The same bytes again are the same message, wherever it is.
		checkResults(t, mustPut(t, s, a), store.Result{Number: a.Number, Duplicate: true})
	}
	t.Run("same handle", func(t *testing.T) { check(t, f.s) })
	t.Run("another handle", func(t *testing.T) { check(t, mustOpen(t, open)) })
	if err := f.s.Close(); err != nil {
		t.Fatal(err)
	}
	s := mustOpen(t, open)
	t.Run("reopened", func(t *testing.T) { check(t, s) })
	// And back: the list it was stored with.
	if back, err := s.Move(t.Context(), a.Number, "wrong"); err != nil || back.List != "wrong" || back.Moved.Before(m.Moved) {
		t.Errorf("Move(%v, back to wrong) = %+v, %v", a.Number, back, err)
	}
	checkGet(t, s, a)
}

// testMoveErrors: a number with no message, a removed one, a list name a
// URL cannot hold.
func testMoveErrors(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "l")
	r := Message(f.auth.Number(t, 1, 1), Mail("r@example.org", "r"), "r@example.org", "l")
	mustPut(t, f.s, a, r)
	if _, err := f.s.Remove(t.Context(), r.Number, "spam"); err != nil {
		t.Fatal(err)
	}
	if m, err := f.s.Move(t.Context(), f.auth.Number(t, 1, 9), "other"); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("Move(never stored) = %+v, %v; want %v", m, err, store.ErrNotFound)
	}
	var re *store.RemovedError
	if m, err := f.s.Move(t.Context(), r.Number, "other"); !errors.As(err, &re) || re.Removal.Number != r.Number {
		t.Errorf("Move(removed) = %+v, %v; want a *RemovedError", m, err)
	}
	for _, bad := range []string{"", "Upper", "a b", "-lead", "trail.", "x/y", string(make([]byte, 65))} {
		if m, err := f.s.Move(t.Context(), a.Number, bad); !errors.Is(err, store.ErrBadList) {
			t.Errorf("Move(%q) = %+v, %v; want %v", bad, m, err, store.ErrBadList)
		}
	}
	checkGet(t, f.s, a)
}

// testMoveChanges: moves come in the feed after their message, in order,
// with the message as it was stored; a follower past them sees only new
// ones; a move to where a message is adds nothing.
func testMoveChanges(t *testing.T, open Opener) {
	f := setup(t, open)
	var msgs []store.Message
	for i := range 3 {
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), Mail("", "m"+string(rune('a'+i))), "", "first"))
	}
	mustPut(t, f.s, msgs...)
	early := newFollower(t, f.s, 2)
	early.await(msgs)
	m1, err := f.s.Move(t.Context(), msgs[1].Number, "second")
	if err != nil {
		t.Fatal(err)
	}
	m2, err := f.s.Move(t.Context(), msgs[1].Number, "third")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.s.Move(t.Context(), msgs[2].Number, "first"); err != nil {
		t.Fatal(err)
	}
	page, err := f.s.Changes(t.Context(), early.cursor, 10)
	if err != nil {
		t.Fatal(err)
	}
	if len(page.Messages) != 0 || len(page.Moves) != 2 || !sameMove(page.Moves[0], m1) || !sameMove(page.Moves[1], m2) || page.Next == early.cursor {
		t.Errorf("Changes after the moves = %d messages, moves %+v, next %q; want the two moves %+v, %+v in order, and a new cursor", len(page.Messages), page.Moves, page.Next, m1, m2)
	}
	if page, err := f.s.Changes(t.Context(), page.Next, 10); err != nil || !page.Empty() {
		t.Errorf("Changes after the end = %+v, %v; want an empty page", page, err)
	}
	// From the start, one at a time: the messages as stored, then the
	// moves.
	late := newFollower(t, f.s, 1)
	late.await(msgs)
	late.check(msgs)
	if len(late.moves) != 2 || !sameMove(late.moves[0], m1) || !sameMove(late.moves[1], m2) {
		t.Errorf("a follower from the start saw moves %+v, want %+v and %+v", late.moves, m1, m2)
	}
	// A removal after a move comes after it.
	r, err := f.s.Remove(t.Context(), msgs[1].Number, "")
	if err != nil {
		t.Fatal(err)
	}
	again := newFollower(t, f.s, 100)
	if _, err := again.poll(t.Context()); err != nil {
		t.Fatal(err)
	}
	if len(again.moves) != 2 || len(again.removals) != 1 || !sameRemoval(again.removals[0], r) {
		t.Errorf("a follower after the removal saw moves %+v and removals %+v", again.moves, again.removals)
	}
}

// testRecordMove records a mirror's origin's move: its date is kept; a
// message not stored yet is moved all the same, and stored later it is
// in the list the move says; a run without a lease is refused.
func testRecordMove(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("a@example.org", "a"), "a@example.org", "old")
	mustPut(t, f.s, a)
	when := time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)
	want := store.Move{Number: a.Number, List: "new", Moved: when}
	got, err := f.s.RecordMove(t.Context(), want)
	if err != nil || !sameMove(got, want) {
		t.Fatalf("RecordMove(%+v) = %+v, %v", want, got, err)
	}
	if again, err := f.s.RecordMove(t.Context(), store.Move{Number: a.Number, List: "new", Moved: when.Add(time.Hour)}); err != nil || !sameMove(again, want) {
		t.Errorf("RecordMove(the same list again) = %+v, %v; want %+v", again, err, want)
	}
	moved := a
	moved.List = "new"
	checkGet(t, f.s, moved)

	later := Message(f.auth.Number(t, 1, 5), Mail("later@example.org", "later"), "later@example.org", "old")
	lm := store.Move{Number: later.Number, List: "new", Moved: when}
	if got, err := f.s.RecordMove(t.Context(), lm); err != nil || !sameMove(got, lm) {
		t.Fatalf("RecordMove(not stored yet) = %+v, %v", got, err)
	}
	checkNotFound(t, f.s, later.Number)
	mustPut(t, f.s, later)
	movedLater := later
	movedLater.List = "new"
	checkGet(t, f.s, movedLater)

	if got, err := f.s.RecordMove(t.Context(), store.Move{Number: f.auth.Number(t, 7, 0), List: "x", Moved: when}); !errors.Is(err, store.ErrUnknownRun) {
		t.Errorf("RecordMove(a run without a lease) = %+v, %v; want %v", got, err, store.ErrUnknownRun)
	}
	if got, err := f.s.RecordMove(t.Context(), store.Move{Number: a.Number, List: "x"}); err == nil {
		t.Errorf("RecordMove(without a date) = %+v, nil; want an error", got)
	}
}
