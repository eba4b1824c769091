// Package setup is the programs' wiring, beside their mains: it turns the
// flags they share into a store and a run source.
package setup

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"log/slog"
	"math"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/riakauthority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/riakstore"
)

// DefaultData is the data directory when neither --data nor --store is given.
const DefaultData = "./archive"

// File names inside a data directory.
const (
	MessagesFile = "messages.db"
	RunsFile     = "runs.db"
	CatalogFile  = "catalog.db"
)

// StoreFlags select the store: --data DIR or --store URL.
type StoreFlags struct {
	Data  string
	Store string

	parsed *StoreURL    // by Parse
	fs     *cli.FlagSet // of AddFlags: was --data given?
}

// Files are where an archive's files are, made once from --data and
// --store (StoreFlags.Files): the store, and beside it the local run
// authority, the catalog and the programs' state (the watcher's, the
// mirror's, public-inbox imports'). Every program takes its paths from
// here, so that they agree.
type Files struct {
	// Dir holds the archive's files other than a --store: --data DIR; or,
	// with --store bolt:PATH and no --data, PATH's directory. "" with a
	// Riak store and no --data: the programs then need a flag that names
	// the file they want (Need says which).
	Dir string
}

// Files says where the archive's files are. With --store bolt:PATH and
// no --data, every other file is beside PATH, so that a program run
// from any directory finds the same ones (a --data given as well keeps
// them in its directory).
func (f *StoreFlags) Files() (Files, error) {
	u, err := f.Parse()
	if err != nil {
		return Files{}, err
	}
	switch {
	case f.Store == "" || f.fs != nil && f.fs.IsSet("data"):
		return Files{Dir: f.Data}, nil
	case u.Bolt != "":
		return Files{Dir: filepath.Dir(u.Bolt)}, nil
	}
	return Files{}, nil
}

// in is name in Dir, or "" without one.
func (f Files) in(name ...string) string {
	if f.Dir == "" {
		return ""
	}
	return filepath.Join(append([]string{f.Dir}, name...)...)
}

// Runs is the local run authority, DIR/runs.db ("" without a Dir).
func (f Files) Runs() string { return f.in(RunsFile) }

// Catalog is the catalog, DIR/catalog.db ("" without a Dir).
func (f Files) Catalog() string { return f.in(CatalogFile) }

// PublicInboxState is the directory of the state of public-inbox imports
// into list ("" for none), DIR/public-inbox/LIST ("" without a Dir).
func (f Files) PublicInboxState(list string) string {
	// Per list: importing the same inbox into another list reads it
	// again (its messages are duplicates in the list they are in). "-"
	// is no list's name: a name has a letter or digit.
	if list == "" {
		list = "-"
	}
	return f.in("public-inbox", list)
}

// Need returns nil when there is a Dir, else the usage error that asks
// for flag (e.g. "--state FILE") or --data DIR, for what.
func (f Files) Need(flag, what string) error {
	if f.Dir != "" {
		return nil
	}
	return cli.Usagef("with a Riak --store, give %s (or --data DIR for %s)", flag, what)
}

// AddFlags registers --data and --store.
func (f *StoreFlags) AddFlags(fs *cli.FlagSet) {
	f.fs = fs
	fs.String(&f.Data, "data", DefaultData, "CHIBRARY_DATA", "data directory `DIR`: the embedded store DIR/messages.db and local run authority DIR/runs.db\n(with --store bolt:PATH and no --data, the files other than the store are beside PATH)")
	fs.String(&f.Store, "store", "", "CHIBRARY_STORE", "store `URL` instead of --data's: bolt:PATH or riak://host:port[,host:port...][/ARCHIVE]")
}

// URL returns the selected store's URL.
func (f *StoreFlags) URL() string {
	if f.Store != "" {
		return f.Store
	}
	return "bolt:" + filepath.Join(f.Data, MessagesFile)
}

// Parse reads the selected store's URL once, for a program that checks its
// flags before it does anything; Open and OpenReader use what it read.
func (f *StoreFlags) Parse() (StoreURL, error) {
	if f.parsed == nil {
		u, err := ParseStoreURL(f.URL())
		if err != nil {
			return StoreURL{}, err
		}
		f.parsed = &u
	}
	return *f.parsed, nil
}

// Open opens the selected store, creating a bolt store if missing.
func (f *StoreFlags) Open(ctx context.Context, log *slog.Logger) (store.Store, error) {
	return f.open(ctx, log, 0)
}

// OpenImport opens the selected store as Open does, for a bulk import: a
// bolt store keeps up to ImportMappedBudget of its file mapped.
func (f *StoreFlags) OpenImport(ctx context.Context, log *slog.Logger) (store.Store, error) {
	return f.open(ctx, log, importMappedBudget())
}

func (f *StoreFlags) open(ctx context.Context, log *slog.Logger, mapped int64) (store.Store, error) {
	u, err := f.Parse()
	if err != nil {
		return nil, err
	}
	if u.Bolt != "" {
		if err := f.checkDir(u.Bolt); err != nil {
			return nil, err
		}
	}
	return openURL(ctx, u, log, store.Compression{}, mapped)
}

// ImportMappedBudget is how many bytes of a bolt store's file an import
// keeps mapped (boltstore.Options.MappedBudget): a quarter of the memory
// the machine has available as it starts (MemAvailable, /proc/meminfo), or
// of its control group's limit if that is less (a container's: cgroup.go),
// at least boltstore.DefaultMappedBudget, which it is where neither can be
// read. Every batch looks up and inserts digests and Message-IDs all over
// the store's indexes, about 280 MB of file at a million messages; with
// only the default mapped, each batch faulted their pages in again, a
// third of the importer's CPU there (docs/performance.md). Those pages are
// the kernel's page cache, clean, which it takes back when it needs the
// memory; the long-running writers (the watcher, a mirror) keep the
// default.
func ImportMappedBudget() int64 {
	meminfo, _ := os.ReadFile("/proc/meminfo")
	cgroup, _ := os.ReadFile("/proc/self/cgroup")
	return importBudget(meminfo, "/sys/fs/cgroup", cgroup)
}

// importMappedBudget is ImportMappedBudget, or a test's fixed figure.
var importMappedBudget = ImportMappedBudget

// importBudget is ImportMappedBudget for the text of /proc/meminfo, the
// cgroup file systems at cgroupRoot and the text of /proc/self/cgroup.
func importBudget(meminfo []byte, cgroupRoot string, cgroup []byte) int64 {
	avail, ok := memAvailable(meminfo)
	if limit, found := cgroupLimit(cgroupRoot, cgroup); found && (!ok || limit < avail) {
		avail, ok = limit, true
	}
	if !ok {
		return boltstore.DefaultMappedBudget
	}
	return max(avail/4, boltstore.DefaultMappedBudget)
}

// memAvailable reads MemAvailable, in bytes, from /proc/meminfo's text.
func memAvailable(meminfo []byte) (int64, bool) {
	for line := range bytes.Lines(meminfo) {
		rest, ok := bytes.CutPrefix(line, []byte("MemAvailable:"))
		if !ok {
			continue
		}
		f := bytes.Fields(rest)
		if len(f) != 2 || string(f[1]) != "kB" {
			break
		}
		kb, err := strconv.ParseInt(string(f[0]), 10, 64)
		if err != nil || kb < 0 || kb > math.MaxInt64/1024 {
			break
		}
		return kb * 1024, true
	}
	return 0, false
}

// checkDir says in one plain line when the folder of the bolt store at path
// is a file, or lies under one: "--data afile is not a directory".
func (f *StoreFlags) checkDir(path string) error {
	file := fileOnPath(filepath.Dir(path))
	switch {
	case file == "":
		return nil
	case f.Store != "" && file == filepath.Dir(path):
		return fmt.Errorf("cannot open the store %s: %s is not a directory", path, file)
	case f.Store != "":
		return fmt.Errorf("cannot open the store %s: %s, on its path, is not a directory", path, file)
	case filepath.Clean(file) == filepath.Clean(f.Data):
		return fmt.Errorf("--data %s is not a directory", f.Data)
	}
	return fmt.Errorf("--data %s: %s, on its path, is not a directory", f.Data, file)
}

// fileOnPath returns dir, or its nearest existing parent, if that is not a
// directory.
func fileOnPath(dir string) string {
	for {
		fi, err := os.Stat(dir)
		if err == nil {
			if fi.IsDir() {
				return ""
			}
			return dir
		}
		if !errors.Is(err, fs.ErrNotExist) && !errors.Is(err, syscall.ENOTDIR) {
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// OpenReader opens the selected store for a program that only reads it,
// keeping ReaderCachedDicts compression dictionaries. With mustExist, a
// missing bolt store is an error rather than an empty archive made by
// mistake. A bolt store this process cannot write (a snapshot) is opened
// read-only, which needs no lock file.
func (f *StoreFlags) OpenReader(ctx context.Context, log *slog.Logger, mustExist bool) (store.Store, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	u, err := f.Parse()
	if err != nil {
		return nil, err
	}
	if u.Bolt == "" {
		return openURL(ctx, u, log, reading, 0)
	}
	if err := f.checkDir(u.Bolt); err != nil {
		return nil, err
	}
	_, err = os.Stat(u.Bolt)
	switch {
	case errors.Is(err, fs.ErrNotExist) && mustExist:
		return nil, f.NoArchive(err)
	case err != nil && !errors.Is(err, fs.ErrNotExist):
		// Name the path once.
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err
		}
		return nil, fmt.Errorf("cannot open %s: %w", u.Bolt, err)
	case err == nil:
		if why := boltstore.CannotWrite(u.Bolt); why != nil {
			log.Info("the archive cannot be written here: reading it read-only, without the lock file", "path", u.Bolt, "reason", why)
			return boltstore.Open(ctx, u.Bolt, boltstore.Options{Logger: log, ReadOnly: true, Compression: reading})
		}
	}
	return openURL(ctx, u, log, reading, 0)
}

// StoreURL is a parsed store URL.
type StoreURL struct {
	Bolt    string   // of bolt:PATH
	Riak    []string // host:port of riak://
	Archive string   // in the Riak cluster
}

// ParseStoreURL reads bolt:PATH (or bolt://PATH) and
// riak://host[:port][,host[:port]...][/ARCHIVE] (port 8087 by default).
func ParseStoreURL(url string) (StoreURL, error) { return parseURL("store", url) }

// ParseAuthorityURL reads an --authority URL as ParseStoreURL does.
func ParseAuthorityURL(url string) (StoreURL, error) { return parseURL("authority", url) }

func parseURL(kind, url string) (StoreURL, error) {
	switch {
	case strings.HasPrefix(url, "bolt:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "bolt:"), "//")
		if path == "" {
			return StoreURL{}, cli.Usagef("%s URL %q has no path", kind, url)
		}
		return StoreURL{Bolt: path}, nil
	case strings.HasPrefix(url, "riak://"):
		hosts, archive, _ := strings.Cut(strings.TrimPrefix(url, "riak://"), "/")
		if archive == "" {
			archive = riakstore.DefaultArchive
		}
		if err := riakstore.ValidArchive(archive); err != nil {
			return StoreURL{}, cli.Usagef("%s URL %q: archive name %q: want 1 to 64 of a-z, 0-9, _ and - after the nodes, as in riak://host:8087/%s", kind, url, archive, riakstore.DefaultArchive)
		}
		var nodes []string
		for _, n := range strings.Split(hosts, ",") {
			n = strings.TrimSpace(n)
			if n == "" {
				continue
			}
			host, port, err := net.SplitHostPort(n)
			if err != nil { // no port
				host, port = n, "8087"
				if len(n) > 2 && n[0] == '[' && n[len(n)-1] == ']' {
					host = n[1 : len(n)-1] // an IPv6 address
				}
			}
			if !validHost(host) {
				return StoreURL{}, cli.Usagef("%s URL %q: bad Riak node %q (want host:port)", kind, url, n)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return StoreURL{}, cli.Usagef("%s URL %q: bad port in %q", kind, url, n)
			}
			nodes = append(nodes, net.JoinHostPort(host, port))
		}
		if len(nodes) == 0 {
			return StoreURL{}, cli.Usagef("%s URL %q names no Riak node", kind, url)
		}
		return StoreURL{Riak: nodes, Archive: archive}, nil
	}
	return StoreURL{}, cli.Usagef("%s URL %q: want bolt:PATH or riak://host:port[,host:port...][/ARCHIVE]", kind, url)
}

// validHost accepts an IP address or a DNS name. An IPv6 zone must be an
// interface name: netip accepts any, "::%[" among them, which no dialer can
// split back out of "[::%[]:8087".
func validHost(h string) bool {
	if a, err := netip.ParseAddr(h); err == nil {
		return a.Zone() == "" || validName(a.Zone())
	}
	return validName(h)
}

func validName(h string) bool {
	if h == "" || len(h) > 253 {
		return false
	}
	for _, c := range h {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '_' || c == '.') {
			return false
		}
	}
	return true
}

// OpenStore opens a store by URL (see ParseStoreURL).
func OpenStore(ctx context.Context, url string, log *slog.Logger) (store.Store, error) {
	u, err := ParseStoreURL(url)
	if err != nil {
		return nil, err
	}
	return openURL(ctx, u, log, store.Compression{}, 0)
}

// ReaderCachedDicts is how many compression dictionaries a store opened by
// OpenReader keeps ready (store.Compression.CachedDicts), a writer keeping
// 8: a compacted store has one for each era, 233 at a million messages,
// and a reader of random old messages read one again for most of them
// (docs/performance.md, A million: a fifth of a message page's CPU there).
// Each costs about half a MB, so at most about 16 MB.
const ReaderCachedDicts = 32

// reading is the compression of a store opened by OpenReader.
var reading = store.Compression{CachedDicts: ReaderCachedDicts}

// openURL opens the store u; comp's zero fields take the backend's
// defaults, and a bolt store keeps up to mapped bytes of its file mapped
// (zero: boltstore's default).
func openURL(ctx context.Context, u StoreURL, log *slog.Logger, comp store.Compression, mapped int64) (store.Store, error) {
	if u.Bolt != "" {
		return boltstore.Open(ctx, u.Bolt, boltstore.Options{Logger: log, Compression: comp, MappedBudget: mapped})
	}
	return riakstore.Open(ctx, riakstore.Options{Nodes: u.Riak, Archive: u.Archive, Logger: log, Compression: comp})
}

// RunFlags select the run authority: a coordinator, an authority taken
// directly (--authority), or by default the local authority DATA/runs.db.
type RunFlags struct {
	Coordinator string
	Authority   string
	TokenFile   string
	Note        string
	Scheme      string // of an authority created now
}

// AddFlags registers --coordinator, --authority, --token-file, --note and
// --scheme.
func (f *RunFlags) AddFlags(fs *cli.FlagSet) {
	fs.String(&f.Coordinator, "coordinator", "", "CHIBRARY_COORDINATOR", "`URL` of a coordinator serving the run authority (e.g. http://coord:7070)")
	fs.String(&f.Authority, "authority", "", "CHIBRARY_AUTHORITY", "run authority `URL` to take runs from directly, without a coordinator:\nbolt:PATH (default bolt:DATA/runs.db) or riak://host:port[,host:port...][/ARCHIVE],\nan authority in the Riak cluster's consistent buckets (see docs/authority.md)")
	fs.String(&f.TokenFile, "token-file", "", "CHIBRARY_TOKEN_FILE", "`FILE` holding the coordinator's bearer token ($CHIBRARY_TOKEN holds the token itself)")
	fs.String(&f.Note, "note", "", "", "`TEXT` recorded with every run this process takes")
	fs.String(&f.Scheme, "scheme", "", "CHIBRARY_SCHEME", "call-number shuffle, `mix|bits`, of the authority (DATA/runs.db or --authority) if it is created now\n(default mix; asking an existing authority for another scheme than its own is an error;\na coordinator's is chosen with coordinator --scheme)")
}

// Source returns the run source the flags select for st; one that holds a
// connection is an io.Closer. It first checks what would otherwise fail
// only later, or leave a stray runs.db behind: a store bound to an authority
// while DATA/runs.db does not exist, or --scheme asking an existing
// authority for another scheme.
func (f *RunFlags) Source(ctx context.Context, st store.Store, files Files, program string, log *slog.Logger) (callnumber.RunSource, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	holder := authority.Holder{Program: program, Host: cli.Hostname(), PID: os.Getpid(), Note: f.Note}
	if f.Coordinator != "" && f.Authority != "" {
		return nil, cli.Usagef("give --coordinator or --authority, not both")
	}
	if f.Coordinator == "" {
		var scheme shuffle.Scheme
		if f.Scheme != "" {
			var err error
			if scheme, err = shuffle.ParseScheme(f.Scheme); err != nil {
				return nil, cli.Usagef("--scheme: %v", err)
			}
		}
		path := ""
		if f.Authority != "" {
			u, err := ParseAuthorityURL(f.Authority)
			if err != nil {
				return nil, err
			}
			if u.Bolt == "" {
				return riakSource(ctx, st, u, scheme, holder, log)
			}
			path = u.Bolt
		} else {
			if path = files.Runs(); path == "" {
				return nil, cli.Usagef("without --coordinator or --authority, the local run authority needs --data")
			}
		}
		if err := checkLocal(ctx, st, path, scheme); err != nil {
			return nil, err
		}
		return authority.NewLocal(path, holder, authority.LocalOptions{Scheme: scheme}), nil
	}
	if f.Scheme != "" {
		return nil, cli.Usagef("--scheme applies to an authority taken directly (DATA/runs.db or --authority); a coordinator's scheme is chosen with coordinator --scheme")
	}
	token, err := cli.Secret(f.TokenFile, "CHIBRARY_TOKEN", "token-file", false)
	if err != nil {
		return nil, err
	}
	if token == "" {
		return nil, cli.Usagef("--coordinator needs --token-file or $CHIBRARY_TOKEN")
	}
	// A program that needs a run can only wait for it: ride out a
	// coordinator restart.
	c, err := coordinator.NewClient(f.Coordinator, token, holder, coordinator.ClientOptions{
		Logger: log, MaxAttempts: 10, MaxBackoff: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot use coordinator: %w", err)
	}
	return c, nil
}

// riakSource opens (or creates) the authority in the Riak cluster u names,
// unless the store is bound to another one.
func riakSource(ctx context.Context, st store.Store, u StoreURL, scheme shuffle.Scheme, holder authority.Holder, log *slog.Logger) (callnumber.RunSource, error) {
	opts := riakauthority.Options{Nodes: u.Riak, Archive: u.Archive, Scheme: scheme, Logger: log}
	url := opts.URL()
	a, err := riakauthority.Open(ctx, opts)
	if errors.Is(err, riakauthority.ErrNoAuthority) {
		b, berr := st.Binding(ctx)
		switch {
		case berr == nil:
			return nil, fmt.Errorf("%w: this archive is bound to the authority %s, and %s has no authority: "+
				"to move that authority there, stop what issues its runs and run coordinator migrate --db runs.db --to %s; "+
				"else use --coordinator URL of the coordinator serving it", ErrBoundElsewhere, b.Authority, url, url)
		case !errors.Is(berr, store.ErrUnbound):
			return nil, fmt.Errorf("cannot read the store's binding: %w", berr)
		}
		a, _, err = riakauthority.OpenOrCreate(ctx, opts)
	}
	if err != nil {
		if errors.Is(err, authority.ErrScheme) {
			return nil, fmt.Errorf("%w: --scheme: %w", cli.ErrUsage, err)
		}
		return nil, err
	}
	if b, err := st.Binding(ctx); err == nil && b.Authority != a.ID() {
		a.Close()
		return nil, fmt.Errorf("%w: this archive is bound to the authority %s, but %s is the authority %s, whose runs it refuses", ErrBoundElsewhere, b.Authority, url, a.ID())
	}
	return authority.Runs(a, holder), nil
}

// ErrBoundElsewhere: the store is bound to an authority that the data
// directory does not hold.
var ErrBoundElsewhere = errors.New("the archive's run authority is not here")

// checkLocal checks that the local authority at path can serve st.
func checkLocal(ctx context.Context, st store.Store, path string, scheme shuffle.Scheme) error {
	_, err := os.Stat(path)
	if errors.Is(err, fs.ErrNotExist) {
		b, err := st.Binding(ctx)
		switch {
		case errors.Is(err, store.ErrUnbound):
			return nil // a new archive: the local authority is created with it
		case err != nil:
			return fmt.Errorf("cannot read the store's binding: %w", err)
		}
		return fmt.Errorf("%w: this archive is bound to the authority %s, and %s does not exist: "+
			"the runs come from a coordinator serving that authority; use --coordinator URL (and --token-file F)", ErrBoundElsewhere, b.Authority, path)
	}
	if err != nil {
		return nil // the local authority reports what it cannot open
	}
	// A short look: a coordinator holding the file is reported by the
	// allocation itself, with the hint to use --coordinator.
	a, err := authority.Open(ctx, path, authority.Options{ReadOnly: true, LockTimeout: 200 * time.Millisecond})
	if err != nil {
		return nil
	}
	defer a.Close()
	if to := a.MovedTo(); to != "" {
		return authority.RetiredError(path, to)
	}
	if scheme != "" && a.Scheme() != scheme {
		return fmt.Errorf("%w: --scheme: %w", cli.ErrUsage, authority.SchemeError(path, a.Scheme(), scheme))
	}
	if b, err := st.Binding(ctx); err == nil && b.Authority != a.ID() {
		// The store refuses every run of this authority, so none of them
		// is in the archive: the file is of no use here.
		return fmt.Errorf("%w: this archive is bound to the authority %s, but %s is the authority %s, whose runs it refuses: "+
			"use --coordinator URL (and --token-file F) of the coordinator serving %s; "+
			"%s has no run this archive holds, so if it was created by mistake (a program run here without --coordinator), it can be moved away",
			ErrBoundElsewhere, b.Authority, path, a.ID(), b.Authority, path)
	}
	return nil
}

// NoArchive is the error of a program that needs an existing bolt store
// where f names none (err: what os.Stat said of its file).
func (f StoreFlags) NoArchive(err error) error {
	u, perr := f.Parse()
	if perr != nil || u.Bolt == "" {
		return err
	}
	if !errors.Is(err, fs.ErrNotExist) {
		if pe := (*fs.PathError)(nil); errors.As(err, &pe) {
			err = pe.Err // the path is said once
		}
		return fmt.Errorf("cannot open %s: %w", u.Bolt, err)
	}
	if f.Store == "" {
		return fmt.Errorf("no archive in %s (no %s): import messages into it first, or fix --data", f.Data, MessagesFile)
	}
	return fmt.Errorf("no archive at %s: import messages into it first, or fix --store", u.Bolt)
}
