package authority

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// LocalOptions configure a Local; zero values are defaults.
type LocalOptions struct {
	// Scheme if Local creates the database; "" means DefaultScheme. An
	// existing database asked for another fails with ErrScheme.
	Scheme shuffle.Scheme

	// LockTimeout is how long to wait for other processes to release the
	// file; 0 means 10 seconds. A coordinator holds it as long as it runs.
	LockTimeout time.Duration
}

// Local is a RunSource that holds runs.db (and bbolt's exclusive lock) only
// for the moment of one allocation, so that processes on one machine can
// share it. It is safe for concurrent use.
type Local struct {
	path   string
	holder Holder
	opts   LocalOptions
	// sem serialises this process's allocations, which would otherwise
	// poll for the file lock.
	sem chan struct{}
}

var _ callnumber.RunSource = (*Local)(nil)

// NewLocal returns the local authority at path, issuing runs to holder.
func NewLocal(path string, holder Holder, opts LocalOptions) *Local {
	return &Local{path: path, holder: holder, opts: opts, sem: make(chan struct{}, 1)}
}

// Path returns the database file name.
func (l *Local) Path() string { return l.path }

// NewRun opens (or creates) the database, issues one run and closes it.
// While a coordinator holds the file, it fails with ErrLocked.
func (l *Local) NewRun(ctx context.Context) (callnumber.Lease, error) {
	select {
	case l.sem <- struct{}{}:
		defer func() { <-l.sem }()
	case <-ctx.Done():
		return callnumber.Lease{}, fmt.Errorf("cannot allocate a run: %w", context.Cause(ctx))
	}
	if dir := filepath.Dir(l.path); dir != "" {
		if err := os.MkdirAll(dir, 0o750); err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot allocate a run: %w", err)
		}
	}
	a, _, err := OpenOrCreate(ctx, l.path, Options{
		Scheme:            l.opts.Scheme,
		LockTimeout:       l.opts.LockTimeout,
		OneCommitPerIssue: true, // alone in the file: nothing to share
	})
	if err != nil {
		if errors.Is(err, ErrLocked) {
			return callnumber.Lease{}, fmt.Errorf("cannot allocate a run from %s: %w; if a coordinator is serving this file, allocate through it with --coordinator URL", l.path, err)
		}
		return callnumber.Lease{}, fmt.Errorf("cannot allocate a run: %w", err)
	}
	lease, err := a.Issue(ctx, l.holder)
	if cerr := a.Close(); err == nil && cerr != nil {
		// Wasting the committed run is harmless; hiding a failing close is not.
		return callnumber.Lease{}, fmt.Errorf("cannot allocate a run: %w", cerr)
	}
	if err != nil {
		return callnumber.Lease{}, err
	}
	return lease, nil
}
