// Command watcher follows an IMAP mailbox and archives every message in it,
// then each new one as it arrives.
package main

import (
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/cmd/internal/setup"
	"github.com/chibrary/chibrary/imapwatch"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/httpserve"
)

const usage = `
Usage: watcher --imap imaps://USER@HOST[:PORT]/MAILBOX --password-file F
               [--after keep|seen|delete|move:FOLDER]
               [--data DIR | --store URL]
               [--coordinator URL --token-file F | --authority URL]

Archives every message of the mailbox (oldest UID first), then waits with
IDLE (polling where the server has no IDLE) and archives new messages as
they arrive. A message is flagged, moved or deleted (--after) only once the
store has durably accepted it; one that cannot be archived is left alone.
The mailbox's UIDVALIDITY and last archived UID are kept in a state file
(by default under DATA/watcher/); a re-fetched message is recognised as a
duplicate, never given a second call number, and one removed from the
archive (resolver remove) is not taken again. As Mailman does, a message
with an X-No-Archive field (or "X-Archive: no") is not archived: it is
logged and counted as skipped and left as it is in the mailbox
(--archive-no-archive archives it like any other). Network and server errors
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
  watcher --imap imaps://list@mail.example.org/INBOX --password-file pw \
          --store riak://r1:8087,r2:8087,r3:8087 --authority riak://r1:8087,r2:8087,r3:8087

Runs come from the coordinator (--coordinator), from the authority
--authority names (bolt:PATH, or riak://... for one in the Riak cluster,
which needs no coordinator: docs/authority.md), or else from the local
authority DATA/runs.db.
`

func main() { cli.Main("watcher", run) }

func run(ctx context.Context, args []string, _ io.Reader, stdout, stderr io.Writer) error {
	var (
		st                                          setup.StoreFlags
		runs                                        setup.RunFlags
		logs                                        cli.LogOptions
		o                                           imapwatch.Options
		imapURL, passwordFile, list, metrics, tlsCA string
		insecure                                    bool
	)
	fs := cli.NewFlagSet("watcher", usage)
	fs.String(&imapURL, "imap", "", "CHIBRARY_IMAP", "mailbox `URL`: imaps://USER@HOST[:PORT]/MAILBOX or imap://... (required)")
	fs.String(&passwordFile, "password-file", "", "CHIBRARY_IMAP_PASSWORD_FILE", "`FILE` holding the IMAP password ($CHIBRARY_IMAP_PASSWORD holds the password itself)")
	fs.Var(&o.After, "after", "CHIBRARY_AFTER", "what to do with a message once it is stored: `keep|seen|delete|move:FOLDER`")
	fs.String(&o.StatePath, "state", "", "CHIBRARY_WATCHER_STATE", "state `FILE` (UIDVALIDITY, last UID); default DATA/watcher/USER@HOST_PORT_MAILBOX-HASH.json (beside a bolt: store), required with a Riak --store without --data")
	fs.String(&list, "list", "", "", "mailing list `NAME` recorded with every message")
	fs.Bool(&o.ArchiveNoArchive, "archive-no-archive", false, "", "archive the messages that ask not to be (X-No-Archive) like any other")
	fs.String(&metrics, "metrics-listen", "", "CHIBRARY_METRICS_LISTEN", "serve Prometheus metrics on `ADDR`/metrics (off by default)")
	fs.Bool(&insecure, "insecure-skip-verify", false, "", "do NOT verify the server's TLS certificate (anyone on the path can read the password)")
	fs.String(&tlsCA, "tls-ca", "", "CHIBRARY_IMAP_CA", "PEM `FILE` of the CA certificate(s) to trust for the server, instead of the system roots (for a private CA)")
	fs.Bool(&o.AllowPlaintext, "allow-plaintext-login", false, "", "send the password unencrypted when an imap:// server on a non-loopback address offers no STARTTLS")
	fs.Duration(&o.PollInterval, "poll-interval", time.Minute, "", "how often (`DURATION`) to check for new mail on a server without IDLE")
	fs.Duration(&o.IdleRefresh, "idle-refresh", 25*time.Minute, "", "restart IDLE this often (`DURATION`; servers may drop a client idle for 30 minutes)")
	fs.Int(&o.BatchMessages, "batch-messages", 100, "", "`N` messages per fetch-and-store batch (batches are also capped at 16 MiB)")
	st.AddFlags(fs)
	runs.AddFlags(fs)
	logs.AddFlags(fs)
	rest, err := fs.Parse(args, stdout)
	if err != nil {
		return err
	}
	if err := cli.NoArgs(rest); err != nil {
		return err
	}
	// Everything that can be checked is, before the store is opened
	// (created, if missing) for nothing.
	if imapURL == "" {
		return cli.Usagef("--imap is required")
	}
	target, err := imapwatch.ParseURL(imapURL)
	if err != nil {
		return cli.Usagef("--imap: %v", err)
	}
	o.Addr, o.Security, o.User, o.Mailbox = target.Addr, target.Security, target.User, target.Mailbox
	if o.After.Action == imapwatch.Move && o.After.Folder == target.Mailbox {
		return cli.Usagef("--after: cannot move messages to the mailbox they are in (%s)", target.Mailbox)
	}
	if metrics != "" {
		if err := cli.CheckListen("metrics-listen", metrics); err != nil {
			return err
		}
	}
	if o.BatchMessages < 1 {
		return cli.Usagef("--batch-messages must be at least 1")
	}
	files, err := st.Files()
	if err != nil {
		return err
	}
	if o.StatePath == "" {
		if err := files.Need("--state FILE", "the default state file"); err != nil {
			return err
		}
	}
	if o.TLSConfig, err = imapwatch.TLSConfig(tlsCA, insecure); errors.Is(err, imapwatch.ErrTLSOptions) {
		return cli.Usagef("--tls-ca and --insecure-skip-verify: %v", err)
	} else if err != nil {
		return fmt.Errorf("--tls-ca: %w", err)
	}
	if o.Password, err = cli.Secret(passwordFile, "CHIBRARY_IMAP_PASSWORD", "password-file", false); err != nil {
		return err
	} else if o.Password == "" {
		return cli.Usagef("no IMAP password: give --password-file or set $CHIBRARY_IMAP_PASSWORD")
	}
	if o.StatePath == "" {
		o.StatePath = imapwatch.DefaultStatePath(files.Dir, target)
	}
	if o.Logger, err = logs.Logger(stderr); err != nil {
		return err
	}
	// SIGINT or SIGTERM before the first batch (the IMAP check, the store
	// or the runs still being reached) is a stop like any other: nothing
	// was taken from the mailbox.
	return cli.StoppedStarting(ctx, o.Logger, watch(ctx, o, st, files, runs, list, metrics, tlsCA))
}

// watch checks the server, opens the archive and follows the mailbox
// until ctx is done.
func watch(ctx context.Context, o imapwatch.Options, st setup.StoreFlags, files setup.Files, runs setup.RunFlags, list, metrics, tlsCA string) error {
	// The server, the password and the mailbox are checked before the
	// archive is opened: a mistake creates nothing.
	if err := imapwatch.Check(ctx, o); err != nil {
		return explainTLS(err, tlsCA)
	}

	db, err := st.Open(ctx, o.Logger)
	if err != nil {
		return err
	}
	defer db.Close()
	src, err := runs.Source(ctx, db, files, "watcher", o.Logger)
	if err != nil {
		return err
	}
	if c, ok := src.(io.Closer); ok {
		defer c.Close()
	}
	if o.Archiver, err = ingest.NewArchiver(ingest.Options{Store: db, Runs: src, List: list, Logger: o.Logger}); err != nil {
		return err
	}
	if metrics != "" {
		reg := prometheus.NewRegistry()
		o.Metrics = imapwatch.NewMetrics(reg)
		srv, err := httpserve.ServeMetrics(metrics, reg, o.Logger)
		if err != nil {
			return err
		}
		defer srv.Close()
	}
	w, err := imapwatch.New(o)
	if errors.Is(err, imapwatch.ErrBadAfter) || errors.Is(err, imapwatch.ErrOptions) {
		return cli.Usagef("%v", err)
	} else if err != nil {
		return err
	}
	return explainTLS(w.Run(ctx), tlsCA)
}

// explainTLS adds to a certificate the watcher could not verify what to
// do about it.
func explainTLS(err error, tlsCA string) error {
	if ua := (x509.UnknownAuthorityError{}); errors.As(err, &ua) && tlsCA == "" {
		return fmt.Errorf("%w (if the server's certificate comes from a private CA, trust it with --tls-ca FILE)", err)
	} else if errors.As(err, &ua) {
		return fmt.Errorf("%w (the certificate is not signed by a CA in %s)", err, tlsCA)
	}
	return err
}
