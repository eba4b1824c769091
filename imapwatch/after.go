package imapwatch

import (
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"
)

// Action is what the watcher does to a message in the mailbox once the
// store has durably accepted it.
type Action string

// Actions; the zero value means Keep.
const (
	Keep   Action = "keep"
	Seen   Action = "seen"
	Delete Action = "delete" // flag \Deleted and expunge
	Move   Action = "move"   // to After.Folder
)

// After is the --after setting: an Action, and the folder for Move.
type After struct {
	Action Action
	Folder string
}

// ParseAfter reads "keep", "seen", "delete" or "move:FOLDER"; "" is Keep.
func ParseAfter(s string) (After, error) {
	switch s {
	case "", string(Keep):
		return After{Action: Keep}, nil
	case string(Seen), string(Delete):
		return After{Action: Action(s)}, nil
	}
	if folder, ok := strings.CutPrefix(s, string(Move)+":"); ok {
		if folder == "" {
			return After{}, fmt.Errorf("%w: move needs a folder: move:FOLDER", ErrBadAfter)
		}
		return After{Action: Move, Folder: folder}, nil
	}
	return After{}, fmt.Errorf("%w: %q: want keep, seen, delete or move:FOLDER", ErrBadAfter, s)
}

// String returns the setting as ParseAfter reads it.
func (a After) String() string {
	switch a.Action {
	case "":
		return string(Keep)
	case Move:
		return string(Move) + ":" + a.Folder
	}
	return string(a.Action)
}

// Set implements flag.Value.
func (a *After) Set(s string) error {
	v, err := ParseAfter(s)
	if err != nil {
		return err
	}
	*a = v
	return nil
}

func (a After) modifies() bool { return a.Action != "" && a.Action != Keep }

// apply does a to uids of the selected mailbox; the caller has made sure
// the store holds every one of them.
func (a After) apply(c *imapclient.Client, uids imap.UIDSet) error {
	if len(uids) == 0 {
		return nil
	}
	switch a.Action {
	case "", Keep:
		return nil
	case Seen:
		// RFC 9051 section 6.4.6: UID STORE +FLAGS.SILENT (\Seen).
		return flag(c, uids, imap.FlagSeen)
	case Delete:
		if err := flag(c, uids, imap.FlagDeleted); err != nil {
			return err
		}
		return expunge(c, uids)
	case Move:
		// RFC 6851; without MOVE, imapclient falls back to COPY, STORE and
		// (UID) EXPUNGE.
		if _, err := c.Move(uids, a.Folder).Wait(); err != nil {
			return fmt.Errorf("cannot move messages %s to %s: %w", uids, a.Folder, err)
		}
		return nil
	}
	return fmt.Errorf("%w: %q", ErrBadAfter, a.Action)
}

func flag(c *imapclient.Client, uids imap.UIDSet, f imap.Flag) error {
	store := &imap.StoreFlags{Op: imap.StoreFlagsAdd, Silent: true, Flags: []imap.Flag{f}}
	if err := c.Store(uids, store, nil).Close(); err != nil {
		return fmt.Errorf("cannot flag messages %s %s: %w", uids, f, err)
	}
	return nil
}

// expunge removes uids, which are flagged \Deleted. With UIDPLUS (RFC 4315
// section 2.1) only they go; without it EXPUNGE removes every message
// flagged \Deleted in the mailbox (the watcher warns about it at start).
func expunge(c *imapclient.Client, uids imap.UIDSet) error {
	var cmd *imapclient.ExpungeCommand
	if c.Caps().Has(imap.CapUIDPlus) || c.Caps().Has(imap.CapIMAP4rev2) {
		cmd = c.UIDExpunge(uids)
	} else {
		cmd = c.Expunge()
	}
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("cannot expunge messages %s: %w", uids, err)
	}
	return nil
}

// Target is what an --imap URL names.
type Target struct {
	Addr     string // host:port
	Security Security
	User     string
	Mailbox  string // "" is INBOX
}

// ParseURL reads imaps://USER@HOST[:PORT]/MAILBOX (port 993) or
// imap://USER@HOST[:PORT]/MAILBOX (STARTTLS when offered, port 143), USER
// and MAILBOX URL-escaped. A password in the URL is refused: it would show
// in process listings.
func ParseURL(s string) (Target, error) {
	if !strings.Contains(s, "://") {
		return Target{}, fmt.Errorf("%w: %q has no scheme: want imaps://USER@HOST[:PORT]/MAILBOX (TLS), or imap://... (STARTTLS, or plain text on loopback), e.g. imaps://%s", ErrBadURL, s, strings.TrimPrefix(s, "//"))
	}
	u, err := url.Parse(s)
	if err != nil {
		return Target{}, fmt.Errorf("%w: %v", ErrBadURL, err)
	}
	var t Target
	port := ""
	switch u.Scheme {
	case "imaps":
		t.Security, port = ImplicitTLS, "993"
	case "imap":
		t.Security, port = StartTLS, "143"
	default:
		return Target{}, fmt.Errorf("%w: scheme %q: want imaps:// or imap://", ErrBadURL, u.Scheme)
	}
	switch {
	case u.Opaque != "":
		return Target{}, fmt.Errorf("%w: want %s://USER@HOST/MAILBOX", ErrBadURL, u.Scheme)
	case u.User == nil || u.User.Username() == "":
		return Target{}, fmt.Errorf("%w: no user name: want %s://USER@HOST/MAILBOX", ErrBadURL, u.Scheme)
	case u.Hostname() == "":
		return Target{}, fmt.Errorf("%w: no host", ErrBadURL)
	case u.RawQuery != "" || u.Fragment != "" || u.ForceQuery:
		return Target{}, fmt.Errorf("%w: a query or fragment has no meaning here", ErrBadURL)
	}
	if _, ok := u.User.Password(); ok {
		return Target{}, fmt.Errorf("%w: the URL holds a password: put it in --password-file or $CHIBRARY_IMAP_PASSWORD", ErrBadURL)
	}
	t.User = u.User.Username()
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return Target{}, fmt.Errorf("%w: port %q", ErrBadURL, p)
		}
		port = p
	}
	t.Addr = net.JoinHostPort(u.Hostname(), port)
	t.Mailbox = strings.TrimPrefix(u.Path, "/")
	if t.Mailbox == "" {
		t.Mailbox = "INBOX"
	}
	return t, nil
}
