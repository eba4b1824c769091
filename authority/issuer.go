package authority

import (
	"context"
	"io"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// Issuer is a run authority, in a bbolt file (*Authority) or a Riak cluster
// (package authority/riakauthority). Package authority/authoritytest checks
// the contract of every backend:
//
//   - Issue returns a run only once its lease is durable, and never returns
//     a run twice, however many handles, processes and hosts issue at once.
//     It may skip runs. After run 2^30-1 it fails with ErrExhausted.
//   - Lease returns what Issue returned, or ErrNotIssued.
//   - ID (32 hex digits), Scheme and Key never change for an authority.
//   - After Close, Issue, Lease and Check fail with ErrClosed.
type Issuer interface {
	ID() string
	Scheme() shuffle.Scheme
	Key() shuffle.Key
	Issue(ctx context.Context, h Holder) (callnumber.Lease, error)
	Lease(ctx context.Context, run uint32) (callnumber.Lease, error)
	// NextRun returns a run above every run issued so far (2^30 when
	// exhausted); runs below it may be reserved but not yet issued.
	NextRun(ctx context.Context) (uint64, error)
	Check(ctx context.Context) error
	Close() error
}

var _ Issuer = (*Authority)(nil)

// Runs returns a RunSource issuing runs of iss to h. Closing it closes iss.
func Runs(iss Issuer, h Holder) interface {
	callnumber.RunSource
	io.Closer
} {
	return runs{iss, h}
}

type runs struct {
	iss Issuer
	h   Holder
}

func (r runs) NewRun(ctx context.Context) (callnumber.Lease, error) { return r.iss.Issue(ctx, r.h) }

func (r runs) Close() error { return r.iss.Close() }
