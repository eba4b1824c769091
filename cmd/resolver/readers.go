package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/imapserve"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/nntpserve"
	"github.com/chibrary/chibrary/store"
)

// readerFlags are serve's flags for mail and news readers: IMAP and NNTP.
type readerFlags struct {
	imap, imaps, nntp, nntps string
	prefix                   string
	cert, key                string
	maxConns, maxConnsPerIP  int
	idle                     time.Duration
	// ownNumbers serves NNTP on a mirror all the same (checkMirror).
	ownNumbers bool
}

func (f *readerFlags) AddFlags(fs *cli.FlagSet) {
	fs.String(&f.imap, "imap", "", "CHIBRARY_IMAP", "serve IMAP on `ADDR` (host:port, e.g. 127.0.0.1:1143); off without it")
	fs.String(&f.imaps, "imaps", "", "CHIBRARY_IMAPS", "serve IMAP with TLS from the first byte on `ADDR` (e.g. :993); needs --tls-cert")
	fs.String(&f.nntp, "nntp", "", "CHIBRARY_NNTP", "serve NNTP on `ADDR` (e.g. 127.0.0.1:1119); off without it")
	fs.String(&f.nntps, "nntps", "", "CHIBRARY_NNTPS", "serve NNTP with TLS from the first byte on `ADDR` (e.g. :563); needs --tls-cert")
	fs.Bool(&f.ownNumbers, "nntp-own-numbers", false, "CHIBRARY_NNTP_OWN_NUMBERS", "on a mirror, serve NNTP all the same, with article numbers of its own: not its origin's, so newsreaders must start afresh here")
	fs.String(&f.prefix, "nntp-prefix", nntpserve.DefaultPrefix, "CHIBRARY_NNTP_PREFIX", "newsgroups are `PREFIX`.LIST")
	fs.String(&f.cert, "tls-cert", "", "CHIBRARY_TLS_CERT", "TLS certificate chain `FILE` (PEM) for IMAP and NNTP: STARTTLS on --imap and --nntp, and --imaps, --nntps")
	fs.String(&f.key, "tls-key", "", "CHIBRARY_TLS_KEY", "the certificate's private key `FILE` (PEM)")
	fs.Int(&f.maxConns, "max-connections", netserve.DefaultMaxConns, "CHIBRARY_MAX_CONNECTIONS", "IMAP and NNTP: at most `N` connections open on each listener")
	fs.Int(&f.maxConnsPerIP, "max-connections-per-ip", netserve.DefaultMaxConnsPerIP, "CHIBRARY_MAX_CONNECTIONS_PER_IP", "IMAP and NNTP: at most `N` connections from one client address on each listener")
	fs.Duration(&f.idle, "idle-timeout", netserve.DefaultIdleTimeout, "CHIBRARY_IDLE_TIMEOUT", "IMAP and NNTP: close a connection that sends nothing for `DURATION` (IMAP's IDLE included: clients renew it)")
}

// any reports whether a reader protocol is asked for.
func (f *readerFlags) any() bool {
	return f.imap != "" || f.imaps != "" || f.nntp != "" || f.nntps != ""
}

// check refuses contradictory flags (bad usage): TLS listeners without a
// certificate, a plain listener off loopback without one (its clients
// could not start TLS), half a certificate, a bad prefix, bad limits.
func (f *readerFlags) check() error {
	if (f.cert == "") != (f.key == "") {
		return cli.Usagef("--tls-cert and --tls-key go together")
	}
	for _, l := range []struct{ flag, addr string }{{"imaps", f.imaps}, {"nntps", f.nntps}} {
		if l.addr != "" && f.cert == "" {
			return cli.Usagef("--%s needs --tls-cert and --tls-key", l.flag)
		}
	}
	for _, l := range []struct{ flag, addr string }{{"imap", f.imap}, {"nntp", f.nntp}} {
		if l.addr != "" && f.cert == "" && !netserve.Loopback(l.addr) {
			return cli.Usagef("--%s %s is not a loopback address: without --tls-cert and --tls-key its clients would send everything in plain text; listen on 127.0.0.1, or give a certificate (clients then use STARTTLS)", l.flag, l.addr)
		}
	}
	if !nntpserve.ValidPrefix(f.prefix) {
		return cli.Usagef("--nntp-prefix %q: dot-separated words of a-z, 0-9, _, + and -", f.prefix)
	}
	if f.maxConns <= 0 || f.maxConnsPerIP <= 0 || f.idle <= 0 {
		return cli.Usagef("--max-connections, --max-connections-per-ip and --idle-timeout must be positive")
	}
	return nil
}

// checkMirror refuses NNTP on a mirror (a data directory a mirror fills,
// dir) unless --nntp-own-numbers: a mirror numbers a list's articles in
// the order its own catalog indexes them, which need not be its origin's,
// and NNTP has no UIDVALIDITY to tell a newsreader that the numbers it
// kept (.newsrc) name other articles here. IMAP has one: the mirror's
// catalog has its own, and IMAP clients start afresh.
func (f *readerFlags) checkMirror(dir string) error {
	if f.nntp == "" && f.nntps == "" || f.ownNumbers || dir == "" {
		return nil // dir "": a Riak store without --data, no mirror state
	}
	origins, err := mirror.Origins(dir)
	if err != nil {
		return fmt.Errorf("cannot tell whether %s is a mirror: %w", dir, err)
	}
	if len(origins) == 0 {
		return nil
	}
	return fmt.Errorf("%s is a mirror of %s: its NNTP article numbers are its own, not its origin's, so a newsreader moved here from the origin would read the wrong articles. Point newsreaders at the origin's NNTP, or give --nntp-own-numbers to serve this mirror's numbers to newsreaders that start here", dir, strings.Join(origins, ", "))
}

// readers are the IMAP and NNTP listeners of serve.
type readers struct {
	imap, nntp []net.Listener
	imapTLS    []bool
	nntpTLS    []bool
	tls        *tls.Config
}

// listen opens the listeners and loads the certificate.
func (f *readerFlags) listen(ctx context.Context) (*readers, error) {
	r := &readers{}
	if f.cert != "" {
		pair, err := tls.LoadX509KeyPair(f.cert, f.key)
		if err != nil {
			return nil, fmt.Errorf("cannot load the TLS certificate: %w", err)
		}
		r.tls = &tls.Config{Certificates: []tls.Certificate{pair}, MinVersion: tls.VersionTLS12}
	}
	add := func(addr string, isTLS bool, lns *[]net.Listener, tlss *[]bool) error {
		if addr == "" {
			return nil
		}
		ln, err := (&net.ListenConfig{}).Listen(ctx, "tcp", addr)
		if err != nil {
			return fmt.Errorf("cannot listen: %w", err)
		}
		*lns = append(*lns, ln)
		*tlss = append(*tlss, isTLS)
		return nil
	}
	for _, l := range []struct {
		addr string
		tls  bool
		lns  *[]net.Listener
		tlss *[]bool
	}{
		{f.imap, false, &r.imap, &r.imapTLS}, {f.imaps, true, &r.imap, &r.imapTLS},
		{f.nntp, false, &r.nntp, &r.nntpTLS}, {f.nntps, true, &r.nntp, &r.nntpTLS},
	} {
		if err := add(l.addr, l.tls, l.lns, l.tlss); err != nil {
			r.close()
			return nil, err
		}
	}
	return r, nil
}

func (r *readers) close() {
	for _, ln := range append(r.imap, r.nntp...) {
		ln.Close()
	}
}

// serve serves IMAP and NNTP until ctx is done, and returns the first
// error that stopped one of them; their large messages are sent from
// files in spoolDir.
func (r *readers) serve(ctx context.Context, f *readerFlags, k *keeper.Keeper, st store.Store, reg prometheus.Registerer, log *slog.Logger, spoolDir string) error {
	// A catalog that cannot be opened now (damaged: being rebuilt) is
	// waited for, its commands answered with a temporary error
	// meanwhile; without a place for one there will never be one.
	c, release := k.Current()
	release()
	if c == nil && k.Path() == "" {
		r.close()
		return errors.New("cannot serve IMAP or NNTP without a catalog: they list its lists and number their messages")
	}
	limits := netserve.Options{MaxConns: f.maxConns, MaxConnsPerIP: f.maxConnsPerIP, IdleTimeout: f.idle}
	var runs []func(context.Context) error
	if len(r.imap) > 0 {
		s, err := imapserve.New(k, st, imapserve.Options{Logger: log, Registerer: reg, TLS: r.tls, Limits: limits, SpoolDir: spoolDir})
		if err != nil {
			r.close()
			return err
		}
		var ls []imapserve.Listener
		for i, ln := range r.imap {
			ls = append(ls, imapserve.Listener{Listener: ln, TLS: r.imapTLS[i]})
		}
		runs = append(runs, func(ctx context.Context) error { return s.Serve(ctx, ls...) })
	}
	if len(r.nntp) > 0 {
		s, err := nntpserve.New(k, st, nntpserve.Options{Prefix: f.prefix, Logger: log, Registerer: reg, TLS: r.tls, Limits: limits, SpoolDir: spoolDir})
		if err != nil {
			r.close()
			return err
		}
		var ls []nntpserve.Listener
		for i, ln := range r.nntp {
			ls = append(ls, nntpserve.Listener{Listener: ln, TLS: r.nntpTLS[i]})
		}
		runs = append(runs, func(ctx context.Context) error { return s.Serve(ctx, ls...) })
	}
	return runAll(ctx, runs...)
}

// runAll runs every function until ctx is done or one fails, which
// stops the others; it waits for them all and returns the first error.
func runAll(ctx context.Context, runs ...func(context.Context) error) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg    sync.WaitGroup
		once  sync.Once
		first error
	)
	for _, run := range runs {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				once.Do(func() { first = err })
				cancel()
			}
		})
	}
	wg.Wait()
	return first
}
