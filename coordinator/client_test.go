package coordinator

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

var clientHolder = authority.Holder{Program: "test", Host: "h2", PID: 7, Note: "client test"}

// fastRetries keeps retrying tests short.
var fastRetries = ClientOptions{MinBackoff: time.Millisecond, MaxBackoff: 4 * time.Millisecond, MaxAttempts: 4}

func newClient(t testing.TB, url, token string, opts ClientOptions) *Client {
	t.Helper()
	c, err := NewClient(url, token, clientHolder, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// TestConcurrentClients: 64 clients, each with its own connection pool,
// take 10,000 leases in all from one coordinator: all distinct, all ≥ 1,
// all recorded.
func TestConcurrentClients(t *testing.T) {
	const clients, total = 64, 10000
	s := startServer(t, authority.Options{})
	var next atomic.Int64
	leases := make([][]callnumber.Lease, clients)
	var wg sync.WaitGroup
	for i := range clients {
		c := newClient(t, s.ts.URL, testToken, ClientOptions{})
		wg.Go(func() {
			for next.Add(1) <= total {
				l, err := c.NewRun(context.Background())
				if err != nil {
					t.Errorf("client %d: NewRun = %v", i, err)
					return
				}
				leases[i] = append(leases[i], l)
			}
		})
	}
	wg.Wait()
	seen := make(map[uint32]int, total)
	for i, ls := range leases {
		for _, l := range ls {
			if l.Run < 1 || l.Run > callnumber.MaxRun {
				t.Errorf("client %d got run %d", i, l.Run)
			}
			if j, ok := seen[l.Run]; ok {
				t.Errorf("run %d went to clients %d and %d", l.Run, j, i)
			}
			seen[l.Run] = i
			if l.Authority != s.a.ID() {
				t.Errorf("run %d from authority %s, want %s", l.Run, l.Authority, s.a.ID())
			}
		}
	}
	if len(seen) != total {
		t.Errorf("%d distinct runs, want %d", len(seen), total)
	}
	// Spot-check that what clients hold is what the authority recorded.
	for _, ls := range leases {
		if len(ls) == 0 {
			continue
		}
		got, err := s.a.Lease(context.Background(), ls[0].Run)
		if err != nil || got.Nonce != ls[0].Nonce {
			t.Errorf("Lease(%d) = nonce %s, %v, want %s", ls[0].Run, got.Nonce, err, ls[0].Nonce)
		}
	}
}

func TestClientLease(t *testing.T) {
	s := startServer(t, authority.Options{Scheme: shuffle.Mix})
	c := newClient(t, s.ts.URL+"/", testToken, ClientOptions{})
	l, err := c.NewRun(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	if l.Program != clientHolder.Program || l.Host != clientHolder.Host || l.PID != clientHolder.PID || l.Note != clientHolder.Note {
		t.Errorf("lease holder = %+v, want %+v", l, clientHolder)
	}
	got, err := c.Lease(context.Background(), l.Run)
	if err != nil || got.Nonce != l.Nonce || got.Scheme != shuffle.Mix {
		t.Errorf("Lease(%d) = %+v, %v, want %+v", l.Run, got, err, l)
	}
	if _, err := c.Lease(context.Background(), 999); !errors.Is(err, authority.ErrNotIssued) {
		t.Errorf("Lease(999) = %v, want authority.ErrNotIssued", err)
	}
	// A Generator runs on the client as on a local authority.
	g := callnumber.NewGenerator(c)
	if _, err := g.Next(context.Background()); err != nil {
		t.Errorf("Generator.Next through the client = %v", err)
	}
}

func TestNewClientRefuses(t *testing.T) {
	for _, tc := range []struct{ name, url, token string }{
		{"no token", "http://127.0.0.1:7070", ""},
		{"no scheme", "127.0.0.1:7070", "t"},
		{"ftp", "ftp://127.0.0.1:7070", "t"},
		{"no host", "http://", "t"},
		{"query", "http://127.0.0.1:7070/?x=1", "t"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if _, err := NewClient(tc.url, tc.token, clientHolder, ClientOptions{}); err == nil {
				t.Errorf("NewClient(%q, %q) = nil error, want one", tc.url, tc.token)
			}
		})
	}
}

// flaky answers the first fails requests with status, then passes the
// rest to the real server.
type flaky struct {
	next   http.Handler
	status int
	fails  int64
	seen   atomic.Int64
}

func (f *flaky) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if f.seen.Add(1) <= f.fails {
		w.WriteHeader(f.status)
		w.Write([]byte(`{"error":"injected","kind":"injected"}`))
		return
	}
	f.next.ServeHTTP(w, r)
}

func TestClientRetries(t *testing.T) {
	for _, tc := range []struct {
		name     string
		status   int
		fails    int64
		wantErr  error // nil: success expected
		wantSeen int64
	}{
		{"503 then success", http.StatusServiceUnavailable, 2, nil, 3},
		{"500 then success", http.StatusInternalServerError, 1, nil, 2},
		{"429 then success", http.StatusTooManyRequests, 1, nil, 2},
		{"502 until attempts run out", http.StatusBadGateway, 100, errAny, 4},
		{"400 is not retried", http.StatusBadRequest, 100, errAny, 1},
		{"401 is not retried", http.StatusUnauthorized, 100, ErrUnauthorized, 1},
		{"403 is not retried", http.StatusForbidden, 100, errAny, 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := startServer(t, authority.Options{})
			f := &flaky{next: s.srv, status: tc.status, fails: tc.fails}
			ts := httptest.NewServer(f)
			defer ts.Close()
			c := newClient(t, ts.URL, testToken, fastRetries)
			l, err := c.NewRun(context.Background())
			switch {
			case tc.wantErr == nil && err != nil:
				t.Errorf("NewRun = %v, want success", err)
			case tc.wantErr == nil && l.Run != 1:
				t.Errorf("NewRun().Run = %d, want 1", l.Run)
			case tc.wantErr == errAny && err == nil, tc.wantErr != nil && tc.wantErr != errAny && !errors.Is(err, tc.wantErr):
				t.Errorf("NewRun = %v, want %v", err, tc.wantErr)
			}
			if got := f.seen.Load(); got != tc.wantSeen {
				t.Errorf("server saw %d requests, want %d", got, tc.wantSeen)
			}
			var se *StatusError
			if tc.wantErr != nil && (!errors.As(err, &se) || se.StatusCode != tc.status) {
				t.Errorf("NewRun = %v, want a StatusError with %d", err, tc.status)
			}
		})
	}
}

var errAny = errors.New("any error")

func TestClientNoRetryOnExhausted(t *testing.T) {
	s := startServer(t, authority.Options{})
	if err := s.a.Bump(context.Background(), callnumber.MaxRun+1); err != nil {
		t.Fatal(err)
	}
	f := &flaky{next: s.srv}
	ts := httptest.NewServer(f)
	defer ts.Close()
	c := newClient(t, ts.URL, testToken, fastRetries)
	if _, err := c.NewRun(context.Background()); !errors.Is(err, authority.ErrExhausted) {
		t.Errorf("NewRun = %v, want authority.ErrExhausted", err)
	}
	if got := f.seen.Load(); got != 1 {
		t.Errorf("server saw %d requests, want 1", got)
	}
}

func TestClientWrongToken(t *testing.T) {
	s := startServer(t, authority.Options{})
	c := newClient(t, s.ts.URL, "not-the-token", fastRetries)
	if _, err := c.NewRun(context.Background()); !errors.Is(err, ErrUnauthorized) {
		t.Errorf("NewRun with a wrong token = %v, want ErrUnauthorized", err)
	}
}

// TestClientNetworkErrors: a closed port is retried up to MaxAttempts, and
// the token appears in no log line.
func TestClientNetworkErrors(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close() // nothing listens there now

	var logs bytes.Buffer
	opts := fastRetries
	opts.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := newClient(t, "http://"+addr, testToken, opts)
	_, err = c.NewRun(context.Background())
	if err == nil {
		t.Fatal("NewRun against a closed port = nil error")
	}
	if !strings.Contains(err.Error(), "after 4 attempts") {
		t.Errorf("NewRun = %v, want it to say it made 4 attempts", err)
	}
	if n := strings.Count(logs.String(), "retrying"); n != 3 {
		t.Errorf("logged %d retries, want 3:\n%s", n, logs.String())
	}
	if strings.Contains(logs.String(), testToken) || strings.Contains(err.Error(), testToken) {
		t.Errorf("the token leaked into the logs or the error")
	}
}

func TestClientContext(t *testing.T) {
	s := startServer(t, authority.Options{})
	f := &flaky{next: s.srv, status: http.StatusServiceUnavailable, fails: 1 << 30}
	ts := httptest.NewServer(f)
	defer ts.Close()
	// Retries would go on for long; the context's end stops them.
	c := newClient(t, ts.URL, testToken, ClientOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour, MaxAttempts: 100})
	ctx, cancel := context.WithCancel(context.Background())
	go func() {
		for f.seen.Load() == 0 {
			time.Sleep(time.Millisecond)
		}
		cancel()
	}()
	if _, err := c.NewRun(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("NewRun = %v, want context.Canceled", err)
	}
	cancel()
	if _, err := c.NewRun(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("NewRun with an ended context = %v, want context.Canceled", err)
	}
}

// A context that ends while an attempt fails (the answer is a 503 and
// the context ends before the client sees it) gives an error that says
// so, not only the 503: the CI run caught TestClientContext that way.
func TestClientContextEndsDuringAttempt(t *testing.T) {
	var cancel atomic.Pointer[context.CancelFunc]
	ts := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		(*cancel.Load())()
		w.WriteHeader(http.StatusServiceUnavailable)
		w.Write([]byte(`{"error":"injected","kind":"injected"}`))
	}))
	defer ts.Close()
	c := newClient(t, ts.URL, testToken, ClientOptions{MinBackoff: time.Hour, MaxBackoff: time.Hour, MaxAttempts: 100})
	for range 20 {
		ctx, stop := context.WithCancel(context.Background())
		cancel.Store(&stop)
		_, err := c.NewRun(ctx)
		stop()
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("NewRun = %v, want context.Canceled", err)
		}
		if n := strings.Count(err.Error(), "context canceled"); n != 1 {
			t.Errorf("NewRun = %v, want it to name the end of the context once", err)
		}
	}
}

func TestBackoff(t *testing.T) {
	c := newClient(t, "http://127.0.0.1:1", "t", ClientOptions{MinBackoff: 100 * time.Millisecond, MaxBackoff: time.Second})
	for _, tc := range []struct {
		attempt  int
		min, max time.Duration
	}{
		{1, 50 * time.Millisecond, 100 * time.Millisecond},
		{2, 100 * time.Millisecond, 200 * time.Millisecond},
		{4, 400 * time.Millisecond, 800 * time.Millisecond},
		{5, 500 * time.Millisecond, time.Second},
		{40, 500 * time.Millisecond, time.Second},
	} {
		for range 100 {
			if d := c.backoff(tc.attempt); d < tc.min || d > tc.max {
				t.Fatalf("backoff(%d) = %v, want within [%v, %v]", tc.attempt, d, tc.min, tc.max)
			}
		}
	}
}

func TestBackupThroughServer(t *testing.T) {
	ctx := context.Background()
	s := startServer(t, authority.Options{Scheme: shuffle.Mix})
	c := newClient(t, s.ts.URL, testToken, ClientOptions{})
	var want []callnumber.Lease
	for range 10 {
		l, err := c.NewRun(ctx)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l)
	}
	out := filepath.Join(t.TempDir(), "backup.db")
	var id string
	err := SaveBackup(ctx, out, "", func(w io.Writer) error {
		var err error
		id, err = c.Backup(ctx, w)
		return err
	})
	if err != nil {
		t.Fatalf("backup = %v", err)
	}
	if id != s.a.ID() {
		t.Errorf("backup announced authority %s, want %s", id, s.a.ID())
	}
	checkBackup(t, out, s.a, want)

	// The same from the file, once the coordinator has let go of it.
	s.ts.Close()
	s.a.Close()
	out2 := filepath.Join(t.TempDir(), "backup2.db")
	if id, err := BackupFile(ctx, s.db, out2, 0); err != nil || id != s.a.ID() {
		t.Fatalf("BackupFile = %s, %v, want %s", id, err, s.a.ID())
	}
	checkBackup(t, out2, s.a, want)
}

func checkBackup(t *testing.T, path string, a *authority.Authority, want []callnumber.Lease) {
	t.Helper()
	b, err := authority.Open(context.Background(), path, authority.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("the backup does not open: %v", err)
	}
	defer b.Close()
	if b.ID() != a.ID() || b.Key() != a.Key() || b.Scheme() != a.Scheme() {
		t.Errorf("backup is authority %s/%s, want %s/%s", b.ID(), b.Scheme(), a.ID(), a.Scheme())
	}
	for _, l := range want {
		got, err := b.Lease(context.Background(), l.Run)
		if err != nil || got.Nonce != l.Nonce {
			t.Errorf("backup Lease(%d) = %s, %v, want nonce %s", l.Run, got.Nonce, err, l.Nonce)
		}
	}
	if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != authority.FileMode {
		t.Errorf("backup mode = %v, %v, want %v", fi.Mode().Perm(), err, os.FileMode(authority.FileMode))
	}
}

func TestBackupFileWhileServed(t *testing.T) {
	s := startServer(t, authority.Options{})
	out := filepath.Join(t.TempDir(), "backup.db")
	_, err := BackupFile(context.Background(), s.db, out, time.Millisecond)
	if !errors.Is(err, authority.ErrLocked) || !strings.Contains(err.Error(), "--coordinator") {
		t.Errorf("BackupFile of a served file = %v, want ErrLocked suggesting --coordinator", err)
	}
	if _, err := os.Stat(out); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a failed backup left %s (%v)", out, err)
	}
}

func TestSaveBackupRefusesGarbage(t *testing.T) {
	out := filepath.Join(t.TempDir(), "backup.db")
	err := SaveBackup(context.Background(), out, "", func(w io.Writer) error {
		_, err := w.Write(bytes.Repeat([]byte("not a database "), 1000))
		return err
	})
	if !errors.Is(err, authority.ErrNotAuthority) {
		t.Errorf("SaveBackup of garbage = %v, want ErrNotAuthority", err)
	}
	if ents, _ := os.ReadDir(filepath.Dir(out)); len(ents) != 0 {
		t.Errorf("a refused backup left %d files", len(ents))
	}
}

func TestEnsureToken(t *testing.T) {
	path := filepath.Join(t.TempDir(), "token")
	tok, created, err := EnsureToken(path)
	if err != nil || !created || len(tok) != 64 {
		t.Fatalf("EnsureToken(new) = %q, %v, %v, want 64 hex digits, true, nil", tok, created, err)
	}
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	if got := fi.Mode().Perm(); got != 0o600 {
		t.Errorf("token file mode = %v, want 0600", got)
	}
	again, created, err := EnsureToken(path)
	if err != nil || created || again != tok {
		t.Errorf("EnsureToken(existing) = %q, %v, %v, want the same token, false, nil", again, created, err)
	}
	empty := filepath.Join(t.TempDir(), "empty")
	os.WriteFile(empty, []byte("\n"), 0o600)
	if _, _, err := EnsureToken(empty); err == nil {
		t.Errorf("EnsureToken(empty file) = nil error, want one")
	}
}

// TestServeShutdown runs Serve in this process, issues runs from several
// clients, and cancels it in the middle: Serve returns cleanly, and every
// lease a client received is in the database, which reopens.
func TestServeShutdown(t *testing.T) {
	dir := t.TempDir()
	db, tokenFile := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	ready := make(chan net.Addr, 1)
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, Config{DB: db, Listen: "127.0.0.1:0", TokenFile: tokenFile, Scheme: shuffle.Mix,
			Ready: func(a net.Addr) { ready <- a }})
	}()
	var addr net.Addr
	select {
	case addr = <-ready:
	case err := <-done:
		t.Fatalf("Serve = %v", err)
	}
	token, created, err := EnsureToken(tokenFile)
	if err != nil || created {
		t.Fatalf("Serve did not create the token file: %v", err)
	}

	var mu sync.Mutex
	var got []callnumber.Lease
	var issued atomic.Int64
	var wg sync.WaitGroup
	for range 8 {
		c := newClient(t, "http://"+addr.String(), token, ClientOptions{MaxAttempts: 1})
		wg.Go(func() {
			for {
				l, err := c.NewRun(context.Background())
				if err != nil {
					return // the server went away
				}
				mu.Lock()
				got = append(got, l)
				mu.Unlock()
				if issued.Add(1) == 200 {
					cancel()
				}
			}
		})
	}
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	wg.Wait()

	a, err := authority.Open(context.Background(), db, authority.Options{})
	if err != nil {
		t.Fatalf("reopening after shutdown: %v", err)
	}
	defer a.Close()
	if a.Scheme() != shuffle.Mix {
		t.Errorf("scheme = %s, want mix", a.Scheme())
	}
	seen := map[uint32]bool{}
	for _, l := range got {
		if seen[l.Run] {
			t.Errorf("run %d received twice", l.Run)
		}
		seen[l.Run] = true
		rec, err := a.Lease(context.Background(), l.Run)
		if err != nil || rec.Nonce != l.Nonce {
			t.Errorf("run %d: recorded nonce %s, %v; the client got %s", l.Run, rec.Nonce, err, l.Nonce)
		}
	}
	if len(got) < 200 {
		t.Errorf("clients received %d leases, want at least 200", len(got))
	}
}

func TestServeRefuses(t *testing.T) {
	dir := t.TempDir()
	for _, tc := range []struct {
		name string
		cfg  Config
	}{
		{"no db", Config{Token: testToken}},
		{"no token", Config{DB: filepath.Join(dir, "a.db")}},
		{"cert without key", Config{DB: filepath.Join(dir, "b.db"), Token: testToken, TLSCert: "c.pem"}},
		{"bad scheme", Config{DB: filepath.Join(dir, "c.db"), Token: testToken, Scheme: "rot13"}},
		{"missing cert", Config{DB: filepath.Join(dir, "d.db"), Token: testToken, TLSCert: "nope.pem", TLSKey: "nope.key"}},
		{"not a database", Config{DB: writeTemp(t, "garbage"), Token: testToken}},
		{"bad address", Config{DB: filepath.Join(dir, "e.db"), Token: testToken, Listen: "256.0.0.1:99999"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := Serve(context.Background(), tc.cfg); err == nil {
				t.Errorf("Serve(%+v) = nil, want an error", tc.cfg)
			}
		})
	}
}

func writeTemp(t *testing.T, content string) string {
	path := filepath.Join(t.TempDir(), "file")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}
