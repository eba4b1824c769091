package pisource_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/mail"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mailsource/pisource"
	"github.com/chibrary/chibrary/mailsource/pisource/pitest"
)

// readAll reads every message of path and returns their Message-IDs in
// the order read (without angle brackets) and the Reader, closed.
func readAll(t *testing.T, path string, opts pisource.Options) ([]string, *pisource.Reader) {
	t.Helper()
	r, err := pisource.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatal(err)
	}
	var ids []string
	for _, raw := range drain(t, r) {
		msg, err := mail.ReadMessage(bytes.NewReader(raw))
		if err != nil {
			t.Fatal(err)
		}
		ids = append(ids, strings.Trim(msg.Header.Get("Message-ID"), "<>"))
	}
	return ids, r
}

// drain reads every message of r, in order, and closes it.
func drain(t *testing.T, r *pisource.Reader) [][]byte {
	t.Helper()
	var raws [][]byte
	for _, m := range pisource.ReadAll(t, r) {
		raws = append(raws, m.Raw)
	}
	return raws
}

func sorted(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}

// TestV2 makes a v2 inbox with the real tools, removes a message with
// public-inbox-learn rm, and reads exactly what public-inbox shows, in
// delivery order; then, from where it stopped, only what was added.
func TestV2(t *testing.T) {
	ib := pitest.New(t, 2)
	msgs := [][]byte{ib.Message("one@x", 1), ib.Message("two@x", 2), ib.Message("three@x", 3), ib.Message("four@x", 4)}
	// No Message-ID: public-inbox makes one up and adds it to the message.
	msgs = append(msgs, []byte("From: a@example.org\nTo: test@example.com\nSubject: anonymous\nDate: Mon, 1 Jan 2024 01:00:00 +0000\n\nno id\n"))
	for _, m := range msgs {
		ib.Deliver(t, m)
	}
	ib.Remove(t, msgs[1])
	want := ib.MessageIDs(t)
	if len(want) != 4 || slices.Contains(want, "two@x") {
		t.Fatalf("public-inbox shows %q, want 4 messages without two@x", want)
	}
	state := t.TempDir()
	for _, path := range []string{ib.Dir, ib.Epoch(0)} {
		got, r := readAll(t, path, pisource.Options{})
		if !slices.Equal(sorted(got), want) {
			t.Errorf("read %s: %q, want %q", path, got, want)
		}
		if got[0] != "one@x" || got[1] != "three@x" || got[2] != "four@x" {
			t.Errorf("read %s in the order %q, want delivery order", path, got)
		}
		wantKind := pisource.KindInbox
		if path != ib.Dir {
			wantKind = pisource.KindEpoch
		}
		if r.Kind() != wantKind {
			t.Errorf("Kind() of %s = %q, want %q", path, r.Kind(), wantKind)
		}
	}

	// Read with a state directory, then with new mail.
	got, r := readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if len(got) != 4 {
		t.Fatalf("read %q, want 4", got)
	}
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	got, r = readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if len(got) != 0 || r.Skipped() != 4 {
		t.Fatalf("after a checkpoint, read %q and skipped %d, want nothing read and 4 skipped", got, r.Skipped())
	}
	ib.Deliver(t, ib.Message("five@x", 5))
	got, r = readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if !slices.Equal(got, []string{"five@x"}) || r.Skipped() != 4 {
		t.Fatalf("after new mail, read %q, skipped %d; want [five@x], 4", got, r.Skipped())
	}
	// Not checkpointed (as if the import failed): read again next time.
	got, _ = readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if !slices.Equal(got, []string{"five@x"}) {
		t.Fatalf("without a checkpoint, read %q, want [five@x] again", got)
	}

	// A message removed after it was read: a warning, nothing read. One
	// added and removed since: neither.
	ib.Remove(t, msgs[0])
	six := ib.Message("six@x", 6)
	ib.Deliver(t, six)
	ib.Remove(t, six)
	var logs bytes.Buffer
	got, r = readAll(t, ib.Dir, pisource.Options{StateDir: state, Logger: slog.New(slog.NewTextHandler(&logs, nil))})
	if !slices.Equal(got, []string{"five@x"}) {
		t.Fatalf("after a removal, read %q, want [five@x]", got)
	}
	if n := strings.Count(logs.String(), "removed a message that an earlier import read"); n != 1 {
		t.Errorf("%d warnings of the removal of a message read before, want 1 (of one@x, not six@x); log:\n%s", n, logs.String())
	}
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}

	// public-inbox-purge rewrites the history: the epoch is read again,
	// without the purged message (its blob is emptied) nor the removed one.
	ib.Purge(t, msgs[3])
	want = ib.MessageIDs(t)
	got, r = readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if !slices.Equal(sorted(got), want) || r.Skipped() != 0 {
		t.Errorf("after a purge, read %q (skipped %d), want %q (0)", got, r.Skipped(), want)
	}
	if slices.Contains(got, "four@x") {
		t.Errorf("read the purged message: %q", got)
	}
}

// TestV1 reads a v1 repository made by the real tools, one message
// removed with public-inbox-learn rm.
func TestV1(t *testing.T) {
	ib := pitest.New(t, 1)
	msgs := [][]byte{ib.Message("one@x", 1), ib.Message("two@x", 2), ib.Message("three@x", 3)}
	for _, m := range msgs {
		ib.Deliver(t, m)
	}
	ib.Remove(t, msgs[0])
	want := ib.MessageIDs(t)
	if !slices.Equal(want, []string{"three@x", "two@x"}) {
		t.Fatalf("public-inbox shows %q", want)
	}
	state := t.TempDir()
	got, r := readAll(t, ib.Dir, pisource.Options{StateDir: state})
	if !slices.Equal(got, []string{"two@x", "three@x"}) {
		t.Errorf("read %q, want [two@x three@x]", got)
	}
	if r.Kind() != pisource.KindV1 {
		t.Errorf("Kind() = %q, want %q", r.Kind(), pisource.KindV1)
	}
	if err := r.Checkpoint(); err != nil {
		t.Fatal(err)
	}
	ib.Deliver(t, ib.Message("four@x", 4))
	if got, _ := readAll(t, ib.Dir, pisource.Options{StateDir: state}); !slices.Equal(got, []string{"four@x"}) {
		t.Errorf("after new mail, read %q, want [four@x]", got)
	}
}

func TestDetect(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"inbox/git/0.git", "bare/objects", "bare/refs", "notbare/objects", "maildir/cur"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "bare", "HEAD"), []byte("ref: refs/heads/master\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		path string
		want bool
	}{{"inbox", true}, {"bare", true}, {"notbare", false}, {"maildir", false}, {"missing", false}} {
		if got := pisource.Detect(filepath.Join(dir, tc.path)); got != tc.want {
			t.Errorf("Detect(%q) = %v, want %v", tc.path, got, tc.want)
		}
	}
}

func TestNotARepository(t *testing.T) {
	dir := t.TempDir()
	for _, d := range []string{"objects", "refs"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "HEAD"), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	r, err := pisource.Open(context.Background(), dir, pisource.Options{})
	if err == nil {
		r.Close()
		t.Fatalf("Open(a broken repository) = nil error, want one")
	}
	if !strings.Contains(err.Error(), dir) {
		t.Errorf("Open: %v, want the path named", err)
	}
	if _, err := pisource.Open(context.Background(), dir, pisource.Options{Git: "/nonexistent/git"}); !errors.Is(err, pisource.ErrNoGit) {
		t.Errorf("Open without git: %v, want ErrNoGit", err)
	}
}

// TestEpochs reads a v2 inbox of 11 epochs, made by public-inbox's
// importer told to start a new epoch after each message, in numeric order
// (git/10.git after git/9.git), without a message of epoch 0 that
// public-inbox-learn rm removed with a commit in the last epoch.
func TestEpochs(t *testing.T) {
	ib := pitest.New(t, 2, "-L", "basic")
	var mbox bytes.Buffer
	var want []string
	for i := range 11 {
		id := fmt.Sprintf("e%d@x", i)
		mbox.WriteString("From sender@example.org Mon Jan  1 00:00:00 2024\n")
		mbox.Write(ib.Message(id, i))
		mbox.WriteString("\n")
		want = append(want, id)
	}
	path := filepath.Join(t.TempDir(), "in.mbox")
	if err := os.WriteFile(path, mbox.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ib.ImportMbox(t, path, 100)
	if _, err := os.Stat(ib.Epoch(10)); err != nil {
		t.Fatalf("public-inbox made fewer than 11 epochs: %v", err)
	}
	got, _ := readAll(t, ib.Dir, pisource.Options{})
	if !slices.Equal(got, want) {
		t.Fatalf("read %q, want %q in order", got, want)
	}
	ib.Remove(t, ib.Message("e0@x", 0))
	if ids := ib.MessageIDs(t); slices.Contains(ids, "e0@x") || len(ids) != 10 {
		t.Fatalf("public-inbox shows %q, want 10 without e0@x", ids)
	}
	got, _ = readAll(t, ib.Dir, pisource.Options{})
	if !slices.Equal(got, want[1:]) {
		t.Errorf("after the removal, read %q, want %q", got, want[1:])
	}
	// Epoch 0 alone does not know of the removal in a later epoch.
	if got, _ := readAll(t, ib.Epoch(0), pisource.Options{}); !slices.Equal(got, want[:1]) {
		t.Errorf("epoch 0 alone: read %q, want %q", got, want[:1])
	}
}

// TestReadded: a message removed with public-inbox-learn rm and delivered
// again is in the inbox once more, and read once, where it came back.
func TestReadded(t *testing.T) {
	ib := pitest.New(t, 2, "-L", "basic")
	a, b := ib.Message("a@x", 1), ib.Message("b@x", 2)
	ib.Deliver(t, a)
	ib.Remove(t, a)
	ib.Deliver(t, b)
	ib.Deliver(t, a)
	want := ib.MessageIDs(t)
	if !slices.Equal(want, []string{"a@x", "b@x"}) {
		t.Fatalf("public-inbox shows %q, want [a@x b@x]", want)
	}
	if got, _ := readAll(t, ib.Dir, pisource.Options{}); !slices.Equal(got, []string{"b@x", "a@x"}) {
		t.Errorf("read %q, want [b@x a@x]", got)
	}
}

// manyMessages makes a v2 inbox of n messages with public-inbox's
// importer (one commit each, each stored as a delta against the one
// before, as a live inbox has them) and returns it and their Message-IDs
// in order.
func manyMessages(t *testing.T, n int) (*pitest.Inbox, []string) {
	t.Helper()
	ib := pitest.New(t, 2, "-L", "basic")
	var mbox bytes.Buffer
	var ids []string
	for i := range n {
		id := fmt.Sprintf("m%d@x", i)
		mbox.WriteString("From sender@example.org Mon Jan  1 00:00:00 2024\n")
		mbox.Write(ib.Message(id, i))
		// Bodies of a few KB, as mail has, so that the answers of git
		// cat-file fill its buffer and the pipe.
		mbox.WriteString(strings.Repeat(fmt.Sprintf("line of message %d\n", i), 100+i%50))
		mbox.WriteString("\n")
		ids = append(ids, id)
	}
	path := filepath.Join(t.TempDir(), "in.mbox")
	if err := os.WriteFile(path, mbox.Bytes(), 0o644); err != nil {
		t.Fatal(err)
	}
	ib.ImportMbox(t, path, 0)
	return ib, ids
}

// TestReadAhead reads more messages than git log lists ahead, with a
// reader slow at first (git waits for it) and then fast (it waits for
// git), from the packs and from git cat-file: every message, in order,
// whole.
func TestReadAhead(t *testing.T) {
	const n = 700 // more than twice pisource's read-ahead
	ib, want := manyMessages(t, n)
	for _, catFile := range []bool{false, true} {
		t.Run(fmt.Sprintf("cat-file=%v", catFile), func(t *testing.T) {
			r, err := pisource.Open(context.Background(), ib.Dir, pisource.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer r.Close()
			if catFile {
				pisource.NoPacks(r)
			}
			var got []string
			for {
				m, err := r.Next()
				if errors.Is(err, io.EOF) {
					break
				}
				if err != nil {
					t.Fatal(err)
				}
				if len(got) < n/2 {
					time.Sleep(time.Millisecond)
				}
				msg, err := mail.ReadMessage(bytes.NewReader(m.Raw))
				if err != nil {
					t.Fatalf("%s: %v", m.Where, err)
				}
				id := strings.Trim(msg.Header.Get("Message-ID"), "<>")
				body, _ := io.ReadAll(msg.Body)
				i := len(got)
				if wantBody := strings.Repeat(fmt.Sprintf("line of message %d\n", i), 100+i%50); !strings.HasSuffix(string(body), wantBody) {
					t.Fatalf("message %d (%s) has a body of %d bytes, want it to end with %d bytes of its lines", i, id, len(body), len(wantBody))
				}
				got = append(got, id)
			}
			if !slices.Equal(got, want) {
				t.Fatalf("read %d messages, want the %d in order; first difference at %d", len(got), len(want), pisource.FirstDiff(got, want))
			}
			if err := r.Close(); err != nil {
				t.Fatal(err)
			}
		})
	}
}

// rawAll reads every message of path, from its packs or with git
// cat-file alone, and returns their bytes in order.
func rawAll(t *testing.T, path string, catFile bool) [][]byte {
	t.Helper()
	r, err := pisource.Open(context.Background(), path, pisource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if catFile {
		pisource.NoPacks(r)
	}
	return drain(t, r)
}

// TestPacksAsGit: the messages built from the packs are git cat-file's,
// byte for byte, in the packs public-inbox writes (each message a delta
// on the one before), in the same repacked as lore's mirrors serve them
// (git repack -adf, deltas the other way), and with every object loose
// (none in a pack: all from git cat-file).
func TestPacksAsGit(t *testing.T) {
	ib, want := manyMessages(t, 300)
	for _, layout := range []struct {
		name string
		make func(t *testing.T, epoch string)
	}{
		{"fast-import", func(*testing.T, string) {}},
		{"repacked", func(t *testing.T, epoch string) {
			gitIn(t, epoch, nil, "repack", "-adfq", "--window=250", "--depth=50")
		}},
		{"loose", func(t *testing.T, epoch string) {
			packs, err := filepath.Glob(filepath.Join(epoch, "objects", "pack", "pack-*.pack"))
			if err != nil || len(packs) == 0 {
				t.Fatalf("no packs in %s: %v", epoch, err)
			}
			for _, p := range packs {
				b, err := os.ReadFile(p)
				if err != nil {
					t.Fatal(err)
				}
				for _, f := range []string{p, strings.TrimSuffix(p, ".pack") + ".idx"} {
					if err := os.Remove(f); err != nil {
						t.Fatal(err)
					}
				}
				gitIn(t, epoch, b, "unpack-objects", "-q")
			}
		}},
	} {
		t.Run(layout.name, func(t *testing.T) {
			layout.make(t, ib.Epoch(0))
			fromPacks, fromGit := rawAll(t, ib.Dir, false), rawAll(t, ib.Dir, true)
			if len(fromPacks) != len(want) || len(fromGit) != len(want) {
				t.Fatalf("read %d messages from the packs, %d from git cat-file; want %d", len(fromPacks), len(fromGit), len(want))
			}
			for i := range fromPacks {
				if !bytes.Equal(fromPacks[i], fromGit[i]) {
					t.Fatalf("message %d: %d bytes from the packs, %d from git cat-file, not the same", i, len(fromPacks[i]), len(fromGit[i]))
				}
			}
		})
	}
}

// TestCorruptPack: a pack whose bytes changed after the first messages is
// not read wrong: the reader asks git cat-file for what it cannot build,
// and git's answer (here an error) decides.
func TestCorruptPack(t *testing.T) {
	ib, _ := manyMessages(t, 100)
	good := rawAll(t, ib.Dir, true)
	packs, _ := filepath.Glob(filepath.Join(ib.Epoch(0), "objects", "pack", "pack-*.pack"))
	if len(packs) != 1 {
		t.Fatalf("%d packs, want 1", len(packs))
	}
	b, err := os.ReadFile(packs[0])
	if err != nil {
		t.Fatal(err)
	}
	// The 50th message's blob: its entry's offset, from the index.
	log, err := exec.Command("git", "--git-dir="+ib.Epoch(0), "log", "--reverse", "--format=", "--raw", "--no-abbrev").Output()
	if err != nil {
		t.Fatal(err)
	}
	var blobs []string
	for _, l := range strings.Split(string(log), "\n") {
		if f := strings.Fields(l); len(f) == 6 && f[5] == "m" {
			blobs = append(blobs, f[3])
		}
	}
	idx, err := os.Open(strings.TrimSuffix(packs[0], ".pack") + ".idx")
	if err != nil {
		t.Fatal(err)
	}
	defer idx.Close()
	cmd := exec.Command("git", "show-index")
	cmd.Stdin = idx
	index, err := cmd.Output()
	if err != nil || len(blobs) != 100 {
		t.Fatalf("git show-index: %v; %d blobs", err, len(blobs))
	}
	off := -1
	for _, l := range strings.Split(string(index), "\n") {
		if f := strings.Fields(l); len(f) >= 2 && f[1] == blobs[50] {
			fmt.Sscan(f[0], &off)
		}
	}
	if off < 0 {
		t.Fatalf("blob %s not in the index", blobs[50])
	}
	for i := off + 8; i < off+24; i++ {
		b[i] ^= 0x5a
	}
	os.Chmod(packs[0], 0o644)
	if err := os.WriteFile(packs[0], b, 0o444); err != nil {
		t.Fatal(err)
	}
	var logged bytes.Buffer
	r, err := pisource.Open(context.Background(), ib.Dir, pisource.Options{Logger: slog.New(slog.NewTextHandler(&logged, nil))})
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	// Messages 0-49 are read whole; the 50th fails (git cannot read it
	// either); any message read after it is read right.
	i, whole := 0, 0
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			break // git cat-file died of it
		}
		if m.Err == nil {
			if !bytes.Equal(m.Raw, good[i]) {
				t.Fatalf("message %d read wrong (%d bytes, want %d)", i, len(m.Raw), len(good[i]))
			}
			if i == whole {
				whole++
			}
		}
		i++
	}
	if whole != 50 {
		t.Errorf("read %d messages whole before the first failure, want 50", whole)
	}
	if !strings.Contains(logged.String(), "asking git cat-file") {
		t.Errorf("log %q, want a warning that git cat-file was asked", logged.String())
	}
}

// gitIn runs git in the git directory dir, with stdin.
func gitIn(t *testing.T, dir string, stdin []byte, args ...string) {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + dir}, args...)...)
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("git %s: %v\n%s", strings.Join(args, " "), err, out)
	}
}

// TestGitCutOff: git cat-file stops answering (the process killed, a disk
// error), for the messages it reads (here all: no packs): Next says so,
// without hanging, and Close returns.
func TestGitCutOff(t *testing.T) {
	ib, _ := manyMessages(t, 300)
	real, err := exec.LookPath("git")
	if err != nil {
		t.Skip("no git")
	}
	// A git that runs the real one, but whose cat-file stops after 40
	// requests, as if killed.
	wrapper := filepath.Join(t.TempDir(), "git")
	script := "#!/bin/sh\nfor a; do\n  if [ \"$a\" = cat-file ]; then sed -u 40q | \"" + real + "\" \"$@\"; exit 0; fi\ndone\nexec \"" + real + "\" \"$@\"\n"
	if err := os.WriteFile(wrapper, []byte(script), 0o755); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	r, err := pisource.Open(ctx, ib.Dir, pisource.Options{Git: wrapper})
	if err != nil {
		t.Fatal(err)
	}
	pisource.NoPacks(r)
	n := 0
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			t.Fatalf("Next = io.EOF after %d messages, want an error: git's answers were cut off", n)
		}
		if err != nil {
			if ctx.Err() != nil {
				t.Fatalf("Next: %v: it waited for git until the test's deadline", err)
			}
			if !strings.Contains(err.Error(), "git cat-file") || !strings.Contains(err.Error(), ib.Epoch(0)) {
				t.Errorf("Next: %v, want an error naming git cat-file and the epoch", err)
			}
			break
		}
		if m.Err != nil {
			t.Fatalf("%s: %v", m.Where, m.Err)
		}
		n++
	}
	if n != 40 {
		t.Errorf("read %d messages before the cut, want 40", n)
	}
	if err := r.Close(); err != nil {
		t.Errorf("Close: %v", err)
	}
}
