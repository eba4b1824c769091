//go:build unix

package pisource

import (
	"os"
	"syscall"
)

// mapOpen maps the first size bytes of f read-only.
func mapOpen(f *os.File, size int64) ([]byte, func(), error) {
	if size == 0 {
		return nil, func() {}, nil
	}
	if int64(int(size)) != size {
		return nil, nil, syscall.EFBIG
	}
	b, err := syscall.Mmap(int(f.Fd()), 0, int(size), syscall.PROT_READ, syscall.MAP_SHARED)
	if err != nil {
		return nil, nil, err
	}
	return b, func() { syscall.Munmap(b) }, nil
}
