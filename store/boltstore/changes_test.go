package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// toFormat2 turns a closed format 3 file into what format 2 wrote: every
// record in the messages bucket, no packs.
func toFormat2(t *testing.T, path string) {
	t.Helper()
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	p := newPacks(packDir(path), true)
	defer p.close()
	err = db.Update(func(tx *bolt.Tx) error {
		messages := tx.Bucket(bucketMessages)
		inline := map[string][]byte{}
		err := messages.ForEach(func(k, v []byte) error {
			if !isLocator(v) {
				return nil
			}
			l, err := parseLocator(v)
			if err != nil {
				return err
			}
			rec, err := p.read(tx, l)
			inline[string(k)] = rec
			return err
		})
		if err != nil {
			return err
		}
		for k, rec := range inline {
			if err := messages.Put([]byte(k), rec); err != nil {
				return err
			}
		}
		if err := tx.DeleteBucket(bucketPacks); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyPack); err != nil {
			return err
		}
		return meta.Put(keyFormat, []byte(formatV2))
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(packDir(path)); err != nil {
		t.Fatal(err)
	}
}

// downgrade turns a closed format 3 file into what format 1 wrote: every
// record in the messages bucket, no changes bucket, no backfill mark.
func downgrade(t *testing.T, path string) {
	t.Helper()
	toFormat2(t, path)
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		if err := tx.DeleteBucket(bucketChanges); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if err := meta.Delete(keyBackfilled); err != nil {
			return err
		}
		return meta.Put(keyFormat, []byte(formatV1))
	})
	if err != nil {
		t.Fatal(err)
	}
}

// numbers returns the call numbers of a page.
func numbers(p store.ChangePage) []callnumber.Number {
	var out []callnumber.Number
	for _, m := range p.Messages {
		out = append(out, m.Number)
	}
	return out
}

// TestUpgradeFormat1 stores messages, turns the file into a format 1 file,
// reads part of its feed the way a read-only follower does (key order),
// then opens it writable: the upgrade backfills the feed, the old cursor
// continues where it stood, and new messages follow.
func TestUpgradeFormat1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s, err := Open(ctx, path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []uint32{1, 2, 3} {
		if err := s.RecordLease(ctx, a.Lease(run)); err != nil {
			t.Fatal(err)
		}
	}
	var msgs []store.Message
	for i, rs := range [][2]int{{2, 0}, {2, 1}, {1, 0}, {1, 1}, {2, 2}} { // stored out of key order
		raw := storetest.Mail("up", string(rune('a'+i)))
		msgs = append(msgs, storetest.Message(a.Number(t, uint32(rs[0]), rs[1]), raw, "up", ""))
	}
	if _, err := s.Put(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	downgrade(t, path)
	// Key order: run 1's messages, then run 2's.
	keyOrder := []callnumber.Number{msgs[2].Number, msgs[3].Number, msgs[0].Number, msgs[1].Number, msgs[4].Number}

	// A follower of the format 1 file reads two messages in key order.
	db, err := bolt.Open(path, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	codec := a.Codec
	var first store.ChangePage
	err = db.View(func(tx *bolt.Tx) error {
		if v, err := checkFormat(tx); err != nil || v != 1 {
			t.Fatalf("checkFormat(downgraded file) = %v, %v; want 1, nil", v, err)
		}
		first, err = s.legacyPage(tx, codec, cursor{}, 2) // s is closed: its decoder still works
		return err
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	if got := numbers(first); !slices.Equal(got, keyOrder[:2]) {
		t.Fatalf("format 1 feed, first page = %v, want %v", got, keyOrder[:2])
	}

	// A writable open upgrades the file; the old cursor carries on.
	s, err = Open(ctx, path, Options{Linger: -1})
	if err != nil {
		t.Fatalf("Open(format 1 file) = %v", err)
	}
	defer s.Close()
	rest, err := s.Changes(ctx, first.Next, 10)
	if err != nil {
		t.Fatalf("Changes(%q) after the upgrade = %v", first.Next, err)
	}
	if got := numbers(rest); !slices.Equal(got, keyOrder[2:]) {
		t.Errorf("Changes(%q) after the upgrade = %v, want %v", first.Next, got, keyOrder[2:])
	}
	all, err := s.Changes(ctx, "", 10)
	if err != nil || !slices.Equal(numbers(all), keyOrder) {
		t.Errorf("Changes(\"\") after the upgrade = %v, %v; want %v", numbers(all), err, keyOrder)
	}
	// New messages come after the backfilled ones.
	late := storetest.Message(a.Number(t, 1, 2), storetest.Mail("late", "late"), "late", "")
	if _, err := s.Put(ctx, []store.Message{late}); err != nil {
		t.Fatal(err)
	}
	next, err := s.Changes(ctx, rest.Next, 10)
	if err != nil || !slices.Equal(numbers(next), []callnumber.Number{late.Number}) {
		t.Errorf("Changes(%q) after a new Put = %v, %v; want [%v]", rest.Next, numbers(next), err, late.Number)
	}
	// A cursor before the first message, and one past the last.
	for _, tt := range []struct {
		c    cursor
		want []callnumber.Number
	}{
		{cursor{legacy: true, packed: 0}, append(slices.Clone(keyOrder), late.Number)},
		{cursor{legacy: true, packed: 1<<47 - 1}, []callnumber.Number{late.Number}},
	} {
		p, err := s.Changes(ctx, tt.c.String(), 10)
		if err != nil || !slices.Equal(numbers(p), tt.want) {
			t.Errorf("Changes(%q) = %v, %v; want %v", tt.c.String(), numbers(p), err, tt.want)
		}
	}
	if count, err := s.Count(ctx); err != nil || count != 6 {
		t.Errorf("Count() = %d, %v; want 6", count, err)
	}
}

// TestLegacyCursorOnNewFile: a key-order cursor means nothing to a file
// created with the change feed.
func TestLegacyCursorOnNewFile(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, filepath.Join(t.TempDir(), "messages.db"), Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := storetest.NewAuthority(t, shuffle.Mix)
	if err := s.RecordLease(ctx, a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Put(ctx, []store.Message{storetest.Message(a.Number(t, 1, 0), storetest.Mail("x", "x"), "x", "")}); err != nil {
		t.Fatal(err)
	}
	c := cursor{legacy: true, packed: 5}.String()
	if _, err := s.Changes(ctx, c, 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("Changes(%q) on a format 2 file = %v, want %v", c, err, store.ErrBadCursor)
	}
}

// TestFutureFormat: a file of a format this program does not know is
// refused, naming both.
func TestFutureFormat(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	s.Close()
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Put(keyFormat, []byte("chibrary-messages/99")) })
	db.Close()
	if s, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrFormat) {
		if s != nil {
			s.Close()
		}
		t.Errorf("Open(format 99) = %v, want %v", err, ErrFormat)
	}
}

// TestReadOnlyFormat1: a format 1 file that cannot be upgraded (a
// read-only archive) serves its feed in key order.
func TestReadOnlyFormat1(t *testing.T) {
	ctx := t.Context()
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s, err := Open(ctx, path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	for _, run := range []uint32{1, 2} {
		if err := s.RecordLease(ctx, a.Lease(run)); err != nil {
			t.Fatal(err)
		}
	}
	b := storetest.Message(a.Number(t, 2, 0), storetest.Mail("b", "b"), "b", "")
	c := storetest.Message(a.Number(t, 1, 0), storetest.Mail("c", "c"), "c", "")
	if _, err := s.Put(ctx, []store.Message{b, c}); err != nil {
		t.Fatal(err)
	}
	s.Close()
	downgrade(t, path)
	ro, err := Open(ctx, path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(format 1, read-only) = %v", err)
	}
	defer ro.Close()
	p, err := ro.Changes(ctx, "", 1)
	if err != nil || !slices.Equal(numbers(p), []callnumber.Number{c.Number}) {
		t.Fatalf("Changes(\"\", 1) = %v, %v; want [%v] (key order)", numbers(p), err, c.Number)
	}
	p, err = ro.Changes(ctx, p.Next, 10)
	if err != nil || !slices.Equal(numbers(p), []callnumber.Number{b.Number}) {
		t.Errorf("Changes(%q) = %v, %v; want [%v]", p.Next, numbers(p), err, b.Number)
	}
	if _, err := ro.Changes(ctx, "s5", 10); !errors.Is(err, store.ErrBadCursor) {
		t.Errorf("Changes(s5) on a format 1 file = %v, want %v", err, store.ErrBadCursor)
	}
}
