// Package riaktest gives tests a real Riak KV node: the one $EnvAddr names,
// or else one it starts once per test binary from the Riak test kit
// (../shared/riak next to the repository, or $EnvKit). Without either,
// tests that need Riak skip, and say why. A test binary that uses Addr runs
// its tests through Main, so that the node it started is stopped:
//
//	func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }
//
// The next binary that starts a node stops one left by a killed binary.
package riaktest

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
)

// Environment variables.
const (
	// EnvAddr names existing nodes (host:port,...) with the bucket types of
	// the riakstore package doc and strong consistency.
	EnvAddr = "CHIBRARY_TEST_RIAK"
	EnvKit  = "CHIBRARY_RIAK_KIT" // the folder holding riak-node
	// EnvFaults, set to 1, runs the tests that kill and restart nodes
	// (minutes each on 2 cores; not in every CI run).
	EnvFaults = "CHIBRARY_RIAK_FAULTS"
)

// dirPrefix, then the test binary's PID, names every node folder made.
const dirPrefix = "chibrary-riaktest-"

var shared struct {
	once sync.Once
	addr string
	node *Node
	err  error
	skip string
}

// Addr returns the address of a Riak node for tests, starting one on the
// first call. It skips the test when there is no node to be had, and fails
// it when the kit is there but the node does not start.
func Addr(t testing.TB) string {
	t.Helper()
	shared.once.Do(func() {
		if a := os.Getenv(EnvAddr); a != "" {
			shared.addr = a
			return
		}
		kit, err := Kit()
		if err != nil {
			shared.skip = fmt.Sprintf("no Riak node for this test: set %s=host:8087 to a node with the bucket types of the riakstore package doc and strong consistency, or put the Riak test kit in ../shared/riak next to the repository (%v)", EnvAddr, err)
			return
		}
		sweep(kit)
		dir, err := NewDir()
		if err != nil {
			shared.err = err
			return
		}
		n, err := Start(kit, dir, "--strong-consistency")
		if err != nil {
			exec.Command(kit, "stop", dir).Run()
			os.RemoveAll(dir)
			shared.err = err
			return
		}
		shared.node, shared.addr = n, n.PB
	})
	if shared.skip != "" {
		t.Skip(shared.skip)
	}
	if shared.err != nil {
		t.Fatalf("cannot start a Riak node for the tests: %v", shared.err)
	}
	return shared.addr
}

// Main runs the tests, then stops and removes the nodes this package started.
func Main(m *testing.M) int {
	code := m.Run()
	for _, n := range append([]*Node{shared.node, plain.node}, sharedCluster.nodes...) {
		if n == nil {
			continue
		}
		if err := n.Stop(); err != nil {
			fmt.Fprintf(os.Stderr, "riaktest: %v\n", err)
		}
		os.RemoveAll(n.Dir)
	}
	return code
}

// BucketType creates and activates a bucket type on the node Addr started
// (see Node.BucketType), or skips the test for a node of EnvAddr.
func BucketType(t testing.TB, name, props string) {
	t.Helper()
	Addr(t)
	if shared.node == nil {
		t.Skipf("the Riak node %s names was not started by this test binary: cannot create bucket type %s on it", EnvAddr, name)
	}
	if err := shared.node.BucketType(name, props); err != nil {
		t.Fatal(err)
	}
}

// ClaimsType is the store's strongly consistent bucket type.
const ClaimsType = "chibrary_claims"

var plain struct {
	once sync.Once
	node *Node
	err  error
	skip string
}

// NoConsensus returns the address of a second node, with every bucket type
// the store uses but strong consistency off in riak.conf, so that no
// consistent request can be served. It needs the kit.
func NoConsensus(t testing.TB) string {
	t.Helper()
	plain.once.Do(func() {
		kit, err := Kit()
		if err != nil {
			plain.skip = fmt.Sprintf("no Riak test kit to start a node without strong consistency (put it in ../shared/riak next to the repository): %v", err)
			return
		}
		sweep(kit)
		dir, err := NewDir()
		if err != nil {
			plain.err = err
			return
		}
		n, err := Start(kit, dir)
		if err == nil {
			err = n.BucketType(ClaimsType, `{"props":{"consistent":true}}`)
		}
		if err != nil {
			if n != nil {
				n.Stop()
			} else {
				exec.Command(kit, "stop", dir).Run()
			}
			os.RemoveAll(dir)
			plain.err = err
			return
		}
		plain.node = n
	})
	if plain.skip != "" {
		t.Skip(plain.skip)
	}
	if plain.err != nil {
		t.Fatalf("cannot start a Riak node without strong consistency: %v", plain.err)
	}
	return plain.node.PB
}

// Silent returns the address of a "node" that accepts connections and
// never answers, and a channel that receives each connection it accepts
// (held open until the test ends): a program that opens a store or an
// authority there is held while starting, for as long as a test needs.
func Silent(t testing.TB) (addr string, reached <-chan net.Conn) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	conns := make(chan net.Conn, 64)
	var held []net.Conn
	var mu sync.Mutex
	done := make(chan struct{})
	go func() {
		defer close(done)
		for {
			c, err := ln.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			held = append(held, c)
			mu.Unlock()
			select {
			case conns <- c:
			default:
			}
		}
	}()
	t.Cleanup(func() {
		ln.Close()
		<-done
		mu.Lock()
		defer mu.Unlock()
		for _, c := range held {
			c.Close()
		}
	})
	return ln.Addr().String(), conns
}

// StopWhileStarting runs a daemon's run function with the arguments args
// returns for a silent node's address (Silent), cancels its context (as
// SIGTERM does) once it has reached that node, and fails unless run then
// returns nil within 30 s and its log says it stopped while starting.
func StopWhileStarting(t *testing.T, run func(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) error, args func(addr string) []string) {
	t.Helper()
	addr, reached := Silent(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var out syncbuf.Buffer
	done := make(chan error, 1)
	go func() { done <- run(ctx, args(addr), strings.NewReader(""), &out, &out) }()
	select {
	case <-reached:
	case err := <-done:
		t.Fatalf("it ended before reaching the node: %v\n%s", err, out.String())
	case <-time.After(time.Minute):
		t.Fatalf("it did not reach the node in a minute\n%s", out.String())
	}
	cancel()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("stopped while reaching the node: %v, want nil (exit status 0)\n%s", err, out.String())
		}
	case <-time.After(30 * time.Second):
		t.Fatalf("it did not stop within 30 s of its context's end\n%s", out.String())
	}
	if !strings.Contains(out.String(), "stopped while starting") {
		t.Errorf("the log does not say it stopped while starting:\n%s", out.String())
	}
}

// Kit returns the path of the kit's riak-node script.
func Kit() (string, error) {
	var dir string
	if d := os.Getenv(EnvKit); d != "" {
		dir = d
	} else {
		root, err := repoRoot()
		if err != nil {
			return "", err
		}
		dir = filepath.Join(root, "..", "shared", "riak")
	}
	script := filepath.Join(dir, "riak-node")
	if _, err := os.Stat(script); err != nil {
		return "", fmt.Errorf("no Riak test kit: %w", err)
	}
	return script, nil
}

// repoRoot finds the folder holding go.mod, from the working directory up.
func repoRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		up := filepath.Dir(dir)
		if up == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = up
	}
}

// NewDir makes an empty folder for a node, named for sweep.
func NewDir() (string, error) {
	b := make([]byte, 4)
	rand.Read(b)
	dir := filepath.Join(os.TempDir(), dirPrefix+strconv.Itoa(os.Getpid())+"-"+hex.EncodeToString(b))
	if err := os.Mkdir(dir, 0o755); err != nil {
		return "", err
	}
	return dir, nil
}

// sweep stops and removes the node folders of test binaries that are gone.
func sweep(kit string) {
	dirs, _ := filepath.Glob(filepath.Join(os.TempDir(), dirPrefix+"*"))
	for _, d := range dirs {
		pidText, _, _ := strings.Cut(strings.TrimPrefix(filepath.Base(d), dirPrefix), "-")
		pid, err := strconv.Atoi(pidText)
		if err != nil || pid == os.Getpid() || syscall.Kill(pid, 0) == nil {
			continue
		}
		exec.Command(kit, "stop", d).Run()
		os.RemoveAll(d)
	}
}

// Node is a node started from the kit.
type Node struct {
	Kit  string // the riak-node script
	Dir  string
	PB   string // protocol buffers address, host:port
	HTTP string // HTTP address, host:port
	Name string // Erlang node name
	// sc is the strong consistency flag to restart with: the kit rewrites
	// the setting at every start.
	sc string
}

// Start starts a node in dir (riak-node start DIR ARGS...) and waits until
// it is ready.
func Start(kit, dir string, args ...string) (*Node, error) {
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kit, append([]string{"start", dir}, args...)...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return nil, fmt.Errorf("riak-node start %s %s: %v\n%s", dir, strings.Join(args, " "), err, tail(stderr.String(), 40))
	}
	n := &Node{Kit: kit, Dir: dir}
	for _, a := range args {
		if strings.HasPrefix(a, "--strong-consistency") {
			n.sc = "--strong-consistency"
		}
	}
	sc := bufio.NewScanner(&stdout)
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "pb":
			n.PB = v
		case "http":
			n.HTTP = v
		case "name":
			n.Name = v
		}
	}
	if n.PB == "" {
		return nil, fmt.Errorf("riak-node start %s printed no pb= line:\n%s", dir, stdout.String())
	}
	joining := false
	for _, a := range args {
		joining = joining || a == "--join"
	}
	if !joining {
		// The kit creates the other bucket types the store needs.
		if err := n.BucketType(OnceType, `{"props":{"write_once":true}}`); err != nil {
			return nil, err
		}
	}
	return n, nil
}

// OnceType is the store's bucket type the kit does not create itself.
const OnceType = "chibrary_once"

// Eval evaluates an Erlang expression on the node and returns its output.
func (n *Node) Eval(expr string) (string, error) {
	out, err := exec.Command(n.Kit, "eval", n.Dir, expr).Output()
	if err != nil {
		return "", fmt.Errorf("riak-node eval %s %q: %v", n.Dir, expr, err)
	}
	return strings.TrimSpace(string(out)), nil
}

// BucketType creates and activates a bucket type with the given properties
// (JSON), unless it is active already; it is activated once every node of
// the cluster knows it.
func (n *Node) BucketType(name, props string) error {
	esc := strings.ReplaceAll(props, `"`, `\"`)
	deadline := time.Now().Add(2 * time.Minute)
	for time.Now().Before(deadline) {
		st, err := n.Eval(`riak_core_bucket_type:status(<<"` + name + `">>).`)
		if err != nil {
			return err
		}
		switch st {
		case "active":
			return nil
		case "undefined":
			if _, err := n.Eval(`riak_kv_console:bucket_type_create(["` + name + `", "` + esc + `"]).`); err != nil {
				return err
			}
		case "ready":
			if _, err := n.Eval(`riak_core_bucket_type:activate(<<"` + name + `">>).`); err != nil {
				return err
			}
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("bucket type %s not active on %s after 2 minutes", name, n.Name)
}

// waitType waits until the node knows the bucket type as active.
func (n *Node) waitType(name string) error {
	for range 240 {
		st, err := n.Eval(`riak_core_bucket_type:status(<<"` + name + `">>).`)
		if err != nil {
			return err
		}
		if st == "active" {
			return nil
		}
		time.Sleep(500 * time.Millisecond)
	}
	return fmt.Errorf("bucket type %s not active on %s after 2 minutes", name, n.Name)
}

// Restart starts the node again after Stop or Kill, with its ports, data
// and cluster.
func (n *Node) Restart() error {
	var args []string
	if n.sc != "" {
		args = append(args, n.sc)
	}
	m, err := Start(n.Kit, n.Dir, args...)
	if err != nil {
		return err
	}
	if m.PB != n.PB {
		return fmt.Errorf("node %s came back on %s, not %s", n.Dir, m.PB, n.PB)
	}
	if n.sc == "" {
		return nil
	}
	return n.keepConsensus()
}

// keepConsensus makes sure that a node started with strong consistency
// has it after a restart: a node alone enables the consensus subsystem
// itself (a cluster's claimant does it for a cluster of 3 or more), and
// the kit enables it only at the start that made the node. It fails if
// the subsystem is off on a node of a cluster, or does not serve.
func (n *Node) keepConsensus() error {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		out, err := n.Eval(`case riak_ensemble_manager:enabled() of true -> enabled; false -> case length(riak_core_ring:all_members(element(2, riak_core_ring_manager:get_my_ring()))) of 1 -> riak_ensemble_manager:enable(), enabling; _ -> off_in_cluster end end.`)
		if err != nil {
			return err
		}
		if out == "enabled" {
			break
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s restarted with strong consistency off (%s) for 2 minutes", n.Name, out)
		}
		time.Sleep(time.Second)
	}
	for {
		bad, err := n.LeaderlessGroups()
		if err == nil && bad == 0 {
			return nil
		}
		if time.Now().After(deadline) {
			return fmt.Errorf("node %s restarted: %d consensus groups without a leader with a quorum after 2 minutes (%v)", n.Name, bad, err)
		}
		time.Sleep(time.Second)
	}
}

// LeaderlessGroups returns how many consensus groups the node knows have
// no leader with a quorum now (riak admin ensemble-status shows them).
func (n *Node) LeaderlessGroups() (int, error) {
	out, err := n.Eval(`{ok, Ens} = riak_ensemble_manager:known_ensembles(), length([E || {E, _} <- Ens, riak_ensemble_manager:get_leader(E) == undefined orelse not riak_ensemble_manager:check_quorum(E, 2000)]).`)
	if err != nil {
		return 0, err
	}
	bad, err := strconv.Atoi(out)
	if err != nil {
		return 0, fmt.Errorf("riak-node eval %s: %q is not a count of groups", n.Dir, out)
	}
	return bad, nil
}

// Configure stops the node, sets settings in its riak.conf and starts it
// again.
func (n *Node) Configure(settings map[string]string) error {
	if err := n.Stop(); err != nil {
		return err
	}
	path := filepath.Join(n.Dir, "etc", "riak.conf")
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	lines := strings.Split(string(b), "\n")
	for k, v := range settings {
		set := false
		for i, l := range lines {
			if key, _, ok := strings.Cut(l, "="); ok && strings.TrimSpace(key) == k && !strings.HasPrefix(strings.TrimSpace(l), "#") {
				lines[i], set = k+" = "+v, true
			}
		}
		if !set {
			lines = append(lines, k+" = "+v)
		}
	}
	if err := os.WriteFile(path, []byte(strings.Join(lines, "\n")), 0o644); err != nil {
		return err
	}
	return n.Restart()
}

// Stop stops the node cleanly.
func (n *Node) Stop() error {
	out, err := exec.Command(n.Kit, "stop", n.Dir).CombinedOutput()
	if err != nil {
		return fmt.Errorf("riak-node stop %s: %v\n%s", n.Dir, err, out)
	}
	return nil
}

// CPU returns the user and system CPU time of the node's Erlang VM so far.
func (n *Node) CPU() (time.Duration, error) {
	pid, err := n.pid()
	if err != nil {
		return 0, err
	}
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// The fields after the command name, which is in parentheses.
	i := strings.LastIndexByte(string(b), ')')
	f := strings.Fields(string(b)[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	utime, err1 := strconv.ParseInt(f[11], 10, 64)
	stime, err2 := strconv.ParseInt(f[12], 10, 64)
	if err1 != nil || err2 != nil {
		return 0, fmt.Errorf("cannot read /proc/%d/stat", pid)
	}
	return time.Duration(utime+stime) * time.Second / 100, nil // USER_HZ is 100 on Linux
}

func (n *Node) pid() (int, error) {
	b, err := os.ReadFile(filepath.Join(n.Dir, ".riak-node", "beam.pid"))
	if err != nil {
		return 0, fmt.Errorf("cannot find the node's process: %w", err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		return 0, fmt.Errorf("cannot find the node's process: %q", b)
	}
	return pid, nil
}

// Kill ends the node's Erlang VM with SIGKILL, as a crash would, and waits
// until it is gone.
func (n *Node) Kill() error {
	pid, err := n.pid()
	if err != nil {
		return err
	}
	if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
		return fmt.Errorf("cannot kill node process %d: %w", pid, err)
	}
	for range 200 {
		if syscall.Kill(pid, 0) != nil {
			return nil
		}
		time.Sleep(50 * time.Millisecond)
	}
	return fmt.Errorf("node process %d still there after SIGKILL", pid)
}

// Cluster starts size nodes with strong consistency and joins them into
// one cluster, removed by the test's cleanup. It needs the kit: EnvAddr's
// nodes cannot be stopped and started.
func Cluster(t testing.TB, size int) []*Node {
	t.Helper()
	kit, err := Kit()
	if err != nil {
		t.Skipf("no Riak test kit to start a cluster with (put it in ../shared/riak next to the repository): %v", err)
	}
	var nodes []*Node
	t.Cleanup(func() {
		for _, n := range nodes {
			if err := n.Stop(); err != nil {
				t.Errorf("%v", err)
			}
			os.RemoveAll(n.Dir)
		}
	})
	if err := startCluster(kit, size, &nodes, t.Logf); err != nil {
		t.Fatal(err)
	}
	return nodes
}

var sharedCluster struct {
	once  sync.Once
	nodes []*Node
	err   error
	skip  string
}

// SharedCluster is one cluster of three that a test binary's tests share,
// stopped by Main: they must not stop its nodes.
func SharedCluster(t testing.TB) []*Node {
	t.Helper()
	sharedCluster.once.Do(func() {
		kit, err := Kit()
		if err != nil {
			sharedCluster.skip = fmt.Sprintf("no Riak test kit to start a cluster with (put it in ../shared/riak next to the repository): %v", err)
			return
		}
		sharedCluster.err = startCluster(kit, 3, &sharedCluster.nodes, t.Logf)
	})
	if sharedCluster.skip != "" {
		t.Skip(sharedCluster.skip)
	}
	if sharedCluster.err != nil {
		t.Fatal(sharedCluster.err)
	}
	return sharedCluster.nodes
}

// StartCluster starts size nodes from kit with strong consistency and
// joins them into one cluster, for a program rather than a test (a
// benchmark): the caller stops them. If one cannot start, those started
// are stopped and removed.
func StartCluster(kit string, size int, logf func(string, ...any)) ([]*Node, error) {
	var nodes []*Node
	if err := startCluster(kit, size, &nodes, logf); err != nil {
		for _, n := range nodes {
			n.Stop()
			os.RemoveAll(n.Dir)
		}
		return nil, err
	}
	return nodes, nil
}

// startCluster starts size nodes into *nodes, so that the caller stops
// those started whatever fails.
func startCluster(kit string, size int, nodes *[]*Node, logf func(string, ...any)) error {
	sweep(kit)
	for i := range size {
		dir, err := NewDir()
		if err != nil {
			return err
		}
		args := []string{"--strong-consistency=cluster"}
		if i > 0 {
			args = []string{"--strong-consistency", "--join", (*nodes)[0].Dir}
		}
		start := time.Now()
		n, err := Start(kit, dir, args...)
		if err != nil {
			exec.Command(kit, "stop", dir).Run()
			os.RemoveAll(dir)
			return fmt.Errorf("cannot start Riak node %d of %d: %v", i+1, size, err)
		}
		logf("riak node %d of %d (%s) ready after %v", i+1, size, n.PB, time.Since(start).Round(time.Second))
		*nodes = append(*nodes, n)
	}
	for _, n := range *nodes {
		if err := n.waitType(OnceType); err != nil {
			return err
		}
	}
	return nil
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = all[len(all)-lines:]
	}
	return strings.Join(all, "\n")
}
