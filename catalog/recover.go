package catalog

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"path/filepath"

	"github.com/chibrary/chibrary/store"
)

// A catalog is derived: damaged (ErrDamaged), deleted or replaced while a
// resolver serves it, it is rebuilt from the store beside the old file and
// renamed over it once complete. The rebuilder holds the lock throughout,
// and a rebuild stopped at any point leaves the old file or the new one,
// never a mix.

// Steps of a rebuild, as Options.step hears them.
const (
	stepStarted = "started"  // the new catalog is begun beside the old
	stepBuilt   = "built"    // the new catalog is complete beside the old
	stepCleared = "cleared"  // the old catalog's WAL is removed
	stepRenamed = "renamed"  // the new catalog is in place
	stepOpened  = "reopened" // the new catalog is open (RebuildOpen, RebuildFrom)
)

func (o Options) at(step string) {
	if o.step != nil {
		o.step(step)
	}
}

// rebuildCache is the page cache of a rebuild's writer connection, in bytes.
const rebuildCache = 64 << 20

// rebuildLocked builds a catalog of st beside path and renames it over
// path; the caller holds path's lock.
func rebuildLocked(ctx context.Context, path string, st store.Store, opts SyncOptions, o Options) (int, error) {
	tmp := path + ".rebuild"
	for _, suffix := range []string{"", "-wal", "-shm", ".text"} {
		if err := os.Remove(tmp + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, err)
		}
	}
	nc, err := Open(ctx, tmp, Options{Logger: o.Logger, SearchTimeout: o.SearchTimeout})
	if err != nil {
		return 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, err)
	}
	// FTS5 merges its index's segments as it goes; a rebuild merges them
	// all once at the end instead (compact), which costs less CPU.
	o.at(stepStarted)
	// A rebuild inserts into every index of the catalog at once, through
	// the one writer connection: with SQLite's 2 MB page cache it read
	// the same index pages back from the file over and over. The cache
	// is the connection's, and goes with it when the rebuild closes it.
	_, err = nc.w.ExecContext(ctx, fmt.Sprintf(`PRAGMA cache_size=-%d`, rebuildCache>>10))
	if err == nil {
		_, err = nc.w.ExecContext(ctx, `INSERT INTO fts(fts, rank) VALUES('automerge', 0)`)
	}
	if err == nil {
		// The old catalog's IMAP and NNTP numbers are kept (numbers.go); a
		// damaged one is replaced all the same, with new numbers.
		kept, cerr := carry(ctx, nc, path)
		switch {
		case cerr != nil:
			nc.log.Warn("cannot read the IMAP and NNTP numbers of the old catalog: the new one numbers its messages anew, under a new UIDVALIDITY (IMAP clients download their mailboxes again)", "catalog", path, "err", cerr)
		case kept.Validity != 0:
			nc.log.Info("kept the IMAP and NNTP numbers of the old catalog", "uidvalidity", kept.Validity, "mailboxes", kept.Lists, "numbers", kept.Numbers)
		}
		// So are the dates of removed messages, which the store does not
		// keep (remove.go).
		if _, rerr := carryRemoved(ctx, nc, path); rerr != nil {
			nc.log.Warn("cannot read the removals of the old catalog: removed messages' placeholders sort by their replies", "catalog", path, "err", rerr)
		}
	}
	// After the carries, whose failures are let go: a transaction rolled
	// back without a journal could leave anything in the file.
	if err == nil {
		err = nc.bulk(ctx)
	}
	var n int
	if err == nil {
		n, err = nc.syncSpooled(ctx, st, opts, tmp+".text")
	}
	if err == nil {
		err = nc.indexLate(ctx)
	}
	if err == nil {
		err = nc.compact(ctx)
	}
	if err == nil {
		_, err = nc.w.ExecContext(ctx, `INSERT INTO fts(fts, rank) VALUES('automerge', ?)`, ftsAutomerge)
	}
	if err == nil {
		err = nc.unbulk(ctx)
	}
	if cerr := nc.Close(); err == nil {
		err = cerr
	}
	os.Remove(tmp + ".lock")
	if err != nil {
		for _, suffix := range []string{"", "-wal", "-shm", ".text"} {
			os.Remove(tmp + suffix)
		}
		return 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, err)
	}
	// Written without a journal, the new file's pages may still be in the
	// kernel's cache only: they reach the disk before the file takes the
	// old one's name, so that a crash after the rename finds it whole.
	if err := syncFile(tmp); err != nil {
		os.Remove(tmp)
		return 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, err)
	}
	o.at(stepBuilt)
	// The old catalog's WAL must not be applied to the new file; stopped
	// here, the old file is as at its last checkpoint, or damaged.
	for _, suffix := range []string{"-wal", "-shm"} {
		if err := os.Remove(path + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
			return 0, fmt.Errorf("cannot replace catalog %s: %w", path, err)
		}
	}
	o.at(stepCleared)
	if err := os.Rename(tmp, path); err != nil {
		return 0, fmt.Errorf("cannot replace catalog %s: %w", path, err)
	}
	// The rename itself is made durable: best effort, as it has happened.
	if d, err := os.Open(filepath.Dir(path)); err == nil {
		d.Sync()
		d.Close()
	}
	o.at(stepRenamed)
	// What Close left of the new catalog's WAL (empty) goes too.
	for _, suffix := range []string{"-wal", "-shm"} {
		os.Remove(tmp + suffix)
	}
	return n, nil
}

// bulk readies a new catalog for a rebuild, empty but for what it carries
// over from the old one (numbers, removals). Nobody reads the file
// until it is renamed over the old one, and a rebuild stopped at any
// point starts again from nothing, so it is written without a journal (no
// page written twice, to the WAL and then to the file; no fsync) under an
// exclusive lock (no lock taken and no header read again at each
// transaction), and without lateIndexes, which indexLate makes at the end.
func (c *Catalog) bulk(ctx context.Context) error {
	ps := []string{
		`PRAGMA journal_mode=OFF`,
		`PRAGMA synchronous=OFF`,
		`PRAGMA locking_mode=EXCLUSIVE`,
		`INSERT INTO fts(fts, rank) VALUES('crisismerge', 64)`,
	}
	for _, name := range lateIndexNames {
		ps = append(ps, `DROP INDEX `+name)
	}
	for _, p := range ps {
		if _, err := c.w.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("cannot ready the catalog for a rebuild: %s: %w", p, err)
		}
	}
	return nil
}

// indexLate makes lateIndexes once a rebuild's rows are in: each a sort
// of the rows, where keeping it up to date cost a search of the index
// for each row written.
func (c *Catalog) indexLate(ctx context.Context) error {
	if _, err := c.w.ExecContext(ctx, lateIndexes); err != nil {
		return fmt.Errorf("cannot index the rebuilt catalog: %w", err)
	}
	return nil
}

// unbulk makes the rebuilt catalog what Open makes: WAL, locked per
// transaction.
func (c *Catalog) unbulk(ctx context.Context) error {
	for _, p := range []string{
		`DELETE FROM fts_config WHERE k = 'crisismerge'`,
		`PRAGMA locking_mode=NORMAL`,
		`PRAGMA synchronous=NORMAL`,
		`PRAGMA journal_mode=WAL`,
	} {
		if _, err := c.w.ExecContext(ctx, p); err != nil {
			return fmt.Errorf("cannot finish the rebuilt catalog: %s: %w", p, err)
		}
	}
	return nil
}

// syncSpooled is Sync for a rebuild: the search text waits in a spool at
// path until every message is indexed, then goes into the search index
// under labels in date order (labels.go), whatever the store's order.
func (c *Catalog) syncSpooled(ctx context.Context, st store.Store, opts SyncOptions, path string) (int, error) {
	s, err := newTextSpool(path)
	if err != nil {
		return 0, err
	}
	defer os.Remove(path)
	defer s.close()
	c.wmu.Lock()
	c.spool = s
	c.wmu.Unlock()
	n, err := c.Sync(ctx, st, opts)
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.spool = nil
	if err != nil {
		return 0, err
	}
	if err := c.placeText(ctx, s); err != nil {
		return 0, fmt.Errorf("cannot build the search index: %w", err)
	}
	return n, nil
}

// RebuildOpen rebuilds the catalog at path from st, as Rebuild does, and
// opens the new one for writing, holding the lock throughout: for a writer
// whose Open found it damaged. ErrLocked while another process writes it.
func RebuildOpen(ctx context.Context, path string, st store.Store, opts SyncOptions, o Options) (*Catalog, int, error) {
	if o.ReadOnly {
		return nil, 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, ErrReadOnly)
	}
	lock, err := takeLock(path + ".lock")
	if err != nil {
		return nil, 0, fmt.Errorf("cannot rebuild catalog %s: %w", path, err)
	}
	return openRebuilt(ctx, path, lock, st, opts, o)
}

// RebuildFrom rebuilds c's file from st, as RebuildOpen does, keeping c's
// lock, and returns the new catalog, open for writing. c must be writable
// and no longer followed; it is left open read-only for the readers still
// at it: close it once they are done. On an error the lock is let go, and
// c is left read-only.
func (c *Catalog) RebuildFrom(ctx context.Context, st store.Store, opts SyncOptions) (*Catalog, int, error) {
	c.wmu.Lock()
	lock, w := c.lock, c.w
	c.lock, c.w, c.st = nil, nil, nil
	// The file is replaced: the one read from here on changes no more.
	c.writable.Store(false)
	c.genSeq.Add(1)
	c.wmu.Unlock()
	if lock == nil {
		return nil, 0, fmt.Errorf("cannot rebuild catalog %s: %w", c.path, ErrReadOnly)
	}
	w.Close()
	return openRebuilt(ctx, c.path, lock, st, opts, Options{Logger: c.log, SearchTimeout: c.searchTimeout})
}

func openRebuilt(ctx context.Context, path string, lock *lockFile, st store.Store, opts SyncOptions, o Options) (*Catalog, int, error) {
	n, err := rebuildLocked(ctx, path, st, opts, o)
	if err != nil {
		lock.Release()
		return nil, 0, err
	}
	log := o.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	c := &Catalog{path: path, log: log.With("catalog", path), lock: lock, searchTimeout: o.SearchTimeout}
	if c.searchTimeout <= 0 {
		c.searchTimeout = DefaultSearchTimeout
	}
	if err := c.openWritable(ctx); err != nil {
		lock.Release()
		return nil, 0, fmt.Errorf("cannot open the rebuilt catalog %s: %w", path, err)
	}
	o.at(stepOpened)
	return c, n, nil
}

// Replaced reports whether the catalog file was deleted or replaced since
// c opened it (its device and inode changed): a writer then rebuilds it, a
// reader opens the new one.
func (c *Catalog) Replaced() bool {
	fi, err := os.Stat(c.path)
	if err != nil {
		return errors.Is(err, os.ErrNotExist)
	}
	return c.file != nil && !os.SameFile(c.file, fi)
}

// syncFile flushes the file at path to the disk.
func syncFile(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return err
	}
	err = f.Sync()
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	return err
}
