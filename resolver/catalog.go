package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/catalog"
)

// OpenCatalog opens the catalog at path the way `resolver serve` uses it:
// for writing (the server then follows the store into it) when it can;
// read-only when another process writes it (catalog.ErrLocked: another
// resolver follows it, or a reindex runs) or when the archive's directory
// cannot be written but a catalog is there. It returns an error when
// there is no catalog it can serve; the caller then serves message pages
// without one (Options.Catalog nil). The notes it logs say which case
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

// catalogFor returns the catalog for a page that needs one, or answers
// 503 (with Retry-After) when there is none, when it cannot be used, or
// while it is first being built.
func (s *Server) catalogFor(w http.ResponseWriter, r *http.Request) (*catalog.Catalog, bool) {
	c := s.catalog()
	switch {
	case c == nil && s.rebuilding.Load() != nil:
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, s.rebuilding.Load().String()+"; they will be here when it is done. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case c == nil:
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive has no index of its lists, months and threads right now, so they cannot be shown. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case s.catalogBroken.Load() != nil:
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive's index of its lists, months and threads cannot be used (the operator has been told why), so they cannot be shown right now. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case s.building.Load() != nil:
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, s.building.Load().String()+"; they will be here when it is done. Every message is already here: open one by its call number or Message-ID.")
		return nil, false
	}
	return c, true
}

// failCatalog answers for an error of a catalog query: notFound for
// catalog.ErrNotFound, 503 when the reader gave up or the catalog was
// busy, 500 otherwise.
func (s *Server) failCatalog(w http.ResponseWriter, r *http.Request, err error, notFound string) {
	switch {
	case errors.Is(err, catalog.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, notFound)
	case errors.Is(err, catalog.ErrDamaged):
		s.noticeDamage(s.catalog(), err)
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive's index of its lists, months and threads is damaged, and is being built again from the messages; they will be back shortly. Every message is still here: open one by its call number or Message-ID.")
	case errors.Is(err, context.Canceled), busy(err), r.Context().Err() != nil:
		// Busy, or the reader went away (SQLite says "interrupted").
		s.fail(w, r, http.StatusServiceUnavailable, "The archive is busy; try again in a moment.")
	default:
		s.log.Error("catalog error", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The archive could not read its index of lists, months and threads.")
	}
}

// catalog returns the catalog served now, or nil.
func (s *Server) catalog() *catalog.Catalog { return s.cat.Load() }

// noticeDamage tells the keeper (Options.CatalogPath) that c is damaged,
// if err says so.
func (s *Server) noticeDamage(c *catalog.Catalog, err error) {
	if c == nil || !errors.Is(err, catalog.ErrDamaged) {
		return
	}
	if s.damaged.Swap(c) != c {
		select {
		case s.wake <- struct{}{}:
		default:
		}
	}
}

// rebuild is the progress of a build of the catalog: its first
// (Server.building), or a rebuild (Server.rebuilding).
type rebuild struct {
	read  atomic.Int64
	total int64
	first bool
}

func (b *rebuild) String() string {
	again := " again"
	if b.first {
		again = ""
	}
	// Said to readers: the index of lists, months and threads, not "the
	// catalog", which is the operator's word.
	return fmt.Sprintf("The index of this archive's lists, months and threads is being built%s (%d of %d messages indexed)", again, b.read.Load(), b.total)
}

// follow runs the catalog's follower until ctx is done, when the catalog
// is writable and Options.Follow asks for it. The returned function stops
// it and waits.
func (s *Server) follow(ctx context.Context) (stop func()) {
	c := s.catalog()
	if c == nil || s.opts.Follow == nil || !c.Writable() {
		return func() {}
	}
	return s.followCatalog(ctx, c)
}

// followCatalog follows the store into c (writable) until ctx is done or
// the returned function is called, which waits for it.
func (s *Server) followCatalog(ctx context.Context, c *catalog.Catalog) (stop func()) {
	// A catalog that starts empty is being built: its pages would say
	// "no such list" until the first pass over the store is done, so they
	// answer 503 with the progress until then instead.
	opts := *s.opts.Follow
	if st, err := c.Stats(ctx); err != nil || st.Messages == 0 {
		if n, err := s.st.Count(ctx); err != nil || n > 0 {
			b := &rebuild{total: n, first: true}
			s.building.Store(b)
			start := time.Now()
			s.log.Info("building the catalog from the store; its pages answer 503 until it is done", "catalog", c.Path(), "messages", n)
			opts.Progress = func(read int) { b.read.Store(int64(read)) }
			opts.CaughtUp = func(indexed int) {
				s.building.CompareAndSwap(b, nil)
				s.log.Info("the catalog is ready", "catalog", c.Path(), "messages", indexed, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
			}
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		s.log.Info("following the store into the catalog", "catalog", c.Path())
		err := c.Follow(ctx, s.st, opts)
		switch {
		case err == nil:
		case errors.Is(err, catalog.ErrDamaged) && s.opts.CatalogPath != "":
			s.noticeDamage(c, err)
		default:
			s.log.Error("the catalog stopped following the store; its pages answer 503", "catalog", c.Path(), "err", err)
			msg := err.Error()
			s.catalogBroken.Store(&msg)
		}
	})
	return func() {
		cancel()
		wg.Wait()
	}
}

// keepInterval is how often the keeper looks at the catalog file.
const keepInterval = time.Second

// keep keeps the catalog at Options.CatalogPath until ctx is done (see
// Options.CatalogPath), following the store into it when it writes it.
// The returned function stops it, waits, and closes the catalogs it
// opened.
func (s *Server) keep(ctx context.Context) (stop func()) {
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan struct{})
	go func() {
		defer close(done)
		k := keeper{s: s, path: s.opts.CatalogPath}
		k.run(ctx)
	}()
	return func() {
		cancel()
		<-done
	}
}

// keeper is the state of keep.
type keeper struct {
	s        *Server
	path     string
	unfollow func()             // of the catalog served, when it writes it
	opened   []*catalog.Catalog // by the keeper, closed at the end
	failures int                // in a row, for the backoff
	next     time.Time          // no attempt to open before
	said     string             // the last problem logged, not repeated
	// stale is a catalog another process writes, dropped: opened again
	// once that process has replaced its file.
	stale *catalog.Catalog
}

func (k *keeper) run(ctx context.Context) {
	s := k.s
	if c := s.catalog(); c != nil {
		k.serve(ctx, c)
	}
	defer func() {
		if k.unfollow != nil {
			k.unfollow()
		}
		for _, c := range k.opened {
			c.Close()
		}
	}()
	tick := time.NewTicker(keepInterval)
	defer tick.Stop()
	for {
		k.check(ctx)
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		case <-s.wake:
		}
	}
}

// serve serves c, following the store into it if it is writable.
func (k *keeper) serve(ctx context.Context, c *catalog.Catalog) {
	s := k.s
	s.damaged.Store(nil)
	s.catalogBroken.Store(nil)
	s.cat.Store(c)
	if c.Writable() {
		k.unfollow = s.followCatalog(ctx, c)
	}
}

// drop stops serving the catalog served now.
func (k *keeper) drop() {
	if k.unfollow != nil {
		k.unfollow()
		k.unfollow = nil
	}
	k.s.cat.Store(nil)
	k.s.building.Store(nil)
}

// check looks at the catalog served, and acts.
func (k *keeper) check(ctx context.Context) {
	s := k.s
	c := s.catalog()
	switch {
	case c == nil:
		if time.Now().Before(k.next) || k.stale != nil && !k.stale.Replaced() {
			return
		}
		k.stale = nil
		k.open(ctx)
	case s.damaged.Load() == c:
		k.replace(ctx, c, "the catalog is damaged")
	case c.Replaced():
		k.replace(ctx, c, "the catalog file was deleted or replaced while it was served")
	}
}

// replace serves a catalog in c's stead: c's file rebuilt, when it
// writes it; else (another process writes it) the file at the path now.
func (k *keeper) replace(ctx context.Context, c *catalog.Catalog, why string) {
	s := k.s
	k.drop()
	if !c.Writable() {
		s.log.Warn(why+": it is opened again once the process that writes it has replaced it", "catalog", k.path)
		k.opened = append(k.opened, c) // closed at the end: requests may still read it
		k.stale = c
		return
	}
	s.log.Warn(why+": building it again from the store, beside it; message pages are served meanwhile, the catalog's pages answer 503", "catalog", k.path)
	b := k.startRebuild(ctx)
	start := time.Now()
	nc, n, err := c.RebuildFrom(ctx, s.st, catalog.SyncOptions{Progress: func(read int) { b.read.Store(int64(read)) }})
	s.rebuilding.Store(nil)
	k.opened = append(k.opened, c)
	if err != nil {
		k.failed(ctx, "cannot rebuild the catalog", err)
		return
	}
	s.log.Info("catalog rebuilt", "catalog", k.path, "messages", n, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
	k.failures = 0
	k.opened = append(k.opened, nc)
	k.serve(ctx, nc)
}

// open opens the catalog at the path: for writing, rebuilt first if it
// is damaged; read-only if another process writes it.
func (k *keeper) open(ctx context.Context) {
	s := k.s
	c, err := catalog.Open(ctx, k.path, catalog.Options{Logger: s.log})
	if errors.Is(err, catalog.ErrDamaged) {
		s.log.Warn("the catalog is damaged: building it again from the store, beside it; message pages are served meanwhile, the catalog's pages answer 503", "catalog", k.path, "err", err)
		b := k.startRebuild(ctx)
		start := time.Now()
		var n int
		c, n, err = catalog.RebuildOpen(ctx, k.path, s.st, catalog.SyncOptions{Progress: func(read int) { b.read.Store(int64(read)) }}, catalog.Options{Logger: s.log})
		s.rebuilding.Store(nil)
		if err == nil {
			s.log.Info("catalog rebuilt", "catalog", k.path, "messages", n, "seconds", time.Since(start).Round(time.Millisecond).Seconds())
		}
	}
	if errors.Is(err, catalog.ErrLocked) {
		c, err = catalog.Open(ctx, k.path, catalog.Options{ReadOnly: true, Logger: s.log})
		if err == nil {
			s.log.Info("another process writes the catalog: serving it read-only", "catalog", k.path)
		}
	}
	if err != nil {
		k.failed(ctx, "cannot open the catalog; its pages answer 503, message pages work", err)
		return
	}
	k.failures, k.said = 0, ""
	k.opened = append(k.opened, c)
	k.serve(ctx, c)
}

// startRebuild shows a rebuild's progress on the catalog's pages.
func (k *keeper) startRebuild(ctx context.Context) *rebuild {
	b := &rebuild{}
	if n, err := k.s.st.Count(ctx); err == nil {
		b.total = n
	}
	k.s.rebuilding.Store(b)
	return b
}

// failed logs err (once while it stays the same) and waits longer
// before the next attempt, up to a minute.
func (k *keeper) failed(ctx context.Context, what string, err error) {
	if ctx.Err() != nil {
		return
	}
	k.failures++
	k.next = time.Now().Add(min(time.Duration(1<<min(k.failures, 6))*time.Second, time.Minute))
	if msg := what + ": " + err.Error(); msg != k.said {
		k.said = msg
		k.s.log.Warn(what, "catalog", k.path, "err", err, "retry_in", time.Until(k.next).Round(time.Second))
	}
}
