// Command watcher follows an IMAP mailbox and archives every message in it,
// then each new one as it arrives.
package main

import (
	"context"
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chibrary/chibrary/imapwatch"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/setup"
)

const usage = `
Usage: watcher --imap imaps://USER@HOST[:PORT]/MAILBOX --password-file F
               [--after keep|seen|delete|move:FOLDER]
               [--data DIR | --store URL] [--coordinator URL --token-file F]

Archives every message of the mailbox (oldest UID first), then waits with
IDLE (polling where the server has no IDLE) and archives new messages as
they arrive. A message is flagged, moved or deleted (--after) only once the
store has durably accepted it; one that cannot be archived is left alone.
The mailbox's UIDVALIDITY and last archived UID are kept in a state file
(by default under DATA/watcher/); a re-fetched message is recognised as a
duplicate, never given a second call number. Network and server errors
are retried with backoff. SIGINT or SIGTERM finishes the batch in progress
and exits 0; exit status 1 is a fatal error (refused login, certificate,
store safety rule), 2 bad usage.

imaps:// is TLS on port 993. imap:// (port 143) uses STARTTLS when the
server offers it, and plain text otherwise, which is refused unless the
server is on a loopback address or --allow-plaintext-login is given. USER
may be URL-escaped (user%40example.org); MAILBOX defaults to INBOX. The
password comes from --password-file or $CHIBRARY_IMAP_PASSWORD, never from
the command line. --after move:FOLDER creates FOLDER if it is missing.

The server's certificate is checked against the system's CA roots. For a
server whose certificate comes from a private CA, --tls-ca FILE (PEM, one
or more certificates) trusts the CAs in FILE INSTEAD of the system roots:
no public CA can then vouch for that server. A certificate that cannot be
verified stops the watcher (exit 1) rather than being retried.
--insecure-skip-verify switches verification off (the watcher warns).

Examples:
  watcher --imap imaps://archive%40example.org@mail.example.org/INBOX \
          --password-file /etc/chibrary/imap-password --after move:Archived
  CHIBRARY_IMAP_PASSWORD=secret watcher --imap imap://test@127.0.0.1:1143/ --data ./archive
  watcher --imap imaps://archive@imap.corp.example/INBOX --password-file pw \
          --tls-ca /etc/chibrary/corp-ca.pem
  watcher --imap imaps://list@mail.example.org/Lists/linux-mips --password-file pw \
          --store riak://r1:8087 --state /var/lib/chibrary/mips.state \
          --coordinator http://coord:7070 --token-file /etc/chibrary/token \
          --metrics-listen 127.0.0.1:9101
`

type config struct {
	store setup.StoreFlags
	runs  setup.RunFlags
	log   cli.LogOptions

	imap           string
	passwordFile   string
	after          imapwatch.After
	state          string
	list           string
	metricsListen  string
	insecureVerify bool
	tlsCA          string
	allowPlain     bool
	poll           time.Duration
	idleRefresh    time.Duration
	batch          int

	dataSet bool
}

func main() { cli.Main("watcher", run) }

func flags(c *config) (*flag.FlagSet, map[string]string) {
	fs := flag.NewFlagSet("watcher", flag.ContinueOnError)
	fs.StringVar(&c.imap, "imap", "", "mailbox URL: imaps://USER@HOST[:PORT]/MAILBOX or imap://... (required)")
	fs.StringVar(&c.passwordFile, "password-file", "", "file holding the IMAP password ($CHIBRARY_IMAP_PASSWORD holds the password itself)")
	fs.Var(&c.after, "after", "what to do with a message once it is stored: keep, seen, delete or move:FOLDER")
	fs.StringVar(&c.state, "state", "", "state file (UIDVALIDITY, last UID); default DATA/watcher/USER@HOST_PORT_MAILBOX-HASH.json, required with --store")
	fs.StringVar(&c.list, "list", "", "mailing list name recorded with every message")
	fs.StringVar(&c.metricsListen, "metrics-listen", "", "serve Prometheus metrics on ADDR/metrics (off by default)")
	fs.BoolVar(&c.insecureVerify, "insecure-skip-verify", false, "do NOT verify the server's TLS certificate (anyone on the path can read the password)")
	fs.StringVar(&c.tlsCA, "tls-ca", "", "PEM file of the CA certificate(s) to trust for the server, instead of the system roots (for a private CA)")
	fs.BoolVar(&c.allowPlain, "allow-plaintext-login", false, "send the password unencrypted when an imap:// server on a non-loopback address offers no STARTTLS")
	fs.DurationVar(&c.poll, "poll-interval", time.Minute, "how often to check for new mail on a server without IDLE")
	fs.DurationVar(&c.idleRefresh, "idle-refresh", 25*time.Minute, "restart IDLE this often (servers may drop a client idle for 30 minutes)")
	fs.IntVar(&c.batch, "batch-messages", 100, "messages per fetch-and-store batch (batches are also capped at 16 MiB)")
	c.store.AddFlags(fs)
	c.runs.AddFlags(fs)
	c.log.AddFlags(fs)
	env := map[string]string{
		"imap": "CHIBRARY_IMAP", "password-file": "CHIBRARY_IMAP_PASSWORD_FILE", "after": "CHIBRARY_AFTER",
		"metrics-listen": "CHIBRARY_METRICS_LISTEN", "state": "CHIBRARY_WATCHER_STATE", "tls-ca": "CHIBRARY_IMAP_CA",
		"log-format": "CHIBRARY_LOG_FORMAT", "log-level": "CHIBRARY_LOG_LEVEL",
	}
	for k, v := range c.store.Env() {
		env[k] = v
	}
	for k, v := range c.runs.Env() {
		env[k] = v
	}
	fs.Usage = cli.Usage(fs, usage, env)
	return fs, env
}

func run(ctx context.Context, args []string, _ io.Reader, _, stderr io.Writer) error {
	var c config
	fs, env := flags(&c)
	if err := cli.Parse(fs, args, env); err != nil {
		return err
	}
	fs.Visit(func(f *flag.Flag) { c.dataSet = c.dataSet || f.Name == "data" })
	c.dataSet = c.dataSet || os.Getenv("CHIBRARY_DATA") != ""
	if fs.NArg() > 0 {
		return cli.Usagef("unexpected argument %q", fs.Arg(0))
	}
	if c.imap == "" {
		return cli.Usagef("--imap is required")
	}
	target, err := imapwatch.ParseURL(c.imap)
	if err != nil {
		return cli.Usagef("--imap: %v", err)
	}
	// Checked again by imapwatch.New, but before the store is opened
	// (created, if missing) for nothing.
	if c.after.Action == imapwatch.Move && c.after.Folder == target.Mailbox {
		return cli.Usagef("--after: cannot move messages to the mailbox they are in (%s)", target.Mailbox)
	}
	if c.batch < 1 {
		return cli.Usagef("--batch-messages must be at least 1")
	}
	if c.tlsCA != "" && c.insecureVerify {
		return cli.Usagef("--tls-ca and --insecure-skip-verify contradict each other: the first verifies the certificate against FILE, the second does not verify it")
	}
	if c.store.Store != "" && !c.dataSet && c.state == "" {
		return cli.Usagef("with --store, give --state FILE (or --data DIR for the default state file)")
	}
	password, err := readPassword(c.passwordFile)
	if err != nil {
		return err
	}
	log, err := c.log.Logger(stderr)
	if err != nil {
		return err
	}
	if c.state == "" {
		c.state = defaultState(c.store.Data, target)
	}
	// imapwatch logs a warning when verification is off.
	var tlsConfig *tls.Config
	if c.insecureVerify {
		tlsConfig = &tls.Config{InsecureSkipVerify: true}
	}
	if c.tlsCA != "" {
		pool, err := loadCA(c.tlsCA)
		if err != nil {
			return err
		}
		tlsConfig = &tls.Config{RootCAs: pool}
	}

	st, err := c.store.Open(ctx, log)
	if err != nil {
		return fmt.Errorf("cannot open store: %w", err)
	}
	defer st.Close()
	runs, err := c.runs.Source(ctx, c.store.Data, "watcher", log)
	if err != nil {
		return err
	}
	arc, err := ingest.NewArchiver(ingest.Options{Store: st, Runs: runs, List: c.list, Logger: log})
	if err != nil {
		return err
	}

	var metrics *imapwatch.Metrics
	var wg sync.WaitGroup
	if c.metricsListen != "" {
		reg := prometheus.NewRegistry()
		metrics = imapwatch.NewMetrics(reg)
		srv, err := serveMetrics(c.metricsListen, reg, log, &wg)
		if err != nil {
			return err
		}
		defer func() {
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
			wg.Wait()
		}()
	}

	w, err := imapwatch.New(imapwatch.Options{
		Archiver: arc, Addr: target.Addr, Security: target.Security, TLSConfig: tlsConfig,
		AllowPlaintext: c.allowPlain, User: target.User, Password: password, Mailbox: target.Mailbox,
		After: c.after, StatePath: c.state, Logger: log, Metrics: metrics,
		PollInterval: c.poll, IdleRefresh: c.idleRefresh, BatchMessages: c.batch,
	})
	if err != nil {
		if errors.Is(err, imapwatch.ErrBadAfter) || errors.Is(err, imapwatch.ErrOptions) {
			return cli.Usagef("%v", err)
		}
		return err
	}
	err = w.Run(ctx)
	var ua x509.UnknownAuthorityError
	if errors.As(err, &ua) {
		if c.tlsCA == "" {
			return fmt.Errorf("%w (if the server's certificate comes from a private CA, trust it with --tls-ca FILE)", err)
		}
		return fmt.Errorf("%w (the certificate is not signed by a CA in %s)", err, c.tlsCA)
	}
	return err
}

// loadCA reads the PEM certificates of file into a new pool: the CAs
// trusted instead of the system roots.
func loadCA(file string) (*x509.CertPool, error) {
	b, err := os.ReadFile(file)
	if err != nil {
		return nil, fmt.Errorf("cannot read --tls-ca: %w", err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, fmt.Errorf("cannot use --tls-ca %s: it holds no PEM certificate", file)
	}
	return pool, nil
}

// readPassword reads the password from file, or from
// $CHIBRARY_IMAP_PASSWORD. Errors never contain it.
func readPassword(file string) (string, error) {
	if file != "" {
		return cli.ReadSecret(file)
	}
	if p := strings.TrimSpace(os.Getenv("CHIBRARY_IMAP_PASSWORD")); p != "" {
		return p, nil
	}
	return "", cli.Usagef("no IMAP password: give --password-file or set $CHIBRARY_IMAP_PASSWORD")
}

// defaultState names the state file of a mailbox in the data directory:
// readable, and unique per user, server and mailbox thanks to the hash.
func defaultState(data string, t imapwatch.Target) string {
	key := t.User + "@" + t.Addr + "/" + t.Mailbox
	sum := sha256.Sum256([]byte(key))
	clean := strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' || r == '@' || r == '.' || r == '-' {
			return r
		}
		return '_'
	}, key)
	return filepath.Join(data, "watcher", clean+"-"+hex.EncodeToString(sum[:4])+".json")
}

func serveMetrics(addr string, reg *prometheus.Registry, log *slog.Logger, wg *sync.WaitGroup) (*http.Server, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("cannot listen for metrics: %w", err)
	}
	mux := http.NewServeMux()
	mux.Handle("/metrics", promhttp.HandlerFor(reg, promhttp.HandlerOpts{Registry: reg}))
	srv := &http.Server{Handler: mux, ReadHeaderTimeout: 10 * time.Second}
	log.Info("serving metrics", "addr", ln.Addr().String())
	wg.Add(1)
	go func() {
		defer wg.Done()
		if err := srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server failed", "err", err)
		}
	}()
	return srv, nil
}
