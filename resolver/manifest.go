package resolver

// grokmirror's manifest of the public-inbox export: /manifest.js.gz for
// every list, /{list}/manifest.js.gz for one (what public-inbox-clone
// asks for). A gzip'd JSON object, one key per repository, its URL path
// below the server, as grok-manifest(1) and public-inbox's
// ManifestJsGz.pm write it:
//
//	"/{list}/git/{N}.git": {
//	  "description": "the first line of its description file, else the inbox's + " [epoch N]"",
//	  "fingerprint": "sha1 of the output of git show-ref (grokmirror compares them)",
//	  "modified":    the newest committer time of its refs (unix seconds),
//	  "owner":       gitweb.owner of its config, or null,
//	  "reference":   null (an epoch borrows no objects),
//	  "symlinks":    [],
//	  "head":        "the content of HEAD (ref: refs/heads/master)"
//	}
//
// An epoch with no refs yet is left out, as public-inbox leaves it out.
// grok-pull polls the manifest: it is computed once per change of the
// repositories on disk, which a look at a few files' times and sizes of
// each repository sees (its refs, packed-refs, HEAD, config,
// description), at most once a second.

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"fmt"
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

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
)

const (
	// manifestRescan is how often at most the repositories on disk are
	// looked at again for changes.
	manifestRescan = time.Second
	// maxRefFiles bounds the files under refs/ looked at per repository
	// (public-inbox writes one: refs/heads/master).
	maxRefFiles = 1000
	// maxEpochs bounds the epochs of one list in the manifest.
	maxEpochs = 10000
	// manifestGitTimeout bounds the git commands that describe one
	// repository.
	manifestGitTimeout = time.Minute
)

// ManifestEntry is one repository of a grokmirror manifest.
type ManifestEntry struct {
	Description string   `json:"description"`
	Fingerprint string   `json:"fingerprint"`
	Modified    int64    `json:"modified"`
	Owner       *string  `json:"owner"`
	Reference   *string  `json:"reference"`
	Symlinks    []string `json:"symlinks"`
	Head        string   `json:"head"`
}

// manifestCache keeps the manifest entries of the export's repositories
// and the gzip'd manifests made of them.
type manifestCache struct {
	root string
	log  *slog.Logger

	mu       sync.Mutex
	scanned  time.Time
	repos    map[string]*repoEntry // by URL path
	gen      int                   // counts the changes seen
	rendered map[string]*renderedManifest
}

type repoEntry struct {
	sig   string
	entry *ManifestEntry // nil: no refs yet
}

// renderedManifest is a manifest as served.
type renderedManifest struct {
	gen      int
	gz       []byte
	etag     string
	modified time.Time
}

func newManifestCache(root string, log *slog.Logger) *manifestCache {
	return &manifestCache{root: root, log: log, repos: map[string]*repoEntry{}, rendered: map[string]*renderedManifest{}}
}

// get returns the manifest of the list ("" for every list), brought up
// to date with the disk when it was last looked at over manifestRescan
// ago.
func (m *manifestCache) get(ctx context.Context, list string) (*renderedManifest, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if time.Since(m.scanned) >= manifestRescan {
		if err := m.rescan(ctx); err != nil {
			return nil, err
		}
		m.scanned = time.Now()
	}
	if r := m.rendered[list]; r != nil && r.gen == m.gen {
		return r, nil
	}
	out := map[string]*ManifestEntry{}
	var newest int64
	for path, re := range m.repos {
		if re.entry == nil || list != "" && !strings.HasPrefix(path, "/"+list+"/") {
			continue
		}
		out[path] = re.entry
		newest = max(newest, re.entry.Modified)
	}
	js, err := json.Marshal(out)
	if err != nil {
		return nil, err
	}
	var buf bytes.Buffer
	zw := gzip.NewWriter(&buf)
	zw.Write(js)
	if err := zw.Close(); err != nil {
		return nil, err
	}
	sum := sha256.Sum256(js)
	r := &renderedManifest{gen: m.gen, gz: buf.Bytes(), etag: `"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`}
	if newest > 0 {
		r.modified = time.Unix(newest, 0)
	}
	m.rendered[list] = r
	return r, nil
}

// rescan looks at every repository of the export, and describes anew
// those that changed.
func (m *manifestCache) rescan(ctx context.Context) error {
	lists, err := os.ReadDir(m.root)
	if err != nil {
		return fmt.Errorf("cannot read the public-inbox export: %w", err)
	}
	seen := map[string]bool{}
	for _, l := range lists {
		list := l.Name()
		if !l.IsDir() || !catalog.ValidListName(list) || !realDir(filepath.Join(m.root, list, "git")) {
			continue
		}
		epochs, err := os.ReadDir(filepath.Join(m.root, list, "git"))
		if err != nil {
			continue
		}
		inboxSig := fileSig(filepath.Join(m.root, list, "description"))
		count := 0
		for _, ep := range epochs {
			p, ok := parsePIGitPath(ep.Name())
			if !ok || p.Rest != "" || !ep.IsDir() {
				continue
			}
			if count++; count > maxEpochs {
				break
			}
			dir := filepath.Join(m.root, list, "git", ep.Name())
			path := "/" + list + "/git/" + ep.Name()
			seen[path] = true
			sig := inboxSig + repoSig(dir)
			if re := m.repos[path]; re != nil && re.sig == sig {
				continue
			}
			entry, err := describeRepo(ctx, dir, list, p.Epoch, filepath.Join(m.root, list))
			if err != nil {
				m.log.Error("cannot describe a repository for the manifest", "dir", dir, "err", err)
				continue // tried again at the next look
			}
			m.repos[path] = &repoEntry{sig: sig, entry: entry}
			m.gen++
		}
	}
	for path := range m.repos {
		if !seen[path] {
			delete(m.repos, path)
			m.gen++
		}
	}
	return nil
}

// fileSig is what changes when the file at path is replaced or written.
func fileSig(path string) string {
	fi, err := os.Lstat(path)
	if err != nil {
		return "-;"
	}
	return fmt.Sprintf("%d.%d.%d;", fi.ModTime().UnixNano(), fi.Size(), fi.Mode())
}

// repoSig is what changes when the repository's refs, HEAD or
// configuration change: git writes each by renaming a new file into place.
func repoSig(dir string) string {
	h := sha256.New()
	for _, f := range []string{"HEAD", "packed-refs", "config", "description"} {
		fmt.Fprint(h, f, fileSig(filepath.Join(dir, f)))
	}
	n := 0
	filepath.WalkDir(filepath.Join(dir, "refs"), func(path string, d fs.DirEntry, err error) error {
		if n++; n > maxRefFiles {
			return fs.SkipAll
		}
		if err == nil {
			fmt.Fprint(h, path, fileSig(path))
		}
		return nil
	})
	return hex.EncodeToString(h.Sum(nil))
}

// describeRepo makes the manifest entry of a repository, as
// public-inbox's PublicInbox::Git::manifest_entry does; nil for one with
// no refs.
func describeRepo(ctx context.Context, dir, list string, epoch int, inbox string) (*ManifestEntry, error) {
	ctx, cancel := context.WithTimeout(ctx, manifestGitTimeout)
	defer cancel()
	fp := sha1.New()
	empty, err := gitOutput(ctx, dir, fp, "show-ref")
	if err != nil {
		return nil, err
	}
	if empty {
		return nil, nil
	}
	e := &ManifestEntry{Fingerprint: hex.EncodeToString(fp.Sum(nil)), Symlinks: []string{}}
	var dates bytes.Buffer
	if _, err := gitOutput(ctx, dir, &dates, "for-each-ref", "--sort=-committerdate", "--format=%(committerdate:raw)", "--count=1"); err != nil {
		return nil, err
	}
	if f := strings.Fields(dates.String()); len(f) > 0 {
		e.Modified, _ = strconv.ParseInt(f[0], 10, 64)
	}
	if e.Modified == 0 {
		e.Modified = time.Now().Unix()
	}
	var owner bytes.Buffer
	if _, err := gitOutput(ctx, dir, &owner, "config", "--file", filepath.Join(dir, "config"), "gitweb.owner"); err != nil {
		return nil, err
	}
	if o := strings.TrimSpace(owner.String()); o != "" {
		e.Owner = &o
	}
	e.Description = firstLine(filepath.Join(dir, "description"))
	if e.Description == "" {
		e.Description = "Unnamed repository"
	}
	if strings.HasPrefix(e.Description, "Unnamed repository") {
		desc := firstLine(filepath.Join(inbox, "description"))
		if desc == "" {
			desc = "($INBOX_DIR/description missing)" // as public-inbox says it
		}
		e.Description = desc + " [epoch " + strconv.Itoa(epoch) + "]"
	}
	head, _ := readSmallFile(filepath.Join(dir, "HEAD"), 4096)
	e.Head = strings.TrimSpace(string(head))
	return e, nil
}

// gitOutput runs git in dir, its output into w; empty says it exited 1
// with nothing written (show-ref without refs, config without the key).
func gitOutput(ctx context.Context, dir string, w interface{ Write([]byte) (int, error) }, args ...string) (empty bool, err error) {
	cmd := exec.CommandContext(ctx, "git", append([]string{"-c", "safe.directory=" + dir, "--git-dir=" + dir}, args...)...)
	cmd.Env = gitEnv("")
	cmd.Dir = dir
	var n countWriter
	cmd.Stdout = &n
	n.w = w
	stderr := &boundedBuffer{max: maxGitStderr}
	cmd.Stderr = stderr
	err = cmd.Run()
	if ee, ok := err.(*exec.ExitError); ok && ee.ExitCode() == 1 && n.n == 0 {
		return true, nil
	}
	if err != nil {
		return false, fmt.Errorf("git %s: %w: %s", args[0], err, stderr.String())
	}
	return n.n == 0, nil
}

type countWriter struct {
	w interface{ Write([]byte) (int, error) }
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	c.n += int64(len(p))
	return c.w.Write(p)
}

// firstLine is the first line of a small file, "" if none.
func firstLine(path string) string {
	b, err := readSmallFile(path, maxDescription)
	if err != nil {
		return ""
	}
	line, _, _ := bufio.NewReader(bytes.NewReader(b)).ReadLine()
	return strings.TrimSpace(string(line))
}

// manifestRoot serves /manifest.js.gz: every list's repositories.
func (s *Server) manifestRoot(w http.ResponseWriter, r *http.Request) {
	if s.pi == nil {
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address: no public-inbox export is served here.")
		return
	}
	s.serveManifest(w, r, "")
}

// serveManifest writes the manifest of list ("" for every list).
func (s *Server) serveManifest(w http.ResponseWriter, r *http.Request, list string) {
	if list == "" {
		httpserve.SetRoute(w, "GET /manifest.js.gz")
	}
	// A client that goes away does not stop the look at the disk
	// others wait for.
	m, err := s.pi.manifests.get(context.WithoutCancel(r.Context()), list)
	if err != nil {
		s.log.Error("cannot make the manifest", "err", err)
		gitFail(w, http.StatusInternalServerError, "Cannot read the public-inbox export; the server's log says why.")
		return
	}
	h := w.Header()
	h.Set("Content-Type", "application/gzip")
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", m.etag)
	http.ServeContent(w, r, "", m.modified, bytes.NewReader(m.gz))
}
