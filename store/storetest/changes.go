package storetest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// feedDeadline is how long a follower waits for a message the feed
// promises within a second, before the test calls it missed: generous,
// for loaded machines.
const feedDeadline = 10 * time.Second

// Feed reads s's whole change feed from the start, pageSize messages a
// page, and returns what it lists by call number. A message listed twice
// (under one number) is an error.
func Feed(t testing.TB, s store.Store, pageSize int) map[callnumber.Number]store.Stored {
	t.Helper()
	out := make(map[callnumber.Number]store.Stored)
	var cur store.Cursor
	for {
		page, err := s.Changes(t.Context(), cur, pageSize)
		if err != nil {
			t.Fatalf("Changes(%q) = %v", cur, err)
		}
		if page.Empty() {
			return out
		}
		for _, m := range page.Messages {
			if _, ok := out[m.Number]; ok {
				t.Errorf("the change feed lists %v twice", m.Number)
			}
			out[m.Number] = m
		}
		cur = page.Next
	}
}

// follower reads a store's change feed as the catalog does: each call
// passes the previous answer's cursor.
type follower struct {
	t      testing.TB
	s      store.Store
	cursor store.Cursor
	max    int
	// seen is every message seen, in the order first seen.
	seen  []store.Stored
	index map[callnumber.Number]int
	// removals are the removals seen, in feed order.
	removals []store.Removal
	// moves are the moves seen, in feed order.
	moves []store.Move
}

func newFollower(t testing.TB, s store.Store, max int) *follower {
	return &follower{t: t, s: s, max: max, index: make(map[callnumber.Number]int)}
}

// poll reads the feed until it answers an empty page, and returns how many
// messages it had not seen before.
func (f *follower) poll(ctx context.Context) (int, error) {
	fresh := 0
	for {
		page, err := f.s.Changes(ctx, f.cursor, f.max)
		if err != nil {
			return fresh, err
		}
		if f.max > 0 && len(page.Messages) > f.max {
			return fresh, fmt.Errorf("Changes(%q, max %d) returned %d messages", f.cursor, f.max, len(page.Messages))
		}
		if page.Empty() && page.Next != f.cursor {
			return fresh, fmt.Errorf("Changes(%q) returned nothing and moved the cursor to %q", f.cursor, page.Next)
		}
		if f.max > 0 && page.Len() > f.max {
			return fresh, fmt.Errorf("Changes(%q, max %d) returned %d messages, %d moves and %d removals", f.cursor, f.max, len(page.Messages), len(page.Moves), len(page.Removals))
		}
		f.removals = append(f.removals, page.Removals...)
		f.moves = append(f.moves, page.Moves...)
		for _, m := range page.Messages {
			if _, ok := f.index[m.Number]; !ok {
				f.index[m.Number] = len(f.seen)
				f.seen = append(f.seen, m)
				fresh++
			}
		}
		f.cursor = page.Next
		if page.Empty() {
			return fresh, nil
		}
	}
}

// await polls until every message of want has been seen, or fails after
// feedDeadline.
func (f *follower) await(want []store.Message) {
	f.t.Helper()
	deadline := time.Now().Add(feedDeadline)
	for {
		if _, err := f.poll(f.t.Context()); err != nil {
			f.t.Fatalf("following the change feed: %v", err)
		}
		missing := 0
		var first callnumber.Number
		for _, m := range want {
			if _, ok := f.index[m.Number]; !ok {
				if missing == 0 {
					first = m.Number
				}
				missing++
			}
		}
		if missing == 0 {
			return
		}
		if time.Now().After(deadline) {
			f.t.Fatalf("the change feed still lacks %d of %d stored messages (%v first) %v after they were stored", missing, len(want), first, feedDeadline)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// check compares what was seen with the messages stored, byte for byte.
func (f *follower) check(stored []store.Message) {
	f.t.Helper()
	if len(f.seen) != len(stored) {
		f.t.Errorf("the change feed listed %d distinct messages, want the %d stored", len(f.seen), len(stored))
	}
	want := make(map[callnumber.Number]store.Message, len(stored))
	for _, m := range stored {
		want[m.Number] = m
	}
	for _, got := range f.seen {
		m, ok := want[got.Number]
		if !ok {
			f.t.Errorf("the change feed listed %v, which was not stored", got.Number)
			continue
		}
		if !bytes.Equal(got.Raw, m.Raw) || got.Digest != m.Digest || got.MessageID != m.MessageID || got.List != m.List || got.Added.IsZero() {
			f.t.Errorf("the change feed's %v = {%d bytes, %v, %q, %q, added %v}, want {%d bytes, %v, %q, %q, added set}",
				got.Number, len(got.Raw), got.Digest, got.MessageID, got.List, got.Added, len(m.Raw), m.Digest, m.MessageID, m.List)
		}
	}
}

// testChanges puts batches in an order a real archive sees (a newer run's
// messages, then an old run's, as when a long-lived watcher writes beside
// importers), with duplicates and a retried batch, and follows the feed in
// small pages.
func testChanges(t *testing.T, open Opener) {
	f := setup(t, open, 1, 2)
	ctx := t.Context()
	fol := newFollower(t, f.s, 2)
	if n, err := fol.poll(ctx); err != nil || n != 0 || fol.cursor != "" {
		t.Fatalf("following an empty store: %d messages, cursor %q, %v; want 0, \"\", nil", n, fol.cursor, err)
	}

	var stored []store.Message
	var batches [][]store.Message
	put := func(msgs ...store.Message) {
		t.Helper()
		res := mustPut(t, f.s, msgs...)
		var written []store.Message
		for i, r := range res {
			if !r.Duplicate {
				written = append(written, msgs[i])
			}
		}
		stored = append(stored, written...)
		batches = append(batches, written)
	}
	msg := func(run uint32, seq int, list string) store.Message {
		id := fmt.Sprintf("feed-%d-%d@example.org", run, seq)
		return Message(f.auth.Number(t, run, seq), Mail(id, id), id, list)
	}
	put(msg(2, 0, "new"), msg(2, 1, "new"), msg(2, 2, "new"))
	put(msg(1, 0, "old"), msg(1, 1, ""))                                              // an old run after a newer one
	put(msg(2, 3, "new"), Message(f.auth.Number(t, 2, 4), msg(1, 0, "").Raw, "", "")) // a duplicate is not in the feed
	put(msg(2, 5, "new"), msg(2, 6, ""), msg(2, 7, "x"), msg(2, 8, "x"), msg(2, 9, "x"))
	fol.await(stored)
	fol.check(stored)

	// Order: a message appears after every message whose Put returned
	// before its own Put began.
	last := -1
	for i, b := range batches {
		lo, hi := len(fol.seen), -1
		for _, m := range b {
			j := fol.index[m.Number]
			lo, hi = min(lo, j), max(hi, j)
		}
		if len(b) > 0 && lo <= last {
			t.Errorf("batch %d's messages appear from position %d, before the end of earlier batches (%d): feed order is not store order", i, lo, last)
		}
		last = max(last, hi)
	}

	// Nothing new: the cursor stays.
	before := fol.cursor
	page, err := f.s.Changes(ctx, before, 10)
	if err != nil || len(page.Messages) != 0 || page.Next != before {
		t.Errorf("Changes(%q) with nothing new = %d messages, next %q, %v; want 0, %q", before, len(page.Messages), page.Next, err, before)
	}
	// A retried batch writes nothing new, and the feed may or may not list
	// its messages again; it must not list a message that was not stored.
	put(msg(2, 0, "new"), msg(2, 1, "new"))
	if _, err := fol.poll(ctx); err != nil {
		t.Fatal(err)
	}
	fol.check(stored)

	// A follower starting over from "" sees it all again.
	again := newFollower(t, f.s, 0)
	again.await(stored)
	again.check(stored)
}

// testChangesReopen: a cursor outlives the store handle that gave it, as
// a follower's saved cursor outlives the process.
func testChangesReopen(t *testing.T, open Opener) {
	f := setup(t, open)
	a := Message(f.auth.Number(t, 1, 0), Mail("ra", "ra"), "ra", "")
	b := Message(f.auth.Number(t, 1, 1), Mail("rb", "rb"), "rb", "")
	mustPut(t, f.s, a)
	fol := newFollower(t, f.s, 10)
	fol.await([]store.Message{a})
	saved := fol.cursor
	if err := f.s.Close(); err != nil {
		t.Fatalf("Close() = %v", err)
	}
	s := mustOpen(t, open)
	mustPut(t, s, b)
	fol2 := newFollower(t, s, 10)
	fol2.cursor = saved
	fol2.await([]store.Message{b})
	if _, ok := fol2.index[a.Number]; ok {
		// Allowed by the contract only as a repeat; a follower that saved
		// its cursor after seeing a should normally not see it again. Not
		// an error, but worth knowing when a backend does it.
		t.Logf("the feed listed %v again after a reopen", a.Number)
	}
}

// testChangesBadCursor: cursors the store did not hand out are refused
// with ErrBadCursor, never taken for a position.
func testChangesBadCursor(t *testing.T, open Opener) {
	f := setup(t, open)
	mustPut(t, f.s, Message(f.auth.Number(t, 1, 0), Mail("bc", "bc"), "bc", ""))
	for _, c := range []store.Cursor{"garbage", "s", "s-1", "s01", "k", "\x00", "riak:?", "s18446744073709551616"} {
		if page, err := f.s.Changes(t.Context(), c, 10); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("Changes(%q) = %d messages, next %q, %v; want %v", c, len(page.Messages), page.Next, err, store.ErrBadCursor)
		}
	}
}

// testChangesLarge: a page of large messages may hold fewer than max, and
// the follower still gets every one.
func testChangesLarge(t *testing.T, open Opener) {
	f := setup(t, open)
	var msgs []store.Message
	for i := range 4 {
		raw := append(Mail(fmt.Sprint("large", i), fmt.Sprint("large", i)), bytes.Repeat([]byte{'a' + byte(i)}, 6<<20)...)
		msgs = append(msgs, Message(f.auth.Number(t, 1, i), raw, fmt.Sprint("large", i), ""))
	}
	for _, m := range msgs {
		mustPut(t, f.s, m)
	}
	fol := newFollower(t, f.s, 100)
	fol.await(msgs)
	fol.check(msgs)
}

// testChangesConcurrent has writers, each with its own run, put batches
// while a follower polls: when they are done, the follower has seen every
// stored message within the feed's promise, and nothing else.
func testChangesConcurrent(t *testing.T, open Opener) {
	const writers, batches, size = 3, 8, 10
	runs := make([]uint32, writers)
	for i := range runs {
		runs[i] = uint32(30 + i)
	}
	f := setup(t, open, runs...)
	ctx := t.Context()
	var (
		mu     sync.Mutex
		stored []store.Message
		wg     sync.WaitGroup
		errs   = make(chan error, writers+1)
	)
	for w := range writers {
		wg.Go(func() {
			for b := range batches {
				var msgs []store.Message
				for i := range size {
					seq := b*size + i
					id := fmt.Sprintf("cc-%d-%d@example.org", w, seq)
					msgs = append(msgs, Message(f.auth.Number(t, runs[w], seq), Mail(id, id), id, "cc"))
				}
				if _, err := f.s.Put(ctx, msgs); err != nil {
					errs <- fmt.Errorf("writer %d batch %d: %w", w, b, err)
					return
				}
				mu.Lock()
				stored = append(stored, msgs...)
				mu.Unlock()
			}
		})
	}
	fol := newFollower(t, f.s, 7)
	done := make(chan struct{})
	var polling sync.WaitGroup
	polling.Go(func() {
		for {
			select {
			case <-done:
				return
			default:
			}
			if _, err := fol.poll(ctx); err != nil {
				errs <- fmt.Errorf("follower: %w", err)
				return
			}
		}
	})
	wg.Wait()
	close(done)
	polling.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	fol.await(stored)
	fol.check(stored)
}
