package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/internal/testkit/testmount"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// testArchive makes DIR/messages.db holding the signed fixture under run 1
// of a fixed test authority, and returns DIR, the codec and the number.
func testArchive(t *testing.T) (string, *callnumber.Codec, callnumber.Number, []byte) {
	t.Helper()
	dir := t.TempDir()
	st, err := boltstore.Open(t.Context(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var key shuffle.Key
	for i := range key {
		key[i] = byte(255 - i)
	}
	lease := callnumber.Lease{Run: 1, Authority: "test", Scheme: shuffle.Bits, Key: key, Nonce: "n1",
		Program: "importer", Host: "h1", PID: 123, Note: "cmd test", IssuedAt: time.Date(2024, 5, 6, 7, 8, 9, 0, time.UTC)}
	if err := st.RecordLease(t.Context(), lease); err != nil {
		t.Fatal(err)
	}
	codec, err := callnumber.NewCodec(shuffle.Bits, key)
	if err != nil {
		t.Fatal(err)
	}
	n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: 42})
	if err != nil {
		t.Fatal(err)
	}
	raw, err := os.ReadFile(filepath.Join("..", "..", "fixtures", "web", "signed.eml"))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Put(t.Context(), []store.Message{{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: "signed-1@example.com", List: "test"}}); err != nil {
		t.Fatal(err)
	}
	return dir, codec, n, raw
}

// runCmd runs the command in-process and returns its exit status, stdout
// and stderr.
func runCmd(t *testing.T, ctx context.Context, args ...string) (int, string, string) {
	t.Helper()
	var stdout, stderr bytes.Buffer
	err := run(ctx, args, strings.NewReader(""), &stdout, &stderr)
	status := cli.ExitStatus(&stderr, "resolver", err)
	return status, stdout.String(), stderr.String()
}

func TestGetAndInspect(t *testing.T) {
	dir, codec, n, raw := testArchive(t)
	v1 := codec.Number(1<<(callnumber.RunBits+callnumber.SequenceBits) | 1<<callnumber.SequenceBits).String()
	unknown, _ := codec.Encode(callnumber.Fields{Run: 1, Sequence: 43})
	tests := []struct {
		name      string
		args      []string
		status    int
		stdout    string // exact, unless empty
		stdoutHas []string
		stderrHas string
	}{
		{"get", []string{"get", "--data", dir, n.String()}, 0, string(raw), nil, ""},
		{"get via --store", []string{"get", "--store", "bolt:" + filepath.Join(dir, "messages.db"), n.String()}, 0, string(raw), nil, ""},
		{"get wrong length", []string{"get", "--data", dir, "abc"}, 2, "", nil, `"abc" is 3 characters long; a call number is 8 letters and digits`},
		{"get bad character", []string{"get", "--data", dir, "abcdefg!"}, 2, "", nil, `has "!" at position 8`},
		// 8 letters and digits not stored: no such message (a typo), not bad usage.
		{"get out of range", []string{"get", "--data", dir, "zzzzzzzz"}, 1, "", nil, "no message in this archive has call number zzzzzzzz"},
		{"get unknown version", []string{"get", "--data", dir, v1}, 1, "", nil, "no message in this archive has call number " + v1},
		{"get unknown", []string{"get", "--data", dir, unknown.String()}, 1, "", nil, "no message in this archive has call number " + unknown.String()},
		{"get no archive", []string{"get", "--data", filepath.Join(dir, "nope"), n.String()}, 1, "", nil, "resolver: no archive in " + filepath.Join(dir, "nope") + " (no messages.db): import messages into it first, or fix --data\n"},
		{"get, --data a file", []string{"get", "--data", filepath.Join(dir, "messages.db"), n.String()}, 1, "", nil, "resolver: --data " + filepath.Join(dir, "messages.db") + " is not a directory\n"},
		{"get no argument", []string{"get", "--data", dir}, 2, "", nil, "missing CALLNUMBER"},
		{"get two arguments", []string{"get", "--data", dir, n.String(), n.String()}, 2, "", nil, "one CALLNUMBER only"},
		{"inspect", []string{"inspect", "--data", dir, n.String()}, 0, "", []string{
			"callnumber       " + n.String() + "\n", "version          0\n", "run              1\n", "sequence         42\n",
			"lease.nonce      n1\n", "lease.program    importer\n", "lease.host       h1\n", "lease.pid        123\n",
			"lease.issued-at  2024-05-06T07:08:09Z\n", "message-id       signed-1@example.com\n",
		}, ""},
		{"inspect unknown", []string{"inspect", "--data", dir, unknown.String()}, 1, "", nil, "no message in this archive"},
		// Flags anywhere after the command; the command comes first, so
		// that a flag's value is never taken for it.
		{"get, flags after", []string{"get", n.String(), "--data", dir}, 0, string(raw), nil, ""},
		{"flags before the command", []string{"--data", dir, "get", n.String()}, 2, "", nil, "the command comes first, before its flags: resolver get --data " + dir + " " + n.String() + "\nRun 'resolver --help' for usage."},
		{"a flag's value that names a command", []string{"get", "--data", "inspect", n.String()}, 1, "", nil, "no archive in inspect"},
		{"get usage hint", []string{"get", "--data", dir}, 2, "", nil, "missing CALLNUMBER\nRun 'resolver get --help' for usage."},
		{"inspect usage hint", []string{"inspect", "--jsn", n.String()}, 2, "", nil, "Run 'resolver inspect --help' for usage."},
		{"serve usage hint", []string{"serve", "extra"}, 2, "", nil, "Run 'resolver serve --help' for usage."},
		{"changes-public without a token", []string{"serve", "--data", dir, "--changes-public"}, 2, "", nil, "--changes-public goes with --changes-token-file"},
		{"reindex usage hint", []string{"reindex", "--nope"}, 2, "", nil, "Run 'resolver reindex --help' for usage."},
		{"compact usage hint", []string{"compact", "--nope"}, 2, "", nil, "Run 'resolver compact --help' for usage."},
		{"help get", []string{"help", "get"}, 0, "", []string{"Usage: resolver get"}, ""},
		{"inspect --json after", []string{"inspect", n.String(), "--data", dir, "--json"}, 0, "", []string{`"callnumber":"` + n.String() + `"`}, ""},
		{"get, -- ends the flags", []string{"get", "--data", dir, "--", "--json"}, 2, "", nil, "is 6 characters long"},
		{"inspect malformed", []string{"inspect", "--json", "--data", dir, "0000000"}, 2, "", nil, "is 7 characters long"},
		{"no command", nil, 2, "", nil, "missing command"},
		{"unknown command", []string{"frobnicate"}, 2, "", nil, "unknown command"},
		{"help", []string{"--help"}, 0, "", []string{"Examples:"}, ""},
		{"get help", []string{"get", "--help"}, 0, "", []string{"resolver get --data", "[$CHIBRARY_DATA]"}, ""},
		{"version", []string{"--version"}, 0, "", []string{"resolver "}, ""},
		{"get version", []string{"get", "--version"}, 0, "", []string{"resolver "}, ""},
		{"bad flag", []string{"inspect", "--jsn", n.String()}, 2, "", nil, "unknown flag --jsn (did you mean --json?)"},
		{"serve --public-inbox missing", []string{"serve", "--data", dir, "--public-inbox", filepath.Join(dir, "nope")}, 1, "", nil, "cannot serve --public-inbox " + filepath.Join(dir, "nope")},
		{"serve --public-inbox a file", []string{"serve", "--data", dir, "--public-inbox", filepath.Join(dir, "messages.db")}, 1, "", nil, "not a directory"},
		{"serve --max-git-processes 0", []string{"serve", "--data", dir, "--max-git-processes", "0"}, 2, "", nil, "--max-git-processes must be at least 1"},
		{"serve help", []string{"serve", "--help"}, 0, "", []string{"--public-inbox OUT", "public-inbox-clone http://HOST/LIST/ LIST", "/manifest.js.gz"}, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(t, t.Context(), tt.args...)
			if status != tt.status {
				t.Fatalf("resolver %q exit status = %d, want %d; stderr %q", tt.args, status, tt.status, stderr)
			}
			if tt.stdout != "" && stdout != tt.stdout {
				t.Errorf("resolver %q stdout = %q, want %q", tt.args, stdout, tt.stdout)
			}
			for _, s := range tt.stdoutHas {
				if !strings.Contains(stdout, s) {
					t.Errorf("resolver %q stdout does not contain %q:\n%s", tt.args, s, stdout)
				}
			}
			if !strings.Contains(stderr, tt.stderrHas) {
				t.Errorf("resolver %q stderr = %q, want it to contain %q", tt.args, stderr, tt.stderrHas)
			}
			if status == 2 && tt.stderrHas != "Examples:" && strings.Count(strings.TrimSpace(stderr), "\n") > 1 {
				t.Errorf("resolver %q stderr = %q, want one line and the usage hint", tt.args, stderr)
			}
			if status != 0 && stdout != "" {
				t.Errorf("resolver %q failed but wrote %q to stdout", tt.args, stdout)
			}
		})
	}
}

func TestInspectJSON(t *testing.T) {
	dir, _, n, _ := testArchive(t)
	t.Setenv("CHIBRARY_DATA", dir) // the environment fallback of --data
	status, stdout, stderr := runCmd(t, t.Context(), "inspect", "--json", n.String())
	if status != 0 {
		t.Fatalf("exit status = %d, stderr %q", status, stderr)
	}
	var got map[string]any
	if err := json.Unmarshal([]byte(stdout), &got); err != nil {
		t.Fatalf("stdout %q is not JSON: %v", stdout, err)
	}
	if strings.Count(strings.TrimSpace(stdout), "\n") != 0 {
		t.Errorf("stdout %q is not one line", stdout)
	}
	lease, _ := got["lease"].(map[string]any)
	if got["callnumber"] != n.String() || got["version"] != 0.0 || got["run"] != 1.0 || got["sequence"] != 42.0 ||
		lease["nonce"] != "n1" || lease["authority"] != "test" || lease["program"] != "importer" || lease["run"] != 1.0 {
		t.Errorf("inspect --json = %s, want callnumber %s, version 0, run 1, sequence 42 and the lease", stdout, n)
	}
	if _, ok := lease["key"]; ok {
		t.Errorf("inspect --json shows the authority's key: %s", stdout)
	}
}

func TestServe(t *testing.T) {
	dir, _, n, raw := testArchive(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	t.Setenv("CHIBRARY_LISTEN", addr)
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		status         int
		stdout, stderr string
	}
	done := make(chan result, 1)
	go func() {
		s, o, e := runCmd(t, ctx, "serve", "--data", dir, "--log-format", "json")
		done <- result{s, o, e}
	}()
	var resp *http.Response
	for i := 0; ; i++ { // wait for the listener
		resp, err = http.Get("http://" + addr + "/" + n.String() + "/raw")
		if err == nil || i == 200 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		cancel()
		t.Fatalf("GET raw: %v; server: %+v", err, <-done)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || body.String() != string(raw) {
		t.Errorf("GET raw = %d %q, want 200 and the message", resp.StatusCode, body.String())
	}
	cancel()
	r := <-done
	if r.status != 0 {
		t.Errorf("serve exit status after SIGINT-like cancel = %d, want 0; stderr %q", r.status, r.stderr)
	}
	if !strings.Contains(r.stderr, `"msg":"request"`) || !strings.Contains(r.stderr, `"status":200`) {
		t.Errorf("serve logs %q: want a JSON access log line", r.stderr)
	}
}

// An archive on a read-only file system (a snapshot, a backup) is served
// and read without its lock file, and the log says it is read-only.
func TestReadOnlyArchive(t *testing.T) {
	dir, _, n, raw := testArchive(t)
	if err := os.Remove(filepath.Join(dir, "messages.db.lock")); err != nil {
		t.Fatal(err)
	}
	ro := testmount.ReadOnly(t, dir)
	status, stdout, stderr := runCmd(t, t.Context(), "get", "--data", ro, n.String())
	if status != 0 || stdout != string(raw) {
		t.Fatalf("get on a read-only archive = %d, %d bytes\n%s", status, len(stdout), stderr)
	}
	if !strings.Contains(stderr, "read-only") {
		t.Errorf("get on a read-only archive logs %q, want it to say it reads read-only", stderr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string, 1)
	go func() {
		_, _, e := runCmd(t, ctx, "serve", "--data", ro, "--listen", addr)
		done <- e
	}()
	var resp *http.Response
	for i := 0; ; i++ {
		resp, err = http.Get("http://" + addr + "/" + n.String() + "/raw")
		if err == nil || i == 200 {
			break
		}
		time.Sleep(25 * time.Millisecond)
	}
	if err != nil {
		cancel()
		t.Fatalf("GET raw: %v; server: %s", err, <-done)
	}
	var body bytes.Buffer
	body.ReadFrom(resp.Body)
	resp.Body.Close()
	cancel()
	logs := <-done
	if resp.StatusCode != 200 || body.String() != string(raw) {
		t.Errorf("GET raw from a read-only archive = %d %q, want 200 and the message", resp.StatusCode, body.String())
	}
	if !strings.Contains(logs, "read-only") {
		t.Errorf("serve logs %q, want a line saying the archive is served read-only", logs)
	}
	var names []string
	if ents, _ := os.ReadDir(dir); true {
		for _, e := range ents {
			names = append(names, e.Name())
		}
	}
	if !slices.Equal(names, []string{"messages.db", "messages.packs"}) {
		t.Errorf("the archive directory holds %q after serving it read-only, want messages.db and messages.packs alone", names)
	}
}

// resolver serve never creates an archive: on a --data or bolt: path
// that holds none (a typo), it says so in one line and exits 1, leaving
// nothing behind. An existing archive with no message is served.
func TestServeMissingArchive(t *testing.T) {
	dir := t.TempDir()
	for _, tt := range []struct {
		name, want string
		args       []string
	}{
		{"--data", "resolver: no archive in " + filepath.Join(dir, "typo") + " (no messages.db): import messages into it first, or fix --data\n",
			[]string{"--data", filepath.Join(dir, "typo")}},
		{"--store", "resolver: no archive at " + filepath.Join(dir, "typo2", "messages.db") + ": import messages into it first, or fix --store\n",
			[]string{"--store", "bolt:" + filepath.Join(dir, "typo2", "messages.db")}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(t, t.Context(), append([]string{"serve", "--listen", "127.0.0.1:0"}, tt.args...)...)
			if status != 1 || stdout != "" || stderr != tt.want {
				t.Errorf("serve %q = %d, stderr %q; want 1, %q", tt.args, status, stderr, tt.want)
			}
		})
	}
	if ents, _ := os.ReadDir(dir); len(ents) != 0 {
		t.Errorf("serve of a missing archive left %d files in %s, want none", len(ents), dir)
	}

	empty := filepath.Join(dir, "empty")
	st, err := boltstore.Open(t.Context(), filepath.Join(empty, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	base, stop := startServe(t, "--data", empty)
	if body := waitGet(t, base+"/api/v1/stats", 200); !strings.Contains(body, `"messages":0`) {
		t.Errorf("stats of an empty archive = %s, want 0 messages", body)
	}
	stop()
}

// A SIGTERM while serve still opens its store (a Riak node that does not
// answer) is a stop, exit status 0, as one while serving.
func TestServeSignalWhileStarting(t *testing.T) {
	dir := t.TempDir()
	riaktest.StopWhileStarting(t, run, func(addr string) []string {
		return []string{"serve", "--store", "riak://" + addr + "/signal", "--catalog", filepath.Join(dir, "catalog.db"), "--listen", "127.0.0.1:0"}
	})
}
