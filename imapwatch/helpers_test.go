package imapwatch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-imap/v2/imapserver/imapmemserver"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// archive is a real store and local authority in a temporary directory.
type archive struct {
	dir string
	st  store.Store
	arc *ingest.Archiver
}

func newArchive(t testing.TB) *archive {
	t.Helper()
	dir := t.TempDir()
	st, err := boltstore.Open(context.Background(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return newArchiveOn(t, dir, st)
}

func newArchiveOn(t testing.TB, dir string, st store.Store) *archive {
	t.Helper()
	runs := authority.NewLocal(filepath.Join(dir, "runs.db"), authority.Holder{Program: "imapwatch-test"}, authority.LocalOptions{})
	arc, err := ingest.NewArchiver(ingest.Options{Store: st, Runs: runs})
	if err != nil {
		t.Fatal(err)
	}
	return &archive{dir: dir, st: st, arc: arc}
}

func (a *archive) count(t testing.TB) int64 {
	t.Helper()
	n, err := a.st.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// waitCount waits until the store holds want messages: a liveness wait
// with a generous deadline, not a timing assertion.
func (a *archive) waitCount(t testing.TB, want int64) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		got := a.count(t)
		if got == want {
			return
		}
		if got > want {
			t.Fatalf("store holds %d messages, want %d", got, want)
		}
		if time.Now().After(deadline) {
			t.Fatalf("store holds %d messages after 60 s, want %d", got, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// checkStored checks that raw is in the store, equal to it with line ends
// read as LF, and returns its call number.
func (a *archive) checkStored(t testing.TB, raw []byte) uint64 {
	t.Helper()
	ctx := context.Background()
	n, err := a.st.ByDigest(ctx, store.DigestOf(raw))
	if err != nil {
		t.Fatalf("ByDigest(message %.40q): %v", raw, err)
	}
	got, err := a.st.Get(ctx, n)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(lf(got.Raw), lf(raw)) {
		t.Fatalf("stored message %v = %.60q, want %.60q", n, got.Raw, raw)
	}
	return uint64(n)
}

func lf(b []byte) []byte { return bytes.ReplaceAll(b, []byte("\r\n"), []byte("\n")) }

// message returns a distinct test message.
func message(i int) []byte {
	return fmt.Appendf(nil, "From: sender%d@example.org\r\nTo: list@example.org\r\nSubject: message %d\r\nMessage-ID: <m%d@example.org>\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\n\r\nBody of message %d.\r\n", i, i, i, i)
}

// running is a Watcher running in a goroutine until stop.
type running struct {
	cancel context.CancelFunc
	done   chan error
	idle   chan struct{}
	once   sync.Once
	err    error
}

// start runs w; its Run must return nil by the end of the test.
func start(t testing.TB, w *Watcher) *running {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	r := &running{cancel: cancel, done: make(chan error, 1), idle: make(chan struct{}, 1)}
	w.onIdle = func() {
		select {
		case r.idle <- struct{}{}:
		default:
		}
	}
	go func() { r.done <- w.Run(ctx) }()
	t.Cleanup(func() {
		if err := r.stop(); err != nil {
			t.Errorf("Run = %v, want nil", err)
		}
	})
	return r
}

func (r *running) stop() error {
	r.once.Do(func() {
		r.cancel()
		r.err = <-r.done
	})
	return r.err
}

// waitIdle waits until the watcher has caught up and waits for mail.
func (r *running) waitIdle(t testing.TB) {
	t.Helper()
	select {
	case <-r.idle:
	case err := <-r.done:
		t.Fatalf("Run returned %v before catching up", err)
	case <-time.After(60 * time.Second):
		t.Fatal("the watcher did not catch up within 60 s")
	}
}

// memServer serves go-imap's in-memory server on loopback with one user,
// "user"/"s3cr3t-pw", whose INBOX holds msgs.
func memServer(t testing.TB, caps imap.CapSet, msgs ...[]byte) (string, *imapmemserver.User) {
	t.Helper()
	mem := imapmemserver.New()
	u := imapmemserver.NewUser("user", "s3cr3t-pw")
	if err := u.Create("INBOX", nil); err != nil {
		t.Fatal(err)
	}
	for _, m := range msgs {
		if _, err := u.Append("INBOX", bytes.NewReader(m), &imap.AppendOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	mem.AddUser(u)
	if caps == nil {
		caps = imap.CapSet{imap.CapIMAP4rev1: {}, imap.CapIMAP4rev2: {}}
	}
	srv := imapserver.New(&imapserver.Options{
		NewSession: func(*imapserver.Conn) (imapserver.Session, *imapserver.GreetingData, error) {
			return mem.NewSession(), nil, nil
		},
		Caps:         caps,
		InsecureAuth: true,
		Logger:       slog.NewLogLogger(slog.DiscardHandler, slog.LevelError),
	})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	go srv.Serve(ln)
	t.Cleanup(func() { srv.Close() })
	return ln.Addr().String(), u
}

func testLogger(t testing.TB) *slog.Logger {
	return slog.New(slog.NewTextHandler(tWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

type tWriter struct{ t testing.TB }

func (w tWriter) Write(p []byte) (int, error) {
	w.t.Log(string(bytes.TrimRight(p, "\n")))
	return len(p), nil
}
