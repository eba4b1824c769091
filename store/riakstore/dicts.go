package riakstore

// Compression dictionaries (store/internal/compress) live in ARCHIVE.dicts
// of the kv type: each under its ID in hex, and under "current" the
// current one's record.Current (JSON).
//
// A dictionary is immutable, written with if_none_match. On the kv type
// that is a read then a write, so two writers may both write one; the
// siblings are the same bytes, and a reader takes the one matching the
// ID.
//
// "current" is a kv key, not a consistent one, because every writer reads
// it often and a consensus group without a leader would stop every Put.
// Siblings from two trainings resolve to the one trained last; any winner
// will do, since every dictionary stays readable.

import (
	"bytes"
	"context"
	"fmt"
	"strings"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
	"github.com/chibrary/chibrary/store/internal/record"
)

const currentDictKey = "current"

// decoder returns the function that decodes this store's records, reading
// dictionaries it has not cached with ctx.
func (s *Store) decoder(ctx context.Context) decodeFunc {
	load := func(id record.DictID) ([]byte, error) { return s.loadDict(ctx, id) }
	return func(rec []byte) (record.Message, error) { return s.comp.Decode(rec, load) }
}

// loadDict reads dictionary id. Of siblings, the one whose bytes match
// the ID is taken; if none does, the first, which the Compressor refuses
// as damaged.
func (s *Store) loadDict(ctx context.Context, id record.DictID) ([]byte, error) {
	f, err := s.fetch(ctx, s.b.types.KV, s.b.dicts, id.String(), sure)
	if err != nil {
		return nil, err
	}
	if !f.found() {
		return nil, fmt.Errorf("%w: no dictionary %v in %s/%s", store.ErrNotFound, id, s.b.types.KV, s.b.dicts)
	}
	for _, v := range f.values {
		if record.IDOf(v.Value) == id {
			return v.Value, nil
		}
	}
	return f.values[0].Value, nil
}

// riakDicts keeps a Riak archive's dictionaries for its Compressor.
type riakDicts struct{ s *Store }

var _ compress.Dictionaries = riakDicts{}

func (d riakDicts) LoadDict(ctx context.Context, id record.DictID) ([]byte, error) {
	return d.s.loadDict(ctx, id)
}

func (d riakDicts) SaveDict(ctx context.Context, id record.DictID, b []byte) error {
	s := d.s
	key := id.String()
	for range 3 {
		f, err := s.fetch(ctx, s.b.types.KV, s.b.dicts, key, sure)
		if err != nil {
			return err
		}
		if f.found() {
			for _, v := range f.values {
				if bytes.Equal(v.Value, b) {
					return nil
				}
			}
			return fmt.Errorf("%w: another dictionary is stored under ID %v", record.ErrCorrupt, id)
		}
		_, err = s.do(ctx, func() (riak.Command, error) {
			return riak.NewStoreValueCommandBuilder().
				WithBucketType(s.b.types.KV).WithBucket(s.b.dicts).WithKey(key).
				WithContent(&riak.Object{ContentType: "application/octet-stream", Value: b}).
				WithIfNoneMatch(true).WithTimeout(s.opts.Timeout).Build()
		})
		if err == nil {
			s.written.Add(int64(len(b)))
			return nil
		}
		if re, ok := riakconn.RiakError(err); !ok || !strings.Contains(re.Errmsg, "match_found") {
			return fmt.Errorf("cannot store dictionary %v: %w", id, err)
		}
		// Written meanwhile: read what is there.
	}
	return fmt.Errorf("cannot store dictionary %v: it keeps being written and not found", id)
}

func (d riakDicts) CurrentDict(ctx context.Context) (record.Current, bool, error) {
	s := d.s
	f, err := s.fetch(ctx, s.b.types.KV, s.b.dicts, currentDictKey, sure)
	if err != nil || !f.found() {
		return record.Current{}, false, err
	}
	return latestCurrent(f.values)
}

// latestCurrent resolves the siblings of the current dictionary's key:
// the one trained last wins, ties going to the greater ID so that every
// reader picks the same.
func latestCurrent(values []*riak.Object) (record.Current, bool, error) {
	var best record.Current
	found := false
	for _, v := range values {
		c, err := record.UnmarshalCurrent(v.Value)
		if err != nil {
			return record.Current{}, false, err
		}
		if !found || c.Trained.After(best.Trained) || c.Trained.Equal(best.Trained) && bytes.Compare(c.ID[:], best.ID[:]) > 0 {
			best, found = c, true
		}
	}
	return best, found, nil
}

func (d riakDicts) SetCurrentDict(ctx context.Context, c record.Current) error {
	s := d.s
	f, err := s.fetch(ctx, s.b.types.KV, s.b.dicts, c.ID.String(), sure)
	if err != nil {
		return err
	}
	if !f.found() {
		return fmt.Errorf("%w: dictionary %v is not saved", store.ErrNotFound, c.ID)
	}
	cur, err := s.fetch(ctx, s.b.types.KV, s.b.dicts, currentDictKey, sure)
	if err != nil {
		return err
	}
	// With the causal context read, c replaces what this writer saw and
	// goes in beside what another wrote meanwhile.
	obj := &riak.Object{ContentType: "application/json", Value: record.MarshalCurrent(c)}
	return s.put(ctx, s.b.types.KV, s.b.dicts, currentDictKey, obj, cur.vclock)
}

// Sample reads the newest messages, walking the ledger backwards from its
// end.
func (d riakDicts) Sample(ctx context.Context, n int, maxBytes int64) ([][]byte, error) {
	s := d.s
	bd, err := s.binding(ctx)
	if err != nil || bd == nil {
		return nil, err
	}
	s.ledger.mu.Lock()
	from := s.ledger.end
	s.ledger.mu.Unlock()
	last, err := s.lastSlot(ctx, from)
	if err != nil {
		return nil, fmt.Errorf("cannot find the end of the ledger: %w", err)
	}
	const chunk = 256
	var (
		out  [][]byte
		size int64
		next []callnumber.Number
	)
	slot := last
	for len(out) < n && size < maxBytes && (slot > 0 || len(next) > 0) {
		for slot > 0 && len(next) < chunk {
			e, err := s.entry(ctx, slot)
			if err != nil {
				return nil, err
			}
			if e == nil {
				return nil, fmt.Errorf("ledger slot %d not found below the end %d", slot, last)
			}
			for i := len(e.items) - 1; i >= 0; i-- {
				next = append(next, e.items[i].number)
			}
			slot--
		}
		numbers := next[:min(chunk, len(next))]
		next = next[len(numbers):]
		got, _, err := s.readMessages(ctx, bd.codec, numbers)
		if err != nil {
			return nil, err
		}
		for _, num := range numbers {
			m, ok := got[num]
			if !ok || len(m.Raw) > record.MaxSample {
				continue // not stored (its writer died), removed, or too large to learn from
			}
			if len(out) >= n || size >= maxBytes {
				break
			}
			out = append(out, m.Raw)
			size += int64(len(m.Raw))
		}
	}
	return out, nil
}
