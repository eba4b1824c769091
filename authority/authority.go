// Package authority is the run authority: it issues each run of the call
// number space at most once, and remembers to whom, in one bbolt file
// (runs.db). Issue returns a run only once the transaction recording it has
// committed, so a crash can waste a run but never issue one twice; Open
// refuses a database whose next run is not above every recorded lease.
//
// [Local] holds runs.db only for the moment of one allocation, so that
// processes on one machine can share it; while a coordinator holds the file,
// Local fails with [ErrLocked]. A Riak cluster (package
// authority/riakauthority) is the other [Issuer]. Restoring a backup rewinds
// the next run: [Authority.Bump] past every run any store has seen before
// issuing from it.
package authority

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	bolt "go.etcd.io/bbolt"
	berrors "go.etcd.io/bbolt/errors"
)

// Sentinel errors. Test with errors.Is.
var (
	ErrExhausted    = errors.New("authority: the run space of this call-number version is exhausted (run 2^30-1 was issued)")
	ErrNotAuthority = errors.New("authority: not a run authority database")
	// ErrInconsistent is refused rather than risk issuing a run twice.
	ErrInconsistent = errors.New("authority: inconsistent database")
	ErrNotIssued    = errors.New("authority: run never issued")
	ErrLocked       = errors.New("authority: database held open by another process")
	ErrBackwards    = errors.New("authority: the next run can only move forwards")
	ErrClosed       = errors.New("authority: closed")
	ErrScheme       = errors.New("authority: the authority already exists with another scheme")
	ErrRetired      = errors.New("authority: this authority has moved") // by coordinator migrate
)

// errExists: create found a file at the path; OpenOrCreate then opens it.
var errExists = errors.New("authority: database already exists")

// Format marks an authority database; a bbolt file without it is not one.
const Format = "chibrary-authority 1"

// Leases are keyed by run, big-endian, so that the last is the highest.
var (
	bucketMeta   = []byte("authority")
	bucketLeases = []byte("leases")

	keyFormat  = []byte("format")
	keyID      = []byte("id")
	keyScheme  = []byte("scheme")
	keyKey     = []byte("key")
	keyNextRun = []byte("next_run")
	keyCreated = []byte("created_at")
	// keyMovedTo names where a retired authority went.
	keyMovedTo = []byte("moved_to")
)

// FileMode is the mode of a new runs.db: it holds the shuffle key.
const FileMode = 0o600

// Holder describes the process a run is issued to.
type Holder struct {
	Program string `json:"program"`
	Host    string `json:"host"`
	PID     int    `json:"pid"`
	Note    string `json:"note"`
}

// Options configure Open and OpenOrCreate; zero values are defaults.
type Options struct {
	// Scheme of a new authority; "" means shuffle.Mix. An existing one
	// keeps its own, and OpenOrCreate refuses another (ErrScheme).
	Scheme shuffle.Scheme

	// LockTimeout bounds the wait for another's lock (ErrLocked); 0 means 10s.
	LockTimeout time.Duration

	ReadOnly bool // Issue and Bump fail

	// BatchDelay is how long an Issue waits to share its commit; 0 means 2ms.
	BatchDelay time.Duration

	// OneCommitPerIssue commits every Issue alone: for a process alone in
	// the file, and for benchmarks that show what sharing buys.
	OneCommitPerIssue bool

	Rand io.Reader // of the ID, key and nonces; nil means crypto/rand
}

func (o Options) lockTimeout() time.Duration {
	if o.LockTimeout <= 0 {
		return 10 * time.Second
	}
	return o.LockTimeout
}

func (o Options) rand() io.Reader {
	if o.Rand == nil {
		return rand.Reader
	}
	return o.Rand
}

// Authority is an open run authority database, safe for concurrent use.
type Authority struct {
	db      *bolt.DB
	path    string
	id      string
	scheme  shuffle.Scheme
	key     shuffle.Key
	created time.Time
	movedTo string
	opts    Options
	now     func() time.Time
}

type record struct {
	Run      uint32    `json:"run"`
	Program  string    `json:"program"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Note     string    `json:"note"`
	IssuedAt time.Time `json:"issued_at"`
	Nonce    string    `json:"nonce"`
}

// OpenOrCreate opens the authority at path, creating it if there is no
// file: a new one has a random ID and key and issues run 1 first, and its
// file appears complete or not at all.
// It fails with ErrScheme if opts.Scheme is set and cannot be had.
func OpenOrCreate(ctx context.Context, path string, opts Options) (a *Authority, created bool, err error) {
	if _, err := os.Stat(path); errors.Is(err, fs.ErrNotExist) {
		err := create(path, opts)
		switch {
		case err == nil:
			created = true
		case errors.Is(err, errExists): // another process created it first
		default:
			return nil, false, err
		}
	}
	a, err = Open(ctx, path, opts)
	if err != nil {
		return nil, false, err
	}
	if opts.Scheme != "" && a.Scheme() != opts.Scheme {
		a.Close()
		return nil, false, SchemeError(path, a.Scheme(), opts.Scheme)
	}
	return a, created, nil
}

// SchemeError is the ErrScheme of the authority at path.
func SchemeError(path string, has, asked shuffle.Scheme) error {
	return fmt.Errorf("%w: %s has scheme %s, not %s (the scheme is chosen once, when an authority is created; drop --scheme, or create a new archive)", ErrScheme, path, has, asked)
}

// DefaultScheme is mix: with bits, a few numbers of a run reveal the rest.
const DefaultScheme = shuffle.Mix

// create makes a new authority at path, or fails with errExists: it never
// replaces a file.
func create(path string, opts Options) error {
	scheme := opts.Scheme
	if scheme == "" {
		scheme = DefaultScheme
	}
	if _, err := shuffle.ParseScheme(string(scheme)); err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	var id [16]byte
	var key shuffle.Key
	if _, err := io.ReadFull(opts.rand(), id[:]); err != nil {
		return fmt.Errorf("cannot create %s: cannot draw the authority ID: %w", path, err)
	}
	if _, err := io.ReadFull(opts.rand(), key[:]); err != nil {
		return fmt.Errorf("cannot create %s: cannot draw the key: %w", path, err)
	}

	dir, base := filepath.Split(path)
	if dir == "" {
		dir = "."
	}
	tmpf, err := os.CreateTemp(dir, "."+base+".new-*")
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, pathless(err))
	}
	tmp := tmpf.Name()
	tmpf.Close()
	defer os.Remove(tmp)
	if err := os.Chmod(tmp, FileMode); err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	db, err := bolt.Open(tmp, FileMode, &bolt.Options{Timeout: time.Second})
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		m, err := tx.CreateBucket(bucketMeta)
		if err != nil {
			return err
		}
		if _, err := tx.CreateBucket(bucketLeases); err != nil {
			return err
		}
		for _, kv := range [][2][]byte{
			{keyFormat, []byte(Format)},
			{keyID, []byte(hex.EncodeToString(id[:]))},
			{keyScheme, []byte(scheme)},
			{keyKey, key[:]},
			{keyNextRun, encodeNext(1)},
			{keyCreated, []byte(time.Now().UTC().Format(time.RFC3339Nano))},
		} {
			if err := m.Put(kv[0], kv[1]); err != nil {
				return err
			}
		}
		return nil
	})
	if cerr := db.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	if err := publish(tmp, path); err != nil {
		return err
	}
	syncDir(dir)
	return nil
}

// pathless drops the path an *fs.PathError repeats.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

// publish links tmp to path unless something is there (a link never
// replaces); without hard links, it renames after checking for absence.
func publish(tmp, path string) error {
	err := os.Link(tmp, path)
	if err == nil {
		return nil
	}
	if errors.Is(err, fs.ErrExist) {
		return fmt.Errorf("cannot create %s: %w", path, errExists)
	}
	if _, serr := os.Lstat(path); serr == nil {
		return fmt.Errorf("cannot create %s: %w", path, errExists)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("cannot create %s: %w", path, err)
	}
	return nil
}

func syncDir(dir string) {
	if d, err := os.Open(dir); err == nil {
		d.Sync() // best effort: some systems cannot sync a directory
		d.Close()
	}
}

// Open opens and checks an existing authority database, waiting up to
// opts.LockTimeout for another process to release it (ErrLocked).
func Open(ctx context.Context, path string, opts Options) (*Authority, error) {
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the run authority %s: %w", path, pathless(err))
	}
	if !fi.Mode().IsRegular() || fi.Size() == 0 {
		// bbolt would turn an empty file into a database: refuse instead.
		return nil, fmt.Errorf("cannot open %s: %w (empty or not a regular file)", path, ErrNotAuthority)
	}
	db, err := openBolt(ctx, path, opts)
	if err != nil {
		return nil, err
	}
	a := &Authority{db: db, path: path, opts: opts, now: time.Now}
	if err := db.View(a.load); err != nil {
		db.Close()
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	if opts.BatchDelay > 0 {
		db.MaxBatchDelay = opts.BatchDelay
	} else {
		db.MaxBatchDelay = 2 * time.Millisecond
	}
	return a, nil
}

// openBolt waits for the lock in short steps so that ctx is honoured.
func openBolt(ctx context.Context, path string, opts Options) (*bolt.DB, error) {
	const step = 100 * time.Millisecond
	deadline := time.Now().Add(opts.lockTimeout())
	for {
		db, err := bolt.Open(path, FileMode, &bolt.Options{Timeout: step, ReadOnly: opts.ReadOnly})
		switch {
		case err == nil:
			return db, nil
		case errors.Is(err, berrors.ErrTimeout):
			if ctx.Err() != nil {
				return nil, fmt.Errorf("cannot open %s: %w", path, context.Cause(ctx))
			}
			if time.Now().After(deadline) {
				return nil, fmt.Errorf("cannot open %s: %w (waited %v)", path, ErrLocked, opts.lockTimeout())
			}
		case errors.Is(err, berrors.ErrInvalid), errors.Is(err, berrors.ErrVersionMismatch),
			errors.Is(err, berrors.ErrChecksum), isBoltFormatError(err):
			return nil, fmt.Errorf("cannot open %s: %w (%v)", path, ErrNotAuthority, err)
		default:
			return nil, fmt.Errorf("cannot open %s: %w", path, pathless(err))
		}
	}
}

// isBoltFormatError recognises bbolt's errors, with no sentinel, for a short file.
func isBoltFormatError(err error) bool {
	s := err.Error()
	return strings.Contains(s, "file size too small") || strings.Contains(s, "invalid database")
}

// load reads and checks the metadata; it is the paranoid open check.
func (a *Authority) load(tx *bolt.Tx) error {
	m := tx.Bucket(bucketMeta)
	if m == nil || string(m.Get(keyFormat)) != Format {
		return fmt.Errorf("%w: a bbolt database without the %q format mark", ErrNotAuthority, Format)
	}
	leases := tx.Bucket(bucketLeases)
	if leases == nil {
		return fmt.Errorf("%w: no leases bucket", ErrInconsistent)
	}
	id := string(m.Get(keyID))
	if b, err := hex.DecodeString(id); err != nil || len(b) != 16 {
		return fmt.Errorf("%w: bad authority ID %q", ErrInconsistent, id)
	}
	scheme, err := shuffle.ParseScheme(string(m.Get(keyScheme)))
	if err != nil {
		return fmt.Errorf("%w: %w", ErrInconsistent, err)
	}
	k := m.Get(keyKey)
	if len(k) != shuffle.KeySize {
		return fmt.Errorf("%w: key of %d bytes, want %d", ErrInconsistent, len(k), shuffle.KeySize)
	}
	next, err := decodeNext(m.Get(keyNextRun))
	if err != nil {
		return err
	}
	if last, _ := leases.Cursor().Last(); last != nil {
		run, err := decodeRun(last)
		if err != nil {
			return err
		}
		if uint64(run) >= next {
			return fmt.Errorf("%w: run %d is recorded but the next run is %d; refusing to issue runs that may already be in use", ErrInconsistent, run, next)
		}
	}
	a.id = id
	a.scheme = scheme
	copy(a.key[:], k)
	a.created, _ = time.Parse(time.RFC3339Nano, string(m.Get(keyCreated)))
	a.movedTo = string(m.Get(keyMovedTo))
	return nil
}

func encodeNext(n uint64) []byte {
	return binary.BigEndian.AppendUint64(nil, n)
}

func decodeNext(b []byte) (uint64, error) {
	if len(b) != 8 {
		return 0, fmt.Errorf("%w: next run of %d bytes", ErrInconsistent, len(b))
	}
	n := binary.BigEndian.Uint64(b)
	if n < 1 || n > callnumber.MaxRun+1 {
		return 0, fmt.Errorf("%w: next run %d outside 1..2^30", ErrInconsistent, n)
	}
	return n, nil
}

func runKey(run uint32) []byte { return binary.BigEndian.AppendUint32(nil, run) }

func decodeRun(k []byte) (uint32, error) {
	if len(k) != 4 {
		return 0, fmt.Errorf("%w: lease key of %d bytes", ErrInconsistent, len(k))
	}
	r := binary.BigEndian.Uint32(k)
	if r == 0 || r > callnumber.MaxRun {
		return 0, fmt.Errorf("%w: lease of run %d", ErrInconsistent, r)
	}
	return r, nil
}

// ID returns the authority ID (32 hex digits).
func (a *Authority) ID() string { return a.id }

// Scheme returns the shuffle scheme chosen at creation.
func (a *Authority) Scheme() shuffle.Scheme { return a.scheme }

// Key returns the shuffle key.
func (a *Authority) Key() shuffle.Key { return a.key }

// Path returns the database file name.
func (a *Authority) Path() string { return a.path }

// Created returns when the authority was created.
func (a *Authority) Created() time.Time { return a.created }

// MovedTo returns where the authority was moved to (see Retire), or "".
func (a *Authority) MovedTo() string { return a.movedTo }

// RetiredError is the ErrRetired of the authority at path, moved to url.
func RetiredError(path, url string) error {
	return fmt.Errorf("%w: %s was moved to %s by coordinator migrate and issues no more runs; use --authority %s", ErrRetired, path, url, url)
}

// Retire records that the authority has moved to url: from then on Issue and
// Bump refuse with ErrRetired, so that a forgotten program cannot number.
func (a *Authority) Retire(ctx context.Context, url string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot retire %s: %w", a.path, err)
	}
	if url == "" {
		return fmt.Errorf("cannot retire %s: no destination", a.path)
	}
	err := a.db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if m == nil {
			return fmt.Errorf("%w: buckets missing", ErrInconsistent)
		}
		switch was := string(m.Get(keyMovedTo)); was {
		case url:
			return nil
		case "":
			return m.Put(keyMovedTo, []byte(url))
		default:
			return RetiredError(a.path, was)
		}
	})
	if err != nil {
		return fmt.Errorf("cannot retire %s: %w", a.path, mapClosed(err))
	}
	a.movedTo = url
	return nil
}

// Leases returns every lease the authority has issued, by run.
func (a *Authority) Leases(ctx context.Context) ([]callnumber.Lease, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("cannot read the leases: %w", err)
	}
	var out []callnumber.Lease
	err := a.db.View(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeases).ForEach(func(k, v []byte) error {
			run, err := decodeRun(k)
			if err != nil {
				return err
			}
			var rec record
			if err := json.Unmarshal(v, &rec); err != nil || rec.Run != run {
				return fmt.Errorf("%w: lease of run %d: %v", ErrInconsistent, run, err)
			}
			out = append(out, a.lease(rec))
			return nil
		})
	})
	if err != nil {
		return nil, fmt.Errorf("cannot read the leases: %w", mapClosed(err))
	}
	return out, nil
}

// Issue issues the next run to holder and returns its lease once committed;
// once the transaction has started, it ignores ctx.
func (a *Authority) Issue(ctx context.Context, h Holder) (callnumber.Lease, error) {
	if err := ctx.Err(); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
	}
	var nonce [16]byte
	if _, err := io.ReadFull(a.opts.rand(), nonce[:]); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: cannot draw a nonce: %w", err)
	}
	rec := record{
		Program: h.Program, Host: h.Host, PID: h.PID, Note: h.Note,
		Nonce: hex.EncodeToString(nonce[:]),
	}
	// bbolt may rerun fn (it retries a batch without a failing member), so
	// it recomputes everything from the transaction each time.
	fn := func(tx *bolt.Tx) error {
		m, leases := tx.Bucket(bucketMeta), tx.Bucket(bucketLeases)
		if m == nil || leases == nil {
			return fmt.Errorf("%w: buckets missing", ErrInconsistent)
		}
		if to := m.Get(keyMovedTo); to != nil {
			return RetiredError(a.path, string(to))
		}
		next, err := decodeNext(m.Get(keyNextRun))
		if err != nil {
			return err
		}
		if next > callnumber.MaxRun {
			return ErrExhausted
		}
		run := uint32(next)
		k := runKey(run)
		if leases.Get(k) != nil {
			return fmt.Errorf("%w: run %d is already recorded but is the next run", ErrInconsistent, run)
		}
		rec.Run = run
		rec.IssuedAt = a.now().UTC()
		v, err := json.Marshal(rec)
		if err != nil {
			return err
		}
		if err := leases.Put(k, v); err != nil {
			return err
		}
		return m.Put(keyNextRun, encodeNext(next+1))
	}
	var err error
	if a.opts.OneCommitPerIssue {
		err = a.db.Update(fn)
	} else {
		err = a.db.Batch(fn)
	}
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", mapClosed(err))
	}
	return a.lease(rec), nil
}

func (a *Authority) lease(r record) callnumber.Lease {
	return callnumber.Lease{
		Run:       r.Run,
		Version:   callnumber.CurrentVersion,
		Authority: a.id,
		Scheme:    a.scheme,
		Key:       a.key,
		Nonce:     r.Nonce,
		Program:   r.Program,
		Host:      r.Host,
		PID:       r.PID,
		Note:      r.Note,
		IssuedAt:  r.IssuedAt,
	}
}

func mapClosed(err error) error {
	if errors.Is(err, berrors.ErrDatabaseNotOpen) {
		return fmt.Errorf("%w: %w", ErrClosed, err)
	}
	return err
}

// Lease returns the lease issued for run, or ErrNotIssued.
func (a *Authority) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	if err := ctx.Err(); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d: %w", run, err)
	}
	var rec record
	err := a.db.View(func(tx *bolt.Tx) error {
		v := tx.Bucket(bucketLeases).Get(runKey(run))
		if v == nil {
			return ErrNotIssued
		}
		if err := json.Unmarshal(v, &rec); err != nil {
			return fmt.Errorf("%w: lease of run %d: %w", ErrInconsistent, run, err)
		}
		return nil
	})
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d: %w", run, mapClosed(err))
	}
	return a.lease(rec), nil
}

// NextRun returns the run the next Issue will issue; 2^30 when exhausted.
func (a *Authority) NextRun(ctx context.Context) (uint64, error) {
	var next uint64
	err := a.db.View(func(tx *bolt.Tx) error {
		var err error
		next, err = decodeNext(tx.Bucket(bucketMeta).Get(keyNextRun))
		return err
	})
	if err != nil {
		return 0, fmt.Errorf("cannot read the next run: %w", mapClosed(err))
	}
	return next, nil
}

// Bump moves the next run forward to `to` (2^30 exhausts the run space) so
// that runs below it are never issued: the step after restoring a backup.
func (a *Authority) Bump(ctx context.Context, to uint64) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("cannot bump the next run: %w", err)
	}
	if to < 1 || to > callnumber.MaxRun+1 {
		return fmt.Errorf("cannot bump the next run to %d: %w: want 1..%d", to, callnumber.ErrRun, callnumber.MaxRun+1)
	}
	err := a.db.Update(func(tx *bolt.Tx) error {
		m := tx.Bucket(bucketMeta)
		if was := m.Get(keyMovedTo); was != nil {
			return RetiredError(a.path, string(was))
		}
		next, err := decodeNext(m.Get(keyNextRun))
		if err != nil {
			return err
		}
		if to < next {
			return fmt.Errorf("%w: it is %d", ErrBackwards, next)
		}
		return m.Put(keyNextRun, encodeNext(to))
	})
	if err != nil {
		return fmt.Errorf("cannot bump the next run to %d: %w", to, mapClosed(err))
	}
	return nil
}

// Check reports whether the database is usable by reading its metadata.
func (a *Authority) Check(ctx context.Context) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	var b Authority
	if err := a.db.View(b.load); err != nil {
		return fmt.Errorf("cannot read %s: %w", a.path, mapClosed(err))
	}
	if b.id != a.id {
		return fmt.Errorf("%w: authority ID changed under us", ErrInconsistent)
	}
	return nil
}

// WriteTo writes a consistent copy of the database while it stays in use.
func (a *Authority) WriteTo(w io.Writer) (n int64, err error) {
	return a.Backup(w, nil)
}

// Backup is WriteTo that first tells sized (if not nil) the size to come.
func (a *Authority) Backup(w io.Writer, sized func(size int64)) (n int64, err error) {
	err = a.db.View(func(tx *bolt.Tx) error {
		if sized != nil {
			sized(tx.Size())
		}
		n, err = tx.WriteTo(w)
		return err
	})
	if err != nil {
		return n, fmt.Errorf("cannot copy %s: %w", a.path, mapClosed(err))
	}
	return n, nil
}

// Close closes the database, waiting for transactions in progress.
func (a *Authority) Close() error {
	if err := a.db.Close(); err != nil {
		return fmt.Errorf("cannot close %s: %w", a.path, err)
	}
	return nil
}

// ParseRun parses a run number in URLs and on command lines: decimal only.
func ParseRun(s string) (uint32, error) {
	if s == "" || len(s) > 10 || s[0] == '+' || s[0] == '-' {
		return 0, fmt.Errorf("%w: %q", callnumber.ErrRun, s)
	}
	n, err := strconv.ParseUint(s, 10, 32)
	if err != nil {
		return 0, fmt.Errorf("%w: %q", callnumber.ErrRun, s)
	}
	if n == 0 {
		return 0, callnumber.ErrRunZero
	}
	if n > callnumber.MaxRun {
		return 0, fmt.Errorf("%w: %d > %d", callnumber.ErrRun, n, callnumber.MaxRun)
	}
	return uint32(n), nil
}
