package imapwatch

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
)

// tlsPassword is distinctive, so that finding it in a log or an error
// cannot be a coincidence.
const tlsPassword = "pw-7d1c0e9a-never-logged"

func tlsDovecot(t testing.TB, msgs [][]byte) *dovecottest.Server {
	return dovecottest.Start(t, dovecottest.Options{TLS: true, Password: tlsPassword, Populate: populate(msgs)})
}

// logBuffer collects what a logger writes (and shows it in the test log).
type logBuffer struct {
	t  testing.TB
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.t.Log(string(bytes.TrimRight(p, "\n")))
	return l.b.Write(p)
}

func (l *logBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

func captureLogs(t testing.TB) (*slog.Logger, *logBuffer) {
	lb := &logBuffer{t: t}
	return slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelDebug})), lb
}

// countingDialer dials addr (whatever address the watcher asks for) from
// the local address from, if not nil, and counts the connections.
type countingDialer struct {
	addr  string
	from  net.Addr
	dials atomic.Int32
}

func (d *countingDialer) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	d.dials.Add(1)
	if d.addr != "" {
		addr = d.addr
	}
	return (&net.Dialer{LocalAddr: d.from}).DialContext(ctx, network, addr)
}

// otherLoopback is a client address Dovecot does not count as local:
// from it, plain-text LOGIN is refused (PRIVACYREQUIRED), so a login that
// succeeds proves the connection was encrypted.
var otherLoopback = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}

// TestDovecotTLS: the watcher archives a mailbox over implicit TLS and
// over STARTTLS, trusting the server's private CA, and with certificate
// verification switched off (which it logs loudly); Dovecot logged every
// login as encrypted, and the password appears in no log.
func TestDovecotTLS(t *testing.T) {
	var msgs [][]byte
	for i := range 25 {
		msgs = append(msgs, message(i))
	}
	srv := tlsDovecot(t, msgs)
	trusted := &tls.Config{RootCAs: srv.CAPool()}
	tests := []struct {
		name     string
		security Security
		addr     string
		tls      *tls.Config
		from     net.Addr
		wantWarn bool
	}{
		{"implicit TLS", ImplicitTLS, srv.TLSAddr, trusted, nil, false},
		{"STARTTLS from a non-local address", StartTLS, srv.Addr, trusted, otherLoopback, false},
		{"implicit TLS as localhost", ImplicitTLS, "localhost:" + port(t, srv.TLSAddr), trusted, nil, false},
		{"implicit TLS, verification off", ImplicitTLS, srv.TLSAddr, &tls.Config{InsecureSkipVerify: true}, nil, true},
		{"STARTTLS, verification off", StartTLS, srv.Addr, &tls.Config{InsecureSkipVerify: true}, otherLoopback, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Logins())
			a := newArchive(t)
			log, logs := captureLogs(t)
			d := &countingDialer{from: tt.from}
			if strings.HasPrefix(tt.addr, "localhost:") {
				d.addr = srv.TLSAddr // Dovecot listens on 127.0.0.1 only, localhost may be ::1 first
			}
			r := start(t, dovecotWatcher(t, srv, a, func(o *Options) {
				o.Security, o.Addr, o.TLSConfig, o.Dial, o.Logger = tt.security, tt.addr, tt.tls, d.dial, log
				o.BatchMessages = 10
			}))
			r.waitIdle(t)
			if err := r.stop(); err != nil {
				t.Fatalf("Run = %v, want nil", err)
			}
			if got := a.count(t); got != int64(len(msgs)) {
				t.Fatalf("store holds %d messages, want %d", got, len(msgs))
			}
			for _, m := range msgs {
				a.checkStored(t, m)
			}
			logins := srv.Logins()[before:]
			if len(logins) == 0 {
				t.Fatalf("Dovecot logged no login\n%s", srv.Log())
			}
			wantRemote := "127.0.0.1"
			if tt.from != nil {
				wantRemote = "127.0.0.2"
			}
			for _, l := range logins {
				if !l.TLS || l.Remote != wantRemote || l.User != srv.User {
					t.Errorf("Dovecot logged login %+v, want user %s from %s over TLS", l, srv.User, wantRemote)
				}
			}
			got := logs.String()
			if !strings.Contains(got, "tls=true") {
				t.Errorf("the watcher's log does not say the connection is TLS (tls=true)")
			}
			warned := strings.Contains(got, "level=WARN") && strings.Contains(got, "certificate is NOT checked")
			if warned != tt.wantWarn {
				t.Errorf("logged a warning about unchecked certificates = %v, want %v", warned, tt.wantWarn)
			}
			if strings.Contains(got, tlsPassword) {
				t.Errorf("the watcher's log shows the password")
			}
		})
	}
}

func port(t testing.TB, addr string) string {
	_, p, err := net.SplitHostPort(addr)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// TestDovecotTLSRefused: a certificate the watcher cannot trust (issued
// by a CA it was not given, or for another name), or a server that does
// not speak TLS on an imaps:// port, ends Run at once with a fatal error
// that says why; no retry, no login attempt, the password neither sent
// nor shown.
func TestDovecotTLSRefused(t *testing.T) {
	srv := tlsDovecot(t, [][]byte{message(1)})
	trusted := &tls.Config{RootCAs: srv.CAPool()}
	const otherHost = "imap.example.org"
	tests := []struct {
		name     string
		security Security
		addr     string // what the watcher is told
		dialTo   string // where it really connects ("" for addr)
		tls      *tls.Config
		want     any    // pointer to the error type wanted
		wantText string // in the error
		maxDials int32
	}{
		{"implicit TLS, CA not trusted", ImplicitTLS, srv.TLSAddr, "", nil,
			new(x509.UnknownAuthorityError), "certificate signed by unknown authority", 1},
		{"STARTTLS, CA not trusted", StartTLS, srv.Addr, "", nil,
			new(x509.UnknownAuthorityError), "certificate signed by unknown authority", 2},
		{"implicit TLS, other CA's pool", ImplicitTLS, srv.TLSAddr, "", &tls.Config{RootCAs: x509.NewCertPool()},
			new(x509.UnknownAuthorityError), "certificate", 1},
		{"implicit TLS, name mismatch", ImplicitTLS, otherHost + ":993", srv.TLSAddr, trusted,
			new(x509.HostnameError), "certificate is valid for", 1},
		{"STARTTLS, name mismatch", StartTLS, otherHost + ":143", srv.Addr, trusted,
			new(x509.HostnameError), "certificate is valid for", 2},
		{"imaps:// to the plain port", ImplicitTLS, srv.TLSAddr, srv.Addr, trusted,
			new(tls.RecordHeaderError), "does not speak TLS", 1},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := len(srv.Logins())
			a := newArchive(t)
			log, logs := captureLogs(t)
			d := &countingDialer{addr: tt.dialTo}
			w := dovecotWatcher(t, srv, a, func(o *Options) {
				o.Security, o.Addr, o.TLSConfig, o.Dial, o.Logger = tt.security, tt.addr, tt.tls, d.dial, log
			})
			// A deadline only so that a watcher retrying for ever fails
			// the test (Run then returns nil) instead of hanging it.
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
			defer cancel()
			err := w.Run(ctx)
			if err == nil {
				t.Fatalf("Run = nil (it retried until the deadline), want a fatal %T", tt.want)
			}
			t.Logf("Run = %v", err)
			if !errors.As(err, tt.want) {
				t.Errorf("Run = %v, want %T", err, tt.want)
			}
			if !fatal(err) {
				t.Errorf("fatal(%v) = false, want true", err)
			}
			if !strings.Contains(err.Error(), tt.wantText) {
				t.Errorf("Run = %q, want it to say %q", err, tt.wantText)
			}
			if got := d.dials.Load(); got > tt.maxDials {
				t.Errorf("the watcher connected %d times, want at most %d (no retry)", got, tt.maxDials)
			}
			if strings.Contains(err.Error(), tlsPassword) || strings.Contains(logs.String(), tlsPassword) {
				t.Errorf("the error or the log shows the password")
			}
			if l := srv.Logins()[before:]; len(l) > 0 {
				t.Errorf("Dovecot logged logins %+v, want none", l)
			}
			if got := a.count(t); got != 0 {
				t.Errorf("store holds %d messages, want 0", got)
			}
		})
	}
	if log := srv.Log(); strings.Contains(log, "auth failed") || strings.Contains(log, tlsPassword) {
		t.Errorf("Dovecot saw a login attempt:\n%s", log)
	}
}
