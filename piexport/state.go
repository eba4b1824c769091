package piexport

import (
	"encoding/binary"
	"errors"
	"fmt"
	"strconv"
	"time"

	bolt "go.etcd.io/bbolt"
)

// stateFile is the name of a list's state in its inbox directory: what
// the export wrote there, so that a run again writes only what is new.
// public-inbox's tools leave files they do not know alone.
const stateFile = "chibrary-export.db"

// The state's buckets.
var (
	// metaBucket: "validity" (the catalog's UIDVALIDITY the numbers are
	// of), "last" (the highest list number exported), "epoch" (the
	// newest epoch), "bytes" (message bytes written to it) and "head/N"
	// (the commit epoch N's branch was at when the state was written).
	metaBucket = []byte("meta")
	// numsBucket: the messages in the inbox now, by list number
	// (4 bytes, big-endian): a record.
	numsBucket = []byte("nums")
	// midsBucket: the Message-ID public-inbox indexes each message of
	// the inbox under, to its list number.
	midsBucket = []byte("mids")
)

// record is an exported message that is in the inbox.
type record struct {
	CallNumber string // 8 characters
	Epoch      int
	Blob       string // the git object name of its blob m, 40 hex digits
	MID        string // the Message-ID public-inbox indexes it under
}

func (r record) encode() []byte {
	b := make([]byte, 0, 8+4+40+len(r.MID))
	b = append(b, r.CallNumber...)
	b = binary.BigEndian.AppendUint32(b, uint32(r.Epoch))
	b = append(b, r.Blob...)
	return append(b, r.MID...)
}

func decodeRecord(b []byte) (record, error) {
	if len(b) < 52 {
		return record{}, fmt.Errorf("%w: a record of %d bytes", ErrState, len(b))
	}
	return record{CallNumber: string(b[:8]), Epoch: int(binary.BigEndian.Uint32(b[8:12])), Blob: string(b[12:52]), MID: string(b[52:])}, nil
}

// ErrState: a list's state file cannot be read.
var ErrState = errors.New("piexport: damaged state file")

func numKey(n uint32) []byte { return binary.BigEndian.AppendUint32(nil, n) }

// meta is the state's metaBucket, read.
type meta struct {
	Validity uint32
	Last     uint32
	Epoch    int
	Bytes    int64
	Heads    map[int]string
}

func readMeta(tx *bolt.Tx) meta {
	m := meta{Heads: map[int]string{}}
	b := tx.Bucket(metaBucket)
	u64 := func(k string) uint64 {
		v := b.Get([]byte(k))
		if len(v) != 8 {
			return 0
		}
		return binary.BigEndian.Uint64(v)
	}
	m.Validity = uint32(u64("validity"))
	m.Last = uint32(u64("last"))
	m.Epoch = int(u64("epoch"))
	m.Bytes = int64(u64("bytes"))
	c := b.Cursor()
	prefix := []byte("head/")
	for k, v := c.Seek(prefix); k != nil && len(k) > len(prefix) && string(k[:len(prefix)]) == string(prefix); k, v = c.Next() {
		if n, err := strconv.Atoi(string(k[len(prefix):])); err == nil {
			m.Heads[n] = string(v)
		}
	}
	return m
}

func writeMeta(tx *bolt.Tx, m meta) error {
	b := tx.Bucket(metaBucket)
	for k, v := range map[string]uint64{"validity": uint64(m.Validity), "last": uint64(m.Last), "epoch": uint64(m.Epoch), "bytes": uint64(m.Bytes)} {
		if err := b.Put([]byte(k), binary.BigEndian.AppendUint64(nil, v)); err != nil {
			return err
		}
	}
	for n, h := range m.Heads {
		if err := b.Put([]byte("head/"+strconv.Itoa(n)), []byte(h)); err != nil {
			return err
		}
	}
	return nil
}

func openState(path string) (*bolt.DB, error) {
	db, err := bolt.Open(path, 0o644, &bolt.Options{Timeout: 5 * time.Second})
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		for _, b := range [][]byte{metaBucket, numsBucket, midsBucket} {
			if _, err := tx.CreateBucketIfNotExists(b); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	return db, nil
}
