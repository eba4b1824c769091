package imapserve

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
)

// TestRebuiltCatalog: when the keeper swaps in a catalog rebuilt from the
// old one (found damaged), a session with the mailbox selected goes on
// under the same UIDVALIDITY, and is told of what leaves and comes after
// the rebuild, though the new catalog's log of gone numbers starts anew.
func TestRebuiltCatalog(t *testing.T) {
	a, cns := smallArchive(t, 3)
	a.Catalog.Close()
	a.Catalog = nil
	k := keeper.Open(t.Context(), a.Store, keeper.Options{Path: a.CatalogPath(), Follow: &catalog.FollowOptions{Interval: 20 * time.Millisecond}})
	t.Cleanup(k.Start(t.Context()))
	addr, stop := start(t, a, Options{}, func(s *Server) {
		s.cats = k
		s.hub = newHub(k, s.opts.PollInterval, s.log)
	})
	t.Cleanup(stop)

	c := login(t, addr)
	sel, err := c.Select("a", nil).Wait()
	if err != nil || sel.NumMessages != 3 {
		t.Fatalf("SELECT a = %+v, %v; want 3 messages", sel, err)
	}
	// A message removed before the rebuild: one entry in the old
	// catalog's gone log.
	a.Remove(cns[0])
	c.await(t, "the first message expunged", true, func(_, expunged []uint32) bool { return slices.Equal(expunged, []uint32{1}) })

	old, release := k.Current()
	release()
	k.Notice(old, fmt.Errorf("test: %w", catalog.ErrDamaged))
	deadline := time.Now().Add(60 * time.Second)
	for {
		c, release := k.Current()
		release()
		if c != nil && c != old {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the catalog is not rebuilt within 60 s")
		}
		time.Sleep(20 * time.Millisecond)
	}
	if err := c.Noop().Wait(); err != nil {
		t.Fatalf("NOOP after the rebuild = %v, want the session to go on", err)
	}

	// After the rebuild: one leaves (the new log's first entry), one comes.
	a.Remove(cns[2])
	c.await(t, "the third message expunged", true, func(_, expunged []uint32) bool { return slices.Equal(expunged, []uint32{1, 2}) })
	a.Put("a", mail(4, "after the rebuild"))
	c.await(t, "the new message", true, func(exists, _ []uint32) bool { return slices.Contains(exists, 2) })

	again := login(t, addr)
	sel2, err := again.Select("a", nil).Wait()
	if err != nil || sel2.UIDValidity != sel.UIDValidity || sel2.NumMessages != 2 {
		t.Errorf("SELECT a after the rebuild = %+v, %v; want UIDVALIDITY %d, 2 messages", sel2, err, sel.UIDValidity)
	}
}
