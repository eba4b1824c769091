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
