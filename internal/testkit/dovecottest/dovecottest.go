// Package dovecottest runs a real Dovecot IMAP server for tests: one user,
// a free loopback port, Maildir storage, everything in a temporary
// directory. With Options.TLS it also speaks STARTTLS and implicit TLS, with
// a certificate from a throw-away CA, and refuses plain-text LOGIN.
//
// A test that calls Start is skipped when dovecot is not installed, unless
// $CI is "true": CI installs it, so there a missing dovecot fails the test.
// TESTING.md says what it takes to run Dovecot this way.
package dovecottest

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Options configure a Server; the zero value has user "test", password
// "secret" and an empty INBOX.
type Options struct {
	User, Password string
	// Populate is called with the user's Maildir before the first start, to
	// deliver mail by writing files, much faster than APPEND.
	Populate func(maildir string) error
	// TLS refuses plain-text LOGIN on a connection that is not encrypted,
	// but Dovecot counts one whose client and server addresses are equal as
	// secure: to see the refusal, connect from 127.0.0.2.
	TLS bool
}

// Server is a running (or stopped) Dovecot instance.
type Server struct {
	Addr           string // plain text, with STARTTLS if Options.TLS
	TLSAddr        string // implicit TLS, if Options.TLS
	User, Password string

	t            testing.TB
	bin, doveadm string
	dir          string
	conf         string
	home         string
	uid          int
	gid          int
	up           bool
	ca           *x509.Certificate // with Options.TLS
	caFile       string
}

// Start starts a Dovecot server, stopped and removed when the test ends.
func Start(t testing.TB, opts Options) *Server {
	t.Helper()
	// /usr/sbin is not on every PATH.
	bin, doveadm := lookup("dovecot", "/usr/sbin"), lookup("doveadm", "/usr/bin")
	if bin == "" || doveadm == "" {
		msg := "dovecot is not installed (apt-get install dovecot-imapd); skipping the tests against a real IMAP server"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + ", but CI=true: CI must install it")
		}
		t.Skip(msg)
	}
	s := &Server{User: opts.User, Password: opts.Password, t: t}
	if s.User == "" {
		s.User = "test"
	}
	if s.Password == "" {
		s.Password = "secret"
	}
	// Not t.TempDir(): its parent is mode 0700 and Dovecot's unprivileged
	// processes must reach the mail directory.
	var err error
	s.dir, err = os.MkdirTemp("", "dovecottest-")
	if err != nil {
		t.Fatalf("dovecottest: %v", err)
	}
	t.Cleanup(func() { os.RemoveAll(s.dir) })
	if err := os.Chmod(s.dir, 0o755); err != nil {
		t.Fatalf("dovecottest: %v", err)
	}
	s.bin, s.doveadm = bin, doveadm
	if err := s.configure(opts); err != nil {
		t.Fatalf("dovecottest: %v", err)
	}
	t.Cleanup(s.Stop)
	s.start()
	return s
}

func (s *Server) configure(opts Options) error {
	ports, err := freePorts(2)
	if err != nil {
		return err
	}
	port := ports[0]
	s.Addr = net.JoinHostPort("127.0.0.1", strconv.Itoa(port))
	// Plain text only: no certificate, and the default imaps listener
	// must not clash with other instances.
	security := "ssl = no\ndisable_plaintext_auth = no\n"
	imaps := "    port = 0\n"
	if opts.TLS {
		f, err := issue(s.dir)
		if err != nil {
			return err
		}
		s.ca, s.caFile = f.ca, f.caFile
		s.TLSAddr = net.JoinHostPort("127.0.0.1", strconv.Itoa(ports[1]))
		imaps = fmt.Sprintf("    address = 127.0.0.1\n    port = %d\n    ssl = yes\n", ports[1])
		// Dovecot 2.3 syntax: "<" reads the file's content.
		security = fmt.Sprintf("ssl = required\nssl_cert = <%s\nssl_key = <%s\ndisable_plaintext_auth = yes\n", f.cert, f.key)
	}
	s.home = filepath.Join(s.dir, "home")
	maildir := filepath.Join(s.home, "Maildir")
	for _, d := range []string{"run", "state", "cur", "new", "tmp"} {
		p := filepath.Join(s.dir, d)
		if d == "cur" || d == "new" || d == "tmp" {
			p = filepath.Join(maildir, d)
		}
		if err := os.MkdirAll(p, 0o755); err != nil {
			return err
		}
	}
	if opts.Populate != nil {
		if err := opts.Populate(maildir); err != nil {
			return fmt.Errorf("cannot populate the Maildir: %w", err)
		}
	}

	// Dovecot refuses uid 0 for mail access: as root, mail belongs to the
	// unprivileged user "mail"; otherwise to whoever runs the test.
	extra := ""
	s.uid, s.gid = os.Getuid(), os.Getgid()
	if s.uid == 0 {
		u, err := user.Lookup("mail")
		if err != nil {
			return fmt.Errorf("cannot find user mail: %w", err)
		}
		s.uid, _ = strconv.Atoi(u.Uid)
		s.gid, _ = strconv.Atoi(u.Gid)
	} else {
		u, err := user.Current()
		if err != nil {
			return err
		}
		extra = fmt.Sprintf("default_login_user = %s\ndefault_internal_user = %s\n", u.Username, u.Username)
	}
	if err := chownTree(s.home, s.uid, s.gid); err != nil {
		return err
	}

	passwd := filepath.Join(s.dir, "passwd")
	if err := os.WriteFile(passwd, fmt.Appendf(nil, "%s:{PLAIN}%s\n", s.User, s.Password), 0o644); err != nil {
		return err
	}
	s.conf = filepath.Join(s.dir, "dovecot.conf")
	conf := fmt.Sprintf(`# dovecottest: a throw-away server for tests
base_dir = %[1]s/run
state_dir = %[1]s/state
log_path = %[1]s/dovecot.log
info_log_path = %[1]s/dovecot.log
protocols = imap
listen = 127.0.0.1
%[7]sauth_mechanisms = plain login
first_valid_uid = 1
mail_location = maildir:~/Maildir
namespace inbox {
  inbox = yes
  separator = /
}
%[5]s
passdb {
  driver = passwd-file
  args = scheme=PLAIN username_format=%%u %[2]s
}
userdb {
  driver = static
  args = uid=%[3]d gid=%[4]d home=%[1]s/home
}
service imap-login {
  inet_listener imap {
    address = 127.0.0.1
    port = %[6]d
  }
  inet_listener imaps {
%[8]s  }
}
service pop3-login {
  inet_listener pop3 {
    port = 0
  }
  inet_listener pop3s {
    port = 0
  }
}
`, s.dir, passwd, s.uid, s.gid, extra, port, security, imaps)
	if err := os.WriteFile(s.conf, []byte(conf), 0o644); err != nil {
		return err
	}
	return nil
}

func lookup(name, dir string) string {
	if p, err := exec.LookPath(name); err == nil {
		return p
	}
	p := filepath.Join(dir, name)
	if _, err := os.Stat(p); err == nil {
		return p
	}
	return ""
}

// freePorts holds each port open until all are found, so that none comes
// twice.
func freePorts(n int) ([]int, error) {
	var ports []int
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("cannot find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

func chownTree(root string, uid, gid int) error {
	if os.Getuid() != 0 {
		return nil
	}
	return filepath.Walk(root, func(p string, _ os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		return os.Lchown(p, uid, gid)
	})
}

// Dir returns the server's temporary directory (configuration, logs, mail).
func (s *Server) Dir() string { return s.dir }

// Log returns what Dovecot logged so far, for failure messages.
func (s *Server) Log() string {
	b, _ := os.ReadFile(filepath.Join(s.dir, "dovecot.log"))
	return string(b)
}

func (s *Server) start() {
	s.t.Helper()
	// The master daemonizes and its children inherit stdout and stderr:
	// a pipe would never reach EOF, so they go to a file.
	out, err := os.OpenFile(filepath.Join(s.dir, "start.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o644)
	if err != nil {
		s.t.Fatalf("dovecottest: %v", err)
	}
	cmd := exec.Command(s.bin, "-c", s.conf)
	cmd.Stdout, cmd.Stderr = out, out
	err = cmd.Run()
	out.Close()
	if err != nil {
		b, _ := os.ReadFile(out.Name())
		s.t.Fatalf("dovecottest: dovecot -c %s: %v\n%s\n%s", s.conf, err, b, s.Log())
	}
	s.up = true
	deadline := time.Now().Add(30 * time.Second)
	for _, addr := range []string{s.Addr, s.TLSAddr} {
		for addr != "" {
			c, err := net.DialTimeout("tcp", addr, time.Second)
			if err == nil {
				c.Close()
				break
			}
			if time.Now().After(deadline) {
				s.t.Fatalf("dovecottest: dovecot does not listen on %s: %v\n%s", addr, err, s.Log())
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// Stop stops the server and cuts its connections, if it runs.
func (s *Server) Stop() {
	s.t.Helper()
	if !s.up {
		return
	}
	s.up = false
	// Dovecot's mail processes outlive the master for up to ten seconds
	// before they notice it is gone: note them now, end them after, so
	// that Stop cuts every client as a real restart does.
	children := s.children()
	out, err := exec.Command(s.doveadm, "-c", s.conf, "stop").CombinedOutput()
	if err != nil {
		s.t.Errorf("dovecottest: doveadm stop: %v\n%s", err, out)
		return
	}
	// doveadm stop returns before the master has exited: wait for the
	// port to be free so that a restart can bind it again.
	deadline := time.Now().Add(30 * time.Second)
	for {
		c, err := net.DialTimeout("tcp", s.Addr, time.Second)
		if err != nil {
			break
		}
		c.Close()
		if time.Now().After(deadline) {
			s.t.Errorf("dovecottest: dovecot still listens on %s after doveadm stop", s.Addr)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
	pidfile := filepath.Join(s.dir, "run", "master.pid")
	for time.Now().Before(deadline) {
		if _, err := os.Stat(pidfile); errors.Is(err, os.ErrNotExist) {
			break
		}
		time.Sleep(20 * time.Millisecond)
	}
	for _, pid := range children {
		if p, err := os.FindProcess(pid); err == nil {
			_ = p.Signal(syscall.SIGTERM)
		}
	}
	for _, pid := range children {
		for alive(pid) {
			if time.Now().After(deadline) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
				break
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
}

// children returns the processes whose parent is the running master.
func (s *Server) children() []int {
	b, err := os.ReadFile(filepath.Join(s.dir, "run", "master.pid"))
	if err != nil {
		return nil
	}
	master := strings.TrimSpace(string(b))
	ents, _ := os.ReadDir("/proc")
	var pids []int
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil {
			continue
		}
		// pid (comm) state ppid ...; comm may hold spaces and parentheses.
		rest := string(stat[bytes.LastIndexByte(stat, ')')+1:])
		if f := strings.Fields(rest); len(f) > 1 && f[1] == master {
			pids = append(pids, pid)
		}
	}
	return pids
}

// alive reports whether pid still runs (a zombie counts as gone).
func alive(pid int) bool {
	stat, err := os.ReadFile(filepath.Join("/proc", strconv.Itoa(pid), "stat"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(stat[bytes.LastIndexByte(stat, ')')+1:]))
	return len(f) > 0 && f[0] != "Z"
}

// Login is a successful login as the server logged it.
type Login struct {
	User   string
	Remote string // IP address
	TLS    bool
}

// Logins returns the successful logins so far, oldest first: tests read
// from them whether a client really used TLS.
func (s *Server) Logins() []Login { return parseLogins(s.Log()) }

// parseLogins reads the successful logins of a Dovecot log.
func parseLogins(log string) []Login {
	var out []Login
	// Dovecot 2.3: "imap-login: Info: Login: user=<test>, method=PLAIN,
	// rip=127.0.0.1, lip=127.0.0.1, mpid=31595, TLS, session=<...>".
	for line := range strings.Lines(log) {
		_, rest, ok := strings.Cut(line, "imap-login: Info: Login: ")
		if !ok {
			continue
		}
		var l Login
		for f := range strings.SplitSeq(strings.TrimSpace(rest), ", ") {
			k, v, _ := strings.Cut(f, "=")
			switch {
			case k == "user":
				l.User = strings.TrimSuffix(strings.TrimPrefix(v, "<"), ">")
			case k == "rip":
				l.Remote = v
			case f == "TLS":
				l.TLS = true
			}
		}
		out = append(out, l)
	}
	return out
}

// Restart starts the server again on the same address, with the same mail.
func (s *Server) Restart() {
	s.t.Helper()
	s.Stop()
	s.start()
}

// Running reports whether the server was started and not stopped since.
func (s *Server) Running() bool { return s.up }

// Client returns a client logged in to the server; the caller logs out.
// With Options.TLS it connects to TLSAddr and checks the certificate.
func (s *Server) Client(ctx context.Context) (*imapclient.Client, error) {
	addr := s.Addr
	var c *imapclient.Client
	var err error
	if s.TLSAddr != "" {
		addr = s.TLSAddr
		c, err = imapclient.DialTLS(addr, &imapclient.Options{TLSConfig: &tls.Config{RootCAs: s.CAPool(), ServerName: "127.0.0.1"}})
	} else {
		c, err = imapclient.DialInsecure(addr, nil)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", addr, err)
	}
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := c.Login(s.User, s.Password).Wait(); err != nil {
		c.Close()
		return nil, fmt.Errorf("cannot log in: %w", err)
	}
	return c, nil
}

func (s *Server) with(ctx context.Context, f func(c *imapclient.Client) error) error {
	c, err := s.Client(ctx)
	if err != nil {
		return err
	}
	defer c.Close()
	stop := context.AfterFunc(ctx, func() { c.Close() })
	defer stop()
	if err := f(c); err != nil {
		return err
	}
	return c.Logout().Wait()
}

// Append delivers raw to mailbox with APPEND (RFC 9051 section 6.3.12), as
// CRLF, and returns its UID (0 if the server did not say).
func (s *Server) Append(ctx context.Context, mailbox string, raw []byte) (imap.UID, error) {
	raw = CRLF(raw)
	var uid imap.UID
	err := s.with(ctx, func(c *imapclient.Client) error {
		cmd := c.Append(mailbox, int64(len(raw)), nil)
		if _, err := cmd.Write(raw); err != nil {
			return fmt.Errorf("cannot append to %s: %w", mailbox, err)
		}
		if err := cmd.Close(); err != nil {
			return fmt.Errorf("cannot append to %s: %w", mailbox, err)
		}
		data, err := cmd.Wait()
		if err != nil {
			return fmt.Errorf("cannot append to %s: %w", mailbox, err)
		}
		uid = data.UID
		return nil
	})
	return uid, err
}

// CreateMailbox creates a mailbox.
func (s *Server) CreateMailbox(ctx context.Context, name string) error {
	return s.with(ctx, func(c *imapclient.Client) error {
		if err := c.Create(name, nil).Wait(); err != nil {
			return fmt.Errorf("cannot create mailbox %s: %w", name, err)
		}
		return nil
	})
}

// DeleteMailbox deletes a mailbox and its messages. IMAP refuses to delete
// INBOX, so its messages are expunged and its UIDVALIDITY may stay: use
// another mailbox for UIDVALIDITY tests.
func (s *Server) DeleteMailbox(ctx context.Context, name string) error {
	return s.with(ctx, func(c *imapclient.Client) error {
		if err := c.Delete(name).Wait(); err != nil {
			return fmt.Errorf("cannot delete mailbox %s: %w", name, err)
		}
		return nil
	})
}

// Message is a message in a mailbox as the server has it.
type Message struct {
	UID   imap.UID
	Flags []imap.Flag
	Raw   []byte
}

// Messages returns every message of mailbox in UID order, in memory.
func (s *Server) Messages(ctx context.Context, mailbox string) ([]Message, error) {
	var msgs []Message
	err := s.with(ctx, func(c *imapclient.Client) error {
		sel, err := c.Select(mailbox, &imap.SelectOptions{ReadOnly: true}).Wait()
		if err != nil {
			return fmt.Errorf("cannot select %s: %w", mailbox, err)
		}
		if sel.NumMessages == 0 {
			return nil
		}
		var all imap.SeqSet
		all.AddRange(1, 0)
		section := &imap.FetchItemBodySection{Peek: true}
		bufs, err := c.Fetch(all, &imap.FetchOptions{UID: true, Flags: true, BodySection: []*imap.FetchItemBodySection{section}}).Collect()
		if err != nil {
			return fmt.Errorf("cannot fetch %s: %w", mailbox, err)
		}
		for _, b := range bufs {
			msgs = append(msgs, Message{UID: b.UID, Flags: b.Flags, Raw: b.FindBodySection(section)})
		}
		return nil
	})
	return msgs, err
}

// CRLF returns raw with every bare LF turned into CRLF.
func CRLF(raw []byte) []byte {
	if !bytes.Contains(raw, []byte("\n")) {
		return raw
	}
	var b bytes.Buffer
	b.Grow(len(raw) + len(raw)/32)
	for len(raw) > 0 {
		i := bytes.IndexByte(raw, '\n')
		if i < 0 {
			b.Write(raw)
			break
		}
		line := raw[:i]
		b.Write(bytes.TrimSuffix(line, []byte("\r")))
		b.WriteString("\r\n")
		raw = raw[i+1:]
	}
	return b.Bytes()
}

// MaildirName returns a unique, unseen file name in a Maildir's cur/ for
// Options.Populate.
func MaildirName(n int, size int) string {
	return fmt.Sprintf("%d.M%dP%d.dovecottest,S=%d:2,", time.Now().Unix(), n, os.Getpid(), size)
}
