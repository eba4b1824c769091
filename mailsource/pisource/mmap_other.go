//go:build !unix

package pisource

import (
	"io"
	"os"
)

// mapOpen reads the first size bytes of f (no mmap here).
func mapOpen(f *os.File, size int64) ([]byte, func(), error) {
	b := make([]byte, size)
	if _, err := io.ReadFull(f, b); err != nil {
		return nil, nil, err
	}
	return b, func() {}, nil
}
