package boltstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

// listMail returns a list message, distinct per i, with header lines its
// neighbours share.
func listMail(i int) []byte {
	return fmt.Appendf(nil, "Received: from mail.linux-mips.org ([127.0.0.1]:40%03d \"EHLO mail.linux-mips.org\")\n"+
		"\tby eddie.linux-mips.org with ESMTP id S23%05dAbc; Mon, 3 Nov 2008 10:%02d:00 +0000\n"+
		"From: Developer %d <dev%d@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH] MIPS: frobnicate %d\n"+
		"Message-ID: <m%d@example.org>\nSender: linux-mips-bounce@linux-mips.org\nPrecedence: bulk\nX-list: linux-mips\n\n%s",
		i%1000, i, i%60, i%17, i%17, i, i, strings.Repeat(fmt.Sprintf("line %d of the patch, as long as lines of patches are\n", i%13), 30+i%9))
}

// oldArchive writes n messages the way the store did before compression
// (uncompressed records, 4 KiB pages) under runs 1.., and returns them.
func oldArchive(t *testing.T, path string, a *storetest.Authority, n int) []store.Message {
	t.Helper()
	s, err := Open(t.Context(), path, Options{Compression: store.Compression{Off: true}, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var all []store.Message
	for i := 0; i < n; i += 250 {
		run := uint32(1 + i/1000)
		if i%1000 == 0 {
			if err := s.RecordLease(t.Context(), a.Lease(run)); err != nil {
				t.Fatal(err)
			}
		}
		var msgs []store.Message
		for j := i; j < min(i+250, n); j++ {
			msgs = append(msgs, storetest.Message(a.Number(t, run, j%1000), listMail(j), fmt.Sprintf("m%d@example.org", j), "linux-mips"))
		}
		if _, err := s.Put(t.Context(), msgs); err != nil {
			t.Fatal(err)
		}
		all = append(all, msgs...)
	}
	return all
}

func checkAll(t *testing.T, s *Store, msgs []store.Message) {
	t.Helper()
	for _, m := range msgs {
		got, err := s.Get(t.Context(), m.Number)
		if err != nil || !bytes.Equal(got.Raw, m.Raw) || got.MessageID != m.MessageID || got.List != m.List || got.Digest != m.Digest {
			t.Fatalf("Get(%v) = %d bytes, %v; want the message of %d bytes", m.Number, len(got.Raw), err, len(m.Raw))
		}
	}
	if n, err := s.Count(t.Context()); err != nil || n != int64(len(msgs)) {
		t.Errorf("Count() = %d, %v; want %d", n, err, len(msgs))
	}
}

func feed(t *testing.T, s *Store, after store.Cursor) []callnumber.Number {
	t.Helper()
	var out []callnumber.Number
	for {
		page, err := s.Changes(t.Context(), after, 400)
		if err != nil {
			t.Fatalf("Changes(%q) = %v", after, err)
		}
		if len(page.Messages) == 0 {
			return out
		}
		for _, m := range page.Messages {
			out = append(out, m.Number)
		}
		after = page.Next
	}
}

// TestCompactInPlace converts an archive written before compression: the
// same messages, indexes, leases and change feed (a follower's cursor
// carries on), in records compressed with a trained dictionary, in less
// than half the disk.
func TestCompactInPlace(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := oldArchive(t, path, a, 2500)

	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	page, err := s.Changes(t.Context(), "", 1000) // a follower, a thousand in
	if err != nil {
		t.Fatal(err)
	}
	wantFeed := feed(t, s, page.Next)
	var calls []int64
	st, err := s.Compact(t.Context(), CompactOptions{Progress: func(done, total int64) {
		if total != 2500 {
			t.Errorf("Progress(%d, %d): total %d, want 2500", done, total, total)
		}
		calls = append(calls, done)
	}})
	if err != nil {
		t.Fatalf("Compact = %v", err)
	}
	if st.Messages != 2500 || st.Dicts != 2 || st.Path != path {
		t.Errorf("Compact = %+v; want 2500 messages, two eras' dictionaries, in place", st)
	}
	if st.After*2 > st.Before {
		t.Errorf("Compact: %d bytes on disk before, %d after; want less than half", st.Before, st.After)
	}
	if len(calls) < 3 || calls[len(calls)-1] != 2500 || !slices.IsSorted(calls) {
		t.Errorf("Progress called with %v; want a rising count up to 2500", calls)
	}
	if _, err := os.Stat(path + compactSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the copy is left behind: %v", err)
	}
	checkAll(t, s, msgs)
	if got := feed(t, s, page.Next); !slices.Equal(got, wantFeed) {
		t.Errorf("the follower's cursor after compaction gives %d messages, want the same %d as before", len(got), len(wantFeed))
	}
	for _, m := range msgs[:50] {
		if n, err := s.ByDigest(t.Context(), m.Digest); err != nil || n != m.Number {
			t.Errorf("ByDigest = %v, %v; want %v", n, err, m.Number)
		}
		if ns, err := s.ByMessageID(t.Context(), m.MessageID); err != nil || !slices.Equal(ns, []callnumber.Number{m.Number}) {
			t.Errorf("ByMessageID(%q) = %v, %v; want [%v]", m.MessageID, ns, err, m.Number)
		}
	}
	if b, err := s.Binding(t.Context()); err != nil || b != a.Binding() {
		t.Errorf("Binding() = %v, %v", b, err)
	}
	if err := s.RecordLease(t.Context(), a.Lease(1)); !errors.Is(err, store.ErrRunReused) {
		t.Errorf("RecordLease(run 1, new nonce) after compaction = %v, want %v: leases must survive", err, store.ErrRunReused)
	}
	// Each era's records name its own dictionary, which the store has.
	var eraDicts []record.DictID
	for _, m := range []store.Message{msgs[0], msgs[1499], msgs[1500], msgs[2499]} {
		rec, err := s.TestRecord(t.Context(), m.Number)
		if err != nil {
			t.Fatal(err)
		}
		h, _, err := record.ParseHeader(rec)
		if err != nil || h.Compression != record.ZstdDict {
			t.Fatalf("record of %v after compaction: %+v, %v; want compressed with a dictionary", m.Number, h, err)
		}
		if _, err := (dicts{s}).LoadDict(t.Context(), h.Dict); err != nil {
			t.Errorf("dictionary %v of %v: %v", h.Dict, m.Number, err)
		}
		eraDicts = append(eraDicts, h.Dict)
	}
	if eraDicts[0] != eraDicts[1] || eraDicts[2] != eraDicts[3] || eraDicts[1] == eraDicts[2] {
		t.Errorf("dictionaries of messages 0, 1499, 1500 and 2499: %v; want one for each era of 1,500", eraDicts)
	}
	// Writing carries on, after the copied feed.
	if err := s.RecordLease(t.Context(), a.Lease(9)); err != nil {
		t.Fatal(err)
	}
	late := storetest.Message(a.Number(t, 9, 0), listMail(99999), "late@example.org", "")
	if _, err := s.Put(t.Context(), []store.Message{late}); err != nil {
		t.Fatal(err)
	}
	if got := feed(t, s, page.Next); len(got) != len(wantFeed)+1 || got[len(got)-1] != late.Number {
		t.Errorf("feed after a new Put ends with %v, want %v", got[len(got)-1:], late.Number)
	}
	s.Close()
	s2, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	checkAll(t, s2, append(msgs, late))
}

// TestCompactWhileWriting: another process (another Store: its own file
// lock) writes batches during the compaction and after it; every message
// is in the compacted file, none went to the retired one.
func TestCompactWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 3000)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w, err := Open(t.Context(), path, Options{Linger: 50 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	if err := w.RecordLease(t.Context(), a.Lease(50)); err != nil {
		t.Fatal(err)
	}
	stop := make(chan struct{})
	var (
		wg      sync.WaitGroup
		written []store.Message
		werr    error
	)
	wg.Go(func() {
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			var batch []store.Message
			for j := range 10 {
				seq := i*10 + j
				if seq >= 16000 {
					return // the run is full: the compaction took long
				}
				batch = append(batch, storetest.Message(a.Number(t, 50, seq), listMail(100000+seq), "", ""))
			}
			if _, err := w.Put(context.Background(), batch); err != nil {
				werr = err
				return
			}
			written = append(written, batch...)
			if _, err := w.Get(context.Background(), batch[0].Number); err != nil {
				werr = err
				return
			}
		}
	})
	time.Sleep(20 * time.Millisecond)
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatalf("Compact = %v", err)
	}
	time.Sleep(50 * time.Millisecond)
	close(stop)
	wg.Wait()
	if werr != nil {
		t.Fatalf("writer: %v", werr)
	}
	if len(written) < 20 {
		t.Fatalf("writer wrote %d messages", len(written))
	}
	t.Logf("writer wrote %d messages during and after the compaction", len(written))
	w.Close()
	s.Close()
	s3, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s3.Close()
	checkAll(t, s3, append(msgs, written...))
}

// TestCompactTo copies into another file and leaves the store as it was.
func TestCompactTo(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 1200)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	to := filepath.Join(dir, "copy", "messages.db")
	st, err := s.Compact(t.Context(), CompactOptions{To: to, PageSize: 65536})
	if err != nil || st.Path != to || st.Messages != 1200 {
		t.Fatalf("Compact(To) = %+v, %v", st, err)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{To: to}); err == nil {
		t.Errorf("Compact(To an existing file) = nil error")
	}
	checkAll(t, s, msgs)
	rec, err := s.TestRecord(t.Context(), msgs[0].Number)
	if err != nil || rec[0] != record.Version1 {
		t.Errorf("the store's own record after Compact(To): version %d, %v; want it untouched (1)", rec[0], err)
	}
	c, err := Open(t.Context(), to, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	checkAll(t, c, msgs)
	if ps := filePageSize(t, c); ps != 65536 {
		t.Errorf("copy's page size = %d, want 65536", ps)
	}
}

// TestCompactInterrupted: a compaction that stopped between retiring the
// file and renaming its copy leaves a store that refuses to open, and
// Recover finishes it.
func TestCompactInterrupted(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 300)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The copy, made as Compact makes it, but not moved into place.
	if _, err := s.Compact(t.Context(), CompactOptions{To: path + compactSuffix}); err != nil {
		t.Fatal(err)
	}
	var id []byte
	c, err := bolt.Open(path+compactSuffix, 0o644, &bolt.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	c.View(func(tx *bolt.Tx) error { id = bytes.Clone(tx.Bucket(bucketMeta).Get(keyCompaction)); return nil })
	c.Close()
	s.Close()
	// In place, the copy's packs are beside the store's.
	copied, err := filepath.Glob(filepath.Join(packDir(path+compactSuffix), "*"+packExt))
	if err != nil || len(copied) == 0 {
		t.Fatalf("the copy's packs: %v, %v", copied, err)
	}
	for _, p := range copied {
		if err := os.Rename(p, filepath.Join(packDir(path), filepath.Base(p))); err != nil {
			t.Fatal(err)
		}
	}
	oldPacks, _ := filepath.Glob(filepath.Join(packDir(path), "*"+packExt))
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error {
		tx.Bucket(bucketMeta).Put(keyCompaction, id)
		return tx.Bucket(bucketMeta).Put(keyFormat, []byte(formatRetired))
	})
	db.Close()

	if s, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrInterrupted) {
		t.Fatalf("Open(retired file, copy not in place) = %v, %v; want %v", s, err, ErrInterrupted)
	}
	// A copy that is not the retired file's successor is refused.
	other := filepath.Join(t.TempDir(), "other.db")
	os.Rename(path+compactSuffix, other)
	if err := Recover(t.Context(), path, Options{}); err == nil {
		t.Fatalf("Recover without the copy = nil error")
	}
	os.Rename(other, path+compactSuffix)
	if err := Recover(t.Context(), path, Options{}); err != nil {
		t.Fatalf("Recover = %v", err)
	}
	s, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, msgs)
	// Recover deleted the old file's packs, as the compaction would have.
	left, _ := filepath.Glob(filepath.Join(packDir(path), "*"+packExt))
	if len(left) != len(copied) || len(oldPacks) <= len(copied) {
		t.Errorf("packs after Recover: %d, want the copy's %d (of %d before)", len(left), len(copied), len(oldPacks))
	}
	if err := Recover(t.Context(), path, Options{}); err == nil {
		t.Errorf("Recover(a store that is not retired) = nil error")
	}
}

// TestCompactRefusesSecond: a compaction started while another runs is
// refused at once, naming the first, and the first completes with every
// message. (Before the maintenance lock, the second deleted the first's
// copy and started its own; the first then moved the second's partial
// copy into place and deleted the packs it did not list: every message
// was lost.)
func TestCompactRefusesSecond(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 2000)
	// Uncompressed: no dictionary to train, a quicker test.
	off := store.Compression{Off: true}
	first, err := Open(t.Context(), path, Options{Compression: off})
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	second, err := Open(t.Context(), path, Options{LockTimeout: 5 * time.Second, Compression: off})
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close()

	// The first compaction stops after its first era until told to go on.
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	firstDone := make(chan error, 1)
	go func() {
		_, err := first.Compact(t.Context(), CompactOptions{Progress: func(done, total int64) {
			if done < total {
				once.Do(func() { close(paused); <-resume })
			}
		}})
		firstDone <- err
	}()
	<-paused
	// The second, run meanwhile, also stops at its first era, if it gets
	// that far.
	secondPaused, secondResume := make(chan struct{}), make(chan struct{})
	var secondOnce sync.Once
	secondDone := make(chan error, 1)
	go func() {
		_, err := second.Compact(t.Context(), CompactOptions{Progress: func(done, total int64) {
			secondOnce.Do(func() { close(secondPaused); <-secondResume })
		}})
		secondDone <- err
	}()
	var secondErr error
	select {
	case secondErr = <-secondDone:
		close(resume)
	case <-secondPaused:
		// The race of the bug: the first finishes while the second
		// copies, then the second goes on.
		close(resume)
		<-firstDone
		firstDone <- nil
		close(secondResume)
		secondErr = <-secondDone
	}
	if !errors.Is(secondErr, ErrMaintenance) || !strings.Contains(secondErr.Error(), "compaction by") {
		t.Errorf("second Compact while one runs = %v, want %v naming the first", secondErr, ErrMaintenance)
	}
	if err := <-firstDone; err != nil {
		t.Fatalf("first Compact = %v", err)
	}
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, msgs)
	// And now that the first is done, a compaction runs again.
	if _, err := second.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Errorf("Compact after the first ended = %v", err)
	}
	checkAll(t, s, msgs)
}

// TestRecoverRefusedDuringCompaction: Recover, which moves a copy into
// place, is refused while a compaction runs.
func TestRecoverRefusedDuringCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 2000)
	s, err := Open(t.Context(), path, Options{Compression: store.Compression{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := s.Compact(t.Context(), CompactOptions{Progress: func(d, total int64) {
			once.Do(func() { close(paused); <-resume })
		}})
		done <- err
	}()
	<-paused
	err = Recover(t.Context(), path, Options{LockTimeout: time.Second})
	close(resume)
	if !errors.Is(err, ErrMaintenance) {
		t.Errorf("Recover during a compaction = %v, want %v", err, ErrMaintenance)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, msgs)
}

// TestCompactDamagedMeta: a store whose message count is missing is
// refused with ErrFormat, not a panic.
func TestCompactDamagedMeta(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	oldArchive(t, path, a, 10)
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { return tx.Bucket(bucketMeta).Delete(keyCount) })
	db.Close()
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Compact(t.Context(), CompactOptions{}); !errors.Is(err, ErrFormat) {
		t.Errorf("Compact(no count) = %v, want %v", err, ErrFormat)
	}
}

// checkNoFileHolds fails t if a file under dir holds any of texts.
func checkNoFileHolds(t *testing.T, dir string, texts ...[]byte) {
	t.Helper()
	filepath.WalkDir(dir, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		for _, text := range texts {
			if bytes.Contains(b, text) {
				t.Errorf("%s still holds the removed message's bytes (%.20q)", p, text)
			}
		}
		return nil
	})
}

// TestCompactRemovals: a compaction keeps the removals (records, refused
// digests, the feed's entries) and leaves none of a removed message's
// bytes anywhere in the store's files.
func TestCompactRemovals(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts Options
	}{
		{"compressed", Options{}},
		{"uncompressed", Options{Compression: store.Compression{Off: true}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "messages.db")
			a := storetest.NewAuthority(t, shuffle.Bits)
			msgs := oldArchive(t, path, a, 300)
			s, err := Open(t.Context(), path, tt.opts)
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			// A message with text found nowhere else.
			secret := []byte("secret-" + strings.Repeat("0123456789abcdef", 4) + "-" + t.Name())
			m := storetest.Message(a.Number(t, 9, 0), append(storetest.Mail("secret@example.org", "secret"), secret...), "secret@example.org", "l")
			if err := s.RecordLease(t.Context(), a.Lease(9)); err != nil {
				t.Fatal(err)
			}
			if _, err := s.Put(t.Context(), []store.Message{m}); err != nil {
				t.Fatal(err)
			}
			r, err := s.Remove(t.Context(), m.Number, "leaked")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
				t.Fatal(err)
			}
			checkAll(t, s, msgs)
			var re *store.RemovedError
			if _, err := s.Get(t.Context(), m.Number); !errors.As(err, &re) || re.Removal.Reason != "leaked" || !re.Removal.Removed.Equal(r.Removed) {
				t.Errorf("Get(removed, after compaction) = %v, want its removal", err)
			}
			res, err := s.Put(t.Context(), []store.Message{m})
			if err != nil || !res[0].Removed || res[0].Number != m.Number {
				t.Errorf("Put(removed bytes, after compaction) = %v, %v; want removed %v", res, err, m.Number)
			}
			// The same message with a header added in transit, too.
			near := storetest.Message(a.Number(t, 9, 1), append([]byte("Received: from relay\n"), m.Raw...), m.MessageID, "l")
			res, err = s.Put(t.Context(), []store.Message{near})
			if err != nil || !res[0].Removed || res[0].Number != m.Number {
				t.Errorf("Put(removed message with a Received header, after compaction) = %v, %v; want removed %v", res, err, m.Number)
			}
			if got, err := s.Removals(t.Context()); err != nil || len(got) != 1 || got[0].Number != m.Number {
				t.Errorf("Removals() after compaction = %v, %v", got, err)
			}
			feedRemovals := 0
			for cur := store.Cursor(""); ; {
				page, err := s.Changes(t.Context(), cur, 100)
				if err != nil {
					t.Fatal(err)
				}
				if page.Empty() {
					break
				}
				feedRemovals += len(page.Removals)
				cur = page.Next
			}
			if feedRemovals != 1 {
				t.Errorf("the feed after compaction lists %d removals, want 1", feedRemovals)
			}
			s.Close()
			// No file of the store holds the removed bytes (nor, the
			// store being uncompressed, even the text).
			checkNoFileHolds(t, dir, secret, []byte("secret@example.org"))
		})
	}
}

// TestRemoveDuringCompaction: a removal while a compaction runs is
// refused at once (the copy would carry the message on).
func TestRemoveDuringCompaction(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 2000)
	s, err := Open(t.Context(), path, Options{Compression: store.Compression{Off: true}})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	paused, resume := make(chan struct{}), make(chan struct{})
	var once sync.Once
	done := make(chan error, 1)
	go func() {
		_, err := s.Compact(t.Context(), CompactOptions{Progress: func(d, total int64) {
			once.Do(func() { close(paused); <-resume })
		}})
		done <- err
	}()
	<-paused
	_, err = s.Remove(t.Context(), msgs[0].Number, "")
	close(resume)
	if !errors.Is(err, ErrMaintenance) {
		t.Errorf("Remove during a compaction = %v, want %v", err, ErrMaintenance)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, msgs)
}

// TestCompactMoves: the moves survive a compaction: Get answers the new
// list, the feed still has the move, and the file keeps its format.
func TestCompactMoves(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 50)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	mv, err := s.Move(t.Context(), msgs[7].Number, "elsewhere")
	if err != nil {
		t.Fatal(err)
	}
	// A removal after the move keeps the format of moves.
	if _, err := s.Remove(t.Context(), msgs[8].Number, ""); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	got, err := s.Get(t.Context(), msgs[7].Number)
	if err != nil || got.List != "elsewhere" {
		t.Errorf("Get(moved, after compaction) = list %q, %v; want elsewhere", got.List, err)
	}
	var moves []store.Move
	for cur := store.Cursor(""); ; {
		page, err := s.Changes(t.Context(), cur, 100)
		if err != nil {
			t.Fatal(err)
		}
		if page.Empty() {
			break
		}
		moves = append(moves, page.Moves...)
		cur = page.Next
	}
	if len(moves) != 1 || moves[0].List != "elsewhere" || !moves[0].Moved.Equal(mv.Moved) {
		t.Errorf("the feed after compaction lists moves %+v, want %+v", moves, mv)
	}
	err = s.view(t.Context(), func(tx *bolt.Tx) error {
		if f := string(tx.Bucket(bucketMeta).Get(keyFormat)); f != formatMoves {
			t.Errorf("format after compaction = %q, want %q", f, formatMoves)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

// filePageSize is the bbolt page size of the file s has open.
func filePageSize(t *testing.T, s *Store) int {
	t.Helper()
	var ps int
	if err := s.view(t.Context(), func(tx *bolt.Tx) error { ps = tx.DB().Info().PageSize; return nil }); err != nil {
		t.Fatal(err)
	}
	return ps
}

// TestPageSizes: a new file gets DefaultPageSize, or Options.PageSize; an
// existing file keeps its own whatever the options ask; a compaction's
// copy gets the default unless told otherwise.
func TestPageSizes(t *testing.T) {
	dir := t.TempDir()
	a := storetest.NewAuthority(t, shuffle.Bits)

	fresh := filepath.Join(dir, "fresh.db")
	s, err := Open(t.Context(), fresh, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if ps := filePageSize(t, s); ps != DefaultPageSize {
		t.Errorf("a new file's page size = %d, want DefaultPageSize (%d)", ps, DefaultPageSize)
	}
	s.Close()
	s, err = Open(t.Context(), fresh, Options{PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	if ps := filePageSize(t, s); ps != DefaultPageSize {
		t.Errorf("reopened with PageSize 4096: page size %d, want the file's own %d", ps, DefaultPageSize)
	}
	s.Close()

	small := filepath.Join(dir, "messages.db")
	msgs := oldArchive(t, small, a, 300) // 4 KiB pages
	s, err = Open(t.Context(), small, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if ps := filePageSize(t, s); ps != 4096 {
		t.Errorf("a 4 KiB file opened with the default options: page size %d, want its own 4096", ps)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{PageSize: 3000}); err == nil || !strings.Contains(err.Error(), "page size 3000") {
		t.Errorf("Compact(PageSize 3000) = %v; want it refused for its page size", err)
	}
	if ps := filePageSize(t, s); ps != 4096 {
		t.Errorf("after a refused Compact: page size %d, want the file untouched (4096)", ps)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	if ps := filePageSize(t, s); ps != DefaultPageSize {
		t.Errorf("after Compact in place: page size %d, want DefaultPageSize (%d)", ps, DefaultPageSize)
	}
	checkAll(t, s, msgs)
}
