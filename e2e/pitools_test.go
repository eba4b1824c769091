package e2e

import (
	"bytes"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

// The tests here run the real b4 and lei (Debian's: b4 0.12, lei 1.9)
// against a resolver on loopback serving fixtures/series, a 2-patch
// series in two versions (greet-v1-N@example.org, greet-v2-N@example.org,
// N = 0 the cover letter) with reviews, as they would run against
// lore.kernel.org, and check the messages they come back with.

// seriesArchive imports fixtures/series into a new archive (data),
// serves it, and waits until the catalog has every message.
func seriesArchive(t *testing.T) (r *resolverServer, data string) {
	t.Helper()
	data = filepath.Join(t.TempDir(), "archive")
	if imp := start(t, "importer", procOptions{}, "--data", data, "--list", "greet-devel",
		"../fixtures/series/greet-v1.mbox", "../fixtures/series/greet-v2.mbox"); imp.wait(time.Minute) != 0 {
		t.Fatalf("import failed:\n%s", imp.log())
	}
	r = startResolver(t, data)
	waitForMessage(t, r, "greet-v2-review-2@example.org")
	return r, data
}

// waitForMessage waits until the resolver's catalog has the message.
func waitForMessage(t *testing.T, r *resolverServer, id string) {
	t.Helper()
	eventually(t, time.Minute, "the catalog to have <"+id+">", func() bool {
		status, _, _, err := get(t.Context(), r.url+"/all/"+url.PathEscape(id)+"/")
		return err == nil && status == http.StatusFound
	})
}

// toolEnv is the environment of b4 and lei: a home and XDG directories
// of their own under a temporary directory, and git's configuration there
// pointing b4 at the archive (docs/reading.md).
func toolEnv(t *testing.T, archive string) (env []string, home string) {
	t.Helper()
	// A short path: lei's socket lives under XDG_RUNTIME_DIR, and a
	// socket's path has at most 107 bytes.
	home, err := os.MkdirTemp("", "pitools")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(home) })
	for _, d := range []string{"config", "cache", "data", "state", "run"} {
		if err := os.Mkdir(filepath.Join(home, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	config := fmt.Sprintf("[user]\n\tname = Tester\n\temail = tester@example.org\n"+
		"[b4]\n\tmidmask = %[1]s/all/%%s\n\tlinkmask = %[1]s/r/%%s\n\tsearchmask = %[1]s/all/?x=m&t=1&q=%%s\n", archive)
	if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644); err != nil {
		t.Fatal(err)
	}
	env = append(cleanEnv(), "HOME="+home, "XDG_CONFIG_HOME="+filepath.Join(home, "config"),
		"XDG_CACHE_HOME="+filepath.Join(home, "cache"), "XDG_DATA_HOME="+filepath.Join(home, "data"),
		"XDG_STATE_HOME="+filepath.Join(home, "state"), "XDG_RUNTIME_DIR="+filepath.Join(home, "run"),
		"GIT_CONFIG_NOSYSTEM=1", "http_proxy=", "https_proxy=", "HTTP_PROXY=", "HTTPS_PROXY=", "no_proxy=*")
	return env, home
}

// tool returns the path of program, or skips the test.
func tool(t *testing.T, program string) string {
	t.Helper()
	p, err := exec.LookPath(program)
	if err != nil {
		t.Skipf("%s is not installed (scripts/install-test-deps.sh installs Debian's)", program)
	}
	return p
}

// run runs a program in dir with env and returns its output (stdout and
// stderr), failing the test if it fails.
func run(t *testing.T, env []string, dir string, argv ...string) string {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), argv[0], argv[1:]...)
	cmd.Env, cmd.Dir = env, dir
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("%s: %v\n%s", strings.Join(argv, " "), err, out)
	}
	return string(out)
}

// mboxIDs returns the Message-IDs of the messages of an mbox file, sorted.
func mboxIDs(t *testing.T, path string) []string {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	mr := mbox.NewReader(f, mbox.Options{Name: path, Format: mbox.FormatAuto})
	var ids []string
	for {
		m, err := mr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := mailmsg.Parse(m.Raw)
		ids = append(ids, meta.MessageID)
	}
	slices.Sort(ids)
	return ids
}

// maildirIDs returns the Message-IDs of the messages of a Maildir, sorted.
func maildirIDs(t *testing.T, dir string) []string {
	t.Helper()
	var ids []string
	for _, sub := range []string{"new", "cur"} {
		files, _ := filepath.Glob(filepath.Join(dir, sub, "*"))
		for _, f := range files {
			raw, err := os.ReadFile(f)
			if err != nil {
				t.Fatal(err)
			}
			meta, _ := mailmsg.Parse(raw)
			ids = append(ids, meta.MessageID)
		}
	}
	slices.Sort(ids)
	return ids
}

// ids names messages of the series: "v1-0" is <greet-v1-0@example.org>.
func ids(names ...string) []string {
	out := make([]string, len(names))
	for i, n := range names {
		out[i] = "greet-" + n + "@example.org"
	}
	slices.Sort(out)
	return out
}

// TestB4Series: b4 mbox, am, am -c, shazam and diff on a series in two
// versions, as a maintainer runs them against lore.
func TestB4Series(t *testing.T) {
	needPrograms(t)
	b4 := tool(t, "b4")
	r, _ := seriesArchive(t)
	env, home := toolEnv(t, r.url)

	t.Run("mbox", func(t *testing.T) {
		out := t.TempDir()
		run(t, env, home, b4, "mbox", "-o", out, "greet-v1-0@example.org")
		got := mboxIDs(t, filepath.Join(out, "greet-v1-0@example.org.mbx"))
		if want := ids("v1-0", "v1-1", "v1-2", "v1-review-2", "v1-review-3"); !slices.Equal(got, want) {
			t.Errorf("b4 mbox wrote %q, want the thread %q", got, want)
		}
	})

	// am writes the patches of the version asked for, with the trailers
	// the reviews gave.
	t.Run("am", func(t *testing.T) {
		out := t.TempDir()
		log := run(t, env, home, b4, "am", "-o", out, "greet-v1-0@example.org")
		files, _ := filepath.Glob(filepath.Join(out, "*.mbx"))
		if len(files) != 1 {
			t.Fatalf("b4 am wrote %q, want one .mbx:\n%s", files, log)
		}
		if got, want := mboxIDs(t, files[0]), ids("v1-1", "v1-2"); !slices.Equal(got, want) {
			t.Errorf("b4 am wrote %q, want %q:\n%s", got, want, log)
		}
		mbx, err := os.ReadFile(files[0])
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(mbx, []byte("Reviewed-by: Rev Iewer <rev@example.org>")) {
			t.Errorf("b4 am did not add the review's trailer:\n%s\n%s", mbx, log)
		}
		if !bytes.Contains(mbx, []byte(`printf("bye %s\n", name);`)) {
			t.Errorf("b4 am did not write version 1's patch:\n%s", mbx)
		}
	})

	// am -c looks for newer versions with the searchmask: a search in
	// public-inbox's language, (s:"..." AND f:"...") AND d:YYYYMMDD..,
	// whole threads (t=1).
	t.Run("am -c finds v2", func(t *testing.T) {
		out := t.TempDir()
		log := run(t, env, home, b4, "am", "-c", "-o", out, "greet-v1-0@example.org")
		if !strings.Contains(log, "Added from v2: ") {
			t.Errorf("b4 am -c did not find version 2:\n%s", log)
		}
		files, _ := filepath.Glob(filepath.Join(out, "v2_*.mbx"))
		if len(files) != 1 {
			t.Fatalf("b4 am -c wrote no v2_*.mbx:\n%s", log)
		}
		if got, want := mboxIDs(t, files[0]), ids("v2-1", "v2-2"); !slices.Equal(got, want) {
			t.Errorf("b4 am -c wrote %q, want version 2's patches %q:\n%s", got, want, log)
		}
	})

	// shazam applies a version onto a tree: the commits, the series'
	// trailers (-t: the cover letter's too), the link to each patch
	// (-l: the linkmask, /r/MSGID, which leads to the message).
	t.Run("shazam", func(t *testing.T) {
		repo := baseRepo(t, env)
		log := run(t, env, repo, b4, "shazam", "-t", "-l", "greet-v2-0@example.org")
		subjects := run(t, env, repo, "git", "log", "--format=%s", "base..HEAD")
		if want := "greet: add a farewell\ngreet: say hello, not hi\n"; subjects != want {
			t.Fatalf("after b4 shazam, the commits are %q, want %q:\n%s", subjects, want, log)
		}
		for _, c := range []string{"HEAD", "HEAD~1"} {
			body := run(t, env, repo, "git", "log", "-1", "--format=%B", c)
			if !strings.Contains(body, "Reviewed-by: Rev Iewer <rev@example.org>") {
				t.Errorf("commit %s lacks the cover letter's Reviewed-by:\n%s", c, body)
			}
			link := ""
			for _, l := range strings.Split(body, "\n") {
				if rest, ok := strings.CutPrefix(l, "Link: "); ok {
					link = rest
				}
			}
			if !strings.HasPrefix(link, r.url+"/r/greet-v2-") {
				t.Errorf("commit %s: Link %q, want the archive's /r/ link (linkmask)", c, link)
				continue
			}
			// The link leads to the message.
			status, h, _, err := get(t.Context(), link)
			if err != nil || status != http.StatusMovedPermanently || !strings.Contains(h.Get("Location"), "/greet-devel/greet-v2-") {
				t.Errorf("GET %s = %d %q, %v", link, status, h.Get("Location"), err)
			}
		}
		greet, err := os.ReadFile(filepath.Join(repo, "lib", "greet.c"))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(greet, []byte(`printf("goodbye %s\n", name);`)) || !bytes.Contains(greet, []byte(`printf("hello %s\n", name);`)) {
			t.Errorf("lib/greet.c after b4 shazam is not version 2's:\n%s", greet)
		}
	})

	// diff finds the version before (a search: d:..YYYYMMDD) and shows
	// the range-diff of the two.
	t.Run("diff v1 v2", func(t *testing.T) {
		repo := baseRepo(t, env)
		diff := filepath.Join(t.TempDir(), "diff")
		log := run(t, env, repo, b4, "diff", "-o", diff, "greet-v2-0@example.org")
		b, err := os.ReadFile(diff)
		if err != nil {
			t.Fatalf("b4 diff wrote no diff: %v\n%s", err, log)
		}
		log = string(b) + log
		for _, want := range []string{"greet: say hello, not hi", "greet: add a farewell", "-+	printf(\"bye %s\\n\", name);", "++	printf(\"goodbye %s\\n\", name);"} {
			if !strings.Contains(log, want) {
				t.Errorf("b4 diff does not show %q:\n%s", want, log)
			}
		}
	})
}

// baseRepo is a git repository of fixtures/series/base, the tree the
// series applies to: its one commit is the branch base's and the checked
// out branch work's.
func baseRepo(t *testing.T, env []string) string {
	t.Helper()
	repo := t.TempDir()
	run(t, env, repo, "git", "init", "-q", "-b", "work")
	if err := os.CopyFS(repo, os.DirFS("../fixtures/series/base")); err != nil {
		t.Fatal(err)
	}
	run(t, env, repo, "git", "add", ".")
	run(t, env, repo, "git", "commit", "-q", "-m", "greet: the first version")
	run(t, env, repo, "git", "branch", "base")
	return repo
}

// TestLei: lei q -I URL with public-inbox's search language and t=1, and
// lei up of a saved search after new mail arrives.
func TestLei(t *testing.T) {
	needPrograms(t)
	lei := tool(t, "lei")
	tool(t, "curl") // lei's HTTP client
	r, data := seriesArchive(t)
	env, home := toolEnv(t, r.url)
	t.Cleanup(func() {
		// lei started a daemon for this home: stop it.
		cmd := exec.Command(lei, "daemon-kill")
		cmd.Env = env
		cmd.Run()
	})
	all := r.url + "/all/"
	// lei joins its arguments into the query (quoting one with a space
	// in it as a phrase).
	q := func(t *testing.T, args ...string) []string {
		t.Helper()
		out := filepath.Join(t.TempDir(), "out")
		external := all
		if strings.HasPrefix(args[0], "http://") {
			external, args = args[0], args[1:]
		}
		log := run(t, env, home, append([]string{lei, "q", "-I", external, "-o", out}, args...)...)
		got := maildirIDs(t, out)
		if len(got) == 0 {
			t.Logf("lei q %q:\n%s", args, log)
		}
		return got
	}

	t.Run("words and t=1", func(t *testing.T) {
		if got, want := q(t, "from:rev", "farewell"), ids("v1-review-3"); !slices.Equal(got, want) {
			t.Errorf("lei q = %q, want %q", got, want)
		}
		if got, want := q(t, "-t", "from:rev", "farewell"), ids("v1-0", "v1-1", "v1-2", "v1-review-2", "v1-review-3"); !slices.Equal(got, want) {
			t.Errorf("lei q -t = %q, want the thread %q", got, want)
		}
	})

	t.Run("s: f: d: AND", func(t *testing.T) {
		if got, want := q(t, "s:greet", "AND", "f:pat@example.org", "AND", "d:20240301..20240305"), ids("v1-0", "v1-1", "v1-2"); !slices.Equal(got, want) {
			t.Errorf("lei q = %q, want %q", got, want)
		}
		if got, want := q(t, "-t", "s:farewell", "AND", "f:rev@example.org"), ids("v1-0", "v1-1", "v1-2", "v1-review-2", "v1-review-3"); !slices.Equal(got, want) {
			t.Errorf("lei q -t = %q, want the thread %q", got, want)
		}
	})

	t.Run("OR NOT, a list's URL, nothing found", func(t *testing.T) {
		// AND binds before OR, as in Xapian: the parentheses matter.
		if got, want := q(t, "(s:farewell", "OR", "s:hello)", "AND", "NOT", "s:Re", "AND", "d:..20240302"), ids("v1-0", "v1-1", "v1-2"); !slices.Equal(got, want) {
			t.Errorf("lei q = %q, want %q", got, want)
		}
		if got, want := q(t, r.url+"/greet-devel/", "f:rev@example.org", "AND", "d:20240308.."), ids("v2-review-2"); !slices.Equal(got, want) {
			t.Errorf("lei q -I /greet-devel/ = %q, want %q", got, want)
		}
		// A 404 is no match to lei, not an error.
		if got := q(t, "s:xylophone"); len(got) != 0 {
			t.Errorf("lei q s:xylophone = %q, want nothing", got)
		}
	})

	// lei up asks for what is new since its last search, less two days:
	// (QUERY) AND dt:YYYYMMDDhhmmss.. (LeiXSearch.pm, fudge_qstr_time).
	t.Run("up", func(t *testing.T) {
		out := filepath.Join(t.TempDir(), "out")
		run(t, env, home, lei, "q", "-I", all, "-o", out, "f:rev@example.org")
		if got, want := maildirIDs(t, out), ids("v1-review-2", "v1-review-3", "v2-review-2"); !slices.Equal(got, want) {
			t.Fatalf("lei q = %q, want %q", got, want)
		}
		// New mail: a reply of today, and one from someone else.
		now := time.Now().UTC()
		late := fmt.Sprintf("From: Rev Iewer <rev@example.org>\nTo: greet-devel@lists.example.org\nDate: %s\n"+
			"Subject: Re: [PATCH v2 0/2] greet: hello and goodbye\nMessage-ID: <greet-v2-late@example.org>\n"+
			"In-Reply-To: <greet-v2-0@example.org>\nReferences: <greet-v2-0@example.org>\n\nApplied, thanks.\n", now.Format(time.RFC1123Z))
		other := strings.NewReplacer("Rev Iewer <rev@", "Pat Sender <pat@", "v2-late", "v2-other", "Applied", "Thank you").Replace(late)
		mboxFile := writeFile(t, t.TempDir(), "new.mbox", []byte("From rev@example.org "+now.Format(time.ANSIC)+"\n"+late+"\nFrom pat@example.org "+now.Format(time.ANSIC)+"\n"+other))
		if imp := start(t, "importer", procOptions{}, "--data", data, "--list", "greet-devel", mboxFile); imp.wait(time.Minute) != 0 {
			t.Fatalf("import failed:\n%s", imp.log())
		}
		waitForMessage(t, r, "greet-v2-other@example.org")
		log := run(t, env, home, lei, "up", out)
		if got, want := maildirIDs(t, out), ids("v1-review-2", "v1-review-3", "v2-review-2", "v2-late"); !slices.Equal(got, want) {
			t.Errorf("after lei up: %q, want %q:\n%s", got, want, log)
		}
	})
}
