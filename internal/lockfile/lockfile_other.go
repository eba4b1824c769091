//go:build !unix

package lockfile

import (
	"errors"
	"fmt"
	"os"
)

// Without flock the lock is the file's existence: one left by a crash
// must be removed by hand, as the error says.
func take(path string) (*Lock, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if errors.Is(err, os.ErrExist) {
		return nil, ErrHeld // HeldError's text names the file to remove if its holder is gone
	}
	if err != nil {
		return nil, fmt.Errorf("cannot create lock file: %w", err)
	}
	return &Lock{f: f, path: path}, nil
}

// Release gives the lock back, removing the file.
func (l *Lock) Release() error {
	l.f.Close()
	return os.Remove(l.path)
}
