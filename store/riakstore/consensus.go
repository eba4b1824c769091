package riakstore

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/store"
)

// ErrConsensus: some consensus groups of the strongly consistent bucket
// type cannot serve, so that imports (their claims) and the authority's
// runs in them wait, while reads of messages go on.
var ErrConsensus = errors.New("riakstore: consensus groups cannot serve")

// consensusProbeWait bounds each probe's answer.
const consensusProbeWait = 4 * time.Second

// Consensus reads, at once, one absent key in each of
// riakconn.ProbeSlices slices of the ring of the claims bucket type: on a
// ring of 64 partitions or fewer that is every consensus group the
// archive's claims and the authority's runs live in (every consistent
// type of n_val 3 shares them). It returns nil if each read was answered,
// else ErrConsensus (and store.ErrUnavailable) saying how many were not,
// and the command that shows the groups and the one that brings them back.
func (s *Store) Consensus(ctx context.Context) error {
	bucket := s.b.archive + ".probe"
	keys := riakconn.ProbeKeys(s.b.types.Claims, bucket)
	ctx, cancel := context.WithTimeout(ctx, consensusProbeWait)
	defer cancel()
	var (
		mu     sync.Mutex
		failed int
		first  error
		wg     sync.WaitGroup
	)
	for _, key := range keys {
		wg.Go(func() {
			// One attempt: a group without a leader answers "failed" or
			// times out, and retrying would only hide it.
			_, err := s.doFor(ctx, 0, func() (riak.Command, error) {
				return riak.NewFetchValueCommandBuilder().
					WithBucketType(s.b.types.Claims).WithBucket(bucket).WithKey(key).
					WithTimeout(consensusProbeWait).Build()
			})
			if err != nil {
				mu.Lock()
				failed++
				if first == nil {
					first = err
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if failed == 0 {
		return nil
	}
	if ctx.Err() != nil && context.Cause(ctx) != context.DeadlineExceeded {
		return ctx.Err()
	}
	return fmt.Errorf("%w (%w): %d of %d reads spread over the ring of bucket type %s were not answered within %v (first: %v); imports and new runs wait for those groups until every node holding their members is up (riak admin ensemble-status on any node shows them; docs/authority.md, \"When groups stop\")",
		ErrConsensus, store.ErrUnavailable, failed, len(keys), s.b.types.Claims, consensusProbeWait, first)
}
