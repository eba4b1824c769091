package riaktest

import (
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"testing"
)

func TestKit(t *testing.T) {
	dir := t.TempDir()
	t.Setenv(EnvKit, dir)
	if k, err := Kit(); err == nil {
		t.Errorf("Kit() with no riak-node in %s = %q, want an error", dir, k)
	}
	script := filepath.Join(dir, "riak-node")
	if err := os.WriteFile(script, []byte("#!/bin/sh\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	if k, err := Kit(); err != nil || k != script {
		t.Errorf("Kit() = %q, %v; want %q", k, err, script)
	}
}

func TestRepoRoot(t *testing.T) {
	root, err := repoRoot()
	if err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "go.mod")); err != nil {
		t.Errorf("repoRoot() = %s, which has no go.mod", root)
	}
}

// TestSweep: folders of test binaries that are gone are removed, those of
// live ones are left alone.
func TestSweep(t *testing.T) {
	tmp := t.TempDir()
	t.Setenv("TMPDIR", tmp)
	kit := filepath.Join(tmp, "riak-node")
	if err := os.WriteFile(kit, []byte("#!/bin/sh\nexit 0\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	// A PID that is not running: above the kernel's limit.
	dead := filepath.Join(tmp, dirPrefix+"4194305-aa")
	alive := filepath.Join(tmp, dirPrefix+strconv.Itoa(os.Getppid())+"-bb")
	mine, err := NewDir()
	if err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{dead, alive} {
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	sweep(kit)
	if _, err := os.Stat(dead); !os.IsNotExist(err) {
		t.Errorf("sweep left %s of a process that is gone", dead)
	}
	for _, d := range []string{alive, mine} {
		if _, err := os.Stat(d); err != nil {
			t.Errorf("sweep removed %s of a live process: %v", d, err)
		}
	}
}

// TestRestartKeepsConsensus: a lone node started with strong consistency
// has it, and every consensus group a leader, after SIGKILL and after a
// clean stop, each followed by Restart.
func TestRestartKeepsConsensus(t *testing.T) {
	if os.Getenv(EnvFaults) == "" {
		t.Skipf("set %s=1 to restart a node (minutes)", EnvFaults)
	}
	kit, err := Kit()
	if err != nil {
		t.Skip(err)
	}
	dir := t.TempDir()
	n, err := Start(kit, dir, "--strong-consistency")
	t.Cleanup(func() { exec.Command(kit, "stop", dir).Run() })
	if err != nil {
		t.Fatal(err)
	}
	for _, stop := range []struct {
		name string
		f    func() error
	}{{"SIGKILL", n.Kill}, {"stop", n.Stop}} {
		if err := stop.f(); err != nil {
			t.Fatal(err)
		}
		if err := n.Restart(); err != nil {
			t.Fatalf("Restart() after %s = %v", stop.name, err)
		}
		if on, err := n.Eval("riak_ensemble_manager:enabled()."); on != "true" {
			t.Errorf("after %s and Restart, riak_ensemble_manager:enabled() = %q, %v; want true", stop.name, on, err)
		}
		if bad, err := n.LeaderlessGroups(); bad != 0 || err != nil {
			t.Errorf("after %s and Restart, LeaderlessGroups() = %d, %v; want 0", stop.name, bad, err)
		}
	}
}
