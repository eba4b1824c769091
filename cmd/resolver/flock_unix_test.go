//go:build unix

package main

import (
	"os"
	"syscall"
)

// flock takes f's lock as another process's export would hold it.
func flock(f *os.File) error { return syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB) }
