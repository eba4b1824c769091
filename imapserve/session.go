package imapserve

import (
	"context"
	"errors"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-sasl"

	"github.com/chibrary/chibrary/catalog"
)

// Delim is the hierarchy delimiter of mailbox names: list names hold
// dots, never a slash.
const Delim = '/'

var (
	errReadOnly = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Code: imap.ResponseCodeNoPerm,
		Text: "This archive is read-only",
	}
	errNoMailbox = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Code: imap.ResponseCodeNonExistent,
		Text: "No such list",
	}
	errUnavailable = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Code: imap.ResponseCodeUnavailable,
		Text: "The archive cannot be read right now; try again later",
	}
	// errNoCatalog answers what needs the catalog while there is none:
	// it is being built again, or cannot be opened now.
	errNoCatalog = &imap.Error{
		Type: imap.StatusResponseTypeNo,
		Code: imap.ResponseCodeUnavailable,
		Text: "The archive's index of its lists is not there right now (it is being built again); try again shortly",
	}
	// errRenumbered: the selected mailbox's UIDVALIDITY changed under
	// the session (its catalog was lost and built anew).
	errRenumbered = errors.New("imapserve: the mailbox was numbered anew")
)

// flags are the flags messages could have; none is set, and none can be.
var flags = []imap.Flag{imap.FlagSeen, imap.FlagAnswered, imap.FlagFlagged, imap.FlagDeleted, imap.FlagDraft}

// session is one connection's session. imapserver calls its methods one
// at a time, except Idle, which runs beside the connection's reader
// (mu keeps them apart).
type session struct {
	s    *Server
	ctx  context.Context
	conn *imapserver.Conn
	done *sync.WaitGroup

	mu     sync.Mutex
	user   string
	mbox   *view
	cat    *catalog.Catalog // read by the command running (hold)
	closed bool             // an IDLE goroutine still running stops
	buf    []byte           // the wire form of the message being sent
}

var _ imapserver.SessionSASL = (*session)(nil)
var _ imapserver.SessionNamespace = (*session)(nil)
var _ imapserver.SessionAppendLimit = (*session)(nil)

func (s *Server) newSession(ctx context.Context, conn *imapserver.Conn, done *sync.WaitGroup) *session {
	return &session{s: s, ctx: ctx, conn: conn, done: done}
}

// count records a command's answer.
func (ss *session) count(command string, err error) error {
	result := "ok"
	var ie *imap.Error
	switch {
	case errors.As(err, &ie):
		result = strings.ToLower(string(ie.Type))
	case err != nil:
		result = "error"
	}
	ss.s.m.commands.WithLabelValues(command, result).Inc()
	return err
}

// storeErr turns a catalog or store error into the client's answer: NO
// [UNAVAILABLE] (the cause logged) unless the session is ending.
func (ss *session) storeErr(what string, err error) error {
	if err == nil || ss.ctx.Err() != nil || isWriteErr(err) {
		return err
	}
	var ie *imap.Error
	if errors.As(err, &ie) {
		return err
	}
	ss.s.cats.Notice(ss.cat, err)
	ss.s.log.Error("cannot "+what, "err", err)
	return errUnavailable
}

// hold takes the catalog served now for the command running, as ss.cat
// (mu held), and returns the function that gives it back.
func (ss *session) hold() (done func(), err error) {
	c, release := ss.s.cats.Current()
	if c == nil {
		release()
		return nil, errNoCatalog
	}
	ss.cat = c
	return func() {
		ss.cat = nil
		release()
	}, nil
}

// holdView is hold for a command on the selected mailbox v: a catalog
// that numbers v's list anew (it was built again without the old one)
// ends the session, as refresh does.
func (ss *session) holdView(v *view) (done func(), err error) {
	if done, err = ss.hold(); err != nil {
		return nil, err
	}
	same, err := v.sameNumbers(ss.ctx, ss.cat)
	if err == nil && !same {
		err = ss.renumbered()
	}
	if err != nil {
		err = ss.storeErr("read mailbox "+v.list, err)
		done()
		return nil, err
	}
	return done, nil
}

// renumbered ends the session whose selected mailbox was numbered anew.
func (ss *session) renumbered() error {
	ss.s.log.Warn("a selected mailbox was numbered anew (its catalog was built anew without the old one): closing the session", "mailbox", ss.mbox.list)
	ss.conn.Bye("The mailbox was numbered anew; select it again")
	return errRenumbered
}

func (ss *session) Close() error {
	// imapserver may leave an IDLE goroutine behind a connection that
	// failed (it has closed its stop channel): closed stops it.
	ss.mu.Lock()
	ss.closed = true
	ss.mbox = nil
	ss.mu.Unlock()
	ss.done.Done()
	return nil
}

// Login accepts any user name and password: the archive is public. The
// password is not looked at, and not kept.
func (ss *session) Login(username, _ string) error {
	ss.mu.Lock()
	ss.user = username
	ss.mu.Unlock()
	ss.s.log.Debug("login", "user", username, "remote", ss.conn.NetConn().RemoteAddr().String())
	return ss.count("LOGIN", nil)
}

// AuthenticateMechanisms are PLAIN (any user name and password) and
// ANONYMOUS (RFC 4505).
func (ss *session) AuthenticateMechanisms() []string { return []string{"PLAIN", "ANONYMOUS"} }

func (ss *session) Authenticate(mech string) (sasl.Server, error) {
	switch strings.ToUpper(mech) {
	case "PLAIN":
		return sasl.NewPlainServer(func(_, username, password string) error {
			return ss.Login(username, password)
		}), nil
	case "ANONYMOUS":
		return sasl.NewAnonymousServer(func(string) error {
			return ss.Login("anonymous", "")
		}), nil
	}
	return nil, ss.count("AUTHENTICATE", &imap.Error{Type: imap.StatusResponseTypeNo, Text: "Only PLAIN and ANONYMOUS are offered"})
}

// AppendLimit is the largest APPEND whose message is read before it is
// refused (NO, like every write): a larger one is refused before, by
// imapserver. It is LITERAL-'s 4 KiB, which a client may send without
// waiting: refused unread, that message would be read as commands.
func (ss *session) AppendLimit() uint32 { return 4096 }

func (ss *session) Namespace() (*imap.NamespaceData, error) {
	return &imap.NamespaceData{Personal: []imap.NamespaceDescriptor{{Prefix: "", Delim: Delim}}}, nil
}

// mailboxName maps a mailbox name to its list: list names are lower case.
func mailboxName(name string) string { return strings.ToLower(name) }

func (ss *session) Select(name string, options *imap.SelectOptions) (*imap.SelectData, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.mbox = nil
	done, err := ss.hold()
	if err != nil {
		return nil, ss.count("SELECT", err)
	}
	defer done()
	v, _, err := load(ss.ctx, ss.cat, mailboxName(name), ss.s.hub.current())
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, ss.count("SELECT", errNoMailbox)
	}
	if err != nil {
		return nil, ss.count("SELECT", ss.storeErr("read mailbox "+name, err))
	}
	v.readOnly = options.ReadOnly
	// The archive is read-only: SELECT too answers [READ-ONLY] (RFC 9051
	// section 6.3.2; third_party/go-imap/CHIBRARY.md). The session's own
	// flags stay as SELECT keeps them (FETCH sets \Seen, STORE is taken),
	// as the RFC allows of per-user state in a read-only mailbox.
	options.ReadOnly = true
	ss.mbox = v
	return &imap.SelectData{
		Flags:          flags,
		PermanentFlags: []imap.Flag{},
		NumMessages:    uint32(len(v.uids)),
		UIDNext:        v.uidNext(),
		UIDValidity:    v.validity,
	}, ss.count("SELECT", nil)
}

func (ss *session) Unselect() error {
	ss.mu.Lock()
	ss.mbox = nil
	ss.mu.Unlock()
	return nil
}

func (ss *session) Create(string, *imap.CreateOptions) error {
	return ss.count("CREATE", errReadOnly)
}
func (ss *session) Delete(string) error { return ss.count("DELETE", errReadOnly) }
func (ss *session) Rename(string, string, *imap.RenameOptions) error {
	return ss.count("RENAME", errReadOnly)
}

// Subscribe is accepted: every list is subscribed.
func (ss *session) Subscribe(string) error { return ss.count("SUBSCRIBE", nil) }
func (ss *session) Unsubscribe(string) error {
	return ss.count("UNSUBSCRIBE", &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot, Text: "Every list is subscribed"})
}
func (ss *session) Append(string, imap.LiteralReader, *imap.AppendOptions) (*imap.AppendData, error) {
	return nil, ss.count("APPEND", errReadOnly)
}

// Store changes flags for this session only: nothing is written, and
// PERMANENTFLAGS, empty, says so (RFC 3501 section 7.1), as clients
// that mark what they fetched as \Seen (fetchmail) need it to succeed.
// \Deleted is refused: no message can be expunged.
func (ss *session) Store(w *imapserver.FetchWriter, numSet imap.NumSet, flags *imap.StoreFlags, _ *imap.StoreOptions) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v := ss.mbox
	if v == nil {
		return nil
	}
	if flags.Op != imap.StoreFlagsDel && slices.ContainsFunc(flags.Flags, func(f imap.Flag) bool { return strings.EqualFold(string(f), string(imap.FlagDeleted)) }) {
		return ss.count("STORE", &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeNoPerm, Text: "This archive is read-only: no message can be deleted"})
	}
	_, isUID := numSet.(imap.UIDSet)
	for _, sp := range v.spans(numSet) {
		for seq := sp.lo; seq <= sp.hi; seq++ {
			uid := v.uids[seq-1]
			v.setFlags(uid, flags.Op, flags.Flags)
			if flags.Silent {
				continue
			}
			rw := w.CreateMessage(seq)
			if isUID {
				rw.WriteUID(imap.UID(uid))
			}
			rw.WriteFlags(v.flagsOf(uid))
			if err := rw.Close(); err != nil {
				return err
			}
		}
	}
	return ss.count("STORE", nil)
}
func (ss *session) Copy(imap.NumSet, string) (*imap.CopyData, error) {
	return nil, ss.count("COPY", errReadOnly)
}
func (ss *session) Move(*imapserver.MoveWriter, imap.NumSet, string) error {
	return ss.count("MOVE", errReadOnly)
}

// Expunge (EXPUNGE, UID EXPUNGE, CLOSE) has nothing to do: no message can
// be flagged \Deleted.
func (ss *session) Expunge(*imapserver.ExpungeWriter, *imap.UIDSet) error {
	return ss.count("EXPUNGE", nil)
}

// List answers LIST and LSUB: every list whose name matches a pattern.
func (ss *session) List(w *imapserver.ListWriter, ref string, patterns []string, options *imap.ListOptions) error {
	if len(patterns) == 0 {
		// LIST "" "": the delimiter and the root (RFC 3501 section 6.3.8).
		return ss.count("LIST", w.WriteList(&imap.ListData{Attrs: []imap.MailboxAttr{imap.MailboxAttrNoSelect}, Delim: Delim}))
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	done, err := ss.hold()
	if err != nil {
		return ss.count("LIST", err)
	}
	defer done()
	boxes, err := ss.cat.Mailboxes(ss.ctx)
	if err != nil {
		return ss.count("LIST", ss.storeErr("list the mailboxes", err))
	}
	for _, b := range boxes {
		for _, p := range patterns {
			if matchMailbox(b.List, ref, p) {
				data := &imap.ListData{Mailbox: b.List, Delim: Delim, Attrs: []imap.MailboxAttr{imap.MailboxAttrNoInferiors}}
				if err := w.WriteList(data); err != nil {
					return err
				}
				break
			}
		}
	}
	return ss.count("LIST", nil)
}

func (ss *session) Status(name string, options *imap.StatusOptions) (*imap.StatusData, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	done, err := ss.hold()
	if err != nil {
		return nil, ss.count("STATUS", err)
	}
	defer done()
	b, err := ss.cat.Mailbox(ss.ctx, mailboxName(name))
	if errors.Is(err, catalog.ErrNotFound) {
		return nil, ss.count("STATUS", errNoMailbox)
	}
	if err != nil {
		return nil, ss.count("STATUS", ss.storeErr("read mailbox "+name, err))
	}
	n, zero := uint32(b.Messages), uint32(0)
	data := &imap.StatusData{Mailbox: name, UIDNext: imap.UID(b.Next), UIDValidity: b.Validity}
	if options.NumMessages {
		data.NumMessages = &n
	}
	if options.NumUnseen {
		data.NumUnseen = &n
	}
	if options.NumRecent {
		data.NumRecent = &zero
	}
	if options.NumDeleted {
		data.NumDeleted = &zero
	}
	return data, ss.count("STATUS", nil)
}

// Poll tells the client what changed in its mailbox (after every
// command). A catalog that cannot be read now is tried again at the
// next command: an error here would end the connection (imapserver).
func (ss *session) Poll(w *imapserver.UpdateWriter, allowExpunge bool) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	err := ss.refresh(w, allowExpunge)
	if err != nil && !errors.Is(err, errRenumbered) && !isWriteErr(err) {
		return nil // logged by refresh
	}
	return err
}

// isWriteErr reports an error writing to the client, which ends the
// connection anyway.
func isWriteErr(err error) bool {
	var ne net.Error
	return errors.As(err, &ne) || errors.Is(err, net.ErrClosed)
}

// refresh brings the selected mailbox's view up to date. Called with mu
// held.
func (ss *session) refresh(w *imapserver.UpdateWriter, allowExpunge bool) error {
	if ss.mbox == nil {
		return nil
	}
	done, err := ss.hold()
	if err != nil {
		return err // told at the next command that reads the catalog
	}
	defer done()
	err = ss.mbox.refresh(ss.ctx, ss.cat, w, allowExpunge, ss.s.hub.current())
	if errors.Is(err, errRenumbered) {
		return ss.renumbered()
	}
	return ss.storeErr("read the catalog", err)
}

// Idle tells the client of each change until it says DONE (RFC 2177).
func (ss *session) Idle(w *imapserver.UpdateWriter, stop <-chan struct{}) error {
	ss.count("IDLE", nil)
	for {
		changed := ss.s.hub.wait()
		ss.mu.Lock()
		if ss.closed {
			ss.mu.Unlock()
			return nil
		}
		err := ss.refresh(w, true)
		ss.mu.Unlock()
		var retry <-chan time.Time
		switch {
		case errors.Is(err, errRenumbered) || isWriteErr(err):
			return err
		case err != nil:
			// The catalog cannot be read now (logged): again in a
			// second.
			retry = time.After(time.Second)
		}
		select {
		case <-stop:
			return nil
		case <-ss.ctx.Done():
			return nil
		case <-changed:
		case <-retry:
		}
	}
}
