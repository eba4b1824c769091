//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package boltstore

import (
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// releaseMapped drops this process's mappings of the file's pages; they
// stay in the page cache. Every batch inserts digests and Message-IDs at
// random places, touching index pages all over the file (and the kernel
// maps cached neighbours with each), so left alone the mapped pages would
// grow with the archive for the whole of a bulk import. bbolt maps the
// file read-only and shared, so this loses nothing, and no transaction can
// remap it while tx is open (a compaction, which reads every page once,
// calls it in read transactions too). A write transaction calls it
// through mappedPages, only once the process has mapped more than a budget.
func releaseMapped(tx *bolt.Tx) {
	size := tx.Size() // within the mapping: bbolt maps at least the file
	if size <= 0 {
		return
	}
	// The mapping is bbolt's, outside the Go heap: its address is never
	// made a Go pointer. Refused advice costs nothing but memory.
	unix.Syscall(unix.SYS_MADVISE, tx.DB().Info().Data, uintptr(size), unix.MADV_DONTNEED)
}
