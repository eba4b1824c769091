package imapserve

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// multipart is a message with a text part, a base64 attachment and an
// enclosed message, its lines padded to make it size bytes or more.
func multipart(size int) []byte {
	var b bytes.Buffer
	b.WriteString("From: Writer <w@example.org>\nTo: list@example.org\nSubject: parts\nDate: Mon, 2 Jan 2006 15:04:05 +0000\nMessage-ID: <parts@example.org>\nMIME-Version: 1.0\nContent-Type: multipart/mixed; boundary=\"b1\"\n\npreamble\n--b1\nContent-Type: text/plain; charset=utf-8\n\nThe text, with an ümlaut.\n")
	for b.Len() < size/2 {
		b.WriteString("a line of the text part that makes the message large enough\n")
	}
	b.WriteString("--b1\nContent-Type: application/octet-stream; name=\"x.bin\"\nContent-Transfer-Encoding: base64\n\n")
	for b.Len() < size {
		b.WriteString("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8gISIjJCUmJygpKissLS4v\n")
	}
	b.WriteString("--b1\nContent-Type: message/rfc822\n\nFrom: Inner <i@example.org>\nSubject: inner\n\nThe inner body.\n--b1--\n")
	return b.Bytes()
}

// exchange logs in to addr, examines mailbox a, sends each command and
// returns every answer, untagged lines and literals with it.
func exchange(t *testing.T, addr string, cmds []string) []string {
	t.Helper()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	br := bufio.NewReader(conn)
	answer := func(tag string) string {
		var out strings.Builder
		for {
			line, err := br.ReadString('\n')
			if err != nil {
				t.Fatalf("%s: %v after %q", tag, err, out.String())
			}
			out.WriteString(line)
			// A literal's bytes follow its line whole.
			if i := strings.LastIndexByte(line, '{'); i >= 0 && strings.HasSuffix(line, "}\r\n") {
				var n int64
				fmt.Sscanf(line[i+1:], "%d", &n)
				if _, err := io.CopyN(&out, br, n); err != nil {
					t.Fatal(err)
				}
				continue
			}
			if strings.HasPrefix(line, tag+" ") {
				return out.String()
			}
		}
	}
	answer("*")
	var out []string
	for i, c := range append([]string{"LOGIN reader x", "EXAMINE a"}, cmds...) {
		tag := fmt.Sprintf("t%d", i)
		fmt.Fprintf(conn, "%s %s\r\n", tag, c)
		out = append(out, answer(tag))
	}
	return out[2:]
}

// TestSpooledFetch: a message sent from a spool file is sent exactly as
// one sent from memory, whatever part or partial is asked for.
func TestSpooledFetch(t *testing.T) {
	a := archivetest.New(t)
	a.Put("a", multipart(8<<10), mail(2, "small"))
	a.Sync()
	memory := serve(t, a, Options{}, func(s *Server) { s.spoolAbove = 1 << 40 })
	spooled := serve(t, a, Options{}, func(s *Server) { s.spoolAbove = 0 })
	cmds := []string{
		"FETCH 1:* (RFC822.SIZE ENVELOPE BODYSTRUCTURE)",
		"FETCH 1 BODY.PEEK[]",
		"FETCH 1 (BODY.PEEK[HEADER] BODY.PEEK[TEXT])",
		"FETCH 1 (BODY.PEEK[]<0.10> BODY.PEEK[TEXT]<5.20> BODY.PEEK[]<100000.10> BODY.PEEK[HEADER]<3.1000000>)",
		"FETCH 1 (BODY.PEEK[1] BODY.PEEK[1]<4.9> BODY.PEEK[2]<0.64> BODY.PEEK[2.MIME] BODY.PEEK[3.HEADER] BODY.PEEK[3.TEXT])",
		"FETCH 1 (BODY.PEEK[HEADER.FIELDS (Subject From)] BODY.PEEK[HEADER.FIELDS.NOT (Subject)]<0.30>)",
		"FETCH 1 (BINARY.PEEK[1] BINARY.PEEK[2]<16.16> BINARY.SIZE[2])",
		"FETCH 1:2 (UID BODY.PEEK[])",
		"FETCH 1 BODY.PEEK[4]",
	}
	want := exchange(t, memory, cmds)
	got := exchange(t, spooled, cmds)
	for i := range cmds {
		if got[i] != want[i] {
			t.Errorf("%s from a spool file:\n%.2000s\nwant, as from memory:\n%.2000s", cmds[i], got[i], want[i])
		}
	}
	// The answers are the message's, not empty alike.
	raw := bytes.ReplaceAll(a.Get(a.Put("a", multipart(8<<10))[0]), []byte("\n"), []byte("\r\n"))
	if !strings.Contains(got[1], string(raw)) {
		t.Errorf("BODY[] does not hold the message")
	}
	if !strings.Contains(got[3], "BODY[]<0> {10}\r\n"+string(raw[:10])) {
		t.Errorf("BODY[]<0.10> = %.300q", got[3])
	}
	// (go-imap writes a BINARY partial without its <offset>.)
	if !strings.Contains(got[6], "~{16}\r\n\x10\x11\x12\x13") {
		t.Errorf("BINARY[2]<16.16> = %.300q", got[6])
	}
}

// TestStalledReaders: clients that ask for a large message and read
// nothing of it do not each hold a copy of it.
func TestStalledReaders(t *testing.T) {
	a := archivetest.New(t)
	const size = 8 << 20
	a.Put("a", multipart(size))
	a.Sync()
	addr := serve(t, a, Options{})
	const readers = 12
	// Each holding its copies (the message, its wire form, its part), the
	// readers held several times size each.
	grown := metrictest.StalledHeap(t, addr, readers, "a1 LOGIN reader x\r\na2 EXAMINE a\r\na3 FETCH 1 (BODY.PEEK[] BODY.PEEK[2])\r\n", time.Second)
	t.Logf("%d stalled readers of a %d MB message: the heap grew by %d MB", readers, size>>20, grown>>20)
	if grown > 4*size {
		t.Errorf("%d stalled readers of a %d MB message: the heap grew by %d MB, want under %d", readers, size>>20, grown>>20, 4*size>>20)
	}
}
