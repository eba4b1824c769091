package main

import (
	"database/sql"
	"math"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to read public-inbox's msgmap.sqlite3

	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
)

func TestExportUsage(t *testing.T) {
	dir, _, _, _ := testArchive(t)
	for _, tt := range []struct {
		args []string
		want string
	}{
		{[]string{"export", "--data", dir}, "--public-inbox: name the directory"},
		{[]string{"export", "--data", dir, "--public-inbox", t.TempDir(), "--epoch-size", "0"}, "--epoch-size 0"},
		{[]string{"export", "--data", dir, "--public-inbox", t.TempDir(), "extra"}, "extra"},
	} {
		status, _, stderr := runCmd(t, t.Context(), tt.args...)
		if status != 2 || !strings.Contains(stderr, tt.want) {
			t.Errorf("resolver %s: exit %d, stderr %q; want 2 and %q", strings.Join(tt.args, " "), status, stderr, tt.want)
		}
	}
	status, _, stderr := runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", t.TempDir(), "--list", "No/Such")
	if status != 1 || !strings.Contains(stderr, "cannot export list no-such") || !strings.Contains(stderr, "the archive has no such list") {
		t.Errorf("export of an unknown list: exit %d, stderr %q", status, stderr)
	}
	status, stdout, _ := runCmd(t, t.Context(), "export", "--help")
	if status != 0 || !strings.Contains(stdout, "public-inbox-index OUT/LIST") || !strings.Contains(stdout, "--epoch-size") {
		t.Errorf("export --help: exit %d\n%s", status, stdout)
	}
}

// TestExportRoundTrip is the round trip of issue 33: the shared sample
// (all 5,256 messages: public-inbox-index takes 45 s over them here) into
// an archive, exported, indexed by the real public-inbox-index, which
// finds the archive's Message-IDs, each once, and one for each message.
func TestExportRoundTrip(t *testing.T) {
	if _, err := exec.LookPath("public-inbox-index"); err != nil {
		msg := "public-inbox-index is not installed (apt-get install public-inbox)"
		if os.Getenv("CI") == "true" {
			t.Fatal(msg + ", but CI=true: CI must install it")
		}
		t.Skip(msg)
	}
	testcorpus.Path(t)
	if testing.Short() {
		t.Skip("the whole sample through public-inbox-index takes a minute; -short")
	}
	dir := t.TempDir()
	a := archivetest.Open(t, dir)
	cns := a.PutCorpus("linux-mips", 0)
	a.Sync()
	want := map[string]bool{}
	es, err := a.Catalog.Entries(t.Context(), "linux-mips", 1, math.MaxUint32, len(cns)+1, false)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range es {
		if e.MessageID != "" {
			want[e.MessageID] = true
		}
	}
	a.Close()

	out := t.TempDir()
	start := time.Now()
	status, stdout, stderr := runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out)
	if status != 0 {
		t.Fatalf("resolver export: exit %d\n%s\n%s", status, stdout, stderr)
	}
	t.Logf("exported %d messages in %v: %s", len(cns), time.Since(start), strings.TrimSpace(stderr))
	inbox := filepath.Join(out, "linux-mips")
	start = time.Now()
	cmd := exec.Command("public-inbox-index", "-L", "basic", inbox)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "PI_CONFIG=/dev/null")
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("public-inbox-index: %v\n%s", err, b)
	}
	t.Logf("public-inbox-index took %v", time.Since(start))
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
	got := map[string]bool{}
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatal(err)
		}
		got[id] = true
	}
	if len(got) != len(cns) {
		t.Errorf("public-inbox-index has %d messages, want the %d of the archive", len(got), len(cns))
	}
	missing := 0
	for id := range want {
		if !got[id] {
			if missing++; missing < 5 {
				t.Errorf("Message-ID <%s> of the archive is not in the export's index", id)
			}
		}
	}
	if missing > 0 {
		t.Errorf("%d of the archive's %d Message-IDs are missing", missing, len(want))
	}
	// A run again writes nothing.
	if status, stdout, _ := runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out); status != 0 || !strings.Contains(stdout, ": 0 added, 0 removals recorded, 1 epochs") {
		t.Errorf("export again: exit %d, %s", status, stdout)
	}
}

// TestExportFollowedCatalog: while a resolver follows the catalog (holds
// its lock), export reads it as that resolver keeps it; without one, it
// brings the catalog up to date with the store itself.
func TestExportFollowedCatalog(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	a := archivetest.Open(t, dir)
	a.Put("l", []byte("Subject: one\nMessage-ID: <one@example.org>\n\nbody\n"), []byte("Subject: two\nMessage-ID: <two@example.org>\n\nbody\n"))
	a.Sync()
	out := t.TempDir()
	status, stdout, stderr := runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out)
	if status != 0 || !strings.Contains(stdout, "l: 2 added") || !strings.Contains(stderr, "a resolver follows the catalog") {
		t.Fatalf("export beside a resolver: exit %d\n%s\n%s", status, stdout, stderr)
	}
	// Stored, not yet in the catalog; no resolver: export syncs it.
	a.Put("l", []byte("Subject: three\nMessage-ID: <three@example.org>\n\nbody\n"))
	a.Close()
	status, stdout, stderr = runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out)
	if status != 0 || !strings.Contains(stdout, "l: 1 added") {
		t.Fatalf("export alone: exit %d\n%s\n%s", status, stdout, stderr)
	}
	// Two exports into the same OUT at once: the second is refused.
	lock, err := os.OpenFile(filepath.Join(out, ".chibrary-export.lock"), os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	defer lock.Close()
	if err := flock(lock); err != nil {
		t.Skipf("cannot hold the lock as an export would: %v", err)
	}
	status, _, stderr = runCmd(t, t.Context(), "export", "--data", dir, "--public-inbox", out)
	if status != 1 || !strings.Contains(stderr, "another export is writing into this directory") {
		t.Errorf("a second export at once: exit %d, %s", status, stderr)
	}
}
