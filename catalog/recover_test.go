package catalog

import (
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// damage spoils a closed catalog file the ways a disk or an operator
// does.
func damage(t testing.TB, path, how string) {
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
		// Every page but the first two (the header and the schema).
		for i := 8192; i < len(b); i++ {
			b[i] = byte(i * 7)
		}
	default:
		t.Fatalf("no damage %q", how)
	}
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if err := os.WriteFile(path, b, 0o644); err != nil {
		t.Fatal(err)
	}
}

// use reads what a resolver reads of c: the first error.
func use(t testing.TB, c *Catalog, cn string) error {
	ctx := t.Context()
	if _, err := c.Lists(ctx); err != nil {
		return err
	}
	if _, _, err := c.Threads(ctx, "search.example.org", 0, 50); err != nil {
		return err
	}
	if _, err := c.Thread(ctx, cn); err != nil {
		return err
	}
	q, _ := ParseQuery("cache")
	if _, err := c.Search(ctx, q, SearchOptions{Limit: 20}); err != nil {
		return err
	}
	_, err := c.Stats(ctx)
	return err
}

// A damaged catalog is said to be (ErrDamaged) when it is opened or
// read; RebuildOpen builds it again, whole.
func TestDamaged(t *testing.T) {
	for _, how := range []string{"truncated", "header", "middle"} {
		t.Run(how, func(t *testing.T) {
			a := newArchive(t)
			a.load(fixture("../search/search.mbox"), "")
			path := filepath.Join(t.TempDir(), "catalog.db")
			c, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := mustSync(t, c, a.st)
			c.Close()
			damage(t, path, how)
			c, err = Open(t.Context(), path, Options{})
			if err == nil {
				err = use(t, c, a.cn("s1"))
				c.Close()
			}
			if !errors.Is(err, ErrDamaged) {
				t.Fatalf("a catalog %s: %v, want ErrDamaged", how, err)
			}
			c, n, err := RebuildOpen(t.Context(), path, a.st, SyncOptions{}, Options{})
			if err != nil || n != want {
				t.Fatalf("RebuildOpen = %d, %v; want %d messages", n, err, want)
			}
			defer c.Close()
			if err := use(t, c, a.cn("s1")); err != nil {
				t.Errorf("the rebuilt catalog: %v", err)
			}
			if !c.Writable() {
				t.Errorf("the rebuilt catalog is not open for writing")
			}
			if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrLocked) {
				t.Errorf("Open beside the rebuilt catalog = %v, want ErrLocked: it holds the lock", err)
			}
		})
	}
}

// Replaced says when the file a catalog opened is deleted or replaced;
// RebuildFrom builds it again with the lock kept.
func TestReplaced(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("../search/search.mbox"), "")
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	want := mustSync(t, c, a.st)
	r, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	if c.Replaced() || r.Replaced() {
		t.Fatalf("Replaced() of an untouched catalog")
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	if !c.Replaced() || !r.Replaced() {
		t.Fatalf("Replaced() of a deleted catalog = false")
	}
	nc, n, err := c.RebuildFrom(t.Context(), a.st, SyncOptions{})
	if err != nil || n != want {
		t.Fatalf("RebuildFrom = %d, %v; want %d", n, err, want)
	}
	defer nc.Close()
	if c.Writable() || !nc.Writable() || nc.Replaced() {
		t.Errorf("after RebuildFrom: old writable %v, new writable %v, new replaced %v; want false, true, false", c.Writable(), nc.Writable(), nc.Replaced())
	}
	if !r.Replaced() {
		t.Errorf("a reader of the old file is not told it was replaced")
	}
	c.Close()
	if err := use(t, nc, a.cn("s1")); err != nil {
		t.Errorf("the rebuilt catalog: %v", err)
	}
	if _, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrLocked) {
		t.Errorf("Open beside the rebuilt catalog = %v, want ErrLocked: the lock was kept", err)
	}
}

// A rebuild killed (SIGKILL) at any of its steps leaves a catalog that
// the next writer uses or rebuilds: it then has every message.
func TestRebuildKilled(t *testing.T) {
	if dir := os.Getenv("CHIBRARY_REBUILD_DIR"); dir != "" {
		rebuildAndDie(t, dir, os.Getenv("CHIBRARY_REBUILD_KILL_AT"))
		return
	}
	for _, at := range []string{stepStarted, stepBuilt, stepCleared, stepRenamed, stepOpened} {
		t.Run(at, func(t *testing.T) {
			dir := t.TempDir()
			a := newArchiveIn(t, filepath.Join(dir, "messages.db"))
			a.load(fixture("../search/search.mbox"), "")
			path := filepath.Join(dir, "catalog.db")
			c, err := Open(t.Context(), path, Options{})
			if err != nil {
				t.Fatal(err)
			}
			want := mustSync(t, c, a.st)
			c.Close()
			cn := a.cn("s1")
			a.st.Close()
			damage(t, path, "header")

			cmd := exec.Command(os.Args[0], "-test.run=^TestRebuildKilled$")
			cmd.Env = append(os.Environ(), "CHIBRARY_REBUILD_DIR="+dir, "CHIBRARY_REBUILD_KILL_AT="+at)
			out, err := cmd.CombinedOutput()
			var ee *exec.ExitError
			if !errors.As(err, &ee) || ee.Sys().(syscall.WaitStatus).Signal() != syscall.SIGKILL {
				t.Fatalf("the rebuild was not killed at %s: %v\n%s", at, err, out)
			}

			// The next writer, as resolver serve starts.
			st := openStore(t, filepath.Join(dir, "messages.db"))
			c, err = Open(t.Context(), path, Options{})
			if errors.Is(err, ErrDamaged) {
				c, _, err = RebuildOpen(t.Context(), path, st, SyncOptions{}, Options{})
			}
			if err != nil {
				t.Fatalf("after a rebuild killed at %s: %v", at, err)
			}
			defer c.Close()
			mustSync(t, c, st)
			s, err := c.Stats(t.Context())
			if err != nil || s.Messages != want {
				t.Errorf("after a rebuild killed at %s: %+v, %v; want %d messages", at, s, err, want)
			}
			if err := use(t, c, cn); err != nil {
				t.Errorf("after a rebuild killed at %s: %v", at, err)
			}
		})
	}
}

// rebuildAndDie rebuilds the damaged catalog of the archive in dir and
// kills its own process with SIGKILL at the step at.
func rebuildAndDie(t *testing.T, dir, at string) {
	st := openStore(t, filepath.Join(dir, "messages.db"))
	o := Options{step: func(step string) {
		if step == at {
			syscall.Kill(os.Getpid(), syscall.SIGKILL)
			select {}
		}
	}}
	_, _, err := RebuildOpen(t.Context(), filepath.Join(dir, "catalog.db"), st, SyncOptions{}, o)
	fmt.Fprintf(os.Stderr, "RebuildOpen returned %v without reaching %s\n", err, at)
	os.Exit(3)
}

// openStore opens the bolt store at path as it is.
func openStore(t testing.TB, path string) store.Store {
	t.Helper()
	st, err := boltstore.Open(t.Context(), path, boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// TestRebuildRelativePath: `resolver reindex --data a1` rebuilds a1/catalog.db
// given relative: the old catalog is read (its IMAP and NNTP numbers
// kept), not refused as a URI whose authority is "a1".
func TestRebuildRelativePath(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("dates.mbox"), "a")
	t.Chdir(t.TempDir())
	if err := os.Mkdir("a1", 0o755); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join("a1", "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	// (A validity of its own: a new one would be the time, which the
	// rebuild's, a second later or not, may equal.)
	execSQL(t, c, `UPDATE mailboxes SET validity=12345`)
	execSQL(t, c, `UPDATE meta SET value='12345' WHERE key='uidvalidity'`)
	c.Close()
	if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{}, Options{}); err != nil {
		t.Fatal(err)
	}
	c, err = Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if after := mailbox(t, c, "a"); after.Validity != 12345 {
		t.Errorf("UIDVALIDITY after a rebuild at %s = %d, want 12345 (kept)", path, after.Validity)
	}
}

// rebuildQueries are searches of every kind, for TestRebuildAnswersAsSync:
// words common and rare, phrases (of common words too: the pairs),
// prefixes, fields, dates, the patch columns, NOT.
var rebuildQueries = []string{
	"cache", "kernel panic", "indy", "refill", `"the of and"`, `"this is a"`, `"cache flush"`,
	"cpu*", "tlb*", "s:mips", "f:ralf", "f:ralf tlb", "subject:patch", "list:linux-mips patch",
	"d:20100101..", "d:..20050101 cache", "dfn:setup.c", "dfn:arch/mips/Kconfig", "dfa:printk",
	"cache AND indy", "NOT cache", "indy NOT cache", "tc:linux-mips", "écrit", "krčmář",
}

// answers is what c answers to rebuildQueries, newest first and by
// relevance, and its lists, each list's threads and months.
func answers(t *testing.T, c *Catalog) []string {
	t.Helper()
	var out []string
	for _, s := range rebuildQueries {
		q, err := ParseQuery(s)
		if err != nil {
			t.Fatalf("ParseQuery(%q) = %v", s, err)
		}
		for _, sort := range []SortOrder{Newest, Relevance} {
			res, err := c.Search(t.Context(), q, SearchOptions{Sort: sort, Limit: 50, CountLimit: 100000})
			if err != nil {
				t.Fatalf("Search(%q) = %v", s, err)
			}
			a := fmt.Sprintf("%q sort %d: %d more=%v:", s, sort, res.Total, res.More)
			for _, m := range res.Messages {
				a += " " + m.CallNumber
			}
			out = append(out, a)
		}
	}
	lists, err := c.Lists(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		out = append(out, fmt.Sprintf("list %+v", l))
		ths, total, err := c.Threads(t.Context(), l.Name, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		a := fmt.Sprintf("list %s: %d threads:", l.Name, total)
		for _, th := range ths {
			a += fmt.Sprintf(" %s/%d/%d/%d", th.Root.CallNumber, th.Messages, th.First.Unix(), th.Last.Unix())
		}
		out = append(out, a)
		months, err := c.Months(t.Context(), l.Name)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, fmt.Sprintf("list %s months %v", l.Name, months))
	}
	s, err := c.Stats(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	return append(out, fmt.Sprintf("stats: %d messages, %d threads, %d lists", s.Messages, s.Threads, s.Lists))
}

// TestRebuildAnswersAsSync: a catalog rebuilt from a store (a bulk load:
// no journal, its late indexes made at the end, labels given at once)
// answers searches, lists, threads and months as one that followed the
// same store in pages.
func TestRebuildAnswersAsSync(t *testing.T) {
	check := func(t *testing.T, a *archive, synced *Catalog) {
		t.Helper()
		path := filepath.Join(t.TempDir(), "rebuilt.db")
		if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{PageSize: 97}, Options{}); err != nil {
			t.Fatal(err)
		}
		// Room for a search of the sample under -race.
		o := Options{ReadOnly: true, SearchTimeout: time.Minute}
		rebuilt, err := Open(t.Context(), path, o)
		if err != nil {
			t.Fatal(err)
		}
		defer rebuilt.Close()
		if synced, err = Open(t.Context(), synced.Path(), o); err != nil {
			t.Fatal(err)
		}
		defer synced.Close()
		want, got := answers(t, synced), answers(t, rebuilt)
		if len(got) != len(want) {
			t.Fatalf("the rebuilt catalog gave %d answers, the synced one %d", len(got), len(want))
		}
		for i := range got {
			if got[i] != want[i] {
				t.Errorf("rebuilt: %s\n   synced: %s", got[i], want[i])
			}
		}
		// Both have every index of the schema.
		var n [2]int
		for i, c := range []*Catalog{synced, rebuilt} {
			if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE type = 'index'`).Scan(&n[i]); err != nil {
				t.Fatal(err)
			}
		}
		if n[0] != n[1] {
			t.Errorf("the rebuilt catalog has %d indexes, the synced one %d", n[1], n[0])
		}
	}
	t.Run("fixtures", func(t *testing.T) {
		a := newArchive(t)
		a.load(fixture("../search/search.mbox"), "")
		for _, f := range []string{"reply-before-parent.mbox", "missing-parent.mbox", "loop.mbox", "pipermail.mbox"} {
			a.load(fixture(f), "")
		}
		c := openCatalog(t)
		if _, err := c.Sync(t.Context(), a.st, SyncOptions{PageSize: 3}); err != nil {
			t.Fatal(err)
		}
		check(t, a, c)
	})
	t.Run("corpus", func(t *testing.T) {
		if testing.Short() {
			t.Skip("-short: skipping the corpus")
		}
		a, _, _ := loadCorpus(t)
		check(t, a, corpusCatalog(t))
	})
}
