// Package testmount gives tests a read-only view of a directory: a
// read-only bind mount, the way an archive on a snapshot or a backup
// medium looks. Permission bits cannot stand in for it: tests often run as
// root, whom they do not stop.
package testmount

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ReadOnly mounts dir read-only on a new temporary directory and returns
// that directory; the mount is undone when the test ends. The test is
// skipped, saying why, where mounting is not allowed (not root, no
// CAP_SYS_ADMIN in a container, no mount command).
func ReadOnly(t testing.TB, dir string) string {
	t.Helper()
	if os.Geteuid() != 0 {
		t.Skip("a read-only bind mount needs root (permission bits do not make a read-only file system)")
	}
	mnt := t.TempDir()
	if out, err := exec.Command("mount", "--bind", dir, mnt).CombinedOutput(); err != nil {
		t.Skipf("cannot bind-mount %s (no mount permission here?): %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	unmount := func() {
		if out, err := exec.Command("umount", mnt).CombinedOutput(); err != nil {
			t.Errorf("cannot unmount %s: %v: %s", mnt, err, out)
		}
	}
	// A bind mount takes the flags of its source; read-only is a remount.
	if out, err := exec.Command("mount", "-o", "remount,bind,ro", mnt).CombinedOutput(); err != nil {
		unmount()
		t.Skipf("cannot make the bind mount of %s read-only: %v: %s", dir, err, strings.TrimSpace(string(out)))
	}
	t.Cleanup(unmount)
	if f, err := os.Create(mnt + "/.probe"); err == nil {
		f.Close()
		t.Fatalf("%s is mounted read-only, yet a file could be created in it", mnt)
	}
	return mnt
}
