//go:build !linux

package pisource

import "io"

// growPipe does nothing where pipes cannot be grown.
func growPipe(io.Reader) {}
