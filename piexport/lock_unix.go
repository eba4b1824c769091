//go:build unix

package piexport

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// lockFile is held with an exclusive flock by the one export writing into
// a directory; the kernel lets it go when the process ends, however.
type lockFile struct{ f *os.File }

func takeLock(path string) (*lockFile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file: %w", err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		if errors.Is(err, syscall.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w (it holds %s); wait for it to finish", ErrLocked, path)
		}
		return nil, fmt.Errorf("cannot lock %s: %w", path, err)
	}
	return &lockFile{f: f}, nil
}

func (l *lockFile) release() error { return l.f.Close() }
