// Package netserve holds what the servers of long-lived connections (IMAP,
// NNTP) share against hostile clients: a listener that bounds connections,
// in all and per client address, and whose every read waits at most an
// idle timeout.
package netserve

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Defaults of Options.
const (
	DefaultMaxConns      = 256
	DefaultMaxConnsPerIP = 16
	DefaultIdleTimeout   = 30 * time.Minute
	// DefaultFirstReadTimeout bounds the wait for a connection's first
	// command (its TLS handshake, for implicit TLS), until the server sets
	// a read deadline of its own.
	DefaultFirstReadTimeout = 30 * time.Second
)

// Options configure a Listener; zero values are the defaults above.
type Options struct {
	MaxConns      int // open at once
	MaxConnsPerIP int
	// IdleTimeout bounds every wait for the client: a read deadline set
	// further away, or none, is brought in to it.
	IdleTimeout time.Duration
	// FirstReadTimeout is the read deadline of a new connection.
	FirstReadTimeout time.Duration
	// Refuse, if set, writes the protocol's refusal to a connection over a
	// limit before it is closed.
	Refuse  func(c net.Conn, reason string)
	Metrics *Metrics
	TLS     *tls.Config // implicit TLS on every connection
}

// Metrics are a protocol's connection metrics, named
// NAMESPACE_connections_total{result}, NAMESPACE_connections_open and
// NAMESPACE_sent_bytes_total.
type Metrics struct {
	accepted, refused prometheus.Counter
	open              prometheus.Gauge
	sent              prometheus.Counter
	collectors        []prometheus.Collector
}

// NewMetrics returns the connection metrics of a protocol, registered with
// reg if not nil.
func NewMetrics(namespace string, reg prometheus.Registerer) (*Metrics, error) {
	conns := prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: namespace, Name: "connections_total",
		Help: "Connections accepted, and refused at a limit.",
	}, []string{"result"})
	m := &Metrics{
		accepted: conns.WithLabelValues("accepted"),
		refused:  conns.WithLabelValues("refused"),
		open: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: namespace, Name: "connections_open",
			Help: "Connections open now.",
		}),
		sent: prometheus.NewCounter(prometheus.CounterOpts{
			Namespace: namespace, Name: "sent_bytes_total",
			Help: "Bytes written to clients (before TLS).",
		}),
	}
	m.collectors = []prometheus.Collector{conns, m.open, m.sent}
	if reg != nil {
		for _, c := range m.collectors {
			if err := reg.Register(c); err != nil {
				return nil, fmt.Errorf("cannot register the %s metrics: %w", namespace, err)
			}
		}
	}
	return m, nil
}

// Listener accepts connections within the limits of its Options.
type Listener struct {
	net.Listener
	opts Options

	mu    sync.Mutex
	open  int
	perIP map[string]int
}

// Listen wraps ln.
func Listen(ln net.Listener, opts Options) *Listener {
	if opts.MaxConns <= 0 {
		opts.MaxConns = DefaultMaxConns
	}
	if opts.MaxConnsPerIP <= 0 {
		opts.MaxConnsPerIP = DefaultMaxConnsPerIP
	}
	if opts.IdleTimeout <= 0 {
		opts.IdleTimeout = DefaultIdleTimeout
	}
	if opts.FirstReadTimeout <= 0 {
		opts.FirstReadTimeout = DefaultFirstReadTimeout
	}
	return &Listener{Listener: ln, opts: opts, perIP: map[string]int{}}
}

// Accept returns the next connection within the limits. One over a limit is
// refused in its own goroutine, so that a client that does not read cannot
// hold up the others.
func (l *Listener) Accept() (net.Conn, error) {
	for {
		c, err := l.Listener.Accept()
		if err != nil {
			return nil, err
		}
		ip := hostOf(c.RemoteAddr())
		l.mu.Lock()
		reason := ""
		switch {
		case l.open >= l.opts.MaxConns:
			reason = "too many connections"
		case l.perIP[ip] >= l.opts.MaxConnsPerIP:
			reason = "too many connections from your address"
		default:
			l.open++
			l.perIP[ip]++
		}
		l.mu.Unlock()
		if reason != "" {
			if m := l.opts.Metrics; m != nil {
				m.refused.Inc()
			}
			go func() {
				if l.opts.Refuse != nil {
					c.SetWriteDeadline(time.Now().Add(5 * time.Second))
					l.opts.Refuse(c, reason)
				}
				c.Close()
			}()
			continue
		}
		if m := l.opts.Metrics; m != nil {
			m.accepted.Inc()
			m.open.Inc()
		}
		nc := &Conn{Conn: c, l: l, ip: ip}
		// The TLS handshake and first command come soon or not at all.
		first := time.Now().Add(l.opts.FirstReadTimeout)
		nc.first.Store(first.UnixNano())
		nc.SetReadDeadline(first)
		var conn net.Conn = nc
		if l.opts.TLS != nil {
			conn = tls.Server(conn, l.opts.TLS)
		}
		return conn, nil
	}
}

func (l *Listener) release(ip string) {
	l.mu.Lock()
	l.open--
	if l.perIP[ip]--; l.perIP[ip] <= 0 {
		delete(l.perIP, ip)
	}
	l.mu.Unlock()
	if m := l.opts.Metrics; m != nil {
		m.open.Dec()
	}
}

// Open returns the number of connections open.
func (l *Listener) Open() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.open
}

func hostOf(a net.Addr) string {
	if ta, ok := a.(*net.TCPAddr); ok {
		return ta.IP.String()
	}
	host, _, err := net.SplitHostPort(a.String())
	if err != nil {
		return a.String()
	}
	return host
}

// Conn is an accepted connection: its reads wait at most the idle
// timeout, its write deadline moves with every write, its writes are
// counted, and its Close frees its place.
type Conn struct {
	net.Conn
	l      *Listener
	ip     string
	closed atomic.Bool
	// writeIdle is how long a write may wait (a time.Duration; 0 for no
	// deadline), from the last write deadline set.
	writeIdle atomic.Int64
	// first is the first-read deadline (Unix nanoseconds) until the
	// client has sent a byte, then 0.
	first atomic.Int64
}

// SetReadDeadline sets the read deadline t, or the idle timeout if
// sooner, or, until the client has sent a byte, the first-read deadline
// if sooner still: a protocol's own deadline for its first command
// (go-imap's 30 s, or none) does not replace it.
func (c *Conn) SetReadDeadline(t time.Time) error {
	if lim := time.Now().Add(c.l.opts.IdleTimeout); t.IsZero() || t.After(lim) {
		t = lim
	}
	if f := c.first.Load(); f != 0 && t.UnixNano() > f {
		t = time.Unix(0, f)
	}
	return c.Conn.SetReadDeadline(t)
}

func (c *Conn) Read(p []byte) (int, error) {
	n, err := c.Conn.Read(p)
	if n > 0 && c.first.Load() != 0 {
		c.first.Store(0)
	}
	return n, err
}

// SetWriteDeadline gives every write from now on until t from its
// start: the deadline moves with each write, so that a client reading a
// long answer slowly is never cut off, and one that stops reading is
// after that long. (A server's deadline for a whole answer, such as
// go-imap's 5 minutes for a literal, would cut off a reader who keeps
// reading a large message slowly.)
func (c *Conn) SetWriteDeadline(t time.Time) error {
	if t.IsZero() {
		c.writeIdle.Store(0)
	} else {
		c.writeIdle.Store(max(int64(time.Until(t)), 1))
	}
	return c.Conn.SetWriteDeadline(t)
}

// SetDeadline sets both deadlines, the read one within the idle timeout.
func (c *Conn) SetDeadline(t time.Time) error {
	if err := c.SetWriteDeadline(t); err != nil {
		return err
	}
	return c.SetReadDeadline(t)
}

func (c *Conn) Write(p []byte) (int, error) {
	if d := c.writeIdle.Load(); d > 0 {
		c.Conn.SetWriteDeadline(time.Now().Add(time.Duration(d)))
	}
	n, err := c.Conn.Write(p)
	if m := c.l.opts.Metrics; m != nil {
		m.sent.Add(float64(n))
	}
	return n, err
}

// Close frees the connection's place, once, and closes it: in that order,
// so that a client that sees its connection end and dials again at once
// is not refused for the connection it no longer has.
func (c *Conn) Close() error {
	if !c.closed.Swap(true) {
		c.l.release(c.ip)
	}
	return c.Conn.Close()
}

// Loopback reports whether the host of host:port is loopback or
// localhost, where plain text never leaves the machine.
func Loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Serve runs handle for each connection of l in its own goroutine until ctx
// is done, then closes l and every connection and waits for the handlers.
// handle closes its connection.
func Serve(ctx context.Context, l net.Listener, log *slog.Logger, handle func(context.Context, net.Conn)) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		mu    sync.Mutex
		conns = map[net.Conn]struct{}{}
	)
	stop := context.AfterFunc(ctx, func() {
		l.Close()
		mu.Lock()
		for c := range conns {
			c.Close()
		}
		mu.Unlock()
	})
	defer stop()
	var err error
	var delay time.Duration
	for {
		var c net.Conn
		c, err = l.Accept()
		if err != nil {
			if ctx.Err() != nil || errors.Is(err, net.ErrClosed) {
				err = nil
				break
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				delay = min(max(2*delay, 5*time.Millisecond), time.Second)
				log.Warn("cannot accept a connection", "err", err, "retry_in", delay)
				time.Sleep(delay)
				continue
			}
			break
		}
		delay = 0
		mu.Lock()
		conns[c] = struct{}{}
		mu.Unlock()
		wg.Go(func() {
			defer func() {
				mu.Lock()
				delete(conns, c)
				mu.Unlock()
			}()
			handle(ctx, c)
		})
	}
	cancel()
	wg.Wait()
	if err != nil {
		return fmt.Errorf("cannot accept connections: %w", err)
	}
	return nil
}
