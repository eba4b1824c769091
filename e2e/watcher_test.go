package e2e

import (
	"context"
	"fmt"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
)

// startWatcher follows dove's INBOX into data; coord is nil for the
// local authority.
func startWatcher(t *testing.T, dove *dovecottest.Server, data string, coord *coordinator) *proc {
	t.Helper()
	pw := writeFile(t, t.TempDir(), "imap-password", []byte(dove.Password+"\n"))
	args := []string{"--imap", fmt.Sprintf("imap://%s@%s/INBOX", dove.User, dove.Addr), "--password-file", pw,
		"--data", data, "--log-format", "json"}
	if coord != nil {
		args = append(args, "--coordinator", coord.url, "--token-file", coord.tokenFile)
	}
	return start(t, "watcher", procOptions{}, args...)
}

// serverMail returns what the server holds in INBOX, as the archive
// must have it.
func serverMail(t *testing.T, dove *dovecottest.Server) want {
	t.Helper()
	msgs, err := dove.Messages(t.Context(), "INBOX")
	if err != nil {
		t.Fatalf("cannot read the server's INBOX: %v\n%s", err, dove.Log())
	}
	w := want{}
	for _, m := range msgs {
		w.add(m.Raw, fmt.Sprintf("IMAP UID %d", m.UID))
	}
	return w
}

// waitArchived waits until every message of w is in the store of data
// (read from the test process beside the programs: the store is shared).
func waitArchived(t *testing.T, data string, w want, watcher *proc, d time.Duration) {
	t.Helper()
	st := openStore(t, data)
	defer st.Close()
	deadline := time.Now().Add(d)
	for {
		if watcher.exited() {
			t.Fatalf("the watcher exited: %v", watcher.err)
		}
		left := 0
		for dg := range w {
			if _, err := st.ByDigest(t.Context(), dg); err != nil {
				left++
			}
		}
		if left == 0 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("after %v, %d of the server's %d messages are not archived", d, left, len(w))
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// deliverer appends messages to a mailbox until stopped.
type deliverer struct {
	stop chan struct{}
	done chan struct{}
	mu   sync.Mutex
	n    int
	errs []error
}

// deliver appends next(i) for i = 0, 1, ... until stop is closed and at
// least min messages went in, pausing every between appends.
func deliver(ctx context.Context, dove *dovecottest.Server, min int, every time.Duration, next func(i int) []byte) *deliverer {
	d := &deliverer{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(d.done)
		for i := 0; ; i++ {
			select {
			case <-d.stop:
				if i >= min {
					return
				}
			case <-ctx.Done():
				return
			default:
			}
			if _, err := dove.Append(ctx, "INBOX", next(i)); err != nil {
				d.mu.Lock()
				d.errs = append(d.errs, err)
				d.mu.Unlock()
			}
			d.mu.Lock()
			d.n++
			d.mu.Unlock()
			time.Sleep(every)
		}
	}()
	return d
}

// finish stops the deliveries and returns how many were made.
func (d *deliverer) finish(t *testing.T) int {
	t.Helper()
	close(d.stop)
	select {
	case <-d.done:
	case <-time.After(60 * time.Second):
		t.Fatal("the deliveries did not stop")
	}
	for _, err := range d.errs {
		t.Errorf("APPEND: %v", err)
	}
	return d.n
}

// TestDovecotRestart restarts Dovecot while the watcher idles: the watcher
// reconnects, and everything delivered before and after is archived once.
func TestDovecotRestart(t *testing.T) {
	needPrograms(t)
	dove := dovecottest.Start(t, dovecottest.Options{})
	data := filepath.Join(t.TempDir(), "archive")
	ctx := t.Context()
	for i := range 20 {
		if _, err := dove.Append(ctx, "INBOX", watcherMessage("before", i)); err != nil {
			t.Fatal(err)
		}
	}
	watcher := startWatcher(t, dove, data, nil)
	waitArchived(t, data, serverMail(t, dove), watcher, 60*time.Second)

	dove.Restart()
	for i := range 20 {
		if _, err := dove.Append(ctx, "INBOX", watcherMessage("after", i)); err != nil {
			t.Fatal(err)
		}
	}
	w := serverMail(t, dove)
	if len(w) != 40 {
		t.Fatalf("the server holds %d distinct messages, want 40", len(w))
	}
	waitArchived(t, data, w, watcher, 90*time.Second)
	watcher.stop()
	verifyArchive(t, openStore(t, data), w)
}

// TestHostileWatcher delivers the hostile corpus over IMAP (all but the
// large messages): whatever Dovecot accepts, the watcher archives once,
// byte for byte as the server has it, without dying.
func TestHostileWatcher(t *testing.T) {
	needPrograms(t)
	dove := dovecottest.Start(t, dovecottest.Options{})
	data := filepath.Join(t.TempDir(), "archive")
	watcher := startWatcher(t, dove, data, nil)
	for _, m := range hostile.Messages(hostile.Options{}) {
		if _, err := dove.Append(t.Context(), "INBOX", m.Raw()); err != nil {
			t.Logf("%s: the server refused it: %v", m.Name, err)
		}
	}
	// A plain message after them all: the watcher must get past them.
	if _, err := dove.Append(t.Context(), "INBOX", watcherMessage("last", 0)); err != nil {
		t.Fatal(err)
	}
	w := serverMail(t, dove)
	t.Logf("the server accepted %d of the hostile messages", len(w)-1)
	waitArchived(t, data, w, watcher, 90*time.Second)
	watcher.stop()
	st := openStore(t, data)
	verifyArchive(t, st, w)
}

// TestWatcherKilled kills the watcher (SIGKILL) while mail arrives and
// starts it again: what it archived before is not archived again (the
// digest index makes a re-fetch a duplicate), and nothing is missed.
func TestWatcherKilled(t *testing.T) {
	needPrograms(t)
	dove := dovecottest.Start(t, dovecottest.Options{})
	data := filepath.Join(t.TempDir(), "archive")
	ctx := t.Context()
	watcher := startWatcher(t, dove, data, nil)
	deliveries := deliver(ctx, dove, 30, 5*time.Millisecond, func(i int) []byte { return watcherMessage("killed", i) })
	// Kill it once it has archived something, deliveries still going.
	st := openStore(t, data)
	eventually(t, 60*time.Second, "the watcher to archive a first message", func() bool {
		n, err := st.Count(ctx)
		return err == nil && n > 0
	})
	st.Close()
	watcher.kill()
	delivered := deliveries.finish(t)

	watcher = startWatcher(t, dove, data, nil)
	w := serverMail(t, dove)
	if len(w) != delivered {
		t.Fatalf("the server holds %d distinct messages, want the %d delivered", len(w), delivered)
	}
	waitArchived(t, data, w, watcher, 90*time.Second)
	watcher.stop()
	verifyArchive(t, openStore(t, data), w)
}
