package main

import (
	"bufio"
	"bytes"
	"context"
	"io"
	"net"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store"
)

// TestServeStopsWithStalledReaders: serve --imap --nntp, with readers of
// a large message stalled on every protocol (an IMAP FETCH, an NNTP
// ARTICLE and an HTTP /raw download, each read a little, then not at
// all) and as many cut off in the middle of theirs, stops within seconds
// of SIGTERM (Main's context ends) and exits 0. IMAP and NNTP
// connections are closed at once (a FETCH cut mid-literal once held its
// connection, and so the server, until SIGKILL); HTTP requests in flight
// are given resolver.DefaultShutdownTimeout (10 s) to finish, and
// closed then.
func TestServeStopsWithStalledReaders(t *testing.T) {
	t.Run("IMAP and NNTP", func(t *testing.T) { stopWithStalledReaders(t, false, 3*time.Second) })
	t.Run("and HTTP", func(t *testing.T) { stopWithStalledReaders(t, true, resolver.DefaultShutdownTimeout+3*time.Second) })
}

func stopWithStalledReaders(t *testing.T, withHTTP bool, want time.Duration) {
	dir, codec, _, _ := testArchive(t)
	n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: 7})
	if err != nil {
		t.Fatal(err)
	}
	raw := []byte("From: A <a@example.org>\nSubject: large\nMessage-ID: <large@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\n")
	raw = append(raw, bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\n"), 128<<10)...) // 8 MiB
	putMessages(t, dir, store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: "large@example.org", List: "test"})

	addrs := freeAddrs(t, 3)
	httpAddr, imapAddr, nntpAddr := addrs[0], addrs[1], addrs[2]
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	type result struct {
		status int
		stderr string
	}
	done := make(chan result, 1)
	go func() {
		s, _, e := runCmd(t, ctx, "serve", "--data", dir, "--listen", httpAddr, "--imap", imapAddr, "--nntp", nntpAddr)
		done <- result{s, e}
	}()
	waitGet(t, "http://"+httpAddr+"/healthz", 200)

	var conns []net.Conn
	defer func() {
		for _, c := range conns {
			c.Close()
		}
	}()
	// open dials addr with a small receive buffer (the server is soon
	// left writing), sends script and reads until it has seen want and
	// 64 KiB more.
	open := func(addr, script, want string) net.Conn {
		t.Helper()
		c := dialRetry(t, addr, nil)
		c.(*net.TCPConn).SetReadBuffer(8 << 10)
		conns = append(conns, c)
		for i := 0; ; i++ {
			io.WriteString(c, script)
			br := bufio.NewReader(c)
			var seen strings.Builder
			for !strings.Contains(seen.String(), want) {
				line, err := br.ReadString('\n')
				if err != nil {
					t.Fatalf("%s: %v after %q", addr, err, seen.String())
				}
				seen.WriteString(line)
				// The catalog is built as serve starts: until then the
				// list is not there.
				if strings.Contains(line, "NONEXISTENT") || strings.HasPrefix(line, "411 ") {
					break
				}
			}
			if strings.Contains(seen.String(), want) {
				if _, err := io.CopyN(io.Discard, br, 64<<10); err != nil {
					t.Fatalf("%s: reading the first 64 KiB: %v", addr, err)
				}
				return c
			}
			if i == 100 {
				t.Fatalf("%s: the list never came: %q", addr, seen.String())
			}
			c.Close()
			time.Sleep(50 * time.Millisecond)
			c = dialRetry(t, addr, nil)
			c.(*net.TCPConn).SetReadBuffer(8 << 10)
			conns = append(conns, c)
		}
	}
	const imapScript = "a1 LOGIN reader x\r\na2 SELECT test\r\na3 FETCH 1:* BODY.PEEK[]\r\n"
	const nntpScript = "GROUP chibrary.test\r\nARTICLE <large@example.org>\r\n"
	for range 3 {
		open(imapAddr, imapScript, "BODY[] {")
		open(nntpAddr, nntpScript, "220 ")
		// The same, cut off mid-answer by a reset.
		for _, c := range []net.Conn{open(imapAddr, imapScript, "BODY[] {"), open(nntpAddr, nntpScript, "220 ")} {
			c.(*net.TCPConn).SetLinger(0)
			c.Close()
		}
	}
	if withHTTP {
		for range 3 {
			open(httpAddr, "GET /"+n.String()+"/raw HTTP/1.1\r\nHost: x\r\n\r\n", "HTTP/1.1 200")
		}
	}
	// Pages still answer beside them.
	if resp, err := http.Get("http://" + httpAddr + "/healthz"); err != nil || resp.StatusCode != 200 {
		t.Fatalf("healthz beside the stalled readers: %v, %v", resp, err)
	} else {
		resp.Body.Close()
	}

	start := time.Now()
	cancel()
	select {
	case r := <-done:
		took := time.Since(start)
		t.Logf("serve stopped %v after it was asked", took.Round(time.Millisecond))
		if r.status != 0 {
			t.Errorf("serve exited %d after SIGTERM, want 0: %s", r.status, r.stderr)
		}
		if took > want {
			t.Errorf("serve took %v to stop, want at most %v", took, want)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("serve did not stop within 60 s of SIGTERM, its readers stalled")
	}
	// And every listener is closed.
	for _, addr := range addrs {
		if c, err := net.DialTimeout("tcp", addr, time.Second); err == nil {
			c.Close()
			t.Errorf("%s still accepts connections after serve stopped", addr)
		}
	}
}
