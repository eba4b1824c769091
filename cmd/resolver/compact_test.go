package main

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// oldArchive adds 1,200 list messages to the test archive the way the
// store wrote them before compression, and returns their numbers and
// bytes.
func oldArchive(t *testing.T, dir string, codec *callnumber.Codec) map[callnumber.Number][]byte {
	t.Helper()
	st, err := boltstore.Open(t.Context(), filepath.Join(dir, "messages.db"), boltstore.Options{Compression: store.Compression{Off: true}, PageSize: 4096})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	out := map[callnumber.Number][]byte{}
	var msgs []store.Message
	for i := range 1200 {
		n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: uint16(100 + i)})
		if err != nil {
			t.Fatal(err)
		}
		raw := fmt.Appendf(nil, "From: Developer %d <dev%d@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH] MIPS: fix %d\n"+
			"Message-ID: <old%d@example.org>\nSender: linux-mips-bounce@linux-mips.org\nPrecedence: bulk\n\n%s",
			i%17, i%17, i, i, strings.Repeat(fmt.Sprintf("a line of the patch, %d, as long as a patch line is\n", i%11), 40))
		msgs = append(msgs, store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: fmt.Sprintf("old%d@example.org", i)})
		out[n] = raw
	}
	if _, err := st.Put(t.Context(), msgs); err != nil {
		t.Fatal(err)
	}
	return out
}

// storeBytes is what the bolt store in dir takes: its file and packs.
func storeBytes(t *testing.T, dir string) int64 {
	t.Helper()
	files, err := filepath.Glob(filepath.Join(dir, "messages.packs", "*"))
	if err != nil {
		t.Fatal(err)
	}
	var n int64
	for _, f := range append(files, filepath.Join(dir, "messages.db")) {
		fi, err := os.Stat(f)
		if err != nil {
			t.Fatal(err)
		}
		n += fi.Size()
	}
	return n
}

func TestCompact(t *testing.T) {
	dir, codec, n, raw := testArchive(t)
	msgs := oldArchive(t, dir, codec)
	msgs[n] = raw
	path := filepath.Join(dir, "messages.db")
	before := storeBytes(t, dir)
	check := func(t *testing.T, args ...string) {
		t.Helper()
		for num, want := range msgs {
			if num%7 != 0 && num != n {
				continue
			}
			status, stdout, stderr := runCmd(t, t.Context(), append([]string{"get"}, append(args, num.String())...)...)
			if status != 0 || stdout != string(want) {
				t.Fatalf("resolver get %v %v = %d, %d bytes, %q; want the message's %d bytes", args, num, status, len(stdout), stderr, len(want))
			}
		}
	}

	to := filepath.Join(t.TempDir(), "copy.db")
	status, stdout, stderr := runCmd(t, t.Context(), "compact", "--data", dir, "--to", "bolt:"+to)
	if status != 0 || stdout != "" || !strings.Contains(stderr, "compacted 1201 messages into "+to) {
		t.Fatalf("resolver compact --to = %d, %q, %q", status, stdout, stderr)
	}
	check(t, "--store", "bolt:"+to)

	status, _, stderr = runCmd(t, t.Context(), "compact", "--data", dir)
	if status != 0 || !strings.Contains(stderr, "compacted 1201 messages into "+path) {
		t.Fatalf("resolver compact = %d, %q", status, stderr)
	}
	// The records compressed, the old packs deleted.
	if after := storeBytes(t, dir); after*2 > before {
		t.Errorf("the store: %d bytes before, %d after compaction; want less than half", before, after)
	}
	check(t, "--data", dir)

	for _, tt := range []struct {
		name   string
		args   []string
		status int
		stderr string
	}{
		{"copy exists", []string{"compact", "--data", dir, "--to", "bolt:" + to}, 1, "exists"},
		{"riak", []string{"compact", "--store", "riak://127.0.0.1:1"}, 2, "bolt stores only"},
		{"copy to riak", []string{"compact", "--data", dir, "--to", "riak://127.0.0.1:1"}, 2, "bolt:PATH"},
		{"no store", []string{"compact", "--data", filepath.Join(dir, "nope")}, 1, "no archive in " + filepath.Join(dir, "nope") + " (no messages.db)"},
		{"argument", []string{"compact", "--data", dir, "extra"}, 2, "unexpected argument"},
		{"help", []string{"compact", "--help"}, 0, "resolver compact --data"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			status, stdout, stderr := runCmd(t, t.Context(), tt.args...)
			if status != tt.status || !strings.Contains(stdout+stderr, tt.stderr) {
				t.Errorf("resolver %q = %d, %q, %q; want %d and %q", tt.args, status, stdout, stderr, tt.status, tt.stderr)
			}
		})
	}
}
