package main

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"math/big"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestTLS runs the watcher against a Dovecot whose certificate comes from
// a private CA: trusted with --tls-ca (or $CHIBRARY_IMAP_CA) it archives
// the mailbox over implicit TLS or STARTTLS, and Dovecot logged the login
// as encrypted; without it the watcher stops at once with status 1 and a
// certificate error that points to --tls-ca. The password is never shown.
func TestTLS(t *testing.T) {
	const password = "pw-3b9f2e71-not-for-logs"
	const total = 30
	var msgs [][]byte
	for i := range total {
		msgs = append(msgs, message(i))
	}
	srv := dovecottest.Start(t, dovecottest.Options{TLS: true, Password: password, Populate: func(dir string) error {
		for i, m := range msgs {
			if err := os.WriteFile(filepath.Join(dir, "cur", dovecottest.MaildirName(i, len(m))), m, 0o644); err != nil {
				return err
			}
		}
		return nil
	}})
	bin := build(t)
	imaps := "imaps://" + srv.User + "@" + srv.TLSAddr + "/INBOX"
	starttls := "imap://" + srv.User + "@" + srv.Addr + "/INBOX"

	t.Run("refused", func(t *testing.T) {
		tests := []struct {
			name, url string
			args, env []string
			stderr    []string
		}{
			{"implicit TLS, no CA", imaps, nil, nil,
				[]string{"certificate signed by unknown authority", "--tls-ca FILE"}},
			{"STARTTLS, no CA", starttls, nil, nil,
				[]string{"certificate signed by unknown authority", "--tls-ca FILE"}},
			{"CA of another server", imaps, []string{"--tls-ca", otherCA(t)}, nil,
				[]string{"certificate signed by unknown authority", "not signed by a CA in"}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(srv.Logins())
				data := t.TempDir()
				cmd := exec.Command(bin, append([]string{"--imap", tt.url, "--data", data}, tt.args...)...)
				cmd.Env = append(cleanEnv(), append(tt.env, "CHIBRARY_IMAP_PASSWORD="+password)...)
				var stderr bytes.Buffer
				cmd.Stdout, cmd.Stderr = &stderr, &stderr
				// Only so that a watcher retrying for ever fails the test.
				timer := time.AfterFunc(2*time.Minute, func() { cmd.Process.Kill() })
				err := cmd.Run()
				timer.Stop()
				if got := exitCode(err); got != 1 {
					t.Fatalf("exit status = %d, want 1\n%s", got, stderr.String())
				}
				for _, want := range tt.stderr {
					if !strings.Contains(stderr.String(), want) {
						t.Errorf("stderr = %q, want it to contain %q", stderr.String(), want)
					}
				}
				if strings.Contains(stderr.String(), password) {
					t.Errorf("stderr shows the password")
				}
				if l := srv.Logins()[before:]; len(l) > 0 {
					t.Errorf("Dovecot logged logins %+v, want none", l)
				}
			})
		}
	})

	t.Run("trusted", func(t *testing.T) {
		tests := []struct {
			name, url string
			args, env []string
		}{
			{"implicit TLS, --tls-ca", imaps, []string{"--tls-ca", srv.CAFile()}, nil},
			{"STARTTLS, CHIBRARY_IMAP_CA", starttls, nil, []string{"CHIBRARY_IMAP_CA=" + srv.CAFile()}},
		}
		for _, tt := range tests {
			t.Run(tt.name, func(t *testing.T) {
				before := len(srv.Logins())
				data := t.TempDir()
				cmd := exec.Command(bin, append([]string{"--imap", tt.url, "--data", data, "--log-level", "debug"}, tt.args...)...)
				cmd.Env = append(cleanEnv(), append(tt.env, "CHIBRARY_IMAP_PASSWORD="+password)...)
				var stderr syncbuf.Buffer
				cmd.Stdout, cmd.Stderr = &stderr, &stderr
				if err := cmd.Start(); err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { cmd.Process.Kill(); cmd.Wait() })
				// The watcher holds the store's lock only while it writes a
				// batch: poll it until every message is there.
				st, err := boltstore.Open(context.Background(), filepath.Join(data, "messages.db"), boltstore.Options{})
				if err != nil {
					t.Fatal(err)
				}
				defer st.Close()
				deadline := time.Now().Add(2 * time.Minute)
				for {
					n, err := st.Count(context.Background())
					if err != nil {
						t.Fatal(err)
					}
					if n == total {
						break
					}
					if time.Now().After(deadline) {
						t.Fatalf("store holds %d messages after 2 minutes, want %d\n%s", n, total, stderr.String())
					}
					time.Sleep(20 * time.Millisecond)
				}
				if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
					t.Fatal(err)
				}
				if err := cmd.Wait(); err != nil {
					t.Fatalf("watcher after SIGTERM: %v, want exit status 0\n%s", err, stderr.String())
				}
				for _, m := range msgs {
					if _, err := st.ByDigest(context.Background(), store.DigestOf(m)); err != nil {
						t.Fatalf("message %.30q not stored: %v", m, err)
					}
				}
				logins := srv.Logins()[before:]
				if len(logins) == 0 {
					t.Fatalf("Dovecot logged no login")
				}
				for _, l := range logins {
					if !l.TLS {
						t.Errorf("Dovecot logged login %+v, want it over TLS", l)
					}
				}
				if strings.Contains(stderr.String(), password) {
					t.Errorf("the log shows the password")
				}
			})
		}
	})
}

// otherCA writes a CA certificate that did not sign the server's and
// returns its path.
func otherCA(t *testing.T) string {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "another CA"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		KeyUsage: x509.KeyUsageCertSign, BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	p := filepath.Join(t.TempDir(), "other-ca.pem")
	if err := os.WriteFile(p, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o644); err != nil {
		t.Fatal(err)
	}
	return p
}
