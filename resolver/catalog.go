package resolver

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"sync"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
)

// catalogFor returns the catalog for a page that needs one, or answers
// 503 (with Retry-After) when there is none, when it cannot be used, or
// while it is first being built.
func (s *Server) catalogFor(w http.ResponseWriter, r *http.Request) (*catalog.Catalog, bool) {
	c, st := s.catalog(r.Context()), s.cats.Status()
	switch {
	case c == nil && st.Rebuilding != nil:
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, building(st.Rebuilding, true)+"; they will be here when it is done. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case c == nil:
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive has no index of its lists, months and threads right now, so they cannot be shown. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case st.Broken != "":
		w.Header().Set("Retry-After", "3600")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive's index of its lists, months and threads cannot be used (the operator has been told why), so they cannot be shown right now. Every message is still here: open one by its call number or Message-ID.")
		return nil, false
	case st.Building != nil:
		w.Header().Set("Retry-After", "5")
		s.fail(w, r, http.StatusServiceUnavailable, building(st.Building, false)+"; they will be here when it is done. Every message is already here: open one by its call number or Message-ID.")
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
		s.noticeDamage(s.catalog(r.Context()), err)
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

// Catalogs is where a Server reads the catalog: a *keeper.Keeper,
// which opens, follows, rebuilds and swaps it, and which IMAP and NNTP
// read through too.
type Catalogs interface {
	// Current returns the catalog served now (nil: none) and the function
	// to call once done with it.
	Current() (*catalog.Catalog, func())
	// Status says whether the catalog is being built or cannot be used.
	Status() keeper.Status
	// Notice is told of the errors of reading the catalog, so that a
	// damaged one is rebuilt.
	Notice(*catalog.Catalog, error)
	// Path is the catalog's file, "" when none is kept.
	Path() string
}

// holdKey is the context key of a request's hold.
type holdKey struct{}

// hold is the catalog a request reads: taken at its first use, the same
// for the whole request, and given back when the request is answered.
type hold struct {
	mu      sync.Mutex
	c       *catalog.Catalog
	release func()
}

// holding returns r with a hold, and the function that gives back what
// it took.
func holding(r *http.Request) (*http.Request, func()) {
	h := &hold{}
	return r.WithContext(context.WithValue(r.Context(), holdKey{}, h)), func() {
		h.mu.Lock()
		defer h.mu.Unlock()
		if h.release != nil {
			h.release()
			h.c, h.release = nil, nil
		}
	}
}

// catalog returns the catalog served now, or nil: the one the request
// of ctx read already, if any.
func (s *Server) catalog(ctx context.Context) *catalog.Catalog {
	h, _ := ctx.Value(holdKey{}).(*hold)
	if h == nil {
		// Not from ServeHTTP: nothing gives it back later.
		c, release := s.cats.Current()
		release()
		return c
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.c != nil {
		return h.c
	}
	c, release := s.cats.Current()
	if c == nil {
		release()
		return nil
	}
	h.c, h.release = c, release
	return c
}

// noticeDamage tells the keeper that c is damaged, if err says so.
func (s *Server) noticeDamage(c *catalog.Catalog, err error) { s.cats.Notice(c, err) }

// building says a build's progress to readers: the index of lists,
// months and threads, not "the catalog", which is the operator's word.
func building(p *keeper.Progress, again bool) string {
	a := " again"
	if !again {
		a = ""
	}
	return fmt.Sprintf("The index of this archive's lists, months and threads is being built%s (%d of %d messages indexed)", a, p.Read, p.Total)
}
