package netserve

import (
	"bufio"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// echoServer serves l with a handler that greets, then echoes lines.
func echoServer(t *testing.T, l net.Listener) (addr string, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, l, slog.New(slog.DiscardHandler), func(ctx context.Context, c net.Conn) {
			defer c.Close()
			io.WriteString(c, "hello\n")
			br := bufio.NewReader(c)
			for {
				c.SetReadDeadline(time.Time{}) // no deadline: the idle timeout's
				line, err := br.ReadString('\n')
				if err != nil {
					return
				}
				io.WriteString(c, line)
			}
		})
	}()
	return l.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}
}

func dial(t *testing.T, addr string) (net.Conn, *bufio.Reader, string) {
	t.Helper()
	c, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	br := bufio.NewReader(c)
	c.SetReadDeadline(time.Now().Add(10 * time.Second))
	line, _ := br.ReadString('\n')
	return c, br, line
}

func TestLimits(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	reg := prometheus.NewRegistry()
	m, err := NewMetrics("test", reg)
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(ln, Options{MaxConns: 3, MaxConnsPerIP: 2, Metrics: m, Refuse: func(c net.Conn, reason string) {
		io.WriteString(c, "refused: "+reason+"\n")
	}})
	addr, stop := echoServer(t, l)
	defer stop()

	_, _, g1 := dial(t, addr)
	c2, _, g2 := dial(t, addr)
	_, _, g3 := dial(t, addr)
	if g1 != "hello\n" || g2 != "hello\n" {
		t.Fatalf("greetings %q, %q, want hello", g1, g2)
	}
	if g3 != "refused: too many connections from your address\n" {
		t.Errorf("third connection from one address: %q, want refused", g3)
	}
	// Another loopback address is another client; then the total is
	// reached.
	c4, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.2")}, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Skipf("cannot dial from 127.0.0.2: %v", err)
	}
	defer c4.Close()
	if g, _ := bufio.NewReader(c4).ReadString('\n'); g != "hello\n" {
		t.Errorf("from 127.0.0.2: %q, want hello", g)
	}
	c5, err := net.DialTCP("tcp", &net.TCPAddr{IP: net.ParseIP("127.0.0.3")}, ln.Addr().(*net.TCPAddr))
	if err != nil {
		t.Fatal(err)
	}
	defer c5.Close()
	if g, _ := bufio.NewReader(c5).ReadString('\n'); g != "refused: too many connections\n" {
		t.Errorf("over the total: %q, want refused", g)
	}
	// A connection closed frees its place.
	c2.Close()
	waitFor(t, func() bool { return l.Open() == 2 })
	if _, _, g := dial(t, addr); g != "hello\n" {
		t.Errorf("after one closed: %q, want hello", g)
	}
	if got := value(m.refused); got != 2 {
		t.Errorf("refused = %v, want 2", got)
	}
	if got := value(m.accepted); got != 4 {
		t.Errorf("accepted = %v, want 4", got)
	}
	if got := value(m.open); got != 3 {
		t.Errorf("open = %v, want 3", got)
	}
	// A write is counted once it returns, which may be after the client
	// read it.
	waitFor(t, func() bool { return value(m.sent) >= float64(4*len("hello\n")) })
}

// TestRedialAfterServerClose: a client whose connection the server ends
// (after an error, a QUIT) may dial again at once, at the limit: the
// place is free before the client sees the end.
func TestRedialAfterServerClose(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(ln, Options{MaxConnsPerIP: 1, Refuse: func(c net.Conn, reason string) {
		io.WriteString(c, "refused: "+reason+"\n")
	}})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() {
		done <- Serve(ctx, l, slog.New(slog.DiscardHandler), func(ctx context.Context, c net.Conn) {
			io.WriteString(c, "bye\n")
			c.Close()
		})
	}()
	defer func() {
		cancel()
		<-done
	}()
	for i := range 200 {
		c, err := net.Dial("tcp", ln.Addr().String())
		if err != nil {
			t.Fatal(err)
		}
		c.SetReadDeadline(time.Now().Add(10 * time.Second))
		got, err := io.ReadAll(c) // to the end the server made
		c.Close()
		if err != nil || string(got) != "bye\n" {
			t.Fatalf("connection %d: %q, %v; want bye, then its end", i, got, err)
		}
	}
}

func waitFor(t *testing.T, ok func() bool) {
	t.Helper()
	for range 500 {
		if ok() {
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
	t.Fatal("condition not reached in 5 s")
}

// TestIdleTimeout: a read without a deadline, or with a later one, ends
// at the idle timeout; a client that keeps talking stays.
func TestIdleTimeout(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(ln, Options{IdleTimeout: 300 * time.Millisecond})
	addr, stop := echoServer(t, l)
	defer stop()
	c, br, _ := dial(t, addr)
	for range 3 {
		time.Sleep(100 * time.Millisecond)
		io.WriteString(c, "ping\n")
		if line, err := br.ReadString('\n'); line != "ping\n" {
			t.Fatalf("echo = %q, %v", line, err)
		}
	}
	if _, err := br.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("an idle client: read = %v, want EOF (closed by the server)", err)
	}
}

// TestServeStops: Serve returns once its context ends, having closed the
// connections still open and waited for their handlers.
func TestServeStops(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	l := Listen(ln, Options{})
	addr, stop := echoServer(t, l)
	var wg sync.WaitGroup
	for range 3 {
		_, br, _ := dial(t, addr)
		wg.Go(func() { br.ReadString('\n') })
	}
	waitFor(t, func() bool { return l.Open() == 3 })
	stop()
	wg.Wait() // every client sees its connection end
	if n := l.Open(); n != 0 {
		t.Errorf("%d connections open after Serve returned", n)
	}
}

func TestLoopback(t *testing.T) {
	for addr, want := range map[string]bool{
		"127.0.0.1:143": true, "[::1]:119": true, "localhost:1143": true, "127.1.2.3:0": true,
		"0.0.0.0:143": false, ":143": false, "192.0.2.1:143": false, "example.org:119": false, "nonsense": false,
	} {
		if got := Loopback(addr); got != want {
			t.Errorf("Loopback(%q) = %v, want %v", addr, got, want)
		}
	}
}

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// TestWriteDeadlineMoves: a write deadline moves with every write, so that
// a write after the deadline first set, once others went before it,
// still goes (a reader who keeps reading a long answer slowly gets it
// whole), while a write that waits that long for a reader who stopped
// reading fails.
func TestWriteDeadlineMoves(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const deadline = 200 * time.Millisecond
	late := make(chan error, 1)
	stalled := make(chan error, 1)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	var handled atomic.Int32 // the handlers run in goroutines of their own
	go func() {
		done <- Serve(ctx, Listen(ln, Options{}), slog.New(slog.DiscardHandler), func(ctx context.Context, c net.Conn) {
			defer c.Close()
			c.SetWriteDeadline(time.Now().Add(deadline))
			if handled.Add(1) == 1 {
				// Writes past the deadline first set, each within it of
				// the one before.
				var err error
				for i := 0; i < 4 && err == nil; i++ {
					time.Sleep(deadline * 3 / 4)
					_, err = io.WriteString(c, "a line\n")
				}
				late <- err
				return
			}
			// Until the reader's buffers are full and a write waits.
			buf := make([]byte, 64<<10)
			var err error
			for err == nil && ctx.Err() == nil {
				_, err = c.Write(buf)
			}
			stalled <- err
		})
	}()
	defer func() { cancel(); <-done }()

	c, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	go io.Copy(io.Discard, c)
	select {
	case err := <-late:
		if err != nil {
			t.Errorf("a write %v after the deadline first set, after others: %v, want it written", 3*deadline-deadline, err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("no answer in 30 s")
	}
	c2, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer c2.Close()
	select {
	case err := <-stalled:
		if ne, ok := err.(net.Error); !ok || !ne.Timeout() {
			t.Errorf("writing to a reader who reads nothing: %v, want a timeout", err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("a write to a reader who reads nothing did not time out in 30 s")
	}
}

// TestFirstReadHolds: a connection that sends nothing is closed at the
// first-read deadline even when the protocol sets a later read deadline
// before its first read (go-imap sets 30 s, the echo server none); once
// the client has sent something, the idle timeout holds.
func TestFirstReadHolds(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	const first = 300 * time.Millisecond
	l := Listen(ln, Options{FirstReadTimeout: first, IdleTimeout: time.Hour})
	addr, stop := echoServer(t, l)
	defer stop()

	_, br, _ := dial(t, addr)
	start := time.Now()
	if _, err := br.ReadString('\n'); !errors.Is(err, io.EOF) {
		t.Errorf("a silent client: read = %v, want EOF (closed by the server)", err)
	}
	if took := time.Since(start); took < first/2 || took > 5*time.Second {
		t.Errorf("a silent client was closed after %v, want about the first-read timeout %v", took, first)
	}

	c, br, _ := dial(t, addr)
	for range 2 {
		io.WriteString(c, "ping\n")
		if line, err := br.ReadString('\n'); line != "ping\n" {
			t.Fatalf("echo = %q, %v", line, err)
		}
		time.Sleep(2 * first) // past the first-read deadline: it no longer holds
	}
	io.WriteString(c, "ping\n")
	if line, err := br.ReadString('\n'); line != "ping\n" {
		t.Errorf("a client that spoke, then waited past the first-read deadline: echo = %q, %v", line, err)
	}
}
