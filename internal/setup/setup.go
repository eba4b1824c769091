// Package setup turns the flags the programs share (--data, --store,
// --coordinator, --token-file) into a store and a run source.
package setup

import (
	"context"
	"flag"
	"fmt"
	"log/slog"
	"net"
	"net/netip"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/coordinator"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/riakstore"
)

// DefaultData is the data directory when neither --data nor --store is
// given.
const DefaultData = "./archive"

// File names inside a data directory.
const (
	MessagesFile = "messages.db"
	RunsFile     = "runs.db"
)

// StoreFlags select the store: --data DIR (the embedded bbolt store
// DIR/messages.db) or --store URL (bolt:PATH or
// riak://host:port[,host:port...][/ARCHIVE]).
type StoreFlags struct {
	Data  string
	Store string
}

// AddFlags registers --data and --store.
func (f *StoreFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Data, "data", DefaultData, "data directory: the embedded store DIR/messages.db and local run authority DIR/runs.db")
	fs.StringVar(&f.Store, "store", "", "store URL instead of --data's: bolt:PATH or riak://host:port[,host:port...][/ARCHIVE]")
}

// Env returns the environment fallbacks of the flags.
func (f *StoreFlags) Env() map[string]string {
	return map[string]string{"data": "CHIBRARY_DATA", "store": "CHIBRARY_STORE"}
}

// Open opens the selected store.
func (f *StoreFlags) Open(ctx context.Context, log *slog.Logger) (store.Store, error) {
	u := f.Store
	if u == "" {
		u = "bolt:" + filepath.Join(f.Data, MessagesFile)
	}
	return OpenStore(ctx, u, log)
}

// StoreURL is a parsed store URL.
type StoreURL struct {
	// Bolt is the bbolt file of a bolt: URL.
	Bolt string
	// Riak are the host:port addresses of a riak:// URL.
	Riak []string
	// Archive names the archive in the Riak cluster (riakstore.Options.Archive).
	Archive string
}

// ParseStoreURL reads bolt:PATH (or bolt://PATH) and
// riak://host[:port][,host[:port]...][/ARCHIVE] (port 8087 by default;
// ARCHIVE is [a-z0-9_-]+, riakstore.DefaultArchive by default).
func ParseStoreURL(url string) (StoreURL, error) {
	switch {
	case strings.HasPrefix(url, "bolt:"):
		path := strings.TrimPrefix(strings.TrimPrefix(url, "bolt:"), "//")
		if path == "" {
			return StoreURL{}, cli.Usagef("store URL %q has no path", url)
		}
		return StoreURL{Bolt: path}, nil
	case strings.HasPrefix(url, "riak://"):
		hosts, archive, _ := strings.Cut(strings.TrimPrefix(url, "riak://"), "/")
		if archive == "" {
			archive = riakstore.DefaultArchive
		}
		if err := riakstore.ValidArchive(archive); err != nil {
			return StoreURL{}, cli.Usagef("store URL %q: archive name %q: want 1 to 64 of a-z, 0-9, _ and - after the nodes, as in riak://host:8087/%s", url, archive, riakstore.DefaultArchive)
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
				return StoreURL{}, cli.Usagef("store URL %q: bad Riak node %q (want host:port)", url, n)
			}
			if p, err := strconv.Atoi(port); err != nil || p < 1 || p > 65535 {
				return StoreURL{}, cli.Usagef("store URL %q: bad port in %q", url, n)
			}
			nodes = append(nodes, net.JoinHostPort(host, port))
		}
		if len(nodes) == 0 {
			return StoreURL{}, cli.Usagef("store URL %q names no Riak node", url)
		}
		return StoreURL{Riak: nodes, Archive: archive}, nil
	}
	return StoreURL{}, cli.Usagef("store URL %q: want bolt:PATH or riak://host:port[,host:port...][/ARCHIVE]", url)
}

// validHost accepts an IP address or a DNS name (letters, digits, '-',
// '_' and '.').
func validHost(h string) bool {
	if _, err := netip.ParseAddr(h); err == nil {
		return true
	}
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
	if u.Bolt != "" {
		return boltstore.Open(ctx, u.Bolt, boltstore.Options{Logger: log})
	}
	return riakstore.Open(ctx, riakstore.Options{Nodes: u.Riak, Archive: u.Archive, Logger: log})
}

// RunFlags select the run authority: a coordinator (--coordinator URL with
// --token-file or $CHIBRARY_TOKEN), or the local authority DATA/runs.db.
type RunFlags struct {
	Coordinator string
	TokenFile   string
	Note        string
	// Scheme is the shuffle scheme of a local authority created now.
	Scheme string
}

// AddFlags registers --coordinator, --token-file and --note.
func (f *RunFlags) AddFlags(fs *flag.FlagSet) {
	fs.StringVar(&f.Coordinator, "coordinator", "", "run authority URL (e.g. http://coord:7070); without it, the local authority DATA/runs.db")
	fs.StringVar(&f.TokenFile, "token-file", "", "file holding the coordinator's bearer token ($CHIBRARY_TOKEN holds the token itself)")
	fs.StringVar(&f.Note, "note", "", "note recorded with every run this process takes")
	fs.StringVar(&f.Scheme, "scheme", "", "call-number shuffle, bits or mix, of the local authority DATA/runs.db if it is created now\n(default bits; an existing authority keeps its own; a coordinator's is chosen with coordinator --scheme)")
}

// Env returns the environment fallbacks of the flags.
func (f *RunFlags) Env() map[string]string {
	return map[string]string{"coordinator": "CHIBRARY_COORDINATOR", "token-file": "CHIBRARY_TOKEN_FILE", "scheme": "CHIBRARY_SCHEME"}
}

// Source returns the run source the flags select. dataDir is where the
// local authority lives (its runs.db); program names the caller in lease
// records.
func (f *RunFlags) Source(ctx context.Context, dataDir, program string, log *slog.Logger) (callnumber.RunSource, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	holder := authority.Holder{Program: program, Host: cli.Hostname(), PID: os.Getpid(), Note: f.Note}
	if f.Coordinator == "" {
		if dataDir == "" {
			return nil, cli.Usagef("without --coordinator, the local run authority needs --data")
		}
		var scheme shuffle.Scheme
		if f.Scheme != "" {
			var err error
			if scheme, err = shuffle.ParseScheme(f.Scheme); err != nil {
				return nil, cli.Usagef("--scheme: %v", err)
			}
		}
		local := authority.NewLocal(filepath.Join(dataDir, RunsFile), holder, authority.LocalOptions{Scheme: scheme})
		if scheme == "" {
			return local, nil
		}
		// An existing authority keeps its scheme: say so rather than
		// leave the user believing --scheme took effect.
		var once sync.Once
		return callnumber.RunSourceFunc(func(ctx context.Context) (callnumber.Lease, error) {
			l, err := local.NewRun(ctx)
			if err == nil && l.Scheme != scheme {
				once.Do(func() {
					log.Warn("--scheme ignored: the local authority already exists with another scheme", "path", filepath.Join(dataDir, RunsFile), "scheme", l.Scheme, "requested", scheme)
				})
			}
			return l, err
		}), nil
	}
	if f.Scheme != "" {
		return nil, cli.Usagef("--scheme applies to a local authority; a coordinator's scheme is chosen with coordinator --scheme")
	}
	token := os.Getenv("CHIBRARY_TOKEN")
	if f.TokenFile != "" {
		var err error
		if token, err = cli.ReadSecret(f.TokenFile); err != nil {
			return nil, err
		}
	}
	if token == "" {
		return nil, cli.Usagef("--coordinator needs --token-file or $CHIBRARY_TOKEN")
	}
	// A program that needs a run can only wait for it, so ride out a
	// coordinator restart: about 35 s of retries before giving up.
	c, err := coordinator.NewClient(f.Coordinator, token, holder, coordinator.ClientOptions{
		Logger: log, MaxAttempts: 10, MaxBackoff: 10 * time.Second,
	})
	if err != nil {
		return nil, fmt.Errorf("cannot use coordinator: %w", err)
	}
	return c, nil
}
