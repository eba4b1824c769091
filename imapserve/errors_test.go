package imapserve

import (
	"bufio"
	"fmt"
	"net"
	"strings"
	"testing"
	"time"
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
