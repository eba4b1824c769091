package riakstore

import (
	"context"
	"fmt"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/internal/riakconn"
)

// rAll is the protocol buffers API's symbolic "all" for r and w
// (UINT32_MAX - 3): every replica, whatever the bucket type's n_val.
const rAll = 0xffffffff - 3

// fetched is the answer to a fetch: the live values and the causal
// context to write back with.
type fetched struct {
	values []*riak.Object
	vclock []byte
}

func (f fetched) found() bool { return len(f.values) > 0 }

// readMode says how hard a fetch looks for a value.
type readMode uint8

const (
	// quick: Riak's defaults, for keys usually absent.
	quick readMode = iota
	// sure: r = 1, a not-found reply not counting, so a key being written
	// is found as soon as one replica has it.
	sure
	// all: every replica's values, merged, for a second look when a
	// replica seems behind.
	all
)

// fetch reads bucketType/bucket/key.
func (s *Store) fetch(ctx context.Context, bucketType, bucket, key string, mode readMode) (fetched, error) {
	cmd, err := s.do(ctx, func() (riak.Command, error) {
		b := riak.NewFetchValueCommandBuilder().
			WithBucketType(bucketType).WithBucket(bucket).WithKey(key).
			WithTimeout(s.opts.Timeout)
		switch mode {
		case sure:
			b = b.WithR(1).WithNotFoundOk(false)
		case all:
			b = b.WithR(rAll)
		}
		return b.Build()
	})
	if err != nil {
		return fetched{}, fmt.Errorf("cannot fetch %s/%s/%q: %w", bucketType, bucket, key, err)
	}
	r := cmd.(*riak.FetchValueCommand).Response
	if r == nil || r.IsNotFound {
		return fetched{}, nil
	}
	f := fetched{values: live(r.Values)}
	if len(r.Values) > 0 {
		f.vclock = r.Values[0].VClock
	}
	return f, nil
}

// put writes obj under bucketType/bucket/key, with vclock as its causal
// context; nil adds a sibling on an allow_mult bucket.
func (s *Store) put(ctx context.Context, bucketType, bucket, key string, obj *riak.Object, vclock []byte) error {
	_, err := s.do(ctx, func() (riak.Command, error) {
		o := *obj
		o.VClock = vclock
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(bucketType).WithBucket(bucket).WithKey(key).
			WithContent(&o).WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return fmt.Errorf("cannot store %s/%s/%q: %w", bucketType, bucket, key, err)
	}
	s.written.Add(int64(len(obj.Value)))
	return nil
}

// create writes a new key of the consistent bucket type, or reports false
// if the key exists. A create retried after a lost reply also gets false,
// so callers read the key back to tell their own value from another's.
func (s *Store) create(ctx context.Context, bucket, key string, value []byte) (bool, error) {
	_, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(s.b.types.Claims).WithBucket(bucket).WithKey(key).
			WithContent(&riak.Object{ContentType: "application/octet-stream", Value: value}).
			WithTimeout(s.opts.Timeout).Build()
	})
	if riakconn.IsFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot create %s/%s/%q: %w", s.b.types.Claims, bucket, key, err)
	}
	s.written.Add(int64(len(value)))
	return true, nil
}

// fetchClaim reads a key of the consistent bucket type: its value, or nil.
func (s *Store) fetchClaim(ctx context.Context, bucket, key string) ([]byte, error) {
	v, _, err := s.fetchClaimContext(ctx, bucket, key)
	return v, err
}

// fetchClaimContext is fetchClaim with the causal context to update with.
func (s *Store) fetchClaimContext(ctx context.Context, bucket, key string) ([]byte, []byte, error) {
	f, err := s.fetch(ctx, s.b.types.Claims, bucket, key, quick)
	if err != nil {
		return nil, nil, err
	}
	if len(f.values) > 1 {
		// A consistent bucket never has siblings.
		return nil, nil, fmt.Errorf("%s/%s/%q has %d siblings: is bucket type %s consistent?", s.b.types.Claims, bucket, key, len(f.values), s.b.types.Claims)
	}
	if !f.found() {
		return nil, nil, nil
	}
	return f.values[0].Value, f.vclock, nil
}

// update replaces a key of the consistent bucket type with value if it is
// still as read with vclock (compare-and-set), or reports false; as with
// create, a retry after a lost reply also gets false.
func (s *Store) update(ctx context.Context, bucket, key string, value, vclock []byte) (bool, error) {
	_, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(s.b.types.Claims).WithBucket(bucket).WithKey(key).
			WithContent(&riak.Object{ContentType: "application/json", Value: value, VClock: vclock}).
			WithTimeout(s.opts.Timeout).Build()
	})
	if riakconn.IsFailed(err) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot update %s/%s/%q: %w", s.b.types.Claims, bucket, key, err)
	}
	s.written.Add(int64(len(value)))
	return true, nil
}
