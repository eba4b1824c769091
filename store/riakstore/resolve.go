package riakstore

import (
	"bytes"
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// maxInlineID is the longest Message-ID used as its own set key; longer
// ones, and ones starting with byte 0xff, are keyed 0xff + SHA-256.
const maxInlineID = 512

// msgIDKey returns the key of the set of a Message-ID's call numbers.
func msgIDKey(id string) string {
	if len(id) > maxInlineID || id[0] == 0xff {
		sum := sha256.Sum256([]byte(id))
		return "\xff" + string(sum[:])
	}
	return id
}

// live returns the values of a fetch that are not tombstones.
func live(values []*riak.Object) []*riak.Object {
	out := make([]*riak.Object, 0, len(values))
	for _, v := range values {
		if v != nil && !v.IsTombstone {
			out = append(out, v)
		}
	}
	return out
}

// errConflict marks siblings that disagree: two writers wrote one key at
// once, which the run authority's unique runs should make impossible.
var errConflict = errors.New("conflicting siblings")

// resolveMessage returns the message record of a fetched call number. With
// allow_mult, two writers racing on one key leave siblings; siblings with
// the same raw bytes are one message (a retried put), siblings with
// different bytes are a conflict the store refuses to pick from.
func resolveMessage(values []*riak.Object) (record.Message, bool, error) {
	vs := live(values)
	if len(vs) == 0 {
		return record.Message{}, false, nil
	}
	first, err := record.DecodeMessage(vs[0].Value)
	if err != nil {
		return record.Message{}, false, err
	}
	for _, v := range vs[1:] {
		m, err := record.DecodeMessage(v.Value)
		if err != nil {
			return record.Message{}, false, err
		}
		if !bytes.Equal(m.Raw, first.Raw) {
			return record.Message{}, true, fmt.Errorf("%w: %d copies with different bytes (%d and %d bytes, digests %.16s… and %.16s…)", errConflict, len(vs), len(first.Raw), len(m.Raw), first.Digest, m.Digest)
		}
		// Keep the earliest added time: that is when it was first stored.
		if m.Added.Before(first.Added) {
			first.Added = m.Added
		}
	}
	return first, true, nil
}

// resolveDigest returns the call number a digest entry points to. Two
// hosts storing the same new message at once both store it (under their
// own numbers) and both write the digest entry; the siblings then name
// different numbers. Every reader picks the same one, the lowest call
// number in base62 order; the other message stays stored under its own
// number, reachable by number and Message-ID, never lost.
func resolveDigest(values []*riak.Object) (callnumber.Number, bool, error) {
	vs := live(values)
	if len(vs) == 0 {
		return 0, false, nil
	}
	var nums []string
	for _, v := range vs {
		nums = append(nums, string(v.Value))
	}
	slices.Sort(nums)
	n, err := callnumber.Parse(nums[0])
	if err != nil {
		return 0, false, fmt.Errorf("%w: digest entry %q: %w", record.ErrCorrupt, nums[0], err)
	}
	return n, true, nil
}

// resolveBinding returns the binding record, refusing siblings that name
// different authorities: two first leases from different authorities raced
// to bind an empty store.
func resolveBinding(values []*riak.Object) (*store.Binding, error) {
	vs := live(values)
	if len(vs) == 0 {
		return nil, nil
	}
	first, err := record.UnmarshalBinding(vs[0].Value)
	if err != nil {
		return nil, err
	}
	for _, v := range vs[1:] {
		b, err := record.UnmarshalBinding(v.Value)
		if err != nil {
			return nil, err
		}
		if b != first {
			return nil, fmt.Errorf("%w: the store was bound to authorities %s and %s at once (two programs started on an empty store with different authorities): delete the binding object of the one that must not write here", store.ErrForeignAuthority, first.Authority, b.Authority)
		}
	}
	return &first, nil
}

// resolveLease returns the lease record of a run, refusing siblings with
// different nonces: the same run leased twice, written at once.
func resolveLease(values []*riak.Object) (*callnumber.Lease, error) {
	vs := live(values)
	if len(vs) == 0 {
		return nil, nil
	}
	first, err := record.UnmarshalLease(vs[0].Value)
	if err != nil {
		return nil, err
	}
	for _, v := range vs[1:] {
		l, err := record.UnmarshalLease(v.Value)
		if err != nil {
			return nil, err
		}
		if l.Nonce != first.Nonce || l.Authority != first.Authority {
			return nil, fmt.Errorf("%w: run %d was recorded twice at once, with nonces %s (%s on %s) and %s (%s on %s): was the run authority restored from an old backup?", store.ErrRunReused, first.Run, first.Nonce, first.Program, first.Host, l.Nonce, l.Program, l.Host)
		}
	}
	return &first, nil
}

// riakError returns the error Riak itself answered, looking through the
// client's ClientError wrapping (which has no Unwrap).
func riakError(err error) (riak.RiakError, bool) {
	for err != nil {
		var re riak.RiakError
		if errors.As(err, &re) {
			return re, true
		}
		var ce riak.ClientError
		if !errors.As(err, &ce) {
			return riak.RiakError{}, false
		}
		err = ce.InnerError
	}
	return riak.RiakError{}, false
}

// isMatchFound reports whether err is Riak's answer to a put with
// if_none_match on a key that exists.
func isMatchFound(err error) bool {
	re, ok := riakError(err)
	return ok && strings.Contains(re.Errmsg, "match_found")
}

// classify marks errors that say the cluster could not be reached in time
// (no node answered, a timeout, an overloaded node) as
// store.ErrUnavailable; what Riak answered otherwise (a missing bucket
// type, match_found) is returned as is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := riakError(err); ok {
		msg := strings.ToLower(re.Errmsg)
		if !strings.Contains(msg, "timeout") && !strings.Contains(msg, "overload") {
			return err
		}
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// sortNumbers orders call numbers by run and sequence (the packed value),
// the order one process stores them in, as the bolt backend does.
func sortNumbers(codec *callnumber.Codec, ns []callnumber.Number) {
	slices.SortFunc(ns, func(a, b callnumber.Number) int {
		pa, pb := codec.Packed(a), codec.Packed(b)
		switch {
		case pa < pb:
			return -1
		case pa > pb:
			return 1
		}
		return 0
	})
}

// decodeSet turns set members into call numbers, skipping none silently:
// a member that is not a call number is corruption.
func decodeSet(members [][]byte) ([]callnumber.Number, error) {
	out := make([]callnumber.Number, 0, len(members))
	for _, m := range members {
		n, err := callnumber.Parse(string(m))
		if err != nil {
			return nil, fmt.Errorf("%w: Message-ID set member %q: %w", record.ErrCorrupt, m, err)
		}
		out = append(out, n)
	}
	return out, nil
}
