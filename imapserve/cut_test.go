package imapserve

import (
	"bufio"
	"bytes"
	"fmt"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// TestCutConnections cuts a client's connection at every stage of a
// session, a large FETCH's literal above all, again and again from one
// address: every connection's place must come back (the open-connection
// metric returns to 0, a new client is let in) and the server must stop
// at once. A FETCH cut mid-literal once kept go-imap's encoder, and so
// the connection and its place, forever.
func TestCutConnections(t *testing.T) {
	a := archivetest.New(t)
	big := append(mail(1, "a large message"), bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\n"), 64<<10)...)
	a.Put("a", big, mail(2, "a small one"))
	a.Sync()
	reg := prometheus.NewRegistry()
	const perIP = 3
	addr, stop := start(t, a, Options{Registerer: reg, Limits: netserve.Options{MaxConnsPerIP: perIP}})
	stopped := make(chan struct{})
	stopNow := sync.OnceFunc(func() { go func() { stop(); close(stopped) }() })
	// Before the archive closes, failed or not: a server left running
	// would read a closed catalog.
	t.Cleanup(func() {
		stopNow()
		select {
		case <-stopped:
		case <-time.After(10 * time.Second):
			panic("the IMAP server did not stop within 10 s of being asked: a connection holds it")
		}
	})

	stages := []struct {
		name string
		send []string // lines sent after the greeting, each answered before the next
		cut  string   // sent last, as it is (a whole line ends in CRLF), its answer only begun to be read
	}{
		{"before the greeting", nil, ""},
		{"after the greeting", []string{"a0 CAPABILITY"}, ""},
		{"mid-command", []string{"a0 CAPABILITY"}, "a1 LOGIN reader"},
		{"mid-literal from the client", []string{"a0 CAPABILITY"}, "a1 LOGIN {100}\r\nread"},
		{"logged in", []string{"a1 LOGIN reader x"}, ""},
		{"selected", []string{"a1 LOGIN reader x", "a2 SELECT a"}, ""},
		{"mid-FETCH of a large message", []string{"a1 LOGIN reader x", "a2 SELECT a"}, "a3 FETCH 1 BODY.PEEK[]\r\n"},
		{"mid-FETCH of every message", []string{"a1 LOGIN reader x", "a2 SELECT a"}, "a3 FETCH 1:* (ENVELOPE BODYSTRUCTURE BODY.PEEK[])\r\n"},
		{"mid-UID FETCH, partial", []string{"a1 LOGIN reader x", "a2 EXAMINE a"}, "a3 UID FETCH 1:* BODY.PEEK[]<0.3000000>\r\n"},
		{"idling", []string{"a1 LOGIN reader x", "a2 SELECT a"}, "a3 IDLE\r\n"},
		{"mid-SEARCH", []string{"a1 LOGIN reader x", "a2 SELECT a"}, "a3 SEARCH BODY abcd\r\n"},
	}
	dialed := 0.0
	for round := range 3 {
		for _, st := range stages {
			// Three rounds of every stage from one address, as many as
			// it may have open: a leaked place shows as one still open,
			// and as a refused connection.
			for range perIP {
				cutAt(t, addr, st.send, st.cut)
				dialed++
			}
			if open := metrictest.Settled(t, reg, "chibrary_imap", dialed); open != 0 {
				t.Fatalf("round %d, cut %s: %v connections still open, want 0", round, st.name, open)
			}
		}
	}
	// The places are all back: a client logs in and reads.
	c := login(t, addr)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatalf("SELECT after the cut connections = %v", err)
	}
	c.Close()
	stopNow()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop within 10 s of being asked")
	}
}

// cutAt opens a connection, sends lines (reading each answer through its
// tagged line), then cut, reads a little of its answer and resets the
// connection. With neither, it is cut before the greeting is read.
func cutAt(t *testing.T, addr string, lines []string, cut string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	// A reset, not a FIN: the server's next write fails at once, as when
	// a client's machine goes away.
	defer func() {
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}()
	if lines == nil && cut == "" {
		return
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(conn, 512)
	g, err := br.ReadString('\n')
	if err != nil || !strings.HasPrefix(g, "* OK") {
		t.Fatalf("greeting %q, %v: a place was not given back", g, err)
	}
	for _, l := range lines {
		tag, _, _ := strings.Cut(l, " ")
		fmt.Fprintf(conn, "%s\r\n", l)
		for {
			resp, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v", l, err)
			}
			if strings.HasPrefix(resp, tag+" ") {
				if !strings.HasPrefix(resp, tag+" OK") {
					t.Fatalf("%s: %q", l, resp)
				}
				break
			}
		}
	}
	if cut != "" {
		fmt.Fprint(conn, cut)
		// Read a little of the answer to a whole line, so that the
		// server is writing.
		if strings.HasSuffix(cut, "\n") {
			br.Peek(1)
		}
		time.Sleep(5 * time.Millisecond)
	}
}
