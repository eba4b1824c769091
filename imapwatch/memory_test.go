package imapwatch

import (
	"bytes"
	"context"
	"fmt"
	"log/slog"
	"path/filepath"
	"runtime"
	"runtime/metrics"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// sizedMessage returns message i padded to exactly size bytes, so that
// mailboxes of different lengths differ only in the number of messages.
func sizedMessage(i, size int) []byte {
	head := fmt.Appendf(nil, "From: sender%d@example.org\r\nTo: list@example.org\r\nSubject: memory %08d\r\nMessage-ID: <mem%08d@example.org>\r\n\r\n", i, i, i)
	line := bytes.Repeat([]byte("x"), 76)
	b := head
	for len(b) < size {
		b = append(b, line[:min(len(line), max(size-len(b)-2, 0))]...)
		b = append(b, "\r\n"...)
	}
	return b[:size]
}

// heapFigures are Go heap measurements of one first pass, in bytes over
// the heap live before it.
type heapFigures struct {
	// PeakLive is the highest live heap a garbage collection found during
	// the pass: what the pass really holds at once.
	PeakLive int64
	// PeakAlloc is the highest heap in use, garbage not yet collected
	// included (it depends on GOGC as much as on the watcher).
	PeakAlloc int64
	// Retained is the live heap once the watcher, caught up, idles.
	Retained int64
}

// settle collects garbage twice: objects idle in a sync.Pool (bbolt keeps
// its page buffers in one) survive the first collection in the pool's
// victim cache and are only freed by the second.
func settle() {
	runtime.GC()
	runtime.GC()
}

// measureFirstPass archives a Dovecot mailbox of n messages of size bytes
// and measures the Go heap while it does.
func measureFirstPass(t testing.TB, n, size int) heapFigures {
	var msgs [][]byte
	for i := range n {
		msgs = append(msgs, sizedMessage(i, size))
	}
	srv := dovecottest.Start(t, dovecottest.Options{Populate: populate(msgs)})
	msgs = nil
	// A store that reaches 1,000 messages trains a compression dictionary
	// and keeps it, with its coders (about 2.5 MiB), from then on: a cost
	// once per store, not per message, which would blur the comparison of
	// a 1,000 and a 4,000-message mailbox. This store does not train.
	// Likewise the store keeps the index entries of its latest messages
	// in memory until it merges them (up to 65,536 by default): here it
	// merges every 256, so that what grows with the mailbox is the
	// watcher's alone.
	dir := t.TempDir()
	st, err := boltstore.Open(context.Background(), filepath.Join(dir, "messages.db"), boltstore.Options{Compression: store.Compression{TrainAt: -1}, RecentKeys: 256})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	a := newArchiveOn(t, dir, st)
	w := dovecotWatcher(t, srv, a, func(o *Options) { o.Logger = slog.New(slog.DiscardHandler) })

	samples := []metrics.Sample{{Name: "/gc/heap/live:bytes"}, {Name: "/memory/classes/heap/objects:bytes"}}
	read := func() (live, alloc int64) {
		metrics.Read(samples)
		return int64(samples[0].Value.Uint64()), int64(samples[1].Value.Uint64())
	}
	settle()
	base, _ := read()
	var f heapFigures
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() { // sample the heap while the pass runs
		defer wg.Done()
		tick := time.NewTicker(2 * time.Millisecond)
		defer tick.Stop()
		for {
			live, alloc := read()
			f.PeakLive, f.PeakAlloc = max(f.PeakLive, live-base), max(f.PeakAlloc, alloc-base)
			select {
			case <-stop:
				return
			case <-tick.C:
			}
		}
	}()
	r := start(t, w)
	r.waitIdle(t)
	close(stop)
	wg.Wait()
	settle()
	live, _ := read()
	f.Retained = live - base
	if err := r.stop(); err != nil {
		t.Fatal(err)
	}
	if got := a.count(t); got != int64(n) {
		t.Fatalf("store holds %d messages, want %d", got, n)
	}
	return f
}

// TestDovecotFirstPassMemory: the first pass over a mailbox four times
// longer keeps nothing more once done, and holds at most a fraction of
// the extra mail at any time: messages go through in bounded batches and
// none is kept. The figures are logged (go test -v).
//
// What the peak does hold is, above all, the store's write transaction
// (bbolt's dirty nodes and page buffers): its index keys are random
// (digests), so the number of leaves a batch touches grows with the
// database until it reaches the batch size, then stays there. The
// watcher's own share is one batch.
func TestDovecotFirstPassMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("archives 5,000 messages")
	}
	const n, size = 1000, 8192
	small := measureFirstPass(t, n, size)
	large := measureFirstPass(t, 4*n, size)
	mib := func(b int64) string { return fmt.Sprintf("%.2f MiB", float64(b)/(1<<20)) }
	for _, r := range []struct {
		n int
		f heapFigures
	}{{n, small}, {4 * n, large}} {
		t.Logf("%d messages of %d bytes: peak live heap %s, peak heap in use %s, retained when idle %s",
			r.n, size, mib(r.f.PeakLive), mib(r.f.PeakAlloc), mib(r.f.Retained))
	}
	extra := int64(3 * n) // messages in the larger mailbox only
	// Anything kept per message (a body, a Message-ID, a log record)
	// exceeds 64 bytes; a UID list (4 bytes a message) would not.
	if got, limit := large.Retained-small.Retained, extra*64; got > limit {
		t.Errorf("retained heap grew by %s from %d to %d messages, want at most %s (64 bytes a message)",
			mib(got), n, 4*n, mib(limit))
	}
	// Holding the extra messages' bodies at once would add 3n·size.
	if got, limit := large.PeakLive-small.PeakLive, extra*size/2; got > limit {
		t.Errorf("peak live heap grew by %s from %d to %d messages, want at most %s (half their bodies)",
			mib(got), n, 4*n, mib(limit))
	}
}
