package nntpserve

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/mailwire"
)

// nntplibRead is a news reader's session in Python's nntplib: the
// capabilities, the group, its whole overview, every article by number,
// one by message-id, and NEWNEWS; what it read goes to files.
const nntplibRead = `
import datetime, json, nntplib, os, sys
host, port, group, out = sys.argv[1], int(sys.argv[2]), sys.argv[3], sys.argv[4]
s = nntplib.NNTP(host, port, readermode=True)
caps = s.getcapabilities()
assert "READER" in caps and "OVER" in caps, caps
resp, count, first, last, name = s.group(group)
resp, overviews = s.over((first, last))
with open(os.path.join(out, "over.json"), "w") as f:
    json.dump([[n, ov] for n, ov in overviews], f)
for n, ov in overviews:
    resp, info = s.article(n)
    assert info.number == n, (info.number, n)
    with open(os.path.join(out, "%d.eml" % n), "wb") as f:
        f.write(b"\r\n".join(info.lines) + b"\r\n")
resp, info = s.article(overviews[-1][1]["message-id"])
assert info.number == 0 and info.message_id == overviews[-1][1]["message-id"], info[:2]
resp, news = s.newnews(group, datetime.datetime(1970, 1, 2))
s.quit()
print(count, first, last, len(overviews), len(news))
`

// TestNntplibCorpus: Python's nntplib reads a group's overview and every
// article; each article is the stored message with CRLF line ends.
func TestNntplibCorpus(t *testing.T) {
	py, err := exec.LookPath("python3")
	if err != nil {
		t.Skip("python3 not found")
	}
	if exec.Command(py, "-c", "import nntplib").Run() != nil {
		t.Skip("this python3 has no nntplib (removed in 3.13)")
	}
	a := archivetest.New(t)
	a.PutCorpus("linux-mips", corpusLimit)
	n := a.Sync()
	es, err := a.Catalog.Entries(t.Context(), "linux-mips", 1, 1<<32-1, 1<<20, true)
	if err != nil {
		t.Fatal(err)
	}
	addr := serve(t, a, Options{})
	host, port, _ := strings.Cut(addr, ":")
	out := t.TempDir()
	script := filepath.Join(t.TempDir(), "read.py")
	os.WriteFile(script, []byte(nntplibRead), 0o644)
	// (-W: nntplib is deprecated in 3.11, and says so on import.)
	res, err := exec.CommandContext(t.Context(), py, "-W", "ignore::DeprecationWarning", script, host, port, "chibrary.linux-mips", out).Output()
	if err != nil {
		var stderr []byte
		if ee, ok := err.(*exec.ExitError); ok {
			stderr = ee.Stderr
		}
		t.Fatalf("nntplib: %v\n%s%s", err, res, stderr)
	}
	if got, want := strings.TrimSpace(string(res)), fmt.Sprintf("%d 1 %d %d %d", n, n, n, n); got != want {
		t.Errorf("nntplib says %q (count, first, last, overview lines, NEWNEWS), want %q", got, want)
	}
	var over [][2]json.RawMessage
	b, err := os.ReadFile(filepath.Join(out, "over.json"))
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, &over); err != nil {
		t.Fatal(err)
	}
	if len(over) != len(es) {
		t.Fatalf("%d overview lines, want %d", len(over), len(es))
	}
	for i, e := range es {
		var num uint32
		var fields map[string]string
		json.Unmarshal(over[i][0], &num)
		json.Unmarshal(over[i][1], &fields)
		if num != e.Num || fields["message-id"] != "<"+e.MessageID+">" && e.MessageID != "" ||
			fields[":bytes"] != strconv.FormatInt(e.WireSize, 10) || fields[":lines"] != strconv.Itoa(e.Lines) ||
			fields["subject"] != field(&e, "Subject") || fields["from"] != field(&e, "From") || fields["references"] != field(&e, "References") {
			t.Errorf("overview of %d = %d %q, want the catalog's %+v", e.Num, num, fields, e)
		}
		got, err := os.ReadFile(filepath.Join(out, fmt.Sprintf("%d.eml", e.Num)))
		if err != nil {
			t.Fatal(err)
		}
		want := mailwire.AppendCRLF(nil, a.Get(e.CallNumber))
		if !bytes.HasSuffix(want, []byte("\r\n")) {
			want = append(want, '\r', '\n') // an article's last line ends
		}
		if !bytes.Equal(got, want) {
			t.Errorf("article %d (%s): nntplib got %d bytes, not the %d of the stored message", e.Num, e.CallNumber, len(got), len(want))
		}
	}
	t.Logf("nntplib read the overview and the %d articles of the group", len(es))
}
