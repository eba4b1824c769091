package main

import (
	"bufio"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store/boltstore"
)

// freeAddrs returns n distinct loopback addresses free a moment ago.
func freeAddrs(t *testing.T, n int) []string {
	t.Helper()
	// All held open until the last is picked: a port closed at once may
	// be the next one the kernel gives.
	var addrs []string
	for range n {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		defer ln.Close()
		addrs = append(addrs, ln.Addr().String())
	}
	return addrs
}

// dialRetry dials addr until the server listens.
func dialRetry(t *testing.T, addr string, tlsConf *tls.Config) net.Conn {
	t.Helper()
	for i := 0; ; i++ {
		var c net.Conn
		var err error
		if tlsConf != nil {
			c, err = tls.Dial("tcp", addr, tlsConf)
		} else {
			c, err = net.Dial("tcp", addr)
		}
		if err == nil {
			c.SetDeadline(time.Now().Add(30 * time.Second))
			return c
		}
		if i == 200 {
			t.Fatalf("dial %s: %v", addr, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// TestServeReaders: serve --imap --nntp --imaps --nntps answer on their
// addresses, and stop with the server.
func TestServeReaders(t *testing.T) {
	dir, _, _, _ := testArchive(t)
	cert, key, pool := testCertificate(t)
	addrs := freeAddrs(t, 5)
	http, imapAddr, nntpAddr, imapsAddr, nntpsAddr := addrs[0], addrs[1], addrs[2], addrs[3], addrs[4]
	ctx, cancel := context.WithCancel(t.Context())
	type result struct {
		status         int
		stdout, stderr string
	}
	done := make(chan result, 1)
	t.Setenv("CHIBRARY_NNTP_PREFIX", "org.example")
	go func() {
		s, o, e := runCmd(t, ctx, "serve", "--data", dir, "--listen", http, "--imap", imapAddr, "--nntp", nntpAddr,
			"--imaps", imapsAddr, "--nntps", nntpsAddr, "--tls-cert", cert, "--tls-key", key)
		done <- result{s, o, e}
	}()
	defer func() {
		cancel()
		if r := <-done; r.status != 0 {
			t.Errorf("serve = %d, stderr %q", r.status, r.stderr)
		}
	}()
	tlsConf := &tls.Config{RootCAs: pool, ServerName: "localhost"}

	for _, addr := range []string{imapAddr, imapsAddr} {
		var conf *tls.Config
		if addr == imapsAddr {
			conf = tlsConf
		}
		c := textproto.NewConn(dialRetry(t, addr, conf))
		greeting, _ := c.ReadLine()
		if !strings.HasPrefix(greeting, "* OK") {
			t.Errorf("IMAP greeting on %s: %q", addr, greeting)
		}
		c.PrintfLine("a LOGIN reader secret")
		if line, _ := c.ReadLine(); !strings.HasPrefix(line, "a OK") {
			t.Errorf("LOGIN on %s: %q", addr, line)
		}
		// The test archive's one message is in list "test", once the
		// catalog has been built.
		for i := 0; ; i++ {
			c.PrintfLine("b STATUS test (MESSAGES UIDNEXT)")
			line, _ := c.ReadLine()
			if strings.Contains(line, "MESSAGES 1") {
				c.ReadLine() // b OK
				break
			}
			if !strings.Contains(line, "NONEXISTENT") || i == 200 {
				t.Errorf("STATUS on %s: %q", addr, line)
				break
			}
			time.Sleep(25 * time.Millisecond)
		}
		c.Close()
	}
	for _, addr := range []string{nntpAddr, nntpsAddr} {
		var conf *tls.Config
		if addr == nntpsAddr {
			conf = tlsConf
		}
		c := textproto.NewConn(dialRetry(t, addr, conf))
		if _, _, err := c.ReadCodeLine(201); err != nil {
			t.Errorf("NNTP greeting on %s: %v", addr, err)
		}
		c.PrintfLine("GROUP org.example.test")
		if _, msg, err := c.ReadCodeLine(211); err != nil || msg != "1 1 1 org.example.test" {
			t.Errorf("GROUP on %s: %q, %v", addr, msg, err)
		}
		c.Close()
	}
	// STARTTLS on the plain NNTP listener.
	conn := dialRetry(t, nntpAddr, nil)
	c := textproto.NewConn(conn)
	c.ReadCodeLine(201)
	c.PrintfLine("STARTTLS")
	if _, _, err := c.ReadCodeLine(382); err != nil {
		t.Fatalf("STARTTLS: %v", err)
	}
	tc := tls.Client(conn, tlsConf)
	if err := tc.Handshake(); err != nil {
		t.Fatalf("handshake after STARTTLS: %v", err)
	}
	tr := textproto.NewReader(bufio.NewReader(tc))
	tc.Write([]byte("CAPABILITIES\r\n"))
	if _, _, err := tr.ReadCodeLine(101); err != nil {
		t.Fatalf("CAPABILITIES under TLS: %v", err)
	}
	lines, _ := tr.ReadDotLines()
	for _, l := range lines {
		if l == "STARTTLS" {
			t.Error("STARTTLS offered again under TLS")
		}
	}
	tc.Close()
}

// TestServeReadersUsage: contradictory flags are bad usage (exit 2),
// said before anything is opened.
func TestServeReadersUsage(t *testing.T) {
	dir := t.TempDir()
	cert, key, _ := testCertificate(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"--imaps", "127.0.0.1:0"}, "--imaps needs --tls-cert"},
		{[]string{"--nntps", "127.0.0.1:0"}, "--nntps needs --tls-cert"},
		{[]string{"--imap", "0.0.0.0:1143"}, "is not a loopback address"},
		{[]string{"--nntp", "192.0.2.1:119"}, "is not a loopback address"},
		{[]string{"--imap", "127.0.0.1:0", "--tls-cert", cert}, "--tls-cert and --tls-key go together"},
		{[]string{"--nntp", "127.0.0.1:0", "--nntp-prefix", "Bad Prefix"}, "--nntp-prefix"},
		{[]string{"--nntp", "127.0.0.1:0", "--max-connections", "0"}, "must be positive"},
	} {
		status, _, stderr := runCmd(t, t.Context(), append([]string{"serve", "--data", dir, "--listen", "127.0.0.1:0"}, tt.args...)...)
		if status != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("serve %q = %d, %q; want 2, %q", tt.args, status, stderr, tt.want)
		}
	}
	// A certificate that cannot be read is an error, not bad usage.
	status, _, stderr := runCmd(t, t.Context(), "serve", "--data", dir, "--listen", "127.0.0.1:0", "--imaps", "127.0.0.1:0",
		"--tls-cert", filepath.Join(dir, "nosuch.pem"), "--tls-key", key)
	if status != 1 || !strings.Contains(stderr, "cannot load the TLS certificate") {
		t.Errorf("serve with a missing certificate = %d, %q", status, stderr)
	}
}

// testCertificate writes a self-signed certificate for localhost and
// 127.0.0.1, and returns its files and a pool that trusts it.
func testCertificate(t *testing.T) (certFile, keyFile string, pool *x509.CertPool) {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(1), Subject: pkix.Name{CommonName: "localhost"},
		NotBefore: time.Now().Add(-time.Hour), NotAfter: time.Now().Add(time.Hour),
		DNSNames: []string{"localhost"}, IPAddresses: []net.IP{net.ParseIP("127.0.0.1")},
		KeyUsage: x509.KeyUsageDigitalSignature, ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true, IsCA: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &k.PublicKey, k)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	certFile, keyFile = filepath.Join(dir, "cert.pem"), filepath.Join(dir, "key.pem")
	if err := os.WriteFile(certFile, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(keyFile, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb}), 0o600); err != nil {
		t.Fatal(err)
	}
	c, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	pool = x509.NewCertPool()
	pool.AddCert(c)
	return certFile, keyFile, pool
}

// TestServeNNTPOnMirror: serve --nntp refuses a data directory a mirror
// fills, naming the origin and the way out, since its article numbers are
// its own; --imap alone serves it (IMAP has UIDVALIDITY), and so does
// --nntp with --nntp-own-numbers.
func TestServeNNTPOnMirror(t *testing.T) {
	origin, _, _, _ := testArchive(t)
	ost, err := boltstore.Open(t.Context(), filepath.Join(origin, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer ost.Close()
	srv := httptest.NewServer(resolver.New(ost, resolver.Options{}))
	defer srv.Close()

	dir := t.TempDir()
	mst, err := boltstore.Open(t.Context(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	m, err := mirror.New(mirror.Options{From: srv.URL, Store: mst, StatePath: mirror.StatePathFor(dir, srv.URL+"/")})
	if err != nil {
		t.Fatal(err)
	}
	stats, err := m.CatchUp(t.Context())
	mst.Close()
	if err != nil || stats.New != 1 {
		t.Fatalf("mirror CatchUp = %+v, %v; want the origin's one message", stats, err)
	}

	addrs := freeAddrs(t, 3)
	status, _, stderr := runCmd(t, t.Context(), "serve", "--data", dir, "--listen", addrs[0], "--nntp", addrs[1])
	if status != 1 || !strings.Contains(stderr, "is a mirror of "+srv.URL+"/") || !strings.Contains(stderr, "--nntp-own-numbers") {
		t.Errorf("serve --nntp on a mirror = %d, %q; want 1, naming the origin and --nntp-own-numbers", status, stderr)
	}

	for _, args := range [][]string{{"--imap", addrs[2]}, {"--nntp", addrs[1], "--nntp-own-numbers"}} {
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan string, 1)
		go func() {
			status, _, stderr := runCmd(t, ctx, append([]string{"serve", "--data", dir, "--listen", addrs[0]}, args...)...)
			done <- fmt.Sprintf("%d: %s", status, stderr)
		}()
		c := textproto.NewConn(dialRetry(t, args[1], nil))
		if line, _ := c.ReadLine(); !strings.HasPrefix(line, "* OK") && !strings.HasPrefix(line, "201 ") {
			t.Errorf("serve %v on a mirror: greeting %q", args, line)
		}
		c.Close()
		cancel()
		if r := <-done; !strings.HasPrefix(r, "0: ") {
			t.Errorf("serve %v on a mirror = %s, want 0", args, r)
		}
	}
}
