package main

import (
	"bytes"
	"context"
	"errors"
	"io"
	"io/fs"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/store/boltstore"
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

// TestStoreLocations: with --store bolt:DIR/messages.db and no --state,
// the mirror keeps its state beside the store, wherever it runs from:
// nothing appears in ./archive of the working directory, and a run from
// another directory goes on from the same state.
func TestStoreLocations(t *testing.T) {
	origin := archivetest.New(t)
	origin.Put("demo", []byte("From: A <a@example.org>\nSubject: one\nMessage-ID: <loc1@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nhello\n"))
	srv := httptest.NewServer(resolver.New(origin.Store, resolver.Options{}))
	defer srv.Close()

	data := t.TempDir()
	url := "bolt:" + filepath.Join(data, "messages.db")
	for i := range 2 {
		cwd := t.TempDir()
		t.Chdir(cwd)
		var stderr bytes.Buffer
		if err := run(t.Context(), []string{"--from", srv.URL, "--store", url, "--once"}, nil, io.Discard, &stderr); err != nil {
			t.Fatalf("mirror --store %s --once, run %d = %v\n%s", url, i+1, err, stderr.String())
		}
		if _, err := os.Stat(filepath.Join(cwd, "archive")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("run %d made ./archive in its working directory (%v)", i+1, err)
		}
	}
	if states, _ := filepath.Glob(filepath.Join(data, "mirror", "*.json")); len(states) != 1 {
		t.Errorf("state files beside the store: %v, want one", states)
	}
	st, err := boltstore.Open(t.Context(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	if n, err := st.Count(t.Context()); err != nil || n != 1 {
		t.Errorf("the mirror holds %d messages (%v), want the origin's one", n, err)
	}
}
