package riakstore

import (
	"crypto/sha256"
	"errors"
	"slices"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
)

// maxInlineID is the longest Message-ID used as its own index term; longer
// ones, and ones starting with byte 0xff, are indexed as 0xff + SHA-256.
const maxInlineID = 512

// msgIDKey returns the secondary index term of a Message-ID.
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

// errConflict marks siblings that disagree: two writers wrote one call
// number, which unique runs and leases should make impossible.
var errConflict = errors.New("conflicting siblings")

// sortNumbers orders call numbers by run and sequence, as the bolt
// backend does.
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
