// Package e2e tests the whole system: the real coordinator, importer,
// watcher and resolver binaries, built once per test run, run as
// subprocesses in temporary directories on loopback ports, against a real
// Dovecot and the embedded bbolt store shared by several processes, and
// against real Riak nodes (riak_test.go: a node the test binary starts
// from the Riak test kit, and a cluster of three).
//
// The binaries are built without the race detector (the packages' own
// tests run with it); CHIBRARY_E2E_RACE=1 builds them with -race too (a
// data race in a program then fails the test through its exit status 66;
// peak-RSS bounds are only logged).
package e2e

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// binaries are the programs under test, built on first use.
var binaries struct {
	once sync.Once
	dir  string
	err  error
	// missing names the programs that did not build, with why.
	missing map[string]string
}

var programs = []string{"coordinator", "importer", "mirror", "resolver", "watcher"}

func TestMain(m *testing.M) {
	if out := os.Getenv(rusageEnv); out != "" {
		os.Exit(measure(out, os.Args[1:]))
	}
	code := riaktest.Main(m) // runs the tests; stops the Riak node they started
	if binaries.dir != "" {
		os.RemoveAll(binaries.dir)
	}
	os.Exit(code)
}

// needPrograms skips a test in -short mode and builds the programs, first
// thing, before a test starts servers or reads the corpus.
func needPrograms(t *testing.T) {
	t.Helper()
	bin(t, "importer")
}

// bin returns the path of a program, building them all on first use.
func bin(t *testing.T, name string) string {
	t.Helper()
	if testing.Short() {
		t.Skip("builds and runs the programs")
	}
	binaries.once.Do(func() {
		binaries.missing = map[string]string{}
		binaries.dir, binaries.err = os.MkdirTemp("", "chibrary-e2e-bin-")
		if binaries.err != nil {
			return
		}
		args := []string{"build", "-o", binaries.dir + string(os.PathSeparator)}
		if raceBinaries() {
			args = append(args, "-race")
		}
		var pkgs []string
		for _, p := range programs {
			pkgs = append(pkgs, "github.com/chibrary/chibrary/cmd/"+p)
		}
		// One build for all shares the compilation; if it fails, build
		// each alone so that one broken program skips only its tests.
		if out, err := exec.Command("go", append(args, pkgs...)...).CombinedOutput(); err != nil {
			for _, p := range programs {
				if out, err := exec.Command("go", append(args, "github.com/chibrary/chibrary/cmd/"+p)...).CombinedOutput(); err != nil {
					binaries.missing[p] = fmt.Sprintf("%v\n%s", err, out)
				}
			}
			_ = out
		}
	})
	if binaries.err != nil {
		t.Fatalf("cannot build the programs: %v", binaries.err)
	}
	if why, ok := binaries.missing[name]; ok {
		t.Fatalf("cannot build cmd/%s: %s", name, why)
	}
	return filepath.Join(binaries.dir, name)
}

// rusageEnv makes the test binary a wrapper that runs its arguments as a
// command and writes the command's peak RSS to the file it names.
//
// Why a wrapper: Go starts children with CLONE_VM|CLONE_VFORK, so until
// it execs, a child runs in its parent's address space, and Linux records
// that space's peak RSS in the child's maxrss at exec. Read directly, a
// program's maxrss would be at least the test process's. Started from this
// small wrapper instead, it inherits the wrapper's few megabytes.
const rusageEnv = "CHIBRARY_E2E_RUSAGE_OUT"

// measure runs argv, writes its peak RSS in bytes to out and returns its
// exit status (128+signal when a signal ended it).
func measure(out string, argv []string) int {
	cmd := exec.Command(argv[0], argv[1:]...)
	cmd.Stdin, cmd.Stdout, cmd.Stderr = os.Stdin, os.Stdout, os.Stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	err := cmd.Run()
	if cmd.ProcessState == nil {
		fmt.Fprintf(os.Stderr, "e2e measure: %v\n", err)
		return 125
	}
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	if err := os.WriteFile(out, []byte(strconv.FormatInt(ru.Maxrss*1024, 10)), 0o644); err != nil {
		fmt.Fprintf(os.Stderr, "e2e measure: %v\n", err)
		return 125
	}
	if ws, ok := cmd.ProcessState.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
		return 128 + int(ws.Signal())
	}
	return cmd.ProcessState.ExitCode()
}

// raceBinaries reports whether the programs are built with -race, which
// multiplies their memory use: peak-RSS bounds do not apply then.
func raceBinaries() bool { return os.Getenv("CHIBRARY_E2E_RACE") == "1" }

// checkRSS checks a measured peak RSS against a bound.
func checkRSS(t *testing.T, p *proc, limit int64) {
	t.Helper()
	rss := p.maxRSS()
	t.Logf("%s: peak RSS %d MB", p.name, rss>>20)
	if rss > limit && !raceBinaries() {
		t.Errorf("%s: peak RSS %d MB, want under %d MB", p.name, rss>>20, limit>>20)
	}
}

// proc is a program running as a subprocess, its stdout and stderr in a
// log file that is printed when the test fails.
type proc struct {
	t       *testing.T
	name    string
	cmd     *exec.Cmd
	logPath string
	done    chan struct{}
	err     error // cmd.Wait's, once done is closed
	stdin   io.WriteCloser
	rssPath string // where the measuring wrapper writes the peak RSS
}

type procOptions struct {
	// Stdin: pipe opens a pipe (proc.stdin); otherwise nothing.
	Pipe bool
	// Prefix runs the program through another one (e.g. prlimit).
	Prefix []string
	// MeasureRSS runs the program under a wrapper that records its peak
	// RSS (proc.maxRSS).
	MeasureRSS bool
	Env        []string
}

var logSeq struct {
	sync.Mutex
	n int
}

// start starts a program; the test's cleanup kills it if it still runs,
// and prints its log if the test failed.
func start(t *testing.T, name string, opts procOptions, args ...string) *proc {
	t.Helper()
	program := bin(t, strings.Fields(name)[0])
	logSeq.Lock()
	logSeq.n++
	n := logSeq.n
	logSeq.Unlock()
	p := &proc{t: t, name: name, done: make(chan struct{})}
	p.logPath = filepath.Join(t.TempDir(), fmt.Sprintf("%02d-%s.log", n, strings.ReplaceAll(name, " ", "-")))
	logf, err := os.Create(p.logPath)
	if err != nil {
		t.Fatal(err)
	}
	argv := append(append(append([]string{}, opts.Prefix...), program), args...)
	env := append(cleanEnv(), opts.Env...)
	if opts.MeasureRSS {
		self, err := os.Executable()
		if err != nil {
			t.Fatal(err)
		}
		p.rssPath = p.logPath + ".rss"
		argv = append([]string{self}, argv...)
		env = append(env, rusageEnv+"="+p.rssPath)
	}
	p.cmd = exec.Command(argv[0], argv[1:]...)
	p.cmd.Stdout, p.cmd.Stderr = logf, logf
	p.cmd.Env = env
	if opts.Pipe {
		if p.stdin, err = p.cmd.StdinPipe(); err != nil {
			t.Fatal(err)
		}
	}
	if err := p.cmd.Start(); err != nil {
		logf.Close()
		t.Fatalf("cannot start %s: %v", name, err)
	}
	logf.Close()
	go func() {
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	t.Cleanup(func() {
		if !p.exited() {
			p.cmd.Process.Kill()
			<-p.done
		}
		if t.Failed() {
			t.Logf("log of %s (%s):\n%s", p.name, p.logPath, tail(p.log(), 80))
		}
	})
	return p
}

// cleanEnv is the test's environment without the project's variables, so
// that a developer's CHIBRARY_DATA cannot leak into the programs.
func cleanEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "CHIBRARY_") {
			env = append(env, kv)
		}
	}
	return env
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) log() string {
	b, _ := os.ReadFile(p.logPath)
	return string(b)
}

// wait waits up to d for the process to exit and returns its exit status.
func (p *proc) wait(d time.Duration) int {
	p.t.Helper()
	select {
	case <-p.done:
	case <-time.After(d):
		p.t.Fatalf("%s did not exit within %v", p.name, d)
	}
	var ee *exec.ExitError
	switch {
	case p.err == nil:
		return 0
	case errors.As(p.err, &ee):
		if ws, ok := ee.Sys().(syscall.WaitStatus); ok && ws.Signaled() {
			return 128 + int(ws.Signal())
		}
		return ee.ExitCode()
	}
	p.t.Fatalf("%s: %v", p.name, p.err)
	return -1
}

// kill sends SIGKILL and waits for the process to be gone.
func (p *proc) kill() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGKILL)
	p.wait(10 * time.Second)
}

// stop sends SIGTERM and waits for a clean exit.
func (p *proc) stop() {
	p.t.Helper()
	p.cmd.Process.Signal(syscall.SIGTERM)
	if code := p.wait(30 * time.Second); code != 0 {
		p.t.Errorf("%s exited %d after SIGTERM, want 0", p.name, code)
	}
}

// maxRSS returns the peak resident set size of an exited process started
// with MeasureRSS, in bytes.
func (p *proc) maxRSS() int64 {
	p.t.Helper()
	b, err := os.ReadFile(p.rssPath)
	if err != nil {
		p.t.Fatalf("no peak RSS recorded for %s: %v", p.name, err)
	}
	n, err := strconv.ParseInt(string(b), 10, 64)
	if err != nil {
		p.t.Fatalf("peak RSS of %s: %v", p.name, err)
	}
	return n
}

// waitLog waits until the process's log has a line containing substr and
// returns that line.
func (p *proc) waitLog(substr string, d time.Duration) string {
	p.t.Helper()
	var line string
	eventually(p.t, d, fmt.Sprintf("%s to log %q", p.name, substr), func() bool {
		for l := range strings.Lines(p.log()) {
			if strings.Contains(l, substr) {
				line = l
				return true
			}
		}
		if p.exited() {
			p.t.Fatalf("%s exited (%v) before logging %q:\n%s", p.name, p.err, substr, tail(p.log(), 40))
		}
		return false
	})
	return line
}

func tail(s string, lines int) string {
	all := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(all) > lines {
		all = append([]string{fmt.Sprintf("[... %d lines]", len(all)-lines)}, all[len(all)-lines:]...)
	}
	for i, l := range all {
		if len(l) > 2000 {
			all[i] = l[:2000] + "[...]"
		}
	}
	return strings.Join(all, "\n")
}

// eventually polls cond every 20ms until it holds, or fails the test after
// d with what it was waiting for.
func eventually(t *testing.T, d time.Duration, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(d)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", d, what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// coordinator is a running coordinator.
type coordinator struct {
	*proc
	db, tokenFile, url, addr string
}

// startCoordinator serves db on listen (127.0.0.1:0 for a free port) and
// waits for its "listening" line.
func startCoordinator(t *testing.T, db, tokenFile, listen string) *coordinator {
	t.Helper()
	p := start(t, "coordinator", procOptions{}, "serve", "--db", db, "--listen", listen, "--token-file", tokenFile, "--log-format", "json")
	line := p.waitLog(`"msg":"listening"`, 30*time.Second)
	var rec struct{ Addr, URL string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.URL == "" {
		t.Fatalf("cannot read the coordinator's listening line %q: %v", line, err)
	}
	return &coordinator{proc: p, db: db, tokenFile: tokenFile, url: rec.URL, addr: rec.Addr}
}

// resolverServer is a running resolver.
type resolverServer struct {
	*proc
	url string
}

// startResolver serves data on a free loopback port and waits until it
// answers /healthz.
func startResolver(t *testing.T, data string) *resolverServer {
	t.Helper()
	return serveResolver(t, "--data", data)
}

// serveResolver runs resolver serve with the store flags given (--data
// DIR or --store URL) on a free loopback port and waits until it answers
// /healthz.
func serveResolver(t *testing.T, storeFlags ...string) *resolverServer {
	t.Helper()
	addr := freeAddr(t)
	args := append(append([]string{"serve"}, storeFlags...), "--listen", addr, "--log-format", "json")
	p := start(t, "resolver serve", procOptions{}, args...)
	r := &resolverServer{proc: p, url: "http://" + addr}
	eventually(t, 60*time.Second, "the resolver to answer /healthz", func() bool {
		if p.exited() {
			t.Fatalf("the resolver exited (%v):\n%s", p.err, p.log())
		}
		resp, err := http.Get(r.url + "/healthz")
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})
	return r
}

func freeAddr(t *testing.T) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().String()
}

// get fetches a URL and returns the status, header and body.
func get(ctx context.Context, url string) (int, http.Header, []byte, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, url, nil)
	if err != nil {
		return 0, nil, nil, err
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		return 0, nil, nil, err
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	return resp.StatusCode, resp.Header, body, err
}

var noRedirect = &http.Client{
	Timeout:       2 * time.Minute,
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
}

// stats returns the resolver's message count.
func (r *resolverServer) stats(ctx context.Context) (int64, error) {
	status, _, body, err := get(ctx, r.url+"/api/v1/stats")
	if err != nil {
		return 0, err
	}
	if status != http.StatusOK {
		return 0, fmt.Errorf("GET /api/v1/stats: %d %s", status, body)
	}
	var s struct{ Messages int64 }
	if err := json.Unmarshal(body, &s); err != nil {
		return 0, fmt.Errorf("GET /api/v1/stats: %w", err)
	}
	return s.Messages, nil
}

// manifestEntry is one line of the importer's manifest.
type manifestEntry struct {
	CallNumber string `json:"callnumber"`
	MessageID  string `json:"message_id"`
	Status     string `json:"status"`
	Error      string `json:"error"`
}

// readManifest reads a manifest; a last line cut short (the importer
// killed while writing it) is left out.
func readManifest(t *testing.T, path string) []manifestEntry {
	t.Helper()
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		t.Fatal(err)
	}
	var out []manifestEntry
	sc := bufio.NewScanner(bytes.NewReader(b))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		var e manifestEntry
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			if !bytes.HasSuffix(b, []byte("\n")) {
				break // the cut last line
			}
			t.Fatalf("%s: bad manifest line %q: %v", path, sc.Text(), err)
		}
		out = append(out, e)
	}
	return out
}

// summary parses the importer's last line,
// "imported N, duplicates D, failed F in S s (R msg/s)".
func summary(t *testing.T, log string) (imported, duplicates, failed int) {
	t.Helper()
	for l := range strings.Lines(log) {
		if strings.HasPrefix(l, "imported ") {
			if _, err := fmt.Sscanf(l, "imported %d, duplicates %d, failed %d in", &imported, &duplicates, &failed); err != nil {
				t.Fatalf("cannot parse summary %q: %v", l, err)
			}
			return
		}
	}
	t.Fatalf("no summary line in the importer's log:\n%s", tail(log, 20))
	return
}

// want is what the archive must hold: one entry per distinct message.
type want map[store.Digest]string // digest -> where it came from

func (w want) add(raw []byte, where string) {
	d := store.DigestOf(raw)
	if _, ok := w[d]; !ok {
		w[d] = where
	}
}

// openStore opens the data directory's message store from the test
// process (with the programs stopped, or beside them: it is shared).
func openStore(t *testing.T, data string) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(t.Context(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatalf("cannot open the store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// verifyArchive checks that every wanted message is stored exactly once,
// under distinct call numbers, that the store holds nothing else, and
// returns the call number of each.
func verifyArchive(t *testing.T, st store.Store, w want) map[store.Digest]callnumber.Number {
	t.Helper()
	ctx := t.Context()
	numbers := map[store.Digest]callnumber.Number{}
	owner := map[callnumber.Number]store.Digest{}
	missing := 0
	for d, where := range w {
		n, err := st.ByDigest(ctx, d)
		if err != nil {
			if missing++; missing <= 10 {
				t.Errorf("message from %s (digest %v) is not in the store: %v", where, d, err)
			}
			continue
		}
		if other, ok := owner[n]; ok {
			t.Errorf("call number %v is the number of two messages: %s and %s", n, w[other], where)
		}
		owner[n] = d
		numbers[d] = n
		s, err := st.Get(ctx, n)
		if err != nil {
			t.Errorf("Get(%v) (message from %s): %v", n, where, err)
			continue
		}
		if got := store.DigestOf(s.Raw); got != d || s.Digest != d {
			t.Errorf("Get(%v) (message from %s): digest of the bytes %v, recorded %v, want %v", n, where, got, s.Digest, d)
		}
	}
	if missing > 10 {
		t.Errorf("... %d messages missing in all", missing)
	}
	count, err := st.Count(ctx)
	if err != nil {
		t.Fatalf("Count: %v", err)
	}
	// Every wanted message is at its own number; if the store counts
	// more, something was stored twice (or something unwanted was).
	if count != int64(len(w)) {
		t.Errorf("Count() = %d, want %d (the distinct messages delivered and imported)", count, len(w))
	}
	return numbers
}

// resolveAll fetches every message's raw bytes from the resolver with
// several clients and checks them against the digests.
func resolveAll(t *testing.T, r *resolverServer, numbers map[store.Digest]callnumber.Number) {
	t.Helper()
	type job struct {
		d store.Digest
		n callnumber.Number
	}
	jobs := make(chan job)
	var mu sync.Mutex
	var failures []string
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for j := range jobs {
				status, h, body, err := get(t.Context(), r.url+"/"+j.n.String()+"/raw")
				var msg string
				switch {
				case err != nil:
					msg = fmt.Sprintf("GET /%v/raw: %v", j.n, err)
				case status != http.StatusOK:
					msg = fmt.Sprintf("GET /%v/raw = %d, want 200", j.n, status)
				case store.DigestOf(body) != j.d:
					msg = fmt.Sprintf("GET /%v/raw: %d bytes that are not the message (digest %v, want %v)", j.n, len(body), store.DigestOf(body), j.d)
				case !strings.HasPrefix(h.Get("Content-Type"), "message/rfc822"):
					msg = fmt.Sprintf("GET /%v/raw: Content-Type %q, want message/rfc822", j.n, h.Get("Content-Type"))
				}
				if msg != "" {
					mu.Lock()
					failures = append(failures, msg)
					mu.Unlock()
				}
			}
		})
	}
	for d, n := range numbers {
		jobs <- job{d, n}
	}
	close(jobs)
	wg.Wait()
	for i, f := range failures {
		if i == 10 {
			t.Errorf("... %d failures in all", len(failures))
			break
		}
		t.Error(f)
	}
}

// writeFile writes data to a new file in dir.
func writeFile(t *testing.T, dir, name string, data []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, data, 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}

func itoa(n int) string { return strconv.Itoa(n) }
