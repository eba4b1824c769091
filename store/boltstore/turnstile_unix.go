//go:build unix

package boltstore

import (
	"errors"
	"fmt"
	"os"
	"syscall"
)

// turnstile is the side file PATH.lock that makes sharing the database
// fair between processes (see the package doc): a process holds it while
// it waits to open the database.
type turnstile struct {
	f *os.File // nil for a read-only store: nobody writes, nobody waits
}

func openTurnstile(path string) (*turnstile, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("cannot open lock file %s: %w", path, unwrapPath(err))
	}
	return &turnstile{f: f}, nil
}

// tryEnter takes the turnstile if it is free.
func (t *turnstile) tryEnter() (bool, error) {
	if t.f == nil {
		return true, nil
	}
	err := syscall.Flock(int(t.f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
	if errors.Is(err, syscall.EWOULDBLOCK) {
		return false, nil
	}
	if err != nil {
		return false, fmt.Errorf("cannot lock %s: %w", t.f.Name(), err)
	}
	return true, nil
}

func (t *turnstile) leave() {
	if t.f == nil {
		return
	}
	syscall.Flock(int(t.f.Fd()), syscall.LOCK_UN)
}

// othersWaiting reports whether another process holds the turnstile. It
// must not be called while this process holds it.
func (t *turnstile) othersWaiting() bool {
	if t.f == nil {
		return false
	}
	fd := int(t.f.Fd())
	if err := syscall.Flock(fd, syscall.LOCK_SH|syscall.LOCK_NB); err != nil {
		return errors.Is(err, syscall.EWOULDBLOCK)
	}
	syscall.Flock(fd, syscall.LOCK_UN)
	return false
}

// seesWaiting reports whether othersWaiting can tell: with no file,
// the store is read-only and nobody waits.
func (t *turnstile) seesWaiting() bool { return true }

func (t *turnstile) close() error {
	if t.f == nil {
		return nil
	}
	return t.f.Close()
}
