package riakstore

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"sync"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// largeRecord reads and decodes a large message's record.
func (s *Store) largeRecord(ctx context.Context, n callnumber.Number, decode decodeFunc) (record.Message, bool, error) {
	f, err := s.fetch(ctx, s.b.types.KV, s.b.large, n.String(), sure)
	if err != nil || !f.found() {
		return record.Message{}, false, err
	}
	var first record.Message
	for i, v := range f.values {
		rec, err := decodeLarge(v.Value)
		var m record.Message
		if err == nil {
			m, err = decode(rec)
		}
		if err != nil {
			return record.Message{}, false, fmt.Errorf("message %v: %w", n, err)
		}
		if i == 0 {
			first = m
		} else if !bytes.Equal(m.Raw, first.Raw) {
			return record.Message{}, false, fmt.Errorf("message %v: %w: %d copies with different bytes", n, errConflict, len(f.values))
		}
	}
	return first, true, nil
}

// entryMessage decodes the message of pack entry e, numbered n.
func (s *Store) entryMessage(ctx context.Context, n callnumber.Number, e packEntry, decode decodeFunc) (record.Message, error) {
	if !e.large {
		m, err := decode(e.rec)
		if err != nil {
			return record.Message{}, fmt.Errorf("message %v: %w", n, err)
		}
		return m, nil
	}
	stub, err := record.DecodeMessage(e.rec)
	if err != nil {
		return record.Message{}, fmt.Errorf("message %v: the stub in its pack: %w", n, err)
	}
	big, ok, err := s.largeRecord(ctx, n, decode)
	if err == nil && !ok {
		err = fmt.Errorf("%w: the pack of %v holds a stub of a large message whose bytes are missing", record.ErrCorrupt, n)
	}
	if err != nil {
		return record.Message{}, err
	}
	if big.Digest != stub.Digest {
		return record.Message{}, fmt.Errorf("%w: message %v: its pack says digest %.16s…, its object holds digest %.16s…", record.ErrCorrupt, n, stub.Digest, big.Digest)
	}
	big.Added = stub.Added // when it was first stored
	return big, nil
}

// readMessages reads the messages stored under numbers and the removal
// records of those removed; other numbers are left out. A pack found
// without a number it should hold is read again from every replica, in
// case one was behind.
func (s *Store) readMessages(ctx context.Context, codec *callnumber.Codec, numbers []callnumber.Number) (map[callnumber.Number]store.Stored, map[callnumber.Number]store.Removal, error) {
	type want struct {
		n callnumber.Number
		f callnumber.Fields
	}
	byPack := make(map[string][]want)
	var keys []string
	for _, n := range numbers {
		f, err := codec.Decode(n)
		if err != nil {
			continue // not a number of this archive: not stored
		}
		k := packKey(f)
		if byPack[k] == nil {
			keys = append(keys, k)
		}
		byPack[k] = append(byPack[k], want{n, f})
	}
	out := make(map[callnumber.Number]store.Stored, len(numbers))
	removed := make(map[callnumber.Number]store.Removal)
	var mu sync.Mutex
	decode := s.decoder(ctx)
	err := parallel(ctx, len(keys), s.opts.Parallel, func(ctx context.Context, j int) error {
		k := keys[j]
		var p pack
		for _, mode := range []readMode{sure, all} {
			f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, k, mode)
			if err != nil {
				return err
			}
			if !f.found() {
				return nil
			}
			if p, err = mergePack(f.values, decode); err != nil {
				return fmt.Errorf("pack %s: %w", k, err)
			}
			complete := true
			for _, w := range byPack[k] {
				if _, ok := p.entries[w.f.Sequence]; !ok {
					complete = false
				}
			}
			if complete {
				break
			}
		}
		for _, w := range byPack[k] {
			e, ok := p.entries[w.f.Sequence]
			if !ok {
				continue
			}
			if e.removed {
				r, err := record.UnmarshalRemoval(w.n, e.rec)
				if err != nil {
					return fmt.Errorf("pack %s: %w", k, err)
				}
				mu.Lock()
				removed[w.n] = r
				mu.Unlock()
				continue
			}
			m, err := s.entryMessage(ctx, w.n, e, decode)
			if err != nil {
				return err
			}
			st := m.Stored(w.n)
			mu.Lock()
			out[w.n] = st
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, nil, err
	}
	return out, removed, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	if err := s.begin(); err != nil {
		return store.Stored{}, err
	}
	defer s.end()
	m, err := s.get(ctx, n)
	if err != nil {
		return store.Stored{}, fmt.Errorf("cannot get message %v: %w", n, err)
	}
	return m, nil
}

func (s *Store) get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	bd, err := s.binding(ctx)
	if err != nil {
		return store.Stored{}, err
	}
	if bd == nil {
		return store.Stored{}, store.ErrNotFound
	}
	var (
		mv    *store.Move
		mvErr error
		wg    sync.WaitGroup
	)
	wg.Go(func() { mv, _, mvErr = s.moveOf(ctx, n) })
	got, removed, err := s.readMessages(ctx, bd.codec, []callnumber.Number{n})
	wg.Wait()
	if err == nil && mvErr != nil {
		err = mvErr
	}
	if errors.Is(err, errConflict) {
		err = fmt.Errorf("%w: call number %v was written by two writers at once: %w; both copies are kept as siblings in %s/%s: check both runs' leases", store.ErrNumberTaken, n, err, s.b.types.KV, s.b.packs)
	}
	if err != nil {
		return store.Stored{}, err
	}
	if r, ok := removed[n]; ok {
		return store.Stored{}, &store.RemovedError{Removal: r}
	}
	m, ok := got[n]
	if !ok {
		return store.Stored{}, store.ErrNotFound
	}
	if mv != nil {
		m.List = mv.List
	}
	return m, nil
}

// ByMessageID implements store.Store, in run and sequence order.
func (s *Store) ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out, err := s.byMessageID(ctx, id)
	if err != nil {
		return nil, fmt.Errorf("cannot look up Message-ID %q: %w", id, err)
	}
	return out, nil
}

func (s *Store) byMessageID(ctx context.Context, id string) ([]callnumber.Number, error) {
	out := []callnumber.Number{}
	if id == "" {
		return out, nil
	}
	bd, err := s.binding(ctx)
	if err != nil || bd == nil {
		return out, err
	}
	cmd, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewSecondaryIndexQueryCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.packs).
			WithIndexName(indexMsgID).WithIndexKey(msgIDKey(id)).
			WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return nil, err
	}
	var keys []string
	if r := cmd.(*riak.SecondaryIndexQueryCommand).Response; r != nil {
		for _, res := range r.Results {
			keys = append(keys, string(res.ObjectKey))
		}
	}
	var mu sync.Mutex
	decode := s.decoder(ctx)
	err = parallel(ctx, len(keys), s.opts.Parallel, func(ctx context.Context, j int) error {
		version, run, pk, err := parsePackKey(keys[j])
		if err != nil {
			return err
		}
		f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, keys[j], sure)
		if err != nil {
			return err
		}
		p, err := mergePack(f.values, decode)
		if err != nil {
			return fmt.Errorf("pack %s: %w", keys[j], err)
		}
		for _, e := range p.entries {
			if int(e.seq)>>packShift != int(pk) || e.removed {
				continue
			}
			// The Message-ID is compressed with the message, so finding
			// the entries with it takes decoding them.
			var m record.Message
			if e.large {
				m, err = record.DecodeMessage(e.rec)
			} else {
				m, err = decode(e.rec)
			}
			if err != nil {
				return fmt.Errorf("pack %s entry %d: %w", keys[j], e.seq, err)
			}
			if m.MessageID != id {
				continue
			}
			n, err := bd.codec.Encode(callnumber.Fields{Version: version, Run: run, Sequence: e.seq})
			if err != nil {
				return fmt.Errorf("%w: pack %s entry %d: %w", record.ErrCorrupt, keys[j], e.seq, err)
			}
			mu.Lock()
			out = append(out, n)
			mu.Unlock()
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	sortNumbers(bd.codec, out)
	return out, nil
}

// ByDigest implements store.Store.
func (s *Store) ByDigest(ctx context.Context, d store.Digest) (callnumber.Number, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	n, err := s.byDigest(ctx, d)
	if err != nil {
		return 0, fmt.Errorf("cannot look up digest %v: %w", d, err)
	}
	return n, nil
}

func (s *Store) byDigest(ctx context.Context, d store.Digest) (callnumber.Number, error) {
	bd, err := s.binding(ctx)
	if err != nil {
		return 0, err
	}
	if bd == nil {
		return 0, store.ErrNotFound
	}
	states, err := s.lookupDigests(ctx, bd.codec, []store.Digest{d})
	if err != nil {
		return 0, err
	}
	if states[0].stored == 0 {
		return 0, store.ErrNotFound
	}
	return states[0].stored, nil
}

// Count implements store.Store: an estimate, see the package doc.
func (s *Store) Count(ctx context.Context) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	cmd, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewFetchCounterCommandBuilder().
			WithBucketType(s.b.types.Counters).WithBucket(s.b.counts).WithKey("messages").
			WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return 0, fmt.Errorf("cannot count messages: %w", err)
	}
	r := cmd.(*riak.FetchCounterCommand).Response
	if r == nil || r.IsNotFound {
		return 0, nil
	}
	return r.CounterValue, nil
}
