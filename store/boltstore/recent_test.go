package boltstore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"hash/maphash"
	"os"
	"path/filepath"
	"runtime"
	"slices"
	"testing"
	"weak"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

func withRecentMerge(t *testing.T, at uint64, chunk int) {
	oldAt, oldChunk := recentMergeAt, recentChunk
	recentMergeAt, recentChunk = at, chunk
	t.Cleanup(func() { recentMergeAt, recentChunk = oldAt, oldChunk })
}

// maps returns r's maps of bucket id, as a view of a handle they agree
// with would.
func (r *recentKeys) maps(id uint64) *recentMaps {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.mapsLocked(id)
}

// openAgain opens another Store of the file at path (with maps of its
// own), closed when the test ends.
func openAgain(t *testing.T, path string) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// recentBatches returns count batches of n messages of run under a; the
// messages share seven Message-IDs (as cross-posts and resends do),
// and every tenth has none.
func recentBatches(t *testing.T, a *storetest.Authority, run uint32, count, n int) [][]store.Message {
	bs := batches(t, a, run, count, n)
	for b := range bs {
		for i := range bs[b] {
			if seq := b*n + i; seq%10 != 9 {
				bs[b][i].MessageID = fmt.Sprintf("r%d@example.org", seq%7)
			}
		}
	}
	return bs
}

// checkIndexed checks that s finds each of msgs by its digest, and that
// each Message-ID of msgs lists exactly its messages' numbers, in packed
// order, once each.
func checkIndexed(t *testing.T, s *Store, msgs []store.Message) {
	t.Helper()
	want := map[string][]callnumber.Number{}
	for _, m := range msgs {
		if n, err := s.ByDigest(t.Context(), m.Digest); err != nil || n != m.Number {
			t.Fatalf("ByDigest(the digest of %v) = %v, %v", m.Number, n, err)
		}
		if m.MessageID != "" {
			want[m.MessageID] = append(want[m.MessageID], m.Number)
		}
	}
	b, err := s.Binding(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	for id, ns := range want {
		slices.SortFunc(ns, func(a, b callnumber.Number) int { return int(codec.Packed(a)) - int(codec.Packed(b)) })
		got, err := s.ByMessageID(t.Context(), id)
		if err != nil || !slices.Equal(got, ns) {
			t.Fatalf("ByMessageID(%q) = %v, %v; want %v", id, got, err, ns)
		}
	}
}

// indexState counts the recent keys and the two indexes' entries, and
// returns the recent bucket's ID (0 if none).
func indexState(t *testing.T, s *Store) (recent, digests, msgids int, id uint64) {
	t.Helper()
	err := s.view(t.Context(), func(tx *bolt.Tx) (err error) {
		if b := tx.Bucket(bucketRecent); b != nil {
			recent = b.Stats().KeyN
			if id, err = recentID(tx); err != nil {
				return err
			}
		} else if tx.Bucket(bucketMeta).Get(keyRecent) != nil {
			return errors.New("a recent keys' ID without the bucket")
		}
		digests = tx.Bucket(bucketDigests).Stats().KeyN
		msgids = tx.Bucket(bucketMsgIDs).Stats().KeyN
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return recent, digests, msgids, id
}

func withID(msgs []store.Message) int {
	n := 0
	for _, m := range msgs {
		if m.MessageID != "" {
			n++
		}
	}
	return n
}

// A batch's index entries go to the recent keys, found there by every
// Store, and a merge moves them into the indexes, where Stores whose maps
// hold them find them too; a duplicate is caught in either place.
func TestRecentKeys(t *testing.T) {
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s1 := openLeased(t, path, a, 1, Options{})
	bs := recentBatches(t, a, 1, 4, 40)
	var all []store.Message
	for _, b := range bs[:3] {
		putAll(t, s1, b)
		all = append(all, b...)
	}
	if r, d, m, _ := indexState(t, s1); r != 120 || d != 0 || m != 0 {
		t.Fatalf("after three batches: %d recent keys, %d digests, %d Message-IDs indexed; want 120, 0, 0", r, d, m)
	}
	checkIndexed(t, s1, all)
	s2 := openLeased(t, path, a, 2, Options{})
	checkIndexed(t, s2, all)
	// A resend of a message, under another number, while its digest is
	// a recent key.
	dup := all[5]
	dup.Number = a.Number(t, 2, 0)
	checkDuplicate := func() {
		t.Helper()
		res, err := s2.Put(t.Context(), []store.Message{dup})
		if err != nil || len(res) != 1 || !res[0].Duplicate || res[0].Number != all[5].Number {
			t.Fatalf("Put(a resend of %v) = %+v, %v; want a duplicate of it", all[5].Number, res, err)
		}
	}
	checkDuplicate()

	_, _, _, old := indexState(t, s1)
	if err := s1.mergeRecent(t.Context(), 0, true); err != nil {
		t.Fatal(err)
	}
	if r, d, m, id := indexState(t, s1); r != 0 || d != 120 || m != withID(all) || id != 0 {
		t.Fatalf("after a merge: %d recent keys (ID %x), %d digests, %d Message-IDs indexed; want 0, 120, %d", r, id, d, m, withID(all))
	}
	checkIndexed(t, s1, all)
	checkIndexed(t, s2, all)
	checkDuplicate()

	// The next batch starts a recent bucket with a new ID.
	putAll(t, s2, bs[3])
	all = append(all, bs[3]...)
	if r, _, _, id := indexState(t, s1); r != 40 || id == old || id == 0 {
		t.Fatalf("after the next batch: %d recent keys under ID %x (the merged one's %x); want 40 under a new ID", r, id, old)
	}
	checkIndexed(t, s1, all)
	checkIndexed(t, s2, all)
	checkReopened(t, path, all)
	var f string
	s1.view(t.Context(), func(tx *bolt.Tx) error { f = string(tx.Bucket(bucketMeta).Get(keyFormat)); return nil })
	if f != formatRecent {
		t.Errorf("format = %q, want %q", f, formatRecent)
	}
}

// A Put that leaves recentMergeAt recent keys merges them.
func TestRecentMergedByPut(t *testing.T) {
	withRecentMerge(t, 100, 16)
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{})
	var all []store.Message
	for i, b := range recentBatches(t, a, 1, 4, 40) {
		putAll(t, s, b)
		all = append(all, b...)
		want := []int{40, 80, 0, 40}[i]
		if r, d, _, _ := indexState(t, s); r != want || d != len(all)-want {
			t.Fatalf("after batch %d: %d recent keys, %d digests indexed; want %d, %d", i, r, d, want, len(all)-want)
		}
		checkIndexed(t, s, all)
	}
}

// A merge stopped after any of its transactions (a failure, or a kill,
// which bbolt makes the same) leaves every message found, once; a removal
// then, and the next merge, finish it.
func TestRecentMergeStopped(t *testing.T) {
	withRecentMerge(t, 1<<20, 16)
	const n = 100
	chunks := (n + 15) / 16
	for stop := range chunks {
		t.Run(fmt.Sprint("after chunk ", stop), func(t *testing.T) {
			path := t.TempDir() + "/messages.db"
			a := storetest.NewAuthority(t, shuffle.Mix)
			s := openLeased(t, path, a, 1, Options{})
			msgs := recentBatches(t, a, 1, 1, n)[0]
			putAll(t, s, msgs)
			checkIndexed(t, s, msgs) // s's maps hold every key
			stopped := errors.New("stopped")
			afterRecentChunk = func(c int) error {
				if c == stop {
					return stopped
				}
				return nil
			}
			err := s.mergeRecent(t.Context(), 0, true)
			afterRecentChunk = nil
			if !errors.Is(err, stopped) {
				t.Fatalf("mergeRecent = %v, want it stopped", err)
			}
			if r, d, _, _ := indexState(t, s); r != n || d != min(n, 16*(stop+1)) {
				t.Fatalf("stopped: %d recent keys, %d digests indexed; want %d, %d", r, d, n, min(n, 16*(stop+1)))
			}
			checkIndexed(t, s, msgs)
			checkReopened(t, path, msgs)

			// A removal merges the rest first, in its transaction.
			other := openAgain(t, path)
			checkIndexed(t, other, msgs)
			gone := msgs[3]
			if _, err := s.Remove(t.Context(), gone.Number, "test"); err != nil {
				t.Fatal(err)
			}
			rest := slices.Delete(slices.Clone(msgs), 3, 4)
			if r, _, m, _ := indexState(t, s); r != 0 || m != withID(rest) {
				t.Fatalf("after a removal: %d recent keys, %d Message-IDs indexed; want 0, %d", r, m, withID(rest))
			}
			checkIndexed(t, s, rest)
			checkIndexed(t, other, rest) // its maps held the removed message
			if err := s.mergeRecent(t.Context(), 0, true); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// Merges that keep failing are tried again a quarter of the threshold
// later, not by every batch, and once four times the threshold of keys
// wait, a Put is refused, saying why, until a merge succeeds: the recent
// keys, and every Store's maps of them, do not grow without end.
func TestRecentMergeFailing(t *testing.T) {
	withRecentMerge(t, 64, 16)
	oldMin := recentLimitMin
	recentLimitMin = 0
	t.Cleanup(func() { recentLimitMin = oldMin })
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{})
	bs := recentBatches(t, a, 1, 33, 8)
	broken := errors.New("disk full")
	attempts := 0
	defer SetAfterRecentChunk(func(c int) error {
		if c == 0 {
			attempts++
		}
		return broken
	})()
	var stored []store.Message
	for _, b := range bs[:32] {
		putAll(t, s, b)
		stored = append(stored, b...)
	}
	// Tried at 64 keys, then at every 16 more up to 256.
	if attempts != 13 {
		t.Fatalf("%d merges tried for 256 recent keys, want 13", attempts)
	}
	last := bs[32]
	for try := range 2 {
		_, err := s.Put(t.Context(), last)
		if !errors.Is(err, errRecentFull) || !errors.Is(err, broken) {
			t.Fatalf("Put with 256 keys waiting for a failing merge: %v; want it refused with the merge's error", err)
		}
		if attempts != 14+try {
			t.Fatalf("a refused Put: %d merges tried in all, want %d", attempts, 14+try)
		}
	}
	if r, _, _, _ := indexState(t, s); r != 256 {
		t.Fatalf("after the refused Puts: %d recent keys, want 256", r)
	}
	for _, m := range last {
		if _, err := s.ByDigest(t.Context(), m.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("a refused message: ByDigest = %v, want ErrNotFound", err)
		}
	}
	checkIndexed(t, s, stored)

	// Once merges work again, the refused batch is stored after one.
	afterRecentChunk = nil
	putAll(t, s, last)
	stored = append(stored, last...)
	if r, d, _, _ := indexState(t, s); r != 8 || d != 256 {
		t.Fatalf("after a merge: %d recent keys, %d digests indexed; want 8, 256", r, d)
	}
	checkIndexed(t, s, stored)
	checkReopened(t, path, stored)
}

// A Store whose maps hold a removed message's keys does not find it by its
// Message-ID once another Store removed it.
func TestRecentRemovedElsewhere(t *testing.T) {
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s1 := openLeased(t, path, a, 1, Options{})
	msgs := recentBatches(t, a, 1, 1, 30)[0]
	putAll(t, s1, msgs)
	checkIndexed(t, s1, msgs)
	s2 := openAgain(t, path)
	if _, err := s2.Remove(t.Context(), msgs[0].Number, "test"); err != nil {
		t.Fatal(err)
	}
	checkIndexed(t, s1, msgs[1:])
	// Its digest stays taken: a resend is refused as before.
	if n, err := s1.ByDigest(t.Context(), msgs[0].Digest); err != nil || n != msgs[0].Number {
		t.Errorf("ByDigest(the removed message's digest) = %v, %v; want %v", n, err, msgs[0].Number)
	}
	// More batches after it: recent keys again, under a new ID.
	more := recentBatches(t, a, 2, 2, 30)
	s3 := openLeased(t, path, a, 2, Options{})
	for _, b := range more {
		putAll(t, s3, b)
	}
	checkIndexed(t, s1, append(slices.Clone(msgs[1:]), slices.Concat(more...)...))
}

// A compaction's copy has no recent keys; a Store whose maps hold the
// replaced file's goes on writing and finding into the copy.
func TestRecentCompacted(t *testing.T) {
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s1 := openLeased(t, path, a, 1, Options{})
	bs := recentBatches(t, a, 1, 3, 40)
	putAll(t, s1, bs[0])
	checkIndexed(t, s1, bs[0])
	s2 := openAgain(t, path)
	if _, err := s2.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if r, d, _, _ := indexState(t, s2); r != 0 || d != 40 {
		t.Fatalf("the copy: %d recent keys, %d digests indexed; want 0, 40", r, d)
	}
	putAll(t, s1, bs[1])
	putAll(t, s2, bs[2])
	all := slices.Concat(bs...)
	checkIndexed(t, s1, all)
	checkIndexed(t, s2, all)
	checkReopened(t, path, all)
}

// A transaction sees only the recent keys of its own snapshot, though
// the maps it reads hold later ones; a key is found by its digest or
// Message-ID, never by another's of the same hash; maps of the bucket
// before the current one are kept for transactions that began before a
// merge.
func TestRecentView(t *testing.T) {
	for _, collide := range []bool{false, true} {
		t.Run(fmt.Sprintf("every hash the same %v", collide), func(t *testing.T) {
			if collide {
				defer func(h func(maphash.Seed, []byte) uint64) { recentHash = h }(recentHash)
				recentHash = func(maphash.Seed, []byte) uint64 { return 7 }
			}
			db, err := bolt.Open(filepath.Join(t.TempDir(), "recent.db"), 0o644, nil)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			k1, k2, k3 := [8]byte{7: 1}, [8]byte{7: 2}, [8]byte{7: 3}
			d1, d2, d3 := store.Digest{1}, store.Digest{2}, store.Digest{3}
			err = db.Update(func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket(bucketRecent)
				if err != nil {
					return err
				}
				for i, e := range []struct {
					key [8]byte
					d   store.Digest
					id  string
				}{{k1, d1, "a"}, {k2, d2, "a"}, {k3, d3, "b"}} {
					v := append(append(append([]byte{}, e.key[:]...), e.d[:]...), msgIDKey(e.id, e.key[:])...)
					if err := b.Put(seqKey(uint64(i+1)), v); err != nil {
						return err
					}
				}
				return b.SetSequence(3)
			})
			if err != nil {
				t.Fatal(err)
			}
			var r recentKeys
			m := r.maps(1)
			err = db.View(func(tx *bolt.Tx) error {
				b := tx.Bucket(bucketRecent)
				if err := m.load(b, 3); err != nil {
					return err
				}
				v := recentView{m: m, b: b, upto: 1}
				if k, ok, err := v.digest(d1); err != nil || !ok || k != k1 {
					t.Errorf("digest 1 at sequence 1 = %v, %v, %v; want %v", k, ok, err, k1)
				}
				for _, d := range []store.Digest{d2, d3, {4}} {
					if k, ok, err := v.digest(d); err != nil || ok {
						t.Errorf("digest %v at sequence 1 = %v, %v, %v; want none", d[0], k, ok, err)
					}
				}
				if got, err := v.msgIDs(msgIDKey("a", nil), nil); err != nil || !slices.Equal(got, [][8]byte{k1}) {
					t.Errorf("msgIDs a at sequence 1 = %v, %v; want the first key alone", got, err)
				}
				v.upto = 3
				if k, ok, err := v.digest(d3); err != nil || !ok || k != k3 {
					t.Errorf("digest 3 at sequence 3 = %v, %v, %v; want %v", k, ok, err, k3)
				}
				for id, want := range map[string][][8]byte{"a": {k2, k1}, "b": {k3}, "c": nil} {
					if got, err := v.msgIDs(msgIDKey(id, nil), nil); err != nil || !slices.Equal(got, want) {
						t.Errorf("msgIDs %q at sequence 3 = %v, %v; want %v", id, got, err, want)
					}
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := (recentView{}).digest(d1); ok || err != nil {
				t.Error("the zero view has digests")
			}
			if got, err := (recentView{}).msgIDs(msgIDKey("a", nil), nil); got != nil || err != nil {
				t.Error("the zero view has Message-IDs")
			}
			if r.maps(2) == m || r.maps(1) != m || r.maps(2) == nil {
				t.Error("the maps of the current and the previous bucket are not kept apart")
			}
			r.maps(3)
			if r.maps(1) == m {
				t.Error("the maps of a bucket two merges old are kept")
			}
			// The previous bucket's maps are kept only while a view
			// holds them.
			w := weak.Make(r.maps(4))
			r.maps(5)
			runtime.GC()
			if w.Value() != nil {
				t.Error("the previous bucket's maps are kept with no view holding them")
			}
		})
	}
}

// A file raised to formatRecent has what checkFormat asks of it, and a
// removal or a move never lowers its format.
func TestRecentFormat(t *testing.T) {
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{})
	msgs := recentBatches(t, a, 1, 1, 10)[0]
	// An archive written by an older program: format 4, no moves bucket.
	err := s.update(t.Context(), func(tx *bolt.Tx) error {
		if _, err := tx.CreateBucket(bucketRemoved); err != nil {
			return err
		}
		return tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatRemovals))
	})
	if err != nil {
		t.Fatal(err)
	}
	checkFormatIs := func(want int) {
		t.Helper()
		err := s.view(t.Context(), func(tx *bolt.Tx) error {
			v, err := checkFormat(tx)
			if err == nil && v != want {
				err = fmt.Errorf("version %d", v)
			}
			return err
		})
		if err != nil {
			t.Fatalf("checkFormat: %v; want version %d", err, want)
		}
	}
	checkFormatIs(4)
	putAll(t, s, msgs)
	checkFormatIs(6)
	if _, err := s.Move(t.Context(), msgs[0].Number, "other"); err != nil {
		t.Fatal(err)
	}
	checkFormatIs(6)
	if _, err := s.Remove(t.Context(), msgs[1].Number, "test"); err != nil {
		t.Fatal(err)
	}
	checkFormatIs(6)
	// A file a compaction retired is never raised (nor written to).
	err = s.update(t.Context(), func(tx *bolt.Tx) error {
		if err := tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatRetired)); err != nil {
			return err
		}
		return raiseFormat(tx, formatRecent)
	})
	if !errors.Is(err, ErrFormat) {
		t.Errorf("raiseFormat on a retired file = %v, want ErrFormat", err)
	}
}

func FuzzParseRecent(f *testing.F) {
	key := [8]byte{0, 0, 0, 1, 0, 0, 0, 2}
	d := store.Digest{9}
	f.Add(append(key[:], d[:]...))
	f.Add(append(append(key[:], d[:]...), msgIDKey("a@b", key[:])...))
	f.Add(append(append(key[:], d[:]...), msgIDKey("a@b", []byte{1, 2, 3, 4, 5, 6, 7, 8})...))
	f.Add([]byte{})
	f.Fuzz(func(t *testing.T, v []byte) {
		e, err := parseRecent(v)
		if err != nil {
			return
		}
		// What parses is what recentWriter.add writes.
		back := append(append(e.key[:], e.digest[:]...), e.msgid...)
		if string(back) != string(v) {
			t.Fatalf("parseRecent(%x) = %+v, which is %x", v, e, back)
		}
		if e.msgid != nil && string(e.msgid[len(e.msgid)-8:]) != string(e.key[:]) {
			t.Fatalf("parseRecent(%x): Message-ID entry %x of another number than %x", v, e.msgid, e.key)
		}
	})
}

// Options.RecentKeys sets how many recent keys a Put leaves before it
// merges them.
func TestRecentKeysOption(t *testing.T) {
	path := t.TempDir() + "/messages.db"
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{RecentKeys: 50})
	bs := recentBatches(t, a, 1, 2, 30)
	putAll(t, s, bs[0])
	if r, _, _, _ := indexState(t, s); r != 30 {
		t.Fatalf("after 30 messages: %d recent keys, want 30", r)
	}
	putAll(t, s, bs[1])
	if r, d, _, _ := indexState(t, s); r != 0 || d != 60 {
		t.Fatalf("after 60 messages: %d recent keys, %d digests indexed; want 0, 60", r, d)
	}
	checkIndexed(t, s, slices.Concat(bs...))
}

// BenchmarkRecentLoad reads 65,536 recent keys into a Store's maps, as
// its first lookup after a merge does, and reports what the maps keep on
// the heap a key.
func BenchmarkRecentLoad(b *testing.B) {
	const n = 1 << 16
	db, err := bolt.Open(filepath.Join(b.TempDir(), "recent.db"), 0o644, nil)
	if err != nil {
		b.Fatal(err)
	}
	defer db.Close()
	err = db.Update(func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucket(bucketRecent)
		if err != nil {
			return err
		}
		bk.FillPercent = appendFill
		for i := range n {
			key := packedKey(uint64(i))
			d := store.Digest(sha256.Sum256(key[:]))
			v := append(append(append([]byte{}, key[:]...), d[:]...), msgIDKey(fmt.Sprintf("<%d.%x@example.org>", i, d[:8]), key[:])...)
			if err := bk.Put(seqKey(uint64(i+1)), v); err != nil {
				return err
			}
		}
		return bk.SetSequence(n)
	})
	if err != nil {
		b.Fatal(err)
	}
	var before, after runtime.MemStats
	var keep *recentMaps
	b.ResetTimer()
	for b.Loop() {
		keep = nil
		b.StopTimer()
		runtime.GC()
		runtime.ReadMemStats(&before)
		b.StartTimer()
		var r recentKeys
		keep = r.maps(1)
		if err := db.View(func(tx *bolt.Tx) error { return keep.load(tx.Bucket(bucketRecent), n) }); err != nil {
			b.Fatal(err)
		}
	}
	b.StopTimer()
	runtime.GC()
	runtime.ReadMemStats(&after)
	b.ReportMetric(float64(after.HeapAlloc-before.HeapAlloc)/n, "heap-bytes/key")
	b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N)/n, "ns/key")
	runtime.KeepAlive(keep)
}

// A Store whose maps hold the recent keys of a file that is then replaced
// by an older copy of it with the same recent bucket (a backup put back)
// reads the copy's keys once it opens the copy, not its maps': it finds
// what another Store wrote to the copy since, under the same sequence
// numbers as the keys the copy lost, and not what the copy lost.
func TestRecentFileReplaced(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	// Each operation opens the file anew (no handle kept idle).
	s1 := openLeased(t, path, a, 1, Options{Linger: -1, KeepIdle: -1})
	bs := recentBatches(t, a, 1, 2, 30)
	putAll(t, s1, bs[0])
	backup := filepath.Join(dir, "backup.db")
	if err := s1.view(t.Context(), func(tx *bolt.Tx) error { return tx.CopyFile(backup, 0o600) }); err != nil {
		t.Fatal(err)
	}
	putAll(t, s1, bs[1])
	checkIndexed(t, s1, slices.Concat(bs...)) // s1's maps: sequence numbers 1-60
	_, _, _, id := indexState(t, s1)
	// Handles of the same file keep the maps.
	m := s1.recent.maps(id)
	checkIndexed(t, s1, slices.Concat(bs...))
	if s1.recent.maps(id) != m {
		t.Error("a new handle of the same file read the recent keys into new maps")
	}

	if err := os.Rename(backup, path); err != nil {
		t.Fatal(err)
	}
	s2 := openLeased(t, path, a, 2, Options{})
	other := recentBatches(t, a, 2, 1, 30)[0]
	putAll(t, s2, other) // sequence numbers 31-60 again
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if r, _, _, id2 := indexState(t, s1); r != 60 || id2 != id {
		t.Fatalf("the copy written to: %d recent keys of bucket %x; want 60 of %x, the bucket s1's maps hold", r, id2, id)
	}

	checkIndexed(t, s1, slices.Concat(bs[0], other))
	if s1.recent.maps(id) == m {
		t.Error("the maps of the replaced file are kept")
	}
	for _, m := range bs[1] {
		if n, err := s1.ByDigest(t.Context(), m.Digest); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("ByDigest(a message the copy lost) = %v, %v; want %v", n, err, store.ErrNotFound)
		}
	}
	// s1's writes see the copy's keys too: a resend is a duplicate, and a
	// message the copy lost is stored again.
	resend := other[3]
	resend.Number = a.Number(t, 1, 500)
	lost := bs[1][4]
	res, err := s1.Put(t.Context(), []store.Message{resend, lost})
	if err != nil {
		t.Fatal(err)
	}
	if !res[0].Duplicate || res[0].Number != other[3].Number {
		t.Errorf("Put(a resend of a message written to the copy) = %+v; want a duplicate of %v", res[0], other[3].Number)
	}
	if res[1].Duplicate || res[1].Number != lost.Number {
		t.Errorf("Put(a message the copy lost) = %+v; want it stored under %v", res[1], lost.Number)
	}
}
