package main

import (
	"context"
	"database/sql"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/archivetest"
)

// TestServeExportClone is the mirror's half of issue 33's round trip: an
// archive exported (resolver export), served (resolver serve
// --public-inbox), mirrored by the real public-inbox-clone and indexed by
// public-inbox-index, which finds every message, the same Message-IDs as
// in the export itself (those without one have the export's made ID).
func TestServeExportClone(t *testing.T) {
	for _, tool := range []string{"git", "public-inbox-clone", "public-inbox-index"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not installed (apt-get install git public-inbox)"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg + ", but CI=true: CI must install it")
			}
			t.Skip(msg)
		}
	}
	dir := t.TempDir()
	a := archivetest.Open(t, dir)
	f, err := os.Open("../../fixtures/mbox/demo.mbox")
	if err != nil {
		t.Fatal(err)
	}
	cns := a.PutMbox(f, "demo", 0)
	f.Close()
	a.Sync()
	var want []string
	for _, cn := range cns {
		m, err := a.Catalog.Message(t.Context(), cn)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, m.MessageID)
	}
	slices.Sort(want)
	a.Close()
	out := t.TempDir()
	if status, stdout, stderr := runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out); status != 0 {
		t.Fatalf("resolver export: exit %d\n%s\n%s", status, stdout, stderr)
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan string, 1)
	go func() {
		_, _, stderr := runCmd(t, ctx, "serve", "--data", dir, "--listen", addr, "--public-inbox", out)
		done <- stderr
	}()
	defer func() {
		cancel()
		<-done
	}()
	for i := 0; ; i++ { // wait for the listener
		resp, err := http.Get("http://" + addr + "/manifest.js.gz")
		if err == nil {
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				t.Fatalf("GET /manifest.js.gz = %d", resp.StatusCode)
			}
			break
		}
		if i == 400 {
			t.Fatalf("the server did not start: %v", err)
		}
		time.Sleep(25 * time.Millisecond)
	}

	mirror := filepath.Join(t.TempDir(), "demo")
	cmd := exec.Command("public-inbox-clone", "http://"+addr+"/demo/", mirror)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PI_CONFIG=/dev/null")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("public-inbox-clone: %v\n%s", err, b)
	}
	got := indexedIDs(t, mirror)
	if exported := indexedIDs(t, filepath.Join(out, "demo")); !slices.Equal(got, exported) {
		t.Errorf("the mirror's Message-IDs:\n%v\nwant the export's:\n%v", got, exported)
	}
	if len(got) != len(cns) {
		t.Errorf("the mirror has %d messages, want the archive's %d", len(got), len(cns))
	}
	for _, id := range want {
		if _, found := slices.BinarySearch(got, id); id != "" && !found {
			t.Errorf("Message-ID <%s> of the archive is not in the mirror", id)
		}
	}
	if b, err := os.ReadFile(filepath.Join(mirror, "description")); err != nil || strings.TrimSpace(string(b)) == "" {
		t.Errorf("the mirror's description: %q, %v", b, err)
	}
}

// indexedIDs indexes the inbox with public-inbox-index and returns the
// Message-IDs it shows, sorted.
func indexedIDs(t *testing.T, inbox string) []string {
	t.Helper()
	cmd := exec.Command("public-inbox-index", "-L", "basic", inbox)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PI_CONFIG=/dev/null")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("public-inbox-index %s: %v\n%s", inbox, err, b)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(inbox, "msgmap.sqlite3")+"?mode=ro")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT mid FROM msgmap")
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	slices.Sort(ids)
	return ids
}
