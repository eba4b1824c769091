//go:build !unix

package catalog

import (
	"fmt"
	"os"
)

// lockFile is PATH.lock, created exclusively by the one process that
// writes the catalog. Without flock, a lock file left by a crash must be
// removed by hand.
type lockFile struct {
	f    *os.File
	path string
}

func takeLock(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w (%s exists: remove it if no resolver runs): %w", ErrLocked, path, err)
	}
	return &lockFile{f: f, path: path}, nil
}

func (l *lockFile) release() error {
	l.f.Close()
	return os.Remove(l.path)
}
