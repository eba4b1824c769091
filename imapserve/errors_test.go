package imapserve

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/netserve"
)

// TestClientErrors: what a client gets wrong is answered as its error
// (BAD [CLIENTBUG]), never as the server's ([SERVERBUG]); a search string
// the index cannot answer is refused, not matched by every message.
func TestClientErrors(t *testing.T) {
	a, cns := smallArchive(t, 3)
	addr := serve(t, a, Options{})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	br.ReadString('\n')
	for i, tt := range []struct{ cmd, want string }{
		{"LOGIN reader x", "OK"},
		{"SELECT a", "OK [READ-ONLY]"},
		{"FETCH 1:x FLAGS", "BAD [CLIENTBUG]"},
		{"FETCH 0 FLAGS", "BAD [CLIENTBUG]"},
		{"UID FETCH x FLAGS", "BAD [CLIENTBUG]"},
		{"SEARCH UID x", "BAD [CLIENTBUG]"},
		{"SEARCH SINCE 1-Foo-2000", "BAD [CLIENTBUG]"},
		{"FETCH 1 (FLAGS", "BAD [CLIENTBUG]"},
		{`SEARCH TEXT "!!!"`, "NO [CANNOT]"},
		{"SEARCH BODY \"\xff\xfe\"", "BAD [CLIENTBUG]"},
		{`SEARCH TEXT ""`, "OK"},
		{"SEARCH TEXT message", "OK"},
		// A message removed from the store before the catalog has
		// caught up: the others are sent, the command succeeds.
		{"REMOVE 2", ""},
		{"FETCH 1:* (UID BODY.PEEK[HEADER])", "OK"},
	} {
		if strings.HasPrefix(tt.cmd, "REMOVE ") {
			a.Remove(cns[1])
			continue
		}
		tag := fmt.Sprintf("e%d", i)
		fmt.Fprintf(conn, "%s %s\r\n", tag, tt.cmd)
		var untagged []string
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%q: %v", tt.cmd, err)
			}
			if !strings.HasPrefix(l, tag+" ") {
				untagged = append(untagged, l)
				continue
			}
			if got := strings.TrimPrefix(l, tag+" "); !strings.HasPrefix(got, tt.want) {
				t.Errorf("%q = %q, want %s", tt.cmd, strings.TrimSpace(got), tt.want)
			}
			break
		}
		switch tt.cmd {
		case "SEARCH TEXT message":
			if len(untagged) != 1 || strings.TrimSpace(untagged[0]) != "* SEARCH 1 2 3" {
				t.Errorf("%q told %q, want * SEARCH 1 2 3", tt.cmd, untagged)
			}
		case "FETCH 1:* (UID BODY.PEEK[HEADER])":
			n := 0
			for _, l := range untagged {
				if strings.Contains(l, " FETCH ") {
					n++
				}
			}
			if n != 2 {
				t.Errorf("%q sent %d messages, want the 2 not removed", tt.cmd, n)
			}
		}
	}
}

// TestFirstRead: a connection that sends nothing is closed at the
// listener's first-read deadline, though go-imap sets 30 s for a
// command; once it has sent a command, go-imap's and the idle timeout's
// deadlines hold.
func TestFirstRead(t *testing.T) {
	a, _ := smallArchive(t, 3)
	const first = 300 * time.Millisecond
	addr := serve(t, a, Options{Limits: netserve.Options{FirstReadTimeout: first, IdleTimeout: time.Hour}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	start := time.Now()
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("a silent connection: %v after %q, want it closed", err, got)
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("a silent connection was closed after %v, want about %v", took, first)
	}
	if !strings.HasPrefix(string(got), "* OK") {
		t.Errorf("a silent connection was told %q, want the greeting", got)
	}

	c := login(t, addr)
	defer c.Close()
	time.Sleep(2 * first)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Errorf("SELECT past the first-read deadline, after LOGIN: %v", err)
	}
}
