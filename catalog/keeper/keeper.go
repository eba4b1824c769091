// Package keeper owns an archive's catalog while it is served: it opens
// it, follows the store into it, rebuilds it when it is found damaged,
// deleted or replaced, and swaps the new one in. HTTP, IMAP and NNTP all
// reach the catalog through it (Keeper.Current), so that a rebuild is seen
// by every protocol at once.
//
// A catalog swapped out is closed once its last reader gives it back:
// Current counts the readers of each catalog, and a catalog the keeper
// retired is closed by whichever of the keeper and its readers lets go
// last.
package keeper

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/store"
)

// Options configure a Keeper. The zero value keeps no catalog: Current
// returns nil.
type Options struct {
	// Logger receives what the keeper does; nil discards it.
	Logger *slog.Logger
	// Path is the catalog's file, which the keeper then keeps by itself
	// while it runs (Start): it opens it when it can (for writing, else
	// read-only), rebuilds it from the store when it finds it damaged,
	// deleted or replaced (writing), and opens the new file when another
	// process replaced it (read-only). "" keeps Catalog as it is.
	Path string
	// Catalog, if set, is served first. The caller opened it and closes
	// it after Start's stop has returned and the readers are done; the keeper
	// closes only the catalogs it opened itself.
	Catalog *catalog.Catalog
	// Follow, when set, makes Start follow the store into the catalog
	// served when it is writable (catalog.Follow). nil: the catalog is
	// kept current by someone else, or not at all.
	Follow *catalog.FollowOptions
}

// Progress is how far a build of the catalog has gone.
type Progress struct {
	// Read is how many messages have been indexed, of Total in the store.
	Read, Total int64
}

// Status is what the keeper is doing, for the pages that say why the
// catalog cannot be read and for health checks.
type Status struct {
	// Rebuilding is set while the catalog is built again from the
	// store: none is served meanwhile (Current returns nil).
	Rebuilding *Progress
	// Building is set while the catalog served, which started empty, is
	// first built: it answers, but not everything is in it yet.
	Building *Progress
	// Broken says why the catalog served cannot be used any more ("" when
	// it can): the operator was told in the log.
	Broken string
}

// Keeper keeps one catalog file. It is safe for concurrent use.
type Keeper struct {
	st   store.Store
	opts Options
	log  *slog.Logger

	cur        atomic.Pointer[held]
	rebuilding atomic.Pointer[build]
	building   atomic.Pointer[build]
	broken     atomic.Pointer[string]
	// damaged is the catalog found damaged, and wake tells run.
	damaged atomic.Pointer[catalog.Catalog]
	wake    chan struct{}

	// The state of Start's goroutine.
	unfollow func() // of the catalog served, when it writes it
	failures int    // in a row, for the backoff
	next     time.Time
	said     string // the last problem logged, not repeated
	// stale is a catalog another process writes, dropped: opened again
	// once that process has replaced its file.
	stale *held
}

// held is a catalog and the count of those holding it: the keeper, while
// it is the one served, and each reader between Current and its release.
type held struct {
	c     *catalog.Catalog
	refs  atomic.Int64
	owned bool // opened by the keeper, which closes it
}

// build is the progress of a build, updated while it runs.
type build struct {
	read  atomic.Int64
	total int64
}

func (b *build) progress() *Progress {
	if b == nil {
		return nil
	}
	return &Progress{Read: b.read.Load(), Total: b.total}
}

// New returns a keeper of the catalog for the archive st (see Options).
// It does no I/O: Start opens what Options.Path names.
func New(st store.Store, opts Options) *Keeper {
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	k := &Keeper{st: st, opts: opts, log: opts.Logger, wake: make(chan struct{}, 1)}
	if opts.Catalog != nil {
		k.swap(&held{c: opts.Catalog})
	}
	return k
}

// Fixed returns a keeper that serves c as it is (nil: no catalog), for
// tests and tools that neither follow nor rebuild it; Start need not be
// called.
func Fixed(c *catalog.Catalog) *Keeper { return New(nil, Options{Catalog: c}) }

// Open is New, then the first opening of the catalog at opts.Path (when
// opts.Catalog is nil), so that it is served from the first request on.
// When it cannot be opened the keeper starts without one, says so in the
// log, and Start keeps trying (rebuilding a damaged one).
func Open(ctx context.Context, st store.Store, opts Options) *Keeper {
	k := New(st, opts)
	if opts.Catalog != nil {
		return k
	}
	path, log := opts.Path, k.log
	if path == "" {
		log.Warn("no catalog: give --catalog PATH with a Riak store; lists, months and threads answer 503, message pages work")
		return k
	}
	c, err := OpenCatalog(ctx, path, log)
	switch {
	case errors.Is(err, catalog.ErrDamaged):
		log.Warn("the catalog is damaged: it is built again from the store; meanwhile lists, months and threads answer 503, message pages work", "catalog", path, "err", err)
		return k
	case err != nil:
		log.Warn("no catalog: lists, months and threads answer 503, message pages work", "catalog", path, "err", err)
		return k
	}
	if c.Writable() && opts.Follow != nil {
		log.Info("catalog opened: following the store into it", "catalog", path)
	}
	k.swap(&held{c: c, owned: true})
	return k
}

// OpenCatalog opens the catalog at path the way `resolver serve` uses it:
// for writing (the keeper then follows the store into it) when it can;
// read-only when another process writes it (catalog.ErrLocked: another
// resolver follows it, or a reindex runs) or when the archive's directory
// cannot be written but a catalog is there. It returns an error when
// there is no catalog it can serve. The notes it logs say which case
// this is.
func OpenCatalog(ctx context.Context, path string, log *slog.Logger) (*catalog.Catalog, error) {
	c, err := catalog.Open(ctx, path, catalog.Options{Logger: log})
	if err == nil {
		return c, nil
	}
	if errors.Is(err, catalog.ErrDamaged) {
		// Not to be read: its writer builds it again.
		return nil, err
	}
	// On a read-only file system nothing can change the catalog, and
	// SQLite cannot make the files a reader of a live one needs.
	immutable := errors.Is(err, syscall.EROFS)
	ro, rerr := catalog.Open(ctx, path, catalog.Options{ReadOnly: true, Immutable: immutable, Logger: log})
	if rerr != nil {
		return nil, err
	}
	switch {
	case immutable:
		log.Info("the catalog is on a read-only file system: serving it as it is", "catalog", path)
	case errors.Is(err, catalog.ErrLocked):
		log.Warn("another process writes the catalog: serving it read-only, as that process keeps it up to date", "catalog", path)
	default:
		log.Warn("cannot write the catalog: serving it read-only, as it is; it will not follow the store", "catalog", path, "err", err)
	}
	return ro, nil
}

// Path is the catalog's file (Options.Path): "" when the keeper only
// serves what it was given.
func (k *Keeper) Path() string { return k.opts.Path }

// Current returns the catalog served now, or nil when there is none
// (none could be opened, or it is being rebuilt). The caller calls
// release once done with it, and not later than that reads it: a
// catalog swapped out meanwhile is closed once its last reader has
// released it. release may be called more than once.
func (k *Keeper) Current() (c *catalog.Catalog, release func()) {
	for {
		h := k.cur.Load()
		if h == nil {
			return nil, func() {}
		}
		n := h.refs.Load()
		if n <= 0 {
			// Retired since loaded: cur has moved on already.
			continue
		}
		if h.refs.CompareAndSwap(n, n+1) {
			var once sync.Once
			return h.c, func() { once.Do(func() { h.unref() }) }
		}
	}
}

func (h *held) unref() {
	if h.refs.Add(-1) == 0 && h.owned {
		h.c.Close()
	}
}

// swap serves h (nil: none) in the place of the catalog served, which
// is closed once its last reader is done.
func (k *Keeper) swap(h *held) {
	if h != nil {
		h.refs.Store(1)
	}
	if old := k.cur.Swap(h); old != nil {
		old.unref()
	}
}

// Status says what the keeper is doing.
func (k *Keeper) Status() Status {
	var s Status
	s.Rebuilding = k.rebuilding.Load().progress()
	s.Building = k.building.Load().progress()
	if b := k.broken.Load(); b != nil {
		s.Broken = *b
	}
	return s
}

// Notice tells the keeper that reading c failed with err: when err says
// the catalog is damaged (catalog.ErrDamaged), the keeper builds it
// again (with Options.Path) at once. Other errors are the reader's.
func (k *Keeper) Notice(c *catalog.Catalog, err error) {
	if c == nil || !errors.Is(err, catalog.ErrDamaged) {
		return
	}
	if k.damaged.Swap(c) != c {
		select {
		case k.wake <- struct{}{}:
		default:
		}
	}
}

// keepInterval is how often the keeper looks at the catalog file.
const keepInterval = time.Second

// Start keeps the catalog until ctx is done or stop is called: it
// follows the store into the catalog served (Options.Follow), and, with
// Options.Path, opens, rebuilds and swaps it (see Options.Path). The
// catalog served when Start returns is followed already (Status says
// whether it is being built). stop stops following, stops serving the
// catalog, and waits; the catalogs the keeper opened are closed as their
// last readers release them. Start is called once.
func (k *Keeper) Start(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	if c, release := k.Current(); c != nil {
		k.serve(ctx, c)
		release()
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		k.run(ctx)
	}()
	return sync.OnceFunc(func() {
		cancel()
		<-done
		k.stopFollowing()
		if k.stale != nil {
			k.stale.unref()
			k.stale = nil
		}
		k.swap(nil)
	})
}

// run keeps the catalog file (Options.Path) until ctx is done.
func (k *Keeper) run(ctx context.Context) {
	if k.opts.Path == "" {
		<-ctx.Done()
		return
	}
	tick := time.NewTicker(keepInterval)
	defer tick.Stop()
	for {
		k.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-k.wake:
		}
	}
}

// serve follows the store into c, the catalog served, if it is writable
// and Options.Follow asks for it.
func (k *Keeper) serve(ctx context.Context, c *catalog.Catalog) {
	k.damaged.Store(nil)
	k.broken.Store(nil)
	if c.Writable() && k.opts.Follow != nil {
		k.unfollow = k.follow(ctx, c)
	}
}

func (k *Keeper) stopFollowing() {
	if k.unfollow != nil {
		k.unfollow()
		k.unfollow = nil
	}
	k.building.Store(nil)
}

// follow follows the store into c (writable) until ctx is done or the
// returned function is called, which waits for it.
func (k *Keeper) follow(ctx context.Context, c *catalog.Catalog) (stop func()) {
	// A catalog that starts empty is being built: its pages would say
	// "no such list" until the first pass over the store is done, so
	// Status says it is being built until then.
	opts := *k.opts.Follow
	if st, err := c.Stats(ctx); err != nil || st.Messages == 0 {
		if n, err := k.st.Count(ctx); err != nil || n > 0 {
			b := &build{total: n}
			k.building.Store(b)
			start := time.Now()
			k.log.Info("building the catalog from the store; its pages answer 503 until it is done", "catalog", c.Path(), "messages", n)
			progress, caughtUp := opts.Progress, opts.CaughtUp
			opts.Progress = func(read int) {
				b.read.Store(int64(read))
				if progress != nil {
					progress(read)
				}
			}
			opts.CaughtUp = func(indexed int) {
				k.building.CompareAndSwap(b, nil)
				k.log.Info("the catalog is ready", "catalog", c.Path(), "messages", indexed, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
				if caughtUp != nil {
					caughtUp(indexed)
				}
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		k.log.Info("following the store into the catalog", "catalog", c.Path())
		err := c.Follow(ctx, k.st, opts)
		switch {
		case err == nil:
		case errors.Is(err, catalog.ErrDamaged) && k.opts.Path != "":
			k.Notice(c, err)
		default:
			k.log.Error("the catalog stopped following the store; its pages answer 503", "catalog", c.Path(), "err", err)
			msg := err.Error()
			k.broken.Store(&msg)
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// check looks at the catalog served, and acts.
func (k *Keeper) check(ctx context.Context) {
	h := k.cur.Load() // only run swaps it
	switch {
	case h == nil:
		if time.Now().Before(k.next) || k.stale != nil && !k.stale.c.Replaced() {
			return
		}
		if k.stale != nil {
			k.stale.unref()
			k.stale = nil
		}
		k.open(ctx)
	case k.damaged.Load() == h.c:
		k.replace(ctx, h, "the catalog is damaged")
	case h.c.Replaced():
		k.replace(ctx, h, "the catalog file was deleted or replaced while it was served")
	}
}

// drop stops serving the catalog served now; the caller holds h, one
// reference of its own.
func (k *Keeper) drop(h *held) {
	h.refs.Add(1)
	k.stopFollowing()
	k.swap(nil)
}

// replace serves a catalog in h's stead: its file rebuilt, when it
// writes it; else (another process writes it) the file at the path now.
func (k *Keeper) replace(ctx context.Context, h *held, why string) {
	k.drop(h)
	c := h.c
	if !c.Writable() {
		k.log.Warn(why+": it is opened again once the process that writes it has replaced it", "catalog", k.opts.Path)
		k.stale = h // released once opened again
		return
	}
	k.log.Warn(why+": building it again from the store, beside it; message pages are served meanwhile, the catalog's pages answer 503", "catalog", k.opts.Path)
	b := k.startRebuild(ctx)
	start := time.Now()
	nc, n, err := c.RebuildFrom(ctx, k.st, catalog.SyncOptions{Progress: func(read int) { b.read.Store(int64(read)) }})
	h.unref() // closed now, or by its last reader
	k.rebuilding.Store(nil)
	if err != nil {
		k.failed(ctx, "cannot rebuild the catalog", err)
		return
	}
	k.log.Info("catalog rebuilt", "catalog", k.opts.Path, "messages", n, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	k.failures = 0
	k.swap(&held{c: nc, owned: true})
	k.serve(ctx, nc)
}

// open opens the catalog at the path: for writing, rebuilt first if it
// is damaged; read-only if another process writes it.
func (k *Keeper) open(ctx context.Context) {
	path := k.opts.Path
	c, err := catalog.Open(ctx, path, catalog.Options{Logger: k.log})
	if errors.Is(err, catalog.ErrDamaged) {
		k.log.Warn("the catalog is damaged: building it again from the store, beside it; message pages are served meanwhile, the catalog's pages answer 503", "catalog", path, "err", err)
		b := k.startRebuild(ctx)
		start := time.Now()
		var n int
		c, n, err = catalog.RebuildOpen(ctx, path, k.st, catalog.SyncOptions{Progress: func(read int) { b.read.Store(int64(read)) }}, catalog.Options{Logger: k.log})
		k.rebuilding.Store(nil)
		if err == nil {
			k.log.Info("catalog rebuilt", "catalog", path, "messages", n, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
		}
	}
	if errors.Is(err, catalog.ErrLocked) {
		c, err = catalog.Open(ctx, path, catalog.Options{ReadOnly: true, Logger: k.log})
		if err == nil {
			k.log.Info("another process writes the catalog: serving it read-only", "catalog", path)
		}
	}
	if err != nil {
		k.failed(ctx, "cannot open the catalog; its pages answer 503, message pages work", err)
		return
	}
	k.failures, k.said = 0, ""
	k.swap(&held{c: c, owned: true})
	k.serve(ctx, c)
}

// startRebuild shows a rebuild's progress in Status.
func (k *Keeper) startRebuild(ctx context.Context) *build {
	b := &build{}
	if n, err := k.st.Count(ctx); err == nil {
		b.total = n
	}
	k.rebuilding.Store(b)
	return b
}

// failed logs err (once while it stays the same) and waits longer
// before the next attempt, up to a minute.
func (k *Keeper) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	k.failures++
	k.next = time.Now().Add(min(time.Duration(1<<min(k.failures, 6))*time.Second, time.Minute))
	if msg := what + ": " + err.Error(); msg != k.said {
		k.said = msg
		k.log.Warn(what, "catalog", k.opts.Path, "err", err, "retry_in", time.Until(k.next).Round(time.Second))
	}
}
