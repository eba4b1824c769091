package e2e

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
)

// removedWithin is how soon after `resolver remove` returns a running
// resolver's pages must have let the message go (DESIGN: the catalog
// follows the store within 2 seconds).
const removedWithin = 2 * time.Second

// removalThread is a thread of three on one list, the middle message
// holding a secret (a password leaked to the list, say) and an
// attachment, and words found nowhere else.
func removalThread(secret string) [][]byte {
	return [][]byte{
		[]byte("From: Ann <ann@example.org>\nTo: ops@lists.example.org\nList-Id: <ops.lists.example.org>\nSubject: the new router\n" +
			"Message-ID: <router-1@example.org>\nDate: Tue, 2 Jan 2024 10:00:00 +0000\n\nHow do we log in to it?\n"),
		[]byte("From: Bob <bob@example.org>\nTo: ops@lists.example.org\nList-Id: <ops.lists.example.org>\nSubject: Re: the new router\n" +
			"Message-ID: <router-2@example.org>\nIn-Reply-To: <router-1@example.org>\nReferences: <router-1@example.org>\n" +
			"Date: Tue, 2 Jan 2024 11:00:00 +0000\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b\"\n\n" +
			"--b\nContent-Type: text/plain\n\nThe password is " + secret + " and the quokkaesque login is admin.\n" +
			"--b\nContent-Type: text/plain; name=\"creds.txt\"\nContent-Disposition: attachment; filename=\"creds.txt\"\n\nuser admin password " + secret + "\n--b--\n"),
		[]byte("From: Ann <ann@example.org>\nTo: ops@lists.example.org\nList-Id: <ops.lists.example.org>\nSubject: Re: the new router\n" +
			"Message-ID: <router-3@example.org>\nIn-Reply-To: <router-2@example.org>\nReferences: <router-1@example.org> <router-2@example.org>\n" +
			"Date: Tue, 2 Jan 2024 12:00:00 +0000\n\nPlease change it now.\n"),
	}
}

// TestRemoval: a message with a leaked password is removed while the
// resolver serves: within 2 seconds every route answers as a removal
// should; importing it again and the watcher fetching it again report it
// removed; after resolver compact no file of the data directory holds a
// byte sequence only that message had.
func TestRemoval(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	secret := fmt.Sprintf("Zq%dXv7pWd3kR9", time.Now().UnixNano())
	thread := removalThread(secret)
	msgs := append(mail(t, 300), thread...)
	input := writeFile(t, dir, "input.mbox", mboxOf(t, msgs))
	manifest := filepath.Join(dir, "m1.jsonl")
	imp := start(t, "importer", procOptions{}, "--data", data, "--manifest", manifest, "--log-format", "json", input)
	if code := imp.wait(2 * time.Minute); code != 0 {
		t.Fatalf("importer exited %d", code)
	}
	m1 := readManifest(t, manifest)
	cn := m1[len(msgs)-2].CallNumber
	reply := m1[len(msgs)-1].CallNumber
	r := startResolver(t, data)
	eventually(t, 60*time.Second, "the thread in the catalog", func() bool {
		status, _, _, err := get(t.Context(), r.url+"/api/v1/threads/"+reply)
		return err == nil && status == 200
	})
	if status, _, body, _ := get(t.Context(), r.url+"/search?q=quokkaesque"); status != 200 || !bytes.Contains(body, []byte(cn)) {
		t.Fatalf("before the removal, search finds %d %q", status, body)
	}

	rm := start(t, "resolver remove", procOptions{}, "remove", "--data", data, "--reason", "a password leaked to the list", cn)
	if code := rm.wait(time.Minute); code != 0 {
		t.Fatalf("resolver remove exited %d:\n%s", code, rm.log())
	}
	removed := time.Now()
	if !strings.Contains(rm.log(), "removed "+cn+" on ") {
		t.Errorf("resolver remove did not say what it removed:\n%s", rm.log())
	}
	// Every route, within 2 seconds.
	type check struct {
		path   string
		status int
		has    string // in the body
		hasNot string
	}
	checks := []check{
		{"/" + cn, http.StatusGone, "a password leaked to the list", "quokkaesque"},
		{"/" + cn + "/raw", http.StatusGone, "a password leaked to the list", secret},
		{"/" + cn + "/attachments/1/creds.txt", http.StatusGone, "removed", secret},
		{"/api/v1/messages/" + cn, http.StatusGone, `"removed_at"`, "quokkaesque"},
		{"/m/router-2@example.org", http.StatusNotFound, "", cn},
		{"/search?q=quokkaesque", http.StatusOK, "", cn},
		{"/t/" + reply + "/", http.StatusOK, "A message removed from the archive on", "quokkaesque"},
		{"/" + reply, http.StatusOK, "removed", "quokkaesque"},
		{"/l/ops.lists.example.org/2024-01/", http.StatusOK, "", cn},
		{"/l/ops.lists.example.org/atom.xml", http.StatusOK, "", cn},
		{"/api/v1/removals", http.StatusOK, cn, ""},
	}
	var last []string
	ok := func() bool {
		last = last[:0]
		for _, c := range checks {
			status, _, body, err := get(t.Context(), r.url+c.path)
			switch {
			case err != nil:
				last = append(last, fmt.Sprintf("GET %s: %v", c.path, err))
			case status != c.status || c.has != "" && !bytes.Contains(body, []byte(c.has)) || c.hasNot != "" && bytes.Contains(body, []byte(c.hasNot)):
				last = append(last, fmt.Sprintf("GET %s = %d, want %d with %q and without %q:\n%.600s", c.path, status, c.status, c.has, c.hasNot, body))
			}
		}
		return len(last) == 0
	}
	for !ok() {
		if time.Since(removed) > 30*time.Second {
			t.Fatalf("30 s after the removal:\n%s", strings.Join(last, "\n"))
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Logf("every route answered the removal %v after resolver remove returned", time.Since(removed).Round(time.Millisecond))
	if d := time.Since(removed); d > removedWithin {
		t.Errorf("the routes answered the removal %v after it, want within %v", d.Round(time.Millisecond), removedWithin)
	}
	month := func() []byte {
		_, _, body, _ := get(t.Context(), r.url+"/l/ops.lists.example.org/2024-01.mbox.gz")
		return body
	}
	if bytes.Contains(gunzip(t, month()), []byte(secret)) {
		t.Errorf("the month's download still holds the removed message")
	}

	// Imported again: removed, under its number.
	manifest2 := filepath.Join(dir, "m2.jsonl")
	imp = start(t, "importer again", procOptions{}, "--data", data, "--manifest", manifest2, "--log-format", "json", input)
	if code := imp.wait(2 * time.Minute); code != 0 {
		t.Fatalf("importer again exited %d", code)
	}
	if e := readManifest(t, manifest2)[len(msgs)-2]; e.Status != "removed" || e.CallNumber != cn {
		t.Errorf("re-import manifest says %+v, want removed %s", e, cn)
	}
	// Fetched again by the watcher: removed, nothing stored.
	dove := dovecottest.Start(t, dovecottest.Options{})
	if _, err := dove.Append(t.Context(), "INBOX", thread[1]); err != nil {
		t.Fatal(err)
	}
	before, err := r.stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	w := startWatcher(t, dove, data, nil)
	w.waitLog("the same message was removed from the archive", time.Minute)
	w.stop()
	if after, err := r.stats(t.Context()); err != nil || after != before {
		t.Errorf("the archive counts %d messages after the watcher fetched the removed one, %d before (%v)", after, before, err)
	}

	// After compaction, not a byte of it anywhere in the data directory.
	r.stop()
	c := start(t, "resolver compact", procOptions{}, "compact", "--data", data)
	if code := c.wait(2 * time.Minute); code != 0 {
		t.Fatalf("resolver compact exited %d:\n%s", code, c.log())
	}
	unique := [][]byte{[]byte(secret), []byte("quokkaesque"), []byte("creds.txt")}
	found := 0
	filepath.WalkDir(data, func(p string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		found++
		for _, u := range unique {
			if bytes.Contains(b, u) {
				t.Errorf("%s still holds %q, of the removed message", p, u)
			}
		}
		return nil
	})
	if found < 4 {
		t.Errorf("searched %d files, want the store, its packs, the catalog and the rest", found)
	}
	// The archive otherwise intact.
	r = startResolver(t, data)
	for _, e := range m1 {
		if e.CallNumber == cn {
			continue
		}
		if status, _, _, err := get(t.Context(), r.url+"/"+e.CallNumber+"/raw"); err != nil || status != 200 {
			t.Errorf("GET /%s/raw after the compaction = %d, %v", e.CallNumber, status, err)
			break
		}
	}
}

// TestRemoveAsks: on a terminal, resolver remove shows what it will
// remove and removes nothing unless told yes.
func TestRemoveAsks(t *testing.T) {
	needPrograms(t)
	python, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("no python3 to give resolver remove a terminal")
	}
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	thread := removalThread("irrelevant")
	manifest := filepath.Join(dir, "m.jsonl")
	imp := start(t, "importer", procOptions{}, "--data", data, "--manifest", manifest, writeFile(t, dir, "in.mbox", mboxOf(t, thread)))
	if code := imp.wait(time.Minute); code != 0 {
		t.Fatalf("importer exited %d", code)
	}
	cn := readManifest(t, manifest)[1].CallNumber
	// python3's pty module runs the command on a new terminal and copies
	// its own standard input (the answer) to it.
	onTerminal := func(answer string) string {
		cmd := exec.Command(python, "-c", "import pty, sys; sys.exit(pty.spawn(sys.argv[1:]) >> 8)", bin(t, "resolver"), "remove", "--data", data, "--reason", "test", cn)
		cmd.Stdin = strings.NewReader(answer)
		cmd.Env = cleanEnv()
		out, _ := cmd.CombinedOutput()
		return string(out)
	}
	out := onTerminal("n\n")
	if !strings.Contains(out, "Remove them? [y/N]") || !strings.Contains(out, "Re: the new router") || !strings.Contains(out, "nothing removed") {
		t.Errorf("answering n on a terminal:\n%s", out)
	}
	raw := func() int {
		r := start(t, "resolver get", procOptions{}, "get", "--data", data, cn)
		return r.wait(time.Minute)
	}
	if code := raw(); code != 0 {
		t.Fatalf("after answering n, resolver get exits %d, want 0 (not removed)", code)
	}
	out = onTerminal("y\n")
	if !strings.Contains(out, "removed "+cn) {
		t.Errorf("answering y on a terminal:\n%s", out)
	}
	if code := raw(); code != 1 {
		t.Errorf("after answering y, resolver get exits %d, want 1 (removed)", code)
	}
	var list []map[string]any
	r := start(t, "resolver removals", procOptions{}, "removals", "--json", "--data", data)
	r.wait(time.Minute)
	if err := json.Unmarshal([]byte(strings.TrimSpace(r.log())), &list); err != nil || len(list) != 1 || list[0]["callnumber"] != cn {
		t.Errorf("resolver removals --json = %q, %v", r.log(), err)
	}
}

func gunzip(t *testing.T, b []byte) []byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(b))
	if err != nil {
		t.Fatalf("not gzip: %v", err)
	}
	out, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	return out
}
