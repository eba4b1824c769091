// Package testmount gives tests a read-only bind mount of a directory, as
// an archive on a snapshot looks. Permission bits cannot stand in for it:
// tests often run as root.
package testmount

import (
	"os"
	"os/exec"
	"strings"
	"testing"
)

// ReadOnly mounts dir read-only on a new temporary directory until the test
// ends, or skips the test where mounting is not allowed.
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
