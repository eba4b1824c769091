package imapserve

import (
	"context"
	"database/sql"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2/imapclient"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
)

// serve serves a over IMAP on a loopback port until the test ends, and
// returns its address.
func serve(t testing.TB, a *archivetest.Archive, opts Options, tweaks ...func(*Server)) string {
	t.Helper()
	addr, stop := start(t, a, opts, tweaks...)
	t.Cleanup(stop)
	return addr
}

// start serves a over IMAP on a loopback port until stop is called;
// tweaks change the server before it serves.
func start(t testing.TB, a *archivetest.Archive, opts Options, tweaks ...func(*Server)) (addr string, stop func()) {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	if opts.PollInterval == 0 {
		opts.PollInterval = 20 * time.Millisecond
	}
	if opts.Registerer == nil {
		opts.Registerer = prometheus.NewRegistry()
	}
	s, err := New(keeper.Fixed(a.Catalog), a.Store, opts)
	if err != nil {
		t.Fatal(err)
	}
	for _, tweak := range tweaks {
		tweak(s)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, Listener{Listener: ln}) }()
	return ln.Addr().String(), func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("Serve = %v", err)
		}
	}
}

// execCatalog changes the catalog file of a with SQL, from a connection
// of its own, as another writer would: how the tests remove and move
// messages (deleting a messages row, changing its list) until the
// catalog has operations that do.
func execCatalog(t testing.TB, a *archivetest.Archive, query string, args ...any) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+a.CatalogPath()+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.ExecContext(t.Context(), query, args...); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

// client is an IMAP client that records the unilateral EXISTS and
// EXPUNGE responses it gets.
type client struct {
	*imapclient.Client
	mu       sync.Mutex
	exists   []uint32
	expunged []uint32
	changed  chan struct{}
}

func dial(t testing.TB, addr string) *client {
	t.Helper()
	c := &client{changed: make(chan struct{}, 100)}
	ic, err := imapclient.DialInsecure(addr, &imapclient.Options{UnilateralDataHandler: &imapclient.UnilateralDataHandler{
		Expunge: func(seq uint32) {
			c.mu.Lock()
			c.expunged = append(c.expunged, seq)
			c.mu.Unlock()
			c.changed <- struct{}{}
		},
		Mailbox: func(d *imapclient.UnilateralDataMailbox) {
			if d.NumMessages != nil {
				c.mu.Lock()
				c.exists = append(c.exists, *d.NumMessages)
				c.mu.Unlock()
				c.changed <- struct{}{}
			}
		},
	}})
	if err != nil {
		t.Fatal(err)
	}
	c.Client = ic
	t.Cleanup(func() { ic.Close() })
	return c
}

func login(t testing.TB, addr string) *client {
	t.Helper()
	c := dial(t, addr)
	if err := c.Login("reader", "any password").Wait(); err != nil {
		t.Fatalf("LOGIN = %v", err)
	}
	return c
}

// await waits until cond holds of what the client was told, up to 10 s;
// with poke, it sends NOOP now and then (an idling client must not).
func (c *client) await(t testing.TB, what string, poke bool, cond func(exists, expunged []uint32) bool) {
	t.Helper()
	deadline := time.After(10 * time.Second)
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		c.mu.Lock()
		ok := cond(c.exists, c.expunged)
		c.mu.Unlock()
		if ok {
			return
		}
		select {
		case <-c.changed:
		case <-tick.C:
			if poke {
				c.Noop().Wait()
			}
		case <-deadline:
			c.mu.Lock()
			defer c.mu.Unlock()
			t.Fatalf("%s: not told in 10 s (EXISTS %v, EXPUNGE %v)", what, c.exists, c.expunged)
		}
	}
}

// mail is a small message of list with a Message-ID and subject made of
// i, and LF line ends as an mbox has them.
func mail(i int, subject string) []byte {
	return fmt.Appendf(nil, "From: Sender %d <s%d@example.org>\nTo: list@example.org\nCc: cc%d@example.org\nSubject: %s\nDate: Mon, 2 Jan 2006 15:04:%02d +0000\nMessage-ID: <m%d@example.org>\n\nThe body of message %d.\n>From quoted\nlast line\n", i, i, i, subject, i%60, i, i)
}
