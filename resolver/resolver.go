// Package resolver serves an archive over HTTP: a call number's message as
// an HTML page, as the raw stored bytes and as JSON, lookups by Message-ID,
// and the archive's statistics.
//
// Its routes are in routes.go (Routes, for help texts).
//
// Lists, months and threads come from the catalog (package catalog), a
// derived index that its keeper (package catalog/keeper, Options.Catalogs)
// opens, follows the store into and rebuilds; without a catalog those
// pages answer 503 and the message pages still work.
//
// A path that is not 8 base62 characters is 400; 8 base62 characters that
// name no stored message (out of range, of an unknown version or run, or
// never issued) are 404; a removed message's are 410, with when and why;
// so are unknown lists, months and threads, and a
// malformed list name or month is 400. Messages are immutable, so message
// responses carry an ETag and are cacheable for a day (a removal reaches
// caches within it); pages that show a
// message among others (its thread, the list) carry an ETag of what they
// show and are revalidated.
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
	"runtime"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// Defaults of Options.
const (
	DefaultReadHeaderTimeout = 5 * time.Second
	DefaultReadTimeout       = 10 * time.Second
	DefaultWriteTimeout      = 60 * time.Second
	DefaultWriteIdleTimeout  = 60 * time.Second
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
	// ListDescriptions are the operator's descriptions of lists, by name
	// (ReadListDescriptions); a list without one is described by its
	// mail's List-Id (catalog.List.Description).
	ListDescriptions map[string]string
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
	// WriteIdleTimeout replaces WriteTimeout for the large bodies (mbox
	// downloads, large raw messages and attachments): such a response
	// takes as long as its reader keeps reading, and is cut off once a
	// write has waited this long for the reader. 0 means
	// DefaultWriteIdleTimeout.
	WriteIdleTimeout time.Duration
	// ShutdownTimeout is how long Serve waits for requests in flight once
	// its context is done; 0 means DefaultShutdownTimeout.
	ShutdownTimeout time.Duration

	// Catalogs is where the lists, months and threads come from (a
	// *keeper.Keeper, which its owner runs); nil, or a keeper without a
	// catalog, answers their pages with 503 (message pages work without
	// it).
	Catalogs Catalogs
	// ChangesToken, if set, is the bearer token GET /api/v1/changes asks
	// for; "" serves the change feed to anyone (mirrors; the feed carries
	// the shuffle key, see package changes).
	ChangesToken string
	// ChangesPublic, with ChangesToken, serves the change feed to anyone
	// all the same: the token's holders then have slots of their own,
	// which anonymous readers cannot take.
	ChangesPublic bool
	// MaxChangesClients bounds the change feed answers written at once,
	// for token holders and for anonymous readers each; 0 means
	// DefaultChangesClients.
	MaxChangesClients int
	// SpoolDir is where a large body (a message or an attachment over
	// 1 MiB) is written while its readers read it, in a file without a
	// name; "" is the system's temporary directory.
	SpoolDir string
	// BaseURL is the archive's public address (https://archive.example),
	// used where an absolute URL is needed: the IDs and links of Atom
	// feeds. "" takes it from each request's Host.
	BaseURL string

	// PublicInbox is a directory of public-inbox v2 inboxes (resolver
	// export --public-inbox), served to git, public-inbox-clone and
	// grok-pull (pigit.go, manifest.go); "" serves none: those routes
	// answer 404.
	PublicInbox string
	// Now is the clock that says which are a list's last 30 days; nil
	// means time.Now.
	Now func() time.Time

	// MaxGitProcesses bounds the git processes serving the export at
	// once; 0 means DefaultGitProcesses.
	MaxGitProcesses int
	// GitTimeout bounds one git process; 0 means DefaultGitTimeout.
	GitTimeout time.Duration
}

// Security headers of every response. The CSP allows the stylesheet and
// the keyboard shortcuts' script served here and nothing else: no inline
// script, no image, no frame, no remote content.
const (
	csp    = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"
	rawCSP = "default-src 'none'; sandbox; frame-ancestors 'none'"
	// immutable is the Cache-Control of message responses: call numbers
	// are permanent and messages never change, but a message may be
	// removed (410), which caches must learn within a day.
	immutable = "public, max-age=86400"
)

//go:embed templates/*.html static/style.css
var assets embed.FS

var templates = template.Must(template.New("").Funcs(funcs).ParseFS(assets, "templates/*.html"))

// Server is the resolver's HTTP handler. It is safe for concurrent use.
type Server struct {
	st      store.Store
	opts    Options
	log     *slog.Logger
	codecs  *codecCache
	mux     *http.ServeMux
	handler http.Handler // mux with the access log and metrics
	// connState counts the HTTP connections open (httpserve).
	connState func(net.Conn, http.ConnState)
	reg       *prometheus.Registry
	style     []byte

	// cats is where the catalog comes from (Options.Catalogs).
	cats Catalogs
	// cache keeps rendered pages of the catalog.
	cache    *pageCache
	messages *pageCache // message pages

	versionHandler, metricsHandler http.Handler
	cacheHits                      *prometheus.CounterVec
	feedRested                     prometheus.Counter
	// texts keeps the text of messages for search excerpts.
	texts *textCache
	// recents keeps each list's last 30 days (recentOf).
	recents recentCache
	// unhealthy is why the last health check failed ("" if it passed;
	// nil before the first), so that a change is logged once.
	unhealthy atomic.Pointer[string]
	// feedGate admits change feed requests (token holders apart).
	feedGate *feedGate
	// readers says when readers last asked for something other than the
	// change feed, which gives way to them.
	readers readers
	// spools are the large bodies being served.
	spools *spools
	// searching holds a token per search running (catalog.SearchConns).
	searching chan struct{}
	// pi serves the public-inbox export; nil for none.
	pi *piExport
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
	if opts.MaxChangesClients <= 0 {
		opts.MaxChangesClients = DefaultChangesClients
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	s := &Server{st: st, opts: opts, log: opts.Logger, codecs: newCodecCache(st), mux: http.NewServeMux(), reg: prometheus.NewRegistry(), style: style, cache: newPageCache(cacheEntries, cacheBytes), messages: newPageCache(messageCacheEntries, messageCacheBytes), texts: newTextCache(textCacheBytes), spools: newSpools(opts.SpoolDir, runtime.GOMAXPROCS(0)), searching: make(chan struct{}, catalog.SearchConns()),
		feedGate: newFeedGate(opts.MaxChangesClients)}
	s.cats = opts.Catalogs
	if s.cats == nil {
		s.cats = keeper.Fixed(nil)
	}
	s.cacheHits = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chibrary_resolver_page_cache_total",
		Help: "Pages of the catalog served from the page cache (hit) or rendered (miss).",
	}, []string{"result"})
	s.feedRested = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chibrary_resolver_changes_rested_seconds_total",
		Help: "Time the change feed's answers rested to give the cores to readers' pages.",
	})
	s.reg.MustRegister(s.cacheHits, s.feedRested, collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	mw, err := httpserve.New(httpserve.Options{Logger: s.log, Registerer: s.reg, Namespace: "chibrary_resolver"})
	if err != nil {
		panic(err) // a registry of its own: names cannot clash
	}
	s.handler = mw.Wrap(s.mux)
	s.connState = mw.ConnState

	if opts.PublicInbox != "" {
		if s.pi, err = newPIExport(opts.PublicInbox, opts, s.reg, orDefault(opts.WriteIdleTimeout, DefaultWriteIdleTimeout)); err != nil {
			panic(err) // filepath.Abs fails only without a working directory
		}
	}
	s.handleRoutes()
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
	if reader(r.URL.Path) {
		defer s.readers.enter()()
	}
	r, done := holding(r)
	defer done()
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
		ConnState:         s.connState,
	}
	s.log.Info("serving", "addr", ln.Addr().String())
	return httpserve.Serve(ctx, srv, ln, orDefault(s.opts.ShutdownTimeout, DefaultShutdownTimeout), s.log)
}

// Registerer is the registry of the server's /metrics, for the metrics
// of what serves beside it (IMAP, NNTP).
func (s *Server) Registerer() prometheus.Registerer { return s.reg }

func orDefault(d, def time.Duration) time.Duration {
	if d > 0 {
		return d
	}
	return def
}

func humanSize(n int64) string {
	switch {
	case n < 0:
		return "size not counted"
	case n < 1<<10:
		return fmt.Sprintf("%d B", n)
	case n < 1<<20:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
}
