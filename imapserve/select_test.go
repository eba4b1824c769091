package imapserve

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
)

// TestSelectReadOnly: the archive is read-only, so SELECT answers
// [READ-ONLY] as EXAMINE does (RFC 9051 section 6.3.2), on the wire as a
// mail client reads it; the session still keeps its own flags.
func TestSelectReadOnly(t *testing.T) {
	a, _ := smallArchive(t, 2)
	addr := serve(t, a, Options{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	r := bufio.NewReader(conn)
	// tagged sends a command and returns its tagged response line.
	tagged := func(tag, cmd string) string {
		t.Helper()
		fmt.Fprintf(conn, "%s %s\r\n", tag, cmd)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", cmd, err)
			}
			if strings.HasPrefix(line, tag+" ") {
				return strings.TrimRight(line, "\r\n")
			}
		}
	}
	if _, err := r.ReadString('\n'); err != nil { // the greeting
		t.Fatal(err)
	}
	if got := tagged("a1", "LOGIN reader any"); !strings.HasPrefix(got, "a1 OK") {
		t.Fatalf("LOGIN = %q", got)
	}
	tests := []struct{ cmd, want string }{
		{"SELECT a", "a2 OK [READ-ONLY] SELECT completed"},
		{"EXAMINE a", "a3 OK [READ-ONLY] EXAMINE completed"},
		{"select b", "a4 OK [READ-ONLY] SELECT completed"},
	}
	for i, tt := range tests {
		if got := tagged(fmt.Sprintf("a%d", i+2), tt.cmd); got != tt.want {
			t.Errorf("%s = %q, want %q", tt.cmd, got, tt.want)
		}
	}
	// A session's own flags still work in a mailbox it selected.
	tagged("a8", "SELECT a")
	if got := tagged("a9", "STORE 1 +FLAGS (\\Flagged)"); !strings.HasPrefix(got, "a9 OK") {
		t.Errorf("STORE 1 +FLAGS (\\Flagged) after SELECT = %q, want OK", got)
	}
}
