// Package lockfile is an exclusive lock on a side file that says who holds
// it, for work that must never run twice at once: a second attempt is
// refused at once, naming the first. On Unix the lock is flock(2), which
// the kernel drops when its holder exits, however it exits.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrHeld: another process (or open of the file) holds the lock.
var ErrHeld = errors.New("lockfile: held by another process")

// HeldError is Take's error when the lock is held.
type HeldError struct {
	Path   string
	Holder string // as the holder described itself, or ""
}

func (e *HeldError) Error() string {
	if e.Holder == "" {
		return fmt.Sprintf("%s is held by another process", e.Path)
	}
	return fmt.Sprintf("%s is held by %s", e.Path, e.Holder)
}

func (e *HeldError) Is(target error) bool { return target == ErrHeld }

// Lock is a lock taken by Take.
type Lock struct {
	f    *os.File
	path string // removed by Release where locks are files that exist (lockfile_other.go)
}

// Take takes the lock at path and writes into it what holds it: what (e.g.
// "compaction"), the program, its PID, the host and the time.
func Take(path, what string) (*Lock, error) {
	l, err := take(path)
	if errors.Is(err, ErrHeld) {
		return nil, &HeldError{Path: path, Holder: describe(path)}
	}
	if err != nil {
		return nil, err
	}
	host, _ := os.Hostname()
	note := fmt.Sprintf("%s by %s, pid %d on %s, since %s\n", what, filepath.Base(os.Args[0]), os.Getpid(), host, time.Now().UTC().Format(time.RFC3339))
	// The description is a courtesy to whoever is refused: a failure to
	// write it does not give the lock back.
	if err := l.f.Truncate(0); err == nil {
		l.f.WriteAt([]byte(note), 0)
	}
	return l, nil
}

// describe returns what the holder of the lock at path wrote, or "".
func describe(path string) string {
	b, err := os.ReadFile(path)
	if err != nil || len(b) > 1024 {
		return ""
	}
	return strings.TrimSpace(string(b))
}
