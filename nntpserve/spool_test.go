package nntpserve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// large returns a message of size bytes or more whose lines start with
// dots now and then, and whose last line has no end.
func large(size int) []byte {
	var b bytes.Buffer
	b.WriteString("From: Writer <w@example.org>\nSubject: large\nDate: Mon, 2 Jan 2006 15:04:05 +0000\nMessage-ID: <large@example.org>\n\n.a line that starts with a dot\n")
	for i := 0; b.Len() < size; i++ {
		if i%7 == 0 {
			b.WriteString("..two dots\n.\n")
		}
		fmt.Fprintf(&b, "line %d of a large message, long enough to fill it up soon\n", i)
	}
	b.WriteString("the end, with no line end")
	return b.Bytes()
}

var small = []byte("From: w@example.org\nSubject: small\nMessage-ID: <small@example.org>\n\n.a dot\nend\n")

// raw sends cmds on a fresh connection and returns everything the server
// answered, read until each answer's end (a block's dot line).
func raw(t *testing.T, addr string, cmds ...string) string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	var out strings.Builder
	line := func() string {
		l, err := br.ReadString('\n')
		if err != nil {
			t.Fatalf("after %q: %v", out.String(), err)
		}
		out.WriteString(l)
		return l
	}
	line()
	for _, c := range cmds {
		fmt.Fprintf(conn, "%s\r\n", c)
		if l := line(); strings.HasPrefix(l, "220") || strings.HasPrefix(l, "221") || strings.HasPrefix(l, "222") {
			for line() != ".\r\n" {
			}
		}
	}
	return out.String()
}

// TestSpooledArticle: an article sent from a spool file is sent exactly as
// one sent from memory: dot-stuffed, the header without its blank line,
// the last line ended.
func TestSpooledArticle(t *testing.T) {
	a := archivetest.New(t)
	a.Put("a", large(16<<10), small)
	a.Sync()
	memory := serve(t, a, Options{}, func(s *Server) { s.spoolAbove = 1 << 40 })
	spooled := serve(t, a, Options{}, func(s *Server) { s.spoolAbove = 0 })
	cmds := []string{"GROUP chibrary.a", "ARTICLE 1", "HEAD 1", "BODY 1", "ARTICLE 2", "HEAD <large@example.org>", "BODY 2"}
	want, got := raw(t, memory, cmds...), raw(t, spooled, cmds...)
	if got != want {
		t.Errorf("from a spool file:\n%.3000s\nwant, as from memory:\n%.3000s", got, want)
	}
	for _, part := range []string{
		"\r\n\r\n..a line that starts with a dot\r\n",
		"\r\n...two dots\r\n..\r\n",
		"\r\nthe end, with no line end\r\n.\r\n",
		"221 1 <large@example.org>\r\nFrom: Writer <w@example.org>\r\nSubject: large\r\nDate: Mon, 2 Jan 2006 15:04:05 +0000\r\nMessage-ID: <large@example.org>\r\n.\r\n",
		"222 1 <large@example.org>\r\n..a line that starts",
	} {
		if !strings.Contains(got, part) {
			t.Errorf("the answers lack %q", part)
		}
	}
}

// TestStalledReaders: clients that ask for a large article and read
// nothing of it do not each hold a copy of it.
func TestStalledReaders(t *testing.T) {
	a := archivetest.New(t)
	const size = 8 << 20
	a.Put("a", large(size))
	a.Sync()
	addr := serve(t, a, Options{})
	const readers = 12
	grown := metrictest.StalledHeap(t, addr, readers, "GROUP chibrary.a\r\nARTICLE 1\r\n", time.Second)
	t.Logf("%d stalled readers of a %d MB article: the heap grew by %d MB", readers, size>>20, grown>>20)
	if grown > 4*size {
		t.Errorf("%d stalled readers of a %d MB article: the heap grew by %d MB, want under %d", readers, size>>20, grown>>20, 4*size>>20)
	}
}

// TestFirstRead: a connection that sends nothing is closed at the
// first-read deadline, not kept for the idle timeout.
func TestFirstRead(t *testing.T) {
	a, _ := testArchive(t)
	addr := serve(t, a, Options{Limits: netserve.Options{FirstReadTimeout: 300 * time.Millisecond, IdleTimeout: time.Hour}})
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(20 * time.Second))
	got, err := io.ReadAll(conn)
	if err != nil {
		t.Fatalf("a silent connection: %v after %q, want it closed", err, got)
	}
	if !strings.HasPrefix(string(got), "201 ") {
		t.Errorf("a silent connection was told %q", got)
	}
	// Once a command came, the idle timeout holds.
	s := dial(t, addr)
	s.expect(111, "DATE")
	time.Sleep(600 * time.Millisecond)
	s.expect(111, "DATE")
}

// TestCutConnections cuts a client's connection at every stage, a large
// article's sending above all, again and again from one address: every
// connection's place comes back and the server stops at once.
func TestCutConnections(t *testing.T) {
	a := archivetest.New(t)
	a.Put("a", large(4<<20), small)
	a.Sync()
	reg := prometheus.NewRegistry()
	const perIP = 3
	addr, stop := start(t, a, Options{Registerer: reg, Limits: netserve.Options{MaxConnsPerIP: perIP}})
	stages := []struct{ name, send string }{
		{"before the greeting", ""},
		{"after the greeting", "\x00"},
		{"mid-command", "GROUP chib"},
		{"in a group", "GROUP chibrary.a\r\n"},
		{"mid-ARTICLE of a large message", "GROUP chibrary.a\r\nARTICLE 1\r\n"},
		{"mid-BODY of every message", "GROUP chibrary.a\r\nBODY 1\r\nBODY 2\r\nBODY 1\r\n"},
		{"mid-OVER", "GROUP chibrary.a\r\nOVER 1-\r\nHDR Received 1-\r\n"},
	}
	dialed := 0.0
	for round := range 3 {
		for _, st := range stages {
			for range perIP {
				cut(t, addr, st.name, st.send)
				dialed++
			}
			if open := metrictest.Settled(t, reg, "chibrary_nntp", dialed); open != 0 {
				t.Fatalf("round %d, cut %s: %v connections still open, want 0", round, st.name, open)
			}
		}
	}
	s := dial(t, addr)
	s.expect(211, "GROUP chibrary.a")
	stopped := make(chan struct{})
	go func() { stop(); close(stopped) }()
	select {
	case <-stopped:
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop within 10 s of being asked")
	}
}

// cut opens a connection, reads the greeting and sends send ("" cuts it
// before the greeting is read, "\x00" right after it), reads a little of
// the answer and resets the connection.
func cut(t *testing.T, addr, stage, send string) {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
	}()
	if send == "" {
		return
	}
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	br := bufio.NewReaderSize(conn, 512)
	if g, err := br.ReadString('\n'); err != nil || !strings.HasPrefix(g, "201 ") {
		t.Fatalf("cut %s: greeting %q, %v: a place was not given back", stage, g, err)
	}
	if send == "\x00" {
		return
	}
	fmt.Fprint(conn, send)
	if strings.HasSuffix(send, "\n") {
		br.Peek(1)
		time.Sleep(5 * time.Millisecond)
	}
}

// TestRemovedArticle: a message removed from the store before the
// catalog has caught up is no article (423), not a fault of the archive.
func TestRemovedArticle(t *testing.T) {
	a := archivetest.New(t)
	cns := a.Put("a", large(2<<20), small)
	a.Sync()
	for _, cn := range cns {
		a.Remove(cn)
	}
	s := dial(t, serve(t, a, Options{}))
	s.expect(211, "GROUP chibrary.a")
	s.expect(423, "ARTICLE 1")
	s.expect(423, "BODY 2")
	_, lines := s.block(225, "HDR Received 1-2")
	if len(lines) != 2 || lines[0] != "1 " || lines[1] != "2 " {
		t.Errorf("HDR of removed articles = %q, want them empty", lines)
	}
}
