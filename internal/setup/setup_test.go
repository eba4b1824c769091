package setup

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/riakstore"
)

func TestOpenStore(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	for _, url := range []string{"bolt:" + filepath.Join(dir, "a.db"), "bolt://" + filepath.Join(dir, "b.db")} {
		st, err := OpenStore(ctx, url, nil)
		if err != nil {
			t.Fatalf("OpenStore(%q) error = %v", url, err)
		}
		if _, ok := st.(*boltstore.Store); !ok {
			t.Errorf("OpenStore(%q) = %T, want *boltstore.Store", url, st)
		}
		st.Close()
	}
	for _, url := range []string{"bolt:", "ftp://x", "riak://", "riak://,", "/plain/path"} {
		if _, err := OpenStore(ctx, url, nil); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("OpenStore(%q) error = %v, want a usage error", url, err)
		}
	}
}

func TestStoreFlagsDefaultToDataDir(t *testing.T) {
	dir := t.TempDir()
	f := StoreFlags{Data: dir}
	st, err := f.Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	st.Close()
	if _, err := os.Stat(filepath.Join(dir, MessagesFile)); err != nil {
		t.Errorf("--data %s did not open %s: %v", dir, MessagesFile, err)
	}
}

func TestRunSource(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()

	src, err := (&RunFlags{}).Source(ctx, dir, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := src.(*authority.Local); !ok {
		t.Errorf("Source() without --coordinator = %T, want the local authority", src)
	}
	l, err := src.NewRun(ctx)
	if err != nil || l.Run != 1 || l.Program != "test" {
		t.Errorf("local NewRun() = %+v, %v; want run 1 for program test", l, err)
	}
	if _, err := os.Stat(filepath.Join(dir, RunsFile)); err != nil {
		t.Errorf("local authority did not create %s: %v", RunsFile, err)
	}

	if _, err := (&RunFlags{}).Source(ctx, "", "test", nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("Source() without --coordinator or --data error = %v, want a usage error", err)
	}
	t.Setenv("CHIBRARY_TOKEN", "")
	if _, err := (&RunFlags{Coordinator: "http://127.0.0.1:1"}).Source(ctx, dir, "test", nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("Source() with --coordinator and no token error = %v, want a usage error", err)
	}
	t.Setenv("CHIBRARY_TOKEN", "from-env")
	if src, err := (&RunFlags{Coordinator: "http://127.0.0.1:1"}).Source(ctx, dir, "test", nil); err != nil {
		t.Errorf("Source() with $CHIBRARY_TOKEN error = %v", err)
	} else if _, ok := src.(*coordinator.Client); !ok {
		t.Errorf("Source() with --coordinator = %T, want *coordinator.Client", src)
	}
	if _, err := (&RunFlags{Coordinator: "http://127.0.0.1:1", TokenFile: filepath.Join(dir, "missing")}).Source(ctx, dir, "test", nil); err == nil {
		t.Error("Source() with a missing --token-file: nil error, want one")
	}
}

func TestRunSourceScheme(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	var logs bytes.Buffer
	log := slog.New(slog.NewTextHandler(&logs, nil))
	src, err := (&RunFlags{Scheme: "mix"}).Source(ctx, dir, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := src.NewRun(ctx); err != nil || l.Scheme != shuffle.Mix {
		t.Fatalf("NewRun() with --scheme mix on a new authority = %+v, %v; want scheme mix", l, err)
	}
	// The authority exists now: asking for bits keeps mix, with a warning.
	src, err = (&RunFlags{Scheme: "bits"}).Source(ctx, dir, "test", log)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := src.NewRun(ctx); err != nil || l.Scheme != shuffle.Mix {
		t.Errorf("NewRun() with --scheme bits on an existing mix authority = %+v, %v; want scheme mix", l, err)
	}
	if !strings.Contains(logs.String(), "--scheme ignored") {
		t.Errorf("no warning that --scheme was ignored; logs:\n%s", logs.String())
	}
	for _, f := range []RunFlags{{Scheme: "rot13"}, {Scheme: "mix", Coordinator: "http://127.0.0.1:1"}} {
		if _, err := f.Source(ctx, dir, "test", log); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("Source(%+v) error = %v, want a usage error", f, err)
		}
	}
}

func TestParseStoreURL(t *testing.T) {
	tests := []struct {
		url  string
		want StoreURL
	}{
		{"bolt:/srv/a/messages.db", StoreURL{Bolt: "/srv/a/messages.db"}},
		{"bolt://rel/m.db", StoreURL{Bolt: "rel/m.db"}},
		{"riak://r1:8087,r2:9000", StoreURL{Riak: []string{"r1:8087", "r2:9000"}, Archive: "chibrary"}},
		{"riak://r1, r2/", StoreURL{Riak: []string{"r1:8087", "r2:8087"}, Archive: "chibrary"}},
		{"riak://[::1]:8087", StoreURL{Riak: []string{"[::1]:8087"}, Archive: "chibrary"}},
		{"riak://r1:8087,r2/linux-mips", StoreURL{Riak: []string{"r1:8087", "r2:8087"}, Archive: "linux-mips"}},
		{"riak://[::1]/a_0-9", StoreURL{Riak: []string{"[::1]:8087"}, Archive: "a_0-9"}},
	}
	for _, tt := range tests {
		got, err := ParseStoreURL(tt.url)
		if err != nil || got.Bolt != tt.want.Bolt || !slices.Equal(got.Riak, tt.want.Riak) || got.Archive != tt.want.Archive {
			t.Errorf("ParseStoreURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "bolt:", "bolt://", "riak://", "riak://,", "riak://h:0", "riak://h:99999", "riak://h:x", "riak://user@h", "riak://[", "riak://a:b:c", "http://h", "/plain/path",
		"riak:///archive", "riak://h/Archive", "riak://h/a/b", "riak://h/a.b", "riak://[::1", "riak://::1]", "riak://h/" + strings.Repeat("a", 65), "riak://h/é"} {
		if got, err := ParseStoreURL(bad); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("ParseStoreURL(%q) = %+v, %v; want a usage error", bad, got, err)
		}
	}
	// The error says what an archive name may be.
	if _, err := ParseStoreURL("riak://h/My.Archive"); err == nil || !strings.Contains(err.Error(), "a-z, 0-9, _ and -") {
		t.Errorf("ParseStoreURL(bad archive) error = %v, want it to say what a name may hold", err)
	}
}

func FuzzParseStoreURL(f *testing.F) {
	for _, s := range []string{"bolt:/a", "riak://a:1,b", "riak://[::1]:8087", "riak://,,", "bolt://", "riak://a/x-1", "riak://a/X", "riak://a//"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, url string) {
		u, err := ParseStoreURL(url)
		if err != nil {
			if !errors.Is(err, cli.ErrUsage) {
				t.Fatalf("ParseStoreURL(%q) error = %v, want a usage error", url, err)
			}
			return
		}
		if (u.Bolt == "") == (len(u.Riak) == 0) {
			t.Fatalf("ParseStoreURL(%q) = %+v: want exactly one of Bolt, Riak", url, u)
		}
		for _, n := range u.Riak {
			if _, _, err := net.SplitHostPort(n); err != nil {
				t.Fatalf("ParseStoreURL(%q) node %q: %v", url, n, err)
			}
		}
		if len(u.Riak) > 0 {
			if err := riakstore.ValidArchive(u.Archive); err != nil {
				t.Fatalf("ParseStoreURL(%q) archive: %v", url, err)
			}
		} else if u.Archive != "" {
			t.Fatalf("ParseStoreURL(%q) = %+v: an archive without Riak", url, u)
		}
	})
}
