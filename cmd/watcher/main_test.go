package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// build compiles the watcher into a temporary directory.
func build(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "watcher")
	out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func exitCode(err error) int {
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode()
	}
	if err != nil {
		return -1
	}
	return 0
}

func TestUsage(t *testing.T) {
	bin := build(t)
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("hunter2\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	if err := os.WriteFile(empty, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name   string
		args   []string
		env    []string
		want   int
		stderr string
	}{
		{"help", []string{"--help"}, nil, 0, "Examples:"},
		{"no imap", nil, nil, 2, "--imap is required"},
		{"bad scheme", []string{"--imap", "pop3://u@h/INBOX", "--password-file", pw}, nil, 2, "scheme"},
		{"password in URL", []string{"--imap", "imaps://u:hunter2@h/INBOX"}, nil, 2, "password"},
		{"bad after", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--after", "archive"}, nil, 2, "--after"},
		{"bad after from env", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw}, []string{"CHIBRARY_AFTER=move:"}, 2, "CHIBRARY_AFTER"},
		{"move into itself", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--after", "move:INBOX"}, nil, 2, "cannot move"},
		{"no password", []string{"--imap", "imaps://u@h/INBOX"}, nil, 2, "no IMAP password"},
		{"empty password file", []string{"--imap", "imaps://u@h/INBOX", "--password-file", empty}, nil, 1, "empty"},
		{"store without state", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--store", "riak://127.0.0.1:1/x"}, nil, 2, "--state"},
		{"stray argument", []string{"--imap", "imaps://u@h/INBOX", "extra"}, nil, 2, "unexpected argument"},
		{"tls-ca and insecure", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--tls-ca", pw, "--insecure-skip-verify"}, nil, 2, "contradict"},
		{"tls-ca from env and insecure", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--insecure-skip-verify"}, []string{"CHIBRARY_IMAP_CA=" + pw}, 2, "contradict"},
		{"tls-ca without certificate", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--tls-ca", empty}, nil, 1, "holds no PEM certificate"},
		{"tls-ca missing", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--tls-ca", empty + ".missing"}, nil, 1, "--tls-ca: cannot read the CA file"},
		// Flags anywhere; a stray argument is refused wherever it is.
		{"flags after a stray argument", []string{"extra", "--imap", "imaps://u@h/INBOX", "--password-file", pw}, nil, 2, "unexpected argument \"extra\""},
		{"a bad flag last", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--aftr", "seen"}, nil, 2, "aftr"},
		{"version", []string{"--version"}, nil, 0, "watcher "},
		{"no scheme", []string{"--imap", "archive@127.0.0.1:11143", "--password-file", pw}, nil, 2, "has no scheme"},
		{"listen without a host", []string{"--imap", "imaps://u@h/INBOX", "--password-file", pw, "--metrics-listen", "9101"}, nil, 2, "127.0.0.1:9101"},
		// What the server says is wrong is said before any archive is
		// created: nothing listens on a closed port.
		{"nothing at that port", []string{"--imap", "imap://u@127.0.0.1:" + closedPort(t) + "/INBOX", "--password-file", pw}, nil, 1, "is the host and port of --imap right?"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// Killed if it runs on: every case must fail at once.
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, bin, tt.args...)
			// A case that wrongly gets as far as the default store
			// (./archive) creates it there, not in the source tree.
			cmd.Dir = t.TempDir()
			data := filepath.Join(cmd.Dir, "archive")
			cmd.Env = append(cleanEnv(), tt.env...)
			var stderr bytes.Buffer
			cmd.Stderr, cmd.Stdout = &stderr, &stderr
			err := cmd.Run()
			if got := exitCode(err); got != tt.want {
				t.Errorf("watcher %q exit status = %d, want %d\n%s", tt.args, got, tt.want, stderr.String())
			}
			if !strings.Contains(stderr.String(), tt.stderr) {
				t.Errorf("watcher %q stderr = %q, want it to contain %q", tt.args, stderr.String(), tt.stderr)
			}
			if strings.Contains(stderr.String(), "hunter2") {
				t.Errorf("watcher %q printed the password: %q", tt.args, stderr.String())
			}
			if _, err := os.Stat(data); err == nil {
				t.Errorf("watcher %q created the data directory before failing", tt.args)
			}
		})
	}
}

// closedPort returns a loopback port nothing listens on.
func closedPort(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	_, port, _ := net.SplitHostPort(l.Addr().String())
	return port
}

// TestWrongPassword: a refused login stops the watcher with exit status 1
// before it creates the archive.
func TestWrongPassword(t *testing.T) {
	bin := build(t)
	srv := dovecottest.Start(t, dovecottest.Options{})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte("not the password\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	data := filepath.Join(t.TempDir(), "archive")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, "--imap", "imap://"+srv.User+"@"+srv.Addr+"/INBOX", "--password-file", pw, "--data", data)
	cmd.Env = cleanEnv()
	out, err := cmd.CombinedOutput()
	if code := exitCode(err); code != 1 || !strings.Contains(string(out), "login refused") {
		t.Errorf("a wrong password: exit %d\n%s", code, out)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("a wrong password left %s behind (%v)", data, err)
	}
}

// cleanEnv is the environment without the CHIBRARY_ variables of whoever
// runs the tests.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHIBRARY_") {
			env = append(env, kv)
		}
	}
	return env
}

func message(i int) []byte {
	return fmt.Appendf(nil, "From: s%d@example.org\nSubject: kill test %d\nMessage-ID: <k%d@example.org>\n\nbody %d\n", i, i, i, i)
}

// TestKillAndRestart: a watcher killed with SIGKILL in the middle of the
// first pass and started again archives every message exactly once; a
// SIGTERM then stops it with status 0.
func TestKillAndRestart(t *testing.T) {
	const total = 300
	var msgs [][]byte
	for i := range total {
		msgs = append(msgs, message(i))
	}
	srv := dovecottest.Start(t, dovecottest.Options{Populate: func(dir string) error {
		for i, m := range msgs {
			if err := os.WriteFile(filepath.Join(dir, "cur", dovecottest.MaildirName(i, len(m))), m, 0o644); err != nil {
				return err
			}
		}
		return nil
	}})
	bin := build(t)
	data := t.TempDir()
	ctx := context.Background()
	st, err := boltstore.Open(ctx, filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	count := func() int64 {
		n, err := st.Count(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	waitFor := func(cond func(int64) bool, what string) {
		t.Helper()
		deadline := time.Now().Add(120 * time.Second)
		for !cond(count()) {
			if time.Now().After(deadline) {
				t.Fatalf("store holds %d messages after 120 s, want %s", count(), what)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	startWatcher := func(log string) *exec.Cmd {
		f, err := os.Create(filepath.Join(data, log))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { f.Close() })
		cmd := exec.Command(bin, "--imap", "imap://"+srv.User+"@"+srv.Addr+"/INBOX", "--data", data,
			"--batch-messages", "10", "--log-level", "debug")
		cmd.Env = append(cleanEnv(), "CHIBRARY_IMAP_PASSWORD="+srv.Password)
		cmd.Stdout, cmd.Stderr = f, f
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
		return cmd
	}

	first := startWatcher("first.log")
	waitFor(func(n int64) bool { return n >= 40 }, "at least 40")
	if err := first.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	first.Wait()
	killedAt := count()
	if killedAt >= total {
		t.Skipf("the first pass ended (%d messages) before the kill; nothing to show", killedAt)
	}

	second := startWatcher("second.log")
	waitFor(func(n int64) bool { return n >= total }, fmt.Sprint(total))
	// Let the second run reach IDLE, then stop it cleanly.
	if err := second.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := second.Wait(); err != nil {
		log, _ := os.ReadFile(filepath.Join(data, "second.log"))
		t.Fatalf("watcher after SIGTERM: %v, want exit status 0\n%s", err, log)
	}
	if got := count(); got != total {
		t.Fatalf("store holds %d messages, want %d (killed at %d)", got, total, killedAt)
	}
	for _, m := range msgs {
		if _, err := st.ByDigest(ctx, store.DigestOf(m)); err != nil {
			t.Fatalf("message %.30q not stored: %v", m, err)
		}
	}
	log, _ := os.ReadFile(filepath.Join(data, "second.log"))
	if strings.Contains(string(log), srv.Password) {
		t.Errorf("the log shows the password")
	}
	t.Logf("killed after %d of %d messages; the restart archived the rest once", killedAt, total)
}

// TestSignalWhileStarting: a SIGTERM that comes while the watcher is still
// reaching its store (a Riak node that accepts connections and never
// answers) stops it with status 0, as one during a batch does.
func TestSignalWhileStarting(t *testing.T) {
	bin := build(t)
	srv := dovecottest.Start(t, dovecottest.Options{})
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	reached := make(chan net.Conn, 64)
	go func() {
		for {
			c, err := silent.Accept()
			if err != nil {
				close(reached)
				return
			}
			reached <- c // held open, never answered
		}
	}()
	dir := t.TempDir()
	logFile, err := os.Create(filepath.Join(dir, "watcher.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logFile.Close()
	log := func() string { b, _ := os.ReadFile(logFile.Name()); return string(b) }
	cmd := exec.Command(bin, "--imap", "imap://"+srv.User+"@"+srv.Addr+"/INBOX",
		"--store", "riak://"+silent.Addr().String()+"/signal", "--state", filepath.Join(dir, "state.json"), "--data", dir)
	cmd.Env = append(cleanEnv(), "CHIBRARY_IMAP_PASSWORD="+srv.Password)
	cmd.Stdout, cmd.Stderr = logFile, logFile
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Process.Kill()
	select {
	case c := <-reached:
		defer c.Close()
	case <-time.After(time.Minute):
		t.Fatalf("the watcher did not reach the store in a minute\n%s", log())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("watcher stopped while opening its store: %v, want exit status 0\n%s", err, log())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("the watcher did not stop within 30 s of SIGTERM\n%s", log())
	}
	if !strings.Contains(log(), "stopped while starting") {
		t.Errorf("the log does not say the watcher stopped while starting:\n%s", log())
	}
}

// TestStoreLocations: with --store bolt:DIR/messages.db and no --state,
// the watcher keeps its state and the local run authority beside the
// store, wherever it runs from: nothing appears in ./archive of the
// working directory, and a run from another directory goes on from the
// same state (it archives nothing twice).
func TestStoreLocations(t *testing.T) {
	const total = 5
	srv := dovecottest.Start(t, dovecottest.Options{Populate: func(dir string) error {
		for i := range total {
			m := message(i)
			if err := os.WriteFile(filepath.Join(dir, "cur", dovecottest.MaildirName(i, len(m))), m, 0o644); err != nil {
				return err
			}
		}
		return nil
	}})
	bin := build(t)
	data := t.TempDir()
	url := "bolt:" + filepath.Join(data, "messages.db")
	for i := range 2 {
		cwd := t.TempDir()
		var out bytes.Buffer
		cmd := exec.Command(bin, "--imap", "imap://"+srv.User+"@"+srv.Addr+"/INBOX", "--store", url, "--log-level", "debug")
		cmd.Dir = cwd
		cmd.Env = append(cleanEnv(), "CHIBRARY_IMAP_PASSWORD="+srv.Password)
		cmd.Stdout, cmd.Stderr = &out, &out
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// The first run has archived all once the state beside the
		// store says so; the second is given time to archive anything
		// again, which it must not.
		deadline := time.Now().Add(60 * time.Second)
		for i == 0 && lastUID(t, data) != total {
			if time.Now().After(deadline) {
				cmd.Process.Kill()
				cmd.Wait()
				t.Fatalf("the state beside the store does not reach UID %d within 60 s:\n%s", total, out.String())
			}
			time.Sleep(50 * time.Millisecond)
		}
		if i == 1 {
			time.Sleep(2 * time.Second)
		}
		cmd.Process.Signal(syscall.SIGTERM)
		if err := cmd.Wait(); err != nil {
			t.Fatalf("run %d: watcher after SIGTERM: %v, want exit status 0\n%s", i+1, err, out.String())
		}
		if _, err := os.Stat(filepath.Join(cwd, "archive")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("run %d made ./archive in its working directory (%v)", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "runs.db")); err != nil {
		t.Errorf("no runs.db beside the store: %v", err)
	}
	st, err := boltstore.Open(t.Context(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.Count(t.Context()); err != nil || n != total {
		t.Errorf("the store holds %d messages (%v), want %d", n, err, total)
	}
}

// lastUID is the last UID in the one watcher state file under data, 0
// while there is none.
func lastUID(t *testing.T, data string) uint32 {
	t.Helper()
	states, _ := filepath.Glob(filepath.Join(data, "watcher", "*.json"))
	if len(states) != 1 {
		return 0
	}
	b, err := os.ReadFile(states[0])
	if err != nil {
		return 0
	}
	var st struct {
		LastUID uint32 `json:"last_uid"`
	}
	if json.Unmarshal(b, &st) != nil {
		return 0
	}
	return st.LastUID
}
