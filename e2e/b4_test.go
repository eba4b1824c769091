package e2e

import (
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

// roundTrip is what b4 does to a message it fetched before writing it to
// a Maildir (b4 mbox -M): it parses it with its policy (email.policy
// with utf8, 8-bit and no line length) and mailbox.Maildir adds it, which
// writes it anew with email.generator. A message comes back from b4 as
// the stored bytes written anew so; what Python changes (the spaces
// after "From:" that vger's mail has, say) is Python's, on any archive,
// lore.kernel.org's too.
const roundTrip = `
import sys, io, mailbox, tempfile, os, email
from b4 import emlpolicy
raw = open(sys.argv[1], 'rb').read()
msg = email.message_from_binary_file(io.BytesIO(raw), policy=emlpolicy)
with tempfile.TemporaryDirectory() as d:
    md = mailbox.Maildir(os.path.join(d, 'm'), create=True)
    key = md.add(msg)
    sys.stdout.buffer.write(md.get_bytes(key))
`

// TestB4: the real b4 (Debian's, 0.12), pointed at the archive with its
// midmask, fetches a thread of the shared corpus through the
// public-inbox routes (GET /all/MSGID/t.mbox.gz; with a list in the
// midmask, HEAD /linux-mips/MSGID first and the list it redirects to),
// and writes every message of it: each the stored bytes, as Python writes
// them anew (roundTrip), and the thread it fetched is the stored bytes
// themselves.
func TestB4(t *testing.T) {
	needPrograms(t)
	b4, err := exec.LookPath("b4")
	if err != nil {
		t.Skip("b4 is not installed (scripts/install-test-deps.sh installs Debian's): apt-get install b4")
	}
	// b4's own Python, the one its script names (another python3 may be
	// first in PATH).
	python := "python3"
	if script, err := os.ReadFile(b4); err == nil && bytes.HasPrefix(script, []byte("#!")) {
		if f := strings.Fields(string(script[2:bytes.IndexByte(script, '\n')])); len(f) == 1 {
			python = f[0]
		}
	}
	if err := exec.Command(python, "-c", "import b4").Run(); err != nil {
		t.Skipf("%s cannot import b4 (%v): is b4 Debian's package?", python, err)
	}
	corpusPath := testcorpus.Path(t)
	msgid := threadWithReplies(t, mail(t, 0))
	data := filepath.Join(t.TempDir(), "archive")
	if imp := start(t, "importer", procOptions{}, "--data", data, "--list", "linux-mips", corpusPath); imp.wait(5*time.Minute) != 0 {
		t.Fatalf("import failed:\n%s", imp.log())
	}
	r := startResolver(t, data)
	eventually(t, 5*time.Minute, "the catalog to index the corpus", func() bool {
		status, _, _, err := get(t.Context(), r.url+"/all/"+url.PathEscape(msgid)+"/")
		return err == nil && status == http.StatusFound
	})
	stored := func(id string) []byte {
		t.Helper()
		status, h, _, err := get(t.Context(), r.url+"/m/"+url.PathEscape(id))
		if err != nil || status != http.StatusFound {
			t.Fatalf("/m/%s = %d, %v", id, status, err)
		}
		status, _, raw, err := get(t.Context(), r.url+h.Get("Location")+"/raw")
		if err != nil || status != http.StatusOK {
			t.Fatalf("%s/raw = %d, %v", h.Get("Location"), status, err)
		}
		return raw
	}

	// What b4 downloads: the thread, every message as stored.
	status, _, gz, err := get(t.Context(), r.url+"/all/"+url.QueryEscape(msgid)+"/t.mbox.gz")
	if err != nil || status != http.StatusOK {
		t.Fatalf("t.mbox.gz = %d, %v", status, err)
	}
	zr, err := gzip.NewReader(bytes.NewReader(gz))
	if err != nil {
		t.Fatal(err)
	}
	mr := mbox.NewReader(zr, mbox.Options{Name: "t.mbox.gz", Format: mbox.FormatMboxrd})
	inThread := 0
	for {
		m, err := mr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := mailmsg.Parse(m.Raw)
		if !bytes.Equal(m.Raw, stored(meta.MessageID)) {
			t.Errorf("t.mbox.gz holds <%s> with other bytes than stored", meta.MessageID)
		}
		inThread++
	}

	for _, mm := range []struct{ name, midmask string }{{"all", r.url + "/all/%s"}, {"list", r.url + "/linux-mips/%s"}} {
		midmask := mm.midmask
		t.Run(mm.name, func(t *testing.T) {
			home := t.TempDir()
			config := fmt.Sprintf("[b4]\n\tmidmask = %s\n\tlinkmask = %s\n", midmask, r.url+"/all/%s")
			if err := os.WriteFile(filepath.Join(home, ".gitconfig"), []byte(config), 0o644); err != nil {
				t.Fatal(err)
			}
			out := filepath.Join(home, "out")
			if err := os.Mkdir(out, 0o755); err != nil {
				t.Fatal(err)
			}
			cmd := exec.CommandContext(t.Context(), b4, "mbox", "-M", "-o", out, msgid)
			cmd.Env = append(cleanEnv(), "HOME="+home, "XDG_CACHE_HOME="+filepath.Join(home, "cache"), "XDG_CONFIG_HOME="+filepath.Join(home, "config"), "GIT_CONFIG_NOSYSTEM=1")
			cmd.Dir = home
			log, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("b4 mbox: %v\n%s", err, log)
			}
			files, _ := filepath.Glob(filepath.Join(out, "*.maildir", "new", "*"))
			if len(files) < 2 || len(files) > inThread {
				t.Fatalf("b4 wrote %d messages of a thread of %d (the message and its replies: 2 at least):\n%s", len(files), inThread, log)
			}
			seen := false
			for _, f := range files {
				got, err := os.ReadFile(f)
				if err != nil {
					t.Fatal(err)
				}
				meta, _ := mailmsg.Parse(got)
				seen = seen || meta.MessageID == msgid
				// The stored bytes, and the empty line that separates
				// messages in an mbox, which git mailsplit (b4's splitter)
				// keeps with the message before it: lore's messages come
				// so to b4 too.
				raw := filepath.Join(home, "stored.eml")
				if err := os.WriteFile(raw, append(stored(meta.MessageID), '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				want, err := exec.Command(python, "-c", roundTrip, raw).Output()
				if err != nil {
					t.Fatalf("python3 round trip: %v", err)
				}
				if !bytes.Equal(got, want) {
					t.Errorf("b4 wrote <%s> otherwise than the stored message written anew by Python:\n%s", meta.MessageID, firstDiff(got, want))
				}
			}
			if !seen {
				t.Errorf("b4 did not write <%s> itself:\n%s", msgid, log)
			}
		})
	}
}

// threadWithReplies returns the Message-ID of the first message of the
// corpus that two others answer (In-Reply-To): a thread b4 has something
// to fetch of.
func threadWithReplies(t *testing.T, msgs [][]byte) string {
	t.Helper()
	replies := map[string]int{}
	var order []string
	for _, raw := range msgs {
		meta, _ := mailmsg.Parse(raw)
		if meta.MessageID != "" {
			order = append(order, meta.MessageID)
		}
		for _, id := range meta.InReplyTo {
			replies[id]++
		}
	}
	for _, id := range order {
		if replies[id] >= 2 && !strings.ContainsAny(id, "/ ") {
			return id
		}
	}
	t.Skip("no message of the corpus has two replies")
	return ""
}

// firstDiff shows where two texts part.
func firstDiff(a, b []byte) string {
	i := 0
	for i < len(a) && i < len(b) && a[i] == b[i] {
		i++
	}
	lo := max(0, i-80)
	return fmt.Sprintf("at byte %d:\n  got  %q\n  want %q", i, a[lo:min(len(a), i+80)], b[lo:min(len(b), i+80)])
}
