package boltstore

import (
	"bytes"
	"context"
	"fmt"
	"hash/maphash"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// DiskBytes returns the bytes on disk of the file at path.
var DiskBytes = blocks

// CompressionOf returns the compression a store opened with opts uses.
func CompressionOf(opts Options) store.Compression { return compression(opts.Compression) }

// SetOwnPackMin makes batches of at least n bytes of records write to a
// pack of their Store's own (ownpack.go), until the returned func is called.
func SetOwnPackMin(n int) (restore func()) {
	old := ownPackMin
	ownPackMin = n
	return func() { ownPackMin = old }
}

// Test hooks beneath the Store interface, for storetest.Tamperer.

// TestRecord returns the value stored for n.
func (s *Store) TestRecord(ctx context.Context, n callnumber.Number) ([]byte, error) {
	var v []byte
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return fmt.Errorf("unbound: %w", err)
		}
		key := packedKey(bd.codec.Packed(n))
		if v = tx.Bucket(bucketMessages).Get(key[:]); v == nil {
			return store.ErrNotFound
		}
		v, err = s.recordCopy(tx, v)
		return err
	})
	return v, err
}

// TestSetRecord replaces the record stored for n: it appends v to a pack
// and points n's locator at it.
func (s *Store) TestSetRecord(ctx context.Context, n callnumber.Number, v []byte) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return fmt.Errorf("unbound: %w", err)
		}
		key := packedKey(bd.codec.Packed(n))
		pw := s.packs.writer(tx)
		loc, err := pw.add(v)
		if err != nil {
			return err
		}
		if err := pw.commit(); err != nil {
			return err
		}
		return tx.Bucket(bucketMessages).Put(key[:], loc)
	})
}

// TestSetInline replaces the value stored for n by the record v itself,
// as a format 2 file kept it.
func (s *Store) TestSetInline(ctx context.Context, n callnumber.Number, v []byte) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return fmt.Errorf("unbound: %w", err)
		}
		key := packedKey(bd.codec.Packed(n))
		return tx.Bucket(bucketMessages).Put(key[:], bytes.Clone(v))
	})
}

// TestSaveDict stores b as dictionary id, unchecked.
func (s *Store) TestSaveDict(ctx context.Context, id record.DictID, b []byte) error {
	return s.update(ctx, func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketDicts)
		if err != nil {
			return err
		}
		return bk.Put(id[:], bytes.Clone(b))
	})
}

// SetRecentMerge makes a Put that leaves at least at recent keys merge
// them, chunk in a transaction (recent.go), until the returned func is
// called.
func SetRecentMerge(at uint64, chunk int) (restore func()) {
	oldAt, oldChunk := recentMergeAt, recentChunk
	recentMergeAt, recentChunk = at, chunk
	return func() { recentMergeAt, recentChunk = oldAt, oldChunk }
}

// SetRecentHashCollide gives every recent key the same hash in the
// Stores' maps of them until the returned func is called.
func SetRecentHashCollide() (restore func()) {
	old := recentHash
	recentHash = func(maphash.Seed, []byte) uint64 { return 1 }
	return func() { recentHash = old }
}

// SetAfterRecentChunk sets the hook a merge calls after each transaction
// that puts a chunk of recent keys into the indexes.
func SetAfterRecentChunk(f func(chunk int) error) (restore func()) {
	old := afterRecentChunk
	afterRecentChunk = f
	return func() { afterRecentChunk = old }
}

// MergeRecent merges every recent key into the indexes.
func (s *Store) MergeRecent(ctx context.Context) error { return s.mergeRecent(ctx, 0, true) }

// RecentKeys returns how many recent keys the file holds.
func (s *Store) RecentKeys(ctx context.Context) (int, error) {
	n := 0
	err := s.view(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketRecent); b != nil {
			n = b.Stats().KeyN
		}
		return nil
	})
	return n, err
}
