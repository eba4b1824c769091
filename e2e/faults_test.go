package e2e

import (
	"bytes"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
)

// asImported returns what an importer stores of raw written to an mbox
// with mbox.Writer: the same bytes, with a line feed added when the
// message does not end in one.
func asImported(raw []byte) []byte {
	if len(raw) == 0 || bytes.HasSuffix(raw, []byte("\n")) {
		return raw
	}
	return append(append([]byte{}, raw...), '\n')
}

func wantAll(w want, msgs [][]byte, where string) {
	for i, m := range msgs {
		w.add(asImported(m), where+":"+itoa(i+1))
	}
}

// feed writes an mbox to a piped importer's stdin, message by message.
func feed(t *testing.T, p *proc, msgs [][]byte) {
	t.Helper()
	if _, err := p.stdin.Write(mboxOf(t, msgs)); err != nil {
		t.Fatalf("cannot write to %s: %v", p.name, err)
	}
}

// waitManifest waits until a manifest has at least n entries.
func waitManifest(t *testing.T, p *proc, path string, n int) []manifestEntry {
	t.Helper()
	var m []manifestEntry
	eventually(t, 60*time.Second, "the manifest of "+p.name+" to have "+itoa(n)+" entries", func() bool {
		if p.exited() {
			t.Fatalf("%s exited early (%v)", p.name, p.err)
		}
		m = readManifest(t, path)
		return len(m) >= n
	})
	return m
}

// checkManifest checks that every entry says imported or duplicate and
// returns the call numbers of those imported.
func checkManifest(t *testing.T, name string, m []manifestEntry, wantLen int) {
	t.Helper()
	if len(m) != wantLen {
		t.Errorf("%s: manifest has %d entries, want %d", name, len(m), wantLen)
	}
	for i, e := range m {
		if e.Status != "imported" && e.Status != "duplicate" {
			t.Errorf("%s: manifest entry %d: %+v, want imported or duplicate", name, i+1, e)
		}
	}
}

// TestCoordinatorKilled kills the coordinator (SIGKILL) while importers
// run: an importer that already holds a run goes on without it; one that
// starts while it is down waits, retrying, until the coordinator is back
// on the same runs.db and port.
func TestCoordinatorKilled(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	db, token := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	coord := startCoordinator(t, db, token, "127.0.0.1:0")

	msgs := mail(t, 4000)
	first, second := msgs[:2500], msgs[2500:]
	w := want{}
	wantAll(w, first, "stdin")
	wantAll(w, second, "second.mbox")

	// The first importer reads an mbox from a pipe: the test decides when
	// it has stored a batch (and so holds a run) and when its input ends.
	manifestA := filepath.Join(dir, "a.jsonl")
	a := start(t, "importer a", procOptions{Pipe: true}, "--data", data, "--coordinator", coord.url, "--token-file", token,
		"--manifest", manifestA, "--log-format", "json", "-")
	feed(t, a, first[:1500])
	waitManifest(t, a, manifestA, 1000) // one batch stored: it holds a run

	coord.kill()

	// A second importer needs a run while the coordinator is down.
	secondPath := writeFile(t, dir, "second.mbox", mboxOf(t, second))
	manifestB := filepath.Join(dir, "b.jsonl")
	b := start(t, "importer b", procOptions{}, "--data", data, "--coordinator", coord.url, "--token-file", token,
		"--manifest", manifestB, "--log-format", "json", secondPath)
	// Down for a while: until b has retried three times.
	eventually(t, 60*time.Second, "importer b to retry three times", func() bool {
		if b.exited() {
			t.Fatalf("importer b exited (%v) while the coordinator was down, want it to wait and retry", b.err)
		}
		return strings.Count(b.log(), "retrying") >= 3
	})

	// The first goes on with its run, the coordinator still down.
	feed(t, a, first[1500:])
	a.stdin.Close()
	if code := a.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer a exited %d with the coordinator down, want 0 (it holds a run)", code)
	}
	if b.exited() {
		t.Fatalf("importer b exited (%v) while the coordinator was down, want it to wait", b.err)
	}

	coord = startCoordinator(t, db, token, coord.addr)
	if code := b.wait(90 * time.Second); code != 0 {
		t.Fatalf("importer b exited %d after the coordinator came back, want 0", code)
	}
	checkManifest(t, "importer a", readManifest(t, manifestA), len(first))
	checkManifest(t, "importer b", readManifest(t, manifestB), len(second))
	coord.stop()

	st := openStore(t, data)
	verifyArchive(t, st, w)
	// Each process numbered with runs of its own.
	runsA, runsB := runsOf(t, st, readManifest(t, manifestA)), runsOf(t, st, readManifest(t, manifestB))
	for r := range runsA {
		if runsB[r] {
			t.Errorf("run %d used by both importers", r)
		}
	}
	if len(runsA) == 0 || len(runsB) == 0 {
		t.Errorf("importer a used runs %v, b %v: want some each", runsA, runsB)
	}
}

// runsOf returns the runs of the call numbers a manifest reports imported
// (a duplicate carries the number some other process gave), decoded with
// the store's binding.
func runsOf(t *testing.T, st store.Store, m []manifestEntry) map[uint32]bool {
	t.Helper()
	b, err := st.Binding(t.Context())
	if err != nil {
		t.Fatalf("Binding: %v", err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	runs := map[uint32]bool{}
	for _, e := range m {
		if e.Status != "imported" {
			continue
		}
		_, f, err := codec.Parse(e.CallNumber)
		if err != nil {
			t.Fatalf("manifest call number %q: %v", e.CallNumber, err)
		}
		runs[f.Run] = true
	}
	return runs
}

// TestImporterKilled kills an importer (SIGKILL) in the middle of an
// import, then runs it again on the whole input: every message ends up
// stored exactly once, and what the first run acknowledged keeps its
// call number.
func TestImporterKilled(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	msgs := mail(t, 3000)
	w := want{}
	wantAll(w, msgs, "input.mbox")

	manifest1 := filepath.Join(dir, "run1.jsonl")
	p := start(t, "importer run1", procOptions{Pipe: true}, "--data", data, "--manifest", manifest1, "--log-format", "json", "-")
	feed(t, p, msgs[:1700])
	waitManifest(t, p, manifest1, 1000)
	p.kill()
	acked := readManifest(t, manifest1) // whatever it wrote before dying

	input := writeFile(t, dir, "input.mbox", mboxOf(t, msgs))
	manifest2 := filepath.Join(dir, "run2.jsonl")
	p2 := start(t, "importer run2", procOptions{}, "--data", data, "--manifest", manifest2, "--log-format", "json", input)
	if code := p2.wait(60 * time.Second); code != 0 {
		t.Fatalf("the re-run exited %d, want 0", code)
	}
	m2 := readManifest(t, manifest2)
	checkManifest(t, "re-run", m2, len(msgs))
	for i, e := range acked {
		if e.Status != "imported" {
			t.Fatalf("first run, entry %d: %+v, want imported", i+1, e)
		}
		if i < len(m2) && (m2[i].Status != "duplicate" || m2[i].CallNumber != e.CallNumber) {
			t.Errorf("re-run, entry %d: %s %s, want duplicate %s (acknowledged by the killed run)", i+1, m2[i].Status, m2[i].CallNumber, e.CallNumber)
		}
	}
	imported, duplicates, failed := summary(t, p2.log())
	if imported+duplicates != len(msgs) || failed != 0 || duplicates < len(acked) {
		t.Errorf("re-run summary: imported %d, duplicates %d, failed %d; want %d in all, at least %d duplicates, none failed",
			imported, duplicates, failed, len(msgs), len(acked))
	}
	verifyArchive(t, openStore(t, data), w)
}

// TestRestoredBackup restores the coordinator's runs.db from an old backup
// without bumping it: the runs it hands out again are refused by the
// store, so nothing is overwritten; "coordinator bump" then fixes it.
func TestRestoredBackup(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	db, token := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	coord := startCoordinator(t, db, token, "127.0.0.1:0")
	msgs := mail(t, 1500)
	parts := [][][]byte{msgs[:500], msgs[500:1000], msgs[1000:]}
	w := want{}
	var paths []string
	for i, part := range parts {
		paths = append(paths, writeFile(t, dir, "part"+itoa(i+1)+".mbox", mboxOf(t, part)))
	}
	importer := func(name string, path string) (*proc, string) {
		manifest := filepath.Join(dir, name+".jsonl")
		return start(t, "importer "+name, procOptions{}, "--data", data, "--coordinator", coord.url, "--token-file", token,
			"--manifest", manifest, "--log-format", "json", path), manifest
	}

	p, _ := importer("part1", paths[0])
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer part1 exited %d, want 0", code)
	}
	wantAll(w, parts[0], "part1")
	backup := filepath.Join(dir, "runs.backup")
	bp := start(t, "coordinator backup", procOptions{}, "backup", "--coordinator", coord.url, "--token-file", token, backup)
	if code := bp.wait(30 * time.Second); code != 0 {
		t.Fatalf("coordinator backup exited %d, want 0", code)
	}
	p, manifest2 := importer("part2", paths[1])
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer part2 exited %d, want 0", code)
	}
	wantAll(w, parts[1], "part2")
	coord.stop()

	// Restore the old backup, and forget to bump.
	b, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(db, b, 0o600); err != nil {
		t.Fatal(err)
	}
	coord = startCoordinator(t, db, token, coord.addr)
	p, _ = importer("part3-refused", paths[2])
	if code := p.wait(60 * time.Second); code != 1 {
		t.Fatalf("importer part3 on a restored authority exited %d, want 1", code)
	}
	last := runError(t, p.log())
	for _, s := range []string{"already leased", "old backup"} {
		if !strings.Contains(last, s) {
			t.Errorf("importer part3's error %q does not say %q", last, s)
		}
	}
	// Nothing was overwritten or added.
	st := openStore(t, data)
	verifyArchive(t, st, w)
	st.Close()

	// The operator's fix: the highest run any store has seen, plus one.
	m2 := readManifest(t, manifest2)
	out, err := exec.Command(bin(t, "resolver"), "inspect", "--json", "--data", data, m2[len(m2)-1].CallNumber).Output()
	if err != nil {
		t.Fatalf("resolver inspect: %v", err)
	}
	var info struct{ Run uint32 }
	if err := json.Unmarshal(out, &info); err != nil || info.Run == 0 {
		t.Fatalf("resolver inspect --json = %s (%v), want a run", out, err)
	}
	coord.stop()
	bump := start(t, "coordinator bump", procOptions{}, "bump", "--db", db, "--to", itoa(int(info.Run)+1))
	if code := bump.wait(30 * time.Second); code != 0 {
		t.Fatalf("coordinator bump exited %d, want 0", code)
	}
	coord = startCoordinator(t, db, token, coord.addr)
	p, manifest3 := importer("part3", paths[2])
	if code := p.wait(60 * time.Second); code != 0 {
		t.Fatalf("importer part3 after the bump exited %d, want 0", code)
	}
	checkManifest(t, "part3", readManifest(t, manifest3), len(parts[2]))
	wantAll(w, parts[2], "part3")
	coord.stop()
	verifyArchive(t, openStore(t, data), w)
}

// runError returns the error that ended an importer's run: the line right
// above its summary, which must be the last line.
func runError(t *testing.T, log string) string {
	t.Helper()
	lines := strings.Split(strings.TrimRight(log, "\n"), "\n")
	if len(lines) < 2 || !strings.HasPrefix(lines[len(lines)-1], "imported ") {
		t.Errorf("the importer's last line %q is not its summary", lines[len(lines)-1])
		return lines[len(lines)-1]
	}
	return lines[len(lines)-2]
}
