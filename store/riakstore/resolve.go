package riakstore

import (
	"crypto/sha256"
	"errors"
	"fmt"
	"slices"
	"strings"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
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

// isFailed reports whether err is Riak's answer to a refused write on a
// consistent bucket.
func isFailed(err error) bool {
	re, ok := riakError(err)
	return ok && strings.TrimSpace(re.Errmsg) == "failed"
}

// classify marks errors that say the cluster could not serve a request in
// time as store.ErrUnavailable; Riak's other answers are returned as is.
func classify(err error) error {
	if err == nil {
		return nil
	}
	if re, ok := riakError(err); ok && !isTransient(re) {
		return err
	}
	return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
}

// classifyAnswer is classify for the answer to cmd. To a read, Riak's
// "failed" means a consistent key's ensemble cannot serve it now; to a
// write, that the write was refused (isFailed).
func classifyAnswer(cmd riak.Command, err error) error {
	if _, read := cmd.(*riak.FetchValueCommand); read && isFailed(err) {
		return fmt.Errorf("%w: %w", store.ErrUnavailable, err)
	}
	return classify(err)
}

// isTransient reports whether Riak's answer says it could not serve the
// request now. "Unknown message code" is what a node still starting up
// answers.
func isTransient(re riak.RiakError) bool {
	msg := strings.ToLower(re.Errmsg)
	for _, s := range []string{"timeout", "overload", "insufficient_vnodes", "r_val_unsatisfied", "w_val_unsatisfied", "pw_val_unsatisfied", "pr_val_unsatisfied", "unavailable", "all_nodes_down", "nodedown", "unknown message code"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

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
