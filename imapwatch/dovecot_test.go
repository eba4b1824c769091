package imapwatch

import (
	"context"
	"errors"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/store"
)

// populate returns an Options.Populate that writes msgs into the Maildir.
func populate(msgs [][]byte) func(string) error {
	return func(dir string) error {
		for i, m := range msgs {
			if err := os.WriteFile(filepath.Join(dir, "cur", dovecottest.MaildirName(i, len(m))), m, 0o644); err != nil {
				return err
			}
		}
		return nil
	}
}

func dovecotWatcher(t testing.TB, srv *dovecottest.Server, a *archive, mod func(*Options)) *Watcher {
	return newTestWatcher(t, a, srv.Addr, func(o *Options) {
		o.User, o.Password = srv.User, srv.Password
		if mod != nil {
			mod(o)
		}
	})
}

// TestDovecotFirstPass: 200 messages already in the mailbox are archived
// with distinct call numbers, each equal to what was delivered.
func TestDovecotFirstPass(t *testing.T) {
	var msgs [][]byte
	for i := range 200 {
		msgs = append(msgs, message(i))
	}
	srv := dovecottest.Start(t, dovecottest.Options{Populate: populate(msgs)})
	a := newArchive(t)
	r := start(t, dovecotWatcher(t, srv, a, func(o *Options) { o.BatchMessages = 30 }))
	r.waitIdle(t)
	if got := a.count(t); got != 200 {
		t.Fatalf("store holds %d messages, want 200", got)
	}
	seen := map[uint64]bool{}
	for _, m := range msgs {
		n := a.checkStored(t, m)
		if seen[n] {
			t.Fatalf("call number %d given twice", n)
		}
		seen[n] = true
	}
}

// TestDovecotIdleAndRestart: a message delivered while the watcher idles
// is archived; the server restarted mid-IDLE, with mail delivered during
// the outage, loses nothing.
func TestDovecotIdleAndRestart(t *testing.T) {
	ctx := context.Background()
	srv := dovecottest.Start(t, dovecottest.Options{Populate: populate([][]byte{message(1), message(2)})})
	a := newArchive(t)
	reg := prometheus.NewRegistry()
	m := NewMetrics(reg)
	r := start(t, dovecotWatcher(t, srv, a, func(o *Options) { o.Metrics = m }))
	r.waitIdle(t)
	a.waitCount(t, 2)

	if _, err := srv.Append(ctx, "INBOX", message(3)); err != nil {
		t.Fatal(err)
	}
	a.waitCount(t, 3) // announced by IDLE: long before the 25-minute refresh

	srv.Stop()
	// Delivered while the server is down: straight into the Maildir.
	raw := message(4)
	p := filepath.Join(srv.Dir(), "home", "Maildir", "new", dovecottest.MaildirName(4, len(raw)))
	if err := os.WriteFile(p, raw, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(p, 8, 8); err != nil && os.Getuid() == 0 {
		t.Fatal(err)
	}
	srv.Restart()
	a.waitCount(t, 4)
	for i := 1; i <= 4; i++ {
		a.checkStored(t, message(i))
	}
	waitValue(t, "archived counter", m.archived, 4)
	if got := value(m.reconnects); got < 1 {
		t.Errorf("reconnects counter = %v, want at least 1", got)
	}
}

// checkingStore checks, before each Put, that the server still has every
// message of the batch in the mailbox and untouched, and refuses the first
// Put: nothing may be done to a message before the store has it.
type checkingStore struct {
	store.Store
	t       testing.TB
	srv     *dovecottest.Server
	mailbox string
	puts    atomic.Int32
}

var errRefused = errors.New("test: store refuses the first batch")

func (s *checkingStore) Put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	inbox, err := s.srv.Messages(ctx, s.mailbox)
	if err != nil {
		return nil, err
	}
	for _, m := range msgs {
		i := slices.IndexFunc(inbox, func(im dovecottest.Message) bool { return store.DigestOf(im.Raw) == store.DigestOf(m.Raw) })
		if i < 0 {
			s.t.Errorf("message %s was moved or deleted before the store accepted it", m.MessageID)
			continue
		}
		if f := inbox[i].Flags; slices.Contains(f, imap.FlagSeen) || slices.Contains(f, imap.FlagDeleted) {
			s.t.Errorf("message %s was flagged %v before the store accepted it", m.MessageID, f)
		}
	}
	if s.puts.Add(1) == 1 {
		return nil, errRefused
	}
	return s.Store.Put(ctx, msgs)
}

// TestDovecotAfter: --after acts on exactly the archived messages, and
// only once they are stored.
func TestDovecotAfter(t *testing.T) {
	ctx := context.Background()
	var msgs [][]byte
	for i := range 12 {
		msgs = append(msgs, message(i))
	}
	tests := []struct {
		after     string
		wantInbox int
		wantFlag  imap.Flag
		wantMoved int
	}{
		{"seen", 12, imap.FlagSeen, 0},
		{"delete", 0, "", 0},
		{"move:Archived", 0, "", 12},
		{"keep", 12, "", 0},
	}
	for _, tt := range tests {
		t.Run(tt.after, func(t *testing.T) {
			srv := dovecottest.Start(t, dovecottest.Options{Populate: populate(msgs)})
			base := newArchive(t)
			cs := &checkingStore{Store: base.st, t: t, srv: srv, mailbox: "INBOX"}
			a := newArchiveOn(t, base.dir, cs)
			after, err := ParseAfter(tt.after)
			if err != nil {
				t.Fatal(err)
			}
			r := start(t, dovecotWatcher(t, srv, a, func(o *Options) { o.After = after; o.BatchMessages = 5 }))
			r.waitIdle(t)
			a.waitCount(t, 12)
			if err := r.stop(); err != nil {
				t.Fatal(err)
			}
			if cs.puts.Load() < 2 {
				t.Fatalf("the store saw %d Puts, want the refused one and more", cs.puts.Load())
			}
			inbox, err := srv.Messages(ctx, "INBOX")
			if err != nil {
				t.Fatal(err)
			}
			if len(inbox) != tt.wantInbox {
				t.Errorf("INBOX holds %d messages, want %d", len(inbox), tt.wantInbox)
			}
			for _, m := range inbox {
				m.Flags = slices.DeleteFunc(m.Flags, func(f imap.Flag) bool { return f == `\Recent` })
				if tt.wantFlag != "" && !slices.Contains(m.Flags, tt.wantFlag) {
					t.Errorf("UID %d flags = %v, want %s", m.UID, m.Flags, tt.wantFlag)
				}
				if tt.wantFlag == "" && len(m.Flags) > 0 {
					t.Errorf("UID %d flags = %v, want none", m.UID, m.Flags)
				}
			}
			if tt.wantMoved > 0 {
				moved, err := srv.Messages(ctx, "Archived")
				if err != nil {
					t.Fatal(err)
				}
				if len(moved) != tt.wantMoved {
					t.Errorf("Archived holds %d messages, want %d", len(moved), tt.wantMoved)
				}
				for _, m := range moved {
					a.checkStored(t, m.Raw)
				}
			}
			for _, m := range msgs {
				a.checkStored(t, m)
			}
		})
	}
}

// TestDovecotUIDValidity: the mailbox deleted and recreated with the same
// messages (a new UIDVALIDITY) gives duplicates, not new call numbers.
func TestDovecotUIDValidity(t *testing.T) {
	ctx := context.Background()
	srv := dovecottest.Start(t, dovecottest.Options{})
	const mbox = "Lists/mips"
	if err := srv.CreateMailbox(ctx, mbox); err != nil {
		t.Fatal(err)
	}
	deliver := func() {
		for i := range 5 {
			if _, err := srv.Append(ctx, mbox, message(i)); err != nil {
				t.Fatal(err)
			}
		}
	}
	deliver()
	a := newArchive(t)
	r := start(t, dovecotWatcher(t, srv, a, func(o *Options) { o.Mailbox = mbox }))
	r.waitIdle(t)
	a.waitCount(t, 5)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	before, err := LoadState(filepath.Join(a.dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}

	if err := srv.DeleteMailbox(ctx, mbox); err != nil {
		t.Fatal(err)
	}
	if err := srv.CreateMailbox(ctx, mbox); err != nil {
		t.Fatal(err)
	}
	deliver()
	m := NewMetrics(prometheus.NewRegistry())
	r = start(t, dovecotWatcher(t, srv, a, func(o *Options) { o.Mailbox = mbox; o.Metrics = m }))
	r.waitIdle(t)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	after, err := LoadState(filepath.Join(a.dir, "state.json"))
	if err != nil {
		t.Fatal(err)
	}
	if after.UIDValidity == before.UIDValidity {
		t.Fatalf("UIDVALIDITY stayed %d: the test did not change it", after.UIDValidity)
	}
	if got := a.count(t); got != 5 {
		t.Errorf("store holds %d messages, want 5", got)
	}
	if got, want := value(m.duplicates), 5.0; got != want {
		t.Errorf("duplicates = %v, want %v", got, want)
	}
	if got := value(m.archived); got != 0 {
		t.Errorf("archived = %v, want 0", got)
	}
	if after.LastUID != 5 {
		t.Errorf("state last UID = %d, want 5", after.LastUID)
	}
}

// TestDovecotNoArchiveAndRemoved: a message with X-No-Archive is not
// archived and stays in the inbox as it was (unless --archive-no-archive);
// a message removed from the archive and delivered again is not stored
// again, and is done with (moved) like an archived one.
func TestDovecotNoArchiveAndRemoved(t *testing.T) {
	ctx := context.Background()
	private := []byte("From: someone@example.org\r\nSubject: private\r\nMessage-ID: <private@example.org>\r\nX-No-Archive: yes\r\n\r\nNot for the archive.\r\n")
	for _, archiveAll := range []bool{false, true} {
		t.Run(map[bool]string{false: "honoured", true: "archive-no-archive"}[archiveAll], func(t *testing.T) {
			srv := dovecottest.Start(t, dovecottest.Options{Populate: populate([][]byte{message(0), private, message(1)})})
			a := newArchive(t)
			w := dovecotWatcher(t, srv, a, func(o *Options) { o.After = After{Action: Move, Folder: "Archived"}; o.ArchiveNoArchive = archiveAll })
			r := start(t, w)
			r.waitIdle(t)
			inbox, err := srv.Messages(ctx, "INBOX")
			if err != nil {
				t.Fatal(err)
			}
			if archiveAll {
				a.waitCount(t, 3)
				a.checkStored(t, private)
				if len(inbox) != 0 {
					t.Errorf("INBOX holds %d messages, want none", len(inbox))
				}
				return
			}
			a.waitCount(t, 2)
			if _, err := a.st.ByDigest(ctx, store.DigestOf(private)); !errors.Is(err, store.ErrNotFound) {
				t.Errorf("the X-No-Archive message: ByDigest = %v, want not archived", err)
			}
			if len(inbox) != 1 || store.DigestOf(inbox[0].Raw) != store.DigestOf(private) || len(inbox[0].Flags) > 1 {
				t.Errorf("INBOX = %d messages, want the X-No-Archive one, as it was", len(inbox))
			}
			// Removed from the archive, then delivered again.
			rn, err := a.st.ByDigest(ctx, store.DigestOf(message(0)))
			if err != nil {
				t.Fatal(err)
			}
			if _, err := a.st.Remove(ctx, rn, "test"); err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Append(ctx, "INBOX", message(0)); err != nil {
				t.Fatal(err)
			}
			deadline := time.Now().Add(30 * time.Second)
			for {
				moved, err := srv.Messages(ctx, "Archived")
				if err != nil {
					t.Fatal(err)
				}
				if len(moved) == 3 {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("Archived holds %d messages 30 s after the removed one came again, want 3", len(moved))
				}
				time.Sleep(50 * time.Millisecond)
			}
			if got := a.count(t); got != 1 {
				t.Errorf("the store counts %d messages, want 1 (the removed one not taken again)", got)
			}
			if _, err := a.st.Get(ctx, rn); !errors.Is(err, store.ErrRemoved) {
				t.Errorf("Get(removed) = %v, want it still removed", err)
			}
		})
	}
}

// TestCheck: Check logs in and finds the mailbox, or says plainly what is
// wrong: the password, the mailbox, the port.
func TestCheck(t *testing.T) {
	srv := dovecottest.Start(t, dovecottest.Options{})
	base := Options{Addr: srv.Addr, Security: StartTLS, User: srv.User, Password: srv.Password, Mailbox: "INBOX", CommandTimeout: 10 * time.Second}
	if err := Check(t.Context(), base); err != nil {
		t.Fatalf("Check = %v", err)
	}
	wrong := base
	wrong.Password = "not the password"
	if err := Check(t.Context(), wrong); !errors.Is(err, ErrAuth) {
		t.Errorf("Check(wrong password) = %v, want %v", err, ErrAuth)
	}
	missing := base
	missing.Mailbox = "Nowhere"
	if err := Check(t.Context(), missing); !errors.Is(err, ErrNoMailbox) {
		t.Errorf("Check(missing mailbox) = %v, want %v", err, ErrNoMailbox)
	}
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	closed := l.Addr().String()
	l.Close()
	port := base
	port.Addr = closed
	if err := Check(t.Context(), port); err == nil || !strings.Contains(err.Error(), "is the host and port of --imap right?") {
		t.Errorf("Check(a closed port) = %v, want it to say the port may be wrong", err)
	}
}
