//go:build !(linux || darwin || freebsd || netbsd || openbsd || dragonfly)

package boltstore

import bolt "go.etcd.io/bbolt"

// releaseMapped has nothing to do where madvise is missing (see
// mapped_unix.go).
func releaseMapped(*bolt.Tx) {}
