// Package imapserve serves an archive read-only over IMAP (RFC 3501,
// IMAP4rev1, with IDLE, RFC 2177), on go-imap v2's imapserver: every list
// of the catalog is a mailbox named as the list, and anyone may log in
// with any user name and password, or AUTHENTICATE ANONYMOUS (RFC 4505).
//
// A message's UID is its number in its list (catalog/numbers.go): it
// survives restarts, `resolver reindex` and schema changes, and
// UIDVALIDITY changes only when the catalog is lost. A message that
// leaves a list (removed, moved) is expunged from the sessions that have
// the mailbox selected; one that comes into it gets a UID above every UID
// the mailbox had. The server polls the catalog for such changes
// (Options.PollInterval), so that it sees those of a catalog another
// process writes too, and tells selected and idling clients (EXISTS,
// EXPUNGE).
//
// Messages are sent as the store keeps them with CRLF line ends
// (package mailwire): the digest of what a client receives is the stored
// message's. FETCH and SEARCH go through the selected messages a chunk at
// a time, so a FETCH 1:* of a list of any size holds one chunk's
// catalog rows and one message in memory, never the whole list.
//
// Nothing can be changed: COPY, MOVE, APPEND, CREATE, DELETE, RENAME and
// UNSUBSCRIBE answer NO, and so does a STORE of \Deleted; EXPUNGE and
// CLOSE have nothing to expunge; SUBSCRIBE is accepted, every mailbox
// being subscribed. Other flags (\Seen...) are kept for the session only,
// as RFC 3501 section 7.1 allows for flags outside PERMANENTFLAGS, which
// is empty: clients that mark what they fetched (fetchmail) need STORE to
// succeed. SELECT's tagged answer says READ-WRITE, as go-imap
// v2.0.0-beta.8 always writes it; EXAMINE says READ-ONLY.
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

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/store"
)

// Defaults of Options.
const (
	DefaultPollInterval  = 250 * time.Millisecond
	DefaultSearchTimeout = 60 * time.Second
)

// Options configure a Server. The zero value: no logs, no metrics, no
// TLS, netserve's default limits, and the defaults above.
type Options struct {
	// Logger receives a line per session and the errors. nil discards
	// them. Passwords and IMAP traffic are never logged.
	Logger *slog.Logger
	// Registerer, if set, receives the server's metrics (chibrary_imap_*).
	Registerer prometheus.Registerer
	// TLS, if set, is offered with STARTTLS on plain listeners and used
	// by implicit-TLS ones. Without it a plain listener that is not on
	// loopback lets clients log in in plain text.
	TLS *tls.Config
	// Limits bound the connections of each listener and their idle time
	// (netserve.Options; its TLS, Refuse and Metrics are set here).
	Limits netserve.Options
	// PollInterval is how often the catalog is read for new and removed
	// messages; 0 means DefaultPollInterval.
	PollInterval time.Duration
	// SearchTimeout bounds one SEARCH that must read messages from the
	// store (a header other than Subject, From and Message-ID); it then
	// answers NO [LIMIT]. 0 means DefaultSearchTimeout.
	SearchTimeout time.Duration
}

// Server serves one archive over IMAP. It is safe for concurrent use.
type Server struct {
	cat  *catalog.Catalog
	st   store.Store
	opts Options
	log  *slog.Logger
	m    *metrics
	hub  *hub
}

type metrics struct {
	conns    *netserve.Metrics
	commands *prometheus.CounterVec
	messages prometheus.Counter
}

// New returns a server of the catalog c and the store st, which the
// caller keeps open while it serves.
func New(c *catalog.Catalog, st store.Store, opts Options) (*Server, error) {
	if c == nil || st == nil {
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
	return &Server{cat: c, st: st, opts: opts, log: log, m: m, hub: newHub(c, opts.PollInterval, log)}, nil
}

// Listener is a listening socket and how it speaks.
type Listener struct {
	net.Listener
	// TLS: implicit TLS (IMAPS, port 993) with Options.TLS.
	TLS bool
}

// Serve serves IMAP on the listeners until ctx is done, then closes
// them and every connection, and waits for the sessions to end. It
// returns the first error that stopped a listener.
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
