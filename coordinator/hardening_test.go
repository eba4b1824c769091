package coordinator

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
)

// bigNote makes lease records large, so that a database of a few hundred
// runs is larger than what the sockets between a server and a client
// that stops reading can hold.
var bigNote = strings.Repeat("n", 60<<10)

// fill issues n runs with large notes directly from the authority.
func fill(t *testing.T, a *authority.Authority, n int) {
	t.Helper()
	for range n {
		if _, err := a.Issue(t.Context(), authority.Holder{Program: "fill", Note: bigNote}); err != nil {
			t.Fatal(err)
		}
	}
}

// stalledBackup asks for a backup over a raw connection and reads its
// first bytes only, the status line: the
// server has begun to send the copy when it returns.
func stalledBackup(t *testing.T, s *testServer) (net.Conn, *bufio.Reader) {
	t.Helper()
	conn, err := net.Dial("tcp", strings.TrimPrefix(s.ts.URL, "http://"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { conn.Close() })
	fmt.Fprintf(conn, "GET /v1/backup HTTP/1.1\r\nHost: coordinator\r\nAuthorization: Bearer %s\r\n\r\n", testToken)
	br := bufio.NewReaderSize(conn, 16)
	line, err := br.ReadString('\n')
	if err != nil || !strings.Contains(line, "200") {
		t.Fatalf("backup status line = %q, %v", line, err)
	}
	return conn, br
}

// TestBackupStalledDoesNotBlockIssue: a backup client that stops reading
// does not stop POST /v1/runs. (It did: the copy was written from inside
// a read transaction, and bbolt cannot grow its memory map while one is
// open, so once the runs issued meanwhile had filled the map, every issue
// waited for the backup client, for ever.) Each issue here has a minute:
// they take milliseconds; before, one of them waited for ever.
func TestBackupStalledDoesNotBlockIssue(t *testing.T) {
	s := startServer(t, authority.Options{})
	fill(t, s.a, 300) // about 18 MB: more than the sockets hold
	stalledBackup(t, s)
	body := fmt.Sprintf(`{"program":"during-backup","note":%q}`, bigNote)
	// Each issue adds about 64 KiB to the file: 600 of them take it past
	// the 32 MiB memory map of an 18 MB file.
	for i := range 600 {
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		req, _ := http.NewRequestWithContext(ctx, "POST", s.ts.URL+"/v1/runs", strings.NewReader(body))
		req.Header.Set("Authorization", "Bearer "+testToken)
		resp, err := s.ts.Client().Do(req)
		if err != nil {
			cancel()
			t.Fatalf("POST /v1/runs number %d while a backup client stalls: %v", i+1, err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		cancel()
		if resp.StatusCode != http.StatusCreated {
			t.Fatalf("POST /v1/runs number %d while a backup client stalls = %d", i+1, resp.StatusCode)
		}
	}
}

// TestBackupStallDropped: a backup client that stops reading for longer
// than ServerOptions.BackupStall is dropped: it gets less than the whole
// copy (and can tell: Content-Length), and the server goes on.
func TestBackupStallDropped(t *testing.T) {
	db := filepath.Join(t.TempDir(), "runs.db")
	a, _, err := authority.OpenOrCreate(t.Context(), db, authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	srv, err := NewServer(a, ServerOptions{Token: testToken, BackupStall: time.Second})
	if err != nil {
		t.Fatal(err)
	}
	s := &testServer{a: a, srv: srv, db: db}
	s.ts = httptest.NewServer(srv)
	t.Cleanup(s.ts.Close)
	fill(t, a, 150) // about 9 MB
	_, br := stalledBackup(t, s)
	size := int64(-1)
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			t.Fatal(err)
		}
		if k, v, ok := strings.Cut(strings.TrimSpace(line), ":"); ok && strings.EqualFold(k, "Content-Length") {
			size, _ = strconv.ParseInt(strings.TrimSpace(v), 10, 64)
		}
		if strings.TrimSpace(line) == "" {
			break
		}
	}
	time.Sleep(3 * time.Second) // three times the stall allowed
	got, err := io.Copy(io.Discard, br)
	if size <= 0 || got >= size {
		t.Errorf("a client stalled for 3 s read %d bytes of a copy of %d (%v): want it dropped after 1 s", got, size, err)
	}
	resp, _ := s.do(t, request{method: "POST", path: "/v1/runs", body: `{}`})
	if resp.StatusCode != http.StatusCreated {
		t.Errorf("POST /v1/runs after a dropped backup = %d", resp.StatusCode)
	}
}

// TestWeakToken: a coordinator refuses a token that cannot be a random
// secret of 128 bits, whether given to NewServer, from a file or from the
// environment, and says how to make one.
func TestWeakToken(t *testing.T) {
	a, _, err := authority.OpenOrCreate(t.Context(), filepath.Join(t.TempDir(), "runs.db"), authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for _, token := range []string{"x", "s3cret-t0ken", strings.Repeat("a", 64), strings.Repeat("ab", 32), "0123456789abcdef0123456789abcde"} {
		if _, err := NewServer(a, ServerOptions{Token: token}); !errors.Is(err, ErrWeakToken) || len(token) > 3 && strings.Contains(err.Error(), token) {
			t.Errorf("NewServer with a token of %d characters = %v, want ErrWeakToken not naming it", len(token), err)
		}
	}
	for _, token := range []string{testToken, "0123456789abcdef0123456789abcdef", "Zm9vYmFyYmF6cXV4cXV1eGNvcmdlZ3JhdWx0"} {
		if err := CheckToken(token); err != nil {
			t.Errorf("CheckToken(%q) = %v, want nil", token, err)
		}
	}

	dir := t.TempDir()
	file := filepath.Join(dir, "token")
	if err := os.WriteFile(file, []byte("x\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	err = Serve(t.Context(), Config{DB: filepath.Join(dir, "runs.db"), Listen: "127.0.0.1:0", TokenFile: file})
	if !errors.Is(err, ErrWeakToken) || !strings.Contains(err.Error(), file) || !strings.Contains(err.Error(), "openssl rand -hex 16") {
		t.Errorf("Serve with a one-character token file = %v, want ErrWeakToken naming the file and how to make a token", err)
	}
	err = Serve(t.Context(), Config{DB: filepath.Join(dir, "runs.db"), Listen: "127.0.0.1:0", Token: "short"})
	if !errors.Is(err, ErrWeakToken) {
		t.Errorf("Serve with a weak token = %v, want ErrWeakToken", err)
	}
	if _, err := os.Stat(filepath.Join(dir, "runs.db")); err == nil {
		t.Error("Serve created runs.db before refusing the token")
	}
}

// TestTokenFileMode: a token file that group or others can read is
// refused, not only warned about, with the chmod that fixes it.
func TestTokenFileMode(t *testing.T) {
	for _, mode := range []os.FileMode{0o644, 0o640, 0o604, 0o620} {
		dir := t.TempDir()
		file := filepath.Join(dir, "token")
		if err := os.WriteFile(file, []byte(testToken+"\n"), 0o600); err != nil {
			t.Fatal(err)
		}
		os.Chmod(file, mode)
		err := Serve(t.Context(), Config{DB: filepath.Join(dir, "runs.db"), Listen: "127.0.0.1:0", TokenFile: file})
		if !errors.Is(err, ErrTokenFileMode) || !strings.Contains(err.Error(), "chmod 600 "+file) || strings.Contains(err.Error(), testToken) {
			t.Errorf("Serve with a token file of mode %04o = %v, want ErrTokenFileMode saying chmod 600 %s", mode, err, file)
		}
		if _, _, err := EnsureToken(file); !errors.Is(err, ErrTokenFileMode) {
			t.Errorf("EnsureToken of a file of mode %04o = %v, want ErrTokenFileMode", mode, err)
		}
	}
}
