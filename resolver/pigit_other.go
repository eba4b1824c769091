//go:build !unix

package resolver

import "os/exec"

// ownProcessGroup leaves cmd as it is: its cancellation kills git
// itself only.
func ownProcessGroup(cmd *exec.Cmd) {}
