// Package resolver serves an archive over HTTP: a call number's message as
// an HTML page, as the raw stored bytes and as JSON, lookups by Message-ID,
// and the archive's statistics.
//
// Routes (Go 1.22 ServeMux patterns):
//
//	GET /                            index: a form to type a call number, the stats
//	GET /{callnumber}                the message as an HTML page
//	GET /{callnumber}/raw            the stored bytes, message/rfc822
//	GET /api/v1/messages/{callnumber} the headers as JSON
//	GET /m/{message-id}              302 to the message; a list if several share the ID
//	GET /api/v1/stats                {"messages": N}
//	GET /api/v1/version              the build: program, version, revision
//	GET /healthz, /metrics           liveness; Prometheus metrics
//
// A path that is not 8 base62 characters is 400; 8 base62 characters that
// name no stored message (out of range, of an unknown version or run, or
// never issued) are 404. Messages are
// immutable, so message responses carry an ETag and are cacheable forever.
// Mail is hostile: every page is rendered with html/template from the
// sanitized view of package mailview, under a Content-Security-Policy that
// allows no script, no remote content and no framing.
//
// The handlers hold nothing of the store between requests, so importers and
// the watcher keep writing to the same bolt file while the resolver runs.
package resolver

import (
	"context"
	"embed"
	"fmt"
	"html/template"
	"log/slog"
	"net"
	"net/http"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/internal/version"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// Defaults of Options.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultIdleTimeout       = 2 * time.Minute
	DefaultShutdownTimeout   = 10 * time.Second
	// DefaultMaxReferences is how many In-Reply-To and References IDs a
	// page looks up in the store.
	DefaultMaxReferences = 50
)

// Options configure a Server. The zero value is usable: no logging, the
// default timeouts and mailview's default limits.
type Options struct {
	// Logger receives access logs (method, path, status, duration) and
	// errors. nil discards them.
	Logger *slog.Logger
	// View bounds the parsing of a message for its page.
	View mailview.Options
	// MaxReferences bounds the Message-ID lookups of one page; 0 means
	// DefaultMaxReferences.
	MaxReferences int
	// Timeouts of Serve's http.Server; 0 means the Default above.
	ReadHeaderTimeout time.Duration
	ReadTimeout       time.Duration
	WriteTimeout      time.Duration
	IdleTimeout       time.Duration
	// ShutdownTimeout is how long Serve waits for requests in flight once
	// its context is done; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration
}

// Security headers of every response. The CSP allows the stylesheet served
// here and nothing else: no script, no image, no frame, no remote content.
const (
	csp    = "default-src 'none'; style-src 'self'; img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	rawCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
	// immutable is the Cache-Control of message responses: call numbers
	// are permanent and messages never change.
	immutable = "public, max-age=31536000, immutable"
)

//go:embed templates/*.html static/style.css
var assets embed.FS

var templates = template.Must(template.New("").Funcs(template.FuncMap{
	"size": humanSize,
}).ParseFS(assets, "templates/*.html"))

// Server is the resolver's HTTP handler. It is safe for concurrent use.
type Server struct {
	st      store.Store
	opts    Options
	log     *slog.Logger
	codecs  *codecCache
	mux     *http.ServeMux
	handler http.Handler // mux with the access log and metrics
	reg     *prometheus.Registry
	style   []byte
}

// New returns a Server over st. The caller keeps st open while the server
// runs and closes it afterwards.
func New(st store.Store, opts Options) *Server {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.MaxReferences <= 0 {
		opts.MaxReferences = DefaultMaxReferences
	}
	style, err := assets.ReadFile("static/style.css")
	if err != nil {
		panic(err) // embedded at build time
	}
	s := &Server{st: st, opts: opts, log: opts.Logger, codecs: newCodecCache(st), mux: http.NewServeMux(), reg: prometheus.NewRegistry(), style: style}
	s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mw, err := httpserve.New(httpserve.Options{Logger: s.log, Registerer: s.reg, Namespace: "chibrary_resolver"})
	if err != nil {
		panic(err) // a registry of its own: names cannot clash
	}
	s.handler = mw.Wrap(s.mux)

	s.mux.HandleFunc("GET /{$}", s.index)
	s.mux.HandleFunc("GET /go", s.goTo)
	s.mux.HandleFunc("GET /{callnumber}", s.page)
	// "/m/{id...}" and "/{callnumber}/raw" would both match "/m/raw", which
	// ServeMux refuses as a conflict; one pattern dispatches both.
	s.mux.HandleFunc("GET /{first}/{rest...}", s.twoSegments)
	s.mux.HandleFunc("GET /api/v1/messages/{callnumber}", s.messageJSON)
	s.mux.HandleFunc("GET /api/v1/stats", s.stats)
	s.mux.Handle("GET /api/v1/version", version.Handler("resolver"))
	s.mux.HandleFunc("GET /healthz", s.healthz)
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{}))
	s.mux.HandleFunc("GET /static/style.css", s.stylesheet)
	return s
}

// ServeHTTP serves a request with the security headers, access logging and
// metrics around the routes.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Security-Policy", csp)
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set("Referrer-Policy", "no-referrer")
	h.Set("X-Frame-Options", "DENY")
	s.handler.ServeHTTP(w, r)
}

// Serve serves HTTP on ln until ctx is done, then shuts down gracefully:
// it stops accepting, waits up to ShutdownTimeout for requests in flight
// and returns nil. It returns the error that stopped it otherwise.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	srv := &http.Server{
		Handler:           s,
		ReadHeaderTimeout: orDefault(s.opts.ReadHeaderTimeout, DefaultReadHeaderTimeout),
		ReadTimeout:       orDefault(s.opts.ReadTimeout, DefaultReadTimeout),
		WriteTimeout:      orDefault(s.opts.WriteTimeout, DefaultWriteTimeout),
		IdleTimeout:       orDefault(s.opts.IdleTimeout, DefaultIdleTimeout),
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(s.log.Handler(), slog.LevelWarn),
	}
	s.log.Info("serving", "addr", ln.Addr().String())
	return httpserve.Serve(ctx, srv, ln, orDefault(s.opts.ShutdownTimeout, DefaultShutdownTimeout), s.log)
}

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func humanSize(n int64) string {
	switch {
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
