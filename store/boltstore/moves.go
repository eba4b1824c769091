package boltstore

// Moves (store.Store.Move). A move, in one write transaction, records the
// message's new list in the moves bucket (its record keeps the list it was
// stored with: records are written once) and appends the move to the
// change feed: the key, the byte 'm', the time in Unix nanoseconds (8
// bytes) and the list, so that a follower sees every move in turn.

import (
	"context"
	"encoding/binary"
	"fmt"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// bucketMoves holds the latest move of each moved message under its
// packed number (value: record.MarshalMove). The first move creates it and
// sets formatMoves.
var bucketMoves = []byte("moves")

// moveTag follows the key in a change feed entry that is a move.
const moveTag = 'm'

func isMoveEntry(v []byte) bool { return len(v) > 17 && v[8] == moveTag }

func moveEntry(key [8]byte, m store.Move) []byte {
	v := append(key[:], moveTag)
	v = binary.BigEndian.AppendUint64(v, uint64(m.Moved.UnixNano()))
	return append(v, m.List...)
}

func decodeMoveEntry(codec *callnumber.Codec, v []byte) (store.Move, error) {
	m := store.Move{
		Number: codec.Number(binary.BigEndian.Uint64(v[:8])),
		Moved:  time.Unix(0, int64(binary.BigEndian.Uint64(v[9:17]))).UTC(),
		List:   string(v[17:]),
	}
	if err := store.CheckList(m.List); err != nil {
		return store.Move{}, fmt.Errorf("%w: a move of %v to %q", ErrFormat, m.Number, m.List)
	}
	return m, nil
}

// moveOf returns the latest move of n (key key) read in tx, or nil.
func moveOf(tx *bolt.Tx, n callnumber.Number, key [8]byte) (*store.Move, error) {
	b := tx.Bucket(bucketMoves)
	if b == nil {
		return nil, nil
	}
	v := b.Get(key[:])
	if v == nil {
		return nil, nil
	}
	m, _, err := record.UnmarshalMove(n, v)
	if err != nil {
		return nil, err
	}
	return &m, nil
}

// Move implements store.Store.
func (s *Store) Move(ctx context.Context, n callnumber.Number, list string) (store.Move, error) {
	m, err := s.move(ctx, store.Move{Number: n, List: list}, false)
	if err != nil {
		return store.Move{}, fmt.Errorf("cannot move message %v in %s: %w", n, s.path, err)
	}
	return m, nil
}

// RecordMove implements store.Store.
func (s *Store) RecordMove(ctx context.Context, m store.Move) (store.Move, error) {
	got, err := s.move(ctx, m, true)
	if err != nil {
		return store.Move{}, fmt.Errorf("cannot record the move of message %v in %s: %w", m.Number, s.path, err)
	}
	return got, nil
}

// move moves want.Number to want.List: at want.Moved if given
// (RecordMove), else now (Move).
func (s *Store) move(ctx context.Context, want store.Move, given bool) (store.Move, error) {
	n := want.Number
	if err := record.CheckMove(want, given); err != nil {
		return store.Move{}, err
	}
	if err := s.h.check(); err != nil {
		return store.Move{}, err
	}
	var out store.Move
	err := s.update(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if bd == nil || uint64(n)>>callnumber.Bits != 0 {
			return store.ErrNotFound
		}
		key := packedKey(bd.codec.Packed(n))
		if r, err := removalOf(tx, n, key); err != nil || r != nil {
			if err == nil {
				err = &store.RemovedError{Removal: *r}
			}
			return err
		}
		cur := store.Move{Number: n}
		v := tx.Bucket(bucketMessages).Get(key[:])
		switch {
		case v == nil && !given:
			return store.ErrNotFound
		case v == nil:
			f, err := bd.codec.Decode(n)
			if err != nil {
				return fmt.Errorf("%w: call number %v does not decode under the store's authority: %w", store.ErrInvalidMessage, n, err)
			}
			if tx.Bucket(bucketRuns).Get(runKey(f.Run)) == nil {
				return fmt.Errorf("%w: run %d of %v", store.ErrUnknownRun, f.Run, n)
			}
		default:
			m, err := s.decode(tx, v)
			if err != nil {
				return fmt.Errorf("cannot read it: %w", err)
			}
			cur.List = m.List
		}
		if mv, err := moveOf(tx, n, key); err != nil {
			return err
		} else if mv != nil {
			cur = *mv
		}
		if cur.List == want.List {
			out = cur
			return nil // there already: nothing to write
		}
		out = record.NewMove(want, given, time.Now())
		mb, err := tx.CreateBucketIfNotExists(bucketMoves)
		if err != nil {
			return err
		}
		if err := mb.Put(key[:], record.MarshalMove(out, 0)); err != nil {
			return err
		}
		changes := tx.Bucket(bucketChanges)
		changes.FillPercent = appendFill
		seq, err := changes.NextSequence()
		if err != nil {
			return err
		}
		if err := changes.Put(seqKey(seq), moveEntry(key, out)); err != nil {
			return err
		}
		return raiseFormat(tx, formatMoves)
	})
	return out, err
}
