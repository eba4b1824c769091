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
	"github.com/chibrary/chibrary/internal/testkit/testmount"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
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

// openStore opens DIR/messages.db for a test.
func openStore(t *testing.T, dir string) store.Store {
	t.Helper()
	st, err := (&StoreFlags{Data: dir}).Open(context.Background(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func TestRunSource(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)

	src, err := (&RunFlags{}).Source(ctx, st, Files{Dir: dir}, "test", nil)
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

	if _, err := (&RunFlags{}).Source(ctx, st, Files{}, "test", nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("Source() without --coordinator or --data error = %v, want a usage error", err)
	}
	t.Setenv("CHIBRARY_TOKEN", "")
	if _, err := (&RunFlags{Coordinator: "http://127.0.0.1:1"}).Source(ctx, st, Files{Dir: dir}, "test", nil); !errors.Is(err, cli.ErrUsage) {
		t.Errorf("Source() with --coordinator and no token error = %v, want a usage error", err)
	}
	t.Setenv("CHIBRARY_TOKEN", "from-env")
	if src, err := (&RunFlags{Coordinator: "http://127.0.0.1:1"}).Source(ctx, st, Files{Dir: dir}, "test", nil); err != nil {
		t.Errorf("Source() with $CHIBRARY_TOKEN error = %v", err)
	} else if _, ok := src.(*coordinator.Client); !ok {
		t.Errorf("Source() with --coordinator = %T, want *coordinator.Client", src)
	}
	if _, err := (&RunFlags{Coordinator: "http://127.0.0.1:1", TokenFile: filepath.Join(dir, "missing")}).Source(ctx, st, Files{Dir: dir}, "test", nil); err == nil {
		t.Error("Source() with a missing --token-file: nil error, want one")
	}
}

func TestRunSourceScheme(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	src, err := (&RunFlags{}).Source(ctx, st, Files{Dir: dir}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := src.NewRun(ctx); err != nil || l.Scheme != shuffle.Mix {
		t.Fatalf("NewRun() of a new authority = %+v, %v; want scheme mix, the default", l, err)
	}
	// The authority exists now: asking for bits is an error naming mix,
	// before any run is taken; asking for mix is fine.
	_, err = (&RunFlags{Scheme: "bits"}).Source(ctx, st, Files{Dir: dir}, "test", nil)
	if !errors.Is(err, cli.ErrUsage) || !errors.Is(err, authority.ErrScheme) || !strings.Contains(err.Error(), "has scheme mix, not bits") {
		t.Errorf("Source(--scheme bits) on a mix authority = %v, want a usage error naming mix", err)
	}
	if _, err := (&RunFlags{Scheme: "mix"}).Source(ctx, st, Files{Dir: dir}, "test", nil); err != nil {
		t.Errorf("Source(--scheme mix) on a mix authority = %v", err)
	}
	bits := t.TempDir()
	src, err = (&RunFlags{Scheme: "bits"}).Source(ctx, openStore(t, bits), Files{Dir: bits}, "test", nil)
	if err != nil {
		t.Fatal(err)
	}
	if l, err := src.NewRun(ctx); err != nil || l.Scheme != shuffle.Bits {
		t.Errorf("NewRun() with --scheme bits on a new authority = %+v, %v; want scheme bits", l, err)
	}
	for _, f := range []RunFlags{{Scheme: "rot13"}, {Scheme: "mix", Coordinator: "http://127.0.0.1:1"}} {
		if _, err := f.Source(ctx, st, Files{Dir: dir}, "test", nil); !errors.Is(err, cli.ErrUsage) {
			t.Errorf("Source(%+v) error = %v, want a usage error", f, err)
		}
	}
}

// A data directory whose store is bound to a coordinator's authority has
// no runs.db: a plain local run source must refuse, saying to use
// --coordinator, and must not create a stray runs.db that would break
// every later local command there.
func TestRunSourceBoundElsewhere(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	st := openStore(t, dir)
	// The coordinator's authority lives elsewhere; a process took a run
	// from it for this store.
	coord, _, err := authority.OpenOrCreate(ctx, filepath.Join(t.TempDir(), "runs.db"), authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer coord.Close()
	l, err := coord.Issue(ctx, authority.Holder{Program: "importer"})
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	_, err = (&RunFlags{}).Source(ctx, st, Files{Dir: dir}, "importer", nil)
	if !errors.Is(err, ErrBoundElsewhere) || !strings.Contains(err.Error(), coord.ID()) || !strings.Contains(err.Error(), "--coordinator") {
		t.Errorf("Source() on a store bound to another authority = %v, want %v naming %s and --coordinator", err, ErrBoundElsewhere, coord.ID())
	}
	if _, err := os.Stat(filepath.Join(dir, RunsFile)); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("%s after the refusal: %v, want none", RunsFile, err)
	}

	// A stray runs.db of another authority (left by a program run there
	// before this check existed) is named, and said to be of no use.
	stray, _, err := authority.OpenOrCreate(ctx, filepath.Join(dir, RunsFile), authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	strayID := stray.ID()
	stray.Close()
	_, err = (&RunFlags{}).Source(ctx, st, Files{Dir: dir}, "importer", nil)
	if !errors.Is(err, ErrBoundElsewhere) || !strings.Contains(err.Error(), strayID) || !strings.Contains(err.Error(), "moved away") {
		t.Errorf("Source() with a stray %s = %v, want %v naming %s", RunsFile, err, ErrBoundElsewhere, strayID)
	}
}

// A read-only archive is opened read-only, and the log says so.
func TestOpenReaderReadOnly(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	openStore(t, dir).Close()
	f := StoreFlags{Data: testmount.ReadOnly(t, dir)}
	var logs bytes.Buffer
	st, err := f.OpenReader(ctx, slog.New(slog.NewTextHandler(&logs, nil)), true)
	if err != nil {
		t.Fatalf("OpenReader(read-only) = %v", err)
	}
	defer st.Close()
	if n, err := st.Count(ctx); n != 0 || err != nil {
		t.Errorf("Count() = %d, %v; want 0", n, err)
	}
	if !strings.Contains(logs.String(), "read-only") {
		t.Errorf("log %q does not say the archive is read read-only", logs.String())
	}
}

func TestOpenReaderMissing(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "nothing")
	if _, err := (&StoreFlags{Data: dir}).OpenReader(context.Background(), nil, true); err == nil || !strings.Contains(err.Error(), "no archive in "+dir) {
		t.Errorf("OpenReader(missing, mustExist) = %v, want no archive in %s", err, dir)
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("OpenReader(missing) created %s", dir)
	}
}

// A --data (or a bolt: path) that is, or lies under, a regular file is
// said once and plainly, by readers and writers alike, and nothing is
// created.
func TestNotADirectory(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "afile")
	if err := os.WriteFile(file, []byte("x"), 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		flags StoreFlags
		want  string
	}{
		{"--data a file", StoreFlags{Data: file}, "--data " + file + " is not a directory"},
		{"--data under a file", StoreFlags{Data: filepath.Join(file, "sub")}, "--data " + filepath.Join(file, "sub") + ": " + file + ", on its path, is not a directory"},
		{"--store in a file", StoreFlags{Store: "bolt:" + filepath.Join(file, "m.db")}, "cannot open the store " + filepath.Join(file, "m.db") + ": " + file + " is not a directory"},
		{"--store under a file", StoreFlags{Store: "bolt:" + filepath.Join(file, "a", "m.db")}, "cannot open the store " + filepath.Join(file, "a", "m.db") + ": " + file + ", on its path, is not a directory"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, mustExist := range []bool{true, false} {
				if _, err := tt.flags.OpenReader(t.Context(), nil, mustExist); err == nil || err.Error() != tt.want {
					t.Errorf("OpenReader(mustExist %v) = %v, want %q", mustExist, err, tt.want)
				}
			}
			if _, err := tt.flags.Open(t.Context(), nil); err == nil || err.Error() != tt.want {
				t.Errorf("Open = %v, want %q", err, tt.want)
			}
		})
	}
	if b, _ := os.ReadFile(file); string(b) != "x" {
		t.Errorf("the file became %q", b)
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
		{"riak://[fe80::1%eth0]:8087", StoreURL{Riak: []string{"[fe80::1%eth0]:8087"}, Archive: "chibrary"}},
	}
	for _, tt := range tests {
		got, err := ParseStoreURL(tt.url)
		if err != nil || got.Bolt != tt.want.Bolt || !slices.Equal(got.Riak, tt.want.Riak) || got.Archive != tt.want.Archive {
			t.Errorf("ParseStoreURL(%q) = %+v, %v; want %+v", tt.url, got, err, tt.want)
		}
	}
	for _, bad := range []string{"", "bolt:", "bolt://", "riak://", "riak://,", "riak://h:0", "riak://h:99999", "riak://h:x", "riak://user@h", "riak://[", "riak://a:b:c", "http://h", "/plain/path",
		"riak:///archive", "riak://h/Archive", "riak://h/a/b", "riak://h/a.b", "riak://[::1", "riak://::1]", "riak://::%[", "riak://[fe80::1%[]:8087", "riak://h/" + strings.Repeat("a", 65), "riak://h/é"} {
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

// The importer's store keeps ImportMappedBudget of its file mapped, the
// others boltstore's default; a reader's keeps ReaderCachedDicts
// dictionaries, the others the default.
func TestOpenStoreOptions(t *testing.T) {
	ctx := context.Background()
	dir := t.TempDir()
	f := StoreFlags{Data: dir}
	defer func(b func() int64) { importMappedBudget = b }(importMappedBudget)
	importMappedBudget = func() int64 { return 3 << 30 }
	plain, err := boltstore.Open(ctx, filepath.Join(t.TempDir(), "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	dicts := plain.CachedDicts()
	plain.Close()
	if dicts >= ReaderCachedDicts {
		t.Fatalf("a store opened with no options keeps %d dictionaries, ReaderCachedDicts %d: the test cannot tell them apart", dicts, ReaderCachedDicts)
	}
	for _, tc := range []struct {
		name   string
		open   func() (store.Store, error)
		mapped int64
		dicts  int
	}{
		{"OpenImport", func() (store.Store, error) { return f.OpenImport(ctx, nil) }, 3 << 30, dicts},
		{"Open", func() (store.Store, error) { return f.Open(ctx, nil) }, boltstore.DefaultMappedBudget, dicts},
		{"OpenReader", func() (store.Store, error) { return f.OpenReader(ctx, nil, true) }, boltstore.DefaultMappedBudget, ReaderCachedDicts},
	} {
		st, err := tc.open()
		if err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		bs := st.(*boltstore.Store)
		if got := bs.MappedBudget(); got != tc.mapped {
			t.Errorf("%s: the store's mapped budget is %d, want %d", tc.name, got, tc.mapped)
		}
		if got := bs.CachedDicts(); got != tc.dicts {
			t.Errorf("%s: the store keeps %d dictionaries, want %d", tc.name, got, tc.dicts)
		}
		st.Close()
	}
}

func TestImportBudget(t *testing.T) {
	const min = boltstore.DefaultMappedBudget
	for _, tc := range []struct {
		meminfo string
		want    int64
	}{
		{"MemTotal:       24576000 kB\nMemFree:         1000000 kB\nMemAvailable:   20000000 kB\n", 20000000 * 1024 / 4},
		{"MemAvailable:   20000000 kB", 20000000 * 1024 / 4},          // no newline at the end
		{"MemTotal:  1000000 kB\nMemAvailable:     400000 kB\n", min}, // a quarter is less than the default
		{"MemTotal:  1000000 kB\nMemFree: 400000 kB\n", min},          // no MemAvailable (Linux before 3.14)
		{"MemAvailable:   20000000 MB\n", min},                        // not in kB
		{"MemAvailable:   -5 kB\n", min},
		{"MemAvailable:   99999999999999999999 kB\n", min},
		{"MemAvailable:   9007199254740993 kB\n", min}, // overflows in bytes
		{"MemAvailable:\n", min},
		{"", min},
	} {
		if got := importBudget([]byte(tc.meminfo), t.TempDir(), nil); got != tc.want {
			t.Errorf("importBudget(%q) = %d, want %d", tc.meminfo, got, tc.want)
		}
	}
	// A container's limit, when less than what the host has available.
	root := t.TempDir()
	writeFiles(t, root, map[string]string{"memory.max": "2147483648\n"})
	inCgroup := []byte("0::/\n")
	for _, tc := range []struct {
		meminfo string
		want    int64
	}{
		{"MemAvailable:   20000000 kB\n", 2147483648 / 4},
		{"MemAvailable:   1000000 kB\n", 1000000 * 1024 / 4},
		{"", 2147483648 / 4}, // no /proc/meminfo: the limit alone
	} {
		if got := importBudget([]byte(tc.meminfo), root, inCgroup); got != tc.want {
			t.Errorf("importBudget(%q) in a cgroup of 2 GiB = %d, want %d", tc.meminfo, got, tc.want)
		}
	}
}

func writeFiles(t testing.TB, root string, files map[string]string) {
	t.Helper()
	for name, text := range files {
		p := filepath.Join(root, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func TestCgroupLimit(t *testing.T) {
	const unlimitedV1 = "9223372036854771712\n"
	for _, tc := range []struct {
		name   string
		cgroup string
		files  map[string]string
		want   int64 // 0: none
	}{
		{"v2, an ancestor's limit", "0::/user.slice/app.scope\n", map[string]string{
			"user.slice/memory.max":           "1073741824\n",
			"user.slice/app.scope/memory.max": "max\n",
		}, 1 << 30},
		{"v2, the smallest on the way up", "0::/a/b\n", map[string]string{
			"a/memory.max":   "1073741824\n",
			"a/b/memory.max": "536870912\n",
			"memory.max":     "max\n",
		}, 512 << 20},
		{"v2, in its own namespace", "0::/\n", map[string]string{"memory.max": "536870912"}, 512 << 20},
		{"v2, no limit", "0::/a\n", map[string]string{"a/memory.max": "max\n", "memory.max": "max\n"}, 0},
		{"v1", "12:pids:/docker/abc\n4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n", map[string]string{
			"memory/docker/abc/memory.limit_in_bytes": "2147483648\n",
			"memory/memory.limit_in_bytes":            unlimitedV1,
		}, 2 << 30},
		{"v1, controllers mounted together", "5:cpuacct,memory:/x\n", map[string]string{
			"memory/x/memory.limit_in_bytes": "268435456\n",
		}, 256 << 20},
		{"v1, no limit", "4:memory:/\n", map[string]string{"memory/memory.limit_in_bytes": unlimitedV1}, 0},
		{"v1 and v2 both", "4:memory:/x\n0::/y\n", map[string]string{
			"memory/x/memory.limit_in_bytes": "2147483648\n",
			"y/memory.max":                   "1073741824\n",
		}, 1 << 30},
		{"not memory's", "3:cpu:/x\n", map[string]string{"memory/x/memory.limit_in_bytes": "1073741824\n"}, 0},
		{"no files", "0::/a/b\n4:memory:/a\n", nil, 0},
		{"garbage", "0::/a\n", map[string]string{"a/memory.max": "lots\n", "memory.max": "-5\n"}, 0},
		{"zero", "0::/\n", map[string]string{"memory.max": "0\n"}, 0},
		{"a relative path", "0::a\n", map[string]string{"a/memory.max": "1073741824\n"}, 0},
		{"no path", "0::\n", map[string]string{"memory.max": "1073741824\n"}, 0},
		{"a path out of the root", "0::/../../x\n", map[string]string{"x/memory.max": "1073741824\n"}, 1 << 30},
		{"empty", "", map[string]string{"memory.max": "1073741824\n"}, 0},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			writeFiles(t, root, tc.files)
			got, found := cgroupLimit(root, []byte(tc.cgroup))
			if tc.want == 0 && found || tc.want != 0 && (!found || got != tc.want) {
				t.Errorf("cgroupLimit(%q) = %d, %v; want %d", tc.cgroup, got, found, tc.want)
			}
		})
	}
}

// FuzzCgroupLimit: any /proc/self/cgroup text, beside a cgroup tree with
// limits at its roots, finds one of them or none; never a panic.
func FuzzCgroupLimit(f *testing.F) {
	f.Add([]byte("0::/\n"))
	f.Add([]byte("4:memory:/docker/abc\n3:cpu,cpuacct:/docker/abc\n0::/user.slice\n"))
	f.Add([]byte("0::/../..\n"))
	f.Add([]byte("::\n:memory:\n"))
	root := f.TempDir()
	writeFiles(f, root, map[string]string{"memory.max": "1073741824\n", "memory/memory.limit_in_bytes": "2147483648\n"})
	f.Fuzz(func(t *testing.T, cgroup []byte) {
		n, found := cgroupLimit(root, cgroup)
		if found && n != 1<<30 && n != 2<<30 {
			t.Fatalf("cgroupLimit(%q) = %d, want a limit of the tree or none", cgroup, n)
		}
	})
}
