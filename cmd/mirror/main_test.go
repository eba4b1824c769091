package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
)

// A SIGTERM while a following mirror still opens its store (a Riak node
// that does not answer) is a stop, exit status 0, as one while following.
func TestSignalWhileStarting(t *testing.T) {
	dir := t.TempDir()
	riaktest.StopWhileStarting(t, run, func(addr string) []string {
		return []string{"--from", "http://127.0.0.1:1/", "--store", "riak://" + addr + "/signal", "--state", filepath.Join(dir, "state.json")}
	})
}

// mirror --once against an origin that stalls after its headers exits
// with an error that names it, after two stalls, not hang.
func TestOnceStalledOrigin(t *testing.T) {
	release := make(chan struct{})
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", changes.ContentType)
		w.WriteHeader(http.StatusOK)
		w.(http.Flusher).Flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	}))
	defer srv.Close()
	defer close(release)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	var stderr bytes.Buffer
	start := time.Now()
	err := run(ctx, []string{"--from", srv.URL, "--data", t.TempDir(), "--once", "--read-timeout", "300ms"}, nil, io.Discard, &stderr)
	if err == nil || !strings.Contains(err.Error(), srv.URL) || !strings.Contains(err.Error(), "sent nothing for 300ms") {
		t.Fatalf("mirror --once against a stalled origin = %v, want an error naming %s and the timeout", err, srv.URL)
	}
	if took := time.Since(start); took > 20*time.Second {
		t.Errorf("it gave up after %v", took)
	}
	if !strings.Contains(stderr.String(), "sent nothing") {
		t.Errorf("the first stall was not logged: %s", stderr.String())
	}
}
