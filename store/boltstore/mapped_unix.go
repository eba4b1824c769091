//go:build linux || darwin || freebsd || netbsd || openbsd || dragonfly

package boltstore

import (
	bolt "go.etcd.io/bbolt"
	"golang.org/x/sys/unix"
)

// releaseMapped drops this process's mappings of the pages of the file,
// called at the start of a write transaction, so that the pages earlier
// transactions touched stop counting in its resident memory. They stay
// in the page cache; a later access maps them again.
//
// Why: every batch inserts digests and Message-IDs at random places in
// their indexes, so it touches (reads through the memory map) index pages
// all over the file, and the kernel maps up to 64 KiB of cached
// neighbouring pages with each (fault-around). Left alone, the mapped
// pages grow with the archive for as long as the handle stays open, which
// is the whole of a bulk import: 48 MB after 84,000 messages, 90 with
// smaller batches. Released, they are bounded by what one batch touches.
//
// bbolt maps the file read-only and shared, so dropping the mapping loses
// nothing. Only a write transaction can remap the file, and this one
// holds the writer lock, so the mapping cannot change under it.
func releaseMapped(tx *bolt.Tx) {
	size := tx.Size() // within the mapping: bbolt maps at least the file
	if size <= 0 {
		return
	}
	// The mapping is bbolt's, outside the Go heap: its address is passed
	// to the system call as it is, never made a Go pointer. Refused
	// advice costs nothing but the memory.
	unix.Syscall(unix.SYS_MADVISE, tx.DB().Info().Data, uintptr(size), unix.MADV_DONTNEED)
}
