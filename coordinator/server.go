package coordinator

import (
	"bytes"
	"context"
	"crypto/sha256"
	"crypto/subtle"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/internal/version"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// IssueTimeout is below Serve's write timeout: a cluster that lost a node
// may make an issue wait.
const IssueTimeout = 25 * time.Second

// MaxBody is the largest request body the server reads.
const MaxBody = 64 << 10

// Error kinds, in error bodies and the errors metric.
const (
	KindUnauthorized     = "unauthorized"
	KindBadRequest       = "bad_request"
	KindTooLarge         = "too_large"
	KindNotFound         = "not_found"
	KindMethodNotAllowed = "method_not_allowed"
	KindExhausted        = "exhausted"
	KindUnavailable      = "unavailable"
	KindUnsupported      = "unsupported"
	KindInternal         = "internal"
)

// HeaderAuthority names the authority of a backup, so the client can check.
const HeaderAuthority = "Chibrary-Authority"

// ErrorBody is the JSON body of every error response.
type ErrorBody struct {
	Error string `json:"error"`
	Kind  string `json:"kind"`
}

// IssueRequest is the body of POST /v1/runs.
type IssueRequest struct {
	Program string `json:"program"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Note    string `json:"note"`
}

// ServerOptions configure a Server.
type ServerOptions struct {
	Token  string       // required of every /v1/ request
	Logger *slog.Logger // nil discards; the token is never logged
	// Registry of the metrics; nil means one of the server's own, never the
	// global default.
	Registry *prometheus.Registry
	// BackupStall is how long a backup client may leave the server unable
	// to send before it is dropped; 0 means 30 seconds.
	BackupStall time.Duration
}

// MinTokenLen is 128 random bits in hex.
const MinTokenLen = 32

// minTokenChars: a random token of MinTokenLen hex digits has fewer than 8
// distinct characters about once in 10^9; "abab..." has 2.
const minTokenChars = 8

// ErrWeakToken: the token is too short or too repetitive to be a secret.
var ErrWeakToken = errors.New("coordinator: the token is too weak")

// CheckToken refuses a token that cannot be a random secret of at least 128
// bits. The error never contains the token.
func CheckToken(token string) error {
	distinct := map[rune]bool{}
	for _, c := range token {
		distinct[c] = true
	}
	if len(token) < MinTokenLen || len(distinct) < minTokenChars {
		return fmt.Errorf("%w: %d characters, %d of them distinct; want at least %d characters of a random secret (128 bits as hex: openssl rand -hex 16), or let the coordinator make one: point --token-file at a file that does not exist yet", ErrWeakToken, len(token), len(distinct), MinTokenLen)
	}
	return nil
}

// Server is the coordinator's HTTP handler for one authority.
type Server struct {
	a         authority.Issuer
	stall     time.Duration
	tokenHash [sha256.Size]byte
	log       *slog.Logger
	reg       *prometheus.Registry
	mux       *http.ServeMux
	handler   http.Handler // mux with the access log and metrics

	issued prometheus.Counter
	errors *prometheus.CounterVec
}

// NewServer returns the handler serving a. The caller closes a, after the
// HTTP server has shut down.
func NewServer(a authority.Issuer, opts ServerOptions) (*Server, error) {
	if opts.Token == "" {
		return nil, errors.New("cannot make the coordinator server: no token")
	}
	if err := CheckToken(opts.Token); err != nil {
		return nil, fmt.Errorf("cannot make the coordinator server: %w", err)
	}
	if opts.BackupStall <= 0 {
		opts.BackupStall = 30 * time.Second
	}
	s := &Server{
		a:         a,
		stall:     opts.BackupStall,
		tokenHash: sha256.Sum256([]byte(opts.Token)),
		log:       opts.Logger,
		reg:       opts.Registry,
		mux:       http.NewServeMux(),
	}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.reg == nil {
		s.reg = prometheus.NewRegistry()
		s.reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	}
	s.issued = prometheus.NewCounter(prometheus.CounterOpts{
		Name: "chibrary_coordinator_leases_issued_total",
		Help: "Runs issued (leases committed and returned).",
	})
	s.errors = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "chibrary_coordinator_errors_total",
		Help: "Error responses, by kind.",
	}, []string{"kind"})
	for _, c := range []prometheus.Collector{s.issued, s.errors} {
		if err := s.reg.Register(c); err != nil {
			return nil, fmt.Errorf("cannot register metrics: %w", err)
		}
	}
	mw, err := httpserve.New(httpserve.Options{
		Logger: s.log, Registerer: s.reg, Namespace: "chibrary_coordinator",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 14), // 0.5ms .. 4s
		Done:    s.countUnmatched,
	})
	if err != nil {
		return nil, err
	}
	s.handler = mw.Wrap(s.mux)
	for _, k := range []string{KindUnauthorized, KindBadRequest, KindTooLarge, KindNotFound,
		KindMethodNotAllowed, KindExhausted, KindUnavailable, KindUnsupported, KindInternal} {
		s.errors.WithLabelValues(k) // export zeros, so rates work from the start
	}

	s.mux.Handle("POST /v1/runs", s.auth(http.HandlerFunc(s.handleIssue)))
	s.mux.Handle("GET /v1/runs/{run}", s.auth(http.HandlerFunc(s.handleLease)))
	s.mux.Handle("GET /v1/backup", s.auth(http.HandlerFunc(s.handleBackup)))
	s.mux.HandleFunc("GET /healthz", s.handleHealth)
	s.mux.Handle("GET /api/v1/version", version.Handler("coordinator"))
	s.mux.Handle("GET /metrics", promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{Registry: s.reg}))
	return s, nil
}

// Registry returns the registry holding the server's metrics.
func (s *Server) Registry() *prometheus.Registry { return s.reg }

// ServeHTTP routes the request, then logs it and records its metrics.
func (s *Server) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.handler.ServeHTTP(w, r)
}

// countUnmatched counts the errors the ServeMux answers itself.
func (s *Server) countUnmatched(_ *http.Request, route string, status int) {
	if route != "unmatched" {
		return
	}
	switch status {
	case http.StatusNotFound:
		s.errors.WithLabelValues(KindNotFound).Inc()
	case http.StatusMethodNotAllowed:
		s.errors.WithLabelValues(KindMethodNotAllowed).Inc()
	}
}

func (s *Server) fail(w http.ResponseWriter, status int, kind, msg string) {
	s.errors.WithLabelValues(kind).Inc()
	if status == http.StatusUnauthorized {
		// RFC 6750, section 3.
		w.Header().Set("WWW-Authenticate", `Bearer realm="chibrary"`)
	}
	httpserve.WriteJSON(w, status, ErrorBody{Error: msg, Kind: kind})
}

// auth admits requests bearing the token (RFC 6750, section 2.1), comparing
// SHA-256 digests in constant time so that timing leaks neither the
// token's content nor its length.
func (s *Server) auth(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
		// The scheme name is case-insensitive (RFC 9110, section 11.1).
		if !ok || !strings.EqualFold(scheme, "Bearer") {
			s.fail(w, http.StatusUnauthorized, KindUnauthorized, "a bearer token is required")
			return
		}
		got := sha256.Sum256([]byte(strings.TrimSpace(token)))
		if subtle.ConstantTimeCompare(got[:], s.tokenHash[:]) != 1 {
			s.fail(w, http.StatusUnauthorized, KindUnauthorized, "wrong token")
			return
		}
		next.ServeHTTP(w, r)
	})
}

// handleIssue serves POST /v1/runs.
func (s *Server) handleIssue(w http.ResponseWriter, r *http.Request) {
	if r.ContentLength > MaxBody {
		s.fail(w, http.StatusRequestEntityTooLarge, KindTooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
		return
	}
	body, err := io.ReadAll(http.MaxBytesReader(w, r.Body, MaxBody))
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			s.fail(w, http.StatusRequestEntityTooLarge, KindTooLarge, fmt.Sprintf("body over %d bytes", MaxBody))
			return
		}
		s.fail(w, http.StatusBadRequest, KindBadRequest, "cannot read body")
		return
	}
	req, err := decodeIssue(body)
	if err != nil {
		s.fail(w, http.StatusBadRequest, KindBadRequest, err.Error())
		return
	}
	// Answer 503, which clients retry, rather than be cut off by the
	// server's write timeout.
	ctx, cancel := context.WithTimeout(r.Context(), IssueTimeout)
	defer cancel()
	lease, err := s.a.Issue(ctx, authority.Holder(req))
	if err != nil {
		switch {
		case errors.Is(err, context.DeadlineExceeded) && r.Context().Err() == nil:
			s.log.Warn("cannot issue a run in time", "timeout", IssueTimeout, "err", err)
			s.fail(w, http.StatusServiceUnavailable, KindUnavailable, fmt.Sprintf("the authority could not record a run in %v", IssueTimeout))
		case errors.Is(err, authority.ErrExhausted):
			s.fail(w, http.StatusConflict, KindExhausted, authority.ErrExhausted.Error())
		case errors.Is(err, authority.ErrClosed):
			s.fail(w, http.StatusServiceUnavailable, KindUnavailable, "the authority is shutting down")
		case errors.Is(err, riakconn.ErrUnavailable):
			s.log.Warn("cannot issue a run: the cluster is unavailable", "err", err)
			s.fail(w, http.StatusServiceUnavailable, KindUnavailable, "the authority's cluster is unavailable")
		case r.Context().Err() != nil:
			s.fail(w, http.StatusServiceUnavailable, KindUnavailable, "request cancelled")
		default:
			s.log.Error("cannot issue a run", "err", err)
			s.fail(w, http.StatusInternalServerError, KindInternal, "cannot issue a run")
		}
		return
	}
	s.issued.Inc()
	s.log.Info("issued", "run", lease.Run, "program", lease.Program, "host", lease.Host, "pid", lease.PID)
	w.Header().Set("Location", "/v1/runs/"+strconv.FormatUint(uint64(lease.Run), 10))
	httpserve.WriteJSON(w, http.StatusCreated, lease)
}

func decodeIssue(body []byte) (IssueRequest, error) {
	var req IssueRequest
	trimmed := bytes.TrimSpace(body)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return req, errors.New(`body must be a JSON object like {"program":"importer","host":"h1","pid":123,"note":"..."}`)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.DisallowUnknownFields()
	if err := dec.Decode(&req); err != nil {
		return req, fmt.Errorf("malformed body: %v", err)
	}
	if _, err := dec.Token(); err != io.EOF {
		return req, errors.New("malformed body: data after the JSON object")
	}
	if req.PID < 0 {
		return req, fmt.Errorf("malformed body: pid %d is negative", req.PID)
	}
	return req, nil
}

// handleLease serves GET /v1/runs/{run}.
func (s *Server) handleLease(w http.ResponseWriter, r *http.Request) {
	run, err := authority.ParseRun(r.PathValue("run"))
	if err != nil {
		s.fail(w, http.StatusBadRequest, KindBadRequest, fmt.Sprintf("bad run %q: want a decimal number in 1..%d", r.PathValue("run"), callnumber.MaxRun))
		return
	}
	lease, err := s.a.Lease(r.Context(), run)
	switch {
	case errors.Is(err, authority.ErrNotIssued):
		s.fail(w, http.StatusNotFound, KindNotFound, fmt.Sprintf("run %d was never issued", run))
	case errors.Is(err, authority.ErrClosed):
		s.fail(w, http.StatusServiceUnavailable, KindUnavailable, "the authority is shutting down")
	case err != nil:
		s.log.Error("cannot read a lease", "run", run, "err", err)
		s.fail(w, http.StatusInternalServerError, KindInternal, "cannot read the lease")
	default:
		httpserve.WriteJSON(w, http.StatusOK, lease)
	}
}

// handleBackup serves GET /v1/backup. It copies to an unlinked temporary
// file first, so that a client that stops reading cannot hold a read
// transaction open: bbolt cannot grow its memory map under one, and issuing
// would wait.
func (s *Server) handleBackup(w http.ResponseWriter, r *http.Request) {
	a, ok := s.a.(*authority.Authority)
	if !ok {
		s.fail(w, http.StatusNotImplemented, KindUnsupported, "this authority lives in a Riak cluster: back up the cluster, not the coordinator")
		return
	}
	f, err := os.CreateTemp(filepath.Dir(a.Path()), "."+filepath.Base(a.Path())+".backup-*")
	if err != nil {
		s.log.Error("backup failed", "err", err)
		s.fail(w, http.StatusInternalServerError, KindInternal, "cannot copy the database")
		return
	}
	// It holds the key: created 0600 (os.CreateTemp), and unlinked at once,
	// so that nothing is left behind whatever happens.
	os.Remove(f.Name())
	defer f.Close()
	size, err := a.Backup(f, nil)
	if err == nil {
		_, err = f.Seek(0, io.SeekStart)
	}
	if err != nil {
		s.log.Error("backup failed", "err", err)
		s.fail(w, http.StatusInternalServerError, KindInternal, "cannot copy the database")
		return
	}
	w.Header().Set("Content-Type", "application/octet-stream")
	w.Header().Set("Content-Length", strconv.FormatInt(size, 10))
	w.Header().Set(HeaderAuthority, a.ID())
	rc := http.NewResponseController(w)
	buf := make([]byte, 64<<10)
	var sent int64
	for sent < size {
		n, rerr := f.Read(buf[:min(int64(len(buf)), size-sent)])
		if n > 0 {
			rc.SetWriteDeadline(time.Now().Add(s.stall))
			if _, err := w.Write(buf[:n]); err != nil {
				s.log.Warn("backup client gone or stalled: dropped", "sent", sent, "size", size, "err", err)
				panic(http.ErrAbortHandler)
			}
			sent += int64(n)
		}
		if rerr != nil && sent < size {
			s.log.Error("backup failed", "err", rerr)
			// Break the connection, so that the client cannot take a
			// truncated copy for a whole one.
			panic(http.ErrAbortHandler)
		}
	}
}

// handleHealth serves GET /healthz: 200 when the database is usable.
func (s *Server) handleHealth(w http.ResponseWriter, r *http.Request) {
	if err := s.a.Check(r.Context()); err != nil {
		s.log.Error("health check failed", "err", err)
		s.fail(w, http.StatusServiceUnavailable, KindUnavailable, "the database is not usable")
		return
	}
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	io.WriteString(w, "ok\n")
}
