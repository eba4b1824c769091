package piexport

import (
	"bytes"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	_ "modernc.org/sqlite" // to read public-inbox's msgmap.sqlite3

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/lockfile"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
)

// needTools skips t without git and public-inbox-index, unless $CI is
// "true": CI installs them (scripts/install-test-deps.sh), so there a
// missing one fails the test.
func needTools(t *testing.T) {
	t.Helper()
	for _, tool := range []string{"git", "public-inbox-index"} {
		if _, err := exec.LookPath(tool); err != nil {
			msg := tool + " is not installed (apt-get install git public-inbox); skipping the tests that check the export with public-inbox's own tools"
			if os.Getenv("CI") == "true" {
				t.Fatal(msg + ", but CI=true: CI must install it")
			}
			t.Skip(msg)
		}
	}
}

// piIndex runs the real public-inbox-index on the inbox at dir (no
// configuration needed: inbox.lock says it is a v2 inbox) and returns
// the Message-IDs it indexed, sorted: its msgmap, from which removals
// are deleted.
func piIndex(t *testing.T, dir string) []string {
	t.Helper()
	home := t.TempDir()
	cmd := exec.Command("public-inbox-index", "-L", "basic", dir)
	cmd.Env = append(os.Environ(), "HOME="+home, "PI_CONFIG=/dev/null", "TZ=UTC")
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("public-inbox-index %s: %v\n%s", dir, err, out)
	}
	if bytes.Contains(out, []byte("E: ")) {
		t.Errorf("public-inbox-index %s complained:\n%s", dir, out)
	}
	db, err := sql.Open("sqlite", "file:"+filepath.Join(dir, "msgmap.sqlite3")+"?mode=ro")
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

func gitOut(t *testing.T, gitDir string, args ...string) string {
	t.Helper()
	cmd := exec.Command("git", append([]string{"--git-dir=" + gitDir}, args...)...)
	cmd.Env = append(gitEnv(), "GIT_AUTHOR_NAME=t", "GIT_AUTHOR_EMAIL=t@example.org", "GIT_COMMITTER_NAME=t", "GIT_COMMITTER_EMAIL=t@example.org")
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("git %s: %v", strings.Join(args, " "), err)
	}
	return strings.TrimSpace(string(out))
}

func msg(id string, n int, extra string) []byte {
	mid := ""
	if id != "" {
		mid = "Message-ID: <" + id + ">\n"
	}
	return fmt.Appendf(nil, "From: \"Sender %d\" <s%d@example.org>\nTo: list@example.org\nSubject: message %d\nDate: Tue, 2 Jan 2024 10:%02d:00 +0100\n%s\nBody %d.%s\n", n, n, n, n%60, mid, n, extra)
}

func export(t *testing.T, a *archivetest.Archive, opts Options) []ListResult {
	t.Helper()
	a.Sync()
	res, err := Export(t.Context(), a.Store, a.Catalog, opts)
	if err != nil {
		t.Fatalf("Export = %v", err)
	}
	return res
}

func added(res []ListResult) (n int) {
	for _, r := range res {
		n += r.Added
	}
	return n
}

// TestExport exports a small archive with hostile messages and checks
// what public-inbox-index makes of it, and the commits as public-inbox
// writes them.
func TestExport(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	huge := "\n" + strings.Repeat("a line of a huge body, ", 400_000) // 9 MB
	cns := a.Put("l",
		msg("one@example.org", 1, ""),
		msg("", 2, ""), // no Message-ID
		msg("dup@example.org", 3, ""),
		msg("dup@example.org", 4, " Another message under the same Message-ID."),
		msg("huge@example.org", 5, huge),
		[]byte("Subject: no sender, no date\nMessage-ID: <bare@example.org>\n\nbody\n"),
	)
	out := t.TempDir()
	res := export(t, a, Options{Out: out})
	if len(res) != 1 || res[0].Added != 6 || res[0].Epochs != 1 {
		t.Fatalf("Export = %+v, want 6 messages added to list l in 1 epoch", res)
	}
	dir := filepath.Join(out, "l")
	ids := piIndex(t, dir)
	if len(ids) != 6 {
		t.Fatalf("public-inbox-index indexed %d messages %q, want 6", len(ids), ids)
	}
	for _, want := range []string{"one@example.org", "dup@example.org", "huge@example.org", "bare@example.org"} {
		if !slices.Contains(ids, want) {
			t.Errorf("public-inbox-index indexed %q, want %s among them", ids, want)
		}
	}
	// Made ones have public-inbox's form: date, digest, "@z".
	var made int
	for _, id := range ids {
		if strings.HasSuffix(id, "@z") {
			made++
			if !strings.HasPrefix(id, "20240102") {
				t.Errorf("made Message-ID %q, want it to begin with the message's date 20240102", id)
			}
		}
	}
	if made != 2 {
		t.Errorf("made %d Message-IDs (%q), want 2: the message without one and the second copy of dup@", made, ids)
	}

	e0 := epochDir(dir, 0)
	// The first message's commit, as public-inbox writes it.
	log := gitOut(t, e0, "log", "--reverse", "--format=%an|%ae|%ad|%cn|%cd|%s", "--date=raw")
	first := strings.Split(log, "\n")[0]
	if want := "Sender 1|s1@example.org|1704186060 +0100|l|1704186060 +0100|message 1"; first != want {
		t.Errorf("first commit = %q, want %q", first, want)
	}
	if got := gitOut(t, e0, "ls-tree", "--name-only", "HEAD"); got != "m" {
		t.Errorf("tree of the last commit = %q, want m alone", got)
	}
	// Message 1's blob is its stored bytes, unchanged; message 2's has
	// the made Message-ID added at the end of its header.
	if got := gitOut(t, e0, "show", "HEAD~5:m"); got+"\n" != string(a.Get(cns[0])) {
		t.Errorf("blob of message 1 =\n%s\nwant the stored bytes\n%s", got, a.Get(cns[0]))
	}
	two := gitOut(t, e0, "show", "HEAD~4:m")
	if !strings.Contains(two, "Date: Tue, 2 Jan 2024 10:02:00 +0100\nMessage-ID: <20240102090200.") || !strings.HasSuffix(two, "@z>\n\nBody 2.") {
		t.Errorf("blob of message 2 (no Message-ID) =\n%s\nwant a made Message-ID ending its header", two)
	}
	if got := gitOut(t, e0, "log", "-1", "--format=%an|%ae|%s"); got != "|"+"|no sender, no date" {
		t.Errorf("commit of a message without From = %q, want empty name and address", got)
	}
	for _, f := range []string{"inbox.lock", "description", "all.git/config", stateFile} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("inbox has no %s: %v", f, err)
		}
	}
	alt, _ := os.ReadFile(filepath.Join(dir, "all.git/objects/info/alternates"))
	if string(alt) != "../../git/0.git/objects\n" {
		t.Errorf("all.git alternates = %q", alt)
	}
	// all.git reads every epoch's objects.
	if got := gitOut(t, filepath.Join(dir, "all.git"), "cat-file", "-t", gitOut(t, e0, "rev-parse", "HEAD")); got != "commit" {
		t.Errorf("all.git cannot read epoch 0's commits: %q", got)
	}
}

// TestIncremental: a run again writes only what is new; with nothing
// new, nothing.
func TestIncremental(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	for i := range 5 {
		a.Put("l", msg(fmt.Sprintf("m%d@example.org", i), i, ""))
	}
	out := t.TempDir()
	if n := added(export(t, a, Options{Out: out})); n != 5 {
		t.Fatalf("first run added %d, want 5", n)
	}
	e0 := epochDir(filepath.Join(out, "l"), 0)
	head := gitOut(t, e0, "rev-parse", "HEAD")
	if n := added(export(t, a, Options{Out: out})); n != 0 {
		t.Errorf("a run with nothing new added %d", n)
	}
	if h := gitOut(t, e0, "rev-parse", "HEAD"); h != head {
		t.Errorf("a run with nothing new moved the branch from %s to %s", head, h)
	}
	for i := 5; i < 8; i++ {
		a.Put("l", msg(fmt.Sprintf("m%d@example.org", i), i, ""))
	}
	if n := added(export(t, a, Options{Out: out})); n != 3 {
		t.Errorf("second run added %d, want the 3 new", n)
	}
	if got := gitOut(t, e0, "rev-list", "--count", head+"..HEAD"); got != "3" {
		t.Errorf("second run wrote %s commits, want 3", got)
	}
	if ids := piIndex(t, filepath.Join(out, "l")); len(ids) != 8 {
		t.Errorf("public-inbox-index indexed %d messages, want 8: %q", len(ids), ids)
	}
}

// TestRemoval: a message removed from the archive, or moved to another
// list, after an export, leaves the inbox as public-inbox-learn rm
// takes one out; public-inbox-index no longer has it.
func TestRemoval(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	cns := a.Put("l", msg("a@example.org", 1, ""), msg("b@example.org", 2, ""), msg("c@example.org", 3, ""))
	out := t.TempDir()
	export(t, a, Options{Out: out})
	dir := filepath.Join(out, "l")
	if ids := piIndex(t, dir); len(ids) != 3 {
		t.Fatalf("indexed %q, want 3", ids)
	}
	a.Remove(cns[1])
	n, _ := callnumber.Parse(cns[2])
	if _, err := a.Store.Move(t.Context(), n, "other"); err != nil {
		t.Fatal(err)
	}
	now := time.Date(2025, 3, 4, 5, 6, 7, 0, time.UTC)
	res := export(t, a, Options{Out: out, Now: func() time.Time { return now }})
	got := map[string]ListResult{}
	for _, r := range res {
		got[r.List] = r
	}
	if got["l"].Removed != 2 || got["l"].Added != 0 || got["other"].Added != 1 {
		t.Fatalf("Export = %+v, want 2 removals in l and 1 message added to other", res)
	}
	e0 := epochDir(dir, 0)
	if tree := gitOut(t, e0, "ls-tree", "--name-only", "HEAD"); tree != "d" {
		t.Errorf("tree after a removal = %q, want d alone", tree)
	}
	if s := gitOut(t, e0, "log", "-1", "--format=%s|%an|%ad", "--date=raw"); s != "rm|l|1741064767 +0000" {
		t.Errorf("removal commit = %q, want public-inbox's rm by the list, now", s)
	}
	if d := gitOut(t, e0, "show", "HEAD:d"); d+"\n" != string(msg("c@example.org", 3, "")) {
		t.Errorf("d = %q, want the removed message", d)
	}
	if ids := piIndex(t, dir); !slices.Equal(ids, []string{"a@example.org"}) {
		t.Errorf("after removal public-inbox-index has %q, want a@example.org alone", ids)
	}
	if ids := piIndex(t, filepath.Join(out, "other")); !slices.Equal(ids, []string{"c@example.org"}) {
		t.Errorf("list other has %q, want the moved message", ids)
	}
	// Nothing new: nothing written, no removal twice.
	if res := export(t, a, Options{Out: out}); res[0].Removed+res[1].Removed+added(res) != 0 {
		t.Errorf("a run with nothing new = %+v", res)
	}
	// The same Message-ID, freed by the removal, is taken again by a
	// new message, as public-inbox gives it back.
	a.Put("l", msg("b@example.org", 9, " sent again"))
	export(t, a, Options{Out: out})
	if ids := piIndex(t, dir); !slices.Equal(ids, []string{"a@example.org", "b@example.org"}) {
		t.Errorf("after a new message under a removed one's Message-ID: %q", ids)
	}
}

// TestEpochs: with a small epoch size the messages go into several
// epochs, which all.git borrows and public-inbox-index reads in order.
func TestEpochs(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	var want []string
	for i := range 12 {
		id := fmt.Sprintf("e%02d@example.org", i)
		want = append(want, id)
		a.Put("l", msg(id, i, ""))
	}
	out := t.TempDir()
	size := int64(len(msg(want[0], 0, ""))) * 4
	res := export(t, a, Options{Out: out, EpochSize: size, Batch: 3})
	if res[0].Epochs != 3 {
		t.Fatalf("Export = %+v, want 3 epochs of 4 messages", res)
	}
	dir := filepath.Join(out, "l")
	for e := range 3 {
		if n := gitOut(t, epochDir(dir, e), "rev-list", "--count", "HEAD"); n != "4" {
			t.Errorf("epoch %d has %s commits, want 4", e, n)
		}
	}
	alt, _ := os.ReadFile(filepath.Join(dir, "all.git/objects/info/alternates"))
	if string(alt) != "../../git/2.git/objects\n../../git/1.git/objects\n../../git/0.git/objects\n" {
		t.Errorf("all.git alternates = %q", alt)
	}
	// More messages go on in the newest epoch, then a new one.
	for i := 12; i < 15; i++ {
		id := fmt.Sprintf("e%02d@example.org", i)
		want = append(want, id)
		a.Put("l", msg(id, i, ""))
	}
	res = export(t, a, Options{Out: out, EpochSize: size})
	if res[0].Added != 3 || res[0].Epochs != 4 {
		t.Errorf("second run = %+v, want 3 added, 4 epochs", res)
	}
	if ids := piIndex(t, dir); !slices.Equal(ids, want) {
		t.Errorf("public-inbox-index indexed %q, want %q", ids, want)
	}
}

// TestCutShort: an export stopped after git moved a branch and before
// the state said so is completed by the next run from the commits
// themselves: no message written twice, none lost.
func TestCutShort(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	var want []string
	put := func(from, to int) {
		for i := from; i < to; i++ {
			id := fmt.Sprintf("k%02d@example.org", i)
			want = append(want, id)
			a.Put("l", msg(id, i, ""))
		}
	}
	put(0, 4)
	put(4, 5)
	a.Put("l", msg("k00@example.org", 99, " a second message under k00")) // its Message-ID is made
	out := t.TempDir()
	size := int64(len(msg("k00@example.org", 0, ""))) * 3
	killed := errors.New("killed")
	calls := 0
	a.Sync()
	_, err := Export(t.Context(), a.Store, a.Catalog, Options{Out: out, EpochSize: size, Batch: 2, afterImport: func() error {
		if calls++; calls == 2 {
			return killed
		}
		return nil
	}})
	if !errors.Is(err, killed) {
		t.Fatalf("Export = %v, want the kill", err)
	}
	// A removal, cut short too, after the state lost track.
	cns := a.Put("l", msg("k05@example.org", 5, ""))
	res := export(t, a, Options{Out: out, EpochSize: size, Batch: 2})
	// The batch killed held message 3 alone: the epoch was full after it.
	if res[0].Recovered != 1 || res[0].Added != 4 {
		t.Errorf("run after the kill = %+v, want the commit of the batch cut short recovered and the 4 others added", res)
	}
	a.Remove(cns[0])
	calls = 0
	a.Sync()
	if _, err := Export(t.Context(), a.Store, a.Catalog, Options{Out: out, EpochSize: size, afterImport: func() error { return killed }}); !errors.Is(err, killed) {
		t.Fatalf("Export = %v, want the kill", err)
	}
	res = export(t, a, Options{Out: out, EpochSize: size})
	if res[0].Recovered != 1 || res[0].Removed != 0 || res[0].Added != 0 {
		t.Errorf("run after the kill of a removal = %+v, want the removal recovered and nothing written", res)
	}
	dir := filepath.Join(out, "l")
	total := 0
	for e := 0; e < res[0].Epochs; e++ {
		var n int
		fmt.Sscan(gitOut(t, epochDir(dir, e), "rev-list", "--count", "HEAD"), &n)
		total += n
	}
	if total != 8 {
		t.Errorf("the epochs hold %d commits, want 8 (7 messages, 1 removal)", total)
	}
	ids := piIndex(t, dir)
	if len(ids) != 6 || !slices.Contains(ids, "k00@example.org") || slices.Contains(ids, "k05@example.org") {
		t.Errorf("public-inbox-index indexed %q, want k00..k04 and a made one", ids)
	}
}

// TestLocked: a second export into the same directory at once is
// refused, naming what holds it.
func TestLocked(t *testing.T) {
	a := archivetest.New(t)
	out := t.TempDir()
	l, err := lockfile.Take(filepath.Join(out, ".chibrary-export.lock"), "an export")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Release()
	if _, err := Export(t.Context(), a.Store, a.Catalog, Options{Out: out}); !errors.Is(err, ErrLocked) || !strings.Contains(err.Error(), "held by an export by ") {
		t.Errorf("Export while another runs = %v, want ErrLocked naming the holder", err)
	}
}

// TestForeign: an export refuses to write on an epoch whose history is
// not the one it wrote: a commit of someone else on it, or the history
// rewritten (public-inbox-purge).
func TestForeign(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	a.Put("l", msg("f1@example.org", 1, ""), msg("f2@example.org", 2, ""))
	for _, tt := range []struct {
		name   string
		change func(gd string)
	}{
		{"commit added", func(gd string) {
			tree := gitOut(t, gd, "rev-parse", "HEAD^{tree}")
			c := gitOut(t, gd, "commit-tree", "-p", "HEAD", "-m", "someone else", tree)
			gitOut(t, gd, "update-ref", branch, c)
		}},
		{"history rewritten", func(gd string) {
			tree := gitOut(t, gd, "rev-parse", "HEAD^{tree}")
			c := gitOut(t, gd, "commit-tree", "-m", "purged", tree)
			gitOut(t, gd, "update-ref", branch, c)
		}},
		{"branch deleted", func(gd string) { gitOut(t, gd, "update-ref", "-d", branch) }},
	} {
		t.Run(tt.name, func(t *testing.T) {
			out := t.TempDir()
			export(t, a, Options{Out: out})
			gd := epochDir(filepath.Join(out, "l"), 0)
			tt.change(gd)
			if _, err := Export(t.Context(), a.Store, a.Catalog, Options{Out: out}); !errors.Is(err, ErrForeign) {
				t.Errorf("Export = %v, want ErrForeign", err)
			}
		})
	}
}

// TestStateLost: with its state file deleted, an export reads its
// progress back from git, every epoch's commits, and writes nothing
// twice.
func TestStateLost(t *testing.T) {
	needTools(t)
	a := archivetest.New(t)
	cns := a.Put("l", msg("s1@example.org", 1, ""), msg("s2@example.org", 2, ""), msg("s1@example.org", 3, " differs"), msg("", 4, ""), msg("s5@example.org", 5, ""))
	out := t.TempDir()
	size := int64(len(msg("s1@example.org", 1, ""))) * 2
	export(t, a, Options{Out: out, EpochSize: size})
	a.Remove(cns[1])
	res := export(t, a, Options{Out: out, EpochSize: size})
	if res[0].Removed != 1 || res[0].Epochs != 3 {
		t.Fatalf("Export = %+v, want a removal and 3 epochs", res)
	}
	dir := filepath.Join(out, "l")
	before := piIndex(t, dir)
	if err := os.Remove(filepath.Join(dir, stateFile)); err != nil {
		t.Fatal(err)
	}
	res = export(t, a, Options{Out: out, EpochSize: size})
	if res[0].Recovered != 6 || res[0].Added+res[0].Removed != 0 {
		t.Fatalf("Export without its state = %+v, want the 6 commits read back and nothing written", res)
	}
	a.Put("l", msg("s1@example.org", 6, " a third one"), msg("s6@example.org", 7, ""))
	res = export(t, a, Options{Out: out, EpochSize: size})
	if res[0].Added != 2 {
		t.Errorf("Export = %+v, want the 2 new added", res)
	}
	after := piIndex(t, dir)
	if len(after) != len(before)+2 || !slices.Contains(after, "s6@example.org") {
		t.Errorf("indexed %q after, %q before: want the two new ones more", after, before)
	}
}
