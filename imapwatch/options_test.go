package imapwatch

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// The default state file is per user, server and mailbox, readable, and
// safe as a file name whatever the mailbox is called.
func TestDefaultStatePath(t *testing.T) {
	a := DefaultStatePath("data", Target{User: "list@example.org", Addr: "imap.example.org:993", Mailbox: "INBOX"})
	if !strings.HasPrefix(a, filepath.Join("data", "watcher", "list@example.org@imap.example.org_993_INBOX-")) || !strings.HasSuffix(a, ".json") {
		t.Errorf("DefaultStatePath = %q", a)
	}
	seen := map[string]Target{}
	for _, tg := range []Target{
		{User: "u", Addr: "h:993", Mailbox: "INBOX"},
		{User: "u", Addr: "h:993", Mailbox: "Lists/mips"},
		{User: "u", Addr: "h:993", Mailbox: "Lists_mips"}, // same cleaned name, another hash
		{User: "v", Addr: "h:993", Mailbox: "INBOX"},
		{User: "u", Addr: "h:143", Mailbox: "INBOX"},
		{User: "u", Addr: "h:993", Mailbox: "../../etc/passwd"},
	} {
		p := DefaultStatePath("data", tg)
		if other, ok := seen[p]; ok {
			t.Errorf("%+v and %+v share the state file %s", tg, other, p)
		}
		seen[p] = tg
		if filepath.Dir(p) != filepath.Join("data", "watcher") {
			t.Errorf("DefaultStatePath(%+v) = %q, outside data/watcher", tg, p)
		}
	}
}

func TestTLSConfig(t *testing.T) {
	if c, err := TLSConfig("", false); c != nil || err != nil {
		t.Errorf("TLSConfig(default) = %v, %v; want nil (the system roots)", c, err)
	}
	if c, err := TLSConfig("", true); err != nil || c == nil || !c.InsecureSkipVerify {
		t.Errorf("TLSConfig(insecure) = %+v, %v", c, err)
	}
	if _, err := TLSConfig("ca.pem", true); !errors.Is(err, ErrTLSOptions) {
		t.Errorf("TLSConfig(CA and insecure) = %v, want %v", err, ErrTLSOptions)
	}
	empty := filepath.Join(t.TempDir(), "empty.pem")
	if err := os.WriteFile(empty, []byte("not a certificate\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := TLSConfig(empty, false); err == nil || !strings.Contains(err.Error(), "holds no PEM certificate") {
		t.Errorf("TLSConfig(no certificate) = %v", err)
	}
	if _, err := TLSConfig(empty+".missing", false); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("TLSConfig(missing file) = %v, want %v", err, os.ErrNotExist)
	}
}
