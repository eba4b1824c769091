package resolver

import (
	"bufio"
	"context"
	"fmt"
	"github.com/chibrary/chibrary/catalog/keeper"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// TestCutConnections cuts readers' connections at every stage of a
// request, a large download's body above all, again and again: every
// connection is counted closed (chibrary_resolver_connections_open
// returns to 0) and the server shuts down within seconds.
func TestCutConnections(t *testing.T) {
	nm := newNoiseMonth(t, 3<<20)
	s := New(nm.a.st, Options{Catalogs: keeper.Fixed(nm.c), SpoolDir: t.TempDir(), ShutdownTimeout: 2 * time.Second})
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	stopped := false
	t.Cleanup(func() {
		if !stopped {
			stop()
			<-done
		}
	})
	addr := ln.Addr().String()
	get := func(path string) string { return "GET " + path + " HTTP/1.1\r\nHost: x\r\n\r\n" }
	stages := []struct{ name, send string }{
		{"before a request", ""},
		{"mid-request line", "GET /l/noi"},
		{"mid-header", "GET /l/noise/ HTTP/1.1\r\nHost: x\r\nAccept: te"},
		{"after an answer, kept alive", get("/l/noise/")},
		{"mid-raw of a large message", get("/" + nm.bigCN + "/raw")},
		{"mid-mbox.gz of the month", get(noisePath)},
		{"mid-range of the month", "GET " + noisePath + " HTTP/1.1\r\nHost: x\r\nRange: bytes=1000-\r\n\r\n"},
		{"mid-thread mbox.gz", get("/t/" + nm.bigCN + ".mbox.gz")},
	}
	open := func() float64 { return metrictest.Value(t, s.reg, "chibrary_resolver_connections_open", "") }
	for round := range 3 {
		for _, st := range stages {
			for range 4 {
				cutHTTP(t, addr, st.send)
			}
			if got := metrictest.Await(open, 0); got != 0 {
				t.Fatalf("round %d, cut %s: %v connections still open, want 0", round, st.name, got)
			}
		}
	}
	stop()
	stopped = true
	select {
	case err := <-done:
		if err != nil {
			t.Errorf("Serve = %v", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the server did not stop within 10 s of being asked")
	}
}

// cutHTTP opens a connection, sends send, reads a little of the answer
// to a whole request and resets the connection.
func cutHTTP(t *testing.T, addr, send string) {
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
	conn.SetDeadline(time.Now().Add(30 * time.Second))
	fmt.Fprint(conn, send)
	if strings.HasSuffix(send, "\r\n\r\n") {
		line, err := bufio.NewReader(conn).ReadString('\n')
		if err != nil || !strings.HasPrefix(line, "HTTP/1.1 2") {
			t.Fatalf("%q: %q, %v", send, line, err)
		}
	}
}
