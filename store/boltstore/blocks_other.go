//go:build !unix

package boltstore

import "os"

// blocks returns the size of path, where the system does not say how
// many blocks a file takes; 0 if it cannot be read.
func blocks(path string) int64 {
	fi, err := os.Stat(path)
	if err != nil {
		return 0
	}
	return fi.Size()
}
