package boltstore

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// withOwnPackMin makes batches of at least n bytes of records large, for
// the test.
func withOwnPackMin(t *testing.T, n int) {
	old := ownPackMin
	ownPackMin = n
	t.Cleanup(func() { ownPackMin = old })
}

// openLeased opens the store at path, closed when the test ends, with
// the lease of run recorded.
func openLeased(t *testing.T, path string, a *storetest.Authority, run uint32, opts Options) *Store {
	t.Helper()
	s, err := Open(t.Context(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.RecordLease(t.Context(), a.Lease(run)); err != nil {
		t.Fatal(err)
	}
	return s
}

// checkReopened checks msgs in the store at path opened anew.
func checkReopened(t *testing.T, path string, msgs []store.Message) {
	t.Helper()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, msgs)
}

// packState reads the shared pack (meta "pack") and every listed pack's
// committed length.
func packState(t *testing.T, s *Store) (shared packID, lengths map[packID]uint64) {
	t.Helper()
	lengths = map[packID]uint64{}
	err := s.view(t.Context(), func(tx *bolt.Tx) error {
		copy(shared[:], tx.Bucket(bucketMeta).Get(keyPack))
		for id := range listedPacks(tx) {
			lengths[id], _ = packLength(tx, id)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return shared, lengths
}

// packOf returns the pack that m's record is in.
func packOf(t *testing.T, s *Store, m store.Message) packID {
	t.Helper()
	var l locator
	err := s.view(t.Context(), func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		key := packedKey(bd.codec.Packed(m.Number))
		l, err = parseLocator(tx.Bucket(bucketMessages).Get(key[:]))
		return err
	})
	if err != nil {
		t.Fatalf("the locator of %v: %v", m.Number, err)
	}
	return l.pack
}

func fileSize(t *testing.T, path string) uint64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return uint64(fi.Size())
}

// batches returns count batches of n messages of run under a.
func batches(t *testing.T, a *storetest.Authority, run uint32, count, n int) [][]store.Message {
	var out [][]store.Message
	for b := range count {
		var batch []store.Message
		for i := range n {
			seq := b*n + i
			batch = append(batch, storetest.Message(a.Number(t, run, seq), listMail(int(run)*10000+seq), "", ""))
		}
		out = append(out, batch)
	}
	return out
}

func putAll(t *testing.T, s *Store, batch []store.Message) {
	t.Helper()
	res, err := s.Put(t.Context(), batch)
	if err != nil {
		t.Fatal(err)
	}
	for i, r := range res {
		if r.Duplicate || r.Number != batch[i].Number {
			t.Fatalf("Put: message %d: %+v, want it stored under %v", i, r, batch[i].Number)
		}
	}
}

// A Store that puts a large batch writes the next ones to a pack of its
// own, before it takes the lock: batches at once, another process's own
// pack beside it, all read back, committed lengths covering what was
// written, and a compaction gathering them.
func TestOwnPack(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	bs := batches(t, a, 1, 4, 40)

	// The first batch goes to the shared pack, and lists the Store's own.
	putAll(t, s, bs[0])
	shared, lengths := packState(t, s)
	if len(lengths) != 2 {
		t.Fatalf("after the first batch, packs %v; want the shared one and an empty one", lengths)
	}
	var own packID
	for id, n := range lengths {
		if id != shared {
			own = id
			if n != 0 {
				t.Errorf("the Store's own pack has %d committed bytes before any batch wrote to it", n)
			}
		}
	}
	for _, m := range bs[0] {
		if got := packOf(t, s, m); got != shared {
			t.Fatalf("message %v of the first batch is in pack %v, want the shared %v", m.Number, got, shared)
		}
	}
	sharedLen := lengths[shared]

	// The next batches, two at once, go to it.
	putAll(t, s, bs[1])
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, b := range bs[2:] {
		wg.Go(func() { _, errs[i] = s.Put(t.Context(), b) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	for _, b := range bs[1:] {
		for _, m := range b {
			if got := packOf(t, s, m); got != own {
				t.Fatalf("message %v is in pack %v, want the Store's own %v", m.Number, got, own)
			}
		}
	}
	shared2, lengths := packState(t, s)
	if shared2 != shared || lengths[shared] != sharedLen {
		t.Errorf("the shared pack went from %v (%d bytes) to %v (%d bytes); want it untouched", shared, sharedLen, shared2, lengths[shared])
	}
	if got, want := lengths[own], fileSize(t, filepath.Join(packDir(path), own.String()+packExt)); got != want {
		t.Errorf("the Store's own pack commits %d bytes of its %d", got, want)
	}

	// Another process: a pack of its own beside the first one's.
	s2 := openLeased(t, path, a, 2, Options{Linger: -1})
	bs2 := batches(t, a, 2, 2, 40)
	for _, b := range bs2 {
		putAll(t, s2, b)
	}
	if got := packOf(t, s2, bs2[1][0]); got == own || got == shared {
		t.Errorf("the second Store's second batch is in pack %v, want one of its own", got)
	}
	s2.Close()
	var all []store.Message
	for _, b := range append(bs, bs2...) {
		all = append(all, b...)
	}
	checkAll(t, s, all)
	if _, lengths := packState(t, s); len(lengths) != 3 || len(packFiles(t, path)) != 3 {
		t.Errorf("packs listed %v, files %v; want three", lengths, packFiles(t, path))
	}

	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, all)
	if files := packFiles(t, path); len(files) != 1 {
		t.Errorf("packs after compaction %v, want one", files)
	}
	s.Close()
	checkReopened(t, path, all)
}

// A compaction that replaces the file between a batch's writing to its
// Store's own pack and its transaction deletes that pack: the batch
// finds it unlisted, writes its records again to the shared pack, and
// the Store starts a new pack of its own.
func TestOwnPackCompactedMeanwhile(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	bs := batches(t, a, 1, 4, 30)
	putAll(t, s, bs[0])
	putAll(t, s, bs[1])
	old := packOf(t, s, bs[1][0])
	oldFile := filepath.Join(packDir(path), old.String()+packExt)

	compacted := false
	afterPrewrite = func() {
		if compacted {
			return
		}
		compacted = true
		c, err := Open(t.Context(), path, Options{Linger: -1})
		if err != nil {
			t.Error(err)
			return
		}
		defer c.Close()
		if _, err := c.Compact(t.Context(), CompactOptions{}); err != nil {
			t.Error(err)
		}
	}
	t.Cleanup(func() { afterPrewrite = nil })
	putAll(t, s, bs[2])
	if !compacted {
		t.Fatal("the batch did not write to the Store's own pack")
	}
	if _, err := os.Stat(oldFile); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the compaction left the Store's old own pack: %v", err)
	}
	shared, lengths := packState(t, s)
	for _, m := range bs[2] {
		if got := packOf(t, s, m); got != shared {
			t.Fatalf("message %v is in pack %v, want the new file's shared pack %v", m.Number, got, shared)
		}
	}
	if len(lengths) != 2 {
		t.Errorf("packs %v: want the compaction's and a new one of the Store's own", lengths)
	}
	putAll(t, s, bs[3])
	if got := packOf(t, s, bs[3][0]); got == shared || got == old {
		t.Errorf("the next batch is in pack %v, want the Store's new own pack", got)
	}
	var all []store.Message
	for _, b := range bs {
		all = append(all, b...)
	}
	checkAll(t, s, all)
	checkReopened(t, path, all)
}

// A batch whose transaction fails after it wrote to its Store's own pack
// leaves bytes nothing references; the next batch commits past them, and
// every message reads back.
func TestOwnPackFailedBatch(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	bs := batches(t, a, 1, 4, 30)
	putAll(t, s, bs[0])
	putAll(t, s, bs[1])
	own := packOf(t, s, bs[1][0])

	// Meanwhile another Store gives a number of the batch other bytes: the
	// batch's transaction refuses it, and writes nothing.
	taken := storetest.Message(bs[2][5].Number, listMail(99999), "", "")
	var putErr error
	afterPrewrite = func() {
		afterPrewrite = nil
		c, err := Open(t.Context(), path, Options{Linger: -1})
		if err != nil {
			putErr = err
			return
		}
		defer c.Close()
		_, putErr = c.Put(t.Context(), []store.Message{taken})
	}
	t.Cleanup(func() { afterPrewrite = nil })
	if _, err := s.Put(t.Context(), bs[2]); !errors.Is(err, store.ErrNumberTaken) {
		t.Fatalf("Put(a batch with a number taken meanwhile) = %v, want %v", err, store.ErrNumberTaken)
	}
	if putErr != nil {
		t.Fatal(putErr)
	}
	_, before := packState(t, s)
	ownFile := filepath.Join(packDir(path), own.String()+packExt)
	if size := fileSize(t, ownFile); size <= before[own] {
		t.Fatalf("the failed batch wrote nothing past the committed length (%d of %d bytes)", before[own], size)
	}
	for _, m := range bs[2] {
		if m.Number == taken.Number {
			continue
		}
		if _, err := s.Get(t.Context(), m.Number); !errors.Is(err, store.ErrNotFound) {
			t.Fatalf("Get(%v) of the failed batch = %v, want %v", m.Number, err, store.ErrNotFound)
		}
	}

	putAll(t, s, bs[3])
	if got := packOf(t, s, bs[3][0]); got != own {
		t.Errorf("the next batch is in pack %v, want the Store's own %v", got, own)
	}
	if _, after := packState(t, s); after[own] != fileSize(t, ownFile) {
		t.Errorf("the own pack commits %d bytes of its %d", after[own], fileSize(t, ownFile))
	}
	checkAll(t, s, append(append(append([]store.Message{}, bs[0]...), bs[1]...), append(bs[3], taken)...))
}

// A removed message in a large batch is never written again, not even
// unreferenced to the Store's own pack: after a compaction, no file of
// the store holds its bytes.
func TestOwnPackRemovedMessage(t *testing.T) {
	withOwnPackMin(t, 1)
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s, err := Open(t.Context(), path, Options{Linger: -1, Compression: store.Compression{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordLease(t.Context(), a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	bs := batches(t, a, 1, 3, 20)
	secret := []byte("secret-" + strings.Repeat("0123456789abcdef", 4))
	m := storetest.Message(a.Number(t, 1, 1000), append(storetest.Mail("secret@example.org", "secret"), secret...), "secret@example.org", "l")
	putAll(t, s, append(bs[0], m))
	if _, err := s.Remove(t.Context(), m.Number, "leaked"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	// A new own pack, then a batch with the removed message in it.
	putAll(t, s, bs[1])
	res, err := s.Put(t.Context(), append(bs[2], m))
	if err != nil {
		t.Fatal(err)
	}
	if r := res[len(res)-1]; !r.Removed {
		t.Errorf("Put(the removed message again) = %+v, want it removed", r)
	}
	if shared, _ := packState(t, s); packOf(t, s, bs[2][0]) == shared {
		t.Fatal("the batch with the removed message went to the shared pack, not the Store's own")
	}
	s.Close()
	checkNoFileHolds(t, dir, secret)
}

// A batch too small, or a single message, never starts a pack of the
// Store's own: a process storing a few messages at a time leaves none.
func TestOwnPackSmallBatches(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	for _, b := range batches(t, a, 1, 5, 20) {
		putAll(t, s, b)
	}
	if files := packFiles(t, path); len(files) != 1 {
		t.Errorf("packs %v after small batches, want the shared one", files)
	}
}

// A Store that closes lists its pack of its own as free, and the next
// Store to need one takes it on, so that importers run one after the
// other share it; two Stores at once never share one.
func TestOwnPackReused(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	open := func(run uint32) *Store { return openLeased(t, path, a, run, Options{Linger: -1}) }
	var all []store.Message
	// run puts two batches and returns the pack of its own the second went to.
	run := func(s *Store, r uint32) packID {
		t.Helper()
		bs := batches(t, a, r, 2, 20)
		putAll(t, s, bs[0])
		putAll(t, s, bs[1])
		all = append(all, bs[0]...)
		all = append(all, bs[1]...)
		shared, _ := packState(t, s)
		own := packOf(t, s, bs[1][0])
		if own == shared {
			t.Fatalf("run %d's second batch went to the shared pack", r)
		}
		return own
	}
	s1 := open(1)
	first := run(s1, 1)
	s1.Close()
	s2 := open(2)
	if got := run(s2, 2); got != first {
		t.Errorf("the second importer wrote to pack %v, want the first one's %v, which it let go of", got, first)
	}
	// While s2 holds it, another Store starts a pack of its own.
	s3 := open(3)
	third := run(s3, 3)
	if third == first {
		t.Errorf("two Stores at once write to the same pack of their own %v", first)
	}
	s2.Close()
	s3.Close()
	s4 := open(4)
	if got := run(s4, 4); got != first && got != third {
		t.Errorf("the fourth importer wrote to a new pack %v, want one of the free %v, %v", got, first, third)
	}
	if files := packFiles(t, path); len(files) != 3 {
		t.Errorf("packs %v, want three: the shared one and two of their own", files)
	}
	checkAll(t, s4, all)
	// A compaction's copy lists no free pack.
	s4.Close()
	s5 := open(5)
	if _, err := s5.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	s5.view(t.Context(), func(tx *bolt.Tx) error {
		if tx.Bucket(bucketFreePacks) != nil {
			t.Error("the compacted file lists free packs")
		}
		return nil
	})
	checkAll(t, s5, all)
}

// A Store closed while one of its batches is writing to its pack of its
// own (a misuse, but a file outlives programs' bugs) does not list that
// pack as free: the next Store would write over what the batch commits.
func TestOwnPackReleasedBusy(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	bs := batches(t, a, 1, 3, 20)
	putAll(t, s, bs[0])
	afterPrewrite = func() {
		afterPrewrite = nil
		s.releaseOwnPack()
	}
	t.Cleanup(func() { afterPrewrite = nil })
	putAll(t, s, bs[1])
	own := packOf(t, s, bs[1][0])
	s.view(t.Context(), func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketFreePacks); b != nil && b.Get(own[:]) != nil {
			t.Errorf("pack %v is listed as free while a batch wrote to it", own)
		}
		return nil
	})
	putAll(t, s, bs[2])
	if got := packOf(t, s, bs[2][0]); got == own {
		t.Errorf("the Store went on writing to the pack it let go of")
	}
	checkAll(t, s, append(append(append([]store.Message{}, bs[0]...), bs[1]...), bs[2]...))
}

// Messages stored one at a time never start a pack of the Store's own,
// however large each is.
func TestOwnPackSingleMessages(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	b := batches(t, a, 1, 1, 5)[0]
	for _, m := range b {
		putAll(t, s, []store.Message{m})
	}
	if files := packFiles(t, path); len(files) != 1 {
		t.Errorf("packs %v after single messages, want the shared one", files)
	}
	checkAll(t, s, b)
}

// A pack of the Store's own is for speed only: a batch that cannot write
// to it, or cannot start one, is stored in the shared pack all the same.
func TestOwnPackFailures(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{Linger: -1})
	bs := batches(t, a, 1, 6, 20)

	// No pack can be created: the batch goes to the shared pack.
	create := createPack
	createPack = func(string) (*os.File, error) { return nil, errors.New("too many open files") }
	putAll(t, s, bs[0])
	putAll(t, s, bs[1])
	createPack = create
	shared, lengths := packState(t, s)
	if len(lengths) != 1 || packOf(t, s, bs[1][0]) != shared {
		t.Fatalf("packs %v, batch in %v; want the shared %v alone", lengths, packOf(t, s, bs[1][0]), shared)
	}
	putAll(t, s, bs[2]) // starts one
	putAll(t, s, bs[3])
	own := packOf(t, s, bs[3][0])
	if own == shared {
		t.Fatal("no pack of the Store's own once packs can be created again")
	}

	// Its file fails: the batch goes to the shared pack, and the next
	// one to a new pack of the Store's own.
	s.own.mu.Lock()
	s.own.cur.f.Close()
	s.own.mu.Unlock()
	putAll(t, s, bs[4])
	if got := packOf(t, s, bs[4][0]); got != shared {
		t.Errorf("the batch whose pack failed is in %v, want the shared %v", got, shared)
	}
	putAll(t, s, bs[5])
	if got := packOf(t, s, bs[5][0]); got == shared || got == own {
		t.Errorf("the next batch is in %v, want a new pack of the Store's own", got)
	}
	var all []store.Message
	for _, b := range bs {
		all = append(all, b...)
	}
	checkAll(t, s, all)
	checkReopened(t, path, all)
}

// A transaction that starts a pack of the Store's own while another's is
// not installed yet (bbolt runs OnCommit after it lets go of the write
// lock) starts none: one pack is listed, and it is the Store's.
func TestOwnPackStartedTwice(t *testing.T) {
	withOwnPackMin(t, 1)
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s := openLeased(t, path, a, 1, Options{})
	var first *startedPack
	err := s.update(t.Context(), func(tx *bolt.Tx) (err error) {
		first, err = s.own.start(tx, s.packs)
		return err
	})
	if err != nil || first == nil {
		t.Fatalf("start = %v, %v; want a pack", first, err)
	}
	// As if the first transaction's OnCommit had not run yet.
	first.installed = false
	s.own.mu.Lock()
	s.own.cur, s.own.starting = nil, true
	s.own.mu.Unlock()
	err = s.update(t.Context(), func(tx *bolt.Tx) error {
		second, err := s.own.start(tx, s.packs)
		if second != nil {
			t.Error("a second pack started while the first was being installed")
		}
		return err
	})
	if err != nil {
		t.Fatal(err)
	}
	first.install()
	// Nothing is written yet: the shared pack is not listed.
	if _, lengths := packState(t, s); len(lengths) != 1 || !s.own.has() {
		t.Errorf("%d packs listed, own pack %v; want the Store's own alone", len(lengths), s.own.has())
	}
	batch := batches(t, a, 1, 1, 3)[0]
	putAll(t, s, batch)
	if got := packOf(t, s, batch[0]); got != s.own.cur.id {
		t.Errorf("the batch went to pack %v, not the Store's own %v", got, s.own.cur.id)
	}
	checkReopened(t, path, batch)
}
