// Package httpserve is the HTTP plumbing the coordinator and the resolver
// share: access log and metrics, graceful serving, and a metrics-only server.
package httpserve

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Options configure a Middleware. The zero value logs nothing and keeps
// no metrics.
type Options struct {
	Logger *slog.Logger // a line per request, at the Level of its status
	// Registerer receives <Namespace>_requests_total{route,code},
	// <Namespace>_request_duration_seconds{route} and, for a server whose
	// ConnState is the Middleware's, <Namespace>_connections_open.
	Registerer prometheus.Registerer
	Namespace  string
	Buckets    []float64 // nil means DefaultBuckets
	// Done, if set, is called after every request, for a server's own
	// metrics.
	Done func(r *http.Request, route string, status int)
}

// Middleware logs every request and records its metrics. A request's route
// is the ServeMux pattern that matched, or "unmatched" so that scanners
// cannot blow up the metrics' cardinality, or set by SetRoute.
type Middleware struct {
	log      *slog.Logger
	requests *prometheus.CounterVec
	duration *prometheus.HistogramVec
	open     prometheus.Gauge
	done     func(*http.Request, string, int)
}

// DefaultBuckets are the duration histogram's buckets, in seconds.
var DefaultBuckets = []float64{.0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// New returns a Middleware, registering its metrics.
func New(opts Options) (*Middleware, error) {
	m := &Middleware{log: opts.Logger, done: opts.Done}
	if m.log == nil {
		m.log = slog.New(slog.DiscardHandler)
	}
	if opts.Registerer == nil {
		return m, nil
	}
	buckets := opts.Buckets
	if buckets == nil {
		buckets = DefaultBuckets
	}
	m.requests = prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: opts.Namespace,
		Name:      "requests_total",
		Help:      "HTTP requests served, by route and status code.",
	}, []string{"route", "code"})
	m.duration = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: opts.Namespace,
		Name:      "request_duration_seconds",
		Help:      "Time to serve an HTTP request, by route.",
		Buckets:   buckets,
	}, []string{"route"})
	m.open = prometheus.NewGauge(prometheus.GaugeOpts{
		Namespace: opts.Namespace,
		Name:      "connections_open",
		Help:      "HTTP connections open now.",
	})
	for _, c := range []prometheus.Collector{m.requests, m.duration, m.open} {
		if err := opts.Registerer.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register HTTP metrics: %w", err)
		}
	}
	return m, nil
}

type recorder struct {
	http.ResponseWriter
	status int
	bytes  int64
	route  string
}

func (r *recorder) WriteHeader(code int) {
	if r.status == 0 {
		r.status = code
	}
	r.ResponseWriter.WriteHeader(code)
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	n, err := r.ResponseWriter.Write(b)
	r.bytes += int64(n)
	return n, err
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (r *recorder) Unwrap() http.ResponseWriter { return r.ResponseWriter }

// SetRoute names the route of a request where the ServeMux pattern is not
// precise enough. Without the Middleware around w it does nothing.
func SetRoute(w http.ResponseWriter, route string) {
	for {
		switch v := w.(type) {
		case *recorder:
			v.route = route
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = v.Unwrap()
		default:
			return
		}
	}
}

// Stream returns w for a response that may take longer than the
// server's WriteTimeout (a bound on the whole response): a large body
// that a slow reader is still reading. Each write through it may block
// for at most idle, so a reader who keeps reading is never cut off and
// one who stops reading for idle is. A handler calls it after its last
// check of the request and writes the body through what it returns;
// where w cannot set deadlines (a test's recorder) writes go to w as
// they are.
func Stream(w http.ResponseWriter, idle time.Duration) http.ResponseWriter {
	sw := &streamWriter{ResponseWriter: w, rc: http.NewResponseController(w), idle: idle}
	sw.extend()
	return sw
}

type streamWriter struct {
	http.ResponseWriter
	rc   *http.ResponseController
	idle time.Duration
}

// extend moves the write deadline to idle from now. Its error (w cannot
// set one) leaves the server's.
func (s *streamWriter) extend() { s.rc.SetWriteDeadline(time.Now().Add(s.idle)) }

// streamChunk is the most written within one deadline.
const streamChunk = 64 << 10

func (s *streamWriter) Write(b []byte) (int, error) {
	n := 0
	for len(b) > 0 {
		s.extend()
		m, err := s.ResponseWriter.Write(b[:min(len(b), streamChunk)])
		n += m
		if err != nil {
			return n, err
		}
		b = b[m:]
	}
	return n, nil
}

func (s *streamWriter) WriteHeader(code int) {
	s.extend()
	s.ResponseWriter.WriteHeader(code)
}

// Flush writes what is buffered, within a deadline of its own.
func (s *streamWriter) Flush() {
	s.extend()
	s.rc.Flush()
}

// Unwrap lets http.ResponseController reach the underlying writer.
func (s *streamWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

// Wrap returns h with the access log and metrics around it.
func (m *Middleware) Wrap(h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &recorder{ResponseWriter: w}
		h.ServeHTTP(rec, r)
		elapsed := time.Since(start)
		if rec.status == 0 {
			rec.status = http.StatusOK
		}
		route := rec.route
		if route == "" {
			route = r.Pattern // set by the ServeMux on r itself
		}
		if route == "" {
			route = "unmatched"
		}
		if m.requests != nil {
			m.requests.WithLabelValues(route, strconv.Itoa(rec.status)).Inc()
			m.duration.WithLabelValues(route).Observe(elapsed.Seconds())
		}
		if m.done != nil {
			m.done(r, route, rec.status)
		}
		attrs := []slog.Attr{
			slog.String("method", r.Method),
			slog.String("path", r.URL.EscapedPath()),
			slog.Int("status", rec.status),
			slog.Int64("bytes", rec.bytes),
			slog.Duration("duration", elapsed),
			slog.String("remote", r.RemoteAddr),
		}
		gone := r.Context().Err() != nil
		if gone {
			attrs = append(attrs, slog.Bool("client_gone", true))
		}
		m.log.LogAttrs(r.Context(), Level(rec.status, gone), "request", attrs...)
	})
}

// Level is the level of a request's log line: Error for a server error,
// Warn for 503 (busy, or an index being built), else Info, and Info too
// when the client went away before the answer (gone): nobody read it.
func Level(status int, gone bool) slog.Level {
	switch {
	case gone || status < 500:
		return slog.LevelInfo
	case status == http.StatusServiceUnavailable:
		return slog.LevelWarn
	}
	return slog.LevelError
}

// ConnState counts the connections open, as an http.Server's ConnState:
// one from StateNew until StateClosed or StateHijacked, however the
// connection ended.
func (m *Middleware) ConnState(_ net.Conn, st http.ConnState) {
	if m.open == nil {
		return
	}
	switch st {
	case http.StateNew:
		m.open.Inc()
	case http.StateClosed, http.StateHijacked:
		m.open.Dec()
	}
}

// Serve serves srv on ln until ctx is done, then waits up to
// shutdownTimeout for requests in flight, closes the connections of
// those still running (a reader who stopped reading a download) and
// waits for their handlers to return, and returns nil: no handler runs
// on once Serve has returned, to use what its caller then closes. A nil
// srv.BaseContext is set so that requests see ctx's values but not its
// cancellation.
func Serve(ctx context.Context, srv *http.Server, ln net.Listener, shutdownTimeout time.Duration, log *slog.Logger) error {
	if srv.BaseContext == nil {
		srv.BaseContext = func(net.Listener) context.Context { return context.WithoutCancel(ctx) }
	}
	var handlers inFlight
	srv.Handler = handlers.wrap(srv.Handler)
	served := make(chan error, 1)
	go func() { served <- srv.Serve(ln) }()
	select {
	case err := <-served:
		return fmt.Errorf("cannot serve: %w", err)
	case <-ctx.Done():
	}
	log.Info("shutting down: finishing requests in flight")
	sctx, cancel := context.WithTimeout(context.Background(), shutdownTimeout)
	defer cancel()
	if err := srv.Shutdown(sctx); err != nil {
		srv.Close()
		log.Warn("requests still in flight were cut short", "err", err)
	}
	err := <-served
	// Shutdown and Close return without waiting for handlers: one whose
	// connection was just closed is still writing to it, or logging.
	if !handlers.wait(handlerGrace) {
		log.Error("requests still running after their connections were closed", "after", handlerGrace)
	}
	if err != nil && !errors.Is(err, http.ErrServerClosed) {
		return fmt.Errorf("cannot serve: %w", err)
	}
	return nil
}

// handlerGrace bounds the wait for handlers whose connections Serve
// closed: writing to a closed connection fails at once, and their
// requests' contexts are cancelled.
const handlerGrace = 5 * time.Second

// inFlight counts the handlers running; once wait has begun, none
// starts.
type inFlight struct {
	mu      sync.Mutex
	n       int
	closing bool
	idle    chan struct{} // closed when n falls to 0 while closing
}

func (f *inFlight) wrap(h http.Handler) http.Handler {
	if h == nil {
		h = http.DefaultServeMux
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		f.mu.Lock()
		if f.closing {
			f.mu.Unlock()
			http.Error(w, "shutting down", http.StatusServiceUnavailable)
			return
		}
		f.n++
		f.mu.Unlock()
		defer func() {
			f.mu.Lock()
			if f.n--; f.n == 0 && f.idle != nil {
				close(f.idle)
				f.idle = nil
			}
			f.mu.Unlock()
		}()
		h.ServeHTTP(w, r)
	})
}

// wait stops new handlers and waits up to d for the running ones to
// return; it reports whether they all did.
func (f *inFlight) wait(d time.Duration) bool {
	f.mu.Lock()
	f.closing = true
	if f.n == 0 {
		f.mu.Unlock()
		return true
	}
	idle := make(chan struct{})
	f.idle = idle
	f.mu.Unlock()
	select {
	case <-idle:
		return true
	case <-time.After(d):
		return false
	}
}

// MetricsServer serves GET /metrics for a program that serves nothing else.
type MetricsServer struct {
	srv    *http.Server
	served chan error
	log    *slog.Logger
}

// ServeMetrics listens on addr and serves reg's metrics until Close.
func ServeMetrics(addr string, reg *prometheus.Registry, log *slog.Logger) (*MetricsServer, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	m := &MetricsServer{
		srv:    &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelWarn)},
		served: make(chan error, 1),
		log:    log,
	}
	log.Info("serving metrics", "addr", ln.Addr().String())
	go func() { m.served <- m.srv.Serve(ln) }()
	return m, nil
}

// Close stops the server, waiting up to 5 seconds for scrapes in flight.
func (m *MetricsServer) Close() error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	err := m.srv.Shutdown(ctx)
	if serr := <-m.served; !errors.Is(serr, http.ErrServerClosed) {
		m.log.Error("metrics server failed", "err", serr)
	}
	return err
}

// WriteJSON answers status with v as JSON, which json.Marshal makes safe
// even where a browser sniffs it (it escapes <, > and &).
func WriteJSON(w http.ResponseWriter, status int, v any) {
	b, err := json.Marshal(v)
	if err != nil { // plain data: cannot happen
		http.Error(w, "cannot encode the answer", http.StatusInternalServerError)
		return
	}
	b = append(b, '\n')
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	w.Write(b)
}
