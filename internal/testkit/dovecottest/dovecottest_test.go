package dovecottest_test

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
)

func TestAppendRestartMailboxes(t *testing.T) {
	ctx := context.Background()
	s := dovecottest.Start(t, dovecottest.Options{})
	raw := []byte("From: a@example.org\nSubject: one\n\nbody\n")
	if _, err := s.Append(ctx, "INBOX", raw); err != nil {
		t.Fatal(err)
	}
	s.Restart()
	if err := s.CreateMailbox(ctx, "Lists/mips"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Append(ctx, "Lists/mips", raw); err != nil {
		t.Fatal(err)
	}
	for _, mbox := range []string{"INBOX", "Lists/mips"} {
		msgs, err := s.Messages(ctx, mbox)
		if err != nil {
			t.Fatal(err)
		}
		if len(msgs) != 1 || !bytes.Equal(msgs[0].Raw, dovecottest.CRLF(raw)) {
			t.Fatalf("Messages(%s) = %+v, want the one appended message", mbox, msgs)
		}
	}
	if err := s.DeleteMailbox(ctx, "Lists/mips"); err != nil {
		t.Fatal(err)
	}
	if _, err := s.Messages(ctx, "Lists/mips"); err == nil {
		t.Fatal("Messages of a deleted mailbox: no error")
	}
}

func TestPopulate(t *testing.T) {
	raw := []byte("From: a@example.org\r\nSubject: p\r\n\r\nbody\r\n")
	s := dovecottest.Start(t, dovecottest.Options{Populate: func(dir string) error {
		return writeFile(dir+"/cur/"+dovecottest.MaildirName(1, len(raw)), raw)
	}})
	msgs, err := s.Messages(context.Background(), "INBOX")
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 1 || !bytes.Equal(msgs[0].Raw, raw) {
		t.Fatalf("Messages = %+v, want the populated message", msgs)
	}
}

// TestStopCutsConnections: Stop ends the sessions of connected clients, as
// a real server restart does.
func TestStopCutsConnections(t *testing.T) {
	ctx := context.Background()
	s := dovecottest.Start(t, dovecottest.Options{})
	c, err := s.Client(ctx)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if _, err := c.Select("INBOX", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	s.Stop()
	select {
	case <-c.Closed():
	case <-time.After(30 * time.Second):
		t.Fatal("the client's connection is still open 30 s after Stop")
	}
}
