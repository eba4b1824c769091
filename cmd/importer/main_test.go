package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/testcorpus"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

var summary = regexp.MustCompile(`(?m)^imported (\d+), duplicates (\d+), failed (\d+) in [0-9.]+ s \([0-9]+ msg/s\)$`)

// importer runs the command in-process and returns its exit status, the
// numbers of its summary line and its stderr.
func importer(t *testing.T, stdin string, args ...string) (status int, counts [3]int, stderr string) {
	t.Helper()
	var errb bytes.Buffer
	err := run(context.Background(), args, strings.NewReader(stdin), io.Discard, &errb)
	status = cli.ExitStatus(&errb, "importer", err)
	if m := summary.FindStringSubmatch(errb.String()); m != nil {
		fmt.Sscan(m[1], &counts[0])
		fmt.Sscan(m[2], &counts[1])
		fmt.Sscan(m[3], &counts[2])
	}
	return status, counts, errb.String()
}

func count(t *testing.T, data string) int64 {
	t.Helper()
	st, err := boltstore.Open(context.Background(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	n, err := st.Count(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func TestImportFixtures(t *testing.T) {
	tests := []struct {
		name       string
		paths      []string
		stdin      string
		wantStatus int
		want       [3]int // imported, duplicates, failed
	}{
		{name: "demo", paths: []string{"../../fixtures/mbox/demo.mbox"}, want: [3]int{20, 0, 0}},
		{name: "gzip and bzip2 of one mbox are duplicates", paths: []string{"../../fixtures/mbox/mboxrd.mbox", "../../fixtures/mbox/mboxrd.mbox.gz", "../../fixtures/mbox/mboxrd.mbox.bz2"}, want: [3]int{3, 6, 0}},
		{name: "pipermail", paths: []string{"../../fixtures/mbox/pipermail-2001-January.txt.gz"}},
		{name: "maildir", paths: []string{"../../fixtures/maildir"}, want: [3]int{4, 0, 0}},
		{name: "eml directory", paths: []string{"../../fixtures/eml"}, want: [3]int{3, 0, 0}},
		{name: "one message on stdin", paths: []string{"-"}, stdin: "Message-ID: <in@x>\n\nhello\n", want: [3]int{1, 0, 0}},
		{name: "leading garbage is a failure, the rest is stored", paths: []string{"../../fixtures/mbox/leading-garbage.mbox"}, wantStatus: cli.ExitFailure},
		{name: "duplicate Message-IDs are two messages", paths: []string{"../../fixtures/mbox/duplicate-message-id.mbox"}, want: [3]int{2, 0, 0}},
		{name: "hostile mboxes", paths: []string{"../../fixtures/mbox/crlf.mbox", "../../fixtures/mbox/from-in-body.mbox", "../../fixtures/mbox/truncated.mbox",
			"../../fixtures/mbox/truncated-header.mbox", "../../fixtures/mbox/8bit-headers.mbox", "../../fixtures/mbox/unknown-charset.mbox",
			"../../fixtures/mbox/no-message-id.mbox", "../../fixtures/mbox/mboxcl2.mbox", "../../fixtures/mbox/mboxcl2-bad-length.mbox", "../../fixtures/mbox/mboxo.mbox"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			data := t.TempDir()
			args := append([]string{"--data", data}, tt.paths...)
			status, got, stderr := importer(t, tt.stdin, args...)
			if status != tt.wantStatus {
				t.Fatalf("importer %v exit status = %d, want %d; stderr:\n%s", tt.paths, status, tt.wantStatus, stderr)
			}
			if !summary.MatchString(stderr) {
				t.Fatalf("no summary line in stderr:\n%s", stderr)
			}
			if tt.want != [3]int{} && got != tt.want {
				t.Errorf("importer %v summary = %v, want %v", tt.paths, got, tt.want)
			}
			if tt.wantStatus == cli.ExitFailure && got[2] == 0 {
				t.Errorf("importer %v failed with no failed message counted: %s", tt.paths, stderr)
			}
			if c := count(t, data); c != int64(got[0]) {
				t.Errorf("store holds %d messages, summary says %d imported", c, got[0])
			}
		})
	}
}

func TestManifestAndRerun(t *testing.T) {
	data := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	if status, got, stderr := importer(t, "", "--data", data, "--list", "demo", "--manifest", manifest, "../../fixtures/mbox/demo.mbox"); status != 0 || got != [3]int{20, 0, 0} {
		t.Fatalf("first import: status %d, %v\n%s", status, got, stderr)
	}
	first, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/mbox/demo.mbox"); status != 0 || got != [3]int{0, 20, 0} {
		t.Fatalf("second import: status %d, %v\n%s", status, got, stderr)
	}
	second, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	if want := strings.ReplaceAll(string(first), `"status":"imported"`, `"status":"duplicate"`); string(second) != want {
		t.Errorf("re-import manifest =\n%s\nwant the same call numbers as duplicates:\n%s", second, want)
	}
	if n := strings.Count(string(first), "\n"); n != 20 {
		t.Errorf("manifest has %d lines, want 20", n)
	}
}

func TestPartitionsShareOneInput(t *testing.T) {
	data := t.TempDir()
	total := 0
	for k := 1; k <= 3; k++ {
		status, got, stderr := importer(t, "", "--data", data, "--partition", fmt.Sprintf("%d/3", k), "../../fixtures/mbox/demo.mbox")
		if status != 0 || got[1] != 0 {
			t.Fatalf("partition %d/3: status %d, %v\n%s", k, status, got, stderr)
		}
		total += got[0]
	}
	if total != 20 || count(t, data) != 20 {
		t.Errorf("partitions imported %d, store holds %d; want 20 each", total, count(t, data))
	}
}

func TestUsage(t *testing.T) {
	for _, args := range [][]string{
		{},
		{"--partition", "0/2", "x.mbox"},
		{"--partition", "3/2", "x.mbox"},
		{"--partition", "two", "x.mbox"},
		{"--format", "mbox9", "x.mbox"},
		{"--no-such-flag", "x.mbox"},
		{"--store", "ftp://x", "x.mbox"},
		{"--log-format", "xml", "x.mbox"},
	} {
		if status, _, stderr := importer(t, "", args...); status != cli.ExitUsage {
			t.Errorf("importer %q exit status = %d, want %d; stderr:\n%s", args, status, cli.ExitUsage, stderr)
		}
	}
	var errb bytes.Buffer
	err := run(context.Background(), []string{"--help"}, nil, io.Discard, &errb)
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(errb.String(), "Examples:") || !strings.Contains(errb.String(), "$CHIBRARY_DATA") {
		t.Errorf("--help = %v, output:\n%s\nwant usage with examples and env variables", err, errb.String())
	}
	if status, _, stderr := importer(t, "", "--data", t.TempDir(), "/no/such/file.mbox"); status != cli.ExitFailure || !strings.Contains(stderr, "/no/such/file.mbox") {
		t.Errorf("missing input: status %d, stderr %q; want 1 naming the file", status, stderr)
	}
}

// An import of the shared corpus killed with SIGKILL at random moments and
// run again each time ends with every message stored exactly once, under
// distinct call numbers.
func TestKillAndRerun(t *testing.T) {
	corpus := testcorpus.Path(t)
	if testing.Short() {
		t.Skip("builds the importer and imports the corpus several times")
	}
	bin := filepath.Join(t.TempDir(), "importer")
	if out, err := exec.Command("go", "build", "-o", bin, ".").CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	// One full import tells how long one takes here; the kills land at
	// random moments within that time.
	start := time.Now()
	if out, err := exec.Command(bin, "--data", t.TempDir(), "--log-level", "error", corpus).CombinedOutput(); err != nil {
		t.Fatalf("calibration run: %v\n%s", err, out)
	}
	full := time.Since(start)
	data := t.TempDir()
	rng := rand.New(rand.NewPCG(1, uint64(time.Now().UnixNano())))
	for i := range 5 {
		cmd := exec.Command(bin, "--data", data, "--log-level", "error", corpus)
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		// Each run resumes the previous one, so it has less left to do.
		delay := time.Duration(float64(full) * (0.05 + 0.5*rng.Float64()))
		time.Sleep(delay)
		cmd.Process.Kill()
		cmd.Wait()
		t.Logf("kill %d after %v: %d messages stored so far", i, delay, count(t, data))
	}
	out, err := exec.Command(bin, "--data", data, "--log-level", "error", corpus).CombinedOutput()
	if err != nil {
		t.Fatalf("final run: %v\n%s", err, out)
	}
	t.Logf("final run: %s", bytes.TrimSpace(out))

	st, err := boltstore.Open(context.Background(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	ctx := context.Background()
	if c, err := st.Count(ctx); err != nil || c != testcorpus.Messages {
		t.Fatalf("Count() = %d, %v; want %d", c, err, testcorpus.Messages)
	}
	src, err := mailsource.Open(ctx, corpus, mailsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	seen := map[string]bool{}
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		n, err := st.ByDigest(ctx, store.DigestOf(it.Raw))
		if err != nil {
			t.Fatalf("%s: not in the store: %v", it.Where, err)
		}
		if seen[n.String()] {
			t.Fatalf("%s: call number %s already names another message", it.Where, n)
		}
		seen[n.String()] = true
		got, err := st.Get(ctx, n)
		if err != nil || !bytes.Equal(got.Raw, it.Raw) {
			t.Fatalf("%s: Get(%s) = %d bytes, %v; want the original %d bytes", it.Where, n, len(got.Raw), err, len(it.Raw))
		}
	}
	if len(seen) != testcorpus.Messages {
		t.Errorf("corpus has %d distinct stored messages, want %d", len(seen), testcorpus.Messages)
	}
}
