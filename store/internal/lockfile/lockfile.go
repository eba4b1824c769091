// Package lockfile is an exclusive lock on a side file, taken without
// waiting, that says who holds it: for work that must never run twice at
// once on the same files (a compaction, a catalog's writer), where a
// second attempt is refused at once with the first one named, rather than
// left to wait or, worse, to run.
//
// On Unix the lock is flock(2) on the file: the kernel drops it when its
// holder exits, however it exits, so a crash never leaves it taken. The
// file itself stays, holding the last holder's description; it is read
// only while the lock is held by someone.
package lockfile

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"time"
)

// ErrHeld: another process (or another open of the same file in this
// process) holds the lock. The error Take returns is a *HeldError.
var ErrHeld = errors.New("lockfile: held by another process")

// HeldError is Take's error when the lock is held.
type HeldError struct {
	Path string
	// Holder is how the holder described itself ("compaction by
	// resolver, pid 123 on host, since 2026-11-25T13:00:00Z"), or "".
	Holder string
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
	path string
}

// Take takes the lock at path, creating the file if missing, and writes
// into it what holds it: what (e.g. "compaction"), the program, its
// process ID, the host and the time. If the lock is held it returns a
// *HeldError naming the holder as it described itself.
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

// Path returns the lock file's path.
func (l *Lock) Path() string { return l.path }
