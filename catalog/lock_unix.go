//go:build unix

package catalog

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile is PATH.lock, held with an exclusive flock by the one process
// that writes the catalog.
type lockFile struct{ f *os.File }

func takeLock(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (it holds %s)", ErrLocked, path)
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return &lockFile{f: f}, nil
}

// release unlocks and closes the file (closing releases the flock).
func (l *lockFile) release() error { return l.f.Close() }
