package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"modernc.org/sqlite" // the "sqlite" database/sql driver: pure Go, FTS5 built in
)

// SchemaVersion is the layout of the catalog this package writes: a
// catalog of another version is rebuilt by its writer, and refused by a
// reader (ErrSchema).
const SchemaVersion = 17

// Sentinel errors. Test with errors.Is.
var (
	// ErrNoCatalog: a read-only Open found no catalog file.
	ErrNoCatalog = errors.New("catalog: no catalog")
	// ErrSchema: the catalog was written by another version of this package.
	ErrSchema = errors.New("catalog: written with another schema")
	// ErrLocked: another process writes this catalog.
	ErrLocked = errors.New("catalog: another process writes this catalog")
	// ErrReadOnly: a write to a catalog opened read-only.
	ErrReadOnly = errors.New("catalog: opened read-only")
	// ErrOtherStore: the catalog was built from another archive's store.
	ErrOtherStore = errors.New("catalog: built from another archive")
	// ErrNotFound: no such list, month, thread or message.
	ErrNotFound = errors.New("catalog: not found")
	// ErrDamaged: the catalog file is not a database or is corrupt
	// (SQLITE_NOTADB, SQLITE_CORRUPT); it is rebuilt from the store
	// (RebuildOpen, Catalog.RebuildFrom, Rebuild).
	ErrDamaged = errors.New("catalog: the catalog file is damaged")
	// ErrSearchCost: a search needed more than Options.SearchTimeout.
	ErrSearchCost = errors.New("catalog: the search takes more work than one search is given")
)

// Options configure Open. The zero value opens the catalog for writing,
// creating it if missing, with logs discarded.
type Options struct {
	// ReadOnly opens an existing catalog for reading only, without the lock.
	ReadOnly bool
	// Immutable, with ReadOnly, reads a catalog nothing can change (a
	// snapshot on a read-only file system) without locks (immutable=1), as
	// SQLite cannot create the shared-memory file a WAL reader needs.
	Immutable bool
	// Logger receives notes (a schema rebuild). nil discards them.
	Logger *slog.Logger
	// step, if set, is called at each step of a rebuild (tests).
	step func(string)
	// SearchTimeout bounds the time one search may read the index; one
	// that needs more is interrupted and fails with ErrSearchCost.
	SearchTimeout time.Duration
}

// DefaultSearchTimeout is Options.SearchTimeout's default. MaxQueryWords
// keeps searches far below it; this is the backstop, with room for a
// loaded machine, whose searches take longer than the CPU they use.
const DefaultSearchTimeout = 500 * time.Millisecond

// SearchConns is how many searches read the catalog at once, on
// connections of their own, so that page reads keep theirs and some CPUs.
func SearchConns() int { return max(1, runtime.GOMAXPROCS(0)/2) }

// Catalog is an open catalog. Its read methods are safe for concurrent
// use; its write methods (Sync, Follow, RebuildFrom) are serialized.
type Catalog struct {
	path string
	log  *slog.Logger
	r    *sql.DB // readers: a pool, query_only
	s    *sql.DB // readers for searches: a smaller pool (searchConns)
	w    *sql.DB // the one writer connection; nil when read-only
	lock *lockFile

	// threadCounts is set when the catalog keeps its lists' thread
	// counts (threadCountsSchema): always once a writer opened it.
	threadCounts bool

	wmu sync.Mutex // serializes writes and guards st
	st  *writeState
	// spool, while a rebuild indexes the store, holds the search text
	// until the labels can follow the dates (labels.go). Guarded by wmu.
	spool *textSpool

	status atomic.Pointer[Status]

	searchTimeout time.Duration
	// file is the file as opened, to tell when it is replaced (Replaced).
	file os.FileInfo

	pagesMu sync.Mutex
	pages   map[string]*pageIndex // by list

	// stmts are the prepared reading statements of the queries a
	// message's page runs, by query: parsing one costs SQLite as much as
	// running it.
	stmts sync.Map
	// closeMu keeps Close from closing the pool under a prepare. closed
	// is written under it and wmu, and read under either.
	closeMu sync.RWMutex
	closed  bool

	// writable says this process holds the writer's lock: nobody else
	// changes the file, so Generation may answer from gen while genSeq,
	// bumped after every commit of the cursor, still holds gen's seq.
	writable atomic.Bool
	gen      atomic.Pointer[generation]
	genSeq   atomic.Uint64
}

// generation is the cursor a writable catalog read at seq.
type generation struct {
	seq uint64
	v   string
}

// Open opens the catalog at path. A writable Open takes the lock file
// path.lock (ErrLocked if another process holds it), creates a missing
// catalog, and empties one of another schema to rebuild it from the store.
func Open(ctx context.Context, path string, opts Options) (*Catalog, error) {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open catalog %s: %w", path, err)
	}
	c := &Catalog{path: abs, log: log.With("catalog", path), searchTimeout: opts.SearchTimeout}
	if c.searchTimeout <= 0 {
		c.searchTimeout = DefaultSearchTimeout
	}
	if opts.ReadOnly {
		if _, err := os.Stat(abs); err != nil {
			return nil, fmt.Errorf("cannot open catalog %s: %w: %w", path, ErrNoCatalog, err)
		}
		open := openDB
		if opts.Immutable {
			open = openImmutable
		}
		if c.r, err = open(abs, true, 0); err != nil {
			return nil, fmt.Errorf("cannot open catalog %s: %w", path, err)
		}
		if c.s, err = open(abs, true, SearchConns()); err != nil {
			c.r.Close()
			return nil, fmt.Errorf("cannot open catalog %s: %w", path, err)
		}
		if err := c.checkVersion(ctx); err != nil {
			c.r.Close()
			c.s.Close()
			return nil, err
		}
		if c.threadCounts, err = hasTable(ctx, c.r, "list_threads"); err != nil {
			c.r.Close()
			c.s.Close()
			return nil, err
		}
		c.file, _ = os.Stat(abs)
		return c, nil
	}
	if err := os.MkdirAll(filepath.Dir(abs), 0o755); err != nil {
		return nil, fmt.Errorf("cannot create the directory of catalog %s: %w", path, err)
	}
	if c.lock, err = takeLock(abs + ".lock"); err != nil {
		return nil, fmt.Errorf("cannot open catalog %s for writing: %w", path, err)
	}
	if err := c.openWritable(ctx); err != nil {
		c.lock.Release()
		return nil, fmt.Errorf("cannot open catalog %s: %w", path, err)
	}
	return c, nil
}

// markDamaged wraps err with ErrDamaged when SQLite says the file is not
// a database or is corrupt (https://sqlite.org/rescode.html: the primary
// codes SQLITE_CORRUPT, 11, and SQLITE_NOTADB, 26).
func markDamaged(err error) error {
	var se *sqlite.Error
	if errors.As(err, &se) {
		switch se.Code() & 0xff {
		case 11, 26:
			return fmt.Errorf("%w: %w", ErrDamaged, err)
		}
	}
	return err
}

func (c *Catalog) openWritable(ctx context.Context) error {
	var err error
	if c.w, err = openDB(c.path, false, 1); err != nil {
		return err
	}
	v, err := c.version(ctx, c.w)
	switch {
	case err != nil:
		c.w.Close()
		return err
	case v != 0 && v != SchemaVersion:
		// Derived data: start again rather than migrate, keeping only
		// the numbers IMAP and NNTP clients know (numbers.go).
		c.log.Warn("catalog written with another schema: rebuilding it from the store", "schema", v, "want", SchemaVersion)
		keep, err := hasNumbers(ctx, c.w)
		c.w.Close()
		if err != nil {
			return err
		}
		old := c.path + ".old"
		for _, suffix := range []string{"", "-wal", "-shm"} {
			if err := os.Remove(old + suffix); err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cannot remove the out-of-date catalog: %w", err)
			}
		}
		for _, suffix := range []string{"", "-wal", "-shm"} {
			var err error
			if keep && suffix != "-shm" {
				err = os.Rename(c.path+suffix, old+suffix)
			} else {
				err = os.Remove(c.path + suffix)
			}
			if err != nil && !errors.Is(err, os.ErrNotExist) {
				return fmt.Errorf("cannot remove the out-of-date catalog: %w", err)
			}
		}
		if c.w, err = openDB(c.path, false, 1); err != nil {
			return err
		}
		if err := c.create(ctx); err != nil {
			c.w.Close()
			return err
		}
		if keep {
			if kept, err := carry(ctx, c, old); err != nil {
				c.log.Warn("cannot read the IMAP and NNTP numbers of the out-of-date catalog: the new one numbers its messages anew, under a new UIDVALIDITY (IMAP clients download their mailboxes again)", "err", err)
			} else {
				c.log.Info("kept the IMAP and NNTP numbers of the out-of-date catalog", "uidvalidity", kept.Validity, "mailboxes", kept.Lists, "numbers", kept.Numbers)
			}
			for _, suffix := range []string{"", "-wal", "-shm"} {
				os.Remove(old + suffix)
			}
		}
	case v == 0:
		if err := c.create(ctx); err != nil {
			c.w.Close()
			return err
		}
	default:
		// Indexes added since SchemaVersion was set, which need no
		// rebuild: made once, in a second at a million messages.
		if _, err := c.w.ExecContext(ctx, labelListIndex); err != nil {
			c.w.Close()
			return fmt.Errorf("cannot add an index to the catalog: %w", markDamaged(err))
		}
		// Likewise the lists' thread counts, in a second at a million.
		if err := addThreadCounts(ctx, c.w); err != nil {
			c.w.Close()
			return fmt.Errorf("cannot add the lists' thread counts to the catalog: %w", markDamaged(err))
		}
	}
	c.threadCounts = true
	if c.r, err = openDB(c.path, true, 0); err != nil {
		c.w.Close()
		return err
	}
	if c.s, err = openDB(c.path, true, SearchConns()); err != nil {
		c.w.Close()
		c.r.Close()
		return err
	}
	c.file, _ = os.Stat(c.path)
	c.writable.Store(true)
	return nil
}

// openDB opens a pool of query_only readers, or the one writer connection,
// whose transactions then never wait on each other.
func openDB(path string, readOnly bool, conns int) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "busy_timeout(10000)")
	if !readOnly {
		// Incremental: compact gives back the pages a merge of the search
		// index frees (a rebuild's merge frees a fifth of the file). Only a
		// new file takes it, and only before WAL mode writes its header.
		q.Add("_pragma", "auto_vacuum(INCREMENTAL)")
	}
	q.Add("_pragma", "journal_mode(WAL)")
	// NORMAL in WAL mode: a power loss may lose the last transactions,
	// never corrupt the file; the catalog catches up from its cursor.
	q.Add("_pragma", "synchronous(NORMAL)")
	if readOnly {
		q.Add("_pragma", "query_only(1)")
	} else {
		q.Add("_txlock", "immediate")
		// A removed message is overwritten, not left in free pages.
		q.Add("_pragma", "secure_delete(1)")
	}
	return openPool(path, q, conns)
}

// openPool opens conns connections (0: twice the CPUs) to path with q.
func openPool(path string, q url.Values, conns int) (*sql.DB, error) {
	// Absolute: a relative path's first directory would be read as the
	// URI's authority ("file://a1/catalog.db"), which SQLite refuses.
	if abs, err := filepath.Abs(path); err == nil {
		path = abs
	}
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	db, err := sql.Open("sqlite", u.String())
	if err != nil {
		return nil, err
	}
	if conns <= 0 {
		conns = 2 * runtime.GOMAXPROCS(0)
	}
	db.SetMaxOpenConns(conns)
	db.SetMaxIdleConns(conns)
	return db, nil
}

// openImmutable opens a pool of readers of a file nothing can change.
func openImmutable(path string, _ bool, conns int) (*sql.DB, error) {
	q := url.Values{}
	q.Add("mode", "ro")
	q.Add("immutable", "1")
	q.Add("_pragma", "query_only(1)")
	return openPool(path, q, conns)
}

// version returns the schema version recorded in db, 0 for an empty file,
// -1 for one without a version.
func (c *Catalog) version(ctx context.Context, db *sql.DB) (int, error) {
	var n int
	if err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type='table' AND name='meta'`).Scan(&n); err != nil {
		return 0, fmt.Errorf("cannot read catalog: %w", markDamaged(err))
	}
	if n == 0 {
		return 0, nil
	}
	var s string
	err := db.QueryRowContext(ctx, `SELECT value FROM meta WHERE key='schema'`).Scan(&s)
	if errors.Is(err, sql.ErrNoRows) {
		return -1, nil
	}
	if err != nil {
		return 0, fmt.Errorf("cannot read the catalog's schema version: %w", markDamaged(err))
	}
	v, err := strconv.Atoi(s)
	if err != nil || v <= 0 {
		return -1, nil // a catalog, of no version this package wrote
	}
	return v, nil
}

func (c *Catalog) checkVersion(ctx context.Context) error {
	v, err := c.version(ctx, c.r)
	if err != nil {
		return err
	}
	if v != SchemaVersion {
		return fmt.Errorf("%w: catalog %s has schema %d, this program reads %d: let `resolver serve` or `resolver reindex` rebuild it", ErrSchema, c.path, v, SchemaVersion)
	}
	return nil
}

// schema is the catalog's layout. Dates are Unix seconds, UTC.
const schema = `
CREATE TABLE meta (key TEXT PRIMARY KEY, value TEXT NOT NULL) WITHOUT ROWID;

-- One row per message, in the order the catalog indexed them.
CREATE TABLE messages (
	id          INTEGER PRIMARY KEY,
	cn          TEXT    NOT NULL UNIQUE,  -- call number
	list        TEXT    NOT NULL,
	date        INTEGER NOT NULL,
	date_source INTEGER NOT NULL,         -- DateHeader, DateReceived, DateArchived
	from_name   TEXT    NOT NULL,
	from_addr   TEXT    NOT NULL,
	subject     TEXT    NOT NULL,         -- (its BaseSubject is its thread's base when it is the root)
	reply       INTEGER NOT NULL,         -- the subject has a reply prefix
	msgid       TEXT    NOT NULL,         -- without angle brackets, or ''
	msgid_key   INTEGER NOT NULL,         -- textKey(msgid): what messages_msgid holds
	thread      INTEGER NOT NULL,
	size        INTEGER NOT NULL,
	attachments INTEGER NOT NULL,
	added       INTEGER NOT NULL,         -- when it was archived
	arrived     INTEGER NOT NULL,         -- when the list had it (Arrival)
	via         TEXT    NOT NULL,         -- the list's address a rewritten From had, or ''
	joined      INTEGER NOT NULL,         -- JoinedBy
	quotes      INTEGER NOT NULL,         -- messages.id it quotes, joined by subject; or 0
	sketch      BLOB,                     -- subject.go; NULL for a message with references
	label       INTEGER NOT NULL          -- its rowid in fts (labels.go), unique; negative while a rebuild spools its text
);
CREATE INDEX messages_list_date ON messages (list, date);
CREATE INDEX messages_thread ON messages (thread, date);
CREATE INDEX messages_msgid ON messages (msgid_key, list);

-- The Message-IDs a message names (References, or without it the first
-- of In-Reply-To), in order: the last is its parent.
CREATE TABLE refs (
	msg   INTEGER NOT NULL,
	pos   INTEGER NOT NULL,
	msgid TEXT    NOT NULL,
	key   INTEGER NOT NULL,  -- textKey(msgid)
	PRIMARY KEY (msg, pos)
) WITHOUT ROWID;
CREATE INDEX refs_msgid ON refs (key);

CREATE TABLE threads (
	id         INTEGER PRIMARY KEY,
	list       TEXT    NOT NULL,
	root       INTEGER NOT NULL,  -- messages.id of its earliest message
	base_key   INTEGER NOT NULL,  -- textKey of the root's BaseSubject
	root_reply INTEGER NOT NULL,  -- the root's subject has a reply prefix
	messages   INTEGER NOT NULL,
	first      INTEGER NOT NULL,  -- the earliest date
	last       INTEGER NOT NULL   -- the last arrival
);
CREATE INDEX threads_list_base ON threads (list, base_key, last);

CREATE TABLE lists (
	name     TEXT PRIMARY KEY,
	messages INTEGER NOT NULL,
	first    INTEGER NOT NULL,
	last     INTEGER NOT NULL,
	address  TEXT    NOT NULL DEFAULT '', -- the List-Post address its messages last named
	description TEXT NOT NULL DEFAULT '', -- the List-Id phrase they last named (ListDescription)
	subscribe   TEXT NOT NULL DEFAULT ''  -- the List-Subscribe URL they last named (ListSubscribe)
) WITHOUT ROWID;

-- Moves (store.Move) of messages the catalog has not indexed yet: the
-- list they are indexed into.
CREATE TABLE moved (
	cn   TEXT PRIMARY KEY,
	list TEXT NOT NULL
) WITHOUT ROWID;

-- Messages removed from the archive (remove.go): a thread shows a
-- removed message's place by its Message-ID's SHA-256.
CREATE TABLE removed (
	cn        TEXT    PRIMARY KEY,
	msgid_sum BLOB,              -- SHA-256 of its Message-ID, NULL for none
	removed   INTEGER NOT NULL,  -- when
	reason    TEXT    NOT NULL,
	date      INTEGER            -- the message's date, NULL if never indexed
) WITHOUT ROWID;
CREATE INDEX removed_msgid ON removed (msgid_sum);

CREATE TABLE months (
	list     TEXT    NOT NULL,
	month    INTEGER NOT NULL,  -- year*100 + month
	messages INTEGER NOT NULL,
	PRIMARY KEY (list, month)
) WITHOUT ROWID;
`

// lateIndexes are the indexes a rebuild makes once its rows are in
// (recover.go), rather than keeping them up to date row by row: none is
// read while it indexes the store, and each changes at every message
// (a thread's last arrival, a label set in date order) or takes its rows
// in an order of its own (dates, arrivals). The catalog's other writers
// have them from the start (create).
const lateIndexes = `
CREATE UNIQUE INDEX messages_label ON messages (label);
` + labelListIndex + `;
-- The labelled messages in date order, without the late ones (labels.go).
CREATE INDEX messages_date ON messages (date) WHERE label < 4611686018427387904;
CREATE INDEX messages_list_arrived ON messages (list, arrived);
CREATE INDEX threads_list_last ON threads (list, last);
`

// lateIndexNames are lateIndexes' names, which a rebuild drops from its
// new, empty catalog.
var lateIndexNames = []string{"messages_label", "messages_label_list", "messages_date", "messages_list_arrived", "threads_list_last"}

// labelListIndex has each label's list: a search with list: reads the
// index's matches in label order and keeps those of its lists, one
// look-up of this small index each, where messages_label's led to the
// message's row (of 27 columns) for its list: a third of the time of
// `list:linux-kernel patch`'s count at 108,117 messages. The writer adds
// it to a catalog made before it (openWritable), once.
const labelListIndex = `CREATE UNIQUE INDEX IF NOT EXISTS messages_label_list ON messages (label, list)`

func (c *Catalog) create(ctx context.Context) error {
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cannot create catalog: %w", err)
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, schema+lateIndexes+searchSchema+numbersSchema+versionsSchema+postersSchema+threadCountsSchema); err != nil {
		return fmt.Errorf("cannot create catalog: %w", err)
	}
	if err := initNumbers(ctx, tx); err != nil {
		return fmt.Errorf("cannot create catalog: %w", err)
	}
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES ('schema', ?)`, strconv.Itoa(SchemaVersion)); err != nil {
		return fmt.Errorf("cannot create catalog: %w", err)
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("cannot create catalog: %w", err)
	}
	return nil
}

// Path returns the catalog file's path.
func (c *Catalog) Path() string { return c.path }

// Writable reports whether this Catalog may write (it holds the lock).
func (c *Catalog) Writable() bool { return c.w != nil }

// Close closes the catalog, waiting for a write in progress. A closed
// catalog's methods fail ("sql: database is closed"); a second Close
// does nothing.
func (c *Catalog) Close() error {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	c.closeMu.Lock()
	defer c.closeMu.Unlock()
	if c.closed {
		return nil
	}
	// The pools are closed, not dropped: a reader still holding the
	// catalog gets their error, not a nil pointer.
	c.closed = true
	c.writable.Store(false)
	c.genSeq.Add(1)
	var errs []error
	c.stmts.Range(func(q, s any) bool {
		s.(*sql.Stmt).Close()
		c.stmts.Delete(q)
		return true
	})
	if c.r != nil {
		errs = append(errs, c.r.Close())
	}
	if c.s != nil {
		errs = append(errs, c.s.Close())
	}
	if c.w != nil {
		// A checkpoint folds the WAL in: a catalog at rest is one file.
		c.w.Exec(`PRAGMA wal_checkpoint(TRUNCATE)`)
		errs = append(errs, c.w.Close())
	}
	if c.lock != nil {
		errs = append(errs, c.lock.Release())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot close catalog %s: %w", c.path, err)
	}
	return nil
}

// meta reads a meta value, "" if unset.
func meta(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, key string) (string, error) {
	var v string
	err := q.QueryRowContext(ctx, `SELECT value FROM meta WHERE key=?`, key).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return "", nil
	}
	if err != nil {
		return "", fmt.Errorf("cannot read catalog meta %s: %w", key, markDamaged(err))
	}
	return v, nil
}

func setMeta(ctx context.Context, tx *sql.Tx, key, value string) error {
	if _, err := tx.ExecContext(ctx, `INSERT INTO meta (key, value) VALUES (?, ?) ON CONFLICT (key) DO UPDATE SET value=excluded.value`, key, value); err != nil {
		return fmt.Errorf("cannot write catalog meta %s: %w", key, err)
	}
	return nil
}
