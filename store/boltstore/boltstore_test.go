package boltstore_test

import (
	"context"
	"errors"
	"path/filepath"
	"strings"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

// tamper is a bolt store the conformance suite can reach beneath.
type tamper struct {
	*boltstore.Store
	opts boltstore.Options
}

var _ storetest.Tamperer = tamper{}

func (t tamper) Record(ctx context.Context, n callnumber.Number) ([]byte, error) {
	return t.TestRecord(ctx, n)
}

func (t tamper) SetRecord(ctx context.Context, n callnumber.Number, v []byte) error {
	return t.TestSetRecord(ctx, n, v)
}

func (t tamper) SaveDict(ctx context.Context, id record.DictID, b []byte) error {
	return t.TestSaveDict(ctx, id, b)
}

func (t tamper) Compression() store.Compression { return boltstore.CompressionOf(t.opts) }

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts boltstore.Options
		// ownPacks writes every batch of two or more, after the first,
		// to a pack of its Store's own, before the write lock.
		ownPacks bool
		// mergeAt and chunk, if set, say when a Put merges the recent
		// keys into the indexes and how many a transaction puts.
		mergeAt uint64
		chunk   int
		// collide gives every recent key the same hash in the maps.
		collide bool
	}{
		{"default", boltstore.Options{}, false, 0, 0, false},
		{"no linger", boltstore.Options{Linger: -1}, false, 0, 0, false},
		{"uncompressed, 4 KiB pages", boltstore.Options{Compression: store.Compression{Off: true}, PageSize: 4096}, false, 0, 0, false},
		// Dictionaries trained as messages are written, as a large
		// import's are: with S2 (the default level) and with zstd.
		{"s2, dictionaries from 1,000", boltstore.Options{Compression: store.Compression{TrainAt: 1000}}, false, 0, 0, false},
		{"zstd, dictionaries from 1,000", boltstore.Options{Compression: store.Compression{TrainAt: 1000, Level: store.LevelStrong}}, false, 0, 0, false},
		{"packs of their own", boltstore.Options{Linger: -1}, true, 0, 0, false},
		// Every batch's index entries merged after it, a transaction for
		// each (then every lookup reads both places at once, in turn);
		// and merged every few batches, in one.
		{"recent keys merged by every batch", boltstore.Options{Linger: -1}, false, 1, 1, false},
		{"recent keys merged now and then", boltstore.Options{}, false, 7, 1000, false},
		// Every lookup of a recent key reads every recent entry and
		// compares its own.
		{"recent keys of one hash", boltstore.Options{}, false, 1 << 20, 1000, true},
	} {
		t.Run(tt.name, func(t *testing.T) {
			if tt.ownPacks {
				defer boltstore.SetOwnPackMin(1)()
			}
			if tt.mergeAt > 0 {
				defer boltstore.SetRecentMerge(tt.mergeAt, tt.chunk)()
			}
			if tt.collide {
				defer boltstore.SetRecentHashCollide()()
			}
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				path := filepath.Join(t.TempDir(), "data", "messages.db")
				return func(ctx context.Context) (store.Store, error) {
					s, err := boltstore.Open(ctx, path, tt.opts)
					if err != nil {
						return nil, err
					}
					return tamper{s, tt.opts}, nil
				}
			})
		})
	}
}

func TestLocked(t *testing.T) {
	path := filepath.Join(t.TempDir(), "messages.db")
	s, err := boltstore.Open(t.Context(), path, boltstore.Options{LockTimeout: 100 * time.Millisecond, Linger: -1})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	// Another holder of bbolt's lock: flock belongs to the open file
	// description, so a second handle in this process stands in for
	// another process.
	other, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	_, err = s.Count(t.Context())
	if !errors.Is(err, boltstore.ErrLocked) {
		t.Errorf("Count() while locked = %v, want %v", err, boltstore.ErrLocked)
	} else if !strings.Contains(err.Error(), path) {
		t.Errorf("error %q does not name %s", err, path)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if _, err := s.Count(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Count(cancelled) while locked = %v, want %v", err, context.Canceled)
	}
	other.Close()
	if n, err := s.Count(t.Context()); err != nil || n != 0 {
		t.Errorf("Count() after unlock = %d, %v; want 0", n, err)
	}
}

func TestNotAStore(t *testing.T) {
	path := filepath.Join(t.TempDir(), "other.db")
	db, err := bolt.Open(path, 0o644, nil)
	if err != nil {
		t.Fatal(err)
	}
	db.Update(func(tx *bolt.Tx) error { _, err := tx.CreateBucket([]byte("something")); return err })
	db.Close()
	if s, err := boltstore.Open(t.Context(), path, boltstore.Options{}); !errors.Is(err, boltstore.ErrFormat) {
		t.Errorf("Open(foreign bbolt file) = %v, %v; want %v", s, err, boltstore.ErrFormat)
	}
}

// Options.MappedBudget is the store's, writable or read-only; zero or
// less is the default.
func TestMappedBudgetOption(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "messages.db")
	for _, tc := range []struct {
		opts boltstore.Options
		want int64
	}{
		{boltstore.Options{MappedBudget: 1 << 30}, 1 << 30},
		{boltstore.Options{}, boltstore.DefaultMappedBudget},
		{boltstore.Options{MappedBudget: -1}, boltstore.DefaultMappedBudget},
		{boltstore.Options{MappedBudget: 1 << 30, ReadOnly: true}, 1 << 30},
		{boltstore.Options{ReadOnly: true}, boltstore.DefaultMappedBudget},
	} {
		s, err := boltstore.Open(ctx, path, tc.opts)
		if err != nil {
			t.Fatal(err)
		}
		if got := s.MappedBudget(); got != tc.want {
			t.Errorf("Open(%+v).MappedBudget() = %d, want %d", tc.opts, got, tc.want)
		}
		s.Close()
	}
}
