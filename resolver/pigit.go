package resolver

// Serving a public-inbox export (resolver export --public-inbox OUT) to
// public-inbox's and grokmirror's own mirroring tools, as public-inbox's
// httpd serves its inboxes (docs/public-inbox.md):
//
//	GET  /{list}/git/{N}.git/info/refs?service=git-upload-pack   git's smart HTTP, read-only:
//	POST /{list}/git/{N}.git/git-upload-pack                      git clone, git fetch
//	GET  /{list}/git/{N}.git                                      a line saying how to clone it
//	GET  /manifest.js.gz, /{list}/manifest.js.gz                  grokmirror's manifest (manifest.go)
//	GET  /{list}/description                                      the inbox's description
//	GET  /{list}/_/text/config/raw                                a public-inbox config snippet
//
// public-inbox-clone URL/LIST/ asks for /LIST/manifest.js.gz, runs
// git clone --mirror on each epoch it names, then fetches
// /LIST/_/text/config/raw and /LIST/description (both optional to it).
//
// Git's smart HTTP protocol (gitprotocol-http(5)) is served by running
// git upload-pack --stateless-rpc ourselves rather than git
// http-backend through net/http/cgi: upload-pack is the only program
// that can run (receive-pack is refused by construction, not by
// configuration), it gets the repository's path as one argument we built
// and checked instead of a CGI environment built from the request, and
// the process is ours to bound, kill and read the errors of.

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
)

// Defaults of Options' public-inbox fields.
const (
	// DefaultGitProcesses bounds the git upload-pack processes run at
	// once.
	DefaultGitProcesses = 4
	// DefaultGitTimeout bounds the time of one git process: a fetch of a
	// whole epoch by a slow reader must fit in it.
	DefaultGitTimeout = 30 * time.Minute
)

const (
	// gitSlotWait is how long a git request waits for a process slot
	// before it is answered 503.
	gitSlotWait = 2 * time.Second
	// gitRetryAfter is the Retry-After of that 503, in seconds.
	gitRetryAfter = "10"
	// maxUploadPackBody bounds a request to upload-pack, as read and
	// once inflated: its wants and haves. A fetch sends every have of
	// each round again (stateless), which for an epoch's one branch
	// stays far below this.
	maxUploadPackBody = 4 << 20
	// readersPerProcess is how many requests to upload-pack may be read
	// at once per process slot (each up to maxUploadPackBody in
	// memory).
	readersPerProcess = 4
	// maxGitStderr is how much of git's standard error is kept for the
	// log.
	maxGitStderr = 4 << 10
	// maxEpochDigits bounds the digits of an epoch's number.
	maxEpochDigits = 6
	// maxDescription bounds the description file read.
	maxDescription = 64 << 10
)

// piGitPath is what a path under /{list}/git/ names.
type piGitPath struct {
	Epoch int    // N of N.git
	Rest  string // what follows N.git: "", "info/refs", "git-upload-pack", ...
}

// parsePIGitPath reads the part of a path after /{list}/git/: an
// epoch's directory name, N.git with N in decimal digits only (no sign,
// no leading zero but for 0 itself, at most maxEpochDigits), then
// nothing or "/" and the rest, which holds no "." or ".." segment and no
// empty one. ok is false for anything else: such a path is not served
// from the export at all.
func parsePIGitPath(s string) (p piGitPath, ok bool) {
	dir, rest, _ := strings.Cut(s, "/")
	num, found := strings.CutSuffix(dir, ".git")
	if !found || num == "" || len(num) > maxEpochDigits || num[0] == '0' && len(num) > 1 {
		return p, false
	}
	for _, c := range num {
		if c < '0' || c > '9' {
			return p, false
		}
	}
	n, err := strconv.Atoi(num)
	if err != nil {
		return p, false
	}
	if rest != "" {
		for _, seg := range strings.Split(rest, "/") {
			if seg == "" || seg == "." || seg == ".." {
				return p, false
			}
		}
	}
	return piGitPath{Epoch: n, Rest: rest}, true
}

// piExport serves the export under root (Options.PublicInbox).
type piExport struct {
	root  string // absolute
	log   *slog.Logger
	slots chan struct{} // a token per git process running
	// readers holds a token per request to upload-pack being read.
	readers chan struct{}
	wait    time.Duration // for a slot
	timeout time.Duration // of one process
	// writeIdle is how long a write to a client may wait for it.
	writeIdle time.Duration
	// running counts the git processes running, for /metrics and the
	// tests that see none is left behind.
	running prometheus.Gauge
	busy    prometheus.Counter
	// manifests are grokmirror's manifests of the export (manifest.go).
	manifests *manifestCache
	// wg counts the processes started, so that a test can wait for
	// them.
	wg sync.WaitGroup
}

func newPIExport(root string, opts Options, reg prometheus.Registerer, writeIdle time.Duration) (*piExport, error) {
	abs, err := filepath.Abs(root)
	if err != nil {
		return nil, fmt.Errorf("cannot serve the public-inbox export %s: %w", root, err)
	}
	n := opts.MaxGitProcesses
	if n <= 0 {
		n = DefaultGitProcesses
	}
	e := &piExport{
		root:      abs,
		log:       opts.Logger,
		slots:     make(chan struct{}, n),
		readers:   make(chan struct{}, readersPerProcess*n),
		wait:      gitSlotWait,
		timeout:   orDefault(opts.GitTimeout, DefaultGitTimeout),
		writeIdle: writeIdle,
		running: prometheus.NewGauge(prometheus.GaugeOpts{
			Name: "chibrary_resolver_git_processes",
			Help: "git upload-pack processes running for clones and fetches of the public-inbox export.",
		}),
		busy: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chibrary_resolver_git_busy_total",
			Help: "Clones and fetches of the public-inbox export answered 503: every git process slot was taken.",
		}),
	}
	e.manifests = newManifestCache(abs, opts.Logger)
	reg.MustRegister(e.running, e.busy)
	return e, nil
}

// realDir reports whether path is a directory that is not a symbolic
// link (nor reached through one below the export's root).
func realDir(path string) bool {
	fi, err := os.Lstat(path)
	return err == nil && fi.IsDir()
}

// epochDir returns the git directory of the list's epoch n, if it is
// one: every component below the root a real directory (no symbolic
// link leads out of the export) holding a HEAD file.
func (e *piExport) epochDir(list string, n int) (string, bool) {
	if !catalog.ValidListName(list) {
		return "", false
	}
	dir := e.root
	for _, c := range []string{list, "git", strconv.Itoa(n) + ".git"} {
		dir = filepath.Join(dir, c)
		if !realDir(dir) {
			return "", false
		}
	}
	fi, err := os.Lstat(filepath.Join(dir, "HEAD"))
	if err != nil || !fi.Mode().IsRegular() {
		return "", false
	}
	return dir, true
}

// inboxDir returns the list's inbox directory, if the export has one.
func (e *piExport) inboxDir(list string) (string, bool) {
	if !catalog.ValidListName(list) {
		return "", false
	}
	dir := filepath.Join(e.root, list)
	return dir, realDir(dir)
}

// servePIExport answers the export's routes under /{list}/ (rest is what
// follows, unescaped), and reports false for a path that is none of
// them: the public-inbox routes of the catalog then have it.
func (s *Server) servePIExport(w http.ResponseWriter, r *http.Request, list, rest string) bool {
	e := s.pi
	if e == nil {
		if _, ok := parsePIGitPath(strings.TrimPrefix(rest, "git/")); ok && strings.HasPrefix(rest, "git/") {
			httpserve.SetRoute(w, "GET /{list}/git/{N}.git")
			s.fail(w, r, http.StatusNotFound, "There is nothing at this address: no public-inbox export is served here.")
			return true
		}
		return false
	}
	switch {
	case rest == "manifest.js.gz" && r.Method != http.MethodPost:
		httpserve.SetRoute(w, "GET /{list}/manifest.js.gz")
		if _, ok := e.inboxDir(list); !ok {
			gitFail(w, http.StatusNotFound, "No list "+list+" in the public-inbox export.")
			return true
		}
		s.serveManifest(w, r, list)
		return true
	case rest == "description" && r.Method != http.MethodPost:
		dir, ok := e.inboxDir(list)
		if !ok {
			return false
		}
		httpserve.SetRoute(w, "GET /{list}/description")
		e.serveDescription(w, r, dir)
		return true
	case rest == "_/text/config/raw" && r.Method != http.MethodPost:
		if _, ok := e.inboxDir(list); !ok {
			return false
		}
		httpserve.SetRoute(w, "GET /{list}/_/text/config/raw")
		s.serveInboxConfig(w, r, list)
		return true
	}
	sub, found := strings.CutPrefix(rest, "git/")
	if !found {
		return false
	}
	p, ok := parsePIGitPath(sub)
	if !ok {
		return false
	}
	e.serveGit(w, r, s, list, p)
	return true
}

// gitFail answers a git client: a line of plain text, which git shows.
func gitFail(w http.ResponseWriter, status int, msg string) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(status)
	io.WriteString(w, msg+"\n")
}

func (e *piExport) serveGit(w http.ResponseWriter, r *http.Request, s *Server, list string, p piGitPath) {
	switch {
	case p.Rest == "info/refs":
		httpserve.SetRoute(w, "GET /{list}/git/{N}.git/info/refs")
	case p.Rest == "git-upload-pack":
		httpserve.SetRoute(w, "POST /{list}/git/{N}.git/git-upload-pack")
	default:
		httpserve.SetRoute(w, "GET /{list}/git/{N}.git")
	}
	dir, ok := e.epochDir(list, p.Epoch)
	if !ok {
		gitFail(w, http.StatusNotFound, fmt.Sprintf("No repository %s/git/%d.git in the public-inbox export.", list, p.Epoch))
		return
	}
	switch p.Rest {
	case "", "/":
		if r.Method == http.MethodPost {
			gitFail(w, http.StatusMethodNotAllowed, "This repository is read-only.")
			return
		}
		gitFail(w, http.StatusOK, fmt.Sprintf("This is epoch %d of the public-inbox inbox %s. Mirror the whole inbox with:\n  public-inbox-clone %s/%s/ %s\nor this epoch with:\n  git clone --mirror %s/%s/git/%d.git",
			p.Epoch, list, s.baseURL(r), list, list, s.baseURL(r), list, p.Epoch))
	case "info/refs":
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			w.Header().Set("Allow", "GET, HEAD")
			gitFail(w, http.StatusMethodNotAllowed, "info/refs is read with GET.")
			return
		}
		switch svc := r.URL.Query().Get("service"); svc {
		case "git-upload-pack":
			e.run(w, r, dir, true)
		case "git-receive-pack":
			gitFail(w, http.StatusForbidden, "This repository is read-only: pushing is not served.")
		case "":
			gitFail(w, http.StatusForbidden, "Only git's smart HTTP protocol is served (git 1.6.6 or later).")
		default:
			gitFail(w, http.StatusForbidden, "Only git-upload-pack is served.")
		}
	case "git-upload-pack":
		if r.Method != http.MethodPost {
			w.Header().Set("Allow", "POST")
			gitFail(w, http.StatusMethodNotAllowed, "git-upload-pack is called with POST.")
			return
		}
		if ct := r.Header.Get("Content-Type"); ct != "application/x-git-upload-pack-request" {
			gitFail(w, http.StatusUnsupportedMediaType, "git-upload-pack takes application/x-git-upload-pack-request.")
			return
		}
		e.run(w, r, dir, false)
	case "git-receive-pack":
		gitFail(w, http.StatusForbidden, "This repository is read-only: pushing is not served.")
	default:
		gitFail(w, http.StatusNotFound, "Only git's smart HTTP protocol is served (info/refs?service=git-upload-pack, git-upload-pack).")
	}
}

// errBodyTooLarge says a request to upload-pack is over
// maxUploadPackBody.
var errBodyTooLarge = errors.New("resolver: request body too large")

// readUploadPackBody reads a request to upload-pack, inflated if the
// client compressed it (git does for large requests), bounded before
// and after inflating.
func readUploadPackBody(w http.ResponseWriter, r *http.Request) ([]byte, error) {
	body := io.Reader(http.MaxBytesReader(w, r.Body, maxUploadPackBody))
	switch enc := r.Header.Get("Content-Encoding"); enc {
	case "", "identity":
	case "gzip", "x-gzip":
		zr, err := gzip.NewReader(body)
		if err != nil {
			return nil, fmt.Errorf("cannot inflate the request: %w", err)
		}
		body = zr
	default:
		return nil, fmt.Errorf("unknown Content-Encoding %q", enc)
	}
	b, err := io.ReadAll(io.LimitReader(body, maxUploadPackBody+1))
	var mbe *http.MaxBytesError
	if errors.As(err, &mbe) || len(b) > maxUploadPackBody {
		return nil, errBodyTooLarge
	}
	return b, err
}

// gitProtocol is the Git-Protocol header (gitprotocol-http(5): git
// sends "version=2"), passed to upload-pack as GIT_PROTOCOL when it holds
// nothing but key=value pairs of plain characters.
func gitProtocol(r *http.Request) string {
	v := r.Header.Get("Git-Protocol")
	if len(v) > 128 {
		return ""
	}
	for _, c := range v {
		switch {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '=', c == ':', c == '.', c == '_', c == '-':
		default:
			return ""
		}
	}
	return v
}

// pktFlush ends a pkt-line section (gitprotocol-common(5)).
const pktFlush = "0000"

// pktLine writes s as one pkt-line: its length in 4 hex digits, the 4
// included, then s.
func pktLine(s string) string { return fmt.Sprintf("%04x%s", len(s)+4, s) }

// run runs git upload-pack on dir for the request: the advertisement of
// info/refs, or the answer to a POST. It waits briefly for a process slot
// (503 with Retry-After when none frees), kills the process and its
// children when the client goes away, a write to it fails or the time
// limit passes, and logs git's errors without showing them to the
// client.
func (e *piExport) run(w http.ResponseWriter, r *http.Request, dir string, advertise bool) {
	// The request is read before a process slot is taken, so that a
	// client slow to send it holds no slot: readers have slots of their
	// own, which bound the memory the requests take.
	var body []byte
	if !advertise {
		if r.ContentLength > maxUploadPackBody {
			gitFail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request is over %d MiB.", maxUploadPackBody>>20))
			return
		}
		if !e.take(w, r, e.readers) {
			return
		}
		var err error
		body, err = readUploadPackBody(w, r)
		<-e.readers
		if err != nil {
			if errors.Is(err, errBodyTooLarge) {
				gitFail(w, http.StatusRequestEntityTooLarge, fmt.Sprintf("The request is over %d MiB.", maxUploadPackBody>>20))
				return
			}
			if r.Context().Err() == nil {
				gitFail(w, http.StatusBadRequest, "Cannot read the request: "+err.Error()+".")
			}
			return
		}
	}
	if !e.take(w, r, e.slots) {
		return
	}
	defer func() { <-e.slots }()

	ctx, cancel := context.WithTimeout(r.Context(), e.timeout)
	defer cancel()
	// The export may belong to another user (the one who runs resolver
	// export): this directory, checked above, is trusted by the
	// operator who named OUT (git's safe.directory).
	args := []string{"-c", "safe.directory=" + dir, "upload-pack", "--strict", "--stateless-rpc"}
	if advertise {
		args = append(args, "--advertise-refs")
	}
	cmd := exec.CommandContext(ctx, "git", append(args, dir)...)
	proto := gitProtocol(r)
	cmd.Env = gitEnv(proto)
	cmd.Dir = dir
	cmd.Stdin = bytes.NewReader(body)
	stderr := &boundedBuffer{max: maxGitStderr}
	cmd.Stderr = stderr
	ownProcessGroup(cmd)
	cmd.WaitDelay = 5 * time.Second
	out, err := cmd.StdoutPipe()
	if err != nil {
		e.log.Error("cannot run git upload-pack", "dir", dir, "err", err)
		gitFail(w, http.StatusInternalServerError, "Cannot run git.")
		return
	}
	if err := cmd.Start(); err != nil {
		e.log.Error("cannot run git upload-pack", "dir", dir, "err", err)
		gitFail(w, http.StatusInternalServerError, "Cannot run git.")
		return
	}
	e.wg.Add(1)
	defer e.wg.Done()
	e.running.Inc()
	defer e.running.Dec()

	// The first bytes of git's answer come before the status: a process
	// that fails at once (a damaged repository) is a 500, not a 200 with
	// nothing.
	var first [4096]byte
	n, rerr := io.ReadAtLeast(out, first[:], 1)
	if n == 0 {
		cancel()
		werr := cmd.Wait()
		e.log.Error("git upload-pack answered nothing", "dir", dir, "err", errors.Join(rerr, werr), "stderr", stderr.String())
		if r.Context().Err() == nil {
			gitFail(w, http.StatusInternalServerError, "git failed; the server's log says why.")
		}
		return
	}
	h := w.Header()
	h.Set("Cache-Control", "no-cache, max-age=0, must-revalidate")
	h.Set("Expires", "Fri, 01 Jan 1980 00:00:00 GMT")
	h.Set("Pragma", "no-cache")
	if advertise {
		h.Set("Content-Type", "application/x-git-upload-pack-advertisement")
	} else {
		h.Set("Content-Type", "application/x-git-upload-pack-result")
	}
	sw := httpserve.Stream(w, e.writeIdle)
	// At the time limit, a write waiting for a client who stopped
	// reading ends too, as the process did.
	rc := http.NewResponseController(w)
	defer context.AfterFunc(ctx, func() { rc.SetWriteDeadline(time.Now()) })()
	sw.WriteHeader(http.StatusOK)
	var werr error
	if advertise && !strings.Contains(proto, "version=2") {
		// gitprotocol-http(5): the smart server's first pkt-line names
		// the service (not in protocol v2).
		_, werr = io.WriteString(sw, pktLine("# service=git-upload-pack\n")+pktFlush)
	}
	if werr == nil {
		_, werr = sw.Write(first[:n])
	}
	if werr == nil && rerr == nil {
		_, werr = io.Copy(sw, out)
	}
	if werr != nil {
		cancel() // the client went away: the process and its children go too
	}
	err = cmd.Wait()
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		e.log.Warn("git upload-pack stopped: over its time limit", "dir", dir, "limit", e.timeout)
	case r.Context().Err() != nil:
		// The client went away: nothing to say.
	case err != nil && werr == nil:
		e.log.Error("git upload-pack failed", "dir", dir, "err", err, "stderr", stderr.String())
	}
}

// take takes a slot of sem, waiting briefly; it answers 503 with
// Retry-After and reports false when none freed.
func (e *piExport) take(w http.ResponseWriter, r *http.Request, sem chan struct{}) bool {
	wait := time.NewTimer(e.wait)
	defer wait.Stop()
	select {
	case sem <- struct{}{}:
		return true
	case <-wait.C:
		e.busy.Inc()
		w.Header().Set("Retry-After", gitRetryAfter)
		gitFail(w, http.StatusServiceUnavailable, "Too many clones and fetches at once; try again in a few seconds.")
	case <-r.Context().Done():
	}
	return false
}

// gitEnv is the environment of a git process: a path to find git's
// helpers, a home of none (no user's configuration read), the protocol
// the client asked for; nothing of the server's own environment (a
// GIT_DIR or GIT_CONFIG of the operator's shell).
func gitEnv(proto string) []string {
	env := []string{"PATH=" + os.Getenv("PATH"), "HOME=/nonexistent", "GIT_CONFIG_NOSYSTEM=1", "LC_ALL=C"}
	if proto != "" {
		env = append(env, "GIT_PROTOCOL="+proto)
	}
	return env
}

// boundedBuffer keeps the first max bytes written to it.
type boundedBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
	max int
}

func (b *boundedBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if room := b.max - b.buf.Len(); room > 0 {
		b.buf.Write(p[:min(len(p), room)])
	}
	return len(p), nil
}

func (b *boundedBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return strings.TrimSpace(b.buf.String())
}

// serveDescription writes the inbox's description file.
func (e *piExport) serveDescription(w http.ResponseWriter, r *http.Request, inbox string) {
	b, err := readSmallFile(filepath.Join(inbox, "description"), maxDescription)
	if errors.Is(err, fs.ErrNotExist) {
		gitFail(w, http.StatusNotFound, "This inbox has no description.")
		return
	}
	if err != nil {
		e.log.Error("cannot read an inbox's description", "err", err)
		gitFail(w, http.StatusInternalServerError, "Cannot read the description.")
		return
	}
	w.Header().Set("Content-Security-Policy", rawCSP)
	writePlain(w, r, b)
}

// serveInboxConfig writes a public-inbox configuration snippet for a
// mirror of the list, as public-inbox's /_/text/config/raw does
// (public-inbox-config(5)); public-inbox-clone keeps it as
// inbox.config.example.
func (s *Server) serveInboxConfig(w http.ResponseWriter, r *http.Request, list string) {
	base := s.baseURL(r)
	text := fmt.Sprintf(`; Example public-inbox config snippet for a mirror of
; %[1]s/%[2]s/
; See public-inbox-config(5) manpage for more details:
; https://public-inbox.org/public-inbox-config.html
[publicinbox "%[2]s"]
	inboxdir = /path/to/top-level-inbox
	; note: public-inbox before v1.2.0 used `+"`mainrepo'"+` instead of
	; `+"`inboxdir'"+`, both remain supported after 1.2
	mainrepo = /path/to/top-level-inbox
	url = https://example.com/%[2]s/
`, base, list)
	w.Header().Set("Content-Disposition", "inline; filename=inbox.config")
	w.Header().Set("Content-Security-Policy", rawCSP)
	writePlain(w, r, []byte(text))
}

// writePlain writes b as plain text, with a validator.
func writePlain(w http.ResponseWriter, r *http.Request, b []byte) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.Header().Set("Cache-Control", "no-cache")
	http.ServeContent(w, r, "", time.Time{}, bytes.NewReader(b))
}

// readSmallFile reads a regular file of at most max bytes (a symbolic
// link is not followed).
func readSmallFile(path string, max int64) ([]byte, error) {
	fi, err := os.Lstat(path)
	if err != nil {
		return nil, err
	}
	if !fi.Mode().IsRegular() {
		return nil, fmt.Errorf("%s: %w", path, fs.ErrNotExist)
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	return io.ReadAll(io.LimitReader(f, max))
}
