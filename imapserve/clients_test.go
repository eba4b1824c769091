package imapserve

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailwire"
	"github.com/chibrary/chibrary/store"
)

// Real clients against the shared corpus: Python's imaplib and
// fetchmail download the whole list, every message byte for byte, and
// imaplib idles while a message is stored.

// corpusDir holds the archive of the corpus the tests share, built
// once; TestMain removes it.
var corpusDir struct {
	once sync.Once
	dir  string
}

// corpusArchive opens the archive of the shared corpus's first
// corpusLimit messages in list linux-mips (or skips), built by the
// first test that asks; byUID maps each UID to its call number.
func corpusArchive(t *testing.T) (*archivetest.Archive, map[uint32]string) {
	t.Helper()
	testcorpus.Path(t)
	corpusDir.once.Do(func() {
		dir, err := os.MkdirTemp("", "imapserve-corpus")
		if err != nil {
			t.Fatal(err)
		}
		a := archivetest.Open(t, dir)
		a.PutCorpus("linux-mips", corpusLimit)
		a.Sync()
		a.Close()
		corpusDir.dir = dir
	})
	if corpusDir.dir == "" {
		t.Fatal("the corpus archive could not be built")
	}
	a := archivetest.Open(t, corpusDir.dir)
	es, err := a.Catalog.Entries(t.Context(), "linux-mips", 1, 1<<32-1, 1<<20, false)
	if err != nil {
		t.Fatal(err)
	}
	byUID := map[uint32]string{}
	for _, e := range es {
		byUID[e.Num] = e.CallNumber
	}
	return a, byUID
}

// python3 returns the interpreter, or skips.
func python3(t *testing.T) string {
	t.Helper()
	p, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	return p
}

const imaplibFetch = `
import imaplib, os, re, sys
host, port, box, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
M = imaplib.IMAP4(host, port)
M.login("reader", "any password")
typ, data = M.select(box, readonly=True)
assert typ == "OK", (typ, data)
exists = int(data[0])
typ, data = M.uid("FETCH", "1:*", "(UID RFC822.SIZE BODY.PEEK[])")
assert typ == "OK", (typ, data[:1])
n = 0
for item in data:
    if not isinstance(item, tuple):
        continue
    meta, body = item
    uid = int(re.search(rb"UID (\d+)", meta).group(1))
    size = int(re.search(rb"RFC822\.SIZE (\d+)", meta).group(1))
    if size != len(body):
        sys.exit("UID %d: RFC822.SIZE %d, %d bytes" % (uid, size, len(body)))
    with open(os.path.join(out, "%d.eml" % uid), "wb") as f:
        f.write(body)
    n += 1
M.logout()
print(exists, n)
`

func TestMain(m *testing.M) {
	code := m.Run()
	if corpusDir.dir != "" {
		os.RemoveAll(corpusDir.dir)
	}
	os.Exit(code)
}

// TestImaplibCorpus: Python's imaplib downloads the whole list with one
// UID FETCH 1:* and gets every message as stored, with CRLF line ends.
func TestImaplibCorpus(t *testing.T) {
	py := python3(t)
	a, byUID := corpusArchive(t)
	addr := serve(t, a, Options{})
	host, port, _ := strings.Cut(addr, ":")
	out := t.TempDir()
	script := filepath.Join(t.TempDir(), "fetch.py")
	os.WriteFile(script, []byte(imaplibFetch), 0o644)
	cmd := exec.CommandContext(t.Context(), py, script, host, port, "linux-mips", out)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("imaplib: %v\n%s", err, res)
	}
	if got, want := strings.TrimSpace(string(res)), fmt.Sprintf("%d %d", len(byUID), len(byUID)); got != want {
		t.Fatalf("imaplib says %q (EXISTS, messages fetched), want %q", got, want)
	}
	for uid, cn := range byUID {
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.eml", uid)))
		if err != nil {
			t.Fatal(err)
		}
		raw := a.Get(cn)
		if want := mailwire.AppendCRLF(nil, raw); !bytes.Equal(got, want) {
			t.Errorf("UID %d (%s): imaplib got %d bytes, not the %d of the stored message with CRLF line ends", uid, cn, len(got), len(want))
		}
		if store.DigestOf(got) != store.DigestOf(raw) {
			t.Errorf("UID %d (%s): digest differs from the stored message's", uid, cn)
		}
	}
	t.Logf("imaplib fetched %d messages byte for byte", len(byUID))
}

const imaplibIdle = `
import imaplib, sys
host, port, box = sys.argv[1], int(sys.argv[2]), sys.argv[3]
M = imaplib.IMAP4(host, port)
M.login("reader", "any password")
typ, data = M.select(box, readonly=True)
exists = int(data[0])
tag = M._new_tag()
M.send(tag + b" IDLE\r\n")
line = M.readline()
assert line.startswith(b"+"), line
print("IDLING", exists, flush=True)
while True:
    line = M.readline()
    if not line:
        sys.exit("connection closed")
    if line.endswith(b"EXISTS\r\n"):
        print(line.decode().strip(), flush=True)
        break
M.send(b"DONE\r\n")
while not M.readline().startswith(tag):
    pass
M.logout()
`

// TestImaplibIdle: imaplib idles on the list while a message is stored;
// the store's change feed brings it into the catalog (the resolver's
// follower), and the IMAP server announces it (EXISTS). The time from
// the store's answer to imaplib's line is logged.
func TestImaplibIdle(t *testing.T) {
	py := python3(t)
	a := archivetest.New(t)
	for i := range 3 {
		a.Put("linux-mips", mail(i, "before"))
	}
	a.Sync()
	ctx, cancel := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Catalog.Follow(ctx, a.Store, catalog.FollowOptions{}) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	addr := serve(t, a, Options{PollInterval: DefaultPollInterval})
	host, port, _ := strings.Cut(addr, ":")
	script := filepath.Join(t.TempDir(), "idle.py")
	os.WriteFile(script, []byte(imaplibIdle), 0o644)
	cmd := exec.CommandContext(t.Context(), py, script, host, port, "linux-mips")
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string)
	go func() {
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			lines <- sc.Text()
		}
		close(lines)
	}()
	next := func() string {
		select {
		case l := <-lines:
			return l
		case <-time.After(30 * time.Second):
			t.Fatalf("imaplib said nothing in 30 s; stderr %s", stderr.String())
			return ""
		}
	}
	if l := next(); l != "IDLING 3" {
		t.Fatalf("imaplib: %q, want IDLING 3; stderr %s", l, stderr.String())
	}
	a.Put("linux-mips", mail(3, "stored while idling"))
	stored := time.Now()
	if l := next(); l != "* 4 EXISTS" {
		t.Fatalf("imaplib: %q, want * 4 EXISTS; stderr %s", l, stderr.String())
	}
	t.Logf("imaplib was told of the new message %v after the store took it", time.Since(stored).Round(time.Millisecond))
	if err := cmd.Wait(); err != nil {
		t.Errorf("imaplib: %v; stderr %s", err, stderr.String())
	}
}

// TestFetchmailCorpus: fetchmail (Debian's) downloads the whole list
// with its own settings (keep, fetchall; bad-header accept, or it skips
// the corpus's message whose Subject runs on a line that is not folded)
// into an MDA; each message it delivers is a stored one, with the
// Received line fetchmail adds and LF line ends.
func TestFetchmailCorpus(t *testing.T) {
	fm, err := exec.LookPath("fetchmail")
	if err != nil {
		t.Skip("fetchmail not found (scripts/install-test-deps.sh installs it)")
	}
	a, byUID := corpusArchive(t)
	addr := serve(t, a, Options{})
	_, port, _ := strings.Cut(addr, ":")
	home, out := t.TempDir(), t.TempDir()
	rc := filepath.Join(home, "fetchmailrc")
	os.WriteFile(rc, []byte(fmt.Sprintf(`set no bouncemail
poll 127.0.0.1 service %s protocol IMAP auth password bad-header accept
  user "reader" there with password "any password" is "reader" here
  folder "linux-mips"
  keep fetchall no rewrite sslproto ''
  mda "cat > $(mktemp %s/msg.XXXXXXXX)"
`, port, out)), 0o600)
	cmd := exec.CommandContext(t.Context(), fm, "--nosyslog", "--nodetach", "-f", rc)
	cmd.Env = append(os.Environ(), "HOME="+home, "FETCHMAILHOME="+home)
	res, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("fetchmail: %v\n%s", err, lastLines(string(res), 20))
	}
	want := map[store.Digest]uint32{}
	for uid, cn := range byUID {
		want[store.DigestOf(a.Get(cn))] = uid
	}
	files, err := os.ReadDir(out)
	if err != nil {
		t.Fatal(err)
	}
	got := map[uint32]bool{}
	for _, f := range files {
		b, err := os.ReadFile(filepath.Join(out, f.Name()))
		if err != nil {
			t.Fatal(err)
		}
		uid, ok := want[store.DigestOf(withoutFetchmailReceived(b))]
		if !ok {
			t.Errorf("fetchmail delivered a message that is not a stored one: %.300q", b)
			if d := os.Getenv("CHIBRARY_DEBUG_DIR"); d != "" {
				os.WriteFile(filepath.Join(d, f.Name()), b, 0o644)
			}
			continue
		}
		got[uid] = true
	}
	if len(got) != len(byUID) || len(files) != len(byUID) {
		t.Errorf("fetchmail delivered %d files, %d of the %d stored messages", len(files), len(got), len(byUID))
		for uid, cn := range byUID {
			if !got[uid] {
				t.Errorf("not delivered: UID %d (%s): %.200q", uid, cn, a.Get(cn))
			}
		}
	}
	t.Logf("fetchmail delivered %d messages, each a stored one", len(got))
}

// withoutFetchmailReceived removes the Received header fetchmail adds
// ("Received: from 127.0.0.1 [127.0.0.1] by ... (fetchmail-...)", folded
// lines included), which it puts before the message's first Received
// header.
func withoutFetchmailReceived(b []byte) []byte {
	const line = "Received: from 127.0.0.1 [127.0.0.1]"
	start := -1
	if bytes.HasPrefix(b, []byte(line)) {
		start = 0
	} else if i := bytes.Index(b, []byte("\n"+line)); i >= 0 {
		start = i + 1
	}
	if start < 0 {
		return b
	}
	end := start + bytes.IndexByte(b[start:], '\n')
	for end+1 < len(b) && (b[end+1] == ' ' || b[end+1] == '\t') {
		j := bytes.IndexByte(b[end+1:], '\n')
		if j < 0 {
			return b
		}
		end += 1 + j
	}
	return append(b[:start:start], b[end+1:]...)
}

func lastLines(s string, n int) string {
	l := strings.Split(strings.TrimSpace(s), "\n")
	return strings.Join(l[max(0, len(l)-n):], "\n")
}
