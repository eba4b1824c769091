//go:build unix

package boltstore

import "syscall"

// access asks the kernel whether this process may write path: it knows
// about read-only mounts, which permission bits do not show (and which
// stop root too).
func access(path string) error {
	const wOK = 2 // W_OK
	return syscall.Access(path, wOK)
}
