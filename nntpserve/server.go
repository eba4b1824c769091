// Package nntpserve serves an archive read-only over NNTP (RFC 3977,
// reader commands; STARTTLS, RFC 4642): every list of the catalog is the
// newsgroup PREFIX.LIST, and a message's article number is its number in
// its list (catalog/numbers.go), the IMAP UID: it survives restarts and
// `resolver reindex`, and a message that leaves a list leaves a gap.
//
// Commands: CAPABILITIES, MODE READER, LIST (ACTIVE, NEWSGROUPS,
// OVERVIEW.FMT, HEADERS), GROUP, LISTGROUP, LAST, NEXT, ARTICLE, HEAD,
// BODY and STAT by number and by message-id, OVER and XOVER, HDR and
// XHDR, NEWNEWS, NEWGROUPS, DATE, HELP, AUTHINFO (any user and password
// are accepted), STARTTLS, QUIT. POST answers 440 and IHAVE 435: nothing
// can be posted.
//
// An article is the stored message with CRLF line ends (package
// mailwire), dot-stuffed as it is written; a large one is sent from a
// file its readers share (package spool), so that slow readers cost disk,
// not memory. The overview comes from the catalog, without
// reading messages: Subject and From decoded by the catalog and encoded
// again (RFC 2047) where they are not ASCII, the Date as the catalog
// dates the message, in UTC. HDR of another header reads the messages.
//
// Against hostile clients: a command line is at most 512 octets (RFC
// 3977 section 3.1), longer ends the connection; the limits of
// netserve bound connections, the wait for the first command and idle
// time; long answers (OVER 1-,
// LISTGROUP, NEWNEWS) are read from the catalog a chunk at a time and
// streamed.
package nntpserve

import (
	"bufio"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/spool"
	"github.com/chibrary/chibrary/store"
)

// DefaultPrefix is the newsgroups' prefix: chibrary.LIST.
const DefaultPrefix = "chibrary"

// writeTimeout bounds one write of an answer to a client that does not
// read.
const writeTimeout = 60 * time.Second

// Options configure a Server. The zero value: the default prefix, no
// logs, no metrics, no TLS, netserve's default limits.
type Options struct {
	// Prefix names the newsgroups PREFIX.LIST; "" means DefaultPrefix.
	// It is dot-separated words of [a-z0-9_+-].
	Prefix string
	// Logger receives a line per connection and the errors. nil
	// discards them. NNTP traffic is never logged.
	Logger *slog.Logger
	// Registerer, if set, receives the metrics (chibrary_nntp_*).
	Registerer prometheus.Registerer
	// TLS, if set, is offered with STARTTLS on plain listeners and used
	// by implicit-TLS ones.
	TLS *tls.Config
	// Limits bound the connections of each listener and their idle time
	// (netserve.Options; its TLS, Refuse and Metrics are set here).
	Limits netserve.Options
	// Host names the server in its greeting; "" is "chibrary".
	Host string
	// SpoolDir holds the large articles being sent (see spoolThreshold);
	// "" is the system's temporary directory.
	SpoolDir string
}

// Server serves one archive over NNTP. It is safe for concurrent use.
type Server struct {
	cats *keeper.Keeper
	st   store.Store
	opts Options
	log  *slog.Logger
	m    *metrics
	// spools are the large articles being sent, shared by the
	// connections: those over spoolAbove bytes (spoolThreshold but in
	// tests).
	spools     *spool.Spools
	spoolAbove int64
	readers    sync.Pool // *bufio.Reader, of articles being sent
}

type metrics struct {
	conns    *netserve.Metrics
	commands *prometheus.CounterVec
	articles prometheus.Counter
}

// New returns a server of the catalog that k keeps and of the store st,
// which the caller keeps open (and k running) while it serves.
func New(k *keeper.Keeper, st store.Store, opts Options) (*Server, error) {
	if k == nil || st == nil {
		return nil, errors.New("nntpserve: a catalog and a store are needed")
	}
	if opts.Prefix == "" {
		opts.Prefix = DefaultPrefix
	}
	if !ValidPrefix(opts.Prefix) {
		return nil, fmt.Errorf("nntpserve: bad newsgroup prefix %q: dot-separated words of a-z, 0-9, _, + and -", opts.Prefix)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Host == "" {
		opts.Host = "chibrary"
	}
	conns, err := netserve.NewMetrics("chibrary_nntp", opts.Registerer)
	if err != nil {
		return nil, err
	}
	m := &metrics{
		conns: conns,
		commands: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "chibrary_nntp_commands_total",
			Help: "NNTP commands answered, by command and the class of the answer (2xx, 4xx, 5xx).",
		}, []string{"command", "result"}),
		articles: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "chibrary_nntp_articles_total",
			Help: "Articles sent whole or in part (ARTICLE, HEAD, BODY).",
		}),
	}
	if opts.Registerer != nil {
		for _, col := range []prometheus.Collector{m.commands, m.articles} {
			if err := opts.Registerer.Register(col); err != nil {
				return nil, fmt.Errorf("cannot register the NNTP metrics: %w", err)
			}
		}
	}
	return &Server{cats: k, st: st, opts: opts, log: opts.Logger.With("protocol", "nntp"), m: m,
		spools: spool.New(spool.Options{Dir: opts.SpoolDir}), spoolAbove: spoolThreshold,
		readers: sync.Pool{New: func() any { return bufio.NewReaderSize(nil, 32<<10) }}}, nil
}

// ValidPrefix reports whether p can prefix newsgroup names: words of
// lower-case letters, digits, "_", "+" and "-", joined by dots (RFC 3977
// section 4.1's group names, without the characters a wildmat reads).
func ValidPrefix(p string) bool {
	if p == "" || len(p) > 64 {
		return false
	}
	for _, w := range strings.Split(p, ".") {
		if w == "" {
			return false
		}
		for i := 0; i < len(w); i++ {
			c := w[i]
			if !(c >= 'a' && c <= 'z' || c >= '0' && c <= '9' || c == '_' || c == '+' || c == '-') {
				return false
			}
		}
	}
	return true
}

// Listener is a listening socket and how it speaks.
type Listener struct {
	net.Listener
	// TLS: implicit TLS (NNTPS, port 563) with Options.TLS.
	TLS bool
}

// Serve serves NNTP on the listeners until ctx is done, then closes them
// and every connection, and waits for their handlers. It returns the
// first error that stopped a listener.
func (s *Server) Serve(ctx context.Context, listeners ...Listener) error {
	for _, l := range listeners {
		if l.TLS && s.opts.TLS == nil {
			return fmt.Errorf("cannot serve NNTP with TLS on %s: no certificate", l.Addr())
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errs := make(chan error, len(listeners))
	var wg sync.WaitGroup
	for _, l := range listeners {
		wg.Go(func() {
			limits := s.opts.Limits
			limits.Metrics = s.m.conns
			limits.TLS = nil
			if l.TLS {
				limits.TLS = s.opts.TLS
			}
			limits.Refuse = func(c net.Conn, reason string) {
				fmt.Fprintf(c, "400 %s\r\n", reason)
			}
			ln := netserve.Listen(l.Listener, limits)
			s.log.Info("serving NNTP", "addr", l.Addr().String(), "tls", l.TLS, "starttls", !l.TLS && s.opts.TLS != nil, "prefix", s.opts.Prefix)
			err := netserve.Serve(ctx, ln, s.log, func(ctx context.Context, c net.Conn) {
				s.handle(ctx, c, l.TLS)
			})
			if err != nil {
				err = fmt.Errorf("cannot serve NNTP on %s: %w", l.Addr(), err)
				cancel()
			}
			errs <- err
		})
	}
	wg.Wait()
	s.spools.Close()
	close(errs)
	for err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// conn is one client's connection and state.
type conn struct {
	s   *Server
	ctx context.Context
	c   net.Conn
	br  *bufio.Reader
	bw  *bufio.Writer
	tls bool
	// group is the selected group's list ("" for none), article the
	// current article number (0 for none).
	group   string
	article uint32
	lines   int // command lines read
	// cat is the catalog the command running reads (dispatch).
	cat *catalog.Catalog
}

func (s *Server) handle(ctx context.Context, c net.Conn, isTLS bool) {
	defer c.Close()
	cn := &conn{s: s, ctx: ctx, tls: isTLS}
	cn.attach(c)
	cn.reply(201, "%s archive server ready, posting not permitted", s.opts.Host)
	if cn.flush() != nil {
		return
	}
	for {
		line, err := cn.readLine()
		if err != nil {
			if errors.Is(err, errSyntax) {
				cn.reply(501, "command line too long")
				cn.flush()
			}
			return
		}
		cmd, err := parseCommand(line)
		if err != nil {
			cn.reply(501, "syntax error")
			if cn.flush() != nil {
				return
			}
			continue
		}
		quit, err := cn.dispatch(cmd)
		if err == nil {
			err = cn.flush()
		}
		if quit || err != nil {
			return
		}
	}
}

// readLine reads a command line, waiting at most the idle timeout
// (netserve brings the read deadline in to it), or for the first line the
// first-read deadline netserve set; a line longer than MaxLine is
// errSyntax.
func (cn *conn) readLine() (string, error) {
	if cn.lines++; cn.lines > 1 {
		cn.c.SetReadDeadline(time.Time{})
	}
	line, err := cn.br.ReadSlice('\n')
	if errors.Is(err, bufio.ErrBufferFull) {
		return "", errSyntax
	}
	if err != nil {
		return "", err
	}
	return strings.TrimRight(string(line), "\r\n"), nil
}

// reply writes a status line.
func (cn *conn) reply(code int, format string, args ...any) {
	fmt.Fprintf(cn.bw, "%03d %s\r\n", code, fmt.Sprintf(format, args...))
}

// flush sends what was written.
func (cn *conn) flush() error { return cn.bw.Flush() }

// attach reads and writes c from now on (a new connection, or one that
// started TLS).
func (cn *conn) attach(c net.Conn) {
	cn.c = c
	cn.br = bufio.NewReaderSize(c, MaxLine)
	cn.bw = bufio.NewWriterSize(deadlineWriter{c}, 64<<10)
}

// deadlineWriter gives every write writeTimeout: a client that stops
// reading loses its connection, one that reads a long answer slowly
// does not.
type deadlineWriter struct{ c net.Conn }

func (w deadlineWriter) Write(p []byte) (int, error) {
	w.c.SetWriteDeadline(time.Now().Add(writeTimeout))
	return w.c.Write(p)
}
