package catalog

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// archive is a real bolt store with an authority, as the importer fills
// it.
type archive struct {
	t    testing.TB
	st   store.Store
	auth *storetest.Authority
	run  uint32
	seq  int
	// byID maps a Message-ID's local part (the fixtures' labels) to the
	// call numbers stored with it.
	byID map[string][]string
}

func newArchive(t testing.TB) *archive {
	t.Helper()
	a := newArchiveIn(t, filepath.Join(t.TempDir(), "messages.db"))
	t.Cleanup(func() { a.st.Close() })
	return a
}

// newArchiveIn opens a new archive at path; the caller closes a.st.
func newArchiveIn(t testing.TB, path string) *archive {
	t.Helper()
	st, err := boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	a := &archive{t: t, st: st, auth: storetest.NewAuthority(t, shuffle.Mix), byID: map[string][]string{}}
	a.newRun()
	return a
}

func (a *archive) newRun() {
	a.run++
	a.seq = 0
	if err := a.st.RecordLease(a.t.Context(), a.auth.Lease(a.run)); err != nil {
		a.t.Fatal(err)
	}
}

// put stores one raw message under the next number, with list, and
// returns its call number (or the one already stored).
func (a *archive) put(raw []byte, list string) string {
	a.t.Helper()
	if a.seq > callnumber.MaxSequence {
		a.newRun()
	}
	meta, _ := mailmsg.Parse(raw)
	m := storetest.Message(a.auth.Number(a.t, a.run, a.seq), raw, meta.MessageID, list)
	a.seq++
	res, err := a.st.Put(a.t.Context(), []store.Message{m})
	if err != nil {
		a.t.Fatalf("Put = %v", err)
	}
	cn := res[0].Number.String()
	label, _, _ := strings.Cut(meta.MessageID, "@")
	a.byID[label] = append(a.byID[label], cn)
	return cn
}

// load stores every message of an mbox fixture, one Put each, in file
// order, and returns their call numbers.
func (a *archive) load(path, list string) []string {
	a.t.Helper()
	var out []string
	for _, raw := range readMbox(a.t, path) {
		out = append(out, a.put(raw, list))
	}
	return out
}

func readMbox(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	r := mbox.NewReader(f, mbox.Options{Name: path})
	var out [][]byte
	for {
		m, err := r.Next()
		if err == io.EOF {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		out = append(out, m.Raw)
	}
}

// cn returns the one call number stored with the Message-ID label.
func (a *archive) cn(label string) string {
	a.t.Helper()
	cns := a.byID[label]
	if len(cns) != 1 {
		a.t.Fatalf("%d messages with Message-ID %s@..., want 1", len(cns), label)
	}
	return cns[0]
}

func fixture(name string) string { return filepath.Join("..", "fixtures", "threads", name) }

func openCatalog(t testing.TB) *Catalog {
	t.Helper()
	// Searches get all the time a loaded machine needs: what a search may
	// cost is TestSearchTimeout's and the benchmarks' to say.
	c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), Options{SearchTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		checkKeptCounts(t, c)
		c.Close()
	})
	return c
}

// rawWritten holds the catalogs a test wrote with execSQL.
var rawWritten sync.Map

// checkKeptCounts fails t unless the counts the catalog keeps are those
// of its rows, when c is still open: each list's threads (list_threads)
// and messages (lists.messages), which Stats and a list's pages read
// rather than count. openCatalog checks them after every test that uses
// it, whatever it wrote.
func checkKeptCounts(t testing.TB, c *Catalog) {
	t.Helper()
	if c.r == nil {
		return
	}
	for _, q := range []struct{ what, sql string }{
		{"threads", `SELECT coalesce(k.list, t.list), coalesce(k.threads, 0), coalesce(t.n, 0)
			FROM list_threads k FULL JOIN (SELECT list, count(*) n FROM threads GROUP BY list) t ON t.list = k.list`},
		{"messages", `SELECT coalesce(l.name, m.list), coalesce(l.messages, 0), coalesce(m.n, 0)
			FROM lists l FULL JOIN (SELECT list, count(*) n FROM messages GROUP BY list) m ON m.list = l.name`},
	} {
		if _, raw := rawWritten.Load(c); raw && q.what == "messages" {
			continue
		}
		rows, err := c.r.Query(q.sql)
		if errors.Is(err, sql.ErrConnDone) || err != nil && strings.Contains(err.Error(), "database is closed") {
			return // the test closed it
		}
		if err != nil {
			t.Errorf("cannot read the counts of %s: %v", q.what, err)
			return
		}
		for rows.Next() {
			var list string
			var kept, counted int
			if err := rows.Scan(&list, &kept, &counted); err != nil {
				t.Error(err)
				break
			}
			if kept != counted {
				t.Errorf("list %q: %d %s kept, %d in the catalog", list, kept, q.what, counted)
			}
		}
		if err := rows.Err(); err != nil {
			t.Error(err)
		}
		rows.Close()
	}
}

func mustSync(t testing.TB, c *Catalog, st store.Store) int {
	t.Helper()
	n, err := c.Sync(t.Context(), st, SyncOptions{})
	if err != nil {
		t.Fatalf("Sync = %v", err)
	}
	return n
}

// shape draws a thread's tree, one node a line: its depth as indentation,
// then the local part of the message's Message-ID, "[id]" for a
// placeholder, and "(missing X)" for a message whose parent X was never
// archived.
func shape(t testing.TB, th *Thread) string {
	t.Helper()
	var b bytes.Buffer
	for i, n := range th.Nodes {
		if n.Parent >= i {
			t.Errorf("node %d has parent %d, not before it", i, n.Parent)
		}
		if n.Parent >= 0 && th.Nodes[n.Parent].Depth != n.Depth-1 {
			t.Errorf("node %d at depth %d has a parent at depth %d", i, n.Depth, th.Nodes[n.Parent].Depth)
		}
		b.WriteString(strings.Repeat("  ", n.Depth))
		if n.Message == nil {
			label, _, _ := strings.Cut(n.MessageID, "@")
			fmt.Fprintf(&b, "[%s]", label)
		} else {
			label, _, _ := strings.Cut(n.Message.MessageID, "@")
			b.WriteString(label)
		}
		if n.MissingParent != "" {
			label, _, _ := strings.Cut(n.MissingParent, "@")
			fmt.Fprintf(&b, " (missing %s)", label)
		}
		b.WriteByte('\n')
	}
	return b.String()
}

func threadOf(t testing.TB, c *Catalog, cn string) *Thread {
	t.Helper()
	th, err := c.Thread(t.Context(), cn)
	if err != nil {
		t.Fatalf("Thread(%s) = %v", cn, err)
	}
	return th
}

func lines(s ...string) string { return strings.Join(s, "\n") + "\n" }
