package riakstore

import (
	"context"
	"encoding/hex"
	"fmt"
	"slices"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// The digest index (ARCHIVE.digests) maps a message's digest to its call
// number. A writer puts the entry after it has claimed the message in the
// ledger and before it writes the message, so that no message is ever
// stored without its entry, even by a writer killed in between. An entry
// may therefore name a number whose message is not stored (yet, or ever):
// every reader checks that the message is there before it believes the
// entry, and a writer that takes over a dead writer's claim replaces the
// entry, with the causal context it read it with.

// digestState is what the index says of one digest.
type digestState struct {
	// stored is the number of the stored message with this digest, or 0.
	stored callnumber.Number
	// vclock is the entry's causal context when it exists (whether or not
	// its message is stored), for replacing it.
	vclock []byte
}

// resolveDigest returns the numbers of a digest entry's values, lowest
// first (in base62 order). An entry has one value, except after a writer
// stalled for longer than the claim timeout (see the package doc).
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

// lookupDigests reads the index entries of ds, and the messages they name,
// in parallel. A not-found reply of one replica does not count: an entry
// written to a quorum is found.
func (s *Store) lookupDigests(ctx context.Context, codec *callnumber.Codec, ds []store.Digest) ([]digestState, error) {
	out := make([]digestState, len(ds))
	named := make([][]callnumber.Number, len(ds))
	err := parallel(ctx, len(ds), s.opts.Parallel, func(ctx context.Context, i int) error {
		f, err := s.fetch(ctx, s.b.types.KV, s.b.digests, hex.EncodeToString(ds[i][:]), sure)
		if err != nil {
			return err
		}
		if named[i], err = resolveDigest(f.values); err != nil {
			return err
		}
		out[i].vclock = f.vclock
		return nil
	})
	if err != nil {
		return nil, err
	}
	var numbers []callnumber.Number
	for _, ns := range named {
		numbers = append(numbers, ns...)
	}
	if len(numbers) == 0 {
		return out, nil
	}
	got, err := s.readMessages(ctx, codec, numbers)
	if err != nil {
		return nil, err
	}
	for i, ns := range named {
		for _, n := range ns {
			if m, ok := got[n]; ok && m.Digest == ds[i] {
				out[i].stored = n
				break
			}
		}
	}
	return out, nil
}

// putDigest writes a digest index entry: n, replacing the entry read with
// vclock (nil when there was none).
func (s *Store) putDigest(ctx context.Context, d store.Digest, n callnumber.Number, vclock []byte) error {
	obj := &riak.Object{ContentType: "text/plain", Value: []byte(n.String())}
	return s.put(ctx, s.b.types.KV, s.b.digests, hex.EncodeToString(d[:]), obj, vclock)
}
