// Package riakauthority is a run authority whose state lives in a Riak
// cluster's strongly consistent buckets, beside the archive it numbers, so
// that coordinators and programs on any hosts can issue runs at once. In
// the consistent bucket type (chibrary_claims by default):
//
//	ARCHIVE.authority/meta     {"format","id","scheme","key","created_at","state","migrated_from"}
//	ARCHIVE.authority/meta.1-7 copies of meta, once it is ready
//	ARCHIVE.authority/next     {"next":N}: no run at or above N has been issued
//	                           (but for runs spilled while it could not be reached)
//	ARCHIVE.issued/RUN         one lease record per issued run (RUN in decimal)
//
// On a consistent bucket a write without a causal context creates the key
// only if it is absent: of racing writers on any hosts exactly one
// succeeds. So a run is issued by creating its lease record, and Issue
// returns it only once a majority of replicas acknowledged the create; a
// create retried after a lost reply finds the key taken, and takes it as
// its own only if the nonce is its own. A run may be skipped, never issued
// twice.
//
// So that handles do not all race for the same run, each reserves a block
// of runs by compare-and-set on next (one run at first, doubling up to
// 64), and Close gives back what it has not issued if no one reserved
// since. A consensus group serves while two of its three members are up; on
// fewer than 5 nodes, losing one node stops some groups. So Issue tries a
// run for one step only before moving to another (most likely in another
// group); while next cannot be reached, a handle spills: it picks runs at
// random just above next and moves next past them later. Programs open the
// authority from the copies of meta while meta's group cannot serve.
package riakauthority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	mrand "math/rand/v2"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/shuffle"
)

// Defaults, shared with the Riak store.
const (
	DefaultType    = "chibrary_claims" // strongly consistent
	DefaultArchive = "chibrary"
)

const (
	stateReady     = "ready"
	stateMigrating = "migrating"
)

// Sentinel errors, besides those of the authority package's contract.
var (
	ErrNoAuthority = errors.New("riakauthority: no run authority in this archive")
	ErrMigrating   = errors.New("riakauthority: the run authority is being moved here and is not ready")
	ErrOther       = errors.New("riakauthority: the archive holds another run authority") // from Migrate
	// ErrSetup: the bucket type is not consistent, or consistency is off.
	ErrSetup = errors.New("riakauthority: cluster not set up for a run authority")
)

var archiveName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// Options configure Open and OpenOrCreate. Nodes is required; the zero
// values of the others are defaults.
type Options struct {
	Nodes   []string // protocol buffers addresses, host:port
	Archive string   // [a-z0-9_-]{1,64}; "" means DefaultArchive
	Type    string   // strongly consistent bucket type; "" means DefaultType
	// Scheme of a new authority; "" means authority.DefaultScheme. If an
	// existing authority has another, opening fails with authority.ErrScheme.
	Scheme  shuffle.Scheme
	Timeout time.Duration // of every request; 0 means 10 seconds
	// RetryFor is how long a request the cluster cannot serve (a node
	// down, a group electing a leader) is retried; 0 means 60 seconds.
	RetryFor time.Duration
	Logger   *slog.Logger // nil discards
	Rand     io.Reader    // of the ID, key and nonces; nil means crypto/rand

	fault func(key string) error // see Authority.fault
}

// URL returns riak://NODES/ARCHIVE, as the --authority flag takes it.
func (o Options) URL() string {
	archive := o.Archive
	if archive == "" {
		archive = DefaultArchive
	}
	return "riak://" + strings.Join(o.Nodes, ",") + "/" + archive
}

func (o Options) rand() io.Reader {
	if o.Rand == nil {
		return rand.Reader
	}
	return o.Rand
}

// consensusWait: no strongly consistent answer by then means it is off.
const consensusWait = 15 * time.Second

// Authority is a run authority in a Riak cluster, safe for concurrent use;
// any number of handles on any hosts may issue runs of it at once.
type Authority struct {
	conn *riakconn.Conn
	opts Options
	url  string
	log  *slog.Logger
	now  func() time.Time

	metaBucket, issued string

	m meta

	// mu guards the fields below; reserving serialises reservations, a
	// round trip that mu is not held over.
	mu        sync.Mutex
	reserving sync.Mutex
	blk       block  // reserved and not tried yet
	size      uint64 // of the next block reserved
	// hint is the next key as last seen, and its causal context (nil: absent).
	hint     uint64
	hintVC   []byte
	closed   bool
	nextDown time.Time // until then Issue spills
	spilled  uint64    // above every run spilled; the next reservation starts there

	// fault, set by tests, is asked before every request for bucket/key.
	fault func(key string) error
}

type block struct{ next, end uint64 }

// maxBlock bounds the runs a handle that stops may leave unissued.
const maxBlock = 64

// step is how long a request for one key is tried before Issue turns to
// another key, likely in a consensus group that can serve.
const step = 5 * time.Second

// spillWindow is how far above the next key spilled runs are picked.
const spillWindow = 4096

// metaCopies of meta, each likely in another consensus group.
const metaCopies = 7

var _ authority.Issuer = (*Authority)(nil)

type meta struct {
	Format       string    `json:"format"`
	ID           string    `json:"id"`
	Scheme       string    `json:"scheme"`
	Key          string    `json:"key"`
	CreatedAt    time.Time `json:"created_at"`
	State        string    `json:"state"`
	MigratedFrom string    `json:"migrated_from,omitempty"` // a runs.db

	scheme shuffle.Scheme
	key    shuffle.Key
}

// record is a lease record, as the bbolt authority keeps it.
type record struct {
	Run      uint32    `json:"run"`
	Program  string    `json:"program"`
	Host     string    `json:"host"`
	PID      int       `json:"pid"`
	Note     string    `json:"note"`
	IssuedAt time.Time `json:"issued_at"`
	Nonce    string    `json:"nonce"`
}

type hintValue struct {
	Next uint64 `json:"next"`
}

const (
	keyMeta = "meta"
	keyNext = "next"
)

// Open opens the authority of the archive: ErrNoAuthority if there is none,
// ErrMigrating while one is being moved there.
func Open(ctx context.Context, opts Options) (*Authority, error) {
	a, _, err := open(ctx, opts, nil, false)
	return a, err
}

// OpenOrCreate opens the authority of the archive, creating it if there is
// none. Of several processes creating it at once, one wins; all open it.
func OpenOrCreate(ctx context.Context, opts Options) (a *Authority, created bool, err error) {
	return open(ctx, opts, func(now time.Time) (meta, error) { return newMeta(opts.Scheme, opts.rand(), now) }, false)
}

// open creates the authority with create (if not nil) when there is none.
// With migrating, an authority in state migrating opens (for Migrate).
func open(ctx context.Context, opts Options, create func(time.Time) (meta, error), migrating bool) (*Authority, bool, error) {
	if opts.Archive == "" {
		opts.Archive = DefaultArchive
	}
	if !archiveName.MatchString(opts.Archive) {
		return nil, false, fmt.Errorf("cannot open the run authority: bad archive name %q: want 1 to 64 of a-z, 0-9, _ and -", opts.Archive)
	}
	if opts.Type == "" {
		opts.Type = DefaultType
	}
	if opts.Scheme != "" {
		if _, err := shuffle.ParseScheme(string(opts.Scheme)); err != nil {
			return nil, false, fmt.Errorf("cannot open the run authority: %w", err)
		}
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 60 * time.Second
	}
	conn, err := riakconn.Dial(riakconn.Options{Nodes: opts.Nodes, Timeout: opts.Timeout, RetryFor: opts.RetryFor, Logger: opts.Logger})
	if err != nil {
		return nil, false, err
	}
	a := &Authority{
		conn: conn, opts: opts, url: opts.URL(), log: opts.Logger, now: time.Now,
		metaBucket: opts.Archive + ".authority", issued: opts.Archive + ".issued",
		size: 1, fault: opts.fault,
	}
	created, err := a.load(ctx, create, migrating)
	if err != nil {
		conn.Close()
		return nil, false, fmt.Errorf("cannot open the run authority %s: %w", a.url, err)
	}
	return a, created, nil
}

func (a *Authority) load(ctx context.Context, create func(time.Time) (meta, error), migrating bool) (created bool, err error) {
	if err := a.checkType(ctx); err != nil {
		return false, err
	}
	m, err := a.readMeta(ctx)
	if err != nil {
		return false, err
	}
	if m == nil {
		if create == nil {
			return false, ErrNoAuthority
		}
		nm, err := create(a.now())
		if err != nil {
			return false, err
		}
		v, _ := json.Marshal(nm)
		ok, err := a.create(ctx, a.metaBucket, keyMeta, v)
		if err != nil {
			return false, err
		}
		if m, _, err = a.fetchMeta(ctx, a.opts.RetryFor); err != nil {
			return false, err
		}
		if m == nil {
			return false, fmt.Errorf("%w: the metadata created is not there", authority.ErrInconsistent)
		}
		// A create retried after a lost reply is refused: ours if the ID is.
		created = ok || m.ID == nm.ID
		if created && m.State == stateReady {
			a.log.Info("created a new run authority", "authority", m.ID, "scheme", m.Scheme, "url", a.url)
		}
	}
	if m.State == stateMigrating && !migrating {
		return false, migratingError(a.url, m.MigratedFrom)
	}
	if a.opts.Scheme != "" && m.scheme != a.opts.Scheme {
		return false, authority.SchemeError(a.url, m.scheme, a.opts.Scheme)
	}
	a.m = *m
	if created && m.State == stateReady {
		a.writeCopies(ctx)
	}
	// Only a first look, which may fail: next is read again when written.
	h, vc, err := a.fetchHint(ctx, min(a.opts.RetryFor, step))
	switch {
	case errors.Is(err, riakconn.ErrUnavailable):
		a.log.Debug("cannot read the next run yet", "err", err)
		h, vc = 1, nil
	case err != nil:
		return false, err
	}
	a.hint, a.hintVC = h, vc
	return created, nil
}

func migratingError(url, from string) error {
	return fmt.Errorf("%w: coordinator migrate is moving the authority of %s into %s and has not finished; if it was interrupted, run it again (coordinator migrate --db %s --to %s)", ErrMigrating, from, url, from, url)
}

func newMeta(scheme shuffle.Scheme, r io.Reader, now time.Time) (meta, error) {
	if scheme == "" {
		scheme = authority.DefaultScheme
	}
	var id [16]byte
	var key shuffle.Key
	if _, err := io.ReadFull(r, id[:]); err != nil {
		return meta{}, fmt.Errorf("cannot draw the authority ID: %w", err)
	}
	if _, err := io.ReadFull(r, key[:]); err != nil {
		return meta{}, fmt.Errorf("cannot draw the key: %w", err)
	}
	return meta{
		Format: authority.Format, ID: hex.EncodeToString(id[:]), Scheme: string(scheme),
		Key: hex.EncodeToString(key[:]), CreatedAt: now.UTC(), State: stateReady,
	}, nil
}

// checkType checks that the bucket type is consistent: on any other, two
// creates of one key can both succeed.
func (a *Authority) checkType(ctx context.Context) error {
	cmd, err := a.conn.DoFor(ctx, min(a.opts.RetryFor, 5*time.Second)+time.Second, func() (riak.Command, error) {
		return riak.NewFetchBucketTypePropsCommandBuilder().WithBucketType(a.opts.Type).Build()
	})
	if err != nil {
		if re, ok := riakconn.RiakError(err); ok && !riakconn.IsTransient(re) {
			return fmt.Errorf("%w: bucket type %s is missing (Riak says %q): create it once per cluster, on one node: riak eval 'riak_kv_console:bucket_type_create([\"%s\", \"{\\\"props\\\":{\\\"consistent\\\":true}}\"]).' then riak eval 'riak_core_bucket_type:activate(<<\"%s\">>).'", ErrSetup, a.opts.Type, re.Errmsg, a.opts.Type, a.opts.Type)
		}
		return fmt.Errorf("no node answers: %w", err)
	}
	p := cmd.(*riak.FetchBucketTypePropsCommand).Response
	if p == nil || !p.Consistent {
		return fmt.Errorf("%w: bucket type %s is not consistent: the authority needs the conditional creates that only a strongly consistent bucket type gives (consistent cannot be changed once a type exists: create one with {\"props\":{\"consistent\":true}})", ErrSetup, a.opts.Type)
	}
	if p.NVal < 3 {
		a.log.Warn("the authority's bucket type keeps fewer than 3 replicas: a node lost stops the issuing of runs", "type", a.opts.Type, "n_val", p.NVal)
	}
	return nil
}

// fetch returns the value (nil if none) and causal context of a key.
func (a *Authority) fetch(ctx context.Context, retryFor time.Duration, bucket, key string) ([]byte, []byte, error) {
	if err := a.injected(bucket, key); err != nil {
		return nil, nil, fmt.Errorf("cannot fetch %s/%s/%s: %w", a.opts.Type, bucket, key, err)
	}
	cmd, err := a.conn.DoFor(ctx, retryFor, func() (riak.Command, error) {
		return riak.NewFetchValueCommandBuilder().
			WithBucketType(a.opts.Type).WithBucket(bucket).WithKey(key).
			WithTimeout(min(a.conn.Timeout(), retryFor)).Build()
	})
	if err != nil {
		return nil, nil, mapClosed(fmt.Errorf("cannot fetch %s/%s/%s: %w", a.opts.Type, bucket, key, err))
	}
	r := cmd.(*riak.FetchValueCommand).Response
	if r == nil || r.IsNotFound || len(r.Values) == 0 {
		return nil, nil, nil
	}
	var live []*riak.Object
	for _, v := range r.Values {
		if v != nil && !v.IsTombstone {
			live = append(live, v)
		}
	}
	switch len(live) {
	case 0:
		return nil, r.Values[0].VClock, nil
	case 1:
		return live[0].Value, live[0].VClock, nil
	}
	return nil, nil, fmt.Errorf("%w: %s/%s/%s has %d siblings: is bucket type %s consistent?", authority.ErrInconsistent, a.opts.Type, bucket, key, len(live), a.opts.Type)
}

// create writes a new key, or reports false if it exists, which includes a
// create retried after a lost reply: callers read the key back to tell.
func (a *Authority) create(ctx context.Context, bucket, key string, value []byte) (bool, error) {
	ok, _, err := a.put(ctx, a.opts.RetryFor, bucket, key, value, nil)
	return ok, err
}

func (a *Authority) injected(bucket, key string) error {
	if a.fault == nil {
		return nil
	}
	return a.fault(bucket + "/" + key)
}

// put writes a key with vclock as its causal context (nil: create if
// absent) and returns the new one; false if the key changed since vclock.
func (a *Authority) put(ctx context.Context, retryFor time.Duration, bucket, key string, value, vclock []byte) (bool, []byte, error) {
	if err := a.injected(bucket, key); err != nil {
		return false, nil, fmt.Errorf("cannot store %s/%s/%s: %w", a.opts.Type, bucket, key, err)
	}
	cmd, err := a.conn.DoFor(ctx, retryFor, func() (riak.Command, error) {
		b := riak.NewStoreValueCommandBuilder().
			WithBucketType(a.opts.Type).WithBucket(bucket).WithKey(key).
			WithContent(&riak.Object{ContentType: "application/json", Value: value}).
			WithReturnHead(true).WithTimeout(min(a.conn.Timeout(), retryFor))
		if vclock != nil {
			b = b.WithVClock(vclock)
		}
		return b.Build()
	})
	if riakconn.IsFailed(err) {
		return false, nil, nil
	}
	if err != nil {
		return false, nil, mapClosed(fmt.Errorf("cannot store %s/%s/%s: %w", a.opts.Type, bucket, key, err))
	}
	var vc []byte
	if r := cmd.(*riak.StoreValueCommand).Response; r != nil {
		vc = r.VClock
		if vc == nil && len(r.Values) > 0 {
			vc = r.Values[0].VClock
		}
	}
	return true, vc, nil
}

func mapClosed(err error) error {
	if errors.Is(err, riakconn.ErrClosed) {
		return fmt.Errorf("%w: %w", authority.ErrClosed, err)
	}
	return err
}

// readMeta reads meta or, while its consensus group cannot serve, one of
// its copies (which never change): nil if there is none.
func (a *Authority) readMeta(ctx context.Context) (*meta, error) {
	type answer struct {
		copy bool
		m    *meta
		err  error
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	answers := make(chan answer, metaCopies+1)
	go func() {
		m, _, err := a.fetchMeta(ctx, consensusWait)
		answers <- answer{false, m, err}
	}()
	for i := 1; i <= metaCopies; i++ {
		go func() {
			v, _, err := a.fetch(ctx, consensusWait, a.metaBucket, keyMeta+"."+strconv.Itoa(i))
			var m *meta
			if err == nil && v != nil {
				m, err = parseMeta(v)
			}
			answers <- answer{true, m, err}
		}()
	}
	var primary *answer
	for range metaCopies + 1 {
		an := <-answers
		switch {
		case !an.copy:
			// meta's answer, found or not, is the truth.
			if an.err == nil {
				return an.m, nil
			}
			primary = &an
		case an.err == nil && an.m != nil && an.m.State == stateReady:
			return an.m, nil
		}
	}
	return nil, primary.err
}

// writeCopies is best effort: a missing copy only makes opening rely on meta.
func (a *Authority) writeCopies(ctx context.Context) {
	v, _ := json.Marshal(a.m)
	var wg sync.WaitGroup
	for i := 1; i <= metaCopies; i++ {
		wg.Go(func() {
			if _, err := a.create(ctx, a.metaBucket, keyMeta+"."+strconv.Itoa(i), v); err != nil {
				a.log.Debug("cannot write a copy of the metadata", "copy", i, "err", err)
			}
		})
	}
	wg.Wait()
}

// fetchMeta reads and checks meta; nil if there is none.
func (a *Authority) fetchMeta(ctx context.Context, retryFor time.Duration) (*meta, []byte, error) {
	v, vc, err := a.fetch(ctx, retryFor, a.metaBucket, keyMeta)
	if err != nil {
		if errors.Is(err, riakconn.ErrUnavailable) && retryFor == consensusWait {
			return nil, nil, fmt.Errorf("%w: bucket type %s is consistent, but the cluster served no strongly consistent request for %v: strong consistency is off, or its consensus subsystem has not started (set strong_consistency = on in riak.conf of every node; the subsystem starts by itself once the cluster has 3 nodes): %w", ErrSetup, a.opts.Type, retryFor, err)
		}
		return nil, nil, err
	}
	if v == nil {
		return nil, vc, nil
	}
	m, err := parseMeta(v)
	if err != nil {
		return nil, nil, err
	}
	return m, vc, nil
}

func parseMeta(v []byte) (*meta, error) {
	var m meta
	if err := json.Unmarshal(v, &m); err != nil {
		return nil, fmt.Errorf("%w: the metadata is not JSON: %v", authority.ErrNotAuthority, err)
	}
	if m.Format != authority.Format {
		return nil, fmt.Errorf("%w: metadata of format %q, want %q", authority.ErrNotAuthority, m.Format, authority.Format)
	}
	if b, err := hex.DecodeString(m.ID); err != nil || len(b) != 16 {
		return nil, fmt.Errorf("%w: bad authority ID %q", authority.ErrInconsistent, m.ID)
	}
	s, err := shuffle.ParseScheme(m.Scheme)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", authority.ErrInconsistent, err)
	}
	k, err := hex.DecodeString(m.Key)
	if err != nil || len(k) != shuffle.KeySize {
		return nil, fmt.Errorf("%w: bad key", authority.ErrInconsistent)
	}
	if m.State != stateReady && m.State != stateMigrating {
		return nil, fmt.Errorf("%w: state %q", authority.ErrInconsistent, m.State)
	}
	m.scheme = s
	copy(m.key[:], k)
	return &m, nil
}

// fetchHint reads the next key: 1 if it does not exist yet.
func (a *Authority) fetchHint(ctx context.Context, retryFor time.Duration) (uint64, []byte, error) {
	v, vc, err := a.fetch(ctx, retryFor, a.metaBucket, keyNext)
	if err != nil {
		return 0, nil, err
	}
	if v == nil {
		return 1, vc, nil
	}
	var h hintValue
	if err := json.Unmarshal(v, &h); err != nil || h.Next < 1 || h.Next > callnumber.MaxRun+1 {
		return 0, nil, fmt.Errorf("%w: next run %q", authority.ErrInconsistent, v)
	}
	return h.Next, vc, nil
}

// ID returns the authority ID (32 hex digits).
func (a *Authority) ID() string { return a.m.ID }

// Scheme returns the shuffle scheme chosen at creation.
func (a *Authority) Scheme() shuffle.Scheme { return a.m.scheme }

// Key returns the shuffle key.
func (a *Authority) Key() shuffle.Key { return a.m.key }

// URL returns the authority's URL, riak://NODES/ARCHIVE.
func (a *Authority) URL() string { return a.url }

// Requests returns how many requests this handle has sent to Riak.
func (a *Authority) Requests() int64 { return a.conn.Requests() }

// take returns the next run of this handle's block, reserving a block when
// it is used up, or a spilled run while the next key cannot be reached.
func (a *Authority) take(ctx context.Context) (c uint64, spilled bool, err error) {
	if c, ok := a.fromBlock(); ok {
		return c, false, nil
	}
	a.reserving.Lock()
	defer a.reserving.Unlock()
	if c, ok := a.fromBlock(); ok { // another goroutine reserved meanwhile
		return c, false, nil
	}
	a.mu.Lock()
	size, down := a.size, time.Now().Before(a.nextDown)
	a.mu.Unlock()
	if !down {
		from, end, err := a.reserve(ctx, size)
		switch {
		case err == nil:
			a.mu.Lock()
			a.blk = block{next: from + 1, end: end}
			a.size = min(2*size, maxBlock)
			a.mu.Unlock()
			return from, false, nil
		case !errors.Is(err, riakconn.ErrUnavailable) || ctx.Err() != nil:
			return 0, false, err
		}
		a.log.Warn("the next run cannot be reached: taking runs above it directly meanwhile", "err", err)
		a.mu.Lock()
		a.nextDown = time.Now().Add(2 * step)
		a.mu.Unlock()
	}
	c, err = a.spill()
	return c, true, err
}

func (a *Authority) fromBlock() (uint64, bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.blk.next < a.blk.end {
		c := a.blk.next
		a.blk.next++
		return c, true
	}
	return 0, false
}

// spill picks a run at random above the next key and the runs spilled, so
// that handles seldom pick the same; if it was issued, Issue picks again.
func (a *Authority) spill() (uint64, error) {
	a.mu.Lock()
	base := max(a.hint, a.spilled, 1)
	a.mu.Unlock()
	if base > callnumber.MaxRun {
		return 0, authority.ErrExhausted
	}
	return base + mrand.Uint64N(min(spillWindow, callnumber.MaxRun+1-base)), nil
}

// reserve moves the next key forward by size by compare-and-set and returns
// the runs [from, end) it passed over, which no other handle tries.
func (a *Authority) reserve(ctx context.Context, size uint64) (from, end uint64, err error) {
	for range 100 {
		a.mu.Lock()
		h, vc, spilled := a.hint, a.hintVC, a.spilled
		a.mu.Unlock()
		from := max(h, spilled)
		if from > callnumber.MaxRun {
			return 0, 0, authority.ErrExhausted
		}
		end := min(from+size, callnumber.MaxRun+1)
		ok, err := a.setHint(ctx, h, end, vc)
		if err != nil {
			return 0, 0, err
		}
		if ok {
			return from, end, nil
		}
	}
	return 0, 0, errors.New("the next run kept changing under us (100 tries)")
}

// setHint writes the next key by compare-and-set against vclock, the causal
// context of was, and reports whether it did; if not, it reads the key again.
func (a *Authority) setHint(ctx context.Context, was, value uint64, vclock []byte) (bool, error) {
	v, _ := json.Marshal(hintValue{Next: value})
	ok, nvc, err := a.put(ctx, min(a.opts.RetryFor, step), a.metaBucket, keyNext, v, vclock)
	if err != nil {
		return false, err
	}
	if ok && nvc != nil {
		a.mu.Lock()
		if a.hint == was {
			a.hint, a.hintVC = value, nvc
		}
		a.mu.Unlock()
		return true, nil
	}
	// Refused, or no causal context in the reply: read it.
	h, nvc, err := a.fetchHint(ctx, min(a.opts.RetryFor, step))
	if err != nil {
		return false, err
	}
	a.mu.Lock()
	a.hint, a.hintVC = h, nvc
	a.mu.Unlock()
	// The value cannot tell whose write it was: only the put can.
	return ok, nil
}

// raise moves the next key to at least n (never backwards).
func (a *Authority) raise(ctx context.Context, n uint64) error {
	for range 100 {
		a.mu.Lock()
		h, vc := a.hint, a.hintVC
		a.mu.Unlock()
		if h >= n {
			return nil
		}
		if _, err := a.setHint(ctx, h, n, vc); err != nil {
			return err
		}
	}
	return errors.New("the next run kept changing under us (100 tries)")
}

// Issue issues a run to h by creating its lease record (see the package doc).
func (a *Authority) Issue(ctx context.Context, h authority.Holder) (callnumber.Lease, error) {
	a.mu.Lock()
	closed := a.closed
	a.mu.Unlock()
	if closed {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", authority.ErrClosed)
	}
	if err := ctx.Err(); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
	}
	var nonce [16]byte
	if _, err := io.ReadFull(a.opts.rand(), nonce[:]); err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot issue a run: cannot draw a nonce: %w", err)
	}
	rec := record{Program: h.Program, Host: h.Host, PID: h.PID, Note: h.Note, Nonce: hex.EncodeToString(nonce[:])}
	// A run whose group cannot serve within a step is left (perhaps
	// recorded, then never issued) for another, for up to RetryFor.
	deadline := time.Now().Add(a.opts.RetryFor)
	var lastErr error
	for {
		if err := ctx.Err(); err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
		}
		if lastErr != nil && time.Now().After(deadline) {
			return callnumber.Lease{}, fmt.Errorf("cannot issue a run: none could be recorded for %v: %w", a.opts.RetryFor, lastErr)
		}
		c, spilled, err := a.take(ctx)
		if err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", mapClosed(err))
		}
		rec.Run = uint32(c)
		rec.IssuedAt = a.now().UTC()
		v, err := json.Marshal(rec)
		if err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
		}
		key := strconv.FormatUint(c, 10)
		ok, tries, err := a.createCounted(ctx, min(a.opts.RetryFor, step), a.issued, key, v)
		if errors.Is(err, riakconn.ErrUnavailable) && ctx.Err() == nil {
			a.log.Debug("cannot record a run now: trying another", "run", c, "err", err)
			lastErr = err
			continue
		}
		if err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
		}
		if !ok && tries > 1 {
			// Taken by this create, retried after a lost reply, or another's.
			got, _, err := a.fetch(ctx, min(a.opts.RetryFor, step), a.issued, key)
			if errors.Is(err, riakconn.ErrUnavailable) && ctx.Err() == nil {
				lastErr = err
				continue
			}
			if err != nil {
				return callnumber.Lease{}, fmt.Errorf("cannot issue a run: %w", err)
			}
			var there record
			if got != nil && json.Unmarshal(got, &there) == nil && there.Nonce == rec.Nonce && there.Run == rec.Run {
				rec, ok = there, true
			}
		}
		if ok {
			if spilled {
				a.mu.Lock()
				a.spilled = max(a.spilled, c+1)
				a.mu.Unlock()
			}
			return a.lease(rec), nil
		}
		if spilled {
			// Look above it from now on, so that a handle that could not
			// read the next key climbs past the runs issued.
			a.mu.Lock()
			a.spilled = max(a.spilled, c+1)
			a.mu.Unlock()
		} else {
			// Reserved here, yet taken: by a migration, a spiller or by hand.
			a.log.Warn("a run reserved by this handle was taken: trying the next", "run", c)
		}
	}
}

// createCounted is create, also saying how many attempts it took.
func (a *Authority) createCounted(ctx context.Context, retryFor time.Duration, bucket, key string, value []byte) (ok bool, tries int, err error) {
	if err := a.injected(bucket, key); err != nil {
		return false, 0, fmt.Errorf("cannot store %s/%s/%s: %w", a.opts.Type, bucket, key, err)
	}
	_, err = a.conn.DoFor(ctx, retryFor, func() (riak.Command, error) {
		tries++
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(a.opts.Type).WithBucket(bucket).WithKey(key).
			WithContent(&riak.Object{ContentType: "application/json", Value: value}).
			WithTimeout(min(a.conn.Timeout(), retryFor)).Build()
	})
	if riakconn.IsFailed(err) {
		return false, tries, nil
	}
	if err != nil {
		return false, tries, mapClosed(fmt.Errorf("cannot store %s/%s/%s: %w", a.opts.Type, bucket, key, err))
	}
	return true, tries, nil
}

func (a *Authority) lease(r record) callnumber.Lease {
	return callnumber.Lease{
		Run: r.Run, Version: callnumber.CurrentVersion,
		Authority: a.m.ID, Scheme: a.m.scheme, Key: a.m.key,
		Nonce: r.Nonce, Program: r.Program, Host: r.Host, PID: r.PID, Note: r.Note,
		IssuedAt: r.IssuedAt,
	}
}

// Lease returns the lease issued for run, or authority.ErrNotIssued.
func (a *Authority) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	v, _, err := a.fetch(ctx, a.opts.RetryFor, a.issued, strconv.FormatUint(uint64(run), 10))
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d: %w", run, err)
	}
	if v == nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d: %w", run, authority.ErrNotIssued)
	}
	var rec record
	if err := json.Unmarshal(v, &rec); err != nil || rec.Run != run {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease %d: %w: %q", run, authority.ErrInconsistent, v)
	}
	return a.lease(rec), nil
}

// NextRun returns the next key: no run at or above it has been issued, but
// for runs spilled by handles that have not moved it past them yet.
func (a *Authority) NextRun(ctx context.Context) (uint64, error) {
	h, vc, err := a.fetchHint(ctx, a.opts.RetryFor)
	if err != nil {
		return 0, fmt.Errorf("cannot read the next run: %w", err)
	}
	a.mu.Lock()
	if h >= a.hint {
		a.hint, a.hintVC = h, vc
	}
	a.mu.Unlock()
	return h, nil
}

// Check reports whether the metadata reads back the same. It tries for
// seconds, not RetryFor: it answers a health check.
func (a *Authority) Check(ctx context.Context) error {
	m, err := a.readMeta(ctx)
	switch {
	case err != nil:
		return fmt.Errorf("cannot read the run authority %s: %w", a.url, err)
	case m == nil || m.ID != a.m.ID:
		return fmt.Errorf("%w: the authority's metadata changed or vanished under us", authority.ErrInconsistent)
	case m.State != stateReady:
		return migratingError(a.url, m.MigratedFrom)
	}
	return nil
}

// Close gives back the runs of its block it has not issued, if no other
// handle reserved since, and closes the connection.
func (a *Authority) Close() error {
	a.reserving.Lock()
	defer a.reserving.Unlock()
	a.mu.Lock()
	if a.closed {
		a.mu.Unlock()
		return nil
	}
	a.closed = true
	blk, h, vc, spilled := a.blk, a.hint, a.hintVC, a.spilled
	a.blk = block{}
	a.mu.Unlock()
	if spilled > h {
		ctx, cancel := context.WithTimeout(context.Background(), step)
		if err := a.raise(ctx, spilled); err != nil {
			a.log.Warn("cannot move the next run past the runs taken while it could not be reached (they stay unique)", "to", spilled, "err", err)
		}
		cancel()
	} else if blk.next < blk.end && h == blk.end && vc != nil {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		// Issues in flight have taken their runs from the block already.
		if _, err := a.setHint(ctx, h, blk.next, vc); err != nil {
			a.log.Debug("cannot give back the runs reserved and not issued", "from", blk.next, "to", blk.end, "err", err)
		}
		cancel()
	}
	return a.conn.Close()
}
