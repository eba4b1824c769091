package resolver

import (
	"context"
	"net"
	"net/http"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// slowCountingStore counts the messages read from it and takes a while
// over each, as a store under load does.
type slowCountingStore struct {
	store.Store
	gets atomic.Int64
}

func (s *slowCountingStore) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	s.gets.Add(1)
	time.Sleep(2 * time.Millisecond)
	return s.Store.Get(ctx, n)
}

// settled returns the count once it has not moved for half a second.
func (s *slowCountingStore) settled() int64 {
	last := s.gets.Load()
	for {
		time.Sleep(500 * time.Millisecond)
		n := s.gets.Load()
		if n == last {
			return n
		}
		last = n
	}
}

// TestCutDownloadStopsSpooling: a reader who asks for a month's mbox.gz
// and hangs up before its first byte stops the spool being written, so
// that asking and hanging up again and again costs a little each time,
// not the whole month; a reader who joined meanwhile still gets it whole.
func TestCutDownloadStopsSpooling(t *testing.T) {
	const n = 300
	a := newArchive(t, boltstore.Options{})
	c := openTestCatalog(t)
	raws := make([][]byte, n)
	for i := range raws {
		raws[i] = noiseMessage(i, 16<<10)
		a.put(t, raws[i], "noise")
	}
	if _, err := c.Sync(context.Background(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	st := &slowCountingStore{Store: a.st}
	s := New(st, Options{Catalogs: keeper.Fixed(c), SpoolDir: t.TempDir(), ShutdownTimeout: time.Second})
	base := serveSmall(t, s)
	addr := base[len("http://"):]
	request := "GET " + noisePath + " HTTP/1.1\r\nHost: x\r\n\r\n"

	t.Run("alone", func(t *testing.T) {
		before := st.settled()
		for range 3 {
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				t.Fatal(err)
			}
			conn.Write([]byte(request))
			time.Sleep(50 * time.Millisecond)
			conn.(*net.TCPConn).SetLinger(0)
			conn.Close()
			st.settled() // the next one does not find this one's file
		}
		// Each of the three stopped the month's file soon after it hung
		// up: they read far fewer than the 900 messages of three whole
		// months between them.
		if read := st.settled() - before; read > n {
			t.Errorf("three readers who hung up at once had %d messages read, want at most %d (one month's worth)", read, n)
		} else {
			t.Logf("three readers who hung up at once had %d messages read of 3 x %d", read, n)
		}
	})

	t.Run("with a reader who stays", func(t *testing.T) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		conn.Write([]byte(request))
		// The second reader joins the file the first is having written,
		// then the first hangs up: the file is written on for the second.
		time.Sleep(20 * time.Millisecond)
		got := make(chan [][]byte, 1)
		go func() {
			resp, err := http.Get(base + noisePath)
			if err != nil {
				t.Error(err)
				got <- nil
				return
			}
			body, _, err := readSlowly(resp, 0, 0)
			if resp.StatusCode != http.StatusOK || err != nil {
				t.Errorf("the reader who stayed: %d, %v", resp.StatusCode, err)
				got <- nil
				return
			}
			got <- gunzipMessages(t, body)
		}()
		time.Sleep(100 * time.Millisecond)
		conn.(*net.TCPConn).SetLinger(0)
		conn.Close()
		msgs := <-got
		if msgs == nil {
			return
		}
		// The month is in date order; the messages were put in another.
		want := map[string]bool{}
		for _, raw := range raws {
			want[string(raw)] = true
		}
		for i, m := range msgs {
			if !want[string(m)] {
				t.Errorf("the reader who stayed: message %d (%d bytes) is not one of the month's as stored", i, len(m))
			}
			delete(want, string(m))
		}
		if len(want) != 0 {
			t.Errorf("the reader who stayed got %d messages, %d of the month's missing", len(msgs), len(want))
		}
	})
}
