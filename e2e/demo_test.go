package e2e

import (
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
)

// TestDemo runs make demo's script, the README's quick start, with the
// programs as built here: it imports the fixtures, resolves a call
// number, serves the archive and ends on the demo list's threads, and
// exits 0, showing the message's fields and not the operator's lease;
// three times over one data directory, as a user who runs it
// again would (the second and later find every message stored).
func TestDemo(t *testing.T) {
	dir := filepath.Dir(bin(t, "importer"))
	data := filepath.Join(t.TempDir(), "archive")
	thread := regexp.MustCompile(`(?m)^  /t/[0-9A-Za-z]{8}/  \S`)
	for i := range 3 {
		cmd := exec.Command("bash", "scripts/demo.sh", dir, data)
		cmd.Dir = ".."
		out, err := cmd.CombinedOutput()
		s := string(out)
		if err != nil {
			t.Fatalf("run %d: scripts/demo.sh = %v\n%s", i+1, err, s)
		}
		for _, want := range []string{"resolves:", "-> HTTP 200\n", "/l/demo/ -> HTTP 200, the list's threads:", "Call numbers for the archive", "resolver serve --data " + data} {
			if !strings.Contains(s, want) {
				t.Errorf("run %d: the demo's output lacks %q:\n%s", i+1, want, s)
			}
		}
		if strings.Contains(s, "lease.") {
			t.Errorf("run %d: the demo shows the lease's fields, which mean nothing to a newcomer:\n%s", i+1, s)
		}
		if n := len(thread.FindAllString(s, -1)); n < 5 {
			t.Errorf("run %d: the demo lists %d threads of the demo list, want the fixture's (at least 5):\n%s", i+1, n, s)
		}
	}
}
