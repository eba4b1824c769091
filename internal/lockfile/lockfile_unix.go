//go:build unix

package lockfile

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

func take(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, ErrHeld
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return &Lock{f: f, path: path}, nil
}

// Release gives the lock back. The file stays.
func (l *Lock) Release() error { return l.f.Close() }
