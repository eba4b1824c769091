package boltstore

import (
	"bytes"
	"os"
	"strconv"
	"sync"

	bolt "go.etcd.io/bbolt"
)

// DefaultMappedBudget is how many bytes of files a process may map
// beyond what it mapped after its last release before a write
// transaction releases the file's pages (mappedPages), unless
// Options.MappedBudget sets another: about what two batches in flight
// map anyway on a large archive (each of their digests and Message-IDs
// on a page of its own, mapped with its neighbours, docs/performance.md),
// as releasing less often than that does not lower the peak, and
// releasing more often makes every batch fault its pages in again. An
// archive whose indexes outgrow it (about half a million messages) pays
// for that in CPU: a bulk import on a machine with memory to spare does
// better with a budget the size of the file.
const DefaultMappedBudget = 128 << 20

// mappedPages decides when a write transaction releases the file's
// mapped pages (releaseMapped). Releasing at every transaction bounds the
// mapping by one batch's index pages, but then every batch faults the
// pages of the index it reads in again, each with its neighbours, and
// that cost grows with the index: for an archive whose indexes fit in the
// budget, nothing is released, and for a larger one the pages stay
// mapped until the budget is spent. What the process maps is read from
// the kernel's count of its file-backed resident pages (/proc/self/statm),
// which costs a read of a few bytes; where there is no such count, every
// write transaction releases the pages, as before.
type mappedPages struct {
	budget int64 // bytes; zero: release at every write transaction

	mu   sync.Mutex
	base int64 // file-backed resident bytes after the last release, or less
	seen bool  // base was read
}

// release releases tx's file's mapped pages if the process has mapped
// more than the budget since the last release.
func (m *mappedPages) release(tx *bolt.Tx) {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, ok := fileResident()
	if ok && m.seen {
		// A handle closed meanwhile unmapped its pages: count from there.
		m.base = min(m.base, now)
		if now-m.base <= m.budget {
			return
		}
	}
	releaseMapped(tx)
	if m.base, ok = fileResident(); ok {
		m.seen = true
	}
}

// fileResident returns the bytes of files and shared memory this process
// has resident in its mappings (statm's third field, in pages), and false
// if the system does not say.
func fileResident() (int64, bool) {
	b, err := os.ReadFile("/proc/self/statm")
	if err != nil {
		return 0, false
	}
	f := bytes.Fields(b)
	if len(f) < 3 {
		return 0, false
	}
	pages, err := strconv.ParseInt(string(f[2]), 10, 64)
	if err != nil {
		return 0, false
	}
	return pages * int64(os.Getpagesize()), true
}
