package riakstore

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// Tests of removal on Riak beyond the conformance suite: what is left in
// Riak of a removed message, a removal cut short at each of its steps,
// removers racing, and a Put racing a removal in the same pack.

// uncompressed are options of a new archive whose records hold the raw
// bytes as they are, so that a value can be searched for them.
func uncompressed(t *testing.T) Options {
	o := testOptions(t)
	o.Compression = store.Compression{Off: true}
	return o
}

// removable returns messages under run 1 that share a pack: a large one
// first, then n-1 small ones, each with a Message-ID of its own and a
// text found nowhere else.
func removable(t *testing.T, a *storetest.Authority, tag string, n int) []store.Message {
	var msgs []store.Message
	for i := range n {
		id := fmt.Sprintf("%s-%d-%s@example.org", tag, i, testArchive())
		raw := storetest.Mail(id, "unique text "+id)
		if i == 0 {
			raw = append(raw, strings.Repeat("the large one "+id+"\n", largeMessage/40)...)
		}
		msgs = append(msgs, storetest.Message(a.Number(t, 1, i), raw, id, "l"))
	}
	return msgs
}

// checkGone checks that nothing of the removed message m is left in
// Riak's current values: its pack is one value, without its bytes or
// its Message-ID's index term; no large object; the Message-ID index
// names no pack.
func checkGone(t *testing.T, s *Store, m store.Message) {
	t.Helper()
	bd, err := s.binding(t.Context())
	if err != nil || bd == nil {
		t.Fatalf("binding = %v, %v", bd, err)
	}
	f, err := bd.codec.Decode(m.Number)
	if err != nil {
		t.Fatal(err)
	}
	key := packKey(f)
	got, err := s.fetch(t.Context(), s.b.types.KV, s.b.packs, key, all)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.values) != 1 {
		t.Errorf("pack %s has %d values, want 1", key, len(got.values))
	}
	for i, v := range got.values {
		if bytes.Contains(v.Value, []byte(m.MessageID)) {
			t.Errorf("value %d of pack %s holds the removed message's bytes", i, key)
		}
		for _, term := range v.Indexes[indexMsgID] {
			if term == msgIDKey(m.MessageID) {
				t.Errorf("value %d of pack %s is indexed under the removed message's Message-ID", i, key)
			}
		}
	}
	p, err := mergePack(got.values, s.decoder(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if e := p.entries[f.Sequence]; !e.removed || p.stale || p.suspect {
		t.Errorf("pack %s: entry %d removed %v, stale %v, suspect %v; want a removal entry and nothing left", key, f.Sequence, e.removed, p.stale, p.suspect)
	}
	large, err := s.fetch(t.Context(), s.b.types.KV, s.b.large, m.Number.String(), all)
	if err != nil || large.found() {
		t.Errorf("the large object of %v: found %v, %v; want it deleted", m.Number, large.found(), err)
	}
	cmd, err := s.do(t.Context(), func() (riak.Command, error) {
		return riak.NewSecondaryIndexQueryCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.packs).
			WithIndexName(indexMsgID).WithIndexKey(msgIDKey(m.MessageID)).Build()
	})
	if err != nil {
		t.Fatal(err)
	}
	if r := cmd.(*riak.SecondaryIndexQueryCommand).Response; r != nil && len(r.Results) > 0 {
		t.Errorf("the Message-ID index still names %d packs for the removed message", len(r.Results))
	}
}

// follow reads the feed from cur to its end: the messages and removals
// it hands out, and the cursor to go on from.
func follow(t *testing.T, s store.Store, cur store.Cursor) ([]store.Stored, []store.Removal, store.Cursor) {
	t.Helper()
	var msgs []store.Stored
	var rs []store.Removal
	for range 1000 {
		page, err := s.Changes(t.Context(), cur, 4)
		if err != nil {
			t.Fatalf("Changes(%q) = %v", cur, err)
		}
		if page.Empty() {
			if page.Next != cur {
				t.Fatalf("Changes(%q) = an empty page and the cursor %q", cur, page.Next)
			}
			return msgs, rs, cur
		}
		msgs = append(msgs, page.Messages...)
		rs = append(rs, page.Removals...)
		cur = page.Next
	}
	t.Fatal("the feed never ends")
	return nil, nil, ""
}

func sameRemoval(a, b store.Removal) bool {
	return a.Number == b.Number && a.Digest == b.Digest && a.MessageIDSum == b.MessageIDSum && a.Reason == b.Reason && a.Removed.Equal(b.Removed)
}

// checkRemovedOnce checks what readers see of the completed removal r:
// Get answers it, Removals lists it once, the feed from the start hands
// it out once and never the message.
func checkRemovedOnce(t *testing.T, s *Store, r store.Removal) {
	t.Helper()
	var re *store.RemovedError
	if _, err := s.Get(t.Context(), r.Number); !errors.As(err, &re) || !sameRemoval(re.Removal, r) {
		t.Errorf("Get(removed %v) = %v, want the removal %+v", r.Number, err, r)
	}
	if rs, err := s.Removals(t.Context()); err != nil || len(rs) != 1 || !sameRemoval(rs[0], r) {
		t.Errorf("Removals() = %+v, %v; want the one record %+v", rs, err, r)
	}
	msgs, rs, _ := follow(t, s, "")
	for _, m := range msgs {
		if m.Number == r.Number {
			t.Errorf("the feed from the start hands out the removed message %v", r.Number)
		}
	}
	if len(rs) != 1 || !sameRemoval(rs[0], r) {
		t.Errorf("the feed from the start hands out removals %+v, want the one %+v", rs, r)
	}
}

// TestRemoveInterrupted: a remover killed after each step of a removal
// leaves a removal that a second Remove, from another handle, completes:
// one record, the same the first made; one removal in the feed, for a
// follower that saw the message and for one that reads from the start;
// the count one less (one too many when killed between marking the
// removal done and counting it out, as the package doc says); nothing of
// the message left in Riak's values.
func TestRemoveInterrupted(t *testing.T) {
	for _, point := range []string{"remove: begun", "remove: listed", "remove: logged", "remove: noted", "remove: pack read", "remove: packed", "remove: deleted", "remove: done"} {
		for _, which := range []int{0, 1} { // the large message, a small one
			t.Run(fmt.Sprintf("%s/%d", point, which), func(t *testing.T) {
				o := uncompressed(t)
				a := storetest.NewAuthority(t, shuffle.Mix)
				first := open(t, o)
				recordLease(t, first, a, 1)
				msgs := removable(t, a, "cut", 3)
				if _, err := first.Put(t.Context(), msgs); err != nil {
					t.Fatal(err)
				}
				m := msgs[which]
				_, _, cur := follow(t, first, "")
				first.hook = func(p string) error {
					if p == point {
						return errCrash
					}
					return nil
				}
				if _, err := first.Remove(t.Context(), m.Number, "cut short"); !errors.Is(err, errCrash) {
					t.Fatalf("Remove with a crash at %q = %v, want %v", point, err, errCrash)
				}
				first.Close()

				second := open(t, o)
				// Before it completes: the feed hands out the removal at
				// most once (pending while no entry is noted).
				_, early, cur := follow(t, second, cur)
				st, _, err := second.removalState(t.Context(), m.Number)
				if err != nil || st == nil {
					t.Fatalf("removal state after a crash at %q = %v, %v; want one", point, st, err)
				}
				r, err := second.Remove(t.Context(), m.Number, "another reason")
				if err != nil {
					t.Fatalf("second Remove = %v", err)
				}
				if !sameRemoval(r, st.removal) || r.Reason != "cut short" {
					t.Errorf("second Remove = %+v, want the first's record %+v", r, st.removal)
				}
				_, late, _ := follow(t, second, cur)
				if got := append(early, late...); len(got) != 1 || !sameRemoval(got[0], r) {
					t.Errorf("a follower that saw the message is handed removals %+v, want the one %+v", got, r)
				}
				checkRemovedOnce(t, second, r)
				checkGone(t, second, m)
				for _, k := range msgs {
					if k.Number != m.Number {
						if got, err := second.Get(t.Context(), k.Number); err != nil || !bytes.Equal(got.Raw, k.Raw) {
							t.Errorf("Get(kept %v) = %v", k.Number, err)
						}
					}
				}
				want := int64(len(msgs) - 1)
				if point == "remove: done" {
					want++
				}
				if n, err := second.Count(t.Context()); err != nil || n != want {
					t.Errorf("Count() = %d, %v; want %d", n, err, want)
				}
				// A third Remove changes nothing.
				if again, err := second.Remove(t.Context(), m.Number, ""); err != nil || !sameRemoval(again, r) {
					t.Errorf("third Remove = %+v, %v; want %+v", again, err, r)
				}
				if n, err := second.Count(t.Context()); err != nil || n != want {
					t.Errorf("Count() after a third Remove = %d, %v; want %d", n, err, want)
				}
			})
		}
	}
}

// TestRemoveRace: removers of one number at once, on handles of their
// own, make one record between them, one removal in the feed, and count
// the message out once; removers of the other numbers of its pack at
// once all hold.
func TestRemoveRace(t *testing.T) {
	o := testOptions(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	w := open(t, o)
	recordLease(t, w, a, 1)
	msgs := removable(t, a, "race", 4)
	if _, err := w.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	const removers = 6
	stores := make([]*Store, removers)
	for i := range stores {
		stores[i] = open(t, o)
	}
	got := make([]store.Removal, removers)
	errs := make([]error, removers)
	var wg sync.WaitGroup
	start := make(chan struct{})
	for i := range removers {
		wg.Go(func() {
			<-start
			got[i], errs[i] = stores[i].Remove(t.Context(), msgs[1].Number, fmt.Sprintf("remover %d", i))
		})
	}
	close(start)
	wg.Wait()
	for i := range removers {
		if errs[i] != nil || !sameRemoval(got[i], got[0]) {
			t.Errorf("remover %d: %+v, %v; want the record %+v", i, got[i], errs[i], got[0])
		}
	}
	checkRemovedOnce(t, w, got[0])
	checkGone(t, w, msgs[1])
	if n, err := w.Count(t.Context()); err != nil || n != int64(len(msgs)-1) {
		t.Errorf("Count() = %d, %v; want %d", n, err, len(msgs)-1)
	}

	// The other messages of the pack, each by a remover of its own, at
	// once: every removal holds, whatever order their writes of the pack
	// went in.
	rest := append(msgs[:1:1], msgs[2:]...)
	start = make(chan struct{})
	for i, m := range rest {
		wg.Go(func() {
			<-start
			got[i], errs[i] = stores[i].Remove(t.Context(), m.Number, "")
		})
	}
	close(start)
	wg.Wait()
	for i, m := range rest {
		if errs[i] != nil {
			t.Fatalf("Remove(%v) = %v", m.Number, errs[i])
		}
		var re *store.RemovedError
		if _, err := w.Get(t.Context(), m.Number); !errors.As(err, &re) || !sameRemoval(re.Removal, got[i]) {
			t.Errorf("Get(removed %v) = %v, want its removal", m.Number, err)
		}
		checkGone(t, w, m)
	}
	if n, err := w.Count(t.Context()); err != nil || n != 0 {
		t.Errorf("Count() = %d, %v; want 0", n, err)
	}
}

// TestRemoveBesidePut: a Put into the pack of a message being removed,
// made from a read of the pack before the removal, neither brings the
// message back nor loses its own messages, whichever writes the pack
// first; a Put killed between its write and its repair leaves a sibling
// with the message that readers ignore, and that a second Remove (or the
// next Put into the pack) writes away.
func TestRemoveBesidePut(t *testing.T) {
	for _, tt := range []struct {
		name string
		// race runs the other writer at a point of the first.
		putFirst bool // the Put writes the pack while the removal is between its read and its write
		killed   bool // the Put is killed before it repairs the pack
	}{
		{name: "removal between the Put's read and write"},
		{name: "Put between the removal's read and write", putFirst: true},
		{name: "Put killed before its repair", killed: true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			o := uncompressed(t)
			a := storetest.NewAuthority(t, shuffle.Mix)
			putter := open(t, o)
			remover := open(t, o)
			recordLease(t, putter, a, 1)
			msgs := removable(t, a, "beside", 6)
			if _, err := putter.Put(t.Context(), msgs[:3]); err != nil {
				t.Fatal(err)
			}
			gone, later := msgs[1], msgs[3:]
			var (
				once   atomic.Bool
				r      store.Removal
				rerr   error
				putRes []store.Result
				putErr error
			)
			if tt.putFirst {
				remover.hook = func(p string) error {
					if p == "remove: pack read" && once.CompareAndSwap(false, true) {
						putRes, putErr = putter.Put(t.Context(), later)
					}
					return nil
				}
				r, rerr = remover.Remove(t.Context(), gone.Number, "beside")
			} else {
				putter.hook = func(p string) error {
					if p == "pack" && once.CompareAndSwap(false, true) {
						r, rerr = remover.Remove(t.Context(), gone.Number, "beside")
					}
					if p == "settle" && tt.killed {
						return errCrash
					}
					return nil
				}
				putRes, putErr = putter.Put(t.Context(), later)
			}
			if rerr != nil {
				t.Fatalf("Remove = %v", rerr)
			}
			if tt.killed {
				if !errors.Is(putErr, errCrash) {
					t.Fatalf("Put killed before its repair = %v, want %v", putErr, errCrash)
				}
				// The Put's sibling still holds the message; readers go by
				// the removal.
				var re *store.RemovedError
				if _, err := remover.Get(t.Context(), gone.Number); !errors.As(err, &re) {
					t.Errorf("Get(removed) beside a stale sibling = %v, want a *RemovedError", err)
				}
				if ids, err := remover.ByMessageID(t.Context(), gone.MessageID); err != nil || len(ids) != 0 {
					t.Errorf("ByMessageID(removed) beside a stale sibling = %v, %v; want none", ids, err)
				}
				if again, err := remover.Remove(t.Context(), gone.Number, ""); err != nil || !sameRemoval(again, r) {
					t.Fatalf("second Remove = %+v, %v; want %+v", again, err, r)
				}
				// The Put, run again, completes.
				putter.hook = nil
				putRes, putErr = putter.Put(t.Context(), later)
			}
			if putErr != nil {
				t.Fatalf("Put = %v", putErr)
			}
			for i, res := range putRes {
				if res.Number != later[i].Number || res.Removed {
					t.Errorf("Put result %d = %+v, want %v", i, res, later[i].Number)
				}
			}
			checkRemovedOnce(t, putter, r)
			checkGone(t, putter, gone)
			for _, m := range append(msgs[:1:1], msgs[2:]...) {
				if got, err := putter.Get(t.Context(), m.Number); err != nil || !bytes.Equal(got.Raw, m.Raw) {
					t.Errorf("Get(%v) = %v; want it kept", m.Number, err)
				}
				if ids, err := putter.ByMessageID(t.Context(), m.MessageID); err != nil || len(ids) != 1 || ids[0] != m.Number {
					t.Errorf("ByMessageID(%v's) = %v, %v", m.Number, ids, err)
				}
			}
		})
	}
}

// TestRemovePending: a message pending in a follower's cursor (its Put
// had claimed it, not written it) and removed before the follower looks
// again is never handed out; its removal is.
func TestRemovePending(t *testing.T) {
	o := testOptions(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	w := open(t, o)
	reader := open(t, o)
	recordLease(t, w, a, 1)
	msgs := removable(t, a, "pending", 3)
	claimed := make(chan struct{})
	release := make(chan struct{})
	w.hook = func(p string) error {
		if p == "claimed" {
			close(claimed)
			<-release
		}
		return nil
	}
	var wg sync.WaitGroup
	var putErr error
	wg.Go(func() { _, putErr = w.Put(t.Context(), msgs) })
	<-claimed
	got, rs, cur := follow(t, reader, "")
	if len(got) != 0 || len(rs) != 0 || cur != "" {
		t.Fatalf("the feed while the batch is claimed = %d messages, %d removals, cursor %q; want nothing", len(got), len(rs), cur)
	}
	// A later batch moves the cursor on, the first one's items pending.
	recordLease(t, w, a, 2)
	other := storetest.Message(a.Number(t, 2, 0), storetest.Mail("other@example.org", "other"), "other@example.org", "")
	if _, err := reader.Put(t.Context(), []store.Message{other}); err != nil {
		t.Fatal(err)
	}
	got, _, cur = follow(t, reader, "")
	if len(got) != 1 || !strings.Contains(string(cur), "~") {
		t.Fatalf("the feed after a later batch = %d messages, cursor %q; want the one and the first batch pending", len(got), cur)
	}
	close(release)
	wg.Wait()
	if putErr != nil {
		t.Fatal(putErr)
	}
	w.hook = nil
	r, err := w.Remove(t.Context(), msgs[2].Number, "")
	if err != nil {
		t.Fatal(err)
	}
	got, rs, cur = follow(t, reader, cur)
	if len(got) != 2 || got[0].Number != msgs[0].Number || got[1].Number != msgs[1].Number {
		t.Errorf("the feed once the batch is written hands out %d messages, want the two kept", len(got))
	}
	if len(rs) != 1 || !sameRemoval(rs[0], r) {
		t.Errorf("the feed hands out removals %+v, want %+v", rs, r)
	}
	if strings.Contains(string(cur), "~") {
		t.Errorf("cursor %q still names pending items", cur)
	}
}

// TestRemovalsPaged: Removals reads the index a page at a time, and
// lists every record once, in the order they were made.
func TestRemovalsPaged(t *testing.T) {
	o := testOptions(t)
	a := storetest.NewAuthority(t, shuffle.Mix)
	w := open(t, o)
	w.removalsPage = 3
	recordLease(t, w, a, 1)
	var msgs []store.Message
	for i := range 20 {
		id := fmt.Sprintf("paged-%d@example.org", i)
		msgs = append(msgs, storetest.Message(a.Number(t, 1, i*5), storetest.Mail(id, id), id, ""))
	}
	if _, err := w.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	var want []store.Removal
	for i := 0; i < len(msgs); i += 2 {
		r, err := w.Remove(t.Context(), msgs[i].Number, fmt.Sprintf("number %d", i))
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, r)
	}
	got, err := w.Removals(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if len(got) != len(want) {
		t.Fatalf("Removals() = %d records, want %d", len(got), len(want))
	}
	seen := make(map[callnumber.Number]bool)
	for i, r := range got {
		if i > 0 && r.Removed.Before(got[i-1].Removed) {
			t.Errorf("Removals()[%d] removed at %v, before the one listed before it", i, r.Removed)
		}
		seen[r.Number] = true
	}
	for _, r := range want {
		if !seen[r.Number] {
			t.Errorf("Removals() lacks %v", r.Number)
		}
	}
	if n, err := w.Count(t.Context()); err != nil || n != int64(len(msgs)-len(want)) {
		t.Errorf("Count() = %d, %v; want %d", n, err, len(msgs)-len(want))
	}
}
