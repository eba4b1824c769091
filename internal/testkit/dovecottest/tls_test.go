package dovecottest_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"os"
	"reflect"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
)

// fromOtherLoopback dials from 127.0.0.2: Dovecot counts a connection
// from its own address as secure and would let plain-text LOGIN through.
var fromOtherLoopback = &net.Dialer{Timeout: 10 * time.Second, LocalAddr: &net.TCPAddr{IP: net.IPv4(127, 0, 0, 2)}}

// TestTLS: a TLS server serves implicit TLS and STARTTLS with a
// certificate its CA vouches for, for each name it was issued for; plain
// text LOGIN from a non-local address is refused; the same holds after a
// restart; the harness's own client (Append, Messages) goes over TLS.
func TestTLS(t *testing.T) {
	ctx := context.Background()
	s := dovecottest.Start(t, dovecottest.Options{TLS: true})
	if s.TLSAddr == "" || s.TLSAddr == s.Addr {
		t.Fatalf("TLSAddr = %q (Addr %q), want a second listener", s.TLSAddr, s.Addr)
	}
	pem, err := os.ReadFile(s.CAFile())
	if err != nil {
		t.Fatal(err)
	}
	fromFile := x509.NewCertPool()
	if !fromFile.AppendCertsFromPEM(pem) {
		t.Fatalf("CAFile %s holds no PEM certificate", s.CAFile())
	}
	_, port, _ := net.SplitHostPort(s.TLSAddr)

	check := func(t *testing.T) {
		tests := []struct {
			name, serverName string
			pool             *x509.CertPool
			wantErr          any // a pointer to the x509 error type wanted, or nil
		}{
			{"CAPool, 127.0.0.1", "127.0.0.1", s.CAPool(), nil},
			{"CAFile, localhost", "localhost", fromFile, nil},
			{"CAPool, ::1 as name", "::1", s.CAPool(), nil},
			{"system roots", "127.0.0.1", nil, new(x509.UnknownAuthorityError)},
			{"other name", "imap.example.org", s.CAPool(), new(x509.HostnameError)},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				cfg := &tls.Config{RootCAs: tt.pool, ServerName: tt.serverName}
				conn, err := tls.DialWithDialer(&net.Dialer{Timeout: 10 * time.Second}, "tcp", net.JoinHostPort("127.0.0.1", port), cfg)
				if tt.wantErr != nil {
					if err == nil {
						conn.Close()
						t.Fatalf("TLS to %s as %q: no error, want %T", s.TLSAddr, tt.serverName, tt.wantErr)
					}
					if !errors.As(err, tt.wantErr) {
						t.Fatalf("TLS to %s as %q: %v, want %T", s.TLSAddr, tt.serverName, err, tt.wantErr)
					}
					return
				}
				if err != nil {
					t.Fatalf("TLS to %s as %q: %v", s.TLSAddr, tt.serverName, err)
				}
				c := imapclient.New(conn, nil)
				defer c.Close()
				if err := c.Login(s.User, s.Password).Wait(); err != nil {
					t.Fatalf("LOGIN over implicit TLS: %v", err)
				}
			})
		}

		t.Run("plain text from another address is refused", func(t *testing.T) {
			conn, err := fromOtherLoopback.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			c := imapclient.New(conn, nil)
			defer c.Close()
			if caps := c.Caps(); !caps.Has(imap.CapLoginDisabled) || !caps.Has(imap.CapStartTLS) {
				t.Errorf("capabilities before STARTTLS = %v, want LOGINDISABLED and STARTTLS", caps)
			}
			err = c.Login(s.User, s.Password).Wait()
			var ie *imap.Error
			if !errors.As(err, &ie) || ie.Code != imap.ResponseCodePrivacyRequired {
				t.Fatalf("plain-text LOGIN from 127.0.0.2 = %v, want NO [PRIVACYREQUIRED]", err)
			}
		})

		t.Run("STARTTLS from another address", func(t *testing.T) {
			conn, err := fromOtherLoopback.Dial("tcp", s.Addr)
			if err != nil {
				t.Fatal(err)
			}
			c, err := imapclient.NewStartTLS(conn, &imapclient.Options{TLSConfig: &tls.Config{RootCAs: s.CAPool(), ServerName: "127.0.0.1"}})
			if err != nil {
				t.Fatalf("STARTTLS: %v", err)
			}
			defer c.Close()
			if c.Caps().Has(imap.CapLoginDisabled) {
				t.Errorf("capabilities after STARTTLS = %v, want LOGIN enabled", c.Caps())
			}
			if err := c.Login(s.User, s.Password).Wait(); err != nil {
				t.Fatalf("LOGIN after STARTTLS: %v", err)
			}
		})
	}
	t.Run("started", check)

	raw := []byte("From: a@example.org\r\nSubject: tls\r\n\r\nbody\r\n")
	if _, err := s.Append(ctx, "INBOX", raw); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	t.Run("restarted", check)
	msgs, err := s.Messages(ctx, "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !bytes.Equal(msgs[0].Raw, raw) {
		t.Fatalf("Messages = %+v, want the appended message", msgs)
	}
	logins := s.Logins()
	var tlsLogins int
	for _, l := range logins {
		if l.User != s.User {
			t.Errorf("login %+v, want user %q", l, s.User)
		}
		if l.TLS {
			tlsLogins++
		}
	}
	// Three CA checks and STARTTLS, twice; the harness's own clients.
	if tlsLogins < 8 {
		t.Errorf("Logins() = %+v, want at least 8 over TLS\n%s", logins, s.Log())
	}
}

// TestPlainHasNoTLS: without Options.TLS there is no TLS listener nor CA,
// and logins are logged as not encrypted.
func TestPlainHasNoTLS(t *testing.T) {
	s := dovecottest.Start(t, dovecottest.Options{})
	if s.TLSAddr != "" || s.CAPool() != nil || s.CAFile() != "" {
		t.Fatalf("TLSAddr, CAPool, CAFile = %q, %v, %q, want none", s.TLSAddr, s.CAPool(), s.CAFile())
	}
	if _, err := s.Messages(context.Background(), "INBOX"); err != nil {
		t.Fatal(err)
	}
	want := []dovecottest.Login{{User: s.User, Remote: "127.0.0.1"}}
	if got := s.Logins(); !reflect.DeepEqual(got, want) {
		t.Fatalf("Logins() = %+v, want %+v", got, want)
	}
}
