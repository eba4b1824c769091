// Package imapserve serves an archive read-only over IMAP (RFC 3501, with
// IDLE, RFC 2177) on go-imap v2's imapserver: every list of the catalog is a
// mailbox, and anyone may log in with any password or AUTHENTICATE
// ANONYMOUS (RFC 4505).
//
// A message's UID is its number in its list (catalog/numbers.go), so that it
// survives restarts and reindexing; UIDVALIDITY changes only when the
// catalog is lost. The server reads the catalog its keeper serves now
// (package catalog/keeper), one command at a time: after a rebuild a
// session goes on under the same UIDVALIDITY when the numbers were
// carried over, and is told to select again when they were not. It polls
// the catalog, which another process may write, and tells selected and
// idling clients of messages that came (EXISTS) or left (EXPUNGE). Messages are sent as stored (package
// mailwire), a chunk of catalog rows and one message in memory at a time;
// a large message, and a part of one, from a file its readers share
// (package spool), so that slow readers cost disk, not memory.
//
// Nothing can be changed: writes answer NO. Flags other than \Deleted are
// kept for the session only, as RFC 3501 section 7.1 allows with an empty
// PERMANENTFLAGS, since clients that mark what they fetched (fetchmail) need
// STORE to succeed. SELECT's tagged answer says READ-WRITE, as go-imap
// v2.0.0-beta.8 always writes it.
package imapserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/spool"
	"github.com/chibrary/chibrary/store"
)

// Defaults of Options.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultSearchTimeout = 60 * time.Second
)

// Options configure a Server; zero values are defaults.
type Options struct {
	Logger     *slog.Logger // nil discards; never passwords nor IMAP traffic
	Registerer prometheus.Registerer
	// TLS is offered with STARTTLS on plain listeners. Without it, a plain
	// listener not on loopback lets clients log in in plain text.
	TLS *tls.Config
	// Limits of each listener (its TLS, Refuse and Metrics are set here).
	Limits       netserve.Options
	PollInterval time.Duration // of the catalog
	// SearchTimeout bounds a SEARCH that must read messages from the store;
	// it then answers NO [LIMIT].
	SearchTimeout time.Duration
	// SpoolDir holds the large messages being sent (see spoolThreshold);
	// "" is the system's temporary directory.
	SpoolDir string
}

// Server serves one archive over IMAP. It is safe for concurrent use.
type Server struct {
	cats *keeper.Keeper
	st   store.Store
	opts Options
	log  *slog.Logger
	m    *metrics
	hub  *hub
	// spools are the large messages being sent, shared by the sessions:
	// those over spoolAbove bytes (spoolThreshold but in tests).
	spools     *spool.Spools
	spoolAbove int64
}

type metrics struct {
	conns    *netserve.Metrics
	commands *prometheus.CounterVec
	messages prometheus.Counter
}

// New returns a server of the catalog that k keeps and of st, which the
// caller keeps open (and k running) while it serves.
func New(k *keeper.Keeper, st store.Store, opts Options) (*Server, error) {
	if k == nil || st == nil {
		return nil, errors.New("imapserve: a catalog and a store are needed")
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.PollInterval <= 0 {
		opts.PollInterval = DefaultPollInterval
	}
	if opts.SearchTimeout <= 0 {
		opts.SearchTimeout = DefaultSearchTimeout
	}
	conns, err := netserve.NewMetrics("chibrary_imap", opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &metrics{
		conns: conns,
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chibrary_imap_commands_total",
			Help: "IMAP commands answered, by command and result (ok, no, error).",
		}, []string{"command", "result"}),
		messages: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chibrary_imap_fetched_messages_total",
			Help: "FETCH responses sent, one per message.",
		}),
	}
	if opts.Registerer != nil {
		for _, col := range []prometheus.Collector{m.commands, m.messages} {
			if err := opts.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("cannot register the IMAP metrics: %w", err)
			}
		}
	}
	log := opts.Logger.With("protocol", "imap")
	return &Server{cats: k, st: st, opts: opts, log: log, m: m, hub: newHub(k, opts.PollInterval, log),
		spools: spool.New(spool.Options{Dir: opts.SpoolDir}), spoolAbove: spoolThreshold}, nil
}

// Listener is a listening socket and how it speaks.
type Listener struct {
	net.Listener
	TLS bool // implicit (IMAPS)
}

// Serve serves IMAP on the listeners until ctx is done, then closes every
// connection and waits for the sessions to end. A server serves once.
func (s *Server) Serve(ctx context.Context, listeners ...Listener) error {
	for _, l := range listeners {
		if l.TLS && s.opts.TLS == nil {
			return fmt.Errorf("cannot serve IMAP with TLS on %s: no certificate", l.Addr())
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	wg.Go(func() { s.hub.run(ctx) })
	errs := make(chan error, len(listeners))
	for _, l := range listeners {
		wg.Go(func() {
			err := s.serve(ctx, l)
			if err != nil {
				cancel()
			}
			errs <- err
		})
	}
	var first error
	for range listeners {
		if err := <-errs; err != nil && first == nil {
			first = err
		}
	}
	cancel()
	wg.Wait()
	s.spools.Close()
	return first
}

func (s *Server) serve(ctx context.Context, l Listener) error {
	limits := s.opts.Limits
	limits.Metrics = s.m.conns
	limits.TLS = nil
	if l.TLS {
		limits.TLS = s.opts.TLS
	}
	limits.Refuse = func(c net.Conn, reason string) {
		fmt.Fprintf(c, "* BYE %s\r\n", reason)
	}
	ln := netserve.Listen(l.Listener, limits)
	addr := l.Addr().String()
	// Logging in in plain text is allowed where it never leaves the
	// machine, and where there is no TLS to offer instead.
	insecure := netserve.Loopback(addr) || s.opts.TLS == nil
	var sessions sync.WaitGroup
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(conn *imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			sessions.Add(1)
			return s.newSession(ctx, conn, &sessions), nil, nil
		},
		Caps: imap.CapSet{
			imap.CapIMAP4rev1: {},
			imap.CapNamespace: {},
			imap.CapESearch:   {},
		},
		Logger:       printfLogger{s.log},
		TLSConfig:    s.opts.TLS,
		InsecureAuth: insecure,
	})
	s.log.Info("serving IMAP", "addr", addr, "tls", l.TLS, "starttls", !l.TLS && s.opts.TLS != nil, "plain_login", insecure && !l.TLS)
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	var err error
	select {
	case <-ctx.Done():
		srv.Close()
		<-done // what it returns once closed is no error
	case err = <-done:
		srv.Close()
	}
	sessions.Wait()
	if err != nil && !errors.Is(err, net.ErrClosed) {
		return fmt.Errorf("cannot serve IMAP on %s: %w", addr, err)
	}
	return nil
}

// printfLogger gives imapserver's Printf logs to slog.
type printfLogger struct{ log *slog.Logger }

func (l printfLogger) Printf(format string, args ...any) {
	l.log.Warn(fmt.Sprintf(format, args...))
}
