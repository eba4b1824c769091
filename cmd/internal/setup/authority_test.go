package setup

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/shuffle"
)

func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }

// riakURL returns the URL of a new archive on the test node.
func riakURL(t *testing.T) string {
	t.Helper()
	b := make([]byte, 6)
	rand.Read(b)
	return "riak://" + riaktest.Addr(t) + "/setup-" + hex.EncodeToString(b)
}

// TestRunSourceRiak: --authority riak://... creates the authority of a
// new archive, and every later source takes runs of that same one.
func TestRunSourceRiak(t *testing.T) {
	url := riakURL(t)
	st, err := OpenStore(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var id string
	seen := map[uint32]bool{}
	for i := range 2 {
		src, err := (&RunFlags{Authority: url, Scheme: "bits"}).Source(t.Context(), st, Files{}, "test", nil)
		if err != nil {
			t.Fatalf("Source(--authority %s) = %v", url, err)
		}
		l, err := src.NewRun(t.Context())
		if err != nil {
			t.Fatalf("NewRun() = %v", err)
		}
		if err := st.RecordLease(t.Context(), l); err != nil {
			t.Errorf("the store refuses the lease of run %d: %v", l.Run, err)
		}
		if i == 0 {
			id = l.Authority
		}
		if l.Authority != id || l.Scheme != shuffle.Bits || l.Program != "test" || seen[l.Run] {
			t.Errorf("source %d: run %d of authority %s %s for %q; want a new run of %s bits for test", i, l.Run, l.Authority, l.Scheme, l.Program, id)
		}
		seen[l.Run] = true
		c, ok := src.(io.Closer)
		if !ok {
			t.Fatalf("the Riak source %T is not an io.Closer", src)
		}
		if err := c.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	_, err = (&RunFlags{Authority: url, Scheme: "mix"}).Source(t.Context(), st, Files{}, "test", nil)
	if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, authority.ErrScheme) {
		t.Errorf("Source(--scheme mix) of a bits authority = %v, want a usage error", err)
	}
	if _, err := (&RunFlags{Authority: url, Coordinator: "http://127.0.0.1:1"}).Source(t.Context(), st, Files{}, "test", nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("Source(--authority and --coordinator) = %v, want a usage error", err)
	}
}

// TestRunSourceRiakBoundElsewhere: an archive bound to an authority that
// is not in the cluster (its runs.db is elsewhere) gets no new authority
// there: the error says to migrate.
func TestRunSourceRiakBoundElsewhere(t *testing.T) {
	url := riakURL(t)
	st, err := OpenStore(t.Context(), url, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	file, _, err := authority.OpenOrCreate(t.Context(), filepath.Join(t.TempDir(), "runs.db"), authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer file.Close()
	l, err := file.Issue(t.Context(), authority.Holder{Program: "importer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordLease(t.Context(), l); err != nil {
		t.Fatal(err)
	}
	_, err = (&RunFlags{Authority: url}).Source(t.Context(), st, Files{}, "test", nil)
	if !errors.Is(err, ErrBoundElsewhere) || !strings.Contains(err.Error(), "coordinator migrate") || !strings.Contains(err.Error(), file.ID()) {
		t.Errorf("Source(--authority) for an archive bound elsewhere = %v, want ErrBoundElsewhere naming %s and coordinator migrate", err, file.ID())
	}
}

// TestRunSourceRetired: a runs.db moved away refuses, naming where it
// went, before anything is done; --authority bolt:PATH needs no --data.
func TestRunSourceRetired(t *testing.T) {
	dir := t.TempDir()
	st := openStore(t, dir)
	path := filepath.Join(dir, RunsFile)
	a, _, err := authority.OpenOrCreate(t.Context(), path, authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	const to = "riak://r1:8087/lists"
	if err := a.Retire(t.Context(), to); err != nil {
		t.Fatal(err)
	}
	a.Close()
	for _, f := range []RunFlags{{}, {Authority: "bolt:" + path}} {
		_, err := f.Source(t.Context(), st, Files{Dir: dir}, "test", nil)
		if !errors.Is(err, authority.ErrRetired) || !strings.Contains(err.Error(), "--authority "+to) {
			t.Errorf("Source(%+v) of a moved runs.db = %v, want ErrRetired saying --authority %s", f, err, to)
		}
	}
	other := filepath.Join(t.TempDir(), "runs.db")
	src, err := (&RunFlags{Authority: "bolt:" + other}).Source(t.Context(), openStore(t, t.TempDir()), Files{}, "test", nil)
	if err != nil {
		t.Fatalf("Source(--authority bolt:PATH) without --data = %v", err)
	}
	if l, err := src.NewRun(t.Context()); err != nil || l.Run != 1 {
		t.Errorf("NewRun() from bolt:%s = %+v, %v", other, l, err)
	}
	if _, err := (&RunFlags{Authority: "ftp://x"}).Source(t.Context(), st, Files{Dir: dir}, "test", nil); !errors.Is(err, cli.ErrUsage) || !strings.Contains(err.Error(), "authority URL") {
		t.Errorf("Source(--authority ftp://x) = %v, want a usage error about the authority URL", err)
	}
}
