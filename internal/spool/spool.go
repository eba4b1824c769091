// Package spool keeps the large bodies that readers are being sent in
// files that those readers share. The store gives a message whole: a
// reader who reads slowly, or not at all, would otherwise hold a copy of
// it in memory for as long as the connection lasts (32 stalled IMAP
// readers of a 51 MB message held 8.8 GB). With a spool, a body is
// written to an unnamed temporary file once, by the first reader, and
// every reader reads its own part of the file at its own pace.
//
// A body lingers a while after its last reader leaves (Options.Linger),
// so that a client reading a large message in pieces (IMAP partial
// FETCHes, as mail clients do, or a resumed download) does not have the
// store read and decompress the whole message for every piece.
package spool

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"runtime"
	"sync"
	"time"
)

// Defaults of Options.
const (
	DefaultLinger      = 30 * time.Second
	DefaultLingerBytes = 1 << 30
)

// Options configure Spools; zero values are the defaults.
type Options struct {
	// Dir holds the files, which have no name (they go when closed, and a
	// crash leaves nothing behind); "" is os.TempDir().
	Dir string
	// Fills bounds the bodies being written at once, since each holds its
	// message in memory meanwhile and its reading (decompressing a whole
	// message, for a client that may want one byte of it) is the cost;
	// 0 is half the CPUs, so that pages and other clients keep the rest.
	Fills int
	// Linger is how long a body is kept after its last reader leaves; 0 is
	// DefaultLinger, a negative value none.
	Linger time.Duration
	// LingerBytes bounds the size of the bodies kept with no reader; the
	// oldest go first. 0 is DefaultLingerBytes.
	LingerBytes int64
}

// Spools are the bodies being served, by key. Safe for concurrent use.
type Spools struct {
	opts Options
	fill chan struct{}

	mu      sync.Mutex
	m       map[string]*Body
	idle    []*Body // lingering, oldest first
	idleLen int64
	closed  bool
}

// Body is one spooled body, shared by its readers.
type Body struct {
	key  string
	done chan struct{} // closed once f, size, info and err are set
	f    *os.File
	size int64
	info any
	err  error

	refs  int         // readers holding it (under Spools.mu)
	timer *time.Timer // set while it lingers
}

// New returns empty spools.
func New(opts Options) *Spools {
	if opts.Fills <= 0 {
		opts.Fills = max(1, runtime.GOMAXPROCS(0)/2)
	}
	if opts.Linger == 0 {
		opts.Linger = DefaultLinger
	}
	if opts.LingerBytes <= 0 {
		opts.LingerBytes = DefaultLingerBytes
	}
	return &Spools{opts: opts, fill: make(chan struct{}, opts.Fills), m: map[string]*Body{}}
}

// ErrClosed: the spools were closed.
var ErrClosed = errors.New("spool: closed")

// Get returns the body of key, written by write if no reader has it now
// (nor had it lately): write writes the body and returns what the readers
// need to know of it (Info). Every Get that returns a nil error must be
// followed by one Release of the body it returned.
func (ss *Spools) Get(ctx context.Context, key string, write func(w io.Writer) (info any, err error)) (*Body, error) {
	ss.mu.Lock()
	if ss.closed {
		ss.mu.Unlock()
		return nil, ErrClosed
	}
	b := ss.m[key]
	first := b == nil
	if first {
		b = &Body{key: key, done: make(chan struct{})}
		ss.m[key] = b
	}
	ss.hold(b)
	ss.mu.Unlock()

	if first {
		ss.make(ctx, b, write)
	} else {
		select {
		case <-b.done:
		case <-ctx.Done():
			ss.Release(b)
			return nil, ctx.Err()
		}
	}
	if b.err != nil {
		err := b.err
		ss.Release(b)
		return nil, err
	}
	return b, nil
}

// hold counts one more reader of b, taking it off the lingering list.
func (ss *Spools) hold(b *Body) {
	if b.refs == 0 && b.timer != nil {
		b.timer.Stop()
		b.timer = nil
		ss.unidle(b)
	}
	b.refs++
}

func (ss *Spools) unidle(b *Body) {
	for i, o := range ss.idle {
		if o == b {
			ss.idle = append(ss.idle[:i], ss.idle[i+1:]...)
			ss.idleLen -= b.size
			return
		}
	}
}

// make writes b; its failure is b.err, which its readers are told and
// which is not kept for later readers.
func (ss *Spools) make(ctx context.Context, b *Body, write func(io.Writer) (any, error)) {
	defer close(b.done)
	select {
	case ss.fill <- struct{}{}:
		defer func() { <-ss.fill }()
	case <-ctx.Done():
		b.err = ctx.Err()
		return
	}
	f, err := os.CreateTemp(ss.opts.Dir, "chibrary-spool-*")
	if err != nil {
		b.err = fmt.Errorf("cannot spool a large body: %w", err)
		return
	}
	os.Remove(f.Name())
	bw := bufio.NewWriterSize(f, 64<<10)
	info, err := write(bw)
	if err == nil {
		err = bw.Flush()
	}
	var size int64
	if err == nil {
		size, err = f.Seek(0, io.SeekCurrent)
	}
	if err != nil {
		f.Close()
		b.err = err
		return
	}
	b.f, b.size, b.info = f, size, info
}

// Release lets b go: once it has no reader it lingers, then its file is
// closed (at once if it failed, or lingering is off).
func (ss *Spools) Release(b *Body) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if b.refs--; b.refs > 0 {
		return
	}
	if b.err != nil || b.f == nil || ss.closed || ss.opts.Linger < 0 || b.size > ss.opts.LingerBytes {
		ss.drop(b)
		return
	}
	ss.idle = append(ss.idle, b)
	ss.idleLen += b.size
	b.timer = time.AfterFunc(ss.opts.Linger, func() {
		ss.mu.Lock()
		defer ss.mu.Unlock()
		if b.refs == 0 && b.timer != nil {
			b.timer = nil
			ss.unidle(b)
			ss.drop(b)
		}
	})
	for ss.idleLen > ss.opts.LingerBytes && len(ss.idle) > 0 {
		old := ss.idle[0]
		old.timer.Stop()
		old.timer = nil
		ss.unidle(old)
		ss.drop(old)
	}
}

// drop forgets b and closes its file; b has no reader.
func (ss *Spools) drop(b *Body) {
	if ss.m[b.key] == b {
		delete(ss.m, b.key)
	}
	if b.f != nil {
		b.f.Close()
	}
}

// Close closes the lingering bodies' files; those still read are closed
// when their last reader releases them. Get fails from now on.
func (ss *Spools) Close() error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	ss.closed = true
	for _, b := range ss.idle {
		b.timer.Stop()
		b.timer = nil
		ss.drop(b)
	}
	ss.idle, ss.idleLen = nil, 0
	return nil
}

// Size is the body's length in bytes.
func (b *Body) Size() int64 { return b.size }

// Info is what the body's writer returned.
func (b *Body) Info() any { return b.info }

// Section returns a reader of n bytes of the body from off (cut at its
// end), independent of every other reader's.
func (b *Body) Section(off, n int64) *io.SectionReader {
	off = min(max(off, 0), b.size)
	n = min(max(n, 0), b.size-off)
	return io.NewSectionReader(b.f, off, n)
}

// Open returns a reader of the whole body.
func (b *Body) Open() *io.SectionReader { return b.Section(0, b.size) }
