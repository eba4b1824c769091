package riakstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// The digest index (ARCHIVE.digests) maps a message's digest to its call
// number, and a removed message's content (store.ContentOf) to its. An entry is written before its message, so it may name a
// number whose message is not stored (yet, or ever): a reader believes it
// only once it sees the message or its removal record.
//
// Keys are write-once, so a writer taking over a dead writer's claim
// writes the next generation of the key, "DIGEST.1", "DIGEST.2", ...; a
// reader believes the first generation whose message is stored.

// digestState is what the index says of one digest.
type digestState struct {
	// stored is the number of the stored or removed message with this
	// digest, or 0.
	stored  callnumber.Number
	removed *store.Removal
	// gen is the first generation not written, where a new entry goes.
	gen int
}

func digestKey(d store.Digest, gen int) string {
	k := hex.EncodeToString(d[:])
	if gen > 0 {
		k += "." + strconv.Itoa(gen)
	}
	return k
}

// resolveDigest returns the numbers of a digest entry's values, lowest
// first. There is more than one only after a writer stalled past its
// claim.
func resolveDigest(values []*riak.Object) ([]callnumber.Number, error) {
	var out []callnumber.Number
	for _, v := range live(values) {
		n, err := callnumber.Parse(string(v.Value))
		if err != nil {
			return nil, fmt.Errorf("%w: digest entry %q: %w", record.ErrCorrupt, v.Value, err)
		}
		out = append(out, n)
	}
	slices.SortFunc(out, func(a, b callnumber.Number) int {
		x, y := a.String(), b.String()
		switch {
		case x < y:
			return -1
		case x > y:
			return 1
		}
		return 0
	})
	return slices.Compact(out), nil
}

// lookupDigests reads the index entries of ds and the messages they name,
// a generation at a time.
func (s *Store) lookupDigests(ctx context.Context, codec *callnumber.Codec, ds []store.Digest) ([]digestState, error) {
	out := make([]digestState, len(ds))
	open := make([]int, len(ds)) // digests still being looked up
	for i := range open {
		open[i] = i
	}
	for len(open) > 0 {
		named := make([][]callnumber.Number, len(open))
		err := parallel(ctx, len(open), s.opts.Parallel, func(ctx context.Context, j int) error {
			i := open[j]
			f, err := s.fetch(ctx, s.b.types.Once, s.b.digests, digestKey(ds[i], out[i].gen), sure)
			if err != nil {
				return err
			}
			named[j], err = resolveDigest(f.values)
			return err
		})
		if err != nil {
			return nil, err
		}
		var numbers []callnumber.Number
		for _, ns := range named {
			numbers = append(numbers, ns...)
		}
		var (
			got     map[callnumber.Number]store.Stored
			removed map[callnumber.Number]store.Removal
		)
		if len(numbers) > 0 {
			if got, removed, err = s.readMessages(ctx, codec, numbers); err != nil {
				return nil, err
			}
		}
		next := open[:0]
		for j, i := range open {
			if len(named[j]) == 0 {
				continue // no entry at this generation: none after it
			}
			for _, n := range named[j] {
				if m, ok := got[n]; ok && m.Digest == ds[i] {
					out[i].stored = n
					break
				}
				if r, ok := removed[n]; ok && (r.Digest == ds[i] || r.Content == ds[i]) {
					out[i].stored, out[i].removed = n, &r
					break
				}
			}
			if out[i].stored == 0 {
				out[i].gen++ // an entry whose message is not stored: look further
				next = append(next, i)
			}
		}
		open = next
	}
	return out, nil
}

// putDigest writes generation gen of a digest's entry: n.
func (s *Store) putDigest(ctx context.Context, d store.Digest, n callnumber.Number, gen int) error {
	obj := &riak.Object{ContentType: "text/plain", Value: []byte(n.String())}
	return s.put(ctx, s.b.types.Once, s.b.digests, digestKey(d, gen), obj, nil)
}
