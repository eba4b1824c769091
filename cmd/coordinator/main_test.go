package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/shuffle"
)

// runCoord runs the command in-process with ctx and returns its exit
// status, stdout and stderr.
func runCoord(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := program.Run(ctx, args, nil, &stdout, &stderr)
	return cli.ExitStatus(&stderr, "coordinator", err), stdout.String(), stderr.String()
}

func TestUsage(t *testing.T) {
	dir := t.TempDir()
	db, token := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	for _, tt := range []struct {
		name   string
		args   []string
		status int
		out    string // in stdout, or stderr when status is not 0
	}{
		{"help", []string{"--help"}, 0, "Examples:"},
		{"help after other flags", []string{"--db", db, "--help"}, 0, "[$CHIBRARY_RUNS_DB]"},
		{"version", []string{"--version"}, 0, "coordinator "},
		{"backup help", []string{"backup", "--help"}, 0, "Usage: coordinator backup"},
		{"bump help", []string{"bump", "--help"}, 0, "Usage: coordinator bump"},
		{"help bump", []string{"help", "bump"}, 0, "Usage: coordinator bump"},
		// The command comes first: a flag's value that names a command is
		// the flag's (here serve's --token-file), and a command after
		// flags is refused, with the command line in order.
		{"a flag's value that names a command", []string{"--token-file", "bump", "--db", db, "--tls-cert", "c"}, 2, "--tls-cert and --tls-key go together"},
		{"flags before the command", []string{"--db", db, "bump", "--to", "5"}, 2, "it comes first: coordinator bump --db " + db + " --to 5)\nRun 'coordinator --help' for usage."},
		{"bump usage hint", []string{"bump", "--db", db}, 2, "bump wants --db and --to\nRun 'coordinator bump --help' for usage."},
		{"backup usage hint", []string{"backup", "--db", db}, 2, "backup wants one output file\nRun 'coordinator backup --help' for usage."},
		{"serve usage hint", []string{"--token-file", token}, 2, "--db is required (or --authority)\nRun 'coordinator --help' for usage."},
		{"stray argument before flags", []string{"extra", "--db", db, "--token-file", token}, 2, "unexpected argument \"extra\""},
		{"stray argument after flags", []string{"--db", db, "--token-file", token, "extra"}, 2, "unexpected argument \"extra\""},
		{"bad flag last", []string{"--db", db, "--token-file", token, "--lsten", ":0"}, 2, "lsten"},
		{"bump, a flag without its value", []string{"bump", "--to"}, 2, "flag needs an argument: --to"},
		{"backup output before flags", []string{"backup", filepath.Join(dir, "out"), "--db"}, 2, "db"},
		{"migrate help", []string{"migrate", "--help"}, 0, "Usage: coordinator migrate"},
		{"migrate usage hint", []string{"migrate", "--db", db}, 2, "migrate wants --db and --to\nRun 'coordinator migrate --help' for usage."},
		{"migrate to a file", []string{"migrate", "--db", db, "--to", "bolt:" + db}, 2, "want riak://"},
		{"migrate to a bad URL", []string{"migrate", "--db", db, "--to", "riak://"}, 2, "authority URL \"riak://\" names no Riak node"},
		{"db and authority", []string{"--db", db, "--authority", "riak://r1:8087", "--token-file", token}, 2, "give --db or --authority, not both"},
		{"bad authority", []string{"--authority", "http://x", "--token-file", token}, 2, "authority URL \"http://x\""},
		{"help names --authority", []string{"--help"}, 0, "[$CHIBRARY_AUTHORITY]"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCoord(t, t.Context(), tt.args...)
			out := stdout
			if tt.status != 0 {
				out = stderr
			}
			if status != tt.status || !strings.Contains(out, tt.out) {
				t.Errorf("coordinator %q = %d\nstdout %q\nstderr %q\nwant %d and %q", tt.args, status, stdout, stderr, tt.status, tt.out)
			}
			for _, f := range []string{db, token} {
				if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
					t.Errorf("coordinator %q created %s", tt.args, f)
				}
			}
		})
	}
}

// A coordinator that cannot listen (the port is taken) fails before it
// creates anything: no runs.db, no token file.
func TestPortInUse(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	dir := t.TempDir()
	db, token := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	status, _, stderr := runCoord(t, t.Context(), "--db", db, "--token-file", token, "--listen", ln.Addr().String())
	if status != 1 || !strings.Contains(stderr, "cannot listen") {
		t.Errorf("coordinator on a port in use = %d\n%s\nwant 1, cannot listen", status, stderr)
	}
	for _, f := range []string{db, token} {
		if _, err := os.Stat(f); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("coordinator that could not listen created %s", f)
		}
	}
}

// A new authority is mix unless told otherwise; --scheme for an existing
// authority of another scheme is an error naming the scheme it has.
func TestScheme(t *testing.T) {
	dir := t.TempDir()
	db, token := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	// Serve until the database exists, then stop.
	done := make(chan int, 1)
	go func() {
		status, _, _ := runCoord(t, ctx, "--db", db, "--token-file", token, "--listen", "127.0.0.1:0")
		done <- status
	}()
	for {
		if _, err := os.Stat(token); err == nil {
			if a, err := authority.Open(ctx, db, authority.Options{ReadOnly: true, LockTimeout: 10 * time.Millisecond}); err == nil {
				a.Close()
			} else if errors.Is(err, authority.ErrLocked) {
				break // served: it holds the file
			}
		}
		if ctx.Err() != nil {
			t.Fatal("the coordinator did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if status := <-done; status != 0 {
		t.Fatalf("coordinator stopped with status %d, want 0", status)
	}
	a, err := authority.Open(t.Context(), db, authority.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	scheme := a.Scheme()
	a.Close()
	if scheme != shuffle.Mix {
		t.Errorf("new authority's scheme = %s, want mix (the default)", scheme)
	}
	status, _, stderr := runCoord(t, t.Context(), "--db", db, "--token-file", token, "--listen", "127.0.0.1:0", "--scheme", "bits")
	if status != 1 || !strings.Contains(stderr, "has scheme mix, not bits") {
		t.Errorf("--scheme bits for a mix authority = %d\n%s\nwant 1 naming mix", status, stderr)
	}
}

// A SIGTERM while the coordinator still opens its authority (a Riak node
// that does not answer) is a stop, exit status 0, as one while serving.
func TestSignalWhileStarting(t *testing.T) {
	dir := t.TempDir()
	riaktest.StopWhileStarting(t, program.Run, func(addr string) []string {
		return []string{"--authority", "riak://" + addr + "/signal", "--token-file", filepath.Join(dir, "token"), "--listen", "127.0.0.1:0"}
	})
}
