package coordinator

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/riakauthority"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/shuffle"
)

// Config is what `coordinator` (serve) runs with; zero values are defaults.
type Config struct {
	// One of DB, the authority's file, or Riak, whose Scheme and Logger are
	// the Config's. Either is created with a new authority if missing.
	DB   string
	Riak *riakauthority.Options
	// Listen defaults to DefaultListen; port 0 picks a free port.
	Listen string
	// TokenFile holds the bearer token, created (random, mode 0600) if
	// missing; a file readable by group or others is refused. Token is
	// used when TokenFile is "".
	TokenFile string
	Token     string
	// Scheme of a new authority; "" means authority.DefaultScheme. If an
	// existing one has another, Serve fails with authority.ErrScheme.
	Scheme          shuffle.Scheme
	TLSCert, TLSKey string        // both or neither
	ShutdownTimeout time.Duration // for in-flight requests; 0 means 30 seconds
	// LockTimeout is how long to wait for a local allocator to release
	// the database at start-up; 0 means 10 seconds.
	LockTimeout time.Duration
	Logger      *slog.Logger        // nil discards
	Ready       func(addr net.Addr) // if not nil, called once accepting
}

// DefaultListen is loopback only, so that exposing the coordinator is a
// decision.
const DefaultListen = "127.0.0.1:7070"

// Serve runs the coordinator until ctx ends, then lets in-flight requests
// finish before closing the database. It listens first, so that a port in
// use fails before anything is created.
func Serve(ctx context.Context, cfg Config) (err error) {
	log := cfg.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if (cfg.DB == "") == (cfg.Riak == nil) {
		return errors.New("cannot serve: want one run authority (--db or --authority)")
	}
	if (cfg.TLSCert == "") != (cfg.TLSKey == "") {
		return errors.New("cannot serve: give both --tls-cert and --tls-key, or neither")
	}
	if cfg.Listen == "" {
		cfg.Listen = DefaultListen
	}
	if cfg.ShutdownTimeout <= 0 {
		cfg.ShutdownTimeout = 30 * time.Second
	}
	if cfg.Scheme != "" {
		if _, err := shuffle.ParseScheme(string(cfg.Scheme)); err != nil {
			return fmt.Errorf("cannot serve: %w", err)
		}
	}

	var tlsConfig *tls.Config
	if cfg.TLSCert != "" {
		cert, err := tls.LoadX509KeyPair(cfg.TLSCert, cfg.TLSKey)
		if err != nil {
			return fmt.Errorf("cannot load the TLS certificate: %w", err)
		}
		tlsConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("cannot listen: %w", err)
	}
	defer ln.Close() // if anything fails before serving; Serve closes it otherwise

	token := cfg.Token
	if cfg.TokenFile != "" {
		var created bool
		token, created, err = EnsureToken(cfg.TokenFile)
		if err != nil {
			return err
		}
		if created {
			log.Info("created a token file", "path", cfg.TokenFile)
		}
	}
	if token == "" {
		return errors.New("cannot serve: no token (--token-file or $CHIBRARY_TOKEN)")
	}
	if err := CheckToken(token); err != nil {
		if cfg.TokenFile != "" {
			return fmt.Errorf("cannot serve: the token in %s: %w", cfg.TokenFile, err)
		}
		return fmt.Errorf("cannot serve: the token of $CHIBRARY_TOKEN: %w", err)
	}

	a, where, err := openAuthority(ctx, cfg, log)
	if err != nil {
		return err
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	next, err := a.NextRun(ctx)
	if err != nil {
		return err
	}

	handler, err := NewServer(a, ServerOptions{Token: token, Logger: log})
	if err != nil {
		return err
	}
	scheme := "http"
	if tlsConfig != nil {
		ln = tls.NewListener(ln, tlsConfig)
		scheme = "https"
	}
	srv := &http.Server{
		Handler:           handler,
		ReadHeaderTimeout: 5 * time.Second,
		ReadTimeout:       30 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       2 * time.Minute,
		MaxHeaderBytes:    16 << 10,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelWarn),
	}
	log.Info("listening", "addr", ln.Addr().String(), "url", scheme+"://"+ln.Addr().String(),
		"where", where, "authority", a.ID(), "scheme", a.Scheme(), "next_run", next)
	if cfg.Ready != nil {
		cfg.Ready(ln.Addr())
	}
	if err := httpserve.Serve(ctx, srv, ln, cfg.ShutdownTimeout, log); err != nil {
		return err
	}
	log.Info("stopped; closing the authority")
	return nil
}

// openAuthority opens (or creates) the authority cfg names, and says where.
func openAuthority(ctx context.Context, cfg Config, log *slog.Logger) (authority.Issuer, string, error) {
	if cfg.Riak != nil {
		opts := *cfg.Riak
		opts.Scheme, opts.Logger = cfg.Scheme, log
		a, _, err := riakauthority.OpenOrCreate(ctx, opts)
		if err != nil {
			return nil, "", err
		}
		return a, a.URL(), nil
	}
	a, created, err := authority.OpenOrCreate(ctx, cfg.DB, authority.Options{Scheme: cfg.Scheme, LockTimeout: cfg.LockTimeout})
	if err != nil {
		if errors.Is(err, authority.ErrLocked) {
			return nil, "", fmt.Errorf("%w (another coordinator on this file, or a long local allocation?)", err)
		}
		return nil, "", err
	}
	if to := a.MovedTo(); to != "" {
		a.Close()
		return nil, "", fmt.Errorf("cannot serve: %w", authority.RetiredError(cfg.DB, to))
	}
	if created {
		log.Info("created a new run authority", "db", cfg.DB, "authority", a.ID(), "scheme", a.Scheme())
	}
	return a, "bolt:" + cfg.DB, nil
}

// ErrTokenFileMode: the token file is open to group or others.
var ErrTokenFileMode = errors.New("coordinator: the token file is readable by group or others")

// EnsureToken returns the token in path, first creating the file with a
// random token if it does not exist. A file open to group or others is
// refused with ErrTokenFileMode.
func EnsureToken(path string) (token string, created bool, err error) {
	var b [32]byte
	if _, err := rand.Read(b[:]); err != nil {
		return "", false, fmt.Errorf("cannot make a token: %w", err)
	}
	f, err := os.OpenFile(path, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	switch {
	case errors.Is(err, fs.ErrExist):
		fi, err := os.Stat(path)
		if err != nil {
			return "", false, fmt.Errorf("cannot read the token file: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			return "", false, fmt.Errorf("%w: %s has mode %04o, so others on this machine can read the token: run chmod 600 %s", ErrTokenFileMode, path, perm, path)
		}
		token, err := cli.ReadSecret(path)
		return token, false, err
	case err != nil:
		return "", false, fmt.Errorf("cannot create the token file: %w", err)
	}
	token = hex.EncodeToString(b[:])
	_, err = io.WriteString(f, token+"\n")
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		os.Remove(path)
		return "", false, fmt.Errorf("cannot write the token file: %w", err)
	}
	return token, true, nil
}

// BackupFile writes a consistent copy of the authority at db to out; while
// a coordinator holds the file, back up through it instead.
func BackupFile(ctx context.Context, db, out string, lockTimeout time.Duration) (id string, err error) {
	a, err := authority.Open(ctx, db, authority.Options{ReadOnly: true, LockTimeout: lockTimeout})
	if err != nil {
		if errors.Is(err, authority.ErrLocked) {
			return "", fmt.Errorf("%w; if a coordinator is serving it, back up through it with --coordinator URL", err)
		}
		return "", err
	}
	defer a.Close()
	err = SaveBackup(ctx, out, a.ID(), func(w io.Writer) error {
		_, err := a.WriteTo(w)
		return err
	})
	return a.ID(), err
}

// SaveBackup writes a backup to out atomically, and only if it opens as the
// authority wantID (any if "").
func SaveBackup(ctx context.Context, out, wantID string, write func(io.Writer) error) error {
	dir := filepath.Dir(out)
	f, err := os.CreateTemp(dir, "."+filepath.Base(out)+".tmp-*")
	if err != nil {
		return fmt.Errorf("cannot write the backup: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	err = f.Chmod(authority.FileMode)
	if err == nil {
		err = write(f)
	}
	if err == nil {
		err = f.Sync()
	}
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot write the backup: %w", err)
	}
	check, err := authority.Open(ctx, tmp, authority.Options{ReadOnly: true})
	if err != nil {
		return fmt.Errorf("the backup does not open: %w", err)
	}
	id := check.ID()
	check.Close()
	if wantID != "" && id != wantID {
		return fmt.Errorf("the backup is of authority %s, want %s", id, wantID)
	}
	if err := os.Rename(tmp, out); err != nil {
		return fmt.Errorf("cannot write the backup: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// BumpFile moves the next run of the authority at db forward to `to` and
// returns the one before. The coordinator must be stopped.
func BumpFile(ctx context.Context, db string, to uint64) (from uint64, err error) {
	a, err := authority.Open(ctx, db, authority.Options{LockTimeout: 2 * time.Second})
	if err != nil {
		if errors.Is(err, authority.ErrLocked) {
			return 0, fmt.Errorf("%w; stop the coordinator before bumping", err)
		}
		return 0, err
	}
	defer func() {
		if cerr := a.Close(); err == nil && cerr != nil {
			err = cerr
		}
	}()
	if from, err = a.NextRun(ctx); err != nil {
		return 0, err
	}
	return from, a.Bump(ctx, to)
}
