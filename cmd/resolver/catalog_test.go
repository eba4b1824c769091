package main

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/internal/testkit/testmount"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

func TestCatalogPath(t *testing.T) {
	tests := []struct {
		data, store, flag, want string
	}{
		{"/srv/a", "", "", "/srv/a/catalog.db"},
		{"/srv/a", "", "/x/c.db", "/x/c.db"},
		{"./archive", "bolt:/srv/b/messages.db", "", "/srv/b/catalog.db"},
		{"./archive", "bolt:///srv/b/messages.db", "", "/srv/b/catalog.db"},
		{"./archive", "riak://r1:8087/lists", "", ""},
		{"./archive", "riak://r1:8087/lists", "/x/c.db", "/x/c.db"},
	}
	for _, tt := range tests {
		if got, err := catalogPath(&setup.StoreFlags{Data: tt.data, Store: tt.store}, tt.flag); err != nil || got != tt.want {
			t.Errorf("catalogPath(--data %q --store %q --catalog %q) = %q, want %q", tt.data, tt.store, tt.flag, got, tt.want)
		}
	}
}

func TestReindex(t *testing.T) {
	dir, _, n, _ := testArchive(t)
	status, _, stderr := runCmd(t, t.Context(), "reindex", "--data", dir)
	if status != 0 || !strings.Contains(stderr, "indexed 1 messages into "+filepath.Join(dir, "catalog.db")) {
		t.Fatalf("reindex = %d %q, want 0 and a summary", status, stderr)
	}
	c, err := catalog.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	th, err := c.Thread(t.Context(), n.String())
	c.Close()
	if err != nil || th.List != "test" {
		t.Fatalf("the rebuilt catalog's thread of %s = %+v, %v", n, th, err)
	}
	if status, stdout, _ := runCmd(t, t.Context(), "reindex", "--help"); status != 0 || !strings.Contains(stdout, "resolver reindex --data") || !strings.Contains(stdout, "CHIBRARY_CATALOG") {
		t.Errorf("reindex --help = %d %q, want the usage with examples", status, stdout)
	}
	// --catalog and its environment fallback.
	other := filepath.Join(t.TempDir(), "other.db")
	t.Setenv("CHIBRARY_CATALOG", other)
	if status, _, stderr := runCmd(t, t.Context(), "reindex", "--data", dir); status != 0 || !strings.Contains(stderr, other) {
		t.Errorf("reindex with CHIBRARY_CATALOG = %d %q, want it built at %s", status, stderr, other)
	}
	// While a resolver follows the catalog: refused, saying what to do.
	w, err := catalog.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Close()
	status, _, stderr = runCmd(t, t.Context(), "reindex", "--data", dir, "--catalog", filepath.Join(dir, "catalog.db"))
	if status != 1 || !strings.Contains(stderr, "another process writes this catalog") || !strings.Contains(stderr, "stop it, delete") {
		t.Errorf("reindex while the catalog is written = %d %q, want 1 and what to do", status, stderr)
	}
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"reindex", "--data", filepath.Join(dir, "nope")}, "no archive in"},
		{[]string{"reindex", "--store", "riak://127.0.0.1:1/x"}, ""},
		{[]string{"reindex", "extra"}, "unexpected argument"},
	} {
		status, _, stderr := runCmd(t, t.Context(), tt.args...)
		if status == 0 || !strings.Contains(stderr, tt.want) {
			t.Errorf("resolver %q = %d %q, want a failure saying %q", tt.args, status, stderr, tt.want)
		}
	}
}

// TestServeCatalog: serve builds the catalog, follows the store into it
// and serves its pages; it rebuilds a deleted one; without a usable
// catalog place it still serves messages.
func TestServeCatalog(t *testing.T) {
	dir, _, n, _ := testArchive(t)
	for _, round := range []string{"first start", "after the catalog was deleted"} {
		t.Run(round, func(t *testing.T) {
			base, stop := startServe(t, "--data", dir)
			waitGet(t, base+"/l/test/", 200)
			var th struct{ Messages int }
			if err := json.Unmarshal([]byte(waitGet(t, base+"/api/v1/threads/"+n.String(), 200)), &th); err != nil || th.Messages != 1 {
				t.Errorf("thread JSON: %+v %v", th, err)
			}
			logs := stop()
			if !strings.Contains(logs, "following the store into the catalog") {
				t.Errorf("serve logs %q: want it to say it follows the store", logs)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(filepath.Join(dir, "catalog.db") + suffix)
			}
		})
	}
	t.Run("no catalog", func(t *testing.T) {
		// A catalog path that cannot be created: under a regular file.
		blocker := filepath.Join(t.TempDir(), "file")
		if err := os.WriteFile(blocker, nil, 0o644); err != nil {
			t.Fatal(err)
		}
		base, stop := startServe(t, "--data", dir, "--catalog", filepath.Join(blocker, "catalog.db"))
		waitGet(t, base+"/"+n.String(), 200)
		resp, err := http.Get(base + "/l/test/")
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != 503 || resp.Header.Get("Retry-After") == "" {
			t.Errorf("a list page without a catalog = %d, Retry-After %q; want 503 with Retry-After", resp.StatusCode, resp.Header.Get("Retry-After"))
		}
		logs := stop()
		if strings.Count(logs, "no catalog") != 1 {
			t.Errorf("serve logs %q: want the missing catalog said once", logs)
		}
	})
	t.Run("read-only while another resolver follows", func(t *testing.T) {
		w, err := catalog.Open(t.Context(), filepath.Join(dir, "catalog.db"), catalog.Options{})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Close()
		base, stop := startServe(t, "--data", dir)
		waitGet(t, base+"/"+n.String(), 200)
		logs := stop()
		if !strings.Contains(logs, "serving it read-only") {
			t.Errorf("serve logs %q: want it to say the catalog is read-only", logs)
		}
	})
}

// startServe runs `resolver serve` in-process on a free port until stop,
// which returns its log.
func startServe(t *testing.T, args ...string) (string, func() string) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		status int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		s, _, e := runCmd(t, ctx, append([]string{"serve", "--listen", addr}, args...)...)
		done <- result{s, e}
	}()
	stopped := false
	stop := func() string {
		cancel()
		r := <-done
		stopped = true
		if r.status != 0 {
			t.Errorf("serve exited %d: %s", r.status, r.stderr)
		}
		return r.stderr
	}
	t.Cleanup(func() {
		if !stopped {
			stop()
		}
	})
	return "http://" + addr, stop
}

// waitGet polls url until it answers status, and returns the body.
func waitGet(t *testing.T, url string, status int) string {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		resp, err := http.Get(url)
		if err == nil {
			b, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == status {
				return string(b)
			}
		}
		if time.Now().After(deadline) {
			t.Fatalf("GET %s: no %d within 30 s (last: %v)", url, status, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestServeReadOnlyArchive: an archive on a read-only file system is
// served with its catalog read as it is, or without one (503 on its
// pages) when it has none.
func TestServeReadOnlyArchive(t *testing.T) {
	for _, withCatalog := range []bool{true, false} {
		t.Run(map[bool]string{true: "with a catalog", false: "without a catalog"}[withCatalog], func(t *testing.T) {
			dir, _, n, _ := testArchive(t)
			if withCatalog {
				if status, _, stderr := runCmd(t, t.Context(), "reindex", "--data", dir); status != 0 {
					t.Fatalf("reindex: %s", stderr)
				}
			}
			ro := testmount.ReadOnly(t, dir)
			base, stop := startServe(t, "--data", ro)
			waitGet(t, base+"/"+n.String(), 200)
			want := 503
			if withCatalog {
				want = 200
			}
			resp, err := http.Get(base + "/l/test/")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != want {
				t.Errorf("a list page of a read-only archive %s = %d, want %d", t.Name(), resp.StatusCode, want)
			}
			logs := stop()
			t.Logf("%s", logs)
		})
	}
}

// putSearchFixture stores the messages of fixtures/search/search.mbox in
// the archive of testArchive, under run 1 from sequence 100 on, as
// another process (an importer) would while a resolver runs.
func putSearchFixture(t *testing.T, dir string, codec *callnumber.Codec) {
	t.Helper()
	f, err := os.Open(filepath.Join("..", "..", "fixtures", "search", "search.mbox"))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	var batch []store.Message
	r := mbox.NewReader(f, mbox.Options{Name: f.Name()})
	for seq := uint16(100); ; seq++ {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: seq})
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := mailmsg.Parse(m.Raw)
		batch = append(batch, store.Message{Number: n, Raw: m.Raw, Digest: store.DigestOf(m.Raw), MessageID: meta.MessageID})
	}
	putMessages(t, dir, batch...)
}

// putMessages stores messages in DIR/messages.db, sharing the file with
// a resolver that serves it.
func putMessages(t *testing.T, dir string, ms ...store.Message) {
	t.Helper()
	st, err := boltstore.Open(t.Context(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if _, err := st.Put(t.Context(), ms); err != nil {
		t.Fatal(err)
	}
}

// searchQueries are searches of the search fixture, one of each kind.
var searchQueries = []string{"cache", "indy cache", `"secondary cache"`, "from:ralf", "subject:panic", "list:cake.lists.example.org", "cafe", "flush*", "-cache indy", "after:2019-02", "before:2019", "refill"}

// searchAnswers returns what /api/v1/search answers each of
// searchQueries, sorted by relevance (which a rebuild may change if its
// index differs), one line each.
func searchAnswers(t *testing.T, base string) []string {
	t.Helper()
	var out []string
	for _, q := range searchQueries {
		body := waitGet(t, base+"/api/v1/search?sort=relevance&q="+url.QueryEscape(q), 200)
		var res struct {
			Total   int `json:"total"`
			Results []struct {
				CallNumber string             `json:"callnumber"`
				Excerpt    []catalog.Fragment `json:"excerpt"`
			} `json:"results"`
		}
		if err := json.Unmarshal([]byte(body), &res); err != nil {
			t.Fatalf("search %q: %v: %s", q, err, body)
		}
		line := fmt.Sprintf("%s: %d", q, res.Total)
		for _, r := range res.Results {
			line += fmt.Sprintf(" %s %v", r.CallNumber, r.Excerpt)
		}
		out = append(out, line)
	}
	return out
}

// TestServeSearch: a message stored while `resolver serve` follows the
// store is found by search within 2 s of being stored; and the catalog
// `resolver reindex` rebuilds answers every search as the followed one
// did.
func TestServeSearch(t *testing.T) {
	dir, codec, _, _ := testArchive(t)
	base, stop := startServe(t, "--data", dir)
	waitGet(t, base+"/l/test/", 200)
	putSearchFixture(t, dir, codec)
	n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: 200})
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte("From: Late <late@example.org>\nSubject: stored while serving\nMessage-ID: <late@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nThe word is quizzaciously.\n")
	putMessages(t, dir, store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: "late@example.org", List: "test"})
	stored := time.Now()
	for {
		resp, err := http.Get(base + "/api/v1/search?q=quizzaciously")
		if err != nil {
			t.Fatal(err)
		}
		body, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if strings.Contains(string(body), `"callnumber":"`+n.String()+`"`) {
			t.Logf("found by search %v after it was stored", time.Since(stored).Round(time.Millisecond))
			break
		}
		if time.Since(stored) > 2*time.Second {
			t.Fatalf("a message stored 2 s ago is not found by search: %d %s", resp.StatusCode, body)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// Every message of the fixture is in by now: they were stored first.
	followed := searchAnswers(t, base)
	if want := "cache: 4"; !strings.HasPrefix(followed[0], want+" ") {
		t.Fatalf("search for cache while following: %s, want %s", followed[0], want)
	}
	stop()

	if status, _, stderr := runCmd(t, t.Context(), "reindex", "--data", dir); status != 0 {
		t.Fatalf("reindex = %d: %s", status, stderr)
	}
	base, stop = startServe(t, "--data", dir)
	defer stop()
	rebuilt := searchAnswers(t, base)
	if !slices.Equal(rebuilt, followed) {
		t.Errorf("searches after reindex:\n%s\nwant as before:\n%s", strings.Join(rebuilt, "\n"), strings.Join(followed, "\n"))
	}
}

// damageCatalog spoils a catalog file (not in use) the ways a disk or an
// operator does.
func damageCatalog(t *testing.T, path, how string) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	switch how {
	case "truncated":
		b = b[:len(b)/3+100]
	case "header":
		copy(b, strings.Repeat("not a database at all. ", 5))
	case "middle":
		for i := 8192; i < len(b); i++ { // every page but the header's and the schema's
			b[i] = byte(i * 7)
		}
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// pollUntil200 polls url until it answers 200 and returns the other
// statuses it answered before.
func pollUntil200(t *testing.T, url string) []int {
	t.Helper()
	var seen []int
	deadline := time.Now().Add(60 * time.Second)
	for time.Now().Before(deadline) {
		resp, err := http.Get(url)
		if err == nil {
			io.Copy(io.Discard, resp.Body)
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return seen
			}
			if !slices.Contains(seen, resp.StatusCode) {
				seen = append(seen, resp.StatusCode)
			}
		}
		time.Sleep(25 * time.Millisecond)
	}
	t.Fatalf("GET %s: no 200 within 60 s (answered %v)", url, seen)
	return nil
}

// TestServeCatalogDamaged: resolver serve finds a damaged catalog (cut
// short, its header or its pages overwritten) and one deleted while it
// serves, says so, rebuilds it from the store (its pages answer 503, not
// 500, meanwhile; message pages 200) and serves it again; a resolver
// that serves it read-only meanwhile opens the rebuilt file.
func TestServeCatalogDamaged(t *testing.T) {
	dir, codec, n, _ := testArchive(t)
	putSearchFixture(t, dir, codec)
	path := filepath.Join(dir, "catalog.db")
	base, stop := startServe(t, "--data", dir)
	waitGet(t, base+"/l/test/", 200)
	stop()
	for _, how := range []string{"truncated", "header", "middle"} {
		t.Run(how, func(t *testing.T) {
			damageCatalog(t, path, how)
			base, stop := startServe(t, "--data", dir)
			waitGet(t, base+"/"+n.String(), 200)
			for _, page := range []string{"/l/test/", "/search?q=signed", "/t/" + n.String() + "/"} {
				if seen := pollUntil200(t, base+page); slices.Contains(seen, 500) {
					t.Errorf("GET %s answered %v before 200, want no 500", page, seen)
				}
			}
			logs := stop()
			if !strings.Contains(logs, "damaged") || !strings.Contains(logs, "catalog rebuilt") {
				t.Errorf("serve logs do not say the catalog was damaged and rebuilt:\n%s", logs)
			}
		})
	}
	t.Run("deleted while serving", func(t *testing.T) {
		base, stop := startServe(t, "--data", dir)
		waitGet(t, base+"/l/test/", 200)
		reader, stopReader := startServe(t, "--data", dir) // read-only: the first writes it
		waitGet(t, reader+"/l/test/", 200)
		old, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			os.Remove(path + suffix)
		}
		deadline := time.Now().Add(60 * time.Second)
		for {
			if fi, err := os.Stat(path); err == nil && !os.SameFile(fi, old) {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the deleted catalog is not built again within 60 s")
			}
			time.Sleep(25 * time.Millisecond)
		}
		for _, b := range []string{base, reader} {
			pollUntil200(t, b+"/search?q=signed")
			pollUntil200(t, b+"/l/test/")
		}
		// The reader may answer from the deleted file (still open) until
		// its keeper, which looks at the file once a second, notices.
		time.Sleep(3 * time.Second)
		pollUntil200(t, reader+"/l/test/")
		readerLogs := stopReader()
		logs := stop()
		if !strings.Contains(logs, "deleted or replaced") || !strings.Contains(logs, "catalog rebuilt") {
			t.Errorf("serve logs do not say the catalog was deleted and rebuilt:\n%s", logs)
		}
		if !strings.Contains(readerLogs, "deleted or replaced") || strings.Count(readerLogs, "read-only") < 2 {
			t.Errorf("the read-only resolver's logs do not say it opened the new catalog:\n%s", readerLogs)
		}
	})
}

// TestStoreLocations: with --store bolt:DIR/messages.db, reindex and
// serve keep the catalog beside the store wherever they run from:
// nothing appears in ./archive of the working directory.
func TestStoreLocations(t *testing.T) {
	dir, _, _, _ := testArchive(t)
	url := "bolt:" + filepath.Join(dir, "messages.db")
	cwd := t.TempDir()
	t.Chdir(cwd)
	if status, _, stderr := runCmd(t, t.Context(), "reindex", "--store", url); status != 0 {
		t.Fatalf("reindex --store %s = %d: %s", url, status, stderr)
	}
	if _, err := os.Stat(filepath.Join(dir, "catalog.db")); err != nil {
		t.Errorf("reindex made no catalog beside the store: %v", err)
	}
	other := t.TempDir()
	t.Chdir(other)
	base, stop := startServe(t, "--store", url)
	waitGet(t, base+"/l/test/", 200)
	if logs := stop(); strings.Contains(logs, "building the catalog") {
		t.Errorf("serve from another directory built a catalog anew instead of reading the one beside the store:\n%s", logs)
	}
	for _, d := range []string{cwd, other} {
		if _, err := os.Stat(filepath.Join(d, "archive")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("./archive made in the working directory %s (%v)", d, err)
		}
	}
}
