package e2e

import (
	"fmt"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
)

// smallDisk is a directory where writing stops after a few megabytes.
type smallDisk struct {
	dir string
	// prefix runs a program under a file-size limit when no tmpfs could
	// be mounted.
	prefix []string
	// cause is what the program's error must name.
	cause string
	// grow makes room.
	grow func()
}

// newSmallDisk mounts a tmpfs of size bytes (as root), or failing that,
// limits the size of files the programs write with prlimit --fsize (Go
// ignores SIGXFSZ, so the write fails with EFBIG instead of killing it).
func newSmallDisk(t *testing.T, size int64) *smallDisk {
	t.Helper()
	dir := t.TempDir()
	out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", size), "tmpfs", dir).CombinedOutput()
	if err == nil {
		t.Cleanup(func() {
			if out, err := exec.Command("umount", dir).CombinedOutput(); err != nil {
				t.Errorf("umount %s: %v\n%s", dir, err, out)
			}
		})
		return &smallDisk{dir: dir, cause: "no space left on device", grow: func() {
			if out, err := exec.Command("mount", "-o", "remount,size=1g", dir).CombinedOutput(); err != nil {
				t.Fatalf("cannot grow the tmpfs: %v\n%s", err, out)
			}
		}}
	}
	prlimit, lerr := exec.LookPath("prlimit")
	if lerr != nil {
		t.Skipf("cannot mount a tmpfs (%v: %s) and no prlimit for a file-size limit", err, strings.TrimSpace(string(out)))
	}
	t.Logf("cannot mount a tmpfs (%v: %s): limiting file sizes with prlimit instead", err, strings.TrimSpace(string(out)))
	// bbolt grows its file ahead of the data (a tmpfs does not count the
	// hole), so the same room needs a larger file-size limit.
	d := &smallDisk{dir: dir, cause: "file too large", prefix: []string{prlimit, fmt.Sprintf("--fsize=%d", 2*size), "--"}}
	d.grow = func() { d.prefix = nil }
	return d
}

// TestDiskFull imports more than the data directory's disk holds: the
// importer stops with exit status 1 and an error naming the cause, every
// message it acknowledged (imported in the manifest) is readable
// afterwards, and once there is room a re-run stores the rest.
func TestDiskFull(t *testing.T) {
	needPrograms(t)
	msgs := mail(t, 0)
	var total int64
	for _, m := range msgs {
		total += int64(len(m))
	}
	// A fifth of the input fills the disk whatever the input is (the
	// store takes more room than the raw bytes).
	size := min(max(total/5, 1<<20), 8<<20) &^ 4095
	disk := newSmallDisk(t, size)
	data := filepath.Join(disk.dir, "archive")
	dir := t.TempDir() // the manifest and input live elsewhere
	input := writeFile(t, dir, "input.mbox", mboxOf(t, msgs))
	w := want{}
	wantAll(w, msgs, "input.mbox")

	manifest1 := filepath.Join(dir, "full.jsonl")
	p := start(t, "importer full", procOptions{Prefix: disk.prefix}, "--data", data, "--manifest", manifest1, "--log-format", "json", input)
	if code := p.wait(120 * time.Second); code != 1 {
		t.Fatalf("importer on a full disk exited %d, want 1 (an error, not a crash or a signal)", code)
	}
	if last := runError(t, p.log()); !strings.Contains(last, disk.cause) || !strings.HasPrefix(last, "importer: ") {
		t.Errorf("importer's error above its summary %q does not name the cause %q", last, disk.cause)
	}
	m1 := readManifest(t, manifest1)
	var acked []int
	for i, e := range m1 {
		switch e.Status {
		case "imported":
			acked = append(acked, i)
		case "failed":
			if e.Error == "" {
				t.Errorf("manifest entry %d: failed without a reason", i+1)
			}
		default:
			t.Errorf("manifest entry %d: %+v, want imported or failed", i+1, e)
		}
	}
	if len(acked) == 0 || len(acked) == len(msgs) {
		t.Fatalf("%d of %d messages acknowledged before the disk filled: the test wants some but not all", len(acked), len(msgs))
	}
	t.Logf("disk of %d bytes: %d of %d messages acknowledged before it filled", size, len(acked), len(msgs))

	// Everything acknowledged is readable, still on the full disk.
	st := openStore(t, data)
	b, err := st.Binding(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	checkAcked := func(when string) {
		t.Helper()
		for _, i := range acked {
			n, _, err := codec.Parse(m1[i].CallNumber)
			if err != nil {
				t.Fatalf("manifest entry %d: %v", i+1, err)
			}
			s, err := st.Get(t.Context(), n)
			if err != nil {
				t.Errorf("%s: acknowledged message %d (%s) is lost: %v", when, i+1, n, err)
				continue
			}
			if s.Digest != store.DigestOf(asImported(msgs[i])) || store.DigestOf(s.Raw) != s.Digest {
				t.Errorf("%s: acknowledged message %d (%s) has other bytes", when, i+1, n)
			}
		}
	}
	checkAcked("on the full disk")
	st.Close()

	disk.grow()
	manifest2 := filepath.Join(dir, "rerun.jsonl")
	p = start(t, "importer rerun", procOptions{Prefix: disk.prefix}, "--data", data, "--manifest", manifest2, "--log-format", "json", input)
	if code := p.wait(120 * time.Second); code != 0 {
		t.Fatalf("importer re-run with room exited %d, want 0", code)
	}
	m2 := readManifest(t, manifest2)
	checkManifest(t, "re-run", m2, len(msgs))
	for _, i := range acked {
		if m2[i].Status != "duplicate" || m2[i].CallNumber != m1[i].CallNumber {
			t.Errorf("re-run entry %d: %s %s, want duplicate %s", i+1, m2[i].Status, m2[i].CallNumber, m1[i].CallNumber)
		}
	}
	st = openStore(t, data)
	checkAcked("after the re-run")
	verifyArchive(t, st, w)
}
