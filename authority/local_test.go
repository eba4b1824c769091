package authority

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// The test binary re-executes itself as a local allocator when this
// variable names a runs.db: it allocates childRuns runs and prints them,
// one per line.
const (
	childEnv  = "CHIBRARY_AUTHORITY_TEST_CHILD"
	childRuns = 150
)

func TestMain(m *testing.M) {
	if path := os.Getenv(childEnv); path != "" {
		os.Exit(allocateChild(path))
	}
	os.Exit(m.Run())
}

func allocateChild(path string) int {
	l := NewLocal(path, Holder{Program: "child", PID: os.Getpid()}, LocalOptions{})
	w := bufio.NewWriter(os.Stdout)
	for range childRuns {
		lease, err := l.NewRun(context.Background())
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Fprintf(w, "%d %s\n", lease.Run, lease.Authority)
	}
	if err := w.Flush(); err != nil {
		return 1
	}
	return 0
}

func fmtRun(r uint32) string { return strconv.FormatUint(uint64(r), 10) }

func TestLocal(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "data", "runs.db")
	l := NewLocal(path, testHolder, LocalOptions{Scheme: shuffle.Mix})
	var first callnumber.Lease
	for want := uint32(1); want <= 3; want++ {
		lease, err := l.NewRun(ctx)
		if err != nil {
			t.Fatalf("NewRun = %v", err)
		}
		if lease.Run != want {
			t.Errorf("NewRun().Run = %d, want %d", lease.Run, want)
		}
		if err := lease.Validate(); err != nil {
			t.Errorf("lease %d: %v", lease.Run, err)
		}
		if want == 1 {
			first = lease
		} else if lease.Authority != first.Authority || lease.Key != first.Key {
			t.Errorf("lease %d from authority %s, want %s", lease.Run, lease.Authority, first.Authority)
		}
		if lease.Scheme != shuffle.Mix {
			t.Errorf("lease %d scheme %q, want mix", lease.Run, lease.Scheme)
		}
	}
	// Between allocations the file is free: a coordinator (or anyone) can
	// open it, and it is the same authority.
	a, err := Open(ctx, path, Options{LockTimeout: 1})
	if err != nil {
		t.Fatalf("Open between allocations = %v", err)
	}
	if a.ID() != first.Authority {
		t.Errorf("Open: authority %s, want %s", a.ID(), first.Authority)
	}
	// While it is held, Local says why and what to do.
	l2 := NewLocal(path, testHolder, LocalOptions{LockTimeout: 1})
	_, err = l2.NewRun(ctx)
	if !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "--coordinator") {
		t.Errorf("NewRun on a held file = %v, want ErrLocked suggesting --coordinator", err)
	}
	a.Close()
	if lease, err := l2.NewRun(ctx); err != nil || lease.Run != 4 {
		t.Errorf("NewRun after release = %d, %v, want 4, nil", lease.Run, err)
	}
}

func TestLocalConcurrentInProcess(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	var mu sync.Mutex
	seen := map[uint32]bool{}
	var wg sync.WaitGroup
	for range 8 {
		l := NewLocal(path, testHolder, LocalOptions{}) // separate instances contend for the file
		wg.Go(func() {
			for range 10 {
				lease, err := l.NewRun(context.Background())
				if err != nil {
					t.Errorf("NewRun = %v", err)
					return
				}
				mu.Lock()
				if seen[lease.Run] {
					t.Errorf("run %d issued twice", lease.Run)
				}
				seen[lease.Run] = true
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if len(seen) != 80 {
		t.Errorf("issued %d runs, want 80", len(seen))
	}
}

// TestLocalTwoProcesses runs two OS processes allocating from one runs.db
// at once (plus this one): no run is issued twice, and all come from one
// authority even though the file did not exist when they started.
func TestLocalTwoProcesses(t *testing.T) {
	if testing.Short() {
		t.Skip("spawns processes")
	}
	path := filepath.Join(t.TempDir(), "runs.db")
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	type result struct {
		out []byte
		err error
	}
	const procs = 2
	results := make([]result, procs)
	var wg sync.WaitGroup
	for i := range procs {
		cmd := exec.Command(exe, "-test.run=^$")
		cmd.Env = append(os.Environ(), childEnv+"="+path)
		var stderr strings.Builder
		cmd.Stderr = &stderr
		wg.Go(func() {
			out, err := cmd.Output()
			if err != nil {
				err = fmt.Errorf("%w: %s", err, stderr.String())
			}
			results[i] = result{out, err}
		})
	}
	// This process allocates too, through its own Local.
	local := NewLocal(path, testHolder, LocalOptions{})
	var mine []callnumber.Lease
	for range 50 {
		lease, err := local.NewRun(context.Background())
		if err != nil {
			t.Errorf("NewRun = %v", err)
			break
		}
		mine = append(mine, lease)
	}
	wg.Wait()

	owner := map[uint32]string{}
	authorities := map[string]bool{}
	claim := func(run uint32, who, auth string) {
		if prev, ok := owner[run]; ok {
			t.Errorf("run %d issued to %s and to %s", run, prev, who)
		}
		owner[run] = who
		authorities[auth] = true
	}
	for _, l := range mine {
		claim(l.Run, "parent", l.Authority)
	}
	for i, r := range results {
		if r.err != nil {
			t.Fatalf("child %d: %v", i, r.err)
		}
		lines := strings.Split(strings.TrimSpace(string(r.out)), "\n")
		if len(lines) != childRuns {
			t.Fatalf("child %d printed %d runs, want %d", i, len(lines), childRuns)
		}
		for _, line := range lines {
			runS, auth, _ := strings.Cut(line, " ")
			run, err := ParseRun(runS)
			if err != nil {
				t.Fatalf("child %d printed %q: %v", i, line, err)
			}
			claim(run, fmt.Sprintf("child %d", i), auth)
		}
	}
	if len(authorities) != 1 {
		t.Errorf("leases came from %d authorities, want 1: %v", len(authorities), authorities)
	}
	want := procs*childRuns + len(mine)
	if len(owner) != want {
		t.Errorf("%d distinct runs, want %d", len(owner), want)
	}
}
