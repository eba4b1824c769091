package nntpserve

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"net"
	"net/textproto"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/mailwire"
)

func serve(t testing.TB, a *archivetest.Archive, opts Options, tweaks ...func(*Server)) string {
	t.Helper()
	addr, stop := start(t, a, opts, tweaks...)
	t.Cleanup(stop)
	return addr
}

// start serves a over NNTP on a loopback port until stop is called, which
// fails the test if the server does not stop within 10 s; tweaks change
// the server before it serves.
func start(t testing.TB, a *archivetest.Archive, opts Options, tweaks ...func(*Server)) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s, err := New(keeper.Fixed(a.Catalog), a.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range tweaks {
		tweak(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, Listener{Listener: ln}) }()
	return ln.Addr().String(), sync.OnceFunc(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Serve = %v", err)
			}
		case <-time.After(10 * time.Second):
			// The archive closes next: a server left running would
			// read a closed catalog.
			panic("the NNTP server did not stop within 10 s of being asked: a connection holds it")
		}
	})
}

// session is a scripted NNTP client.
type session struct {
	t testing.TB
	c *textproto.Conn
}

func dial(t testing.TB, addr string) *session {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	s := &session{t: t, c: textproto.NewConn(conn)}
	t.Cleanup(func() { s.c.Close() })
	if _, _, err := s.c.ReadCodeLine(201); err != nil {
		t.Fatalf("greeting: %v", err)
	}
	return s
}

// cmd sends a command and returns the answer's code and text.
func (s *session) cmd(format string, args ...any) (int, string) {
	s.t.Helper()
	if err := s.c.PrintfLine(format, args...); err != nil {
		s.t.Fatal(err)
	}
	code, msg, err := s.c.ReadCodeLine(0)
	if err != nil && code == 0 {
		s.t.Fatalf("%s: %v", fmt.Sprintf(format, args...), err)
	}
	return code, msg
}

// block sends a command that answers with want and a block, and returns
// the block's lines, dot-unstuffed.
func (s *session) block(want int, format string, args ...any) (string, []string) {
	s.t.Helper()
	code, msg := s.cmd(format, args...)
	if code != want {
		s.t.Fatalf("%s = %d %s, want %d", fmt.Sprintf(format, args...), code, msg, want)
	}
	lines, err := s.c.ReadDotLines()
	if err != nil {
		s.t.Fatal(err)
	}
	return msg, lines
}

func (s *session) expect(want int, format string, args ...any) string {
	s.t.Helper()
	code, msg := s.cmd(format, args...)
	if code != want {
		s.t.Errorf("%s = %d %s, want %d", fmt.Sprintf(format, args...), code, msg, want)
	}
	return msg
}

func testArchive(t *testing.T) (*archivetest.Archive, []string) {
	t.Helper()
	a := archivetest.New(t)
	cns := a.Put("linux-mips",
		[]byte("From: Ralf =?iso-8859-1?q?B=E4chle?= <ralf@example.org>\nSubject: First\nDate: Tue, 3 Jan 2006 10:00:00 +0100\nMessage-ID: <1@x>\n\nline one\n.dot line\nline three\n"),
		[]byte("From: bob@example.org\nSubject: Re: First\tand tab\nDate: Wed, 4 Jan 2006 10:00:00 +0000\nMessage-ID: <2@x>\nReferences: <1@x>\nX-Extra: extra value\n\nreply\n"),
		[]byte("From: carol@example.org\nSubject: Third\nMessage-ID: <3@x>\nIn-Reply-To: <2@x>\n\nthird\nno final newline"),
	)
	a.Put("other", []byte("From: x@example.org\nSubject: elsewhere\nMessage-ID: <4@x>\n\nx\n"))
	a.Sync()
	return a, cns
}

func TestSession(t *testing.T) {
	a, cns := testArchive(t)
	addr := serve(t, a, Options{})
	s := dial(t, addr)

	_, caps := s.block(101, "CAPABILITIES")
	for _, want := range []string{"VERSION 2", "READER", "OVER MSGID", "HDR", "NEWNEWS"} {
		if !contains(caps, want) {
			t.Errorf("CAPABILITIES %q lack %q", caps, want)
		}
	}
	if contains(caps, "STARTTLS") {
		t.Errorf("CAPABILITIES offer STARTTLS without a certificate")
	}
	s.expect(201, "MODE READER")
	_, active := s.block(215, "LIST")
	if strings.Join(active, "|") != "chibrary.linux-mips 3 1 n|chibrary.other 1 1 n" {
		t.Errorf("LIST = %q", active)
	}
	_, active = s.block(215, "LIST ACTIVE *.other")
	if strings.Join(active, "|") != "chibrary.other 1 1 n" {
		t.Errorf("LIST ACTIVE *.other = %q", active)
	}
	_, ng := s.block(215, "LIST NEWSGROUPS chibrary.l*")
	if len(ng) != 1 || !strings.HasPrefix(ng[0], "chibrary.linux-mips\t") {
		t.Errorf("LIST NEWSGROUPS = %q", ng)
	}
	_, fmtLines := s.block(215, "LIST OVERVIEW.FMT")
	if strings.Join(fmtLines, ",") != "Subject:,From:,Date:,Message-ID:,References:,:bytes,:lines" {
		t.Errorf("LIST OVERVIEW.FMT = %q", fmtLines)
	}

	s.expect(412, "ARTICLE")
	s.expect(411, "GROUP chibrary.nosuch")
	s.expect(411, "GROUP linux-mips")
	if msg := s.expect(211, "GROUP chibrary.linux-mips"); msg != "3 1 3 chibrary.linux-mips" {
		t.Errorf("GROUP = %q", msg)
	}
	msg, nums := s.block(211, "LISTGROUP")
	if msg != "3 1 3 chibrary.linux-mips list follows" || strings.Join(nums, ",") != "1,2,3" {
		t.Errorf("LISTGROUP = %q, %q", msg, nums)
	}
	if _, nums := s.block(211, "LISTGROUP chibrary.linux-mips 2-"); strings.Join(nums, ",") != "2,3" {
		t.Errorf("LISTGROUP 2- = %q", nums)
	}

	// ARTICLE: the stored message, CRLF, dot-stuffed (ReadDotLines
	// unstuffs).
	for i, cn := range cns {
		raw := a.Get(cn)
		wire := string(mailwire.AppendCRLF(nil, raw))
		want := strings.Split(strings.TrimSuffix(wire, "\r\n"), "\r\n")
		msg, lines := s.block(220, "ARTICLE %d", i+1)
		if !strings.HasPrefix(msg, fmt.Sprintf("%d <%d@x>", i+1, i+1)) {
			t.Errorf("ARTICLE %d: %q", i+1, msg)
		}
		if strings.Join(lines, "\n") != strings.Join(want, "\n") {
			t.Errorf("ARTICLE %d = %q, want %q", i+1, lines, want)
		}
	}
	_, head := s.block(221, "HEAD <2@x>")
	if len(head) != 6 || head[5] != "X-Extra: extra value" {
		t.Errorf("HEAD <2@x> = %q", head)
	}
	msg, body := s.block(222, "BODY 1")
	if msg != "1 <1@x>" || strings.Join(body, "|") != "line one|.dot line|line three" {
		t.Errorf("BODY 1 = %q, %q", msg, body)
	}
	if msg := s.expect(223, "STAT <3@x>"); msg != "0 <3@x>" {
		t.Errorf("STAT <3@x> = %q", msg)
	}
	s.expect(430, "ARTICLE <nosuch@x>")
	s.expect(423, "ARTICLE 99")
	s.expect(501, "ARTICLE x")

	// LAST and NEXT walk the current article.
	s.expect(223, "STAT 1")
	s.expect(422, "LAST")
	if msg := s.expect(223, "NEXT"); msg != "2 <2@x>" {
		t.Errorf("NEXT = %q", msg)
	}
	s.expect(223, "NEXT")
	s.expect(421, "NEXT")
	if msg := s.expect(223, "LAST"); msg != "2 <2@x>" {
		t.Errorf("LAST = %q", msg)
	}

	// OVER: the catalog's fields.
	_, over := s.block(224, "OVER 1-")
	if len(over) != 3 {
		t.Fatalf("OVER 1- = %q", over)
	}
	f1 := strings.Split(over[0], "\t")
	wire1, lines1 := mailwire.Size(a.Get(cns[0]))
	if len(f1) != 8 || f1[0] != "1" || f1[1] != "First" || f1[2] != "=?utf-8?q?Ralf_B=C3=A4chle?= <ralf@example.org>" ||
		f1[3] != "Tue, 03 Jan 2006 09:00:00 +0000" || f1[4] != "<1@x>" || f1[5] != "" || f1[6] != fmt.Sprint(wire1) || f1[7] != fmt.Sprint(lines1) {
		t.Errorf("OVER line 1 = %q", f1)
	}
	if f2 := strings.Split(over[1], "\t"); len(f2) != 8 || f2[1] != "Re: First and tab" || f2[5] != "<1@x>" {
		t.Errorf("OVER line 2 = %q", f2)
	}
	if f3 := strings.Split(over[2], "\t"); len(f3) != 8 || f3[2] != "carol@example.org" || f3[5] != "<2@x>" || f3[7] != "2" {
		t.Errorf("OVER line 3 = %q", f3)
	}
	if _, o := s.block(224, "XOVER 2"); len(o) != 1 || !strings.HasPrefix(o[0], "2\t") {
		t.Errorf("XOVER 2 = %q", o)
	}
	if _, o := s.block(224, "OVER <3@x>"); len(o) != 1 || !strings.HasPrefix(o[0], "0\tThird\t") {
		t.Errorf("OVER <3@x> = %q", o)
	}
	s.expect(423, "OVER 50-60")

	// HDR: from the catalog, and from the messages.
	if _, h := s.block(225, "HDR Subject 1-2"); strings.Join(h, "|") != "1 First|2 Re: First and tab" {
		t.Errorf("HDR Subject = %q", h)
	}
	if _, h := s.block(225, "HDR X-Extra 1-"); strings.Join(h, "|") != "1 |2 extra value|3 " {
		t.Errorf("HDR X-Extra = %q", h)
	}
	if _, h := s.block(221, "XHDR message-id 3"); strings.Join(h, "|") != "3 <3@x>" {
		t.Errorf("XHDR message-id = %q", h)
	}
	if _, h := s.block(225, "HDR :lines <1@x>"); strings.Join(h, "|") != "0 3" {
		t.Errorf("HDR :lines <1@x> = %q", h)
	}

	_, ids := s.block(230, "NEWNEWS chibrary.linux-mips 19700101 000000 GMT")
	if strings.Join(ids, " ") != "<1@x> <2@x> <3@x>" {
		t.Errorf("NEWNEWS = %q", ids)
	}
	if _, ids := s.block(230, "NEWNEWS * 20990101 000000"); len(ids) != 0 {
		t.Errorf("NEWNEWS of the future = %q", ids)
	}
	s.block(231, "NEWGROUPS 20240101 000000 GMT")
	if msg := s.expect(111, "DATE"); len(msg) != 14 {
		t.Errorf("DATE = %q", msg)
	}
	s.block(100, "HELP")
	s.expect(440, "POST")
	s.expect(435, "IHAVE <5@x>")
	s.expect(381, "AUTHINFO USER anyone")
	s.expect(281, "AUTHINFO PASS anything")
	s.expect(580, "STARTTLS")
	s.expect(500, "XYZZY")
	s.expect(501, "GROUP")
	s.expect(205, "QUIT")
}

func contains(lines []string, s string) bool {
	for _, l := range lines {
		if l == s {
			return true
		}
	}
	return false
}

// TestGaps: a removed message leaves a gap; a message moved in comes
// after the group's last article.
func TestGaps(t *testing.T) {
	a, cns := testArchive(t)
	addr := serve(t, a, Options{Prefix: "org.example"})
	a.Remove(cns[1]) // as resolver remove does
	a.Sync()
	execCatalog(t, a, `UPDATE messages SET list = 'other' WHERE cn = ?`, cns[0])
	s := dial(t, addr)
	if msg := s.expect(211, "GROUP org.example.linux-mips"); msg != "1 3 3 org.example.linux-mips" {
		t.Errorf("GROUP after a removal and a move = %q", msg)
	}
	s.expect(423, "ARTICLE 2")
	if msg := s.expect(211, "GROUP org.example.other"); msg != "2 1 2 org.example.other" {
		t.Errorf("GROUP other = %q", msg)
	}
	if msg := s.expect(223, "STAT 2"); msg != "2 <1@x>" {
		t.Errorf("the moved message in other = %q", msg)
	}
	// A group emptied: high is one below low.
	execCatalog(t, a, `DELETE FROM messages WHERE list = 'linux-mips'`)
	if msg := s.expect(211, "GROUP org.example.linux-mips"); msg != "0 4 3 org.example.linux-mips" {
		t.Errorf("GROUP emptied = %q", msg)
	}
}

func execCatalog(t testing.TB, a *archivetest.Archive, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+a.CatalogPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// TestHostile: a long line ends the connection; limits hold.
func TestHostile(t *testing.T) {
	a, _ := testArchive(t)
	addr := serve(t, a, Options{Limits: netserve.Options{MaxConnsPerIP: 2}})
	s := dial(t, addr)
	s.c.PrintfLine("GROUP %s", strings.Repeat("x", 600))
	if code, _, _ := s.c.ReadCodeLine(0); code != 501 {
		t.Errorf("a 600-byte line = %d, want 501", code)
	}
	if _, err := s.c.ReadLine(); err == nil {
		t.Error("the connection stayed open after a line too long")
	}
	dial(t, addr)
	dial(t, addr)
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	line, _ := textproto.NewReader(bufio.NewReader(conn)).ReadLine()
	if !strings.HasPrefix(line, "400 ") {
		t.Errorf("a connection over the limit: %q, want 400", line)
	}
}

func TestNew(t *testing.T) {
	a, _ := testArchive(t)
	for _, p := range []string{"Upper", "a..b", ".a", "a b", "a*", strings.Repeat("a", 65)} {
		if _, err := New(keeper.Fixed(a.Catalog), a.Store, Options{Prefix: p}); err == nil {
			t.Errorf("New with prefix %q succeeded", p)
		}
	}
	if _, err := New(keeper.Fixed(a.Catalog), a.Store, Options{Prefix: "org.example-news_1"}); err != nil {
		t.Errorf("New with a good prefix = %v", err)
	}
}
