package resolver

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"sync"
	"syscall"

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
	c := s.opts.Catalog
	switch {
	case c == nil:
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive has no catalog, so its lists, months and threads cannot be shown right now. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case s.catalogBroken.Load() != nil:
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive's catalog cannot be used (the operator has been told why), so its lists, months and threads cannot be shown right now. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case s.building.Load():
		if c.Status().Synced.IsZero() {
			msg := "The catalog of this archive is being built; lists, months and threads will be here shortly."
			if st, err := c.Stats(r.Context()); err == nil && st.Messages > 0 {
				msg = fmt.Sprintf("The catalog of this archive is being built (%d messages indexed so far); lists, months and threads will be here shortly.", st.Messages)
			}
			w.Header().Set("Retry-After", "5")
			s.fail(w, r, http.StatusServiceUnavailable, msg)
			return nil, false
		}
		s.building.Store(false)
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
	case errors.Is(err, context.Canceled), busy(err), r.Context().Err() != nil:
		// Busy, or the reader went away (SQLite says "interrupted").
		s.fail(w, r, http.StatusServiceUnavailable, "The archive is busy; try again in a moment.")
	default:
		s.log.Error("catalog error", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The archive could not read its catalog.")
	}
}

// follow runs the catalog's follower until ctx is done, when the catalog
// is writable and Options.Follow asks for it. The returned function stops
// it and waits.
func (s *Server) follow(ctx context.Context) (stop func()) {
	c := s.opts.Catalog
	if c == nil || s.opts.Follow == nil || !c.Writable() {
		return func() {}
	}
	// A catalog that starts empty is being built: its pages would say
	// "no such list" until the first pass over the store is done, so they
	// answer 503 until then instead.
	if st, err := c.Stats(ctx); err != nil || st.Messages == 0 {
		if n, err := s.st.Count(ctx); err != nil || n > 0 {
			s.building.Store(true)
		}
	}
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() {
		s.log.Info("following the store into the catalog", "catalog", c.Path())
		if err := c.Follow(ctx, s.st, *s.opts.Follow); err != nil {
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
