package coordinator

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/riakauthority"
)

// MigrateFile moves the authority in the file db into the Riak cluster opts
// names (see riakauthority.Migrate), holding the file's lock throughout, so
// the coordinator serving db must be stopped first. Run again after an
// interruption, it finishes the move.
func MigrateFile(ctx context.Context, db, url string, opts riakauthority.Options, lockTimeout time.Duration) (riakauthority.MigrateReport, error) {
	a, err := authority.Open(ctx, db, authority.Options{LockTimeout: lockTimeout})
	if err != nil {
		if errors.Is(err, authority.ErrLocked) {
			return riakauthority.MigrateReport{}, fmt.Errorf("%w; stop the coordinator serving it (and wait for local allocations) before migrating", err)
		}
		return riakauthority.MigrateReport{}, err
	}
	rep, err := riakauthority.Migrate(ctx, a, url, opts)
	if cerr := a.Close(); err == nil && cerr != nil {
		err = cerr
	}
	return rep, err
}
