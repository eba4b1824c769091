package resolver

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/chibrary/chibrary/store"
)

// spoolThreshold is the largest body (a raw message, an attachment)
// written to a reader from memory. A larger one is written first to a
// temporary file, which every reader of that body at the time shares,
// and served from there: the store gives a message whole, and a reader
// who reads slowly would otherwise hold its copy (ten readers of a 44
// MB attachment took the resolver from 0.38 to 2.0 GB).
const spoolThreshold = 1 << 20

// spools are the large bodies being served, by route and call number.
type spools struct {
	dir string
	// fill bounds the bodies being written to files at once (each holds
	// its message in memory meanwhile, and decodes it).
	fill chan struct{}

	mu sync.Mutex
	m  map[string]*spool
}

// spool is one body and the readers that share it.
type spool struct {
	done chan struct{} // closed once the fields below are set
	// f holds the body (size bytes), or is nil: not spooled (the body was
	// small, or could not be had; each reader then fends for itself).
	f      *os.File
	size   int64
	digest store.Digest
	info   any // what the route needs to answer (e.g. the attachment)
	err    error
	refs   int
	// While its first reader writes it: cancel stops the writing, and
	// firstGone says that reader went away (see make).
	cancel    context.CancelFunc
	firstGone bool
}

func newSpools(dir string, fills int) *spools {
	return &spools{dir: dir, fill: make(chan struct{}, max(1, fills)), m: map[string]*spool{}}
}

// join returns the spool of key and whether this reader is its first:
// the first sets it up (make) for the others, who wait for it (wait).
// release lets it go: the last reader closes its file.
func (ss *spools) join(key string) (sp *spool, first bool, release func()) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	sp = ss.m[key]
	if sp == nil {
		sp = &spool{done: make(chan struct{})}
		ss.m[key] = sp
		first = true
	}
	sp.refs++
	return sp, first, func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		sp.refs--
		if sp.refs == 1 && sp.firstGone && sp.cancel != nil {
			// Only the writer is left, and its reader went away: nobody
			// wants the body.
			sp.cancel()
		}
		if sp.refs == 0 {
			if ss.m[key] == sp {
				delete(ss.m, key)
			}
			if sp.f != nil {
				sp.f.Close()
			}
		}
	}
}

// wait waits until the first reader has set sp up; false if ctx ended.
func (sp *spool) wait(ctx context.Context) bool {
	select {
	case <-sp.done:
		return true
	case <-ctx.Done():
		return false
	}
}

// skip sets sp up as not spooled (its first reader serves from memory,
// or failed).
func (sp *spool) skip() { close(sp.done) }

// make sets sp up: write writes the body to the file, and returns the
// route's info and an error. The file has no name: it goes when closed,
// and a crash leaves nothing behind.
//
// ctx is the first reader's. The body is written on when that reader
// goes away while others wait for it, and stopped (write's context is
// cancelled) once no reader is left: a client that asks for a month's
// mbox.gz and hangs up at once, again and again, costs the compression of
// what was written until it hung up, not of the whole month each time.
func (ss *spools) make(ctx context.Context, sp *spool, digest store.Digest, write func(context.Context, io.Writer) (any, error)) error {
	defer close(sp.done)
	sp.digest = digest
	wctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	defer cancel()
	ss.mu.Lock()
	sp.cancel = cancel
	ss.mu.Unlock()
	defer context.AfterFunc(ctx, func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		sp.firstGone = true
		if sp.refs == 1 {
			cancel()
		}
	})()
	select {
	case ss.fill <- struct{}{}:
		defer func() { <-ss.fill }()
	case <-ctx.Done():
		sp.err = ctx.Err()
		return sp.err
	}
	f, err := os.CreateTemp(ss.dir, "chibrary-spool-*")
	if err != nil {
		sp.err = fmt.Errorf("cannot spool a large body: %w", err)
		return sp.err
	}
	os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 64<<10)
	info, err := write(wctx, bw)
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekCurrent)
	}
	if err != nil {
		f.Close()
		sp.info, sp.err = info, err
		return err
	}
	sp.f, sp.size, sp.info = f, size, info
	return nil
}

// serve writes sp's body, as http.ServeContent does (ranges, HEAD), with
// the header fields already set on w.
func (sp *spool) serve(w http.ResponseWriter, r *http.Request) {
	http.ServeContent(w, r, "", time.Time{}, io.NewSectionReader(sp.f, 0, sp.size))
}
