package boltstore

import (
	"bufio"
	"bytes"
	"context"
	"encoding/binary"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"testing"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store/storetest"
)

// indexEntries returns the digest and Message-ID index entries of the
// store's file, in key order, and how many leaf pages each fills.
func indexEntries(t *testing.T, s *Store) (digests, msgids [][]byte, pages [2]int) {
	t.Helper()
	s.view(t.Context(), func(tx *bolt.Tx) error {
		tx.Bucket(bucketDigests).ForEach(func(k, v []byte) error {
			digests = append(digests, append(bytes.Clone(k), v...))
			return nil
		})
		tx.Bucket(bucketMsgIDs).ForEach(func(k, v []byte) error {
			msgids = append(msgids, bytes.Clone(k))
			return nil
		})
		pages = [2]int{tx.Bucket(bucketDigests).Stats().LeafPageN, tx.Bucket(bucketMsgIDs).Stats().LeafPageN}
		return nil
	})
	return digests, msgids, pages
}

// TestCompactSortRuns: with a sort buffer of a few entries, the copy's
// indexes are sorted in many runs on disk and merged: the same entries
// as a compaction that sorts them in one run, the pages as full, every
// message found by digest and Message-ID, and no run left behind.
func TestCompactSortRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 1700)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	one, many := filepath.Join(dir, "one.db"), filepath.Join(dir, "many.db")
	if _, err := s.Compact(t.Context(), CompactOptions{To: one}); err != nil {
		t.Fatal(err)
	}
	// About 140 bytes a message: a run every 50 messages, 34 of them.
	st, err := s.Compact(t.Context(), CompactOptions{To: many, sortBuffer: 7000})
	if err != nil || st.Messages != 1700 {
		t.Fatalf("Compact(sortBuffer 7000) = %+v, %v", st, err)
	}
	if _, err := os.Stat(many + sortSuffix); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the runs are left behind: %v", err)
	}
	c1, err := Open(t.Context(), one, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c1.Close()
	c2, err := Open(t.Context(), many, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	d1, m1, p1 := indexEntries(t, c1)
	d2, m2, p2 := indexEntries(t, c2)
	if len(d1) != 1700 || len(m1) != 1700 {
		t.Fatalf("one run: %d digest and %d Message-ID entries, want 1700 each", len(d1), len(m1))
	}
	if !slices.EqualFunc(d1, d2, bytes.Equal) || !slices.EqualFunc(m1, m2, bytes.Equal) {
		t.Errorf("index entries merged from runs differ from those sorted in one")
	}
	if p2 != p1 {
		t.Errorf("leaf pages of the indexes merged from runs: %v, sorted in one: %v; want as full", p2, p1)
	}
	checkAll(t, c2, msgs)
	for _, m := range msgs {
		if n, err := c2.ByDigest(t.Context(), m.Digest); err != nil || n != m.Number {
			t.Fatalf("ByDigest = %v, %v; want %v", n, err, m.Number)
		}
		if ns, err := c2.ByMessageID(t.Context(), m.MessageID); err != nil || !slices.Equal(ns, []callnumber.Number{m.Number}) {
			t.Fatalf("ByMessageID(%q) = %v, %v; want [%v]", m.MessageID, ns, err, m.Number)
		}
	}
}

// TestCompactLeftRuns: the runs of a compaction killed before it merged
// them are deleted by the next compaction in place; a compaction to a
// new file refuses to use a directory that holds some.
func TestCompactLeftRuns(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "messages.db")
	a := storetest.NewAuthority(t, shuffle.Bits)
	msgs := oldArchive(t, path, a, 300)
	left := path + compactSuffix + sortSuffix
	if err := os.MkdirAll(left, 0o755); err != nil {
		t.Fatal(err)
	}
	for _, name := range []string{"digests-0", "msgids-0"} {
		if err := os.WriteFile(filepath.Join(left, name), []byte("a run cut short"), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	os.WriteFile(path+compactSuffix, []byte("a partial copy"), 0o644)
	s, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if _, err := s.Compact(t.Context(), CompactOptions{sortBuffer: 5000}); err != nil {
		t.Fatalf("Compact with the runs of an interrupted one left = %v", err)
	}
	if _, err := os.Stat(left); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("the left runs: %v; want them deleted", err)
	}
	checkAll(t, s, msgs)
	to := filepath.Join(dir, "copy.db")
	os.MkdirAll(to+sortSuffix, 0o755)
	if _, err := s.Compact(t.Context(), CompactOptions{To: to}); err == nil {
		t.Errorf("Compact(To) with %s present = nil error", to+sortSuffix)
	}
	if _, err := os.Stat(to + sortSuffix); err != nil {
		t.Errorf("Compact(To) deleted %s, which it did not make: %v", to+sortSuffix, err)
	}
}

// FuzzMergeRuns: a run file of any bytes merges in key order or fails
// with an error, never a panic, nor a key out of order.
func FuzzMergeRuns(f *testing.F) {
	f.Add([]byte{}, []byte{})
	f.Add(bytes.Repeat([]byte{1}, 40), binary.AppendUvarint(nil, 3))
	f.Add(append(bytes.Repeat([]byte{1}, 40), bytes.Repeat([]byte{2}, 40)...), append(binary.AppendUvarint(nil, 2), "a\x00b\x00"...))
	f.Add(append(bytes.Repeat([]byte{2}, 40), bytes.Repeat([]byte{1}, 40)...), append(binary.AppendUvarint(nil, 2), "b\x00"...))
	f.Fuzz(func(t *testing.T, digests, msgids []byte) {
		s := &sorter{dir: t.TempDir(), runs: 2}
		for _, k := range []struct {
			kind  string
			input []byte
			valid []byte // a second run, of one entry
			read  readEntry
		}{
			{"digests", digests, bytes.Repeat([]byte{0x80}, digestEntry), readDigestEntry},
			{"msgids", msgids, append(binary.AppendUvarint(nil, 3), "m\x00\x01"...), readMsgIDEntry},
		} {
			os.WriteFile(s.runPath(k.kind, 0), k.input, 0o644)
			os.WriteFile(s.runPath(k.kind, 1), k.valid, 0o644)
			var got [][]byte
			err := s.mergeKind(context.Background(), k.kind, k.read, func(arena []byte, ends []int) error {
				if len(ends) == 0 || len(ends) > 2*mergeBatch {
					t.Errorf("%s: a batch of %d entries", k.kind, len(ends)/2)
				}
				at := 0
				for i := 0; i < len(ends); i += 2 {
					got = append(got, arena[at:ends[i+1]]) // key and value
					at = ends[i+1]
				}
				return nil
			})
			if err != nil {
				if !errors.Is(err, ErrFormat) {
					t.Fatalf("%s: merge = %v, want an error wrapping %v", k.kind, err, ErrFormat)
				}
				continue
			}
			// Merged: every entry of both runs, each once, in key order.
			var want [][]byte
			for _, run := range [][]byte{k.input, k.valid} {
				r := bufio.NewReader(bytes.NewReader(run))
				for {
					key, value, err := k.read(r, nil)
					if err != nil {
						break
					}
					want = append(want, append(bytes.Clone(key), value...))
				}
			}
			slices.SortFunc(want, bytes.Compare)
			if !slices.EqualFunc(got, want, bytes.Equal) {
				t.Errorf("%s: merged %d entries, want the %d of the runs in order", k.kind, len(got), len(want))
			}
		}
	})
}

// failingReader gives its bytes, then err.
type failingReader struct {
	b   []byte
	err error
}

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.b) == 0 {
		return 0, f.err
	}
	n := copy(p, f.b)
	f.b = f.b[n:]
	return n, nil
}

// TestReadEntryIOError: a run that cannot be read is an I/O error, not a
// store in the wrong format, wherever in an entry the reading fails.
func TestReadEntryIOError(t *testing.T) {
	eio := errors.New("input/output error")
	for _, c := range []struct {
		name   string
		before []byte
		read   readEntry
	}{
		{"msgid, at the start", nil, readMsgIDEntry},
		{"msgid, within the length", []byte{0x80}, readMsgIDEntry},
		{"msgid, within the key", append(binary.AppendUvarint(nil, 3), 'm'), readMsgIDEntry},
		{"digest, at the start", nil, readDigestEntry},
		{"digest, within", bytes.Repeat([]byte{1}, 10), readDigestEntry},
	} {
		r := bufio.NewReaderSize(&failingReader{c.before, eio}, 16)
		_, _, err := c.read(r, nil)
		if !errors.Is(err, eio) || errors.Is(err, ErrFormat) {
			t.Errorf("%s: %v, want the reader's error and not %v", c.name, err, ErrFormat)
		}
	}
	// The same bytes cut short by the end of the file are a format error.
	for _, b := range [][]byte{{0x80}, append(binary.AppendUvarint(nil, 3), 'm')} {
		if _, _, err := readMsgIDEntry(bufio.NewReader(bytes.NewReader(b)), nil); !errors.Is(err, ErrFormat) {
			t.Errorf("%x cut short: %v, want %v", b, err, ErrFormat)
		}
	}
}
