package riakstore

import (
	"context"
	"crypto/rand"
	"errors"
	"fmt"
	"log/slog"
	"regexp"
	"sync"
	"sync/atomic"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/compress"
)

// Bucket types the operator creates (see the package doc).
const (
	TypeKV       = "chibrary_kv"
	TypeOnce     = "chibrary_once"
	TypeCounters = "chibrary_counters"
	TypeClaims   = "chibrary_claims"
)

// DefaultArchive is the archive name when Options.Archive is empty.
const DefaultArchive = "chibrary"

// ErrArchiveName is returned for an archive name outside [a-z0-9_-]{1,64}.
var ErrArchiveName = errors.New("riakstore: bad archive name")

var archiveName = regexp.MustCompile(`^[a-z0-9_-]{1,64}$`)

// ValidArchive checks an archive name: 1 to 64 of a-z, 0-9, '_' and '-'.
func ValidArchive(name string) error {
	if !archiveName.MatchString(name) {
		return fmt.Errorf("%w %q: want 1 to 64 of a-z, 0-9, _ and -", ErrArchiveName, name)
	}
	return nil
}

// Types names the bucket types a Store uses. A zero field means the
// default (TypeKV, TypeOnce, TypeCounters, TypeClaims).
type Types struct {
	// KV holds the messages: allow_mult true, last_write_wins false.
	KV string
	// Once holds the digest index: write_once true.
	Once string
	// Counters holds the message count: datatype counter.
	Counters string
	// Claims holds the binding, the leases and the ledger: consistent true.
	Claims string
}

// Options configure a Store. Nodes is required; the other zero values are
// documented defaults.
type Options struct {
	// Nodes are the protocol buffers addresses of Riak nodes, host:port.
	Nodes []string
	// Archive names the archive among others in the same cluster. Empty
	// means DefaultArchive.
	Archive string
	// Types are the bucket types; see Types.
	Types Types
	// Timeout bounds every request to Riak. Zero means 10 seconds.
	Timeout time.Duration
	// RetryFor is how long a request that could not be served is tried
	// again, on the next node each time, with a growing pause. Zero means
	// 60 seconds.
	RetryFor time.Duration
	// Parallel is how many requests one operation has in flight at once.
	// Zero means 64.
	Parallel int
	// ClaimTimeout is how long a writer's claim on messages holds while
	// the messages do not appear (plus MaxClockSkew). Zero means 60
	// seconds.
	ClaimTimeout time.Duration
	// MaxClockSkew is how far the clocks of the hosts writing to the
	// archive may disagree. Zero means 30 seconds.
	MaxClockSkew time.Duration
	// Compression says how messages are compressed. Zero values mean a
	// Riak store's own defaults: the first dictionary at 250 messages, a
	// newer one each time the archive doubles, learnt from 1 MiB of the
	// newest mail, and zstd's stronger level (see compression).
	Compression store.Compression
	// Logger receives notes on races and repairs. Nil discards them.
	Logger *slog.Logger
}

// compression fills the zero values of c with a Riak store's defaults:
// records are kept as written, with no compaction to recompress them,
// and an import waits on the cluster rather than the CPU, so dictionaries
// are trained sooner and records compressed harder than in a bolt store.
func compression(c store.Compression) store.Compression {
	if c.TrainAt == 0 {
		c.TrainAt = 250
	}
	if c.Retrain == 0 {
		c.Retrain = 2
	}
	if c.SampleBytes == 0 {
		c.SampleBytes = 1 << 20
	}
	if c.Level == store.LevelBackend {
		c.Level = store.LevelStrong
	}
	return c
}

// Store is a store.Store in a Riak cluster.
type Store struct {
	opts Options
	log  *slog.Logger
	conn *riakconn.Conn
	b    buckets
	comp *compress.Compressor

	// writer names this handle in the ledger entries it writes.
	writer [8]byte

	mu     sync.RWMutex // held for reading by operations, for writing by Close
	closed bool

	cache sync.Mutex
	bound *bound
	known map[uint32]bool // runs whose lease is recorded (never forgotten)

	ledger  ledger
	entries entryCache

	// skipped (digests not looked up) and the byte counts written,
	// messageBytes (packs and large objects) and keptBytes (what writes
	// added to the archive) are logged at Close, for benchmarks.
	skipped                          atomic.Int64
	written, messageBytes, keptBytes atomic.Int64
	// hook, when set by a test, is called at named points of Put,
	// Remove and RecordLease; an error it returns stops it there, as a
	// crash would.
	hook func(point string) error
	// removalsPage is how many numbers one query of the removal index
	// asks for; tests make it small.
	removalsPage uint32
}

type bound struct {
	b     store.Binding
	codec *callnumber.Codec
}

// buckets are an archive's bucket names.
type buckets struct {
	archive string
	types   Types
	// By bucket type: claims, kv, write-once, counters.
	meta, runs, log, removed             string
	packs, large, dicts, removals, moves string
	digests                              string
	counts                               string
}

func newBuckets(archive string, t Types) buckets {
	p := archive + "."
	return buckets{
		archive: archive, types: t,
		meta: p + "meta", runs: p + "runs", log: p + "log", removed: p + "removed",
		packs: p + "packs", large: p + "large", dicts: p + "dicts", removals: p + "removals", moves: p + "moves",
		digests: p + "digests",
		counts:  p + "counts",
	}
}

var _ store.Store = (*Store)(nil)

// Open connects to the cluster and checks that it can hold the archive
// (bucket type properties, strong consistency, secondary indexes),
// naming each failed check in the error.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("cannot open riak store: no nodes given")
	}
	if opts.Archive == "" {
		opts.Archive = DefaultArchive
	}
	if err := ValidArchive(opts.Archive); err != nil {
		return nil, fmt.Errorf("cannot open riak store: %w", err)
	}
	if opts.Types.KV == "" {
		opts.Types.KV = TypeKV
	}
	if opts.Types.Once == "" {
		opts.Types.Once = TypeOnce
	}
	if opts.Types.Counters == "" {
		opts.Types.Counters = TypeCounters
	}
	if opts.Types.Claims == "" {
		opts.Types.Claims = TypeClaims
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 60 * time.Second
	}
	if opts.Parallel == 0 {
		opts.Parallel = 64
	}
	if opts.ClaimTimeout == 0 {
		opts.ClaimTimeout = 60 * time.Second
	}
	if opts.MaxClockSkew == 0 {
		opts.MaxClockSkew = 30 * time.Second
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.RetryFor < 0 || opts.Parallel < 1 || opts.Parallel > 1024 || opts.Timeout < 0 || opts.ClaimTimeout < 0 || opts.MaxClockSkew < 0 {
		return nil, fmt.Errorf("cannot open riak store: bad options (retry for %v, parallel %d, timeout %v, claim timeout %v, clock skew %v)", opts.RetryFor, opts.Parallel, opts.Timeout, opts.ClaimTimeout, opts.MaxClockSkew)
	}
	conn, err := riakconn.Dial(riakconn.Options{
		Nodes: opts.Nodes, Timeout: opts.Timeout, RetryFor: opts.RetryFor,
		// Several operations of one process (a Put and the reads of a
		// resolver) may each have Parallel requests in flight.
		MinConnections: 4, MaxConnections: min(4*opts.Parallel, 4096),
		Unavailable: store.ErrUnavailable, Logger: opts.Logger,
	})
	if err != nil {
		return nil, err
	}
	s := &Store{
		opts: opts, log: opts.Logger, conn: conn,
		b:            newBuckets(opts.Archive, opts.Types),
		known:        make(map[uint32]bool),
		removalsPage: removalsPage,
	}
	rand.Read(s.writer[:])
	s.entries.init(256)
	s.comp = compress.New(riakDicts{s}, compression(opts.Compression), opts.Logger)
	if err := s.check(ctx); err != nil {
		s.comp.Close()
		conn.Close()
		return nil, fmt.Errorf("cannot open riak store %v archive %q: %w", opts.Nodes, opts.Archive, err)
	}
	return s, nil
}

// Requests returns how many requests this Store has sent to Riak (each
// attempt counts), for benchmarks and tests of the request budget.
func (s *Store) Requests() int64 { return s.conn.Requests() }

// Archive returns the archive's name.
func (s *Store) Archive() string { return s.b.archive }

// do builds and runs a command, retrying on the next node what could not
// be served (store.ErrUnavailable) for up to Options.RetryFor. Riak's own
// answers (not found, a refused conditional write) are returned at once.
func (s *Store) do(ctx context.Context, build func() (riak.Command, error)) (riak.Command, error) {
	return s.conn.Do(ctx, build)
}

// doFor is do, retrying for up to retryFor.
func (s *Store) doFor(ctx context.Context, retryFor time.Duration, build func() (riak.Command, error)) (riak.Command, error) {
	return s.conn.DoFor(ctx, retryFor, build)
}

// begin starts an operation; end must follow.
func (s *Store) begin() error {
	s.mu.RLock()
	if s.closed {
		s.mu.RUnlock()
		return store.ErrClosed
	}
	return nil
}

func (s *Store) end() { s.mu.RUnlock() }

// Close implements store.Store: it waits for running operations and
// abandoned requests, and stops the cluster client.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	// A background training ends first: it reads and writes the archive.
	s.comp.Close()
	s.log.Debug("riak store closed", "archive", s.b.archive, "requests", s.conn.Requests(), "bytes", s.written.Load(), "message_bytes", s.messageBytes.Load(), "message_bytes_kept", s.keptBytes.Load(), "lookups_skipped", s.skipped.Load())
	return s.conn.Close()
}

// at runs the test hook at a named point of Put, Remove or RecordLease.
func (s *Store) at(point string) error {
	if s.hook == nil {
		return nil
	}
	return s.hook(point)
}

// parallel runs fn(i) for i in [0, n) with at most limit at once and
// returns the first error.
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
	if n == 0 {
		return ctx.Err()
	}
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var (
		wg       sync.WaitGroup
		mu       sync.Mutex
		firstErr error
	)
	sem := make(chan struct{}, limit)
	for i := range n {
		select {
		case sem <- struct{}{}:
		case <-ctx.Done():
		}
		if ctx.Err() != nil {
			break
		}
		wg.Go(func() {
			defer func() { <-sem }()
			if err := fn(ctx, i); err != nil {
				mu.Lock()
				if firstErr == nil {
					firstErr = err
					cancel()
				}
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	if firstErr == nil {
		firstErr = ctx.Err()
	}
	return firstErr
}
