package boltstore

// Compression dictionaries (store/internal/compress): the dicts bucket and
// meta "dict" are created by the first training.

import (
	"bytes"
	"context"
	"encoding/binary"
	"fmt"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

// decode decodes a messages bucket value read in tx (a record or a
// locator), reading a dictionary it needs in tx too. Raw may alias v.
func (s *Store) decode(tx *bolt.Tx, v []byte) (record.Message, error) {
	if isLocator(v) {
		var err error
		if v, err = s.readRecord(tx, v); err != nil {
			return record.Message{}, err
		}
	}
	return s.comp.Decode(v, func(id record.DictID) ([]byte, error) { return loadDict(tx, id) })
}

// readRecord reads the record a locator read in tx names.
func (s *Store) readRecord(tx *bolt.Tx, v []byte) ([]byte, error) {
	l, err := parseLocator(v)
	if err != nil {
		return nil, err
	}
	return s.packs.read(tx, l)
}

func loadDict(tx *bolt.Tx, id record.DictID) ([]byte, error) {
	var v []byte
	if b := tx.Bucket(bucketDicts); b != nil {
		v = b.Get(id[:])
	}
	if v == nil {
		return nil, fmt.Errorf("%w: no dictionary %v in %s", store.ErrNotFound, id, tx.DB().Path())
	}
	return bytes.Clone(v), nil
}

// dicts keeps a bolt store's dictionaries for its Compressor.
type dicts struct{ s *Store }

var _ compress.Dictionaries = dicts{}

func (d dicts) LoadDict(ctx context.Context, id record.DictID) ([]byte, error) {
	var b []byte
	err := d.s.view(ctx, func(tx *bolt.Tx) (err error) {
		b, err = loadDict(tx, id)
		return err
	})
	return b, err
}

func (d dicts) SaveDict(ctx context.Context, id record.DictID, b []byte) error {
	return d.s.update(ctx, func(tx *bolt.Tx) error {
		bk, err := tx.CreateBucketIfNotExists(bucketDicts)
		if err != nil {
			return err
		}
		if old := bk.Get(id[:]); old != nil {
			// Stored already, perhaps in another form: the ID says it is the same.
			if _, err := record.CheckDictionary(id, old); err != nil {
				return fmt.Errorf("cannot save dictionary %v: one is stored under its ID already, and does not check: %w", id, err)
			}
			return nil
		}
		return bk.Put(id[:], b)
	})
}

func (d dicts) CurrentDict(ctx context.Context) (record.Current, bool, error) {
	var (
		c  record.Current
		ok bool
	)
	err := d.s.view(ctx, func(tx *bolt.Tx) (err error) {
		c, ok, err = currentDict(tx)
		return err
	})
	return c, ok, err
}

func currentDict(tx *bolt.Tx) (record.Current, bool, error) {
	v := tx.Bucket(bucketMeta).Get(keyDict)
	if v == nil {
		return record.Current{}, false, nil
	}
	c, err := record.UnmarshalCurrent(v)
	return c, err == nil, err
}

func (d dicts) SetCurrentDict(ctx context.Context, c record.Current) error {
	return d.s.update(ctx, func(tx *bolt.Tx) error {
		if b := tx.Bucket(bucketDicts); b == nil || b.Get(c.ID[:]) == nil {
			return fmt.Errorf("%w: dictionary %v is not saved", store.ErrNotFound, c.ID)
		}
		return tx.Bucket(bucketMeta).Put(keyDict, record.MarshalCurrent(c))
	})
}

// Sample reads the newest messages from the end of the change feed (of
// the messages bucket in a format 1 file, which has none).
func (d dicts) Sample(ctx context.Context, n int, maxBytes int64) ([][]byte, error) {
	var out [][]byte
	err := d.s.view(ctx, func(tx *bolt.Tx) error {
		messages := tx.Bucket(bucketMessages)
		var c *bolt.Cursor
		feed := tx.Bucket(bucketChanges) != nil
		if feed {
			c = tx.Bucket(bucketChanges).Cursor()
		} else {
			c = messages.Cursor()
		}
		var size int64
		for k, v := c.Last(); k != nil && len(out) < n && size < maxBytes; k, v = c.Prev() {
			if err := ctx.Err(); err != nil {
				return err
			}
			if feed {
				if isRemovalEntry(v) || isMoveEntry(v) {
					continue
				}
				if len(v) != 8 {
					return fmt.Errorf("%w: change feed entry %d of %d bytes", ErrFormat, binary.BigEndian.Uint64(k), len(v))
				}
				if v = messages.Get(v); v == nil {
					continue
				}
			}
			m, err := d.s.decode(tx, v)
			if err != nil {
				return err
			}
			if len(m.Raw) > record.MaxSample {
				continue
			}
			out = append(out, bytes.Clone(m.Raw))
			size += int64(len(m.Raw))
		}
		return nil
	})
	if err != nil {
		return nil, fmt.Errorf("cannot sample messages of %s: %w", d.s.path, err)
	}
	return out, nil
}
