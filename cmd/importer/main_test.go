package main

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/internal/cli"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
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
	for _, args := range [][]string{{"--help"}, {"x.mbox", "--help"}} {
		var out bytes.Buffer
		err := run(context.Background(), args, nil, &out, io.Discard)
		if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out.String(), "Examples:") || !strings.Contains(out.String(), "$CHIBRARY_DATA") {
			t.Errorf("importer %q = %v, stdout:\n%s\nwant usage with examples and env variables", args, err, out.String())
		}
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"--version"}, nil, &out, io.Discard); !errors.Is(err, flag.ErrHelp) || !strings.HasPrefix(out.String(), "importer ") {
		t.Errorf("importer --version = %v, %q; want the version line", err, out.String())
	}
	data := filepath.Join(t.TempDir(), "archive")
	status, _, stderr := importer(t, "", "--data", data, "../../fixtures/mbox/demo.mbox", "/no/such/file.mbox")
	if status != cli.ExitFailure || !strings.HasPrefix(stderr, "importer: cannot open /no/such/file.mbox: no such file or directory\nimported 0, duplicates 0, failed 0 in ") {
		t.Errorf("missing input: status %d, stderr %q; want 1 naming the file once, then the summary", status, stderr)
	}
	if _, err := os.Stat(data); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("a missing input was reported after creating the archive %s", data)
	}
	if strings.Count(stderr, "/no/such/file.mbox") != 1 {
		t.Errorf("missing input: stderr %q repeats the path", stderr)
	}
}

// Flags may come after the paths, as with git and go; -- ends the flags,
// and - is standard input. Nothing may be written where the user did not
// ask (./archive).
func TestFlagsAnywhere(t *testing.T) {
	demo, err := filepath.Abs("../../fixtures/mbox/demo.mbox")
	if err != nil {
		t.Fatal(err)
	}
	t.Chdir(t.TempDir())
	data := filepath.Join(t.TempDir(), "b3")
	if status, got, stderr := importer(t, "", demo, "--data", data, "--list", "demo"); status != 0 || got != [3]int{20, 0, 0} {
		t.Fatalf("importer demo.mbox --data DIR = %d %v\n%s", status, got, stderr)
	}
	if c := count(t, data); c != 20 {
		t.Errorf("--data after the path: %s holds %d messages, want 20", data, c)
	}
	if _, err := os.Stat("archive"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("./archive exists (%v): the flag after the path was not taken", err)
	}
	// A file whose name looks like a flag, after --.
	odd := "--odd.mbox"
	b, err := os.ReadFile(demo)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(odd, b, 0o644); err != nil {
		t.Fatal(err)
	}
	if status, got, stderr := importer(t, "", "--data", data, "--", odd); status != 0 || got != [3]int{0, 20, 0} {
		t.Errorf("importer --data DIR -- %s = %d %v\n%s", odd, status, got, stderr)
	}
	if status, got, stderr := importer(t, "Message-ID: <in@x>\n\nhello\n", "-", "--data", data); status != 0 || got != [3]int{1, 0, 0} {
		t.Errorf("importer - --data DIR = %d %v\n%s", status, got, stderr)
	}
	if status, _, stderr := importer(t, "", demo, "--dta", data); status != cli.ExitUsage || !strings.Contains(stderr, "dta") {
		t.Errorf("a misspelt flag after the path = %d\n%s\nwant a usage error", status, stderr)
	}
	if _, err := os.Stat("archive"); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("./archive exists (%v) after a usage error", err)
	}
}

// A compressed input cut short or corrupt, or a file ending inside a
// Content-Length body: the message being read when it breaks is failed,
// with the reason, nothing partial is stored, and the run exits 1. The
// whole file imported afterwards stores that message, and nothing else.
func TestBrokenInputs(t *testing.T) {
	for _, tt := range []struct {
		broken, whole, reason string
	}{
		{"truncated.mbox.gz", "mboxrd.mbox.gz", "gzip data ends early"},
		{"truncated.mbox.bz2", "mboxrd.mbox.bz2", "bzip2 data ends early"},
		{"bad-checksum.mbox.gz", "mboxrd.mbox.gz", "corrupt gzip data"},
		{"mboxcl2-truncated.mbox", "mboxcl2.mbox", "Content-Length"},
	} {
		t.Run(tt.broken, func(t *testing.T) {
			data := t.TempDir()
			manifest := filepath.Join(t.TempDir(), "m.jsonl")
			status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/mbox/"+tt.broken)
			if status != cli.ExitFailure || got != [3]int{2, 0, 1} {
				t.Fatalf("importer %s = %d %v, want 1 [2 0 1]\n%s", tt.broken, status, got, stderr)
			}
			if !strings.Contains(stderr, tt.reason) {
				t.Errorf("stderr does not say %q:\n%s", tt.reason, stderr)
			}
			m, _ := os.ReadFile(manifest)
			if lines := strings.Split(strings.TrimSpace(string(m)), "\n"); len(lines) != 3 || !strings.Contains(lines[2], `"status":"failed"`) || !strings.Contains(lines[2], tt.reason) {
				t.Errorf("manifest:\n%s\nwant 3 lines, the last failed with the reason", m)
			}
			if c := count(t, data); c != 2 {
				t.Errorf("store holds %d messages, want the 2 whole ones", c)
			}
			status, got, stderr = importer(t, "", "--data", data, "../../fixtures/mbox/"+tt.whole)
			if status != 0 || got != [3]int{1, 2, 0} {
				t.Errorf("importer %s afterwards = %d %v, want 0 [1 2 0]: only the cut message is new\n%s", tt.whole, status, got, stderr)
			}
		})
	}
}

// A folder of pipermail monthly .txt.gz files (a Mailman 2 archive
// download) is imported whole, in calendar order; a run that finds nothing
// to import exits 1 and says so.
func TestFolders(t *testing.T) {
	data := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/pipermail")
	if status != 0 || got != [3]int{5, 0, 0} {
		t.Fatalf("importer fixtures/pipermail = %d %v, want 0 [5 0 0]\n%s", status, got, stderr)
	}
	m, _ := os.ReadFile(manifest)
	var ids []string
	for _, line := range strings.Split(strings.TrimSpace(string(m)), "\n") {
		var e struct {
			ID string `json:"message_id"`
		}
		json.Unmarshal([]byte(line), &e)
		ids = append(ids, e.ID)
	}
	if want := []string{"<pm0@example.org>", "<pm1@example.org>", "<pm2@example.org>", "<pm3@example.org>", "<pm4@example.org>"}; !slices.Equal(ids, want) {
		t.Errorf("imported %q, want the months in calendar order %q", ids, want)
	}
	if !strings.Contains(stderr, "README") {
		t.Errorf("stderr does not mention the skipped README:\n%s", stderr)
	}

	empty := t.TempDir()
	if err := os.WriteFile(filepath.Join(empty, "notes.txt"), []byte("not mail\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	emptyFile := filepath.Join(empty, "empty.mbox")
	if err := os.WriteFile(emptyFile, nil, 0o644); err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{empty, emptyFile} {
		status, got, stderr := importer(t, "", "--data", data, path)
		lines := strings.Split(strings.TrimSpace(stderr), "\n")
		if status != cli.ExitFailure || got != [3]int{} || len(lines) < 2 || lines[len(lines)-2] != "importer: nothing to import: no message found in "+path {
			t.Errorf("importer %s = %d %v\n%s\nwant 1, a line saying no message was found, then the summary", path, status, got, stderr)
		}
	}
}

// The error that ended a run comes right above the summary, which is the
// last line: also when the run ended before anything was read (a store
// that cannot be opened, a missing input). Bad usage ends with the usage
// hint instead.
func TestSummaryLast(t *testing.T) {
	afile := filepath.Join(t.TempDir(), "afile")
	if err := os.WriteFile(afile, nil, 0o600); err != nil {
		t.Fatal(err)
	}
	demo := "../../fixtures/mbox/demo.mbox"
	tests := []struct {
		name      string
		args      []string
		status    int
		errorLine string // the line above the summary
	}{
		{"messages failed", []string{"--data", t.TempDir(), "../../fixtures/mbox/leading-garbage.mbox"}, cli.ExitFailure, "importer: 1 messages could not be stored"},
		{"the store cannot be opened", []string{"--data", afile, demo}, cli.ExitFailure, "importer: --data " + afile + " is not a directory"},
		{"a missing input", []string{"--data", t.TempDir(), "/no/such.mbox"}, cli.ExitFailure, "importer: cannot open /no/such.mbox"},
		{"no coordinator token", []string{"--data", t.TempDir(), "--coordinator", "http://127.0.0.1:1", demo}, cli.ExitUsage, ""},
		{"a usage error", []string{"--data", t.TempDir(), "--format", "mbox9", demo}, cli.ExitUsage, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Setenv("CHIBRARY_TOKEN", "")
			status, _, stderr := importer(t, "", tt.args...)
			lines := strings.Split(strings.TrimSpace(stderr), "\n")
			last := lines[len(lines)-1]
			if tt.status == cli.ExitUsage {
				if status != tt.status || summary.MatchString(stderr) || !strings.HasPrefix(last, "Run 'importer --help'") {
					t.Errorf("importer %q = %d\n%s\nwant %d, the usage hint last and no summary", tt.args, status, stderr, tt.status)
				}
				return
			}
			if status != tt.status || len(lines) < 2 || !summary.MatchString(last) || !strings.HasPrefix(lines[len(lines)-2], tt.errorLine) {
				t.Errorf("importer %q = %d\n%s\nwant %d, %q, then the summary as the last line", tt.args, status, stderr, tt.status, tt.errorLine)
			}
		})
	}
}

// A data directory whose store is bound to a coordinator's authority: a
// plain importer (no --coordinator) refuses before reading anything, says
// to use --coordinator, and leaves no stray runs.db; --scheme asking an
// existing authority for another scheme is a usage error.
func TestAuthorityChecks(t *testing.T) {
	ctx := context.Background()
	data := t.TempDir()
	st, err := boltstore.Open(ctx, filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	coord, _, err := authority.OpenOrCreate(ctx, filepath.Join(t.TempDir(), "runs.db"), authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	l, err := coord.Issue(ctx, authority.Holder{Program: "importer"})
	coord.Close()
	if err != nil {
		t.Fatal(err)
	}
	if err := st.RecordLease(ctx, l); err != nil {
		t.Fatal(err)
	}
	st.Close()
	status, got, stderr := importer(t, "", "--data", data, "../../fixtures/mbox/demo.mbox")
	if status != cli.ExitFailure || got != [3]int{} || !strings.Contains(stderr, "bound to the authority "+l.Authority) || !strings.Contains(stderr, "--coordinator") {
		t.Errorf("importer on a store bound elsewhere = %d %v\n%s\nwant 1 naming the authority and --coordinator", status, got, stderr)
	}
	if _, err := os.Stat(filepath.Join(data, "runs.db")); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("runs.db after the refusal: %v, want none", err)
	}

	local := t.TempDir()
	if status, _, stderr := importer(t, "", "--data", local, "../../fixtures/mbox/mboxrd.mbox"); status != 0 {
		t.Fatalf("first import: %d\n%s", status, stderr)
	}
	status, _, stderr = importer(t, "", "--data", local, "--scheme", "bits", "../../fixtures/mbox/demo.mbox")
	if status != cli.ExitUsage || !strings.Contains(stderr, "has scheme mix, not bits") {
		t.Errorf("--scheme bits on a mix authority = %d\n%s\nwant a usage error naming mix", status, stderr)
	}
	if c := count(t, local); c != 3 {
		t.Errorf("store holds %d messages after the refusal, want 3", c)
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

// TestReimportRemoved: a message removed from the archive and imported
// again is reported "removed" with its call number, counted among the
// duplicates with a line above the summary, and not stored again.
func TestReimportRemoved(t *testing.T) {
	data := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	if status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/mbox/demo.mbox"); status != 0 || got != [3]int{20, 0, 0} {
		t.Fatalf("first import: status %d, %v\n%s", status, got, stderr)
	}
	var first []struct{ CallNumber, Status string }
	b, err := os.ReadFile(manifest)
	if err != nil {
		t.Fatal(err)
	}
	for _, line := range strings.Split(strings.TrimSpace(string(b)), "\n") {
		var e struct{ CallNumber, Status string }
		if err := json.Unmarshal([]byte(line), &e); err != nil {
			t.Fatal(err)
		}
		first = append(first, e)
	}
	st, err := boltstore.Open(t.Context(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	b2, _ := st.Binding(t.Context())
	codec, _ := b2.Codec()
	n, _, err := codec.Parse(first[3].CallNumber)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := st.Remove(t.Context(), n, "test"); err != nil {
		t.Fatal(err)
	}
	st.Close()
	status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/mbox/demo.mbox")
	if status != 0 || got != [3]int{0, 20, 0} || !strings.Contains(stderr, "1 of the duplicates was removed from the archive and stays out") {
		t.Fatalf("re-import: status %d, %v\n%s", status, got, stderr)
	}
	b, _ = os.ReadFile(manifest)
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if want := `"callnumber":"` + first[3].CallNumber + `"`; !strings.Contains(lines[3], want) || !strings.Contains(lines[3], `"status":"removed"`) {
		t.Errorf("manifest line 4 = %s, want removed with %s", lines[3], want)
	}
	if n := count(t, data); n != 19 {
		t.Errorf("the store counts %d messages, want 19", n)
	}
}

// TestNewcomerMistakes: an empty input creates no archive; "importer
// help" is the help; a mistyped flag is named with the flag meant.
func TestNewcomerMistakes(t *testing.T) {
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	empty := filepath.Join(dir, "empty.mbox")
	if err := os.WriteFile(empty, []byte("\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if status, _, stderr := importer(t, "", "--data", data, empty); status != 1 || !strings.Contains(stderr, "no message found in "+empty) {
		t.Errorf("an empty input: status %d\n%s", status, stderr)
	}
	if _, err := os.Stat(data); !os.IsNotExist(err) {
		t.Errorf("an empty input left %s behind (%v)", data, err)
	}
	var out bytes.Buffer
	err := run(t.Context(), []string{"help"}, strings.NewReader(""), &out, io.Discard)
	if err != nil || !strings.Contains(out.String(), "Usage: importer") {
		t.Errorf("importer help = %v, %q; want the help", err, out.String())
	}
	if status, _, stderr := importer(t, "", "--data", data, "--lsit", "x", empty); status != 2 || !strings.Contains(stderr, "unknown flag --lsit (did you mean --list?)") {
		t.Errorf("--lsit: status %d\n%s", status, stderr)
	}
}

// A batch the store refuses as a whole (here: an authority restored from
// a backup hands out a run the store has seen) is counted failed in the
// summary, as the manifest lists it, and the status is 1.
func TestSummaryCountsFailedBatches(t *testing.T) {
	data := t.TempDir()
	runs := filepath.Join(data, "runs.db")
	if status, _, stderr := importer(t, "", "--data", data, "../../fixtures/mbox/mboxrd.mbox"); status != 0 {
		t.Fatalf("first import: %d\n%s", status, stderr)
	}
	backup, err := os.ReadFile(runs)
	if err != nil {
		t.Fatal(err)
	}
	if status, _, stderr := importer(t, "", "--data", data, "../../fixtures/mbox/mboxo.mbox"); status != 0 {
		t.Fatalf("second import: %d\n%s", status, stderr)
	}
	if err := os.WriteFile(runs, backup, 0o600); err != nil {
		t.Fatal(err)
	}
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	status, got, stderr := importer(t, "", "--data", data, "--manifest", manifest, "../../fixtures/mbox/demo.mbox")
	m, _ := os.ReadFile(manifest)
	failed := strings.Count(string(m), `"status":"failed"`)
	if failed == 0 {
		t.Fatalf("manifest lists no failed message after the store refused a reused run:\n%s\n%s", m, stderr)
	}
	if status != cli.ExitFailure || got[2] != failed {
		t.Errorf("importer after the restore = %d, summary %v; want 1 and failed %d as in the manifest\n%s", status, got, failed, stderr)
	}
}

// TestReimportOtherList: importing again with another --list than the
// messages were archived with moves nothing, and says so: a warning per
// message (the first few), a line above the summary with the command that
// moves them, and the list in each manifest line.
func TestReimportOtherList(t *testing.T) {
	data := t.TempDir()
	manifest := filepath.Join(t.TempDir(), "m.jsonl")
	if status, got, stderr := importer(t, "", "--data", data, "--list", "wrong", "../../fixtures/lists/arrival.mbox"); status != 0 || got != [3]int{4, 0, 0} {
		t.Fatalf("first import: status %d, %v\n%s", status, got, stderr)
	}
	// The same list again: nothing to say.
	if status, got, stderr := importer(t, "", "--data", data, "--list", "wrong", "../../fixtures/lists/arrival.mbox"); status != 0 || got != [3]int{0, 4, 0} || strings.Contains(stderr, "another list") {
		t.Fatalf("same list: status %d, %v\n%s", status, got, stderr)
	}
	status, got, stderr := importer(t, "", "--data", data, "--list", "right", "--manifest", manifest, "../../fixtures/lists/arrival.mbox")
	if status != 0 || got != [3]int{0, 4, 0} {
		t.Fatalf("other list: status %d, %v\n%s", status, got, stderr)
	}
	for _, want := range []string{"message already archived in list wrong, not right", "4 of the duplicates are archived in another list than right, and stay there: resolver move --list right CALLNUMBER..."} {
		if !strings.Contains(stderr, want) {
			t.Errorf("stderr does not say %q:\n%s", want, stderr)
		}
	}
	b, _ := os.ReadFile(manifest)
	if n := strings.Count(string(b), `"list":"wrong"`); n != 4 {
		t.Errorf("%d manifest lines name the list wrong, want 4:\n%s", n, b)
	}
}

// TestListNameForms: --list takes a list's name in any form that reads as
// the same list ("Linux MIPS", Linux-MIPS, linux-mips): the archive keeps
// its canonical form, the importer says so once, and importing again
// under another form of it is no "other list"; a name with nothing of a
// list's is bad usage, saying why.
func TestListNameForms(t *testing.T) {
	data := t.TempDir()
	const mbox = "../../fixtures/lists/arrival.mbox"
	status, got, stderr := importer(t, "", "--data", data, "--list", "Linux MIPS", mbox)
	if status != 0 || got != [3]int{4, 0, 0} || !strings.Contains(stderr, `given="Linux MIPS" list=linux-mips`) {
		t.Fatalf(`--list "Linux MIPS": status %d, %v; want 0, 4 imported, and the name said:`+"\n%s", status, got, stderr)
	}
	for _, name := range []string{"Linux-MIPS", "linux-mips", "linux mips"} {
		status, got, stderr := importer(t, "", "--data", data, "--list", name, mbox)
		if status != 0 || got != [3]int{0, 4, 0} || strings.Contains(stderr, "another list") {
			t.Errorf("--list %q after \"Linux MIPS\": status %d, %v; want 0, 4 duplicates in the same list:\n%s", name, status, got, stderr)
		}
	}
	st, err := boltstore.Open(t.Context(), filepath.Join(data, "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	p, err := st.Changes(t.Context(), "", 10)
	st.Close()
	if err != nil || len(p.Messages) != 4 {
		t.Fatalf("Changes = %d messages, %v; want 4", len(p.Messages), err)
	}
	for _, m := range p.Messages {
		if m.List != "linux-mips" {
			t.Errorf("message %v stored in list %q, want linux-mips", m.Number, m.List)
		}
	}
	if status, _, stderr := importer(t, "", "--data", data, "--list", "!!!", mbox); status != cli.ExitUsage || !strings.Contains(stderr, "letters or digits") {
		t.Errorf(`--list "!!!": status %d, want %d saying a name needs letters or digits:`+"\n%s", status, cli.ExitUsage, stderr)
	}
}

// TestStoreLocations: with --store bolt:DIR/messages.db, the local run
// authority and the public-inbox state are beside the store, wherever the
// importer runs from: nothing appears in ./archive of the working
// directory, and a run from another directory uses the same runs.db.
func TestStoreLocations(t *testing.T) {
	mbox, err := filepath.Abs("../../fixtures/mbox/demo.mbox")
	if err != nil {
		t.Fatal(err)
	}
	data := t.TempDir()
	url := "bolt:" + filepath.Join(data, "messages.db")
	for i, want := range [][3]int{{20, 0, 0}, {0, 20, 0}} {
		cwd := t.TempDir()
		t.Chdir(cwd)
		if status, got, stderr := importer(t, "", "--store", url, "--list", "demo", mbox); status != 0 || got != want {
			t.Fatalf("import %d from %s: status %d, %v, want 0, %v\n%s", i+1, cwd, status, got, want, stderr)
		}
		if _, err := os.Stat(filepath.Join(cwd, "archive")); !errors.Is(err, fs.ErrNotExist) {
			t.Errorf("import %d made ./archive in its working directory (%v)", i+1, err)
		}
	}
	if _, err := os.Stat(filepath.Join(data, "runs.db")); err != nil {
		t.Errorf("no runs.db beside the store: %v", err)
	}
}
