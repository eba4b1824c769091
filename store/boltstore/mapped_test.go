//go:build linux

package boltstore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// mappedKB returns how much of the file at path this process has mapped
// in memory (the Rss of its mappings in /proc/self/smaps), in KiB.
func mappedKB(t *testing.T, path string) int {
	t.Helper()
	f, err := os.Open("/proc/self/smaps")
	if err != nil {
		t.Skipf("no /proc/self/smaps: %v", err)
	}
	defer f.Close()
	total, in := 0, false
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		fields := strings.Fields(sc.Text())
		switch {
		case len(fields) >= 5 && strings.Contains(fields[0], "-") && !strings.HasSuffix(fields[0], ":"):
			in = len(fields) >= 6 && fields[len(fields)-1] == path
		case in && len(fields) >= 2 && fields[0] == "Rss:":
			kb, _ := strconv.Atoi(fields[1])
			total += kb
		}
	}
	return total
}

// A write transaction drops the pages earlier transactions mapped once
// they are more than the store's budget, so that the mapped part of the
// file does not grow with the archive over a long import, and keeps them
// while they are fewer, so that the next batches need not fault them in
// again (see mapped.go). The records are in packs, not in the file: what a
// long import maps is the indexes.
func TestReleaseMapped(t *testing.T) {
	for _, tc := range []struct {
		name     string
		budget   func(mappedKiB int) int64
		released bool
	}{
		{"over the budget", func(kib int) int64 { return int64(kib) << 10 / 4 }, true},
		{"within the budget", func(kib int) int64 { return int64(kib) << 10 * 4 }, false},
		{"no budget", func(int) int64 { return 0 }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ctx := context.Background()
			path := t.TempDir() + "/messages.db"
			// One handle throughout.
			s, err := Open(ctx, path, Options{Linger: time.Minute, Compression: store.Compression{Off: true}})
			if err != nil {
				t.Fatal(err)
			}
			defer s.Close()
			if _, ok := fileResident(); !ok {
				t.Skip("no /proc/self/statm: every write transaction releases the pages")
			}
			a := storetest.NewAuthority(t, shuffle.Mix)
			if err := s.RecordLease(ctx, a.Lease(1)); err != nil {
				t.Fatal(err)
			}
			s.mapped.budget = 1 << 40 // while filling the store
			const n = 16000
			msgs := make([]store.Message, 0, n)
			for i := range n {
				id := fmt.Sprintf("m%d.%s@example.org", i, strings.Repeat("x", 40))
				raw := storetest.Mail("<"+id+">", "a body\n")
				msgs = append(msgs, storetest.Message(a.Number(t, 1, i), raw, id, ""))
			}
			for i := 0; i < n; i += 2000 {
				if _, err := s.Put(ctx, msgs[i:i+2000]); err != nil {
					t.Fatal(err)
				}
			}
			// Looking every message up maps the whole of both indexes.
			for _, m := range msgs {
				if _, err := s.ByDigest(ctx, m.Digest); err != nil {
					t.Fatal(err)
				}
				if _, err := s.ByMessageID(ctx, m.MessageID); err != nil {
					t.Fatal(err)
				}
			}
			before := mappedKB(t, path)
			if before < 1<<10 {
				t.Fatalf("%d KiB of the file mapped after reading its indexes; the test cannot tell anything", before)
			}
			s.mapped.budget = tc.budget(before)
			var during int
			err = s.update(ctx, func(tx *bolt.Tx) error {
				during = mappedKB(t, path)
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
			if tc.released && during > before/10 {
				t.Errorf("%d KiB mapped at the start of a write transaction, %d before, budget %d KiB: want the earlier pages released", during, before, s.mapped.budget>>10)
			}
			if !tc.released && during < before*9/10 {
				t.Errorf("%d KiB mapped at the start of a write transaction, %d before, budget %d KiB: want them kept", during, before, s.mapped.budget>>10)
			}
			t.Logf("mapped: %d KiB after the reads, %d KiB at the start of the next write (budget %d KiB)", before, during, s.mapped.budget>>10)
		})
	}
}

// A Put looks up each new message's content (store.ContentOf) only in a
// store with removals: until the first, no content is indexed.
func TestNoRemovals(t *testing.T) {
	ctx := context.Background()
	s, err := Open(ctx, t.TempDir()+"/messages.db", Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	a := storetest.NewAuthority(t, shuffle.Mix)
	if err := s.RecordLease(ctx, a.Lease(1)); err != nil {
		t.Fatal(err)
	}
	noRemovals := func() bool {
		var none bool
		err := s.view(ctx, func(tx *bolt.Tx) (err error) {
			none, err = (&txLookup{tx: tx}).NoRemovals(ctx)
			return err
		})
		if err != nil {
			t.Fatal(err)
		}
		return none
	}
	if !noRemovals() {
		t.Fatal("NoRemovals() = false in a new store, want true")
	}
	m := storetest.Message(a.Number(t, 1, 0), storetest.Mail("<a@example.org>", "a body\n"), "a@example.org", "")
	if _, err := s.Put(ctx, []store.Message{m}); err != nil {
		t.Fatal(err)
	}
	if !noRemovals() {
		t.Fatal("NoRemovals() = false in a store without removals, want true")
	}
	if _, err := s.Remove(ctx, m.Number, "test"); err != nil {
		t.Fatal(err)
	}
	if noRemovals() {
		t.Fatal("NoRemovals() = true after a removal, want false")
	}
}
