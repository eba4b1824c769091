package httpserve

import (
	"bytes"
	"context"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// series returns the value of every series of reg, keyed by its name and
// labels ("name{k=v,...}"; a histogram by its count).
func series(t *testing.T, reg *prometheus.Registry) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		for _, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := mf.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case m.GetCounter() != nil:
				out[key] = m.GetCounter().GetValue()
			case m.GetHistogram() != nil:
				out[key] = float64(m.GetHistogram().GetSampleCount())
			}
		}
	}
	return out
}

func TestMiddleware(t *testing.T) {
	var logs bytes.Buffer
	reg := prometheus.NewRegistry()
	type done struct {
		route  string
		status int
	}
	var seen []done
	m, err := New(Options{
		Logger: slog.New(slog.NewTextHandler(&logs, nil)), Registerer: reg, Namespace: "test",
		Done: func(_ *http.Request, route string, status int) { seen = append(seen, done{route, status}) },
	})
	if err != nil {
		t.Fatal(err)
	}
	mux := http.NewServeMux()
	mux.HandleFunc("GET /a/{x}", func(w http.ResponseWriter, r *http.Request) { io.WriteString(w, "hello") })
	mux.HandleFunc("GET /both/{rest...}", func(w http.ResponseWriter, r *http.Request) {
		SetRoute(w, "GET /both/named")
		http.Error(w, "boom", http.StatusInternalServerError)
	})
	h := m.Wrap(mux)
	for _, path := range []string{"/a/1", "/a/2", "/both/x", "/nowhere"} {
		h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", path, nil))
	}
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("POST", "/a/1", nil))

	got := series(t, reg)
	for key, want := range map[string]float64{
		"test_requests_total{code=200,route=GET /a/{x}}":       2,
		"test_requests_total{code=500,route=GET /both/named}":  1,
		"test_requests_total{code=404,route=unmatched}":        1,
		"test_requests_total{code=405,route=unmatched}":        1,
		"test_request_duration_seconds{route=GET /a/{x}}":      2,
		"test_request_duration_seconds{route=GET /both/named}": 1,
		"test_request_duration_seconds{route=unmatched}":       2,
	} {
		if got[key] != want {
			t.Errorf("%s = %v, want %v (all: %v)", key, got[key], want, got)
		}
	}
	if len(got) != 7 {
		t.Errorf("%d series, want 7: %v", len(got), got)
	}
	want := []done{{"GET /a/{x}", 200}, {"GET /a/{x}", 200}, {"GET /both/named", 500}, {"unmatched", 404}, {"unmatched", 405}}
	if len(seen) != len(want) {
		t.Fatalf("Done saw %v, want %v", seen, want)
	}
	for i := range want {
		if seen[i] != want[i] {
			t.Errorf("Done call %d = %v, want %v", i, seen[i], want[i])
		}
	}
	l := logs.String()
	for _, s := range []string{`level=INFO msg=request method=GET path=/a/1 status=200 bytes=5 duration=`, `level=ERROR msg=request method=GET path=/both/x status=500`} {
		if !strings.Contains(l, s) {
			t.Errorf("logs lack %q:\n%s", s, l)
		}
	}
}

// A 503 is a warning, a server error an error, and nothing is an error
// when the client went away before the answer.
func TestLevel(t *testing.T) {
	for _, tt := range []struct {
		status int
		gone   bool
		want   slog.Level
	}{
		{200, false, slog.LevelInfo},
		{404, false, slog.LevelInfo},
		{500, false, slog.LevelError},
		{503, false, slog.LevelWarn},
		{500, true, slog.LevelInfo},
		{503, true, slog.LevelInfo},
	} {
		if got := Level(tt.status, tt.gone); got != tt.want {
			t.Errorf("Level(%d, %v) = %v, want %v", tt.status, tt.gone, got, tt.want)
		}
	}
	var logs bytes.Buffer
	m, err := New(Options{Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if err != nil {
		t.Fatal(err)
	}
	h := m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusServiceUnavailable) }))
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/busy", nil))
	gone, cancel := context.WithCancel(context.Background())
	cancel()
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/gone", nil).WithContext(gone))
	for _, s := range []string{"level=WARN msg=request method=GET path=/busy status=503", "level=INFO msg=request method=GET path=/gone status=503", "client_gone=true"} {
		if !strings.Contains(logs.String(), s) {
			t.Errorf("logs lack %q:\n%s", s, logs.String())
		}
	}
}

// SetRoute outside the middleware does nothing, and without a registry the
// middleware only logs.
func TestWithoutMetrics(t *testing.T) {
	SetRoute(httptest.NewRecorder(), "nothing to set")
	m, err := New(Options{})
	if err != nil {
		t.Fatal(err)
	}
	w := httptest.NewRecorder()
	m.Wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(204) })).ServeHTTP(w, httptest.NewRequest("GET", "/", nil))
	if w.Code != 204 {
		t.Errorf("status %d, want 204", w.Code)
	}
}

// Serve stops when its context ends, letting a request in flight finish.
func TestServeShutdown(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(started)
		time.Sleep(200 * time.Millisecond)
		io.WriteString(w, "finished")
	})}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	go func() { served <- Serve(ctx, srv, ln, 5*time.Second, slog.New(slog.DiscardHandler)) }()
	got := make(chan string, 1)
	go func() {
		resp, err := http.Get("http://" + ln.Addr().String())
		if err != nil {
			got <- err.Error()
			return
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		got <- string(b)
	}()
	<-started
	cancel()
	if err := <-served; err != nil {
		t.Errorf("Serve = %v, want nil after a graceful stop", err)
	}
	if body := <-got; body != "finished" {
		t.Errorf("the request in flight got %q, want it finished", body)
	}
}

// TestServeWaitsForCutRequests: a request still in flight at the
// shutdown timeout (a reader who stopped reading a large body) has its
// connection closed, and Serve returns only once its handler has: a
// handler left running would use (and log to) what Serve's caller
// closes next. Serve stops within the timeout and a little.
func TestServeWaitsForCutRequests(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	started := make(chan struct{})
	var returned atomic.Bool
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		defer func() {
			time.Sleep(50 * time.Millisecond) // an access log line, say
			returned.Store(true)
		}()
		close(started)
		chunk := bytes.Repeat([]byte("x"), 64<<10)
		for {
			if _, err := w.Write(chunk); err != nil {
				return
			}
		}
	})}
	ctx, cancel := context.WithCancel(context.Background())
	served := make(chan error, 1)
	const timeout = 300 * time.Millisecond
	go func() { served <- Serve(ctx, srv, ln, timeout, slog.New(slog.DiscardHandler)) }()
	conn, err := net.Dial("tcp", ln.Addr().String())
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.(*net.TCPConn).SetReadBuffer(4 << 10)
	io.WriteString(conn, "GET / HTTP/1.1\r\nHost: x\r\n\r\n") // and never read
	<-started
	start := time.Now()
	cancel()
	select {
	case err := <-served:
		if err != nil {
			t.Errorf("Serve = %v, want nil", err)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Serve did not return within 10 s of its context's end, a reader stalled")
	}
	if took := time.Since(start); took < timeout || took > timeout+3*time.Second {
		t.Errorf("Serve returned %v after its context ended, want after the shutdown timeout (%v) and soon", took, timeout)
	}
	if !returned.Load() {
		t.Error("Serve returned while the stalled request's handler still ran")
	}
}
