package mirror_test

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/klauspost/compress/zstd"

	cn "github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// fakeOrigin serves every request with answer, which writes a change
// feed of auth's archive with fw; it counts the requests.
func fakeOrigin(t *testing.T, auth *storetest.Authority, answer func(r *http.Request, fw *changes.Writer, flush func())) (string, *atomic.Int32) {
	t.Helper()
	var requests atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		requests.Add(1)
		w.Header().Set("Content-Type", changes.ContentType)
		fw, err := changes.NewWriter(w, auth.Binding())
		if err != nil {
			t.Error(err)
			return
		}
		flush := func() {
			fw.Flush()
			w.(http.Flusher).Flush()
		}
		flush()
		answer(r, fw, flush)
	}))
	t.Cleanup(srv.Close)
	return srv.URL, &requests
}

// countingStore counts the leases recorded and the removals applied; it
// records leases only if keep is set (a bolt transaction each is slow).
type countingStore struct {
	store.Store
	keep             bool
	leases, removals atomic.Int64
}

func (c *countingStore) RecordLease(ctx context.Context, l cn.Lease) error {
	c.leases.Add(1)
	if c.keep {
		return c.Store.RecordLease(ctx, l)
	}
	return nil
}

func (c *countingStore) RecordRemoval(ctx context.Context, r store.Removal) (store.Removal, error) {
	c.removals.Add(1)
	return c.Store.RecordRemoval(ctx, r)
}

// TestEndlessLeases: an origin that sends lease records without end is
// refused once an answer holds more than the mirror asked for, and what
// it reads is handed on to the store as it arrives, a few hundred leases
// at a time: the mirror's memory does not grow with the stream.
func TestEndlessLeases(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	t.Run("refused past the limit", func(t *testing.T) {
		var written atomic.Int64
		from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
			for run := uint32(1); run < cn.MaxRun; run++ {
				if fw.Lease(auth.Lease(run)) != nil {
					return // the mirror hung up
				}
				written.Add(1)
				if run%64 == 0 {
					flush()
				}
			}
		})
		st := &countingStore{Store: openStore(t)}
		m := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) { o.Limit = 1000 })
		_, err := m.CatchUp(t.Context())
		if !errors.Is(err, mirror.ErrOrigin) || !strings.Contains(err.Error(), "more than 1000 leases") {
			t.Fatalf("CatchUp = %v, want ErrOrigin saying more than 1000 leases", err)
		}
		if n := st.leases.Load(); n > 1000 {
			t.Errorf("%d leases recorded, want at most the 1000 of an answer", n)
		}
		// The origin wrote what the connection's buffers hold past the
		// 1,001st lease, not more: the mirror hung up.
		if n := written.Load(); n > 100_000 {
			t.Errorf("the origin wrote %d leases before the mirror hung up", n)
		}
	})

	t.Run("endless removals, accepted", func(t *testing.T) {
		leases := map[uint32]cn.Lease{}
		for run := uint32(1); run <= 8; run++ {
			leases[run] = auth.Lease(run)
		}
		from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
			for run := uint32(1); run <= 8; run++ {
				fw.Lease(leases[run])
			}
			for i := 0; ; i++ {
				rm := store.Removal{Number: auth.Number(t, uint32(1+i%8), i/8%16384), Removed: time.Now().Truncate(time.Second), Reason: "spam"}
				rm.Digest = store.DigestOf([]byte(rm.Number.String()))
				if fw.Removal(rm) != nil {
					return
				}
			}
		})
		st := &countingStore{Store: openStore(t), keep: true}
		m := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) {
			o.Limit = 200
			o.AcceptMassRemoval = true
		})
		_, err := m.CatchUp(t.Context())
		if !errors.Is(err, mirror.ErrOrigin) || !strings.Contains(err.Error(), "more than the 200 records asked for") {
			t.Fatalf("CatchUp = %v, want ErrOrigin saying more than the 200 records asked for", err)
		}
		if n := st.removals.Load(); n > 200 {
			t.Errorf("%d removals applied, want at most the 200 of an answer", n)
		}
	})

	t.Run("handed on as they arrive", func(t *testing.T) {
		const sent = 1000
		release := make(chan struct{})
		from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
			for run := uint32(1); run <= sent; run++ {
				fw.Lease(auth.Lease(run))
			}
			flush()
			select { // then nothing, until the mirror gives up
			case <-r.Context().Done():
			case <-release:
			}
		})
		defer close(release)
		st := &countingStore{Store: openStore(t)}
		m := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) {
			o.Limit = 10000
			o.ReadTimeout = time.Minute
		})
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { _, err := m.CatchUp(ctx); done <- err }()
		defer func() { cancel(); <-done }()
		// The answer has not ended: whatever the store got was handed on
		// before the answer's end, in steps of at most 256.
		for deadline := time.Now().Add(20 * time.Second); st.leases.Load() < sent-256; time.Sleep(10 * time.Millisecond) {
			if time.Now().After(deadline) {
				t.Fatalf("the origin sent %d leases and waits; the store got %d of them, want at least %d: the mirror holds what it read", sent, st.leases.Load(), sent-256)
			}
		}
	})
}

// TestStalledOrigin: an origin that sends its headers and then nothing
// makes CatchUp fail within a few read timeouts, with an error that names
// it, not hang.
func TestStalledOrigin(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	release := make(chan struct{})
	lease := auth.Lease(1)
	from, requests := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
		fw.Lease(lease)
		flush()
		select {
		case <-r.Context().Done():
		case <-release:
		}
	})
	defer close(release)
	st := openStore(t)
	const timeout = 200 * time.Millisecond
	m := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) { o.ReadTimeout = timeout })
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	start := time.Now()
	_, err := m.CatchUp(ctx)
	took := time.Since(start)
	if !errors.Is(err, mirror.ErrStalled) || !strings.Contains(err.Error(), from) || !strings.Contains(err.Error(), "sent nothing for 200ms") {
		t.Fatalf("CatchUp against a stalled origin = %v, want ErrStalled naming %s and the timeout", err, from)
	}
	if n := requests.Load(); n != mirror.OnceStalls {
		t.Errorf("the origin was asked %d times, want %d", n, mirror.OnceStalls)
	}
	if took > 10*time.Second {
		t.Errorf("CatchUp took %v to give up", took)
	}
}

// TestMassRemoval: an answer that removes more than MaxRemovals messages
// the mirror holds is refused whole, none of them removed, unless
// AcceptMassRemoval; removals of messages a new mirror never held do not
// count.
func TestMassRemoval(t *testing.T) {
	o := newOrigin(t, 150)
	st := openStore(t)
	state := filepath.Join(t.TempDir(), "s.json")
	limit := func(opts *mirror.Options) { opts.Limit = 1000 }
	if _, err := newMirror(t, o.srv.URL, st, state, limit).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	before, _ := mirror.ReadState(state)
	removed := o.msgs[:120]
	for _, m := range removed {
		if _, err := o.st.Remove(t.Context(), m.Number, "spam"); err != nil {
			t.Fatal(err)
		}
	}
	_, err := newMirror(t, o.srv.URL, st, state, limit).CatchUp(t.Context())
	if !errors.Is(err, mirror.ErrMassRemoval) || !strings.Contains(err.Error(), "--accept-mass-removal") {
		t.Fatalf("CatchUp of 120 removals = %v, want ErrMassRemoval naming --accept-mass-removal", err)
	}
	if rs, err := st.Removals(t.Context()); err != nil || len(rs) != 0 {
		t.Errorf("after a refused mass removal the mirror holds %d removals (%v), want none", len(rs), err)
	}
	if after, _ := mirror.ReadState(state); after.Cursor != before.Cursor {
		t.Errorf("the cursor moved past a refused answer: %q, was %q", after.Cursor, before.Cursor)
	}
	for _, m := range o.msgs {
		if got, err := st.Get(t.Context(), m.Number); err != nil || !bytes.Equal(got.Raw, m.Raw) {
			t.Fatalf("after a refused mass removal, the mirror's Get(%v) = %v", m.Number, err)
		}
	}

	// A new mirror never held them: it catches up without the flag.
	st2 := openStore(t)
	if _, err := newMirror(t, o.srv.URL, st2, filepath.Join(t.TempDir(), "s2.json"), limit).CatchUp(t.Context()); err != nil {
		t.Errorf("a new mirror, 120 removals of messages it never held: %v", err)
	}
	same(t, o, st2, removed...)

	stats, err := newMirror(t, o.srv.URL, st, state, func(opts *mirror.Options) {
		opts.Limit = 1000
		opts.AcceptMassRemoval = true
	}).CatchUp(t.Context())
	if err != nil || stats.Removals != 120 {
		t.Fatalf("CatchUp accepting the mass removal = %+v, %v; want 120 removals", stats, err)
	}
	same(t, o, st, removed...)
}

// TestFutureRemoval: a removal dated in the future (beyond the clocks'
// skew) is refused; one a minute ahead is taken.
func TestFutureRemoval(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	for _, tt := range []struct {
		name   string
		ahead  time.Duration
		refuse bool
	}{
		{"a day ahead", 24 * time.Hour, true},
		{"in 2100", time.Until(time.Date(2100, 1, 1, 0, 0, 0, 0, time.UTC)), true},
		{"a minute ahead", time.Minute, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			n, lease := auth.Number(t, 1, 3), auth.Lease(1)
			from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
				fw.Lease(lease)
				fw.Removal(store.Removal{Number: n, Digest: store.DigestOf([]byte("gone")), Removed: time.Now().Add(tt.ahead).Truncate(time.Second), Reason: "spam"})
				fw.End("c1", false)
			})
			st := openStore(t)
			_, err := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), nil).CatchUp(t.Context())
			rs, _ := st.Removals(t.Context())
			if tt.refuse {
				if !errors.Is(err, mirror.ErrOrigin) || !strings.Contains(err.Error(), "in the future") {
					t.Errorf("CatchUp = %v, want ErrOrigin saying the date is in the future", err)
				}
				if len(rs) != 0 {
					t.Errorf("the mirror recorded %d removals, want none", len(rs))
				}
				return
			}
			if err != nil || len(rs) != 1 {
				t.Errorf("CatchUp = %v with %d removals, want the removal taken", err, len(rs))
			}
		})
	}
}

// TestNotAFeed: a URL that answers a web page, or no feed at all, is said
// in plain words at once (no retries), not as an answer cut short.
func TestNotAFeed(t *testing.T) {
	for _, tt := range []struct {
		name        string
		code        int
		contentType string
		says        string
	}{
		{"an HTML page", http.StatusOK, "text/html; charset=utf-8", "answered an HTML page (text/html), not a change feed"},
		{"a JSON document", http.StatusOK, "application/json", "answered application/json, not a change feed"},
		{"a 404 page", http.StatusNotFound, "text/html", "answered 404 Not Found with an HTML page (text/html), not a change feed"},
	} {
		t.Run(tt.name, func(t *testing.T) {
			var requests atomic.Int32
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				requests.Add(1)
				w.Header().Set("Content-Type", tt.contentType)
				w.WriteHeader(tt.code)
				w.Write([]byte("<!doctype html><title>Welcome</title><p>Our mailing lists\n"))
			}))
			defer srv.Close()
			_, err := newMirror(t, srv.URL+"/lists/", openStore(t), filepath.Join(t.TempDir(), "s.json"), nil).CatchUp(t.Context())
			if !errors.Is(err, mirror.ErrNotFeed) || !strings.Contains(err.Error(), tt.says) || !strings.Contains(err.Error(), "base URL") || strings.Contains(err.Error(), "cut short") {
				t.Fatalf("CatchUp = %v, want ErrNotFeed saying %q and asking for the base URL", err, tt.says)
			}
			if n := requests.Load(); n != 1 {
				t.Errorf("asked %d times, want once", n)
			}
		})
	}
}

// batchStore records the bytes of each Put.
type batchStore struct {
	store.Store
	mu    sync.Mutex
	sizes [][]int
}

func (b *batchStore) Put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	var sizes []int
	for _, m := range msgs {
		sizes = append(sizes, len(m.Raw))
	}
	b.mu.Lock()
	b.sizes = append(b.sizes, sizes)
	b.mu.Unlock()
	return b.Store.Put(ctx, msgs)
}

// TestLargeMessagesApart: a message that would take a batch past
// BatchBytes goes in a batch of its own, so that no batch holds more than
// BatchBytes or one message.
func TestLargeMessagesApart(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	lease := auth.Lease(1)
	var msgs []store.Stored
	for i := range 6 {
		size := 600 << 10
		if i%2 == 1 {
			size = 3 << 20
		}
		raw := append(storetest.Mail(fmt.Sprintf("big%d@example.org", i), "big"), bytes.Repeat([]byte("0123456789abcdef\n"), size/17)...)
		msgs = append(msgs, store.Stored{Number: auth.Number(t, 1, i), Raw: raw, Digest: store.DigestOf(raw), Added: time.Now().UTC().Truncate(time.Second)})
	}
	from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
		fw.Lease(lease)
		for _, m := range msgs {
			fw.Message(m)
		}
		fw.End("c1", false)
	})
	st := &batchStore{Store: openStore(t)}
	if _, err := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) { o.BatchBytes = 1 << 20 }).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	stored := 0
	for _, sizes := range st.sizes {
		total := 0
		for _, n := range sizes {
			total += n
		}
		if total > 1<<20 && len(sizes) > 1 {
			t.Errorf("a Put of %d messages, %d bytes (%v): more than BatchBytes", len(sizes), total, sizes)
		}
		stored += len(sizes)
	}
	if stored != len(msgs) {
		t.Errorf("%d messages stored, want %d", stored, len(msgs))
	}
}

// discardStore takes every message Put and keeps none: what a mirror
// holds in memory is then its own.
type discardStore struct {
	store.Store
	messages, bytes atomic.Int64
}

func (d *discardStore) Put(_ context.Context, msgs []store.Message) ([]store.Result, error) {
	res := make([]store.Result, len(msgs))
	for i, m := range msgs {
		res[i].Number = m.Number
		d.messages.Add(1)
		d.bytes.Add(int64(len(m.Raw)))
	}
	return res, nil
}

// TestEndlessMessages: an origin that sends 2 MiB messages without end
// (300 MiB before the mirror refuses the answer, more than the records
// asked for) keeps the mirror's heap under 200 MiB: the messages are
// handed on as they arrive, a few batches at most in flight.
func TestEndlessMessages(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	const size, limit = 2 << 20, 150
	raw := bytes.Repeat([]byte("0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcd\n"), size/64)
	var sent atomic.Int64
	from, _ := fakeOrigin(t, auth, func(r *http.Request, fw *changes.Writer, flush func()) {
		fw.Lease(auth.Lease(1))
		for seq := 0; seq < 16384; seq++ {
			// Each message its own: a Message-ID line in place of the first.
			copy(raw, fmt.Sprintf("Message-ID: <%08d@example.org>\n", seq))
			if fw.Message(store.Stored{Number: auth.Number(t, 1, seq), Raw: raw, Digest: store.DigestOf(raw), List: "l"}) != nil {
				return // the mirror hung up
			}
			sent.Add(1)
		}
	})
	st := &discardStore{Store: openStore(t)}
	m := newMirror(t, from, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) {
		o.Limit = limit
		o.BatchMessages = 0 // the defaults: 500 messages or 8 MiB a batch
	})
	var err error
	grown := heapGrowth(func() { _, err = m.CatchUp(t.Context()) })
	if !errors.Is(err, mirror.ErrOrigin) || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d records asked for", limit)) {
		t.Fatalf("CatchUp = %v, want ErrOrigin saying more than the %d records asked for", err, limit)
	}
	if n := st.messages.Load(); n < limit/2 {
		t.Errorf("the store got %d messages before the mirror gave up, want most of the %d read", n, limit)
	}
	t.Logf("the origin sent %d messages of %d MiB (%d MiB); the store got %d MiB; the heap grew by %d MiB at its peak",
		sent.Load(), size>>20, sent.Load()*size>>20, st.bytes.Load()>>20, grown>>20)
	// The origin's side of the test holds one message and its
	// connection's buffers; the mirror two batches of 8 MiB in flight,
	// the one being read and its decoder's.
	if grown > 200<<20 {
		t.Errorf("against an endless stream the heap grew by %d MiB, want under 200", grown>>20)
	}
}

// heapGrowth runs f and returns how far the live heap grew above what it
// was before, at its peak (sampled every 5 ms).
func heapGrowth(f func()) int64 {
	heap := func() int64 {
		var ms runtime.MemStats
		runtime.ReadMemStats(&ms)
		return int64(ms.HeapAlloc)
	}
	runtime.GC()
	before := heap()
	var peak int64
	done := make(chan struct{})
	sampled := make(chan struct{})
	go func() {
		defer close(sampled)
		for {
			peak = max(peak, heap())
			select {
			case <-done:
				return
			case <-time.After(5 * time.Millisecond):
			}
		}
	}()
	f()
	close(done)
	<-sampled
	return peak - before
}

// TestCompressedBomb: an origin whose answer, gzip or zstd, decodes to
// far more than it sends (4 MiB messages of one byte repeated, 240 MiB
// from a few hundred KiB) is read as it decodes: the mirror's heap grows
// by far less than what it decoded, and it refuses the answer past the
// records it asked for. (The answer is made of gzip members or zstd
// frames, one for each record's line and one, compressed once, for the
// message's bytes, which every message shares.)
func TestCompressedBomb(t *testing.T) {
	auth := storetest.NewAuthority(t, shuffle.Mix)
	const size, limit = 4 << 20, 60
	raw := bytes.Repeat([]byte("a"), size)
	copy(raw, "Message-ID: <bomb@example.org>\n\n")
	digest := store.DigestOf(raw)
	for _, enc := range []string{"gzip", "zstd"} {
		t.Run(enc, func(t *testing.T) {
			compress := func(p []byte) []byte {
				var b bytes.Buffer
				if enc == "gzip" {
					zw := gzip.NewWriter(&b)
					zw.Write(p)
					zw.Close()
					return b.Bytes()
				}
				zw, _ := zstd.NewWriter(nil)
				defer zw.Close()
				return zw.EncodeAll(p, nil)
			}
			body := compress(raw)
			var sent atomic.Int64 // compressed bytes
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				if !strings.Contains(r.Header.Get("Accept-Encoding"), enc) {
					t.Errorf("the mirror asks for %q, not %s", r.Header.Get("Accept-Encoding"), enc)
				}
				w.Header().Set("Content-Type", changes.ContentType)
				w.Header().Set("Content-Encoding", enc)
				send := func(p []byte) error {
					n, err := w.Write(p)
					sent.Add(int64(n))
					return err
				}
				// A record's line, as the feed's writer makes it.
				var line bytes.Buffer
				fw, err := changes.NewWriter(&line, auth.Binding())
				if err != nil {
					t.Error(err)
					return
				}
				fw.Lease(auth.Lease(1))
				fw.Flush()
				if send(compress(line.Bytes())) != nil {
					return
				}
				for seq := 0; seq < 16384; seq++ {
					line.Reset()
					fw.Message(store.Stored{Number: auth.Number(t, 1, seq), Raw: raw, Digest: digest, List: "l"})
					fw.Flush()
					head := line.Bytes()[:line.Len()-size-1]
					if send(compress(head)) != nil || send(body) != nil || send(compress([]byte("\n"))) != nil {
						return // the mirror hung up
					}
				}
			}))
			defer srv.Close()
			st := &discardStore{Store: openStore(t)}
			m := newMirror(t, srv.URL, st, filepath.Join(t.TempDir(), "s.json"), func(o *mirror.Options) {
				o.Limit = limit
				o.BatchMessages = 0
			})
			var err error
			grown := heapGrowth(func() { _, err = m.CatchUp(t.Context()) })
			if !errors.Is(err, mirror.ErrOrigin) || !strings.Contains(err.Error(), fmt.Sprintf("more than the %d records asked for", limit)) {
				t.Fatalf("CatchUp = %v, want ErrOrigin saying more than the %d records asked for", err, limit)
			}
			t.Logf("%s: the origin sent %d KiB; the store got %d messages, %d MiB; the heap grew by %d MiB at its peak",
				enc, sent.Load()>>10, st.messages.Load(), st.bytes.Load()>>20, grown>>20)
			if st.bytes.Load() < 200<<20 {
				t.Errorf("the store got %d MiB, want over 200: the test shows nothing", st.bytes.Load()>>20)
			}
			if grown > 200<<20 {
				t.Errorf("a compressed bomb grew the heap by %d MiB, want under 200", grown>>20)
			}
		})
	}
}
