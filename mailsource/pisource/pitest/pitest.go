// Package pitest makes public-inbox repositories with the real
// public-inbox tools (Debian's public-inbox: public-inbox-init, -mda,
// -learn, -purge, -index), for tests and benchmarks. Without the tools a
// test that asks for them is skipped.
package pitest

import (
	"bytes"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"

	_ "modernc.org/sqlite" // to read public-inbox's msgmap.sqlite3
)

// tools are the programs New needs.
var tools = []string{"git", "public-inbox-init", "public-inbox-mda", "public-inbox-learn", "public-inbox-purge", "public-inbox-index"}

// Available says why the tools cannot be used ("" when they can).
func Available() string {
	for _, t := range tools {
		if _, err := exec.LookPath(t); err != nil {
			return t + " is not installed (apt-get install public-inbox)"
		}
	}
	return ""
}

// T is what New needs of a test (T has it), so that a benchmark
// program can make inboxes too.
type T interface {
	Helper()
	Fatalf(format string, args ...any)
	Skip(args ...any)
	TempDir() string
}

// Inbox is a public-inbox inbox in a temporary directory, with its own
// configuration file ($PI_CONFIG) and $HOME.
type Inbox struct {
	Dir     string // the inbox: a v2 inbox directory, or a v1 bare repository
	Version int
	Name    string
	Addr    string
	env     []string
}

// New makes an empty inbox of the given version (1 or 2) under
// t.TempDir(), or skips t when the tools are missing (fails it with
// CI=true: scripts/install-test-deps.sh installs them); init are more
// arguments of public-inbox-init (e.g. "-L", "basic": no Xapian index).
func New(t T, version int, init ...string) *Inbox {
	t.Helper()
	if why := Available(); why != "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("%s, but CI=true: CI must install it", why)
		}
		t.Skip(why)
	}
	home := t.TempDir()
	ib := &Inbox{Dir: filepath.Join(home, "inbox"), Version: version, Name: "test", Addr: "test@example.com"}
	cfg := filepath.Join(home, "pi_config")
	ib.env = append(os.Environ(), "HOME="+home, "PI_CONFIG="+cfg, "ORIGINAL_RECIPIENT="+ib.Addr, "TZ=UTC")
	// No spam filter: public-inbox-mda runs spamc by default.
	if err := os.WriteFile(cfg, []byte("[publicinboxmda]\n\tspamcheck = none\n"), 0o644); err != nil {
		t.Fatalf("%v", err)
	}
	args := append([]string{fmt.Sprintf("-V%d", version)}, init...)
	ib.run(t, nil, "public-inbox-init", append(args, ib.Name, ib.Dir, "http://example.com/"+ib.Name, ib.Addr)...)
	return ib
}

func (ib *Inbox) run(t T, stdin []byte, name string, args ...string) {
	t.Helper()
	cmd := exec.CommandContext(context.Background(), name, args...)
	cmd.Env = ib.env
	cmd.Stdin = bytes.NewReader(stdin)
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
	}
}

// Deliver delivers one message with public-inbox-mda.
func (ib *Inbox) Deliver(t T, raw []byte) {
	t.Helper()
	ib.run(t, raw, "public-inbox-mda", "--no-precheck")
}

// Remove removes a message with public-inbox-learn rm.
func (ib *Inbox) Remove(t T, raw []byte) {
	t.Helper()
	ib.run(t, raw, "public-inbox-learn", "rm")
}

// Purge removes a message with public-inbox-purge, which rewrites the
// history (v2 only).
func (ib *Inbox) Purge(t T, raw []byte) {
	t.Helper()
	ib.run(t, raw, "public-inbox-purge", ib.Dir)
}

// Epoch is the git directory of epoch n of a v2 inbox.
func (ib *Inbox) Epoch(n int) string {
	return filepath.Join(ib.Dir, "git", fmt.Sprintf("%d.git", n))
}

// MessageIDs are the Message-IDs public-inbox shows, sorted, without
// angle brackets: its msgmap after public-inbox-index (article numbers to
// Message-IDs, from which removals are deleted).
func (ib *Inbox) MessageIDs(t T) []string {
	t.Helper()
	ib.run(t, nil, "public-inbox-index", ib.Dir)
	path := filepath.Join(ib.Dir, "msgmap.sqlite3")
	if ib.Version == 1 {
		path = filepath.Join(ib.Dir, "public-inbox", "msgmap.sqlite3")
	}
	db, err := sql.Open("sqlite", "file:"+path+"?mode=ro")
	if err != nil {
		t.Fatalf("%v", err)
	}
	defer db.Close()
	rows, err := db.Query("SELECT mid FROM msgmap")
	if err != nil {
		t.Fatalf("cannot read %s: %v", path, err)
	}
	defer rows.Close()
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			t.Fatalf("%v", err)
		}
		ids = append(ids, id)
	}
	if err := rows.Err(); err != nil {
		t.Fatalf("%v", err)
	}
	slices.Sort(ids)
	return ids
}

// Message is a small message with the given Message-ID (without angle
// brackets) and number n, addressed to the inbox.
func (ib *Inbox) Message(id string, n int) []byte {
	return fmt.Appendf(nil, "From: Sender %d <s%d@example.org>\nTo: %s\nSubject: message %d\nDate: Mon, 1 Jan 2024 00:%02d:00 +0000\nMessage-ID: <%s>\n\nBody of message %d.\n",
		n, n, ib.Addr, n, n%60, id, n)
}

// ImportMbox imports an mboxrd file (plain, not compressed) into the inbox
// with public-inbox's own importer (PublicInbox::InboxWritable, as its
// import_mbox and scripts/import_vger_from_mbox do): one commit per
// message, as a live inbox has them. A v2 inbox starts a new epoch once
// one holds rotateBytes of messages (0: public-inbox's 2.5 GiB).
func (ib *Inbox) ImportMbox(t T, mbox string, rotateBytes int) {
	t.Helper()
	ib.run(t, nil, "perl", "-MPublicInbox::Config", "-MPublicInbox::InboxWritable", "-MPublicInbox::MboxReader", "-e", `
my ($name, $path, $rotate) = @ARGV;
my $ibx = PublicInbox::Config->new->lookup_name($name) or die "no inbox $name\n";
$ibx = PublicInbox::InboxWritable->new($ibx);
open my $fh, '<', $path or die "cannot open $path: $!\n";
my $im = $ibx->importer(1);
$im->{rotate_bytes} = $rotate if $rotate;
my $cb = PublicInbox::MboxReader->reads('mboxrd') or die;
$cb->(undef, $fh, sub { $_[1]->add($_[0]) }, $im);
$im->done;
`, ib.Name, mbox, fmt.Sprint(rotateBytes))
}
