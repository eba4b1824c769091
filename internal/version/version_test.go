package version

import (
	"encoding/json"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

func TestString(t *testing.T) {
	at := time.Date(2025, 1, 2, 3, 4, 5, 0, time.UTC)
	for _, tt := range []struct {
		info Info
		want string
	}{
		{Info{Program: "importer", Version: "devel", Go: "go1.26.0"}, "importer devel (unknown revision; go1.26.0)"},
		{Info{Program: "resolver", Version: "v1.2.3", Revision: "0123456789abcdef0123", Time: at, Go: "go1.26.0"},
			"resolver v1.2.3 (revision 0123456789ab, 2025-01-02T03:04:05Z; go1.26.0)"},
		{Info{Program: "watcher", Version: "devel", Revision: "abc", Modified: true, Go: "go1.26.0"},
			"watcher devel (revision abc, modified; go1.26.0)"},
	} {
		if got := tt.info.String(); got != tt.want {
			t.Errorf("String() = %q, want %q", got, tt.want)
		}
	}
}

func TestHandler(t *testing.T) {
	w := httptest.NewRecorder()
	Handler("resolver").ServeHTTP(w, httptest.NewRequest("GET", "/api/v1/version", nil))
	var got Info
	if err := json.Unmarshal(w.Body.Bytes(), &got); err != nil || got.Program != "resolver" || got.Version == "" || got.Go == "" {
		t.Errorf("GET /api/v1/version = %s (%v), want the Info as JSON", w.Body, err)
	}
	if ct := w.Header().Get("Content-Type"); ct != "application/json" {
		t.Errorf("Content-Type = %q", ct)
	}
}

// make build stamps the revision of a git checkout, whatever GOFLAGS says
// about -buildvcs and even in a git worktree (where the toolchain records
// nothing).
func TestMakeBuildStampsRevision(t *testing.T) {
	if testing.Short() {
		t.Skip("builds every program")
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	rev, err := exec.Command("git", "-C", root, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Skipf("not a git checkout (or no git): %v", err)
	}
	if _, err := exec.LookPath("make"); err != nil {
		t.Skip("no make")
	}
	bin := t.TempDir()
	cmd := exec.Command("make", "-C", root, "build", "BIN="+bin)
	cmd.Env = append(os.Environ(), "GOFLAGS=-buildvcs=false")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("make build: %v\n%s", err, out)
	}
	out, err := exec.Command(filepath.Join(bin, "importer"), "--version").Output()
	if err != nil {
		t.Fatal(err)
	}
	if want := "revision " + strings.TrimSpace(string(rev))[:12]; !strings.Contains(string(out), want) {
		t.Errorf("importer --version = %q, want it to contain %q", out, want)
	}
}
