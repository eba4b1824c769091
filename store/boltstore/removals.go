package boltstore

// Removals (store.Store.Remove). A removal, in one write transaction,
// deletes the message's locator and Message-ID index entry, keeps its
// digest index entry (so that the same bytes stay refused), adds one for
// its content (store.ContentOf: so that the same message stays refused,
// whatever was added to it in transit), records the
// removal in the removed bucket, appends it to the change feed (the key
// and the byte 'r') and counts the message out. The record's bytes stay in
// their pack until the next compaction, which copies only what is stored.
//
// A removal holds the maintenance lock for its transaction: a compaction
// copies the store in many transactions, and would carry a message removed
// meanwhile into its copy.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"slices"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// bucketRemoved holds the removal records under the packed number (value:
// record.MarshalRemoval). The first removal creates it and sets
// formatRemovals.
var bucketRemoved = []byte("removed")

// removalTag ends a change feed entry that is a removal.
const removalTag = 'r'

func isRemovalEntry(v []byte) bool { return len(v) == 9 && v[8] == removalTag }

// removalOf returns the removal record of n (key key) read in tx, or nil.
func removalOf(tx *bolt.Tx, n callnumber.Number, key [8]byte) (*store.Removal, error) {
	b := tx.Bucket(bucketRemoved)
	if b == nil {
		return nil, nil
	}
	v := b.Get(key[:])
	if v == nil {
		return nil, nil
	}
	r, err := record.UnmarshalRemoval(n, v)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

// putContent indexes a removal's content digest c (store.ContentOf) under
// key in the digests bucket, where no DigestOf can collide with it, unless
// it is zero or another removal of the same message has it.
func putContent(digests *bolt.Bucket, c store.Digest, key [8]byte) error {
	if c == (store.Digest{}) || digests.Get(c[:]) != nil {
		return nil
	}
	return digests.Put(c[:], key[:])
}

// removed reports whether the message under key was removed.
func removed(tx *bolt.Tx, key []byte) bool {
	b := tx.Bucket(bucketRemoved)
	return b != nil && b.Get(key) != nil
}

// Remove implements store.Store.
func (s *Store) Remove(ctx context.Context, n callnumber.Number, reason string) (store.Removal, error) {
	r, err := s.remove(ctx, store.Removal{Number: n, Reason: reason}, false)
	if err != nil {
		return store.Removal{}, fmt.Errorf("cannot remove message %v from %s: %w", n, s.path, err)
	}
	return r, nil
}

// RecordRemoval implements store.Store.
func (s *Store) RecordRemoval(ctx context.Context, r store.Removal) (store.Removal, error) {
	got, err := s.remove(ctx, r, true)
	if err != nil {
		return store.Removal{}, fmt.Errorf("cannot record the removal of message %v in %s: %w", r.Number, s.path, err)
	}
	return got, nil
}

// remove removes want.Number: as want says if given (RecordRemoval),
// else now, for want.Reason (Remove).
func (s *Store) remove(ctx context.Context, want store.Removal, given bool) (store.Removal, error) {
	n := want.Number
	if err := record.CheckRemoval(want, given); err != nil {
		return store.Removal{}, err
	}
	if err := s.h.check(); err != nil {
		return store.Removal{}, err
	}
	lock, err := takeMaintenance(s.path, "removal")
	if err != nil {
		return store.Removal{}, err
	}
	defer lock.Release()
	// A removal changes the indexes: first every recent key goes into
	// them, most in transactions of their own, the rest in the removal's.
	if err := s.mergeRecent(ctx, recentChunk, true); err != nil {
		return store.Removal{}, err
	}
	var r store.Removal
	err = s.update(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if err := mergeAllRecent(tx); err != nil {
			return err
		}
		if bd == nil || uint64(n)>>callnumber.Bits != 0 {
			return store.ErrNotFound
		}
		key := packedKey(bd.codec.Packed(n))
		if old, err := removalOf(tx, n, key); err != nil || old != nil {
			if old != nil {
				r = *old
			}
			return err
		}
		messages := tx.Bucket(bucketMessages)
		v := messages.Get(key[:])
		switch {
		case v == nil && !given:
			return store.ErrNotFound
		case v == nil:
			// Never stored here: reserve the number and the digest.
			f, err := bd.codec.Decode(n)
			if err != nil {
				return fmt.Errorf("%w: call number %v does not decode under the store's authority: %w", store.ErrInvalidMessage, n, err)
			}
			if tx.Bucket(bucketRuns).Get(runKey(f.Run)) == nil {
				return fmt.Errorf("%w: run %d of %v", store.ErrUnknownRun, f.Run, n)
			}
			digests := tx.Bucket(bucketDigests)
			if other := digests.Get(want.Digest[:]); other != nil && !bytes.Equal(other, key[:]) {
				return record.DigestElsewhere(want.Digest, bd.codec.Number(binary.BigEndian.Uint64(other)), n)
			}
			if err := digests.Put(want.Digest[:], key[:]); err != nil {
				return err
			}
			r = record.Reservation(want)
			if err := putContent(digests, r.Content, key); err != nil {
				return err
			}
		default:
			m, err := s.decode(tx, v)
			if err != nil {
				return fmt.Errorf("cannot read it: %w", err)
			}
			if r, err = record.NewRemoval(m, want, given, time.Now()); err != nil {
				return err
			}
			if err := putContent(tx.Bucket(bucketDigests), r.Content, key); err != nil {
				return err
			}
			if err := messages.Delete(key[:]); err != nil {
				return err
			}
			if m.MessageID != "" {
				if err := tx.Bucket(bucketMsgIDs).Delete(msgIDKey(m.MessageID, key[:])); err != nil {
					return err
				}
			}
		}
		rb, err := tx.CreateBucketIfNotExists(bucketRemoved)
		if err != nil {
			return err
		}
		if err := rb.Put(key[:], record.MarshalRemoval(r)); err != nil {
			return err
		}
		changes := tx.Bucket(bucketChanges)
		changes.FillPercent = appendFill
		seq, err := changes.NextSequence()
		if err != nil {
			return err
		}
		if err := changes.Put(seqKey(seq), append(key[:], removalTag)); err != nil {
			return err
		}
		meta := tx.Bucket(bucketMeta)
		if v != nil { // a message counted out
			c := meta.Get(keyCount)
			if len(c) != 8 || binary.BigEndian.Uint64(c) == 0 {
				return fmt.Errorf("%w: message count of %d bytes", ErrFormat, len(c))
			}
			if err := meta.Put(keyCount, binary.BigEndian.AppendUint64(nil, binary.BigEndian.Uint64(c)-1)); err != nil {
				return err
			}
		}
		return raiseFormat(tx, formatRemovals)
	})
	return r, err
}

// Removals implements store.Store, by time, then call number.
func (s *Store) Removals(ctx context.Context) ([]store.Removal, error) {
	out := []store.Removal{}
	err := s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil || bd == nil {
			return err
		}
		b := tx.Bucket(bucketRemoved)
		if b == nil {
			return nil
		}
		return b.ForEach(func(k, v []byte) error {
			if len(k) != 8 {
				return fmt.Errorf("%w: removal key of %d bytes", ErrFormat, len(k))
			}
			r, err := record.UnmarshalRemoval(bd.codec.Number(binary.BigEndian.Uint64(k)), v)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cannot list the removals of %s: %w", s.path, err)
	}
	slices.SortStableFunc(out, func(a, b store.Removal) int {
		if c := a.Removed.Compare(b.Removed); c != 0 {
			return c
		}
		return int(int64(a.Number) - int64(b.Number))
	})
	return out, nil
}
