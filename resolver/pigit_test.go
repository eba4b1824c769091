package resolver

import (
	"bytes"
	"compress/gzip"
	"context"
	"crypto/rand"
	"crypto/sha1"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/mailsource/pisource/pitest"
	"github.com/chibrary/chibrary/store/boltstore"
)

// needTools skips t when a program is missing, and fails it under CI,
// whose machine has them (scripts/install-test-deps.sh).
func needTools(t *testing.T, tools ...string) {
	t.Helper()
	for _, tool := range tools {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is not installed, and CI must have it (scripts/install-test-deps.sh)", tool)
			}
			t.Skipf("%s is not installed (apt-get install git public-inbox)", tool)
		}
	}
}

// exportServer is a resolver serving a public-inbox export over loopback
// HTTP, through Serve (its timeouts and write deadlines as in
// production).
type exportServer struct {
	s    *Server
	url  string
	log  *syncbuf.Buffer
	addr string
}

func serveExport(t *testing.T, out string, opts Options) *exportServer {
	t.Helper()
	a := newArchive(t, boltstore.Options{})
	var logs syncbuf.Buffer
	opts.Logger = newTestLogger(&logs)
	opts.PublicInbox = out
	opts.ShutdownTimeout = 2 * time.Second
	s := New(a.st, opts)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		<-done
		s.pi.wg.Wait()
	})
	return &exportServer{s: s, url: "http://" + ln.Addr().String(), log: &logs, addr: ln.Addr().String()}
}

// git runs git in dir and returns its standard output.
func git(t *testing.T, dir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s in %s: %v\n%s", strings.Join(args, " "), dir, err, stderr.String())
	}
	return string(out)
}

// bareEpoch makes a bare repository at dir with one commit whose file m
// holds size random bytes (incompressible: its pack is as large), as a
// public-inbox epoch has its messages.
func bareEpoch(t *testing.T, dir string, size int) string {
	t.Helper()
	needTools(t, "git")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	git(t, dir, "init", "-q", "--bare", "-b", "master")
	blob := make([]byte, size)
	rand.Read(blob)
	var in bytes.Buffer
	fmt.Fprintf(&in, "blob\nmark :1\ndata %d\n", len(blob))
	in.Write(blob)
	fmt.Fprintf(&in, "\ncommit refs/heads/master\ncommitter A U Thor <a@example.org> 1700000000 +0000\ndata 2\nm\nM 100644 :1 m\n\n")
	cmd := exec.Command("git", "fast-import", "--quiet")
	cmd.Dir = dir
	cmd.Stdin = &in
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git fast-import: %v\n%s", err, out)
	}
	return strings.TrimSpace(git(t, dir, "rev-parse", "refs/heads/master"))
}

// readManifest fetches a manifest and decodes it.
func readManifest(t *testing.T, url string) (map[string]*ManifestEntry, *http.Response) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET %s = %d, want 200", url, resp.StatusCode)
	}
	if ct := resp.Header.Get("Content-Type"); ct != "application/gzip" {
		t.Errorf("GET %s: Content-Type %q, want application/gzip", url, ct)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: not gzip: %v", url, err)
	}
	var m map[string]*ManifestEntry
	if err := json.NewDecoder(zr).Decode(&m); err != nil {
		t.Fatalf("GET %s: not JSON: %v", url, err)
	}
	return m, resp
}

// gitFingerprint is grokmirror's fingerprint of a repository: the SHA-1 of
// what git show-ref prints.
func gitFingerprint(t *testing.T, dir string) string {
	t.Helper()
	sum := sha1.Sum([]byte(git(t, dir, "show-ref")))
	return hex.EncodeToString(sum[:])
}

// TestPublicInboxClone mirrors an inbox made by public-inbox's own tools
// with git clone and public-inbox-clone over the server, reads the
// manifests public-inbox-clone and grok-pull read, and follows a new
// message and a removal into the mirror with public-inbox-fetch.
func TestPublicInboxClone(t *testing.T) {
	needTools(t, "git", "public-inbox-init", "public-inbox-mda", "public-inbox-learn", "public-inbox-clone", "public-inbox-fetch", "public-inbox-index")
	ib := pitest.New(t, 2, "-L", "basic")
	var raws [][]byte
	for n := range 4 {
		raw := ib.Message(fmt.Sprintf("clone-%d@example.org", n), n)
		raws = append(raws, raw)
		ib.Deliver(t, raw)
	}
	ib.Remove(t, raws[1])
	// The export is the inbox's parent directory; the inbox's directory
	// name is the list's.
	out, list := filepath.Dir(ib.Dir), filepath.Base(ib.Dir)
	epoch := ib.Epoch(0)
	es := serveExport(t, out, Options{})

	t.Run("git clone", func(t *testing.T) {
		dst := filepath.Join(t.TempDir(), "0.git")
		git(t, ".", "clone", "-q", "--mirror", es.url+"/"+list+"/git/0.git", dst)
		if got, want := git(t, dst, "show-ref"), git(t, epoch, "show-ref"); got != want {
			t.Errorf("the clone's refs:\n%s\nwant the epoch's:\n%s", got, want)
		}
		git(t, dst, "fsck", "--no-progress")
		// Protocol v0 too, as old clients speak it.
		dst0 := filepath.Join(t.TempDir(), "0.git")
		git(t, ".", "-c", "protocol.version=0", "clone", "-q", "--mirror", es.url+"/"+list+"/git/0.git", dst0)
		if got, want := git(t, dst0, "show-ref"), git(t, epoch, "show-ref"); got != want {
			t.Errorf("the protocol v0 clone's refs:\n%s\nwant the epoch's:\n%s", got, want)
		}
	})

	var m map[string]*ManifestEntry
	t.Run("manifest", func(t *testing.T) {
		var resp *http.Response
		m, resp = readManifest(t, es.url+"/"+list+"/manifest.js.gz")
		all, _ := readManifest(t, es.url+"/manifest.js.gz")
		key := "/" + list + "/git/0.git"
		if got := manifestKeys(m); !slices.Equal(got, []string{key}) {
			t.Fatalf("manifest keys %v, want [%s]", got, key)
		}
		if got := manifestKeys(all); !slices.Equal(got, []string{key}) {
			t.Fatalf("/manifest.js.gz keys %v, want [%s]", got, key)
		}
		e := m[key]
		if want := gitFingerprint(t, epoch); e.Fingerprint != want {
			t.Errorf("fingerprint %s, want %s (sha1 of git show-ref)", e.Fingerprint, want)
		}
		newest, _ := strconv.ParseInt(strings.TrimSpace(git(t, epoch, "log", "-1", "--format=%ct")), 10, 64)
		if e.Modified != newest {
			t.Errorf("modified %d, want %d (the newest commit's time)", e.Modified, newest)
		}
		if want := "public inbox for " + ib.Addr + " [epoch 0]"; e.Description != want {
			t.Errorf("description %q, want %q", e.Description, want)
		}
		if e.Head != "ref: refs/heads/master" || e.Owner != nil || e.Reference != nil || e.Symlinks == nil {
			t.Errorf("head %q, owner %v, reference %v, symlinks %v: want ref: refs/heads/master, null, null, []", e.Head, e.Owner, e.Reference, e.Symlinks)
		}
		// grok-pull asks with If-Modified-Since.
		req, _ := http.NewRequest(http.MethodGet, es.url+"/manifest.js.gz", nil)
		req.Header.Set("If-Modified-Since", resp.Header.Get("Last-Modified"))
		r2, err := http.DefaultClient.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		r2.Body.Close()
		if r2.StatusCode != http.StatusNotModified {
			t.Errorf("GET /manifest.js.gz with If-Modified-Since its Last-Modified = %d, want 304", r2.StatusCode)
		}
		if r := get(t, es.url+"/nosuchlist/manifest.js.gz"); r.status != http.StatusNotFound {
			t.Errorf("GET /nosuchlist/manifest.js.gz = %d, want 404", r.status)
		}
	})

	dst := filepath.Join(t.TempDir(), "mirror")
	t.Run("public-inbox-clone", func(t *testing.T) {
		cmd := exec.Command("public-inbox-clone", es.url+"/"+list+"/", dst)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("public-inbox-clone: %v\n%s", err, out)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "description")); err != nil || strings.TrimSpace(string(b)) != "public inbox for "+ib.Addr {
			t.Errorf("the mirror's description: %q, %v; want the inbox's", b, err)
		}
		if b, err := os.ReadFile(filepath.Join(dst, "inbox.config.example")); err != nil || !strings.Contains(string(b), `[publicinbox "`+list+`"]`) {
			t.Errorf("the mirror's inbox.config.example: %q, %v", b, err)
		}
		got := (&pitest.Inbox{Dir: dst, Version: 2}).MessageIDs(t)
		want := ib.MessageIDs(t)
		if !slices.Equal(got, want) {
			t.Errorf("the mirror's Message-IDs (public-inbox-index) %v, want the inbox's %v", got, want)
		}
		if slices.Contains(got, "clone-1@example.org") || len(got) != 3 {
			t.Errorf("the mirror's Message-IDs %v: want the three not removed", got)
		}
	})

	t.Run("follow", func(t *testing.T) {
		if t.Failed() || m == nil {
			t.Skip("no manifest")
		}
		ib.Deliver(t, ib.Message("clone-new@example.org", 9))
		ib.Remove(t, raws[2])
		want := gitFingerprint(t, epoch)
		key := "/" + list + "/git/0.git"
		deadline := time.Now().Add(10 * time.Second)
		for {
			now, _ := readManifest(t, es.url+"/"+list+"/manifest.js.gz")
			if now[key].Fingerprint == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("fingerprint %s 10 s after the inbox changed, want %s", now[key].Fingerprint, want)
			}
			time.Sleep(200 * time.Millisecond)
		}
		if _, err := os.Stat(dst); err != nil {
			t.Skip("no mirror to update")
		}
		// public-inbox-fetch compares the manifest's fingerprints with
		// the mirror's, and fetches the epochs that changed.
		cmd := exec.Command("public-inbox-fetch", "-C", dst)
		cmd.Env = append(os.Environ(), "HOME="+t.TempDir())
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("public-inbox-fetch: %v\n%s", err, out)
		}
		if got := gitFingerprint(t, filepath.Join(dst, "git", "0.git")); got != want {
			t.Errorf("the mirror's fingerprint after public-inbox-fetch %s, want %s", got, want)
		}
		got := (&pitest.Inbox{Dir: dst, Version: 2}).MessageIDs(t)
		if w := ib.MessageIDs(t); !slices.Equal(got, w) {
			t.Errorf("the updated mirror's Message-IDs %v, want %v", got, w)
		}
		if slices.Contains(got, "clone-2@example.org") || !slices.Contains(got, "clone-new@example.org") {
			t.Errorf("the updated mirror's Message-IDs %v: want clone-new, not clone-2 (removed)", got)
		}
	})
}

// TestPublicInboxOtherOwner serves an export that another user wrote
// (resolver export run as another user than the server): git, which
// refuses a repository of another owner unless told to trust it, serves
// it, and the manifest describes it.
func TestPublicInboxOtherOwner(t *testing.T) {
	if os.Getuid() != 0 {
		t.Skip("needs root, to give the export to another user")
	}
	out := t.TempDir()
	epoch := filepath.Join(out, "x", "git", "0.git")
	bareEpoch(t, epoch, 1000)
	want := gitFingerprint(t, epoch)
	if err := filepath.Walk(filepath.Join(out, "x"), func(path string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(path, 65534, 65534)
	}); err != nil {
		t.Fatal(err)
	}
	es := serveExport(t, out, Options{})
	dst := filepath.Join(t.TempDir(), "0.git")
	git(t, ".", "clone", "-q", "--mirror", es.url+"/x/git/0.git", dst)
	if got := gitFingerprint(t, dst); got != want {
		t.Errorf("the clone's fingerprint %s, want %s", got, want)
	}
	m, _ := readManifest(t, es.url+"/manifest.js.gz")
	if e := m["/x/git/0.git"]; e == nil || e.Fingerprint != want {
		t.Errorf("manifest %v: want /x/git/0.git with fingerprint %s", m, want)
	}
}

// TestPublicInboxGitRefused asks for what the export must not serve:
// pushes, the dumb protocol, paths out of the export through symbolic
// links or odd names, oversized and malformed requests, and a damaged
// repository, whose git errors stay in the log.
func TestPublicInboxGitRefused(t *testing.T) {
	out := t.TempDir()
	bareEpoch(t, filepath.Join(out, "x", "git", "0.git"), 1000)
	outside := t.TempDir()
	bareEpoch(t, filepath.Join(outside, "git", "0.git"), 1000)
	must := func(err error) {
		if err != nil {
			t.Fatal(err)
		}
	}
	must(os.Symlink(outside, filepath.Join(out, "linked")))
	must(os.MkdirAll(filepath.Join(out, "epochlink", "git"), 0o755))
	must(os.Symlink(filepath.Join(outside, "git", "0.git"), filepath.Join(out, "epochlink", "git", "0.git")))
	must(os.MkdirAll(filepath.Join(out, "bad", "git", "0.git"), 0o755))
	must(os.WriteFile(filepath.Join(out, "bad", "git", "0.git", "HEAD"), []byte("ref: refs/heads/master\n"), 0o644))
	es := serveExport(t, out, Options{})

	refs := "/info/refs?service=git-upload-pack"
	var big bytes.Buffer
	big.Write(make([]byte, maxUploadPackBody+1))
	var bomb bytes.Buffer
	zw := gzip.NewWriter(&bomb)
	zw.Write(make([]byte, maxUploadPackBody+1))
	zw.Close()
	tests := []struct {
		name, method, path, ctype, encoding string
		body                                []byte
		want                                int
	}{
		{"receive-pack advertisement", "GET", "/x/git/0.git/info/refs?service=git-receive-pack", "", "", nil, http.StatusForbidden},
		{"receive-pack", "POST", "/x/git/0.git/git-receive-pack", "application/x-git-receive-pack-request", "", []byte("0000"), http.StatusForbidden},
		{"dumb info/refs", "GET", "/x/git/0.git/info/refs", "", "", nil, http.StatusForbidden},
		{"dumb HEAD", "GET", "/x/git/0.git/HEAD", "", "", nil, http.StatusNotFound},
		{"dumb object", "GET", "/x/git/0.git/objects/info/packs", "", "", nil, http.StatusNotFound},
		{"config", "GET", "/x/git/0.git/config", "", "", nil, http.StatusNotFound},
		{"no such epoch", "GET", "/x/git/1.git" + refs, "", "", nil, http.StatusNotFound},
		{"leading zero", "GET", "/x/git/00.git" + refs, "", "", nil, http.StatusNotFound},
		{"sign", "GET", "/x/git/+0.git" + refs, "", "", nil, http.StatusNotFound},
		{"no number", "GET", "/x/git/.git" + refs, "", "", nil, http.StatusNotFound},
		{"all.git", "GET", "/x/all.git" + refs, "", "", nil, http.StatusNotFound},
		{"upper-case list", "GET", "/X/git/0.git" + refs, "", "", nil, http.StatusNotFound},
		{"list dir a symbolic link", "GET", "/linked/git/0.git" + refs, "", "", nil, http.StatusNotFound},
		{"epoch a symbolic link", "GET", "/epochlink/git/0.git" + refs, "", "", nil, http.StatusNotFound},
		{"escaped dot-dot", "GET", "/x/git/0.git/%2e%2e/%2e%2e/%2e%2e" + refs, "", "", nil, http.StatusNotFound},
		{"escaped slash in list", "GET", "/..%2Flinked/git/0.git" + refs, "", "", nil, http.StatusNotFound},
		{"wrong content type", "POST", "/x/git/0.git/git-upload-pack", "text/plain", "", []byte("0000"), http.StatusUnsupportedMediaType},
		{"GET upload-pack", "GET", "/x/git/0.git/git-upload-pack", "", "", nil, http.StatusMethodNotAllowed},
		{"body too large", "POST", "/x/git/0.git/git-upload-pack", "application/x-git-upload-pack-request", "", big.Bytes(), http.StatusRequestEntityTooLarge},
		{"gzip bomb", "POST", "/x/git/0.git/git-upload-pack", "application/x-git-upload-pack-request", "gzip", bomb.Bytes(), http.StatusRequestEntityTooLarge},
		{"bad gzip", "POST", "/x/git/0.git/git-upload-pack", "application/x-git-upload-pack-request", "gzip", []byte("not gzip"), http.StatusBadRequest},
		{"unknown encoding", "POST", "/x/git/0.git/git-upload-pack", "application/x-git-upload-pack-request", "br", []byte("0000"), http.StatusBadRequest},
		{"damaged repository", "GET", "/bad/git/0.git" + refs, "", "", nil, http.StatusInternalServerError},
		{"description of none", "GET", "/x/description", "", "", nil, http.StatusNotFound},
		{"description outside", "GET", "/linked/description", "", "", nil, http.StatusNotFound},
		{"the export's page", "GET", "/x/git/0.git", "", "", nil, http.StatusOK},
		{"the advertisement", "GET", "/x/git/0.git" + refs, "", "", nil, http.StatusOK},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequest(tt.method, es.url+tt.path, bytes.NewReader(tt.body))
			if err != nil {
				t.Fatal(err)
			}
			if tt.ctype != "" {
				req.Header.Set("Content-Type", tt.ctype)
			}
			if tt.encoding != "" {
				req.Header.Set("Content-Encoding", tt.encoding)
			}
			resp, err := noRedirect.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Errorf("%s %s = %d, want %d\n%s", tt.method, tt.path, resp.StatusCode, tt.want, b)
			}
			if tt.want != http.StatusOK && (bytes.Contains(b, []byte("fatal")) || bytes.Contains(b, []byte(out)) || bytes.Contains(b, []byte(outside))) {
				t.Errorf("%s %s shows git's errors or a path on disk:\n%s", tt.method, tt.path, b)
			}
		})
	}
	if !strings.Contains(es.log.String(), "does not appear to be a git repository") {
		t.Errorf("git's error about the damaged repository is not in the log:\n%s", es.log.String())
	}

	t.Run("git push", func(t *testing.T) {
		before := gitFingerprint(t, filepath.Join(out, "x", "git", "0.git"))
		work := filepath.Join(t.TempDir(), "w")
		git(t, ".", "clone", "-q", es.url+"/x/git/0.git", work)
		cmd := exec.Command("git", "-c", "user.name=A", "-c", "user.email=a@example.org", "commit", "-q", "--allow-empty", "-m", "push")
		cmd.Dir = work
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("git commit: %v\n%s", err, out)
		}
		push := exec.Command("git", "push", "origin", "HEAD:refs/heads/master")
		push.Dir = work
		push.Env = append(os.Environ(), "GIT_TERMINAL_PROMPT=0")
		if out, err := push.CombinedOutput(); err == nil {
			t.Errorf("git push succeeded:\n%s", out)
		}
		if got := gitFingerprint(t, filepath.Join(out, "x", "git", "0.git")); got != before {
			t.Errorf("the epoch's refs changed by a push: fingerprint %s, was %s", got, before)
		}
	})
}

// TestPublicInboxExportRoutes: the export's routes beside public-inbox's
// message routes of the catalog, with and without --public-inbox.
func TestPublicInboxExportRoutes(t *testing.T) {
	ca := newCatalogArchive(t)
	out := t.TempDir()
	bareEpoch(t, filepath.Join(out, "demo", "git", "0.git"), 100)
	with, _ := serveWith(t, ca.st, Options{Catalogs: keeper.Fixed(ca.cat), PublicInbox: out})
	for _, base := range []string{ca.srv.URL, with.URL} {
		if r := get(t, base+"/demo/t1.1@example.org/raw"); r.status != http.StatusOK || !strings.Contains(r.body, "t1.1@example.org") {
			t.Errorf("GET %s/demo/t1.1@example.org/raw = %d, want 200 and the message", base, r.status)
		}
		if r := get(t, base+"/demo/"); r.status != http.StatusFound || r.header.Get("Location") != "/l/demo/" {
			t.Errorf("GET %s/demo/ = %d to %q, want 302 to /l/demo/", base, r.status, r.header.Get("Location"))
		}
		// A Message-ID "git" is still a Message-ID: an unknown one.
		if r := get(t, base+"/demo/git/"); r.status != http.StatusNotFound || !strings.Contains(r.body, "Message-ID") {
			t.Errorf("GET %s/demo/git/ = %d, want 404 saying no message has that Message-ID", base, r.status)
		}
	}
	refs := "/demo/git/0.git/info/refs?service=git-upload-pack"
	if r := get(t, ca.srv.URL+refs); r.status != http.StatusNotFound {
		t.Errorf("without --public-inbox, GET %s = %d, want 404", refs, r.status)
	}
	if r := get(t, ca.srv.URL+"/manifest.js.gz"); r.status != http.StatusNotFound {
		t.Errorf("without --public-inbox, GET /manifest.js.gz = %d, want 404", r.status)
	}
	if r := get(t, with.URL+refs); r.status != http.StatusOK || r.header.Get("Content-Type") != "application/x-git-upload-pack-advertisement" {
		t.Errorf("GET %s = %d %q, want 200 and the advertisement", refs, r.status, r.header.Get("Content-Type"))
	}
	m, _ := readManifest(t, with.URL+"/manifest.js.gz")
	if got := manifestKeys(m); !slices.Equal(got, []string{"/demo/git/0.git"}) {
		t.Errorf("manifest keys %v, want [/demo/git/0.git]", got)
	}
	// No description: public-inbox's words for that, and the epoch.
	if d := m["/demo/git/0.git"].Description; d != "($INBOX_DIR/description missing) [epoch 0]" {
		t.Errorf("description %q", d)
	}
}

// gitProcesses lists the processes working in dir or naming it (git
// upload-pack, and pack-objects, which runs in the repository).
func gitProcesses(t *testing.T, dir string) []string {
	t.Helper()
	ents, err := os.ReadDir("/proc")
	if err != nil {
		t.Skip("no /proc to see processes in")
	}
	var found []string
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		cwd, _ := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		cmdline, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		if strings.HasPrefix(cwd, dir) || bytes.Contains(cmdline, []byte(dir)) {
			found = append(found, e.Name()+": "+strings.ReplaceAll(string(cmdline), "\x00", " "))
		}
	}
	return found
}

// awaitNoGit waits up to 10 s for no git process to work in dir.
func awaitNoGit(t *testing.T, dir string) []string {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for {
		left := gitProcesses(t, dir)
		if len(left) == 0 || time.Now().After(deadline) {
			return left
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// uploadPackRequest is a protocol v0 request for the whole history of
// the commit want (gitprotocol-pack(5)).
func uploadPackRequest(want string) string {
	body := pktLine("want "+want+" ofs-delta\n") + pktFlush + pktLine("done\n")
	return "POST /big/git/0.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\n" +
		"Content-Length: " + strconv.Itoa(len(body)) + "\r\n\r\n" + body
}

// TestPublicInboxGitCut cuts clients mid-clone, lets one stop reading
// past the time limit, and takes every process slot: no git process is
// left behind, and a client over the bound waits briefly, then gets 503
// with Retry-After.
func TestPublicInboxGitCut(t *testing.T) {
	out := t.TempDir()
	tip := bareEpoch(t, filepath.Join(out, "big", "git", "0.git"), 24<<20)
	// No time limit to speak of here: the process goes because its
	// client did.
	es := serveExport(t, out, Options{MaxGitProcesses: 1, GitTimeout: time.Hour, ReadTimeout: time.Minute})
	es.s.pi.wait = 300 * time.Millisecond
	running := func() float64 { return metrictest.Value(t, es.s.reg, "chibrary_resolver_git_processes", "") }
	open := func() float64 { return metrictest.Value(t, es.s.reg, "chibrary_resolver_connections_open", "") }

	t.Run("cut mid-pack", func(t *testing.T) {
		for round := range 4 {
			conn, err := net.Dial("tcp", es.addr)
			if err != nil {
				t.Fatal(err)
			}
			io.WriteString(conn, uploadPackRequest(tip))
			buf := make([]byte, 64<<10)
			if _, err := io.ReadFull(conn, buf); err != nil {
				t.Fatalf("round %d: reading the pack: %v", round, err)
			}
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			if left := awaitNoGit(t, out); len(left) > 0 {
				t.Fatalf("round %d: git processes left after the client went away: %v", round, left)
			}
			if got := metrictest.Await(running, 0); got != 0 {
				t.Fatalf("round %d: %v git processes counted running, want 0", round, got)
			}
			if got := metrictest.Await(open, 0); got != 0 {
				t.Fatalf("round %d: %v connections open, want 0", round, got)
			}
		}
	})

	t.Run("stops reading past the time limit", func(t *testing.T) {
		es := serveExport(t, out, Options{GitTimeout: 2 * time.Second, WriteIdleTimeout: time.Hour})
		running := func() float64 { return metrictest.Value(t, es.s.reg, "chibrary_resolver_git_processes", "") }
		conn, err := net.Dial("tcp", es.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer conn.Close()
		io.WriteString(conn, uploadPackRequest(tip))
		time.Sleep(100 * time.Millisecond)
		if len(gitProcesses(t, out)) == 0 {
			t.Log("git finished before the check (a fast machine)")
		}
		// Not reading, but connected, with no write deadline to speak of:
		// the time limit (2 s) kills git and ends the answer.
		if left := awaitNoGit(t, out); len(left) > 0 {
			t.Fatalf("git processes left past the time limit: %v", left)
		}
		if got := metrictest.Await(running, 0); got != 0 {
			t.Fatalf("%v git processes counted running, want 0", got)
		}
		if !strings.Contains(es.log.String(), "over its time limit") {
			t.Errorf("the log does not say git was stopped at its time limit:\n%s", es.log.String())
		}
	})

	t.Run("every slot taken", func(t *testing.T) {
		// A request whose body never comes holds no process slot.
		slow, err := net.Dial("tcp", es.addr)
		if err != nil {
			t.Fatal(err)
		}
		defer slow.Close()
		io.WriteString(slow, "POST /big/git/0.git/git-upload-pack HTTP/1.1\r\nHost: x\r\nContent-Type: application/x-git-upload-pack-request\r\nContent-Length: 1000\r\n\r\n0032")
		time.Sleep(100 * time.Millisecond)
		if r := get(t, es.url+"/big/git/0.git/info/refs?service=git-upload-pack"); r.status != http.StatusOK {
			t.Fatalf("GET info/refs beside a request slow to come = %d, want 200", r.status)
		}
		// A client who stops reading the pack holds the one slot: git
		// waits for it.
		conn, err := net.Dial("tcp", es.addr)
		if err != nil {
			t.Fatal(err)
		}
		io.WriteString(conn, uploadPackRequest(tip))
		deadline := time.Now().Add(10 * time.Second)
		for {
			r := get(t, es.url+"/big/git/0.git/info/refs?service=git-upload-pack")
			if r.status == http.StatusServiceUnavailable {
				if r.header.Get("Retry-After") == "" {
					t.Error("503 without Retry-After")
				}
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET info/refs with the slot taken = %d, want 503", r.status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if got := metrictest.Value(t, es.s.reg, "chibrary_resolver_git_busy_total", ""); got < 1 {
			t.Errorf("chibrary_resolver_git_busy_total = %v, want at least 1", got)
		}
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		deadline = time.Now().Add(10 * time.Second)
		for {
			r := get(t, es.url+"/big/git/0.git/info/refs?service=git-upload-pack")
			if r.status == http.StatusOK {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("GET info/refs after the slot's holder went away = %d, want 200", r.status)
			}
			time.Sleep(20 * time.Millisecond)
		}
		if left := awaitNoGit(t, out); len(left) > 0 {
			t.Fatalf("git processes left: %v", left)
		}
	})
}

// FuzzParsePIGitPath: a path the export serves names its epoch and what
// follows exactly as written (so it writes back to itself), and never
// leaves the epoch's directory.
func FuzzParsePIGitPath(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		p, ok := parsePIGitPath(s)
		if !ok {
			return
		}
		back := strconv.Itoa(p.Epoch) + ".git"
		if p.Rest != "" {
			back += "/" + p.Rest
		}
		if back != s && back+"/" != s {
			t.Errorf("parsePIGitPath(%q) = %+v, which writes back as %q", s, p, back)
		}
		if p.Epoch < 0 || p.Epoch >= 1000000 {
			t.Errorf("parsePIGitPath(%q): epoch %d out of range", s, p.Epoch)
		}
		if filepath.IsAbs(p.Rest) || !filepath.IsLocal(p.Rest) && p.Rest != "" {
			t.Errorf("parsePIGitPath(%q): %q leaves the epoch", s, p.Rest)
		}
		for _, seg := range strings.Split(p.Rest, "/") {
			if p.Rest != "" && (seg == ".." || seg == "." || seg == "") {
				t.Errorf("parsePIGitPath(%q): segment %q in %q", s, seg, p.Rest)
			}
		}
	})
}

// manifestKeys lists the keys of a manifest, sorted.
func manifestKeys(m map[string]*ManifestEntry) []string { return slices.Sorted(maps.Keys(m)) }
