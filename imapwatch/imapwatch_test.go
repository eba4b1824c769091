package imapwatch

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
)

func TestParseAfter(t *testing.T) {
	tests := []struct {
		in      string
		want    After
		wantErr error
	}{
		{"", After{Action: Keep}, nil},
		{"keep", After{Action: Keep}, nil},
		{"seen", After{Action: Seen}, nil},
		{"delete", After{Action: Delete}, nil},
		{"move:Archived", After{Action: Move, Folder: "Archived"}, nil},
		{"move:Lists/old:2024", After{Action: Move, Folder: "Lists/old:2024"}, nil},
		{"move:", After{}, ErrBadAfter},
		{"move", After{}, ErrBadAfter},
		{"Seen", After{}, ErrBadAfter},
		{"flag", After{}, ErrBadAfter},
	}
	for _, tt := range tests {
		got, err := ParseAfter(tt.in)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("ParseAfter(%q) = %+v, %v, want %+v, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
	}
}

func TestParseURL(t *testing.T) {
	tests := []struct {
		in      string
		want    Target
		wantErr error
	}{
		{"imaps://archiver@mail.example.org/INBOX", Target{"mail.example.org:993", ImplicitTLS, "archiver", "INBOX"}, nil},
		{"imaps://user%40example.org@mail.example.org", Target{"mail.example.org:993", ImplicitTLS, "user@example.org", "INBOX"}, nil},
		{"imap://u@127.0.0.1:1143/Lists/linux-mips", Target{"127.0.0.1:1143", StartTLS, "u", "Lists/linux-mips"}, nil},
		{"imap://u@[::1]/", Target{"[::1]:143", StartTLS, "u", "INBOX"}, nil},
		{"imaps://u@h/Caf%C3%A9", Target{"h:993", ImplicitTLS, "u", "Café"}, nil},
		{"imaps://u:secret@h/INBOX", Target{}, ErrBadURL},
		{"imaps://h/INBOX", Target{}, ErrBadURL},
		{"imaps://u@/INBOX", Target{}, ErrBadURL},
		{"http://u@h/INBOX", Target{}, ErrBadURL},
		{"imaps://u@h:0/INBOX", Target{}, ErrBadURL},
		{"imaps://u@h:99999/INBOX", Target{}, ErrBadURL},
		{"imaps://u@h/INBOX?x=1", Target{}, ErrBadURL},
		{"imaps:u@h", Target{}, ErrBadURL},
		{"mail.example.org", Target{}, ErrBadURL},
		{"archive@127.0.0.1:11143", Target{}, ErrBadURL},
	}
	for _, tt := range tests {
		got, err := ParseURL(tt.in)
		if !errors.Is(err, tt.wantErr) || got != tt.want {
			t.Errorf("ParseURL(%q) = %+v, %v, want %+v, %v", tt.in, got, err, tt.want, tt.wantErr)
		}
		if err != nil && strings.Contains(err.Error(), "secret") {
			t.Errorf("ParseURL(%q) error %q shows the password", tt.in, err)
		}
	}
}

// TestParseURLNoScheme: a URL without its scheme is told what to type.
func TestParseURLNoScheme(t *testing.T) {
	_, err := ParseURL("archive@127.0.0.1:11143")
	if err == nil || !strings.Contains(err.Error(), "has no scheme") || !strings.Contains(err.Error(), "imaps://archive@127.0.0.1:11143") {
		t.Errorf("ParseURL(no scheme) = %v, want it to say what to type", err)
	}
}

func TestUIDsAbove(t *testing.T) {
	set := imap.UIDSet{{Start: 1, Stop: 3}, {Start: 7, Stop: 7}, {Start: 10, Stop: 14}}
	tests := []struct {
		name string
		last imap.UID
		n    int
		want [][]imap.UID
	}{
		{"all in twos", 0, 2, [][]imap.UID{{1, 2}, {3, 7}, {10, 11}, {12, 13}, {14}}},
		{"above 2", 2, 4, [][]imap.UID{{3, 7, 10, 11}, {12, 13, 14}}},
		{"inside a range", 11, 100, [][]imap.UID{{12, 13, 14}}},
		{"nothing above", 14, 5, nil},
		{"server answered n:* with the last UID", 20, 5, nil},
	}
	for _, tt := range tests {
		next := uidsAbove(set, tt.last)
		var got [][]imap.UID
		for w := next(tt.n); len(w) > 0; w = next(tt.n) {
			got = append(got, w)
		}
		if !reflect.DeepEqual(got, tt.want) {
			t.Errorf("%s: uidsAbove(%v, %d) in %ds = %v, want %v", tt.name, set, tt.last, tt.n, got, tt.want)
		}
	}
}

func TestBackoff(t *testing.T) {
	for n := range 12 {
		d := backoff(time.Second, 5*time.Minute, n)
		ceil := min(time.Second<<n, 5*time.Minute)
		if d < ceil/2 || d > ceil {
			t.Errorf("backoff(1s, 5m, %d) = %v, want in [%v, %v]", n, d, ceil/2, ceil)
		}
	}
}

func TestStateRoundTrip(t *testing.T) {
	path := filepath.Join(t.TempDir(), "sub", "state.json")
	if st, err := LoadState(path); err != nil || !reflect.DeepEqual(st, State{}) {
		t.Fatalf("LoadState(missing) = %+v, %v, want zero, nil", st, err)
	}
	want := State{Server: "h:993", User: "u", Mailbox: "INBOX", UIDValidity: 7, LastUID: 42, Retry: []uint32{3, 9}, Updated: time.Unix(1700000000, 0).UTC()}
	if err := saveState(path, want); err != nil {
		t.Fatal(err)
	}
	got, err := LoadState(path)
	if err != nil || !reflect.DeepEqual(got, want) {
		t.Fatalf("LoadState = %+v, %v, want %+v", got, err, want)
	}
	if err := os.WriteFile(path, []byte("{not json"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := LoadState(path); !errors.Is(err, ErrBadState) {
		t.Fatalf("LoadState(garbage) = %v, want %v", err, ErrBadState)
	}
}

func newTestWatcher(t testing.TB, a *archive, addr string, mod func(*Options)) *Watcher {
	t.Helper()
	opts := Options{
		Archiver: a.arc, Addr: addr, Security: StartTLS, User: "user", Password: "s3cr3t-pw",
		StatePath: filepath.Join(a.dir, "state.json"), Logger: testLogger(t),
		PollInterval: 20 * time.Millisecond, MinBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
		CommandTimeout: 30 * time.Second,
	}
	if mod != nil {
		mod(&opts)
	}
	w, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	return w
}

// TestMemBatches: the first pass in small batches (by count and by
// bytes), then new mail; the state records the last UID. The memory
// server always offers IDLE but does not announce mail delivered just
// before IDLE starts, so a short IdleRefresh finds it (the IDLE refresh
// path); Dovecot tests cover the announcement.
func TestMemBatches(t *testing.T) {
	var msgs [][]byte
	for i := range 23 {
		msgs = append(msgs, message(i))
	}
	caps := imap.CapSet{imap.CapIMAP4rev1: {}} // no ESEARCH, no UIDPLUS
	addr, u := memServer(t, caps, msgs...)
	a := newArchive(t)
	w := newTestWatcher(t, a, addr, func(o *Options) {
		o.BatchMessages, o.BatchBytes = 5, 600
		o.IdleRefresh = 50 * time.Millisecond
	})
	r := start(t, w)
	r.waitIdle(t)
	if got := a.count(t); got != 23 {
		t.Fatalf("after the first pass the store holds %d messages, want 23", got)
	}
	if _, err := u.Append("INBOX", bytes.NewReader(message(100)), &imap.AppendOptions{}); err != nil {
		t.Fatal(err)
	}
	a.waitCount(t, 24)
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	for _, m := range append(msgs, message(100)) {
		a.checkStored(t, m)
	}
	st, err := LoadState(w.opts.StatePath)
	if err != nil {
		t.Fatal(err)
	}
	if st.LastUID != 24 || st.UIDValidity == 0 || st.Mailbox != "INBOX" || st.User != "user" {
		t.Errorf("state = %+v, want last UID 24 of user's INBOX", st)
	}
}

func TestMemFatal(t *testing.T) {
	addr, _ := memServer(t, nil, message(1))
	tests := []struct {
		name string
		mod  func(*Options)
		want error
	}{
		{"wrong password", func(o *Options) { o.Password = "wrong" }, ErrAuth},
		{"no such mailbox", func(o *Options) { o.Mailbox = "Nope" }, ErrNoMailbox},
		{"plain text to a remote host", func(o *Options) {
			o.Addr = "imap.example.org:143"
			o.Dial = func(ctx context.Context, network, _ string) (net.Conn, error) {
				return (&net.Dialer{}).DialContext(ctx, network, addr)
			}
		}, ErrPlaintext},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newArchive(t)
			w := newTestWatcher(t, a, addr, tt.mod)
			err := w.Run(context.Background())
			if !errors.Is(err, tt.want) {
				t.Fatalf("Run = %v, want %v", err, tt.want)
			}
			if strings.Contains(err.Error(), w.opts.Password) {
				t.Errorf("Run error %q shows the password", err)
			}
		})
	}
}

func TestStateMismatch(t *testing.T) {
	addr, _ := memServer(t, nil)
	a := newArchive(t)
	w := newTestWatcher(t, a, addr, nil)
	if err := saveState(w.opts.StatePath, State{Server: addr, User: "someone-else", Mailbox: "INBOX", UIDValidity: 1, LastUID: 3}); err != nil {
		t.Fatal(err)
	}
	if err := w.Run(context.Background()); !errors.Is(err, ErrStateMismatch) {
		t.Fatalf("Run = %v, want %v", err, ErrStateMismatch)
	}
}

func TestNewOptions(t *testing.T) {
	a := newArchive(t)
	base := Options{Archiver: a.arc, Addr: "h:993", User: "u", Password: "p", StatePath: "s"}
	tests := []struct {
		name string
		mod  func(*Options)
		want error
	}{
		{"ok", func(*Options) {}, nil},
		{"no archiver", func(o *Options) { o.Archiver = nil }, ErrOptions},
		{"no password", func(o *Options) { o.Password = "" }, ErrOptions},
		{"no state", func(o *Options) { o.StatePath = "" }, ErrOptions},
		{"addr without port", func(o *Options) { o.Addr = "h" }, ErrOptions},
		{"move into itself", func(o *Options) { o.After = After{Action: Move, Folder: "INBOX"} }, ErrBadAfter},
		{"move nowhere", func(o *Options) { o.After = After{Action: Move} }, ErrBadAfter},
	}
	for _, tt := range tests {
		o := base
		tt.mod(&o)
		if _, err := New(o); !errors.Is(err, tt.want) {
			t.Errorf("%s: New = %v, want %v", tt.name, err, tt.want)
		}
	}
}

// TestStateDiskFull: a full disk where the state file is kept does not
// stop the watcher (it did: exit 1 from one failed write): it goes on
// trying, and saves the state once there is room.
func TestStateDiskFull(t *testing.T) {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size=64k", "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a small tmpfs for a full disk: %v: %s", err, bytes.TrimSpace(out))
	}
	t.Cleanup(func() { exec.Command("umount", "-l", dir).Run() })
	// Fill it.
	filler := filepath.Join(dir, "filler")
	f, err := os.Create(filler)
	if err != nil {
		t.Fatal(err)
	}
	f.Write(make([]byte, 64<<10))
	f.Close()
	addr, _ := memServer(t, nil, message(1), message(2))
	a := newArchive(t)
	state := filepath.Join(dir, "state.json")
	w := newTestWatcher(t, a, addr, func(o *Options) { o.StatePath = state })
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- w.Run(ctx) }()
	a.waitCount(t, 2)
	select {
	case err := <-done:
		t.Fatalf("Run on a full disk returned %v; want it to go on", err)
	case <-time.After(500 * time.Millisecond):
	}
	os.Remove(filler)
	deadline := time.Now().Add(30 * time.Second)
	for {
		if st, err := LoadState(state); err == nil && st.LastUID >= 2 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the state was not saved once there was room")
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Run = %v after cancel", err)
	}
	if n := a.count(t); n != 2 {
		t.Errorf("the store counts %d messages, want 2 (each once)", n)
	}
}
