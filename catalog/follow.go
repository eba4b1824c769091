package catalog

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"sync"
	"time"

	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// Defaults of SyncOptions and FollowOptions.
const (
	DefaultPageSize   = 500
	DefaultInterval   = 500 * time.Millisecond
	DefaultMaxBackoff = 30 * time.Second
)

// SyncOptions configure Sync and Rebuild. The zero value is ready to use.
type SyncOptions struct {
	// PageSize is how many messages one read of the feed asks for.
	PageSize int
	// Workers parse messages in parallel; 0 means GOMAXPROCS.
	Workers int
	// View bounds the parsing of one message.
	View mailview.Options
	// Progress, if set, gets the messages read so far after each page.
	Progress func(read int)
}

// FollowOptions configure Follow. The zero value is ready to use.
type FollowOptions struct {
	SyncOptions
	// Interval is the pause between reads once the feed is read to its end.
	Interval time.Duration
	// MaxBackoff bounds the pause after a store error (doubling from 1s).
	MaxBackoff time.Duration
	// CaughtUp, if set, gets the messages indexed when Follow first reaches
	// the feed's end.
	CaughtUp func(indexed int)
}

// Status is what a follower last did, for /api/v1/stats and logs.
type Status struct {
	// Synced is when the catalog last read the feed to its end.
	Synced time.Time `json:"synced"`
	// Err is the error of the last attempt, "" if it succeeded.
	Err string `json:"error,omitempty"`
	// Following is true while Follow runs.
	Following bool `json:"following"`
}

// page is a page of the feed, parsed.
type page struct {
	docs     []doc
	moves    []store.Move
	removals []store.Removal
	read     int
	next     store.Cursor
	err      error
}

// Sync reads the store's change feed from where the catalog stands to its
// end, indexing every message, and returns how many it added. It refuses
// a store of another authority than the catalog's (ErrOtherStore).
func (c *Catalog) Sync(ctx context.Context, st store.Store, opts SyncOptions) (int, error) {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if c.closed {
		return 0, fmt.Errorf("cannot follow the store: catalog %s is closed", c.path)
	}
	n, err := c.sync(ctx, st, opts)
	s := c.status.Load()
	next := Status{Following: s != nil && s.Following, Synced: time.Now()}
	if s != nil && err != nil {
		next.Synced = s.Synced
	}
	if err != nil {
		next.Err = err.Error()
	}
	c.status.Store(&next)
	return n, err
}

func (c *Catalog) sync(ctx context.Context, st store.Store, opts SyncOptions) (int, error) {
	ws, err := c.state(ctx)
	if err != nil {
		return 0, err
	}
	b, err := st.Binding(ctx)
	if errors.Is(err, store.ErrUnbound) {
		return 0, nil // an empty archive
	}
	if err != nil {
		return 0, fmt.Errorf("cannot follow the store: %w", err)
	}
	if ws.authority != "" && ws.authority != b.Authority {
		return 0, fmt.Errorf("%w: catalog %s was built from the archive of authority %s, and this store belongs to authority %s: delete the catalog, or rebuild it with `resolver reindex`", ErrOtherStore, c.path, ws.authority, b.Authority)
	}
	if opts.PageSize <= 0 {
		opts.PageSize = DefaultPageSize
	}
	if opts.Workers <= 0 {
		opts.Workers = runtime.GOMAXPROCS(0)
	}

	// Three stages, each on its own page: read the feed, parse a page on
	// every CPU, index it in one transaction.
	var wg sync.WaitGroup
	defer wg.Wait() // runs last: after cancel, the stages stop at their next send
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	type raw struct {
		msgs     []store.Stored
		moves    []store.Move
		removals []store.Removal
		next     store.Cursor
		err      error
	}
	raws := make(chan raw, 1)
	pages := make(chan page, 1)
	spooling := c.spool != nil
	wg.Go(func() {
		defer close(raws)
		cursor := ws.cursor
		for {
			p, err := st.Changes(ctx, cursor, opts.PageSize)
			if err != nil {
				err = fmt.Errorf("cannot read the store's change feed: %w", err)
			}
			if err == nil && p.Empty() {
				return
			}
			select {
			case raws <- raw{msgs: p.Messages, moves: p.Moves, removals: p.Removals, next: p.Next, err: err}:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
			cursor = p.Next
		}
	})
	wg.Go(func() {
		defer close(pages)
		for r := range raws {
			p := page{read: len(r.msgs), moves: r.moves, removals: r.removals, next: r.next, err: r.err}
			if r.err == nil {
				p.docs = parseAll(r.msgs, opts.Workers, opts.View, spooling)
			}
			select {
			case pages <- p:
			case <-ctx.Done():
				return
			}
		}
	})
	added, read := 0, 0
	for p := range pages {
		if p.err != nil {
			return added, p.err
		}
		n, err := c.apply(ctx, p.docs, p.moves, p.removals, p.next, b.Authority)
		if err != nil {
			return added, err
		}
		if len(p.removals) > 0 {
			if err := c.scrub(ctx); err != nil {
				return added, err
			}
		}
		added += n
		read += p.read
		if opts.Progress != nil {
			opts.Progress(read)
		}
	}
	return added, ctx.Err()
}

// parseAll extracts the documents of msgs on workers goroutines, and
// their spoolBlocks when spool is set (a rebuild).
func parseAll(msgs []store.Stored, workers int, view mailview.Options, spool bool) []doc {
	docs := make([]doc, len(msgs))
	workers = min(workers, len(msgs))
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := w; i < len(msgs); i += workers {
				docs[i] = extract(msgs[i], view)
				if spool {
					docs[i].spooled = spoolBlock(&docs[i])
				}
			}
		})
	}
	wg.Wait()
	return docs
}

// Follow keeps the catalog up to date with the store until ctx is done,
// reading the feed to its end every Interval. Store errors are retried
// with backoff; a cursor the store no longer knows (a store restored or
// converted) restarts the feed from its beginning, which only re-reads.
// It returns nil when ctx is done, or ErrOtherStore or ErrDamaged.
func (c *Catalog) Follow(ctx context.Context, st store.Store, opts FollowOptions) error {
	if opts.Interval <= 0 {
		opts.Interval = DefaultInterval
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	c.setFollowing(true)
	defer c.setFollowing(false)
	// A catalog the follower builds from the start (none was there) has
	// its search index merged once it has caught up, as a rebuild's is.
	fresh := c.fresh(ctx)
	var backoff time.Duration
	indexed := 0
	for {
		n, err := c.Sync(ctx, st, opts.SyncOptions)
		indexed += n
		if ctx.Err() != nil {
			return nil
		}
		wait := opts.Interval
		switch {
		case errors.Is(err, ErrOtherStore), errors.Is(err, ErrDamaged):
			return err
		case errors.Is(err, store.ErrBadCursor):
			c.log.Warn("the store does not know the catalog's cursor: reading its feed again from the beginning", "err", err)
			if err := c.resetCursor(ctx); err != nil {
				c.log.Error("cannot reset the catalog's cursor", "err", err)
			}
			wait = 0
		case err != nil:
			backoff = min(max(2*backoff, time.Second), opts.MaxBackoff)
			wait = backoff
			c.log.Warn("cannot follow the store", "err", err, "retry_in", backoff)
		default:
			backoff = 0
			if n > 0 {
				c.log.Debug("indexed", "messages", n)
			}
			if opts.CaughtUp != nil {
				opts.CaughtUp(indexed)
				opts.CaughtUp = nil
			}
			if fresh && n > 0 {
				fresh = false
				if err := c.compact(ctx); err != nil && ctx.Err() == nil {
					c.log.Warn("cannot merge the search index (searches work, a little slower)", "err", err)
				}
			}
		}
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(wait):
		}
	}
}

// fresh reports whether the catalog has indexed nothing yet.
func (c *Catalog) fresh(ctx context.Context) bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ws, err := c.state(ctx)
	return err == nil && ws.cursor == ""
}

func (c *Catalog) setFollowing(on bool) {
	s := Status{}
	if old := c.status.Load(); old != nil {
		s = *old
	}
	s.Following = on
	c.status.Store(&s)
}

// Status returns what the follower last did.
func (c *Catalog) Status() Status {
	if s := c.status.Load(); s != nil {
		return *s
	}
	return Status{}
}

func (c *Catalog) resetCursor(ctx context.Context) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	ws, err := c.state(ctx)
	if err != nil {
		return err
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	if err := setMeta(ctx, tx, "cursor", ""); err != nil {
		return err
	}
	err = tx.Commit()
	c.genSeq.Add(1) // Generation
	if err != nil {
		return err
	}
	ws.cursor = ""
	return nil
}

// ftsAutomerge is FTS5's default automerge (segments merged per level).
const ftsAutomerge = 4

// compact merges the search index into one segment, which every word of a
// query then reads once (FTS5 merges only now and then), and gives the
// pages of the old segments back to the file system: an incremental
// vacuum moves only the pages past the free ones, where VACUUM would
// write the whole file twice more. (A catalog created before it had
// auto_vacuum keeps its free pages for later writes.)
func (c *Catalog) compact(ctx context.Context) error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	if _, err := c.w.ExecContext(ctx, `INSERT INTO fts(fts) VALUES('optimize')`); err != nil {
		return fmt.Errorf("cannot merge the search index: %w", err)
	}
	if _, err := c.w.ExecContext(ctx, `INSERT INTO fts_addr(fts_addr) VALUES('optimize')`); err != nil {
		return fmt.Errorf("cannot merge the search index: %w", err)
	}
	if _, err := c.w.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
		return fmt.Errorf("cannot give back the pages the merge freed: %w", err)
	}
	return nil
}

// Rebuild builds a new catalog of st beside path (path.rebuild) and
// renames it over the old one once complete, returning the number of
// messages indexed. ErrLocked while another process writes the catalog.
func Rebuild(ctx context.Context, path string, st store.Store, opts SyncOptions, o Options) (int, error) {
	if o.ReadOnly {
		return 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, ErrReadOnly)
	}
	lock, err := takeLock(path + ".lock")
	if err != nil {
		return 0, fmt.Errorf("cannot rebuild catalog %s: %w: stop the resolver that follows it first", path, err)
	}
	defer lock.Release()
	return rebuildLocked(ctx, path, st, opts, o)
}
