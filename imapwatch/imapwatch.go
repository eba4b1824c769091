// Package imapwatch follows one IMAP mailbox and archives every message in
// it: first those already there, in UID order and in bounded batches, then
// each new one as IDLE (RFC 2177) or polling finds it.
//
// Only after the store has durably accepted a batch does the watcher act on
// its messages (--after) and record the mailbox's UIDVALIDITY and highest
// UID in its state file. A crash anywhere in that order costs at most a
// re-fetch, which the store's digest index turns into duplicates: a message
// never gets two call numbers. Run reconnects after network and server
// errors and goes on from the state it saved.
package imapwatch

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"time"

	"github.com/emersion/go-imap/v2"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/store"
)

// Sentinel errors.
var (
	ErrBadAfter  = errors.New("imapwatch: bad --after")
	ErrBadURL    = errors.New("imapwatch: bad IMAP URL")
	ErrOptions   = errors.New("imapwatch: bad options")
	ErrAuth      = errors.New("imapwatch: login refused")
	ErrPlaintext = errors.New("imapwatch: refusing to send the password unencrypted")
	// ErrNoMailbox is fatal at the first connection only: later, a mailbox
	// may have been deleted and recreated.
	ErrNoMailbox     = errors.New("imapwatch: no such mailbox")
	ErrBadState      = errors.New("imapwatch: unreadable state file")
	ErrStateMismatch = errors.New("imapwatch: state file is for another mailbox")
	ErrTooLarge      = errors.New("imapwatch: message too large")
)

// Security says how the connection is protected.
type Security int

// The securities. StartTLS (RFC 9051 section 6.2.1) stays plain when the
// server does not offer it, and LOGIN is then refused unless the server is
// on loopback or Options.AllowPlaintext is set.
const (
	ImplicitTLS Security = iota // imaps://
	StartTLS                    // imap://
)

// Options configure a Watcher. Archiver, Addr, User, Password and StatePath
// are required; zero values of the others are defaults.
type Options struct {
	Archiver *ingest.Archiver
	Addr     string // host:port
	Security Security
	// TLSConfig nil verifies the server's certificate against the system
	// roots. InsecureSkipVerify is obeyed, with a warning at every Run.
	TLSConfig *tls.Config
	// AllowPlaintext permits LOGIN unencrypted to a non-loopback address;
	// without it, that fails with ErrPlaintext.
	AllowPlaintext bool
	User, Password string // never logged nor put in an error
	Mailbox        string // "" is INBOX
	// After is done to each archived message, and to one the archive
	// refuses because it was removed from it.
	After After
	// ArchiveNoArchive archives the messages that ask not to be
	// (mailmsg.Meta.NoArchive); without it, they are skipped and left alone.
	ArchiveNoArchive bool
	StatePath        string
	Logger           *slog.Logger  // nil discards
	Metrics          *Metrics      // nil records nothing
	PollInterval     time.Duration // for a server without IDLE; zero is one minute
	// IdleRefresh restarts IDLE well within the 30 minutes after which RFC
	// 2177 section 3 lets a server drop an idle client; zero is 25 minutes.
	IdleRefresh time.Duration
	// BatchMessages and BatchBytes bound one fetch-and-store batch; zero is
	// 100 messages and 16 MiB.
	BatchMessages int
	BatchBytes    int64
	// MaxMessageSize: a larger message is reported and left in the
	// mailbox. Zero is 64 MiB, the importer's limit.
	MaxMessageSize int64
	// CommandTimeout is how long the server may stay silent on a command
	// before the connection is taken as dead; zero is 2 minutes.
	CommandTimeout time.Duration
	// MinBackoff and MaxBackoff bound the wait before reconnecting, reset
	// after a session that reached the mailbox; zero is 1s and 5 minutes.
	MinBackoff, MaxBackoff time.Duration
	// Dial nil is a net.Dialer with a 30-second timeout.
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Watcher follows one mailbox. Create it with New and call Run once.
type Watcher struct {
	opts    Options
	log     *slog.Logger
	host    string
	wake    chan struct{} // the server announced new messages
	onIdle  func()        // tests: called each time the watcher waits
	unsaved bool          // the last state write failed for a full disk
}

// New checks opts, fills in defaults and returns a Watcher.
func New(opts Options) (*Watcher, error) {
	if opts.Archiver == nil {
		return nil, fmt.Errorf("%w: Archiver is required", ErrOptions)
	}
	return newWatcher(opts)
}

// Check logs in and looks the mailbox up, so that a program learns that
// the server, password or mailbox is wrong before it creates an archive.
// opts.Archiver and StatePath may be unset.
func Check(ctx context.Context, opts Options) error {
	if opts.StatePath == "" {
		opts.StatePath = "-"
	}
	w, err := newWatcher(opts)
	if err != nil {
		return err
	}
	c, _, err := w.connect(ctx)
	if err != nil {
		var oe *net.OpError
		if errors.As(err, &oe) && oe.Op == "dial" {
			return fmt.Errorf("%w (is the host and port of --imap right?)", err)
		}
		return err
	}
	defer w.logout(c)
	g := w.guard(c)
	defer g.stop()
	if _, err := c.Status(w.opts.Mailbox, &imap.StatusOptions{NumMessages: true}).Wait(); err != nil {
		if ie, ok := imapError(err); ok && ie.Type == imap.StatusResponseTypeNo {
			return fmt.Errorf("%w: %s on %s: %s", ErrNoMailbox, w.opts.Mailbox, w.opts.Addr, ie.Text)
		}
		return fmt.Errorf("cannot look up mailbox %s on %s: %w", w.opts.Mailbox, w.opts.Addr, err)
	}
	return nil
}

func newWatcher(opts Options) (*Watcher, error) {
	switch {
	case opts.Addr == "":
		return nil, fmt.Errorf("%w: Addr is required", ErrOptions)
	case opts.User == "" || opts.Password == "":
		return nil, fmt.Errorf("%w: User and Password are required", ErrOptions)
	case opts.StatePath == "":
		return nil, fmt.Errorf("%w: StatePath is required", ErrOptions)
	case opts.Security != ImplicitTLS && opts.Security != StartTLS:
		return nil, fmt.Errorf("%w: unknown Security %d", ErrOptions, opts.Security)
	}
	host, _, err := net.SplitHostPort(opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("%w: Addr %q: %v", ErrOptions, opts.Addr, err)
	}
	if _, err := ParseAfter(opts.After.String()); err != nil {
		return nil, err
	}
	if opts.Mailbox == "" {
		opts.Mailbox = "INBOX"
	}
	if opts.After.Action == Move && opts.After.Folder == opts.Mailbox {
		return nil, fmt.Errorf("%w: cannot move messages to the mailbox they are in (%s)", ErrBadAfter, opts.Mailbox)
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	def := func(d *time.Duration, v time.Duration) {
		if *d <= 0 {
			*d = v
		}
	}
	def(&opts.PollInterval, time.Minute)
	def(&opts.IdleRefresh, 25*time.Minute)
	def(&opts.CommandTimeout, 2*time.Minute)
	def(&opts.MinBackoff, time.Second)
	def(&opts.MaxBackoff, 5*time.Minute)
	if opts.BatchMessages <= 0 {
		opts.BatchMessages = 100
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = 16 << 20
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = 64 << 20
	}
	if opts.Dial == nil {
		d := &net.Dialer{Timeout: 30 * time.Second}
		opts.Dial = d.DialContext
	}
	return &Watcher{
		opts: opts,
		log:  opts.Logger.With("mailbox", opts.Mailbox),
		host: host,
		wake: make(chan struct{}, 1),
	}, nil
}

// Run archives the mailbox and follows it until ctx is cancelled, then
// finishes the batch in progress and returns nil. It returns an error only
// for what reconnecting cannot fix: a refused login, a bad certificate, a
// store refusing a batch for a safety rule...
func (w *Watcher) Run(ctx context.Context) error {
	st, err := LoadState(w.opts.StatePath)
	if err != nil {
		return err
	}
	if st.Server != "" && (st.Server != w.opts.Addr || st.User != w.opts.User || st.Mailbox != w.opts.Mailbox) {
		return fmt.Errorf("%w: %s is for %s@%s/%s", ErrStateMismatch, w.opts.StatePath, st.User, st.Server, st.Mailbox)
	}
	st.Server, st.User, st.Mailbox = w.opts.Addr, w.opts.User, w.opts.Mailbox
	w.log.Info("watching", "server", w.opts.Addr, "user", w.opts.User, "after", w.opts.After.String(),
		"uidvalidity", st.UIDValidity, "last_uid", st.LastUID)
	if w.opts.TLSConfig != nil && w.opts.TLSConfig.InsecureSkipVerify {
		w.log.Warn("TLS certificate verification is OFF (InsecureSkipVerify): the server's certificate is NOT checked; anyone on the network path can impersonate the server and read the password",
			"server", w.opts.Addr)
	}

	var failures int // consecutive failed sessions
	for session := 0; ; session++ {
		if session > 0 {
			w.opts.Metrics.reconnect()
		}
		reached, err := w.session(ctx, &st, session == 0)
		if ctx.Err() != nil {
			w.log.Info("stopped", "last_uid", st.LastUID)
			return nil
		}
		if err == nil { // the server ended a healthy session (e.g. BYE)
			err = errors.New("connection closed")
		}
		w.opts.Metrics.error()
		if fatal(err) {
			return err
		}
		if reached {
			failures = 0
		}
		delay := backoff(w.opts.MinBackoff, w.opts.MaxBackoff, failures)
		failures++
		w.log.Warn("connection lost; reconnecting", "err", err, "in", delay.Round(time.Millisecond))
		t := time.NewTimer(delay)
		select {
		case <-ctx.Done():
			t.Stop()
			w.log.Info("stopped", "last_uid", st.LastUID)
			return nil
		case <-t.C:
		}
	}
}

// backoff jitters the wait (a random half of it) so that watchers cut off
// together do not reconnect together.
func backoff(minD, maxD time.Duration, n int) time.Duration {
	d := minD
	for i := 0; i < n && d < maxD; i++ {
		d *= 2
	}
	d = min(d, maxD)
	half := d / 2
	return half + rand.N(d-half+1)
}

// fatalError marks an error reconnecting will not fix.
type fatalError struct{ err error }

func (e fatalError) Error() string { return e.err.Error() }
func (e fatalError) Unwrap() error { return e.err }

func fatal(err error) bool {
	var fe fatalError
	var cv *tls.CertificateVerificationError
	var ua x509.UnknownAuthorityError
	var hn x509.HostnameError
	switch {
	case errors.As(err, &fe), errors.As(err, &cv), errors.As(err, &ua), errors.As(err, &hn):
		return true
	case errors.Is(err, ErrAuth), errors.Is(err, ErrPlaintext), errors.Is(err, ErrStateMismatch), errors.Is(err, ErrBadState):
		return true
	// The store refusing a batch for a safety rule is not transient.
	case errors.Is(err, store.ErrNumberTaken), errors.Is(err, store.ErrForeignAuthority),
		errors.Is(err, store.ErrRunReused), errors.Is(err, store.ErrUnknownRun),
		errors.Is(err, store.ErrClosed), errors.Is(err, callnumber.ErrLease):
		return true
	}
	return false
}

func imapError(err error) (*imap.Error, bool) {
	var ie *imap.Error
	ok := errors.As(err, &ie)
	return ie, ok
}
