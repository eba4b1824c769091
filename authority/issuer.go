package authority

import (
	"context"
	"io"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// Issuer is a run authority, wherever its state lives: the bbolt file
// (*Authority) or the Riak cluster (package authority/riakauthority). The
// coordinator serves one; a program takes runs from one through Runs.
//
// The contract, which the conformance suite (package
// authority/authoritytest) checks for every backend:
//
//   - Issue returns a run only once the lease recording it is durable,
//     and never returns a run twice, whatever the number of handles, of
//     processes and of hosts issuing from the same authority at once. It
//     may skip runs. After run 2^30-1 it fails with ErrExhausted.
//   - Lease returns the lease Issue returned (nonce, holder, issued-at), or
//     ErrNotIssued.
//   - ID, Scheme and Key never change for an authority.
//   - After Close, Issue, Lease and Check fail with ErrClosed.
type Issuer interface {
	// ID returns the authority ID (32 hex digits).
	ID() string
	// Scheme returns the shuffle scheme chosen at creation.
	Scheme() shuffle.Scheme
	// Key returns the shuffle key.
	Key() shuffle.Key
	// Issue issues a run to holder and returns its lease.
	Issue(ctx context.Context, h Holder) (callnumber.Lease, error)
	// Lease returns the lease issued for run, or ErrNotIssued.
	Lease(ctx context.Context, run uint32) (callnumber.Lease, error)
	// NextRun returns a run above every run issued so far: none at or
	// above it has been issued (2^30 when exhausted). A backend may have
	// reserved runs below it that it has not issued yet.
	NextRun(ctx context.Context) (uint64, error)
	// Check reports whether the authority is usable.
	Check(ctx context.Context) error
	// Close releases the authority's resources.
	Close() error
}

var _ Issuer = (*Authority)(nil)

// Runs returns a RunSource issuing runs of iss to h. Closing it closes
// iss.
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
