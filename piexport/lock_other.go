//go:build !unix

package piexport

import (
	"fmt"
	"os"
)

// lockFile is created exclusively by the one export writing into a
// directory. Without flock, a lock file left by a crash must be removed
// by hand.
type lockFile struct {
	f    *os.File
	path string
}

func takeLock(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w (%s exists: remove it if no export runs): %w", ErrLocked, path, err)
	}
	return &lockFile{f: f, path: path}, nil
}

func (l *lockFile) release() error {
	l.f.Close()
	return os.Remove(l.path)
}
