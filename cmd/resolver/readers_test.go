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
	"errors"
	"fmt"
	"math/big"
	"net"
	"net/http/httptest"
	"net/textproto"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
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

// putListMessage stores a message of list "test" under run 1 and seq.
func putListMessage(t *testing.T, dir string, codec *callnumber.Codec, seq uint16) {
	t.Helper()
	n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	raw := fmt.Appendf(nil, "From: A <a@example.org>\nSubject: message %d\nMessage-ID: <rebuild-%d@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nhello %d\n", seq, seq, seq)
	putMessages(t, dir, store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: fmt.Sprintf("rebuild-%d@example.org", seq), List: "test"})
}

// imapLine sends an IMAP command tagged tag and returns the lines
// answered, the tagged one last.
func imapLines(t *testing.T, c *textproto.Conn, tag, cmd string) []string {
	t.Helper()
	c.PrintfLine("%s %s", tag, cmd)
	var lines []string
	for {
		line, err := c.ReadLine()
		if err != nil {
			t.Fatalf("%s: %v (after %q)", cmd, err, lines)
		}
		lines = append(lines, line)
		if strings.HasPrefix(line, tag+" ") || strings.HasPrefix(line, "* BYE") {
			return lines
		}
	}
}

// uidValidity is the UIDVALIDITY in SELECT's answer.
func uidValidity(t *testing.T, lines []string) string {
	t.Helper()
	for _, l := range lines {
		if _, v, ok := strings.Cut(l, "[UIDVALIDITY "); ok {
			return strings.TrimSuffix(strings.Fields(v)[0], "]")
		}
	}
	t.Fatalf("no UIDVALIDITY in %q", lines)
	return ""
}

// nntpGroup answers GROUP test's "count low high group", or the error.
func nntpGroup(c *textproto.Conn) (string, error) {
	c.PrintfLine("GROUP chibrary.test")
	_, msg, err := c.ReadCodeLine(211)
	return msg, err
}

// TestServeReadersRebuild: the catalog deleted while serve runs with
// --imap and --nntp is rebuilt, and HTTP, IMAP and NNTP all read the new
// one: a message stored after the rebuild is on the list's page, in the
// newsgroup, and in the mailbox, and a session that had the mailbox
// selected is told to select it again, as its numbers were not carried
// over (its UIDVALIDITY changed).
func TestServeReadersRebuild(t *testing.T) {
	dir, codec, _, _ := testArchive(t)
	addrs := freeAddrs(t, 2)
	imapAddr, nntpAddr := addrs[0], addrs[1]
	base, stop := startServe(t, "--data", dir, "--imap", imapAddr, "--nntp", nntpAddr)
	waitGet(t, base+"/l/test/", 200)

	news := textproto.NewConn(dialRetry(t, nntpAddr, nil))
	defer news.Close()
	if _, _, err := news.ReadCodeLine(201); err != nil {
		t.Fatal(err)
	}
	if msg, err := nntpGroup(news); err != nil || msg != "1 1 1 chibrary.test" {
		t.Fatalf("GROUP before the rebuild = %q, %v; want 1 1 1", msg, err)
	}
	mail := textproto.NewConn(dialRetry(t, imapAddr, nil))
	defer mail.Close()
	mail.ReadLine() // greeting
	imapLines(t, mail, "a", "LOGIN reader secret")
	sel := imapLines(t, mail, "b", "SELECT test")
	if !slices.Contains(sel, "* 1 EXISTS") {
		t.Fatalf("SELECT test = %q, want 1 EXISTS", sel)
	}
	validity := uidValidity(t, sel)

	path := filepath.Join(dir, "catalog.db")
	old, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		if fi, err := os.Stat(path); err == nil && !os.SameFile(fi, old) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the deleted catalog is not built again within 60 s")
		}
		time.Sleep(25 * time.Millisecond)
	}
	putListMessage(t, dir, codec, 43)
	// HTTP: the new message is on the list's page.
	for !strings.Contains(waitGet(t, base+"/l/test/", 200), "message 43") {
		if time.Now().After(deadline) {
			t.Fatal("the message stored after the rebuild is not on the list's page within 60 s")
		}
		time.Sleep(25 * time.Millisecond)
	}
	// NNTP, on the connection opened before the rebuild: both messages.
	for {
		msg, err := nntpGroup(news)
		if err == nil && strings.HasPrefix(msg, "2 ") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("GROUP after the rebuild = %q, %v; want 2 messages", msg, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	// IMAP: the session that had the mailbox selected is closed, its
	// numbers gone; a new one sees both messages under a new UIDVALIDITY.
	for i := 0; ; i++ {
		lines := imapLines(t, mail, fmt.Sprintf("n%d", i), "NOOP")
		if strings.HasPrefix(lines[len(lines)-1], "* BYE") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the selected session is not closed after the catalog was built anew: %q", lines)
		}
		time.Sleep(25 * time.Millisecond)
	}
	again := textproto.NewConn(dialRetry(t, imapAddr, nil))
	defer again.Close()
	again.ReadLine()
	imapLines(t, again, "a", "LOGIN reader secret")
	sel = imapLines(t, again, "b", "SELECT test")
	if !slices.Contains(sel, "* 2 EXISTS") || uidValidity(t, sel) == validity {
		t.Errorf("SELECT test after the rebuild = %q; want 2 EXISTS and a UIDVALIDITY other than %s", sel, validity)
	}
	logs := stop()
	if !strings.Contains(logs, "deleted or replaced") || !strings.Contains(logs, "catalog rebuilt") {
		t.Errorf("serve logs do not say the catalog was deleted and rebuilt:\n%s", logs)
	}
}

// TestServeReadersDamagedCatalog: a catalog damaged at start-up does not
// stop serve --imap --nntp: their commands answer a temporary error while
// it is rebuilt, and the catalog's lists once it is.
func TestServeReadersDamagedCatalog(t *testing.T) {
	dir, _, _, _ := testArchive(t)
	path := filepath.Join(dir, "catalog.db")
	base, stop := startServe(t, "--data", dir)
	waitGet(t, base+"/l/test/", 200)
	stop()
	damageCatalog(t, path, "header")

	addrs := freeAddrs(t, 2)
	imapAddr, nntpAddr := addrs[0], addrs[1]
	base, stop = startServe(t, "--data", dir, "--imap", imapAddr, "--nntp", nntpAddr)
	news := textproto.NewConn(dialRetry(t, nntpAddr, nil))
	defer news.Close()
	if _, _, err := news.ReadCodeLine(201); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		msg, err := nntpGroup(news)
		if err == nil && msg == "1 1 1 chibrary.test" {
			break
		}
		var te *textproto.Error
		if err != nil && (!errors.As(err, &te) || te.Code != 403) || time.Now().After(deadline) {
			t.Fatalf("GROUP while the damaged catalog is rebuilt = %q, %v; want 403, then 1 1 1", msg, err)
		}
		time.Sleep(25 * time.Millisecond)
	}
	mail := textproto.NewConn(dialRetry(t, imapAddr, nil))
	defer mail.Close()
	mail.ReadLine()
	imapLines(t, mail, "a", "LOGIN reader secret")
	if st := imapLines(t, mail, "b", "STATUS test (MESSAGES)"); !strings.Contains(st[0], "MESSAGES 1") {
		t.Errorf("STATUS test after the rebuild = %q, want MESSAGES 1", st)
	}
	waitGet(t, base+"/l/test/", 200)
	logs := stop()
	if !strings.Contains(logs, "damaged") || !strings.Contains(logs, "catalog rebuilt") {
		t.Errorf("serve logs do not say the catalog was damaged and rebuilt:\n%s", logs)
	}
}
