//go:build unix

package boltstore

import (
	"os"
	"syscall"
)

// blocks returns the bytes path takes on disk (its blocks, which a
// sparse or preallocated file makes differ from its size); 0 if it
// cannot be read.
func blocks(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	if st, ok := fi.Sys().(*syscall.Stat_t); ok {
		return st.Blocks * 512
	}
	return fi.Size()
}
