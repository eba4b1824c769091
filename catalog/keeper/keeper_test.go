package keeper_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
)

func mail(i int) []byte {
	return fmt.Appendf(nil, "From: A <a@example.org>\nSubject: message %d\nMessage-ID: <k%d@example.org>\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nhello\n", i, i)
}

// current returns the catalog served now, waiting up to 60 s for one
// that ok accepts.
func current(t *testing.T, k *keeper.Keeper, what string, ok func(*catalog.Catalog) bool) *catalog.Catalog {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, release := k.Current()
		if c != nil && ok(c) {
			release()
			return c
		}
		release()
		if time.Now().After(deadline) {
			t.Fatalf("no %s within 60 s (status %+v)", what, k.Status())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// open reports whether c answers: a closed catalog does not (it may
// panic, its database gone).
func open(t *testing.T, c *catalog.Catalog) (ok bool) {
	defer func() {
		if recover() != nil {
			ok = false
		}
	}()
	_, err := c.Mailbox(t.Context(), "l")
	return err == nil
}

func messages(t *testing.T, c *catalog.Catalog, list string) int {
	b, err := c.Mailbox(t.Context(), list)
	if err != nil {
		return -1
	}
	return b.Messages
}

// TestKeeper: the keeper builds the catalog, follows the store into it,
// rebuilds it when told it is damaged (keeping its numbers), and closes
// the catalog it swapped out only once its last reader has let go of it.
func TestKeeper(t *testing.T) {
	a := archivetest.New(t)
	a.Catalog.Close()
	a.Catalog = nil
	a.Put("l", mail(1), mail(2))
	k := keeper.Open(t.Context(), a.Store, keeper.Options{Path: a.CatalogPath(), Follow: &catalog.FollowOptions{Interval: 20 * time.Millisecond}})
	if k.Path() != a.CatalogPath() {
		t.Errorf("Path() = %q, want %q", k.Path(), a.CatalogPath())
	}
	stop := k.Start(t.Context())
	defer stop()
	first := current(t, k, "catalog of 2 messages", func(c *catalog.Catalog) bool { return messages(t, c, "l") == 2 })
	if st := k.Status(); st.Building != nil || st.Rebuilding != nil || st.Broken != "" {
		t.Errorf("Status() once built = %+v, want nothing under way", st)
	}
	held, release := k.Current()
	if held != first {
		t.Fatalf("Current() = %p, want the catalog served %p", held, first)
	}
	before, err := held.Mailbox(t.Context(), "l")
	if err != nil {
		t.Fatal(err)
	}
	k.Notice(held, fmt.Errorf("test: %w", catalog.ErrDamaged))
	rebuilt := current(t, k, "rebuilt catalog", func(c *catalog.Catalog) bool { return c != first })
	// The old one is still readable while held, and closed once let go.
	if n := messages(t, held, "l"); n != 2 {
		t.Errorf("the swapped-out catalog, still held, has %d messages, want 2", n)
	}
	release()
	release() // twice is once
	if open(t, held) {
		t.Error("the swapped-out catalog still answers once its last reader let go: not closed")
	}
	after, err := rebuilt.Mailbox(t.Context(), "l")
	if err != nil || after.Validity != before.Validity || after.Next != before.Next {
		t.Errorf("the rebuilt catalog's mailbox = %+v, %v; want the numbers carried over from %+v", after, err, before)
	}
	// The rebuilt catalog is followed.
	a.Put("l", mail(3))
	current(t, k, "the message stored after the rebuild", func(c *catalog.Catalog) bool { return messages(t, c, "l") == 3 })
	stop()
	if c, release := k.Current(); c != nil {
		release()
		t.Error("Current() after stop is a catalog, want none")
	}
	if open(t, rebuilt) {
		t.Error("the catalog served is not closed by stop")
	}
}

// TestFixed: a fixed keeper serves what it was given, or nothing.
func TestFixed(t *testing.T) {
	a := archivetest.New(t)
	k := keeper.Fixed(a.Catalog)
	c, release := k.Current()
	if c != a.Catalog {
		t.Errorf("Fixed(c).Current() = %p, want %p", c, a.Catalog)
	}
	release()
	if c, _ := keeper.Fixed(nil).Current(); c != nil {
		t.Errorf("Fixed(nil).Current() = %p, want nil", c)
	}
	if st := k.Status(); st != (keeper.Status{}) {
		t.Errorf("Fixed(c).Status() = %+v, want nothing", st)
	}
}
