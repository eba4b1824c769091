package lockfile

import (
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
	"time"
)

const childEnv = "CHIBRARY_LOCKFILE_CHILD"

func TestMain(m *testing.M) {
	// The child takes the lock, says so, and waits to be killed.
	if path := os.Getenv(childEnv); path != "" {
		if _, err := Take(path, "child"); err != nil {
			os.Stderr.WriteString(err.Error())
			os.Exit(1)
		}
		os.Stdout.WriteString("locked\n")
		time.Sleep(time.Minute)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

func TestTake(t *testing.T) {
	path := filepath.Join(t.TempDir(), "x.lock")
	l, err := Take(path, "the first")
	if err != nil {
		t.Fatal(err)
	}
	_, err = Take(path, "the second")
	if !errors.Is(err, ErrHeld) {
		t.Fatalf("Take(held) = %v, want %v", err, ErrHeld)
	}
	if !strings.Contains(err.Error(), "the first") || !strings.Contains(err.Error(), "pid") {
		t.Errorf("Take(held) = %q, want the holder named", err)
	}
	if err := l.Release(); err != nil {
		t.Fatal(err)
	}
	l, err = Take(path, "the third")
	if err != nil {
		t.Fatalf("Take(released) = %v", err)
	}
	l.Release()
}

// TestHolderKilled: a holder killed with SIGKILL leaves the lock free.
func TestHolderKilled(t *testing.T) {
	if runtime.GOOS == "windows" || runtime.GOOS == "plan9" {
		t.Skip("the lock is the file's existence here")
	}
	path := filepath.Join(t.TempDir(), "x.lock")
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), childEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	buf := make([]byte, 7)
	if _, err := out.Read(buf); err != nil || string(buf) != "locked\n" {
		cmd.Process.Kill()
		t.Fatalf("child: %q, %v", buf, err)
	}
	if _, err := Take(path, "parent"); !errors.Is(err, ErrHeld) || !strings.Contains(err.Error(), "child") {
		t.Errorf("Take(held by the child) = %v, want %v naming the child", err, ErrHeld)
	}
	cmd.Process.Kill()
	cmd.Wait()
	l, err := Take(path, "parent")
	if err != nil {
		t.Fatalf("Take(after the holder was killed) = %v", err)
	}
	l.Release()
}
