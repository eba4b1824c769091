//go:build unix

package resolver

import (
	"os/exec"
	"syscall"
)

// ownProcessGroup puts cmd in a process group of its own, and makes its
// cancellation kill the whole group: upload-pack runs pack-objects,
// which must not outlive it when a client goes away.
func ownProcessGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
