package boltstore

// The change feed (store.Store.Changes).
//
// Every commit that writes messages appends one entry per message to the
// changes bucket, under the bucket's next sequence number. bbolt has one
// writer at a time and readers see only committed states, so sequence
// numbers follow commit order and no reader sees entry N+1 without entry N:
// a follower resuming after the last sequence it saw misses nothing. Cursors
// are "s" and the decimal sequence number of the last entry seen.
//
// A format 1 file, until a writable open backfills its feed in key order,
// serves the feed from the messages bucket in key order, with cursors "k"
// and the hex packed number last seen. Such a cursor still works after the
// upgrade: the backfilled entries are in key order too.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"
	"strconv"
	"strings"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// Bounds of one page of the feed.
const (
	// defaultPageMessages is the page size when Changes is given max <= 0.
	defaultPageMessages = 100
	// maxPageBytes stops a page early once its messages add up to this
	// many bytes; a page holds at least one message.
	maxPageBytes = 16 << 20
)

// appendChange adds the message under key to the feed.
func appendChange(changes *bolt.Bucket, key [8]byte) error {
	seq, err := changes.NextSequence()
	if err != nil {
		return err
	}
	return changes.Put(seqKey(seq), key[:])
}

func seqKey(seq uint64) []byte { return binary.BigEndian.AppendUint64(nil, seq) }

// upgrade brings an older file to format 3 (see upgradeTx).
func (s *Store) upgrade(ctx context.Context) error {
	var (
		n    uint64
		from int
	)
	err := s.update(ctx, func(tx *bolt.Tx) (err error) {
		if from, err = checkFormat(tx); err != nil || from >= 3 {
			return err // upgraded by another process meanwhile
		}
		n = uint64(tx.Bucket(bucketMessages).Stats().KeyN)
		return upgradeTx(tx, from)
	})
	if err != nil {
		return fmt.Errorf("cannot upgrade %s to %s: %w", s.path, format, err)
	}
	if from >= 3 {
		return nil
	}
	s.log.Info("upgraded the message store: new records go to packs"+map[bool]string{true: ", and a change feed was added", false: ""}[from == 1],
		"from", fmt.Sprintf("chibrary-messages/%d", from), "to", format, "messages", n)
	return nil
}

// upgradeTx brings a file of format version from to format 3: a format 1
// file gets the backfilled changes bucket, a format 2 file the packs
// bucket. Records stay where they are.
func upgradeTx(tx *bolt.Tx, from int) error {
	if from == 1 {
		if err := addChanges(tx); err != nil {
			return err
		}
	}
	if _, err := tx.CreateBucketIfNotExists(bucketPacks); err != nil {
		return fmt.Errorf("cannot create bucket %s: %w", bucketPacks, err)
	}
	return tx.Bucket(bucketMeta).Put(keyFormat, []byte(format))
}

// addChanges adds the changes bucket to a format 1 file, backfilled in key order.
func addChanges(tx *bolt.Tx) error {
	changes, err := tx.CreateBucket(bucketChanges)
	if err != nil {
		return fmt.Errorf("cannot create bucket %s: %w", bucketChanges, err)
	}
	changes.FillPercent = appendFill
	c := tx.Bucket(bucketMessages).Cursor()
	for k, _ := c.First(); k != nil; k, _ = c.Next() {
		if len(k) != 8 {
			return fmt.Errorf("%w: message key of %d bytes", ErrFormat, len(k))
		}
		if err := appendChange(changes, [8]byte(k)); err != nil {
			return err
		}
	}
	return tx.Bucket(bucketMeta).Put(keyBackfilled, seqKey(changes.Sequence()))
}

// cursor is a parsed store.Cursor.
type cursor struct {
	legacy bool   // a "k" cursor: key order of a format 1 file
	seq    uint64 // the last sequence number seen (not legacy)
	packed uint64 // the last packed number seen (legacy)
}

func parseCursor(c store.Cursor) (cursor, error) {
	s := string(c)
	if s == "" {
		return cursor{}, nil
	}
	bad := fmt.Errorf("%w: %q (this bolt store's cursors are s followed by a decimal number)", store.ErrBadCursor, s)
	switch {
	case strings.HasPrefix(s, "s"):
		seq, err := strconv.ParseUint(s[1:], 10, 64)
		if err != nil || s[1:] != strconv.FormatUint(seq, 10) {
			return cursor{}, bad
		}
		return cursor{seq: seq}, nil
	case strings.HasPrefix(s, "k") && len(s) == 17:
		v, err := strconv.ParseUint(s[1:], 16, 64)
		if err != nil {
			return cursor{}, bad
		}
		return cursor{legacy: true, packed: v}, nil
	}
	return cursor{}, bad
}

func (c cursor) String() store.Cursor {
	if c.legacy {
		return store.Cursor(fmt.Sprintf("k%016x", c.packed))
	}
	if c.seq == 0 {
		return ""
	}
	return store.Cursor("s" + strconv.FormatUint(c.seq, 10))
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	cur, err := parseCursor(after)
	if err != nil {
		return store.ChangePage{}, err
	}
	if max <= 0 {
		max = defaultPageMessages
	}
	var page store.ChangePage
	err = s.view(ctx, func(tx *bolt.Tx) error {
		bd, err := s.binding(tx)
		if err != nil {
			return err
		}
		if bd == nil {
			page = store.ChangePage{Next: after, Messages: []store.Stored{}}
			return nil // nothing was ever stored
		}
		if tx.Bucket(bucketChanges) == nil {
			page, err = s.legacyPage(tx, bd.codec, cur, max)
			return err
		}
		if cur.legacy {
			if cur, err = translate(tx, cur); err != nil {
				return err
			}
		}
		page, err = s.feedPage(tx, bd.codec, cur, max)
		return err
	})
	if err != nil {
		return store.ChangePage{}, fmt.Errorf("cannot read the change feed of %s after %q: %w", s.path, after, err)
	}
	return page, nil
}

// feedPage reads up to max entries of the changes bucket after cur.
func (s *Store) feedPage(tx *bolt.Tx, codec *callnumber.Codec, cur cursor, max int) (store.ChangePage, error) {
	messages := tx.Bucket(bucketMessages)
	page := store.ChangePage{Messages: []store.Stored{}}
	size := 0
	c := tx.Bucket(bucketChanges).Cursor()
	for k, v := c.Seek(seqKey(cur.seq + 1)); k != nil && page.Len() < max && size < maxPageBytes; k, v = c.Next() {
		if len(k) != 8 || len(v) != 8 && !isRemovalEntry(v) && !isMoveEntry(v) {
			return store.ChangePage{}, fmt.Errorf("%w: change feed entry of %d+%d bytes", ErrFormat, len(k), len(v))
		}
		cur.seq = binary.BigEndian.Uint64(k)
		if isMoveEntry(v) {
			m, err := decodeMoveEntry(codec, v)
			if err != nil {
				return store.ChangePage{}, fmt.Errorf("change feed entry %d: %w", cur.seq, err)
			}
			page.Moves = append(page.Moves, m)
			continue
		}
		if isRemovalEntry(v) {
			key := [8]byte(v)
			r, err := removalOf(tx, codec.Number(binary.BigEndian.Uint64(key[:])), key)
			if err == nil && r == nil {
				err = fmt.Errorf("%w: the feed names a removal of %v that is not recorded", ErrFormat, codec.Number(binary.BigEndian.Uint64(key[:])))
			}
			if err != nil {
				return store.ChangePage{}, fmt.Errorf("change feed entry %d: %w", cur.seq, err)
			}
			page.Removals = append(page.Removals, *r)
			continue
		}
		if messages.Get(v) == nil && removed(tx, v) {
			continue // its removal is further on in the feed
		}
		m, err := s.storedAt(tx, messages, codec, v)
		if err != nil {
			return store.ChangePage{}, fmt.Errorf("change feed entry %d: %w", cur.seq, err)
		}
		page.Messages = append(page.Messages, m)
		size += len(m.Raw)
	}
	page.Next = cur.String()
	return page, nil
}

// legacyPage reads a format 1 file's messages in key order after cur.
func (s *Store) legacyPage(tx *bolt.Tx, codec *callnumber.Codec, cur cursor, max int) (store.ChangePage, error) {
	if !cur.legacy && cur.seq != 0 {
		return store.ChangePage{}, fmt.Errorf("%w: cursor %q is of a change feed this %s file does not have yet", store.ErrBadCursor, cur.String(), formatV1)
	}
	page := store.ChangePage{Messages: []store.Stored{}}
	size := 0
	c := tx.Bucket(bucketMessages).Cursor()
	var k, v []byte
	if cur.legacy {
		start := packedKey(cur.packed)
		k, v = c.Seek(start[:])
		if k != nil && bytes.Equal(k, start[:]) {
			k, v = c.Next()
		}
	} else {
		k, v = c.First()
	}
	for ; k != nil && len(page.Messages) < max && size < maxPageBytes; k, v = c.Next() {
		if len(k) != 8 {
			return store.ChangePage{}, fmt.Errorf("%w: message key of %d bytes", ErrFormat, len(k))
		}
		n := codec.Number(binary.BigEndian.Uint64(k))
		rec, err := s.decode(tx, v)
		if err != nil {
			return store.ChangePage{}, fmt.Errorf("cannot read message %v: %w", n, err)
		}
		page.Messages = append(page.Messages, rec.Stored(n))
		size += len(rec.Raw)
		cur = cursor{legacy: true, packed: binary.BigEndian.Uint64(k)}
	}
	page.Next = cur.String()
	return page, nil
}

// translate turns a format 1 key-order cursor into the sequence number of
// the last backfilled entry whose packed number is at most the cursor's.
func translate(tx *bolt.Tx, cur cursor) (cursor, error) {
	b := tx.Bucket(bucketMeta).Get(keyBackfilled)
	if len(b) != 8 {
		return cursor{}, fmt.Errorf("%w: cursor %q is of a %s file, and this one was created as %s", store.ErrBadCursor, cur.String(), formatV1, format)
	}
	changes := tx.Bucket(bucketChanges)
	// The first sequence in [1, n+1) whose packed number exceeds the
	// cursor's; the follower stands at the one before.
	lo, hi := uint64(1), binary.BigEndian.Uint64(b)+1
	for lo < hi {
		mid := lo + (hi-lo)/2
		v := changes.Get(seqKey(mid))
		if len(v) != 8 {
			return cursor{}, fmt.Errorf("%w: backfilled change feed entry %d missing", ErrFormat, mid)
		}
		if binary.BigEndian.Uint64(v) <= cur.packed {
			lo = mid + 1
		} else {
			hi = mid
		}
	}
	return cursor{seq: lo - 1}, nil
}

func (s *Store) storedAt(tx *bolt.Tx, messages *bolt.Bucket, codec *callnumber.Codec, key []byte) (store.Stored, error) {
	n := codec.Number(binary.BigEndian.Uint64(key))
	v := messages.Get(key)
	if v == nil {
		return store.Stored{}, fmt.Errorf("%w: the feed names message %v, which is not stored", ErrFormat, n)
	}
	rec, err := s.decode(tx, v)
	if err != nil {
		return store.Stored{}, fmt.Errorf("cannot read message %v: %w", n, err)
	}
	return rec.Stored(n), nil
}
