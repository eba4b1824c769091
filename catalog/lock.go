package catalog

import (
	"errors"
	"fmt"

	"github.com/chibrary/chibrary/internal/lockfile"
)

// lockFile is PATH.lock, held by the one process that writes the catalog
// (package lockfile: an flock on Unix, which the kernel drops when the
// process ends; elsewhere a file made exclusively, removed on release).
type lockFile = lockfile.Lock

// takeLock takes the catalog's lock at path; ErrLocked, naming its
// holder, when another process holds it.
func takeLock(path string) (*lockFile, error) {
	l, err := lockfile.Take(path, "the catalog's writer")
	if he := (*lockfile.HeldError)(nil); errors.As(err, &he) {
		return nil, fmt.Errorf("%w (%v)", ErrLocked, err)
	}
	return l, err
}
