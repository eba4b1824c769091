package riakauthority

import (
	"context"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
)

// MigrateReport says what Migrate did.
type MigrateReport struct {
	ID string
	// Copied of the file's Leases were written by this run; the others by
	// an interrupted one.
	Leases, Copied int
	Next           uint64 // the file's next run, below which the cluster issues none
	Done           bool   // the authority had been moved already
}

// Migrate moves the bbolt authority src into the cluster opts names, whose
// --authority URL is url. The caller holds src open, and so its file lock,
// throughout. Each step can be interrupted and run again:
//
//  1. create the metadata in state "migrating", or find it with src's ID
//     (another ID: ErrOther, and the file is left as it was);
//  2. retire the file: from now on it refuses to issue, naming url;
//  3. create every lease (one there with the same nonce is an earlier
//     run's copy; another nonce is an error);
//  4. move the next key to at least the file's next run;
//  5. set the state to "ready" by compare-and-set.
//
// Until step 5, no run is issued anywhere. Of two files migrated into one
// archive, the one that claims it first wins.
func Migrate(ctx context.Context, src *authority.Authority, url string, opts Options) (MigrateReport, error) {
	return migrate(ctx, src, url, opts, nil)
}

// migrate is Migrate with a hook called at each step, for tests: an error
// it returns stops the migration there, as a crash would.
func migrate(ctx context.Context, src *authority.Authority, url string, opts Options, hook func(step string) error) (rep MigrateReport, err error) {
	at := func(step string) error {
		if hook == nil {
			return nil
		}
		return hook(step)
	}
	rep.ID = src.ID()
	if to := src.MovedTo(); to != "" && to != url {
		return rep, authority.RetiredError(src.Path(), to)
	}
	a, err := claim(ctx, src, opts)
	if err != nil {
		return rep, err
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if a.ID() != src.ID() {
		return rep, fmt.Errorf("cannot move %s into %s: %w: the archive's authority is %s, the file's %s", src.Path(), url, ErrOther, a.ID(), src.ID())
	}
	if a.Scheme() != src.Scheme() || a.Key() != src.Key() {
		return rep, fmt.Errorf("cannot move %s into %s: %w: the authority %s there has another scheme or key", src.Path(), url, authority.ErrInconsistent, a.ID())
	}
	if err := at("claimed"); err != nil {
		return rep, err
	}
	if err := src.Retire(ctx, url); err != nil {
		return rep, err
	}
	if err := at("retired"); err != nil {
		return rep, err
	}
	leases, err := src.Leases(ctx)
	if err != nil {
		return rep, err
	}
	if rep.Next, err = src.NextRun(ctx); err != nil {
		return rep, err
	}
	rep.Leases = len(leases)
	if a.m.State == stateReady {
		// An earlier run finished: check that it did (no need to copy).
		rep.Done = true
	}
	if rep.Copied, err = a.copyLeases(ctx, leases, at); err != nil {
		return rep, fmt.Errorf("cannot move %s into %s: %w", src.Path(), url, err)
	}
	if rep.Copied > 0 && rep.Done {
		return rep, fmt.Errorf("cannot move %s into %s: %w: the authority there is ready, but %d leases of the file were missing from it", src.Path(), url, authority.ErrInconsistent, rep.Copied)
	}
	if err := at("copied"); err != nil {
		return rep, err
	}
	if err := a.raise(ctx, rep.Next); err != nil {
		return rep, fmt.Errorf("cannot move %s into %s: cannot set the next run: %w", src.Path(), url, err)
	}
	if h, err := a.NextRun(ctx); err != nil || h < rep.Next {
		return rep, fmt.Errorf("cannot move %s into %s: the next run is %d, want at least %d: %v", src.Path(), url, h, rep.Next, err)
	}
	if err := at("next"); err != nil {
		return rep, err
	}
	if err := a.ready(ctx); err != nil {
		return rep, fmt.Errorf("cannot move %s into %s: %w", src.Path(), url, err)
	}
	return rep, nil
}

// claim opens the archive's authority, creating src's, migrating, if none.
func claim(ctx context.Context, src *authority.Authority, opts Options) (*Authority, error) {
	k := src.Key()
	m := meta{
		Format: authority.Format, ID: src.ID(), Scheme: string(src.Scheme()),
		Key: hex.EncodeToString(k[:]), CreatedAt: src.Created().UTC(),
		State: stateMigrating, MigratedFrom: src.Path(),
	}
	opts.Scheme = ""
	a, _, err := open(ctx, opts, func(time.Time) (meta, error) { return m, nil }, true)
	if err != nil {
		return nil, fmt.Errorf("cannot claim the archive for the authority: %w", err)
	}
	return a, nil
}

// copyLeases creates the leases not in the cluster yet and counts them.
func (a *Authority) copyLeases(ctx context.Context, leases []callnumber.Lease, at func(string) error) (int, error) {
	var (
		mu       sync.Mutex
		copied   int
		firstErr error
		wg       sync.WaitGroup
	)
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	work := make(chan callnumber.Lease)
	for range 16 {
		wg.Go(func() {
			for l := range work {
				n, err := a.copyLease(ctx, l)
				mu.Lock()
				copied += n
				if err != nil && firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	for i, l := range leases {
		if i == len(leases)/2 {
			if err := at("half-copied"); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
				}
				mu.Unlock()
				cancel()
			}
		}
		if ctx.Err() != nil {
			break
		}
		work <- l
	}
	close(work)
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return copied, firstErr
}

func (a *Authority) copyLease(ctx context.Context, l callnumber.Lease) (int, error) {
	rec := record{Run: l.Run, Program: l.Program, Host: l.Host, PID: l.PID, Note: l.Note, IssuedAt: l.IssuedAt.UTC(), Nonce: l.Nonce}
	v, _ := json.Marshal(rec)
	key := strconv.FormatUint(uint64(l.Run), 10)
	ok, err := a.create(ctx, a.issued, key, v)
	if err != nil {
		return 0, fmt.Errorf("cannot copy the lease of run %d: %w", l.Run, err)
	}
	if ok {
		return 1, nil
	}
	got, _, err := a.fetch(ctx, a.opts.RetryFor, a.issued, key)
	if err != nil {
		return 0, fmt.Errorf("cannot copy the lease of run %d: %w", l.Run, err)
	}
	var there record
	if err := json.Unmarshal(got, &there); err != nil || there.Nonce != rec.Nonce {
		return 0, fmt.Errorf("cannot copy the lease of run %d: %w: the cluster has another lease of that run (nonce %s, the file's %s)", l.Run, authority.ErrInconsistent, there.Nonce, rec.Nonce)
	}
	return 0, nil // copied by an earlier run
}

// ready sets the state of the metadata to ready, by compare-and-set.
func (a *Authority) ready(ctx context.Context) error {
	for range 4 {
		m, vc, err := a.fetchMeta(ctx, a.opts.RetryFor)
		if err != nil {
			return err
		}
		if m == nil || m.ID != a.m.ID {
			return fmt.Errorf("%w: the metadata vanished or changed", authority.ErrInconsistent)
		}
		if m.State == stateReady {
			a.m.State = stateReady
			a.writeCopies(ctx) // an earlier run may have stopped before
			return nil
		}
		m.State = stateReady
		v, _ := json.Marshal(m)
		ok, _, err := a.put(ctx, a.opts.RetryFor, a.metaBucket, keyMeta, v, vc)
		if err != nil {
			return err
		}
		if ok {
			a.m.State = stateReady
			a.writeCopies(ctx)
			return nil
		}
	}
	return errors.New("cannot set the authority ready: its metadata kept changing")
}
