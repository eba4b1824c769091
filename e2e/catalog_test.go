package e2e

import (
	"bytes"
	"encoding/json"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// browsableWithin is how soon after a message is delivered to the
// watched inbox it must be on its list's page (issue 11; DESIGN: the
// resolver follows the store within 2 seconds).
const browsableWithin = 2 * time.Second

// TestWatcherBrowsable: a message delivered to the watched inbox is on its
// list's page, in its thread, within 2 seconds of its delivery (APPEND
// returned: the watcher's own delay counts), with the watcher and the
// resolver running as they do in production.
func TestWatcherBrowsable(t *testing.T) {
	needPrograms(t)
	dove := dovecottest.Start(t, dovecottest.Options{})
	data := filepath.Join(t.TempDir(), "archive")
	watcher := startWatcher(t, dove, data, nil)
	// The first delivery creates the archive the resolver serves.
	if _, err := dove.Append(t.Context(), "INBOX", listMessage(0)); err != nil {
		t.Fatal(err)
	}
	eventually(t, 60*time.Second, "the archive to exist", func() bool {
		_, err := os.Stat(filepath.Join(data, "messages.db"))
		return err == nil
	})
	r := startResolver(t, data)
	eventually(t, 60*time.Second, "the first message on the list page", func() bool {
		status, _, body, err := get(t.Context(), r.url+"/l/widgets.lists.example.org/")
		return err == nil && status == 200 && bytes.Contains(body, []byte("Widget delivery 0"))
	})
	// Each delivery is timed from the moment APPEND returns (the message
	// is in the inbox) to the moment it is archived (the resolver finds
	// it by Message-ID) and to the moment its list's page shows it. On a
	// loaded CI machine (two cores shared with other tests) one delivery
	// may be slow for reasons of its own, so the measurement is retried:
	// up to maxDeliveries deliveries, and the test fails only if none of
	// them is on the list page within browsableWithin.
	const maxDeliveries = 3
	var best time.Duration
	delivered := 0
	for i := 1; i <= maxDeliveries; i++ {
		if _, err := dove.Append(t.Context(), "INBOX", listMessage(i)); err != nil {
			t.Fatal(err)
		}
		sent := time.Now()
		delivered = i
		replies := fmt.Sprintf("%d replies", i)
		if i == 1 {
			replies = "1 reply"
		}
		var stored, listed time.Time
		eventually(t, 60*time.Second, fmt.Sprintf("delivery %d on the list page", i), func() bool {
			if stored.IsZero() {
				if status, _, _, err := get(t.Context(), r.url+fmt.Sprintf("/m/widget-%d@e2e.test", i)); err == nil && status == http.StatusFound {
					stored = time.Now()
				}
			}
			status, _, body, err := get(t.Context(), r.url+"/l/widgets.lists.example.org/")
			if err == nil && status == 200 && bytes.Contains(body, []byte(replies)) {
				listed = time.Now()
				if stored.IsZero() {
					stored = listed
				}
				return true
			}
			return false
		})
		d := listed.Sub(sent)
		t.Logf("delivery %d: archived %v after APPEND returned, on the list page %v after it (%v after being archived)",
			i, stored.Sub(sent).Round(time.Millisecond), d.Round(time.Millisecond), listed.Sub(stored).Round(time.Millisecond))
		if best == 0 || d < best {
			best = d
		}
		if d <= browsableWithin {
			break
		}
	}
	if best > browsableWithin {
		t.Errorf("none of %d deliveries reached its list's page within %v of APPEND (best %v)", delivered, browsableWithin, best.Round(time.Millisecond))
	}
	// The thread: every delivery, the replies under the first.
	var th struct {
		Messages int
		Nodes    []struct{ Depth int }
	}
	status, _, body, err := get(t.Context(), r.url+"/api/v1/threads/"+firstCallNumber(t, r, "widget-0@e2e.test"))
	if err != nil || status != 200 || json.Unmarshal(body, &th) != nil || th.Messages != 1+delivered || len(th.Nodes) != 1+delivered || th.Nodes[delivered].Depth != 1 {
		t.Errorf("the thread = %d %s (%v), want %d messages, replies at depth 1", status, body, err, 1+delivered)
	}
	watcher.stop()
	r.stop()
}

// listMessage is delivery i of a thread on a list with a List-Id: the
// first starts it, the others answer it.
func listMessage(i int) []byte {
	subject, refs := "Widget delivery 0", ""
	if i > 0 {
		subject, refs = fmt.Sprintf("Re: Widget delivery 0 (%d)", i), "In-Reply-To: <widget-0@e2e.test>\nReferences: <widget-0@e2e.test>\n"
	}
	return fmt.Appendf(nil, "From: Sender %d <s%d@example.org>\nTo: widgets@lists.example.org\nSubject: %s\n"+
		"Message-ID: <widget-%d@e2e.test>\n%sList-Id: Widgets <widgets.lists.example.org>\n"+
		"Date: Tue, 2 Jan 2024 10:%02d:00 +0000\n\nDelivery %d.\n", i, i, subject, i, refs, i, i)
}

// firstCallNumber resolves a Message-ID through the resolver.
func firstCallNumber(t *testing.T, r *resolverServer, id string) string {
	t.Helper()
	status, h, _, err := get(t.Context(), r.url+"/m/"+id)
	if err != nil || status != http.StatusFound {
		t.Fatalf("GET /m/%s = %d %v", id, status, err)
	}
	return strings.TrimPrefix(h.Get("Location"), "/")
}

// TestMonthDownloadReimport: a month downloaded from one archive and
// imported into an empty one gives the same messages, byte for byte.
func TestMonthDownloadReimport(t *testing.T) {
	needPrograms(t)
	a := filepath.Join(t.TempDir(), "a")
	imp := start(t, "importer", procOptions{}, "--data", a, "--list", "demo", "../fixtures/mbox/demo.mbox", "../fixtures/mbox/from-in-body.mbox", "../fixtures/mbox/crlf.mbox", "../fixtures/mbox/mboxrd.mbox")
	if code := imp.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer exited %d:\n%s", code, imp.log())
	}
	r := startResolver(t, a)
	var months struct {
		Months []struct{ Year, Month, Messages int }
	}
	eventually(t, 60*time.Second, "the demo list in the catalog", func() bool {
		status, _, body, err := get(t.Context(), r.url+"/api/v1/lists/demo")
		return err == nil && status == 200 && json.Unmarshal(body, &months) == nil && len(months.Months) > 0
	})
	want := map[store.Digest][]byte{}
	st := openStore(t, a)
	var all [][]byte
	for _, m := range storetest.Feed(t, st, 500) {
		all = append(all, m.Raw)
	}
	st.Close()
	dir := t.TempDir()
	var files []string
	total := 0
	for _, m := range months.Months {
		name := fmt.Sprintf("demo-%04d-%02d.mbox.gz", m.Year, m.Month)
		status, h, body, err := get(t.Context(), r.url+fmt.Sprintf("/l/demo/%04d-%02d.mbox.gz", m.Year, m.Month))
		if err != nil || status != 200 || h.Get("Content-Type") != "application/gzip" {
			t.Fatalf("GET %s = %d %q %v", name, status, h.Get("Content-Type"), err)
		}
		files = append(files, writeFile(t, dir, name, body))
		total += m.Messages
	}
	if total != len(all) {
		t.Fatalf("the months hold %d messages, the store %d", total, len(all))
	}
	t.Logf("%d messages in %d month files", total, len(files))
	for _, raw := range all {
		want[store.DigestOf(raw)] = raw
	}
	r.stop()

	b := filepath.Join(t.TempDir(), "b")
	imp = start(t, "importer", procOptions{}, append([]string{"--data", b, "--list", "demo"}, files...)...)
	if code := imp.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer of the downloads exited %d:\n%s", code, imp.log())
	}
	if imported, dups, failed := summary(t, imp.log()); imported != len(all) || dups != 0 || failed != 0 {
		t.Errorf("importing the downloads: imported %d, duplicates %d, failed %d; want %d, 0, 0", imported, dups, failed, len(all))
	}
	st = openStore(t, b)
	reimported := storetest.Feed(t, st, 500)
	for n, m := range reimported {
		if w, ok := want[store.DigestOf(m.Raw)]; !ok || !bytes.Equal(w, m.Raw) {
			t.Errorf("message %s of the re-import is not a message of the original archive:\n%q", n, m.Raw)
		}
	}
	if got := len(reimported); got != len(all) {
		t.Errorf("the re-import holds %d messages, want %d", got, len(all))
	}
}

// TestCatalogRebuilt: a deleted catalog is built again, by serve as it
// starts and by reindex, with the same lists, months and threads.
func TestCatalogRebuilt(t *testing.T) {
	needPrograms(t)
	data := filepath.Join(t.TempDir(), "archive")
	for _, in := range []struct{ list, file string }{
		{"demo", "../fixtures/mbox/demo.mbox"},
		{"", "../fixtures/threads/reply-before-parent.mbox"},
		{"lost", "../fixtures/threads/missing-parent.mbox"},
		{"pipermail", "../fixtures/threads/pipermail.mbox"},
		{"shared", "../fixtures/threads/shared-message-id.mbox"},
		{"loop", "../fixtures/threads/loop.mbox"},
	} {
		args := []string{"--data", data}
		if in.list != "" {
			args = append(args, "--list", in.list)
		}
		args = append(args, in.file)
		if imp := start(t, "importer", procOptions{}, args...); imp.wait(60*time.Second) != 0 {
			t.Fatalf("importer: %s", imp.log())
		}
	}
	r := startResolver(t, data)
	before := catalogSnapshot(t, r, 6)
	r.stop()
	t.Logf("the catalog served:\n%s", before)

	removeCatalog := func() {
		for _, s := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(filepath.Join(data, "catalog.db") + s); err != nil && !os.IsNotExist(err) {
				t.Fatal(err)
			}
		}
	}
	removeCatalog()
	r = startResolver(t, data)
	if got := catalogSnapshot(t, r, 6); got != before {
		t.Errorf("the catalog serve rebuilt differs:\n%s\nwant:\n%s", got, before)
	}
	// reindex refuses while the resolver follows the catalog.
	ri := start(t, "resolver reindex", procOptions{}, "reindex", "--data", data)
	if code := ri.wait(60 * time.Second); code != 1 || !strings.Contains(ri.log(), "another process writes this catalog") {
		t.Errorf("reindex while serving = %d:\n%s", code, ri.log())
	}
	r.stop()

	removeCatalog()
	ri = start(t, "resolver reindex", procOptions{}, "reindex", "--data", data)
	if code := ri.wait(60 * time.Second); code != 0 || !strings.Contains(ri.log(), "indexed ") {
		t.Fatalf("reindex = %d:\n%s", code, ri.log())
	}
	r = startResolver(t, data)
	if got := catalogSnapshot(t, r, 6); got != before {
		t.Errorf("the catalog reindex rebuilt differs:\n%s\nwant:\n%s", got, before)
	}
	r.stop()
}

// catalogSnapshot draws what the catalog serves: every list with its
// months and threads, and every thread's tree, as call numbers. It waits
// for the catalog to hold lists lists.
func catalogSnapshot(t *testing.T, r *resolverServer, lists int) string {
	t.Helper()
	getJSON := func(path string, v any) {
		t.Helper()
		status, _, body, err := get(t.Context(), r.url+path)
		if err != nil || status != 200 {
			t.Fatalf("GET %s = %d %s %v", path, status, body, err)
		}
		if err := json.Unmarshal(body, v); err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
	}
	var ls struct{ Lists []struct{ Name string } }
	eventually(t, 60*time.Second, "the catalog", func() bool {
		status, _, body, err := get(t.Context(), r.url+"/api/v1/lists")
		return err == nil && status == 200 && json.Unmarshal(body, &ls) == nil && len(ls.Lists) == lists
	})
	var b strings.Builder
	for _, l := range ls.Lists {
		var lv struct {
			List struct {
				Messages    int
				First, Last string
			}
			Pages   int
			Months  []struct{ Year, Month, Messages int }
			Threads []struct {
				Root     struct{ Callnumber string }
				Messages int
			}
		}
		getJSON("/api/v1/lists/"+l.Name, &lv)
		fmt.Fprintf(&b, "list %s: %d messages %s..%s, months %v\n", l.Name, lv.List.Messages, lv.List.First, lv.List.Last, lv.Months)
		var roots []string
		for _, th := range lv.Threads {
			roots = append(roots, th.Root.Callnumber)
		}
		for _, root := range roots {
			var tv struct {
				Subject string
				Nodes   []struct {
					Message *struct {
						Callnumber string
					}
					MessageID     string `json:"message_id"`
					Depth, Parent int
					MissingParent string `json:"missing_parent"`
				}
			}
			getJSON("/api/v1/threads/"+root, &tv)
			fmt.Fprintf(&b, "  thread %q:", tv.Subject)
			for _, n := range tv.Nodes {
				id := "[" + n.MessageID + "]"
				if n.Message != nil {
					id = n.Message.Callnumber
				}
				fmt.Fprintf(&b, " %d:%s<%d", n.Depth, id, n.Parent)
				if n.MissingParent != "" {
					fmt.Fprintf(&b, "(missing %s)", n.MissingParent)
				}
			}
			b.WriteByte('\n')
		}
	}
	out := b.String()
	lines := strings.Split(out, "\n")
	if !slices.ContainsFunc(lines, func(l string) bool { return strings.Contains(l, "missing") }) {
		t.Fatalf("no missing parent in the snapshot: the fixtures did not load?\n%s", out)
	}
	return out
}
