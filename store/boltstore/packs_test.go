package boltstore

import (
	"bytes"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestLocator(t *testing.T) {
	for _, l := range []locator{
		{pack: packID{1, 2, 3, 4, 5, 6, 7, 8}, off: 0, n: 0},
		{pack: packID{0xff}, off: 1<<30 - 1, n: 64 << 20},
		{pack: newPackID(), off: 12345, n: 678},
	} {
		b := appendLocator(nil, l)
		if !isLocator(b) {
			t.Errorf("isLocator(appendLocator(%+v)) = false", l)
		}
		got, err := parseLocator(b)
		if err != nil || got != l {
			t.Errorf("parseLocator(appendLocator(%+v)) = %+v, %v", l, got, err)
		}
	}
	good := appendLocator(nil, locator{pack: packID{9}, off: 300, n: 400})
	for name, bad := range map[string][]byte{
		"empty":        nil,
		"a record":     {record.Version2, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11},
		"cut":          good[:len(good)-1],
		"trailing":     append(bytes.Clone(good), 0),
		"no length":    good[:1+packIDLen+2],
		"bad varint":   append(append([]byte{locatorTag}, make([]byte, packIDLen)...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1),
		"only the tag": {locatorTag},
	} {
		if _, err := parseLocator(bad); !errors.Is(err, ErrFormat) {
			t.Errorf("parseLocator(%s) = %v, want %v", name, err, ErrFormat)
		}
	}
}

// FuzzParseLocator: any bytes parse to a locator that writes back to
// them, or to ErrFormat; never a panic.
func FuzzParseLocator(f *testing.F) {
	f.Add(appendLocator(nil, locator{pack: packID{1}, off: 7, n: 9}))
	f.Add([]byte{locatorTag})
	f.Add([]byte{record.Version1, 0})
	f.Fuzz(func(t *testing.T, b []byte) {
		l, err := parseLocator(b)
		if err != nil {
			if !errors.Is(err, ErrFormat) {
				t.Fatalf("parseLocator(%x) = %v, want %v", b, err, ErrFormat)
			}
			return
		}
		// Uvarints have more than one encoding (trailing 0x80 groups):
		// the locator, not the bytes, must survive a round trip.
		if again, err := parseLocator(appendLocator(nil, l)); err != nil || again != l {
			t.Fatalf("parseLocator(appendLocator(%+v)) = %+v, %v", l, again, err)
		}
	})
}

// packArchive stores n messages under run 1 in a new store at path, and
// returns them.
func packArchive(t *testing.T, path string, a *storetest.Authority, n int) []store.Message {
	t.Helper()
	s, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordLease(t.Context(), a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	var msgs []store.Message
	for i := range n {
		msgs = append(msgs, storetest.Message(a.Number(t, 1, i), listMail(i), "", ""))
	}
	for i := 0; i < n; i += 100 {
		if _, err := s.Put(t.Context(), msgs[i:min(n, i+100)]); err != nil {
			t.Fatal(err)
		}
	}
	return msgs
}

func packFiles(t *testing.T, path string) []string {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(packDir(path), "*"+packExt))
	if err != nil {
		t.Fatal(err)
	}
	return files
}

// Records go to one pack, end to end: the file is as long as the records
// its transactions committed, and the bbolt file holds locators only.
func TestPacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 300)
	files := packFiles(t, path)
	if len(files) != 1 {
		t.Fatalf("packs %v, want one", files)
	}
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, msgs)
	var committed, records uint64
	err = s.view(t.Context(), func(tx *bolt.Tx) error {
		cur := tx.Bucket(bucketMeta).Get(keyPack)
		var ok bool
		if committed, ok = packLength(tx, packID(cur)); !ok {
			t.Errorf("the current pack %x is not listed", cur)
		}
		return tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
			l, err := parseLocator(v)
			if err != nil {
				return err
			}
			records += l.n
			return nil
		})
	})
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(files[0])
	if err != nil {
		t.Fatal(err)
	}
	if committed != records || uint64(fi.Size()) != committed {
		t.Errorf("pack of %d bytes, %d committed, records of %d; want all three equal", fi.Size(), committed, records)
	}
}

// A writer that crashed after writing its records to the pack, before
// its transaction committed, left bytes past the committed length: they
// are never read, and the next batch writes over them.
func TestPackTailAfterCrash(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 50)
	f, err := os.OpenFile(packFiles(t, path)[0], os.O_WRONLY|os.O_APPEND, 0)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(bytes.Repeat([]byte("garbage of a batch that never committed\n"), 1000))
	f.Close()
	s, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	more := []store.Message{storetest.Message(a.Number(t, 1, 50), listMail(50), "", ""), storetest.Message(a.Number(t, 1, 51), listMail(51), "", "")}
	if _, err := s.Put(t.Context(), more); err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, append(msgs, more...))
	if files := packFiles(t, path); len(files) != 1 {
		t.Errorf("packs %v, want the one", files)
	}
}

// A damaged or cut pack is an error naming the message, never other
// bytes.
func TestPackDamage(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 20)
	pack := packFiles(t, path)[0]
	b, err := os.ReadFile(pack)
	if err != nil {
		t.Fatal(err)
	}
	b[len(b)/2] ^= 0x40
	if err := os.WriteFile(pack, b, 0o644); err != nil {
		t.Fatal(err)
	}
	s, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	bad := 0
	for _, m := range msgs {
		got, err := s.Get(t.Context(), m.Number)
		switch {
		case err == nil && !bytes.Equal(got.Raw, m.Raw):
			t.Fatalf("Get(%v) from a damaged pack returned other bytes", m.Number)
		case err != nil:
			bad++
			if !errors.Is(err, record.ErrCorrupt) || !strings.Contains(err.Error(), m.Number.String()) {
				t.Errorf("Get(%v) from a damaged pack = %v; want %v naming it", m.Number, err, record.ErrCorrupt)
			}
		}
	}
	if bad != 1 {
		t.Errorf("%d messages failed to read from a pack damaged in one byte, want 1", bad)
	}
	if err := os.Truncate(pack, int64(len(b)/3)); err != nil {
		t.Fatal(err)
	}
	_, err = s.Get(t.Context(), msgs[len(msgs)-1].Number)
	if !errors.Is(err, ErrFormat) || !strings.Contains(err.Error(), "cut") {
		t.Errorf("Get(last message) from a cut pack = %v; want %v saying the file was cut", err, ErrFormat)
	}
	// A pack deleted by hand (the open file of this process still reads).
	os.Remove(pack)
	s2, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s2.Close()
	if _, err = s2.Get(t.Context(), msgs[0].Number); err == nil || !strings.Contains(err.Error(), filepath.Base(pack)) {
		t.Errorf("Get from a missing pack = %v; want an error naming it", err)
	}
}

// A writer starts a new pack when the current one would pass maxPackSize.
func TestPackRolls(t *testing.T) {
	defer func(old uint64) { maxPackSize = old }(maxPackSize)
	maxPackSize = 64 << 10
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 400)
	files := packFiles(t, path)
	if len(files) < 3 {
		t.Fatalf("%d packs for 400 messages at most 64 KiB each, want several", len(files))
	}
	for _, f := range files {
		if fi, err := os.Stat(f); err != nil || fi.Size() > int64(maxPackSize) {
			t.Errorf("pack %s: %v, %v; want at most %d bytes", f, fi.Size(), err, maxPackSize)
		}
	}
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	checkAll(t, s, msgs)
	// A message larger than a whole pack still goes in one, alone.
	big := storetest.Message(a.Number(t, 1, 400), storetest.Mail("<big@example.org>", strings.Repeat(string(noiseLine(1)), 5000)), "big@example.org", "")
	if _, err := s.Put(t.Context(), []store.Message{big}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, append(msgs, big))
}

func noiseLine(seed byte) []byte {
	b := make([]byte, 64)
	x := uint32(seed) + 1
	for i := range b {
		x = x*1664525 + 1013904223
		b[i] = 'a' + byte(x>>24)%26
	}
	return append(b, '\n')
}

// A format 2 file (every record in the messages bucket) is read as it is,
// read-only and writable; a writer upgrades it, and new records go to
// packs beside the old ones; a compaction moves every record to packs.
func TestUpgradeFormat2(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 200)
	toFormat2(t, path)

	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	checkAll(t, ro, msgs)
	ro.Close()

	s, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	var v int
	s.view(t.Context(), func(tx *bolt.Tx) (err error) { v, err = checkFormat(tx); return err })
	if v != 3 {
		t.Fatalf("format after a writable open = %d, want 3", v)
	}
	newer := []store.Message{storetest.Message(a.Number(t, 1, 200), listMail(200), "", "")}
	if _, err := s.Put(t.Context(), newer); err != nil {
		t.Fatal(err)
	}
	all := append(msgs, newer...)
	checkAll(t, s, all)
	if kinds := valueKinds(t, s); kinds["inline"] != 200 || kinds["locator"] != 1 {
		t.Errorf("values after the upgrade and one Put: %v; want 200 inline, 1 locator", kinds)
	}
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	checkAll(t, s, all)
	if kinds := valueKinds(t, s); kinds["inline"] != 0 || kinds["locator"] != 201 {
		t.Errorf("values after compaction: %v; want 201 locators", kinds)
	}
	if got := feed(t, s, ""); len(got) != len(all) {
		t.Errorf("the feed after the upgrade and compaction lists %d messages, want %d", len(got), len(all))
	}
}

func valueKinds(t *testing.T, s *Store) map[string]int {
	t.Helper()
	kinds := map[string]int{}
	s.view(t.Context(), func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMessages).ForEach(func(k, v []byte) error {
			if isLocator(v) {
				kinds["locator"]++
			} else {
				kinds["inline"]++
			}
			return nil
		})
	})
	return kinds
}

// A compaction in place deletes the old packs, and those a crashed writer
// left unnamed; a process that read from the old packs lets them go at
// its next read, and reads the new ones.
func TestCompactDeletesOldPacks(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	msgs := packArchive(t, path, a, 300)
	orphan := filepath.Join(packDir(path), newPackID().String()+packExt)
	if err := os.WriteFile(orphan, []byte("created by a writer that crashed before its commit"), 0o644); err != nil {
		t.Fatal(err)
	}
	before := packFiles(t, path)
	reader, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer reader.Close()
	checkAll(t, reader, msgs) // opens the old pack
	s, err := Open(t.Context(), path, Options{Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Compact(t.Context(), CompactOptions{}); err != nil {
		t.Fatal(err)
	}
	after := packFiles(t, path)
	if len(after) != 1 || slices.Contains(before, after[0]) {
		t.Errorf("packs after compaction %v (before %v); want one new one", after, before)
	}
	checkAll(t, reader, msgs)
	reader.packs.mu.Lock()
	var open []string
	for id := range reader.packs.files {
		open = append(open, reader.packs.path(id))
	}
	reader.packs.mu.Unlock()
	if !slices.Equal(open, after) {
		t.Errorf("the reader has packs %v open, want only the new %v", open, after)
	}
}

// Concurrent readers and one writer in one process: readers never see a
// locator whose bytes are not there.
func TestPacksReadWhileWriting(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	a := storetest.NewAuthority(t, shuffle.Mix)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.RecordLease(t.Context(), a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	stored := make(chan store.Message, 1000)
	errs := make(chan error, 4)
	for range 3 {
		go func() {
			var seen []store.Message
			for {
				select {
				case m, ok := <-stored:
					if !ok {
						errs <- nil
						return
					}
					seen = append(seen, m)
				case <-ctx.Done():
					errs <- nil
					return
				default:
				}
				for _, m := range seen[max(0, len(seen)-5):] {
					got, err := s.Get(ctx, m.Number)
					if err != nil || !bytes.Equal(got.Raw, m.Raw) {
						errs <- errors.Join(err, errors.New("other bytes"))
						return
					}
				}
			}
		}()
	}
	var n callnumber.Number
	for i := range 100 {
		var batch []store.Message
		for j := range 5 {
			n = a.Number(t, 1, i*5+j)
			batch = append(batch, storetest.Message(n, listMail(i*5+j), "", ""))
		}
		if _, err := s.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
		for _, m := range batch {
			stored <- m
		}
	}
	close(stored)
	for range 3 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}
