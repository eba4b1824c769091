package resolver

import (
	"bytes"
	"container/list"
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"
)

// Bounds of the page caches: the pages that gather many messages, and
// message pages (a message linked from elsewhere is asked for by many
// readers at once), apart so that one kind cannot push out the other.
const (
	cacheEntries, cacheBytes               = 1024, 32 << 20
	messageCacheEntries, messageCacheBytes = 512, 16 << 20
	// cacheLargest is the largest page kept.
	cacheLargest = 1 << 20
)

// pageCache keeps the pages that gather many messages (lists, months,
// threads, feeds, their JSON) as they were last rendered, each with the
// catalog generation it was rendered at: a page is served from here only
// while the catalog has not changed since. Least recently used pages go
// first.
type pageCache struct {
	maxEntries, maxBytes int

	mu    sync.Mutex
	ll    *list.List // of *cached, most recent first
	byKey map[string]*list.Element
	bytes int
	// rendering are the pages being rendered, by key and generation: a
	// request for one of them waits for it rather than rendering it too
	// (after the catalog changes, every reader asks for the same pages).
	rendering map[string]chan struct{}
}

type cached struct {
	key, gen    string
	contentType string
	etag        string
	body        []byte
}

func newPageCache(entries, bytes int) *pageCache {
	return &pageCache{maxEntries: entries, maxBytes: bytes, ll: list.New(), byKey: map[string]*list.Element{}, rendering: map[string]chan struct{}{}}
}

func (c *pageCache) get(key, gen string) (*cached, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	e, ok := c.byKey[key]
	if !ok {
		return nil, false
	}
	p := e.Value.(*cached)
	if p.gen != gen {
		c.remove(e)
		return nil, false
	}
	c.ll.MoveToFront(e)
	return p, true
}

func (c *pageCache) put(p *cached) {
	if len(p.body) > cacheLargest {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if e, ok := c.byKey[p.key]; ok {
		c.remove(e)
	}
	c.byKey[p.key] = c.ll.PushFront(p)
	c.bytes += len(p.body)
	for c.ll.Len() > c.maxEntries || c.bytes > c.maxBytes {
		c.remove(c.ll.Back())
	}
}

func (c *pageCache) remove(e *list.Element) {
	p := c.ll.Remove(e).(*cached)
	delete(c.byKey, p.key)
	c.bytes -= len(p.body)
}

// lookup returns the page of key at gen if it is kept. Otherwise, if
// another request renders it, it waits for that (or ctx) and looks again;
// if none does, it returns a done function: the caller renders the page,
// puts it, and calls done.
func (c *pageCache) lookup(ctx context.Context, key, gen string) (*cached, func()) {
	for {
		if p, ok := c.get(key, gen); ok {
			return p, nil
		}
		c.mu.Lock()
		ch, busy := c.rendering[key+"\x00"+gen]
		if !busy {
			ch = make(chan struct{})
			c.rendering[key+"\x00"+gen] = ch
			c.mu.Unlock()
			return nil, func() {
				c.mu.Lock()
				delete(c.rendering, key+"\x00"+gen)
				c.mu.Unlock()
				close(ch)
			}
		}
		c.mu.Unlock()
		select {
		case <-ch:
			// Rendered (or failed: then this request renders it).
		case <-ctx.Done():
			return nil, func() {}
		}
	}
}

// cachedPage serves h's page from the page cache while the catalog has
// not changed since it was rendered, and keeps what h renders otherwise.
func (s *Server) cachedPage(h http.HandlerFunc) http.HandlerFunc {
	return s.cachedIn(func() *pageCache { return s.cache }, h)
}

// cachedMessage is the message page through the message page cache.
func (s *Server) cachedMessage(w http.ResponseWriter, r *http.Request) {
	s.cachedIn(func() *pageCache { return s.messages }, s.page)(w, r)
}

// cachedIn is cachedPage with the cache that of returns (nil: none).
func (s *Server) cachedIn(of func() *pageCache, h http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		c, pc := s.catalog(r.Context()), of()
		if st := s.cats.Status(); pc == nil || c == nil || r.Method != http.MethodGet || st.Building != nil || st.Broken != "" {
			h(w, r)
			return
		}
		gen, err := c.Generation(r.Context())
		if err != nil {
			h(w, r)
			return
		}
		// A list's page says its last 30 days, which end with the day
		// (recentSpan): a page is kept for the day it was made on.
		gen += " " + s.opts.Now().UTC().Format(time.DateOnly)
		// Keyed by all that changes the page's bytes: the feed's links
		// name the archive's address, which without Options.BaseURL is
		// the request's own Host (a reader must never get a page made
		// for another's).
		key := s.baseURL(r) + r.URL.EscapedPath() + "?" + r.URL.RawQuery
		p, done := pc.lookup(r.Context(), key, gen)
		if p != nil {
			s.cacheHits.WithLabelValues("hit").Inc()
			s.writeCached(w, r, p)
			return
		}
		// The page is rendered into memory and kept, and only then
		// written: a reader who does not read must hold up no one else
		// waiting for this rendering.
		s.cacheHits.WithLabelValues("miss").Inc()
		cw := &captureWriter{ResponseWriter: w}
		func() {
			defer done() // also if h panics
			h(cw, r)
			if cw.status == http.StatusOK && cw.fresh && !cw.skip {
				pc.put(&cached{key: key, gen: gen, contentType: w.Header().Get("Content-Type"), etag: w.Header().Get("ETag"), body: cw.body.Bytes()})
			}
		}()
		cw.flush()
	}
}

func (s *Server) writeCached(w http.ResponseWriter, r *http.Request, p *cached) {
	h := w.Header()
	h.Set("ETag", p.etag)
	h.Set("Cache-Control", "no-cache")
	if etagMatch(r.Header.Get("If-None-Match"), strings.TrimPrefix(p.etag, "W/")) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", p.contentType)
	h.Set("Content-Length", strconv.Itoa(len(p.body)))
	w.WriteHeader(http.StatusOK)
	w.Write(p.body)
}

// captureWriter holds what a handler writes (its status and body; the
// header fields go to the ResponseWriter's, unsent until flush), for the
// cache and to be written once the rendering is over.
type captureWriter struct {
	http.ResponseWriter
	status int
	body   bytes.Buffer
	// fresh is set by writeBody: the response is a whole page that may be
	// kept (not a stream, not an error).
	fresh bool
	// skip is set by dontCache.
	skip bool
}

// dontCache keeps the page being written out of the cache: it lacks
// something the store could not give right now.
func dontCache(w http.ResponseWriter) { markCapture(w, func(c *captureWriter) { c.skip = true }) }

// cacheable says that the page being written is whole and may be kept.
func cacheable(w http.ResponseWriter) { markCapture(w, func(c *captureWriter) { c.fresh = true }) }

func markCapture(w http.ResponseWriter, mark func(*captureWriter)) {
	for {
		switch x := w.(type) {
		case *captureWriter:
			mark(x)
			return
		case interface{ Unwrap() http.ResponseWriter }:
			w = x.Unwrap()
		default:
			return
		}
	}
}

func (c *captureWriter) WriteHeader(code int) {
	if c.status == 0 {
		c.status = code
	}
}

func (c *captureWriter) Write(b []byte) (int, error) {
	if c.status == 0 {
		c.status = http.StatusOK
	}
	return c.body.Write(b)
}

// flush sends what the handler wrote.
func (c *captureWriter) flush() {
	if c.status == 0 {
		return // nothing written: net/http answers 200 with no body
	}
	c.ResponseWriter.WriteHeader(c.status)
	if c.body.Len() > 0 {
		c.ResponseWriter.Write(c.body.Bytes())
	}
}

func (c *captureWriter) Unwrap() http.ResponseWriter { return c.ResponseWriter }
