package pisource

import (
	"io"
	"os"
	"syscall"
)

// growPipe asks for a 1 MiB pipe (Linux's default is 64 KiB) so that
// git writes, and the reader reads, a message in a few large chunks, not
// many small ones, each a system call and a wake-up on either side.
// Failing is harmless: the pipe keeps its size.
func growPipe(r io.Reader) {
	if f, ok := r.(*os.File); ok {
		if sc, err := f.SyscallConn(); err == nil {
			sc.Control(func(fd uintptr) {
				syscall.Syscall(syscall.SYS_FCNTL, fd, syscall.F_SETPIPE_SZ, 1<<20)
			})
		}
	}
}
