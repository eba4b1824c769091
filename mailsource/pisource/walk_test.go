package pisource

import (
	"bytes"
	"context"
	"crypto/sha1"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mailsource/pisource/pitest"
)

// gitEvents are the events git log gives for the commits rng of the
// epoch dir, as the reader ran it before the walk: what they do, oldest
// first, and the removals ("-- d"), newest first.
func gitEvents(t *testing.T, dir, rng string) (events, removals []event) {
	t.Helper()
	run := func(args []string, emit func(event)) {
		cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("git %s: %v", strings.Join(args, " "), err)
		}
		if err := readLog(bytes.NewReader(out), emit); err != nil {
			t.Fatal(err)
		}
	}
	run(append(slices.Clone(logArgs), "--reverse", rng), func(ev event) { events = append(events, ev) })
	run(append(slices.Clone(logArgs), rng, "--", "d"), func(ev event) {
		if ev.removed != "" {
			removals = append(removals, ev)
		}
	})
	return events, removals
}

// walkEvents are the walk's events for the commits from..tip of dir.
func walkEvents(t *testing.T, dir, tip, from string) (events []event, removals []string, err error) {
	t.Helper()
	ps, _ := openPacks(dir, len(tip)/2, 64<<20, cacheBytes)
	defer ps.close()
	h, err := ps.walk(context.Background(), tip, from)
	if err != nil {
		return nil, nil, err
	}
	h.removals(func(blob string) { removals = append(removals, blob) })
	for {
		ev, ok := h.next()
		if !ok {
			break
		}
		events = append(events, ev)
	}
	return events, removals, nil
}

func headOf(t *testing.T, dir string) string {
	t.Helper()
	out, err := exec.Command("git", "--git-dir="+dir, "rev-parse", "HEAD").Output()
	if err != nil {
		t.Fatal(err)
	}
	return strings.TrimSpace(string(out))
}

// sameAsGit checks the walk of from..HEAD of dir against git log.
func sameAsGit(t *testing.T, dir, from string) int {
	t.Helper()
	tip := headOf(t, dir)
	rng := tip
	if from != "" {
		rng = from + ".." + tip
	}
	want, wantRm := gitEvents(t, dir, rng)
	got, gotRm, err := walkEvents(t, dir, tip, from)
	if err != nil {
		t.Fatalf("walk(%s): %v", rng, err)
	}
	if !slices.Equal(got, want) {
		t.Errorf("walk(%s): %d events, git log %d; first difference at %d", rng, len(got), len(want), firstDiff(got, want))
	}
	var wantBlobs []string
	for _, ev := range wantRm {
		wantBlobs = append(wantBlobs, ev.removed)
	}
	if !slices.Equal(gotRm, wantBlobs) {
		t.Errorf("walk(%s): removals %q, git log -- d %q", rng, gotRm, wantBlobs)
	}
	return len(want)
}

// firstDiff is the index of the first element where a and b differ,
// or the shorter one's length.
func firstDiff[T comparable](a, b []T) int {
	for i := range min(len(a), len(b)) {
		if a[i] != b[i] {
			return i
		}
	}
	return min(len(a), len(b))
}

// readWith reads every message of path, walked or with git log alone,
// and returns each one's place and bytes, and the log.
func readWith(t *testing.T, path string, gitLog bool, opts Options) ([]string, string) {
	t.Helper()
	var logged bytes.Buffer
	opts.Logger = slog.New(slog.NewTextHandler(&logged, nil))
	r, err := Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	r.noWalk = gitLog
	var got []string
	for _, m := range readAll(t, r) {
		got = append(got, fmt.Sprintf("%s %x", m.Where, sha1.Sum(m.Raw)))
	}
	return got, logged.String()
}

// readAll reads every message of r, in order, each with its own copy of
// its bytes, and closes r; a message that cannot be read fails t.
func readAll(t testing.TB, r *Reader) []Message {
	t.Helper()
	defer r.Close()
	var msgs []Message
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if m.Err != nil {
			t.Fatalf("%s: %v", m.Where, m.Err)
		}
		m.Raw = bytes.Clone(m.Raw)
		msgs = append(msgs, m)
	}
	if err := r.Close(); err != nil {
		t.Fatal(err)
	}
	return msgs
}

// sameMessages: the reader gives the same messages, from the same
// commits, walking the history as with git log; walked says whether the
// walk should read it (else the log says git log did).
func sameMessages(t *testing.T, path string, walked bool, opts Options) {
	t.Helper()
	want, _ := readWith(t, path, true, opts)
	got, logged := readWith(t, path, false, opts)
	if len(want) == 0 && opts.StateDir == "" {
		t.Errorf("read no message of %s", path)
	}
	if !slices.Equal(got, want) {
		t.Errorf("read %d messages walking the history, %d with git log; first difference at %d", len(got), len(want), firstDiff(got, want))
	}
	if fell := strings.Contains(logged, "reading the epoch's history with git log"); fell == walked {
		t.Errorf("walked %v, want %v; log:\n%s", !fell, walked, logged)
	}
}

// TestWalkAsGitLog: on inboxes written by public-inbox's own tools, the
// walk gives exactly git log's events (the same messages and removals,
// in the same order, from the same point), and the reader the same
// messages: written by -mda (a pack a message), with removals by
// public-inbox-learn rm, a message delivered again, new commits after a
// first read; by public-inbox's importer (git fast-import, one pack);
// repacked as lore's mirrors serve them; rewritten by public-inbox-purge.
func TestWalkAsGitLog(t *testing.T) {
	ib := pitest.New(t, 2, "-L", "basic")
	var msgs [][]byte
	for i := range 6 {
		msgs = append(msgs, ib.Message(fmt.Sprintf("w%d@x", i), i))
		ib.Deliver(t, msgs[i])
	}
	ib.Remove(t, msgs[1])
	ib.Deliver(t, msgs[1]) // back again
	ib.Remove(t, msgs[2])
	ib.Remove(t, msgs[3]) // two removals in a row: "d" changes
	ib.Deliver(t, []byte("From: a@example.org\nTo: test@example.com\nSubject: no id\nDate: Mon, 1 Jan 2024 01:00:00 +0000\n\nno Message-ID\n"))
	dir := ib.Epoch(0)
	if n := sameAsGit(t, dir, ""); n < 10 {
		t.Fatalf("%d events, want at least 10", n)
	}
	state := t.TempDir()
	sameMessages(t, ib.Dir, true, Options{})
	// A first run, then new commits: the walk starts at the commit
	// read last.
	first, _ := readWith(t, ib.Dir, false, Options{StateDir: state})
	r, err := Open(context.Background(), ib.Dir, Options{StateDir: state})
	if err != nil {
		t.Fatal(err)
	}
	drainAll(t, r)
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	r.Close()
	from := headOf(t, dir)
	for i := 6; i < 9; i++ {
		ib.Deliver(t, ib.Message(fmt.Sprintf("w%d@x", i), i))
	}
	ib.Remove(t, msgs[4])
	ib.Remove(t, ib.Message("w7@x", 7))
	if n := sameAsGit(t, dir, from); n != 5 {
		t.Errorf("%d events after %s, want 5 (3 added, 2 removed)", n, from)
	}
	sameMessages(t, ib.Dir, true, Options{StateDir: state})
	if again, _ := readWith(t, ib.Dir, false, Options{StateDir: state}); len(again) != 2 || len(first) != 5 {
		t.Errorf("read %d messages, then %d new; want 5, then 2 (w6, w8)", len(first), len(again))
	}

	// Repacked as lore's mirrors serve them: one pack, deltas the other
	// way.
	gitRun(t, dir, "repack", "-adfq", "--window=250", "--depth=50")
	sameAsGit(t, dir, "")
	sameAsGit(t, dir, from)
	sameMessages(t, ib.Dir, true, Options{})

	// public-inbox-purge rewrites the history.
	ib.Purge(t, msgs[5])
	sameAsGit(t, dir, "")
	sameMessages(t, ib.Dir, true, Options{})
}

// TestWalkCanceled: a walk stops when its context ends, and the reader
// says so (it does not read the history with git log instead).
func TestWalkCanceled(t *testing.T) {
	ib := pitest.New(t, 2, "-L", "basic")
	ib.Deliver(t, ib.Message("c@x", 1))
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	ps, _ := openPacks(ib.Epoch(0), 20, 1<<20, cacheBytes)
	defer ps.close()
	if _, err := ps.walk(ctx, headOf(t, ib.Epoch(0)), ""); !errors.Is(err, context.Canceled) {
		t.Errorf("walk under a canceled context = %v, want context.Canceled", err)
	}
	ctx, cancel = context.WithCancel(context.Background())
	var logged bytes.Buffer
	r, err := Open(ctx, ib.Dir, Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	cancel()
	if _, err := r.Next(); !errors.Is(err, context.Canceled) {
		t.Errorf("Next under a canceled context = %v, want context.Canceled", err)
	}
	if strings.Contains(logged.String(), "git log") {
		t.Errorf("log %q: a canceled walk is not read again by git log", logged.String())
	}
}

// TestWalkImported: an inbox of public-inbox's importer (one fast-import
// pack, each message and tree a delta on the one before), of two epochs,
// a message of the first removed in the second.
func TestWalkImported(t *testing.T) {
	ib := pitest.New(t, 2, "-L", "basic")
	var mbox bytes.Buffer
	for i := range 300 {
		mbox.WriteString("From sender@example.org Mon Jan  1 00:00:00 2024\n")
		mbox.Write(ib.Message(fmt.Sprintf("i%d@x", i), i))
		mbox.WriteString(strings.Repeat(fmt.Sprintf("line %d\n", i), 50))
		mbox.WriteString("\n")
	}
	path := filepath.Join(t.TempDir(), "in.mbox")
	if err := os.WriteFile(path, mbox.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ib.ImportMbox(t, path, 40000)
	if _, err := os.Stat(ib.Epoch(1)); err != nil {
		t.Fatalf("public-inbox made one epoch: %v", err)
	}
	ib.Remove(t, append(ib.Message("i3@x", 3), strings.Repeat("line 3\n", 50)...))
	removals := 0
	for n := 0; ; n++ {
		dir := ib.Epoch(n)
		if _, err := os.Stat(dir); err != nil {
			break
		}
		sameAsGit(t, dir, "")
		_, rm := gitEvents(t, dir, "HEAD")
		removals += len(rm)
	}
	if removals != 1 {
		t.Errorf("%d removals in the epochs, want 1", removals)
	}
	sameMessages(t, ib.Dir, true, Options{})
}

// TestWalkFallsBack: every object loose, the walk reads them; histories
// the walk does not read are read by git log, the same messages, and the
// log says so: every object in an alternate, a merge, grafts, a file
// other than m and d.
func TestWalkFallsBack(t *testing.T) {
	for _, tc := range []struct {
		name   string
		walked bool
		make   func(t *testing.T, dir string)
	}{
		{"loose", true, func(t *testing.T, dir string) {
			packs, _ := filepath.Glob(filepath.Join(dir, "objects", "pack", "pack-*.pack"))
			for _, p := range packs {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				os.Remove(p)
				os.Remove(strings.TrimSuffix(p, ".pack") + ".idx")
				cmd := exec.Command("git", "--git-dir="+dir, "unpack-objects", "-q")
				cmd.Stdin = bytes.NewReader(b)
				if out, err := cmd.CombinedOutput(); err != nil {
					t.Fatalf("git unpack-objects: %v: %s", err, out)
				}
			}
		}},
		{"merge", false, func(t *testing.T, dir string) {
			tree := gitOut(t, dir, "rev-parse", "HEAD^{tree}")
			c := gitOut(t, dir, "commit-tree", tree, "-p", "HEAD", "-p", "HEAD~2", "-m", "merge")
			gitRun(t, dir, "update-ref", "HEAD", c)
		}},
		{"alternate", false, func(t *testing.T, dir string) {
			// Every object in an alternate: neither the walk nor the
			// packs read it, git does.
			alt := filepath.Join(t.TempDir(), "objects")
			if err := os.Rename(filepath.Join(dir, "objects"), alt); err != nil {
				t.Fatal(err)
			}
			for _, d := range []string{"info", "pack"} {
				os.MkdirAll(filepath.Join(dir, "objects", d), 0o755)
			}
			if err := os.WriteFile(filepath.Join(dir, "objects", "info", "alternates"), []byte(alt+"\n"), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"grafts", false, func(t *testing.T, dir string) {
			os.MkdirAll(filepath.Join(dir, "info"), 0o755)
			line := gitOut(t, dir, "rev-parse", "HEAD") + " " + gitOut(t, dir, "rev-parse", "HEAD~2") + "\n"
			if err := os.WriteFile(filepath.Join(dir, "info", "grafts"), []byte(line), 0o644); err != nil {
				t.Fatal(err)
			}
		}},
		{"another file", false, func(t *testing.T, dir string) {
			blob := gitOut(t, dir, "rev-parse", "HEAD:m")
			cmd := exec.Command("git", "--git-dir="+dir, "mktree")
			cmd.Stdin = strings.NewReader("100644 blob " + blob + "\tm\n100644 blob " + blob + "\tREADME\n")
			tree, err := cmd.Output()
			if err != nil {
				t.Fatal(err)
			}
			c := gitOut(t, dir, "commit-tree", strings.TrimSpace(string(tree)), "-p", "HEAD", "-m", "odd")
			gitRun(t, dir, "update-ref", "HEAD", c)
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			ib := pitest.New(t, 2, "-L", "basic")
			for i := range 4 {
				ib.Deliver(t, ib.Message(fmt.Sprintf("f%d@x", i), i))
			}
			tc.make(t, ib.Epoch(0))
			if tc.walked {
				sameAsGit(t, ib.Epoch(0), "")
			}
			sameMessages(t, ib.Dir, tc.walked, Options{})
		})
	}
}

func gitOut(t *testing.T, dir string, args ...string) string {
	t.Helper()
	out, err := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...).Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func gitRun(t *testing.T, dir string, args ...string) {
	t.Helper()
	if out, err := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...).CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

func drainAll(t *testing.T, r *Reader) {
	t.Helper()
	for {
		_, err := r.Next()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil {
			t.Fatal(err)
		}
	}
}

func TestParseCommit(t *testing.T) {
	a, b := strings.Repeat("a", 40), strings.Repeat("b", 40)
	for _, tc := range []struct {
		name, data string
		tree       string
		parents    int
		err        error
	}{
		{"root", "tree " + a + "\nauthor A <a@x> 1 +0000\n\nm\n", a, 0, nil},
		{"one parent", "tree " + a + "\nparent " + b + "\nauthor A <a@x> 1 +0000\n", a, 1, nil},
		{"merge", "tree " + a + "\nparent " + b + "\nparent " + a + "\nparent " + b + "\n", a, 3, nil},
		{"no tree", "parent " + b + "\n", "", 0, ErrBadObject},
		{"short tree", "tree " + a[:39] + "\n", "", 0, ErrBadObject},
		{"upper-case tree", "tree " + strings.ToUpper(a) + "\n", "", 0, ErrBadObject},
		{"bad parent", "tree " + a + "\nparent xyz\n", "", 0, ErrBadObject},
		{"empty", "", "", 0, ErrBadObject},
	} {
		tree, _, n, err := parseCommit([]byte(tc.data), 20)
		if !errors.Is(err, tc.err) || string(tree) != tc.tree || n != tc.parents {
			t.Errorf("%s: parseCommit(%q) = %s, %d parents, %v; want %s, %d, %v", tc.name, tc.data, tree, n, err, tc.tree, tc.parents, tc.err)
		}
	}
}

func TestParseTree(t *testing.T) {
	oid := strings.Repeat("\x01", 20)
	for _, tc := range []struct {
		name, data string
		names      []string
		err        error
	}{
		{"m", "100644 m\x00" + oid, []string{"m"}, nil},
		{"d and m", "100644 d\x00" + oid + "100644 m\x00" + oid, []string{"d", "m"}, nil},
		{"a directory sorts as its name and /", "100644 a-\x00" + oid + "40000 a\x00" + oid + "100644 a0\x00" + oid, []string{"a-", "a", "a0"}, nil},
		{"empty", "", nil, nil},
		{"out of order", "100644 m\x00" + oid + "100644 d\x00" + oid, nil, ErrBadObject},
		{"twice", "100644 m\x00" + oid + "100644 m\x00" + oid, nil, ErrBadObject},
		{"cut short", "100644 m\x00" + oid[:19], nil, ErrBadObject},
		{"no NUL", "100644 m", nil, ErrBadObject},
		{"mode not octal", "100648 m\x00" + oid, nil, ErrBadObject},
		{"mode with a leading zero", "040000 m\x00" + oid, nil, ErrBadObject},
		{"no mode", " m\x00" + oid, nil, ErrBadObject},
		{"empty name", "100644 \x00" + oid, nil, ErrBadObject},
		{"a slash", "100644 a/m\x00" + oid, nil, ErrBadObject},
		{"dot dot", "40000 ..\x00" + oid, nil, ErrBadObject},
	} {
		var names []string
		err := parseTree([]byte(tc.data), 20, func(e treeEntry) error {
			names = append(names, string(e.name))
			return nil
		})
		if !errors.Is(err, tc.err) || err == nil && !slices.Equal(names, tc.names) {
			t.Errorf("%s: parseTree(%q) = %q, %v; want %q, %v", tc.name, tc.data, names, err, tc.names, tc.err)
		}
	}
}

func TestParseLooseHeader(t *testing.T) {
	for _, tc := range []struct {
		h    string
		typ  int
		size int64
		err  error
	}{
		{"commit 123", objCommit, 123, nil},
		{"tree 0", objTree, 0, nil},
		{"blob 7", objBlob, 7, nil},
		{"tag 1", objTag, 1, nil},
		{"commit", 0, 0, ErrBadLoose},
		{"commit ", 0, 0, ErrBadLoose},
		{"commit 012", 0, 0, ErrBadLoose},
		{"commit -1", 0, 0, ErrBadLoose},
		{"commit 1234567890123456789", 0, 0, ErrBadLoose},
		{"ofs-delta 1", 0, 0, ErrBadLoose},
	} {
		typ, size, err := parseLooseHeader([]byte(tc.h))
		if !errors.Is(err, tc.err) || typ != tc.typ || size != tc.size {
			t.Errorf("parseLooseHeader(%q) = %d, %d, %v; want %d, %d, %v", tc.h, typ, size, err, tc.typ, tc.size, tc.err)
		}
	}
}

// TestLooseName: a loose object whose bytes are not of its name is
// refused (a cycle of commits cannot be made of loose objects).
func TestLooseName(t *testing.T) {
	if _, err := exec.LookPath("git"); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatal("git is not installed, but CI=true: CI must install it")
		}
		t.Skip("git is not installed")
	}
	dir := t.TempDir()
	gitRun(t, dir, "init", "-q", "--bare")
	cmd := exec.Command("git", "--git-dir="+dir, "hash-object", "-w", "--stdin")
	cmd.Stdin = strings.NewReader("a message\n")
	out, err := cmd.Output()
	if err != nil {
		t.Fatal(err)
	}
	name := strings.TrimSpace(string(out))
	ps := &packs{dir: dir, limit: 1 << 20}
	raw, _ := hex.DecodeString(name)
	if typ, data, err := ps.loose(raw); err != nil || typ != objBlob || string(data) != "a message\n" {
		t.Fatalf("loose(%s) = %d, %q, %v", name, typ, data, err)
	}
	other := strings.Repeat("ab", 20)
	os.MkdirAll(filepath.Join(dir, "objects", other[:2]), 0o755)
	b, _ := os.ReadFile(filepath.Join(dir, "objects", name[:2], name[2:]))
	os.WriteFile(filepath.Join(dir, "objects", other[:2], other[2:]), b, 0o644)
	raw, _ = hex.DecodeString(other)
	if _, _, err := ps.loose(raw); !errors.Is(err, ErrBadLoose) {
		t.Errorf("loose(another's bytes) = %v, want ErrBadLoose", err)
	}
	if _, _, err := ps.loose(make([]byte, 20)); !errors.Is(err, errNotHere) {
		t.Errorf("loose(missing) = %v, want errNotHere", err)
	}
}

// FuzzParseCommit: any object is read without a panic; what is read is
// the object's start, written again the same.
func FuzzParseCommit(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		tree, parents, n, err := parseCommit(data, 20)
		if err != nil {
			return
		}
		if len(tree) != 40 || !isHex(tree) || n < 0 {
			t.Fatalf("parseCommit = %q, %d parents", tree, n)
		}
		if n > 2 {
			return
		}
		head := "tree " + string(tree) + "\n"
		for _, p := range parents[:n] {
			head += "parent " + string(p) + "\n"
		}
		if !bytes.HasPrefix(data, []byte(head)) {
			t.Fatalf("parseCommit(%q) read %q, not its start", data, head)
		}
	})
}

// FuzzParseTree: any object is read without a panic; a tree read is
// written again byte for byte.
func FuzzParseTree(f *testing.F) {
	f.Fuzz(func(t *testing.T, data []byte) {
		var entries []treeEntry
		err := parseTree(data, 20, func(e treeEntry) error {
			entries = append(entries, e)
			return nil
		})
		if err != nil {
			return
		}
		if got := appendTree(nil, entries); !bytes.Equal(got, data) {
			t.Fatalf("parseTree(%q) then appendTree = %q", data, got)
		}
	})
}

// FuzzLoose: any file is read as a loose object, or refused, without a
// panic and within the limit; a header read is written again the same.
func FuzzLoose(f *testing.F) {
	f.Add([]byte("commit 12"))
	f.Fuzz(func(t *testing.T, file []byte) {
		if typ, size, err := parseLooseHeader(file); err == nil {
			if got := fmt.Sprintf("%s %d", typeNames[typ], size); got != string(file) {
				t.Fatalf("parseLooseHeader(%q) = %q", file, got)
			}
		}
		ps := &packs{}
		typ, data, err := ps.inflateLoose(file, 1<<16)
		if err == nil && (len(data) > 1<<16 || typeNames[typ] == "") {
			t.Fatalf("inflateLoose = type %d, %d bytes", typ, len(data))
		}
	})
}
