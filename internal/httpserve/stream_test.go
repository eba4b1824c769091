package httpserve

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"net/http"
	"syscall"
	"testing"
	"time"
)

// smallBuffers are the socket buffers of the stream tests, so that a
// reader who stops reading stops the writer after a few hundred KiB
// rather than the megabytes loopback buffers hold.
const smallBuffers = 64 << 10

// listenSmall listens on loopback with small send buffers, which the
// connections it accepts inherit.
func listenSmall(t *testing.T) net.Listener {
	t.Helper()
	lc := net.ListenConfig{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_SNDBUF, smallBuffers)
		})
		return errors.Join(err, serr)
	}}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	return ln
}

// smallClient is a client whose connections have small receive buffers.
func smallClient() *http.Client {
	d := &net.Dialer{Control: func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, syscall.SO_RCVBUF, smallBuffers)
		})
		return errors.Join(err, serr)
	}}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true}}
}

// TestStream: with a WriteTimeout of 300 ms, a body that a reader reads
// slowly for several times as long is written whole through Stream, and
// cut off without it; a reader who stops reading is cut off once the
// idle time has passed.
func TestStream(t *testing.T) {
	const (
		limit = 300 * time.Millisecond
		idle  = 300 * time.Millisecond
		size  = 4 << 20
	)
	type result struct {
		n   int64
		err error
		at  time.Duration
	}
	results := make(chan result, 1)
	chunk := make([]byte, 32<<10)
	mux := http.NewServeMux()
	serve := func(w http.ResponseWriter) {
		start := time.Now()
		var n int64
		var err error
		for n < size && err == nil {
			var m int
			m, err = w.Write(chunk)
			n += int64(m)
		}
		results <- result{n, err, time.Since(start)}
	}
	mux.HandleFunc("GET /stream", func(w http.ResponseWriter, r *http.Request) { serve(Stream(w, idle)) })
	mux.HandleFunc("GET /plain", func(w http.ResponseWriter, r *http.Request) { serve(w) })
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{Handler: m.Wrap(mux), WriteTimeout: limit}
	ln := listenSmall(t)
	ctx, stop := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, ln, 5*time.Second, slog.New(slog.DiscardHandler)) }()
	defer func() {
		stop()
		if err := <-served; err != nil {
			t.Error(err)
		}
	}()
	client := smallClient()
	base := "http://" + ln.Addr().String()

	// slowly reads the body of path at 32 KiB every 20 ms (about 2.6 s
	// for the whole, many times limit but never idle for long), stopping
	// for pause after the first 256 KiB.
	slowly := func(path string, pause time.Duration) (int64, error) {
		resp, err := client.Get(base + path)
		if err != nil {
			return 0, err
		}
		defer resp.Body.Close()
		var n int64
		for {
			m, err := io.CopyN(io.Discard, resp.Body, 32<<10)
			n += m
			if err == io.EOF {
				return n, nil
			}
			if err != nil {
				return n, err
			}
			if n == 256<<10 {
				time.Sleep(pause)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}

	n, err := slowly("/stream", 0)
	res := <-results
	if n != size || err != nil || res.err != nil {
		t.Errorf("a slow reader through Stream got %d bytes, %v (the server wrote %d in %v, %v); want %d", n, err, res.n, res.at, res.err, size)
	}
	t.Logf("a slow reader through Stream: written in %v", res.at)
	if res.at < 2*limit {
		t.Errorf("the server wrote the body in %v, under twice the WriteTimeout: the test shows nothing", res.at)
	}

	// The control: without Stream, the WriteTimeout cuts the same reader off.
	n, err = slowly("/plain", 0)
	res = <-results
	if n == size || res.err == nil {
		t.Errorf("a slow reader without Stream got %d bytes, %v (the server: %v); want it cut off by the WriteTimeout", n, err, res.err)
	}

	// A reader who stops reading for 3 s is cut off after about idle.
	n, err = slowly("/stream", 3*time.Second)
	res = <-results
	if n == size || err == nil || res.err == nil {
		t.Errorf("a reader who stopped got %d bytes, %v (the server: %d bytes, %v); want it cut off", n, err, res.n, res.err)
	}
	t.Logf("the server gave up on a reader who stopped after %v, %d bytes written", res.at, res.n)
	if res.at > 2*time.Second {
		t.Errorf("the server gave up on a reader who stopped after %v, want about %v", res.at, idle)
	}
}
