package boltstore

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"

	"github.com/chibrary/chibrary/store"
)

// Polling intervals while waiting for another process's lock: they start
// short, for a quick hand-over after a batch, and back off.
const (
	minPoll = time.Millisecond
	maxPoll = 20 * time.Millisecond
)

// handles shares one bbolt handle among the operations of a process and
// closes it once none uses it and another process waits for the file
// (seen within Linger), or after KeepIdle with none, so that the file
// lock holds nobody off for longer than Linger.
//
// flock belongs to the open file description, so two handles of one
// process conflict like two processes would. Hence one handle at a time:
// reads share it whatever its mode; a write waits until the readers of a
// read-only handle are done (new readers wait behind it, so a busy
// resolver cannot starve an import), closes it and opens a writable one.
type handles struct {
	path        string
	turn        *turnstile
	lockTimeout time.Duration
	linger      time.Duration
	keepIdle    time.Duration // <= 0: close after linger
	pageSize    int           // of a file created now
	log         *slog.Logger
	readOnly    bool // never open the file writable (Options.ReadOnly)
	// opened, if set, is told the compaction ID of each file opened, so
	// that the packs of a replaced file are let go.
	opened func(gen string)

	mu       sync.Mutex
	db       *bolt.DB
	writable bool
	users    int           // operations using db
	wantRW   int           // operations waiting for a writable handle
	busy     bool          // someone is opening a handle without holding mu
	excl     bool          // an exclusive operation holds db: share it with no one
	exclMu   sync.Mutex    // one exclusive operation at a time
	changed  chan struct{} // closed and replaced when any of the above changes
	timer    *time.Timer   // looks after the idle db (expire)
	idle     time.Time     // when db was last let go by its last user
	idleGen  uint64        // counts the releases: an older timer's look is stale
	closed   bool
}

func newHandles(path string, turn *turnstile, lockTimeout, linger time.Duration, pageSize int, log *slog.Logger) *handles {
	return &handles{path: path, turn: turn, lockTimeout: lockTimeout, linger: linger, pageSize: pageSize, log: log, changed: make(chan struct{})}
}

// notify wakes everyone waiting on a change. Called with mu held.
func (h *handles) notify() {
	close(h.changed)
	h.changed = make(chan struct{})
}

// acquire returns a handle for one operation, writable if write is set;
// the caller must release it.
func (h *handles) acquire(ctx context.Context, write bool) (*bolt.DB, error) {
	if write && h.readOnly {
		return nil, fmt.Errorf("%w: %s", ErrReadOnly, h.path)
	}
	h.mu.Lock()
	waiting := false // counted in wantRW
	done := func() {
		if waiting {
			h.wantRW--
			waiting = false
			h.notify()
		}
	}
	for {
		if h.closed {
			done()
			h.mu.Unlock()
			return nil, store.ErrClosed
		}
		if h.db != nil && !h.busy && h.users == 0 && h.turn.othersWaiting() {
			// Another process waits for the file: let it in.
			h.closeDB()
			h.notify()
		}
		if h.db != nil && !h.busy && !h.excl && (h.writable || (!write && h.wantRW == 0)) && (h.users == 0 || !h.turn.othersWaiting()) {
			h.users++
			h.stopTimer()
			done()
			h.mu.Unlock()
			return h.db, nil
		}
		// Switch handles when none is in use: a writer replaces an idle
		// read-only handle; a reader opens one unless a writer is waiting.
		if !h.busy && (write || h.wantRW == 0) && (h.db == nil || h.users == 0) {
			h.closeDB()
			h.busy = true
			h.mu.Unlock()
			db, err := h.open(ctx, write)
			h.mu.Lock()
			h.busy = false
			h.notify()
			done()
			if err != nil {
				h.mu.Unlock()
				return nil, err
			}
			if h.closed {
				db.Close()
				h.mu.Unlock()
				return nil, store.ErrClosed
			}
			h.db, h.writable = db, write
			h.users++
			h.mu.Unlock()
			return db, nil
		}
		if write && !waiting {
			h.wantRW++
			waiting = true
		}
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			h.mu.Lock()
			done()
			h.mu.Unlock()
			return nil, ctx.Err()
		}
		h.mu.Lock()
	}
}

// exclusive runs fn on a writable handle that no other operation of
// this process shares, and closes the handle afterwards: fn may replace
// the file (Compact), and nothing may write to the old one after it.
func (h *handles) exclusive(ctx context.Context, fn func(*bolt.DB) error) error {
	h.exclMu.Lock()
	defer h.exclMu.Unlock()
	db, err := h.acquire(ctx, true)
	if err != nil {
		return err
	}
	h.mu.Lock()
	h.excl = true // no newcomers; wait for those sharing db
	for h.users > 1 {
		ch := h.changed
		h.mu.Unlock()
		select {
		case <-ch:
		case <-ctx.Done():
			h.mu.Lock()
			h.excl = false
			h.mu.Unlock()
			h.release(db)
			return ctx.Err()
		}
		h.mu.Lock()
	}
	h.mu.Unlock()
	err = fn(db)
	h.mu.Lock()
	defer h.mu.Unlock()
	h.excl = false
	h.users--
	h.closeDB()
	h.notify()
	return err
}

func (h *handles) release(db *bolt.DB) {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.users--
	if h.users == 0 {
		switch {
		case h.closed || h.linger <= 0 || (h.wantRW > 0 && !h.writable) || h.turn.othersWaiting():
			h.closeDB()
		default:
			h.idle = time.Now()
			h.idleGen++
			gen := h.idleGen
			h.stopTimer()
			h.timer = time.AfterFunc(h.linger, func() { h.expire(db, gen) })
		}
	}
	h.notify()
}

// idleLooks bounds the time between two looks at an idle handle, in
// lingers.
const idleLooks = 4

// expire closes db if it is still the idle handle and another process
// waits for the file, or it has been idle for keepIdle (or linger where
// a waiting process cannot be seen); otherwise it looks again later.
func (h *handles) expire(db *bolt.DB, gen uint64) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.db != db || h.users > 0 || h.busy || gen != h.idleGen {
		return // used since, or closed: a later release looks after it
	}
	if idle := time.Since(h.idle); h.keepIdle > 0 && h.turn.seesWaiting() && !h.closed && h.wantRW == 0 &&
		idle < h.keepIdle && !h.turn.othersWaiting() {
		// Each look wakes the process: look as often as the idle time so
		// far, from linger to idleLooks linger apart (a waiting process
		// polls about as often: minPoll to maxPoll).
		next := min(max(idle, h.linger), idleLooks*h.linger)
		h.timer = time.AfterFunc(next, func() { h.expire(db, gen) })
		return
	}
	h.closeDB()
	h.notify()
}

func (h *handles) stopTimer() {
	if h.timer != nil {
		h.timer.Stop()
		h.timer = nil
	}
}

// closeDB closes the idle handle. Called with mu held.
func (h *handles) closeDB() {
	h.stopTimer()
	if h.db == nil {
		return
	}
	if err := h.db.Close(); err != nil {
		h.log.Warn("cannot close messages database", "path", h.path, "err", err)
	}
	h.db = nil
}

// close refuses new operations, waits for the running ones, and closes.
func (h *handles) close() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return nil
	}
	h.closed = true
	h.notify()
	for h.users > 0 || h.busy {
		ch := h.changed
		h.mu.Unlock()
		<-ch
		h.mu.Lock()
	}
	h.stopTimer()
	if h.db == nil {
		return h.turn.close()
	}
	err := h.db.Close()
	h.db = nil
	if cerr := h.turn.close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot close %s: %w", h.path, err)
	}
	return nil
}

// open opens the file, waiting up to lockTimeout for other processes:
// first for the turnstile, then for bbolt's own lock.
func (h *handles) open(ctx context.Context, write bool) (*bolt.DB, error) {
	start := time.Now()
	deadline := start.Add(h.lockTimeout)
	poll := minPoll
	warned := false
	entered := false
	replaced := false
	defer func() {
		if entered {
			h.turn.leave()
		}
	}()
	for {
		var err error
		if !entered {
			if entered, err = h.turn.tryEnter(); err != nil {
				return nil, err
			}
		}
		if entered {
			db, err := bolt.Open(h.path, 0o644, &bolt.Options{
				Timeout:        time.Nanosecond, // one try: we poll ourselves
				ReadOnly:       !write,
				NoFreelistSync: false, // see the package doc: opening stays cheap
				FreelistType:   bolt.FreelistMapType,
				PageSize:       h.pageSize,
			})
			var gone bool
			if err == nil {
				var gen string
				gone, gen = inspect(db)
				if !gone && h.opened != nil {
					h.opened(gen)
				}
			}
			if err == nil && gone {
				// Compact replaced the file: its successor is at the path, unless
				// the compaction stopped before the rename.
				db.Close()
				if replaced {
					return nil, fmt.Errorf("cannot open %s: %w", h.path, ErrInterrupted)
				}
				replaced = true
				continue
			}
			if err == nil {
				if write {
					db.AllocSize = allocSize(db)
				}
				if waited := time.Since(start); waited > time.Second {
					h.log.Info("messages database unlocked", "path", h.path, "waited", waited.Round(time.Millisecond))
				}
				return db, nil
			}
			if !errors.Is(err, berrors.ErrTimeout) {
				return nil, fmt.Errorf("cannot open %s: %w", h.path, unwrapPath(err))
			}
		}
		if err := ctx.Err(); err != nil {
			return nil, fmt.Errorf("cannot open %s while another process holds its lock: %w", h.path, err)
		}
		if !time.Now().Before(deadline) {
			return nil, fmt.Errorf("cannot open %s: %w: another process has held its lock for %v (a chibrary importer, watcher or resolver holds it for one batch or read, and lets it go within milliseconds when another waits, so one may be hung: see `fuser %s %s.lock`; Options.LockTimeout sets the wait)",
				h.path, ErrLocked, h.lockTimeout, h.path, h.path)
		}
		if !warned && time.Since(start) > time.Second {
			h.log.Warn("waiting for another process's lock on the messages database", "path", h.path, "timeout", h.lockTimeout)
			warned = true
		}
		t := time.NewTimer(min(poll, time.Until(deadline)))
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
		poll = min(2*poll, maxPoll)
	}
}

// inspect reports whether db is a file Compact has replaced, and the ID of
// the compaction that wrote it ("" for a file no compaction wrote).
func inspect(db *bolt.DB) (retired bool, gen string) {
	db.View(func(tx *bolt.Tx) error {
		if meta := tx.Bucket(bucketMeta); meta != nil {
			retired = string(meta.Get(keyFormat)) == formatRetired
			gen = string(meta.Get(keyCompaction))
		}
		return nil
	})
	return retired, gen
}

// allocSize is how much a writable handle grows the file by: a
// sixty-fourth of it, between 1 MiB and bbolt's default, as that default
// (16 MiB) is much of a small archive, counted by ls and by a copy.
func allocSize(db *bolt.DB) int {
	var size int64
	if fi, err := os.Stat(db.Path()); err == nil {
		size = fi.Size()
	}
	return int(min(max(size/64, 1<<20), 16<<20))
}

// check returns ErrClosed after close.
func (h *handles) check() error {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return store.ErrClosed
	}
	return nil
}
