package coordinator

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
)

// buildCoordinator builds cmd/coordinator into a temporary directory.
func buildCoordinator(t *testing.T) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the coordinator binary")
	}
	bin := filepath.Join(t.TempDir(), "coordinator")
	out, err := exec.Command("go", "build", "-o", bin, "github.com/chibrary/chibrary/cmd/coordinator").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// process is a coordinator running as a child process.
type process struct {
	cmd  *exec.Cmd
	url  string
	done chan struct{} // closed once stderr is drained
	mu   sync.Mutex
	tail []string // the last lines of its log, for failure messages
}

// startProcess starts the coordinator binary on a free loopback port and
// waits until it listens. The database and token file are given through
// the environment, to exercise the fallbacks.
func startProcess(t *testing.T, bin, db, tokenFile string) *process {
	t.Helper()
	cmd := exec.Command(bin, "--listen", "127.0.0.1:0", "--log-format", "json")
	cmd.Env = append(os.Environ(), "CHIBRARY_RUNS_DB="+db, "CHIBRARY_TOKEN_FILE="+tokenFile)
	stderr, err := cmd.StderrPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	p := &process{cmd: cmd, done: make(chan struct{})}
	listening := make(chan string, 1)
	go func() {
		defer close(p.done)
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			line := sc.Text()
			p.mu.Lock()
			if p.tail = append(p.tail, line); len(p.tail) > 20 {
				p.tail = p.tail[1:]
			}
			p.mu.Unlock()
			var rec struct{ Msg, URL string }
			if json.Unmarshal([]byte(line), &rec) == nil && rec.Msg == "listening" {
				listening <- rec.URL
			}
		}
		io.Copy(io.Discard, stderr)
	}()
	select {
	case p.url = <-listening:
	case <-p.done:
		cmd.Wait()
		t.Fatalf("the coordinator exited before listening:\n%s", p.log())
	}
	t.Cleanup(func() {
		if cmd.ProcessState == nil {
			cmd.Process.Kill()
			<-p.done
			cmd.Wait()
		}
	})
	return p
}

func (p *process) log() string {
	p.mu.Lock()
	defer p.mu.Unlock()
	return strings.Join(p.tail, "\n")
}

// wait waits for the process to exit, after its log is drained.
func (p *process) wait() error {
	<-p.done
	return p.cmd.Wait()
}

// hammer has clients take leases until stop says so or the server fails
// them; it returns every lease received.
func hammer(t *testing.T, url, token string, clients int, stop func(received int64) bool) []callnumber.Lease {
	var mu sync.Mutex
	var got []callnumber.Lease
	var n atomic.Int64
	var wg sync.WaitGroup
	for range clients {
		c := newClient(t, url, token, ClientOptions{MaxAttempts: 1})
		wg.Go(func() {
			for {
				l, err := c.NewRun(context.Background())
				if err != nil {
					return
				}
				mu.Lock()
				got = append(got, l)
				mu.Unlock()
				if stop(n.Add(1)) {
					return
				}
			}
		})
	}
	wg.Wait()
	return got
}

// TestKillAndRestart kills a coordinator with SIGKILL in the middle of a
// burst and restarts it on the same file: no run any client received is
// ever issued again, and every run a client received was recorded.
func TestKillAndRestart(t *testing.T) {
	bin := buildCoordinator(t)
	dir := t.TempDir()
	db, tokenFile := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")

	p := startProcess(t, bin, db, tokenFile)
	token, created, err := EnsureToken(tokenFile)
	if err != nil || created {
		t.Fatalf("the coordinator did not create its token file: %v", err)
	}
	var killed atomic.Bool
	first := hammer(t, p.url, token, 32, func(n int64) bool {
		if n == 500 && killed.CompareAndSwap(false, true) {
			// In the middle of the burst: 32 clients have requests in flight.
			if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Errorf("kill: %v", err)
			}
		}
		return false // run until the dead server fails every client
	})
	err = p.wait()
	var exit *exec.ExitError
	if !errors.As(err, &exit) || exit.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
		t.Fatalf("the first coordinator ended with %v, want killed by SIGKILL", err)
	}
	if len(first) < 500 {
		t.Fatalf("clients received %d leases before the kill, want at least 500", len(first))
	}

	p2 := startProcess(t, bin, db, tokenFile)
	second := hammer(t, p2.url, token, 32, func(n int64) bool { return n >= 500 })

	// Everything received before the kill was committed: the restarted
	// coordinator serves those leases, with the nonces the clients got.
	c := newClient(t, p2.url, token, ClientOptions{})
	for _, l := range first {
		rec, err := c.Lease(context.Background(), l.Run)
		if err != nil || rec.Nonce != l.Nonce {
			t.Errorf("run %d after restart: nonce %s, %v; a client received %s", l.Run, rec.Nonce, err, l.Nonce)
		}
	}
	if err := p2.cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := p2.wait(); err != nil {
		t.Errorf("the second coordinator ended with %v after SIGTERM, want exit status 0:\n%s", err, p2.log())
	}

	owner := map[uint32]string{}
	for phase, leases := range [][]callnumber.Lease{first, second} {
		for _, l := range leases {
			if prev, ok := owner[l.Run]; ok {
				t.Errorf("run %d received %s and again in phase %d", l.Run, prev, phase+1)
			}
			owner[l.Run] = fmt.Sprintf("in phase %d", phase+1)
			if l.Authority != first[0].Authority {
				t.Errorf("run %d from authority %s, want %s", l.Run, l.Authority, first[0].Authority)
			}
		}
	}
	// The database is whole after the clean stop.
	a, err := authority.Open(context.Background(), db, authority.Options{})
	if err != nil {
		t.Fatalf("reopening after the clean stop: %v", err)
	}
	a.Close()
	t.Logf("%d leases before the kill, %d after the restart", len(first), len(second))
}

// TestCommand checks the program's contract: --help, exit statuses, the
// token file's mode, backup and bump.
func TestCommand(t *testing.T) {
	bin := buildCoordinator(t)
	dir := t.TempDir()
	run := func(env []string, args ...string) (string, int) {
		t.Helper()
		cmd := exec.Command(bin, args...)
		cmd.Env = append(os.Environ(), env...)
		out, err := cmd.CombinedOutput()
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return string(out), exit.ExitCode()
		}
		if err != nil {
			t.Fatal(err)
		}
		return string(out), 0
	}
	db := filepath.Join(dir, "runs.db")
	for _, tc := range []struct {
		name string
		env  []string
		args []string
		code int
		want string
	}{
		{"help", nil, []string{"--help"}, 0, "Examples:"},
		{"help names the env fallbacks", nil, []string{"--help"}, 0, "$CHIBRARY_RUNS_DB"},
		{"backup help", nil, []string{"backup", "--help"}, 0, "Usage: coordinator backup"},
		{"bump help", nil, []string{"bump", "--help"}, 0, "Usage: coordinator bump"},
		{"no db", nil, []string{"--token-file", filepath.Join(dir, "t")}, 2, "--db is required"},
		{"no token", []string{"CHIBRARY_TOKEN="}, []string{"--db", db}, 2, "--token-file is required"},
		{"unknown flag", nil, []string{"--nope"}, 2, "nope"},
		{"bad scheme", nil, []string{"--db", db, "--token-file", filepath.Join(dir, "t"), "--scheme", "rot13"}, 2, "--scheme"},
		{"bad scheme from env", []string{"CHIBRARY_SCHEME=rot13"}, []string{"--db", db, "--token-file", filepath.Join(dir, "t")}, 2, "--scheme"},
		{"cert without key", nil, []string{"--db", db, "--token-file", filepath.Join(dir, "t"), "--tls-cert", "c.pem"}, 2, "--tls-key"},
		{"stray argument", nil, []string{"--db", db, "--token-file", filepath.Join(dir, "t"), "extra"}, 2, "extra"},
		{"backup without output", nil, []string{"backup", "--db", db}, 2, "one output file"},
		{"backup without source", nil, []string{"backup", filepath.Join(dir, "out.db")}, 2, "--db or --coordinator"},
		{"bump without --to", nil, []string{"bump", "--db", db}, 2, "--to"},
		{"bump to a non-number", nil, []string{"bump", "--db", db, "--to", "x"}, 2, "--to"},
		{"bump a missing file", nil, []string{"bump", "--db", db, "--to", "9"}, 1, "no such file"},
		{"serve a file that is not an authority", nil, []string{"--db", writeTemp(t, "hello"), "--token-file", filepath.Join(dir, "t")}, 1, "not a run authority database"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			out, code := run(tc.env, tc.args...)
			if code != tc.code || !strings.Contains(out, tc.want) {
				t.Errorf("coordinator %s = exit %d\n%s\nwant exit %d and %q", strings.Join(tc.args, " "), code, out, tc.code, tc.want)
			}
		})
	}

	// Serve creates the database and a private token file; backup goes
	// through it; bump works once it is stopped.
	tokenFile := filepath.Join(dir, "token")
	p := startProcess(t, bin, db, tokenFile)
	fi, err := os.Stat(tokenFile)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, %v, want mode 0600", fi, err)
	}
	token, _, _ := EnsureToken(tokenFile)
	leases := hammer(t, p.url, token, 4, func(n int64) bool { return n >= 20 })

	out := filepath.Join(dir, "backup.db")
	if got, code := run(nil, "backup", "--db", db, out); code != 1 || !strings.Contains(got, "--coordinator") {
		t.Errorf("backup --db of a served file = exit %d\n%s\nwant 1 and a hint to use --coordinator", code, got)
	}
	if got, code := run([]string{"CHIBRARY_COORDINATOR=" + p.url, "CHIBRARY_TOKEN_FILE=" + tokenFile}, "backup", out); code != 0 {
		t.Fatalf("backup through the coordinator = exit %d\n%s", code, got)
	}
	p.cmd.Process.Signal(syscall.SIGINT)
	if err := p.wait(); err != nil {
		t.Errorf("coordinator after SIGINT: %v, want exit 0", err)
	}
	b, err := authority.Open(context.Background(), out, authority.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the backup does not open: %v", err)
	}
	if b.ID() != leases[0].Authority {
		t.Errorf("backup of authority %s, want %s", b.ID(), leases[0].Authority)
	}
	b.Close()

	out2 := filepath.Join(dir, "backup2.db")
	if got, code := run(nil, "backup", "--db", db, out2); code != 0 {
		t.Errorf("backup --db of a stopped coordinator's file = exit %d\n%s", code, got)
	}
	if got, code := run(nil, "bump", "--db", out, "--to", "1000"); code != 0 || !strings.Contains(got, "1000") {
		t.Errorf("bump = exit %d\n%s", code, got)
	}
	if got, code := run(nil, "bump", "--db", out, "--to", "999"); code != 1 || !strings.Contains(got, "forwards") {
		t.Errorf("bump backwards = exit %d\n%s\nwant 1", code, got)
	}
}
