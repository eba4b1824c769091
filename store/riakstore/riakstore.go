// Package riakstore is the distributed store.Store, on Riak KV through
// github.com/basho/riak-go-client, for archives that outgrow one machine:
// many importers on many hosts write at once; the run authority (the
// coordinator) stays the only shared point.
//
// # Bucket types
//
// An operator creates three bucket types once per cluster (Riak KV 3.x;
// on 2.x the command is riak-admin):
//
//	riak admin bucket-type create chibrary_kv '{"props":{"allow_mult":true,"last_write_wins":false}}'
//	riak admin bucket-type activate chibrary_kv
//	riak admin bucket-type create chibrary_sets '{"props":{"datatype":"set"}}'
//	riak admin bucket-type activate chibrary_sets
//	riak admin bucket-type create chibrary_counters '{"props":{"datatype":"counter"}}'
//	riak admin bucket-type activate chibrary_counters
//
// allow_mult must be true: concurrent writes must leave siblings this
// package can see, never be silently resolved by timestamp.
//
// # Layout
//
// Buckets are named Options.Prefix + "-" + name (prefix "chibrary" by
// default), so several archives can share a cluster:
//
//	chibrary_kv       PREFIX-messages  key: the call number (8 base62
//	                                   characters); value: the message
//	                                   record of store/internal/record; 2i
//	                                   run_int: the run
//	chibrary_kv       PREFIX-digests   key: the digest in hex; value: the
//	                                   call number
//	chibrary_kv       PREFIX-runs      key: the run in decimal; value: the
//	                                   lease as JSON, without the key
//	chibrary_kv       PREFIX-meta      key "binding": the authority, scheme
//	                                   and key as JSON
//	chibrary_sets     PREFIX-msgids    key: the Message-ID (or 0xff and its
//	                                   SHA-256 if longer than 512 bytes);
//	                                   members: call numbers
//	chibrary_counters PREFIX-counts    key "messages": the message count
//
// Nothing on a hot path lists keys (a full scan in Riak).
//
// # What the write-once rule guarantees here
//
// Every write that must not replace anything (a message, a digest entry,
// the binding, a lease) is a put with if_none_match. Riak checks that
// condition on one vnode before writing, which is not linearizable: two
// puts racing on one key can both succeed and leave siblings. So after
// writing a message this package reads it back and refuses (ErrNumberTaken)
// when siblings with different bytes exist; both copies are then kept as
// siblings, and Get refuses to choose between them, so nothing is lost.
//
// What actually keeps two writers apart is the run authority: it issues
// every run once, so one call number is only ever written by the one
// process holding its run, and the run-nonce check (ErrRunReused) catches
// an authority restored from an old backup before it can reissue a run the
// store has seen. The conditional put and the read-back are the second
// line, for a misconfigured deployment.
//
// # Put
//
// A batch is checked whole before anything is written (store/internal/
// batch.Make, on values fetched in parallel): a batch refused by a safety
// rule writes nothing. Riak has no transactions, though: a batch cut short
// by a node or network failure may be partly written. Running it again
// completes it: its written messages come back as duplicates of their own
// numbers, and their indexes are repaired.
//
// Two hosts importing the same new message at once both store it, each
// under its own number, and both write its digest entry; siblings of the
// digest entry are resolved the same way by every reader (the lowest call
// number wins). The other copy stays stored under its number, listed under
// its Message-ID, its digest pointing to the winner: still stored, never
// lost.
//
// Count reads a counter data type, incremented after each batch by the
// number of messages written. It is an estimate: a batch cut short before
// its increment under-counts, and an increment the client retries after a
// lost reply over-counts.
//
// # Failures
//
// The client's cluster spreads commands over Options.Nodes and retries a
// failed command on another node (ClusterOptions.ExecutionAttempts);
// every command carries Options.Timeout. A cancelled context abandons the
// wait; the command itself ends at its timeout.
package riakstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/batch"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Bucket types the operator creates (see the package doc).
const (
	TypeKV       = "chibrary_kv"
	TypeSets     = "chibrary_sets"
	TypeCounters = "chibrary_counters"
)

// Options configure a Store. Nodes is required; the other zero values are
// documented defaults.
type Options struct {
	// Nodes are the protocol buffers addresses of Riak nodes, host:port.
	Nodes []string
	// Prefix starts every bucket name. Empty means "chibrary".
	Prefix string
	// Timeout bounds every request to Riak. Zero means 10 seconds.
	Timeout time.Duration
	// Attempts is how many nodes a failed command is tried on. Zero means 3.
	Attempts int
	// Parallel is how many requests one Put has in flight. Zero means 16.
	Parallel int
	// Logger receives notes on races and repairs. Nil discards them.
	Logger *slog.Logger
}

// Store is a store.Store in a Riak cluster.
type Store struct {
	opts    Options
	log     *slog.Logger
	cluster *riak.Cluster

	messages, digests, runs, meta, msgids, counts string

	mu     sync.RWMutex // held for reading by operations, for writing by Close
	closed bool

	cache sync.Mutex
	bound *bound
	known map[uint32]bool // runs whose lease is recorded (never forgotten)
}

type bound struct {
	b     store.Binding
	codec *callnumber.Codec
}

var _ store.Store = (*Store)(nil)

// Open connects to the cluster. It fails if no node answers a ping.
func Open(ctx context.Context, opts Options) (*Store, error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("cannot open riak store: no nodes given")
	}
	if opts.Prefix == "" {
		opts.Prefix = "chibrary"
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.Attempts == 0 {
		opts.Attempts = 3
	}
	if opts.Parallel == 0 {
		opts.Parallel = 16
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if opts.Attempts < 1 || opts.Attempts > 255 || opts.Parallel < 1 || opts.Timeout < 0 {
		return nil, fmt.Errorf("cannot open riak store: bad options (attempts %d, parallel %d, timeout %v)", opts.Attempts, opts.Parallel, opts.Timeout)
	}
	var nodes []*riak.Node
	for _, addr := range opts.Nodes {
		n, err := riak.NewNode(&riak.NodeOptions{
			RemoteAddress:  addr,
			ConnectTimeout: opts.Timeout,
			RequestTimeout: opts.Timeout,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot use riak node %s: %w", addr, err)
		}
		nodes = append(nodes, n)
	}
	cluster, err := riak.NewCluster(&riak.ClusterOptions{Nodes: nodes, ExecutionAttempts: byte(opts.Attempts)})
	if err != nil {
		return nil, fmt.Errorf("cannot set up riak cluster: %w", err)
	}
	if err := cluster.Start(); err != nil {
		return nil, fmt.Errorf("cannot start riak cluster client: %w", err)
	}
	p := opts.Prefix + "-"
	s := &Store{
		opts: opts, log: opts.Logger, cluster: cluster,
		messages: p + "messages", digests: p + "digests", runs: p + "runs", meta: p + "meta",
		msgids: p + "msgids", counts: p + "counts",
		known: make(map[uint32]bool),
	}
	ping, err := (&riak.PingCommandBuilder{}).Build()
	if err == nil {
		err = s.exec(ctx, ping)
	}
	if err != nil {
		cluster.Stop()
		return nil, fmt.Errorf("cannot reach riak nodes %v: %w", opts.Nodes, err)
	}
	return s, nil
}

// exec runs cmd on the cluster, giving up the wait when ctx ends.
func (s *Store) exec(ctx context.Context, cmd riak.Command) error {
	a := &riak.Async{Command: cmd, Done: make(chan riak.Command, 1)}
	if err := s.cluster.ExecuteAsync(a); err != nil {
		return classify(err)
	}
	select {
	case <-a.Done:
	case <-ctx.Done():
		return ctx.Err()
	}
	if a.Error != nil {
		return classify(a.Error)
	}
	return classify(cmd.Error())
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

// Close implements store.Store: it waits for running operations and stops
// the cluster client.
func (s *Store) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return nil
	}
	s.closed = true
	if err := s.cluster.Stop(); err != nil {
		return fmt.Errorf("cannot stop riak cluster client: %w", err)
	}
	return nil
}

func (s *Store) fetch(ctx context.Context, bucket, key string, head bool) ([]*riak.Object, error) {
	cmd, err := riak.NewFetchValueCommandBuilder().
		WithBucketType(TypeKV).WithBucket(bucket).WithKey(key).
		WithHeadOnly(head).WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return nil, err
	}
	if err := s.exec(ctx, cmd); err != nil {
		return nil, fmt.Errorf("cannot fetch %s/%s/%q: %w", TypeKV, bucket, key, err)
	}
	r := cmd.(*riak.FetchValueCommand).Response
	if r == nil || r.IsNotFound {
		return nil, nil
	}
	return r.Values, nil
}

// create writes a new object with if_none_match; it reports false if the
// key already exists.
func (s *Store) create(ctx context.Context, bucket, key string, obj *riak.Object) (bool, error) {
	cmd, err := riak.NewStoreValueCommandBuilder().
		WithBucketType(TypeKV).WithBucket(bucket).WithKey(key).
		WithContent(obj).WithIfNoneMatch(true).WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return false, err
	}
	if err := s.exec(ctx, cmd); err != nil {
		if isMatchFound(err) {
			return false, nil
		}
		return false, fmt.Errorf("cannot store %s/%s/%q: %w", TypeKV, bucket, key, err)
	}
	return true, nil
}

// binding returns the store's binding, or nil if unbound. A binding once
// seen is cached: it never changes.
func (s *Store) binding(ctx context.Context) (*bound, error) {
	s.cache.Lock()
	bd := s.bound
	s.cache.Unlock()
	if bd != nil {
		return bd, nil
	}
	vs, err := s.fetch(ctx, s.meta, "binding", false)
	if err != nil {
		return nil, err
	}
	b, err := resolveBinding(vs)
	if err != nil || b == nil {
		return nil, err
	}
	c, err := b.Codec()
	if err != nil {
		return nil, fmt.Errorf("cannot use the store's binding: %w", err)
	}
	bd = &bound{b: *b, codec: c}
	s.cache.Lock()
	s.bound = bd
	s.cache.Unlock()
	return bd, nil
}

func (s *Store) lease(ctx context.Context, run uint32) (*callnumber.Lease, error) {
	vs, err := s.fetch(ctx, s.runs, strconv.FormatUint(uint64(run), 10), false)
	if err != nil {
		return nil, err
	}
	return resolveLease(vs)
}

// RecordLease implements store.Store.
func (s *Store) RecordLease(ctx context.Context, l callnumber.Lease) error {
	if err := s.begin(); err != nil {
		return err
	}
	defer s.end()
	if err := s.recordLease(ctx, l); err != nil {
		return fmt.Errorf("cannot record lease of run %d: %w", l.Run, err)
	}
	return nil
}

func (s *Store) recordLease(ctx context.Context, l callnumber.Lease) error {
	// Each step re-reads after a lost race, so two processes recording at
	// once end with one answer; at most a few rounds.
	for range 4 {
		bd, err := s.binding(ctx)
		if err != nil {
			return err
		}
		old, err := s.lease(ctx, l.Run)
		if err != nil {
			return err
		}
		var cur *store.Binding
		if bd != nil {
			cur = &bd.b
		}
		d, err := batch.CheckLease(cur, old, l)
		if err != nil {
			return err
		}
		if d == batch.Known {
			return nil
		}
		if bd == nil {
			b := store.Binding{Authority: l.Authority, Scheme: l.Scheme, Key: l.Key}
			if _, err := s.create(ctx, s.meta, "binding", &riak.Object{ContentType: "application/json", Value: record.MarshalBinding(b)}); err != nil {
				return err
			}
			// Won or lost, read it back: siblings of another authority are
			// refused there.
			if _, err := s.binding(ctx); err != nil {
				return err
			}
			continue
		}
		key := strconv.FormatUint(uint64(l.Run), 10)
		created, err := s.create(ctx, s.runs, key, &riak.Object{ContentType: "application/json", Value: record.MarshalLease(l)})
		if err != nil {
			return err
		}
		if !created {
			continue // someone recorded this run meanwhile: check it
		}
		// Read back: a racing put of another lease leaves siblings.
		if _, err := s.lease(ctx, l.Run); err != nil {
			return err
		}
		s.cache.Lock()
		s.known[l.Run] = true
		s.cache.Unlock()
		return nil
	}
	return fmt.Errorf("lease records of run %d keep changing under concurrent writers", l.Run)
}

// Lease implements store.Store.
func (s *Store) Lease(ctx context.Context, run uint32) (callnumber.Lease, error) {
	if err := s.begin(); err != nil {
		return callnumber.Lease{}, err
	}
	defer s.end()
	l, err := s.lease(ctx, run)
	if err == nil && l == nil {
		err = fmt.Errorf("%w: no lease of run %d", store.ErrNotFound, run)
	}
	if err != nil {
		return callnumber.Lease{}, fmt.Errorf("cannot read lease of run %d: %w", run, err)
	}
	return *l, nil
}

// Binding implements store.Store.
func (s *Store) Binding(ctx context.Context) (store.Binding, error) {
	if err := s.begin(); err != nil {
		return store.Binding{}, err
	}
	defer s.end()
	bd, err := s.binding(ctx)
	if err == nil && bd == nil {
		err = store.ErrUnbound
	}
	if err != nil {
		return store.Binding{}, fmt.Errorf("cannot read the store's binding: %w", err)
	}
	return bd.b, nil
}

// Get implements store.Store.
func (s *Store) Get(ctx context.Context, n callnumber.Number) (store.Stored, error) {
	if err := s.begin(); err != nil {
		return store.Stored{}, err
	}
	defer s.end()
	m, ok, err := s.getRecord(ctx, n)
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	if err != nil {
		return store.Stored{}, fmt.Errorf("cannot get message %v: %w", n, err)
	}
	return m.Stored(n), nil
}

func (s *Store) getRecord(ctx context.Context, n callnumber.Number) (record.Message, bool, error) {
	vs, err := s.fetch(ctx, s.messages, n.String(), false)
	if err != nil {
		return record.Message{}, false, err
	}
	m, ok, err := resolveMessage(vs)
	if errors.Is(err, errConflict) {
		err = fmt.Errorf("%w: call number %v was written by two writers at once: %w; both copies are kept as siblings in %s/%s: check both runs' leases", store.ErrNumberTaken, n, err, TypeKV, s.messages)
	}
	return m, ok, err
}

// ByMessageID implements store.Store. The numbers come in the order of
// their run and sequence, the order one process stores them in.
func (s *Store) ByMessageID(ctx context.Context, id string) ([]callnumber.Number, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	out := []callnumber.Number{}
	if id == "" {
		return out, nil
	}
	bd, err := s.binding(ctx)
	if err != nil || bd == nil {
		return out, err
	}
	cmd, err := riak.NewFetchSetCommandBuilder().
		WithBucketType(TypeSets).WithBucket(s.msgids).WithKey(msgIDKey(id)).
		WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return nil, err
	}
	if err := s.exec(ctx, cmd); err != nil {
		return nil, fmt.Errorf("cannot look up Message-ID %q: %w", id, err)
	}
	r := cmd.(*riak.FetchSetCommand).Response
	if r == nil || r.IsNotFound {
		return out, nil
	}
	if out, err = decodeSet(r.SetValue); err != nil {
		return nil, fmt.Errorf("cannot look up Message-ID %q: %w", id, err)
	}
	sortNumbers(bd.codec, out)
	return out, nil
}

// ByDigest implements store.Store.
func (s *Store) ByDigest(ctx context.Context, d store.Digest) (callnumber.Number, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	vs, err := s.fetch(ctx, s.digests, d.String(), false)
	if err != nil {
		return 0, fmt.Errorf("cannot look up digest %v: %w", d, err)
	}
	n, ok, err := resolveDigest(vs)
	if err == nil && !ok {
		err = store.ErrNotFound
	}
	if err != nil {
		return 0, fmt.Errorf("cannot look up digest %v: %w", d, err)
	}
	return n, nil
}

// Count implements store.Store: an estimate, see the package doc.
func (s *Store) Count(ctx context.Context) (int64, error) {
	if err := s.begin(); err != nil {
		return 0, err
	}
	defer s.end()
	cmd, err := riak.NewFetchCounterCommandBuilder().
		WithBucketType(TypeCounters).WithBucket(s.counts).WithKey("messages").
		WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return 0, err
	}
	if err := s.exec(ctx, cmd); err != nil {
		return 0, fmt.Errorf("cannot count messages: %w", err)
	}
	r := cmd.(*riak.FetchCounterCommand).Response
	if r == nil || r.IsNotFound {
		return 0, nil
	}
	return r.CounterValue, nil
}

// parallel runs fn(i) for i in [0, n) with at most limit at once and
// returns the first error.
func parallel(ctx context.Context, n, limit int, fn func(ctx context.Context, i int) error) error {
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

// prefetched answers batch.Make from values fetched before it runs.
type prefetched struct {
	leases  map[uint32]bool
	raw     map[callnumber.Number][]byte
	digests map[store.Digest]callnumber.Number
}

func (p *prefetched) HasLease(_ context.Context, run uint32) (bool, error) {
	return p.leases[run], nil
}

func (p *prefetched) Raw(_ context.Context, n callnumber.Number) ([]byte, bool, error) {
	r, ok := p.raw[n]
	return r, ok, nil
}

func (p *prefetched) Digest(_ context.Context, d store.Digest) (callnumber.Number, bool, error) {
	n, ok := p.digests[d]
	return n, ok, nil
}

// Put implements store.Store; see the package doc for what a batch
// guarantees on Riak.
func (s *Store) Put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if len(msgs) == 0 {
		return []store.Result{}, nil
	}
	res, err := s.put(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("cannot put %d messages: %w", len(msgs), err)
	}
	return res, nil
}

func (s *Store) put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	if err := batch.CheckDigests(msgs); err != nil {
		return nil, err
	}
	bd, err := s.binding(ctx)
	if err != nil {
		return nil, err
	}
	if bd == nil {
		return nil, fmt.Errorf("%w: this store has no lease recorded at all (it is not bound to a run authority yet): record the run's lease before putting messages under it", store.ErrUnknownRun)
	}
	pre, err := s.prefetch(ctx, bd.codec, msgs)
	if err != nil {
		return nil, err
	}
	plan, err := batch.Make(ctx, bd.codec, msgs, pre)
	if err != nil {
		return nil, err
	}
	var (
		mu      sync.Mutex
		written int64
	)
	err = parallel(ctx, len(msgs), s.opts.Parallel, func(ctx context.Context, i int) error {
		switch plan.Actions[i] {
		case batch.Write:
			w, err := s.writeMessage(ctx, &msgs[i], plan.Fields[i])
			if w {
				mu.Lock()
				written++
				mu.Unlock()
			}
			return err
		case batch.Retried:
			// Already stored by an earlier try of this batch: make sure the
			// indexes that try may not have reached exist.
			return s.index(ctx, &msgs[i])
		}
		return nil
	})
	if written > 0 {
		if cerr := s.addCount(ctx, written); err == nil {
			err = cerr
		}
	}
	if err != nil {
		return nil, err
	}
	return plan.Results, nil
}

// prefetch reads, in parallel, what batch.Make asks about: the leases of
// the batch's runs, the messages under its numbers and its digests.
func (s *Store) prefetch(ctx context.Context, codec *callnumber.Codec, msgs []store.Message) (*prefetched, error) {
	pre := &prefetched{
		leases:  make(map[uint32]bool),
		raw:     make(map[callnumber.Number][]byte),
		digests: make(map[store.Digest]callnumber.Number),
	}
	var runs []uint32
	s.cache.Lock()
	for _, m := range msgs {
		f, err := codec.Decode(m.Number)
		if err != nil {
			continue // batch.Make refuses it
		}
		if s.known[f.Run] {
			pre.leases[f.Run] = true
		} else if _, ok := pre.leases[f.Run]; !ok {
			pre.leases[f.Run] = false
			runs = append(runs, f.Run)
		}
	}
	s.cache.Unlock()
	var mu sync.Mutex
	err := parallel(ctx, len(runs), s.opts.Parallel, func(ctx context.Context, i int) error {
		l, err := s.lease(ctx, runs[i])
		if err != nil || l == nil {
			return err
		}
		mu.Lock()
		pre.leases[runs[i]] = true
		mu.Unlock()
		s.cache.Lock()
		s.known[runs[i]] = true
		s.cache.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	err = parallel(ctx, 2*len(msgs), s.opts.Parallel, func(ctx context.Context, j int) error {
		m := &msgs[j/2]
		if j%2 == 0 {
			rec, ok, err := s.getRecord(ctx, m.Number)
			if err != nil || !ok {
				return err
			}
			mu.Lock()
			pre.raw[m.Number] = rec.Raw
			mu.Unlock()
			return nil
		}
		vs, err := s.fetch(ctx, s.digests, m.Digest.String(), false)
		if err != nil {
			return err
		}
		n, ok, err := resolveDigest(vs)
		if err != nil || !ok {
			return err
		}
		mu.Lock()
		pre.digests[m.Digest] = n
		mu.Unlock()
		return nil
	})
	if err != nil {
		return nil, err
	}
	return pre, nil
}

// writeMessage stores one new message and its indexes. It reports whether
// this call stored the message (for the count).
func (s *Store) writeMessage(ctx context.Context, m *store.Message, f callnumber.Fields) (bool, error) {
	rec := record.Message{Digest: m.Digest, Added: time.Now().UTC(), MessageID: m.MessageID, List: m.List, Raw: m.Raw}
	obj := &riak.Object{
		ContentType: "application/octet-stream",
		Value:       record.AppendMessage(make([]byte, 0, record.Size(rec)), rec),
	}
	obj.AddToIntIndex("run_int", int(f.Run))
	created, err := s.create(ctx, s.messages, m.Number.String(), obj)
	if err != nil {
		return false, err
	}
	// Read back, created or not: a racing writer leaves siblings, and a
	// put whose reply was lost and was retried finds its own bytes.
	got, ok, err := s.getRecord(ctx, m.Number)
	if err != nil {
		return false, err
	}
	if !ok {
		return false, fmt.Errorf("message %v not found right after it was stored (is allow_mult set on bucket type %s?)", m.Number, TypeKV)
	}
	if string(got.Raw) != string(m.Raw) {
		return false, fmt.Errorf("%w: call number %v was stored meanwhile with other bytes (%d bytes, digest %.16s…) by another writer: check the run's lease with `resolver inspect %v`", store.ErrNumberTaken, m.Number, len(got.Raw), got.Digest, m.Number)
	}
	return created, s.index(ctx, m)
}

// index writes the digest entry and the Message-ID set member of a stored
// message. Both are idempotent.
func (s *Store) index(ctx context.Context, m *store.Message) error {
	num := m.Number.String()
	created, err := s.create(ctx, s.digests, m.Digest.String(), &riak.Object{ContentType: "text/plain", Value: []byte(num)})
	if err != nil {
		return err
	}
	if !created {
		vs, err := s.fetch(ctx, s.digests, m.Digest.String(), false)
		if err != nil {
			return err
		}
		if n, ok, err := resolveDigest(vs); err != nil {
			return err
		} else if ok && n != m.Number {
			s.log.Info("message stored by two writers at once: its digest points to the other copy", "callnumber", num, "digest_points_to", n.String(), "digest", hex.EncodeToString(m.Digest[:8]))
		}
	}
	if m.MessageID == "" {
		return nil
	}
	cmd, err := riak.NewUpdateSetCommandBuilder().
		WithBucketType(TypeSets).WithBucket(s.msgids).WithKey(msgIDKey(m.MessageID)).
		WithAdditions([]byte(num)).WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return err
	}
	if err := s.exec(ctx, cmd); err != nil {
		return fmt.Errorf("cannot add %v to the set of Message-ID %q: %w", m.Number, m.MessageID, err)
	}
	return nil
}

func (s *Store) addCount(ctx context.Context, n int64) error {
	cmd, err := riak.NewUpdateCounterCommandBuilder().
		WithBucketType(TypeCounters).WithBucket(s.counts).WithKey("messages").
		WithIncrement(n).WithTimeout(s.opts.Timeout).Build()
	if err != nil {
		return err
	}
	if err := s.exec(ctx, cmd); err != nil {
		return fmt.Errorf("cannot add %d to the message count: %w", n, err)
	}
	return nil
}

// errNoFeed is returned by Changes until the Riak change feed lands.
var errNoFeed = errors.New("riakstore: the change feed is not available on Riak in this version")

// Changes implements store.Store. The Riak change feed is being built;
// until then a follower on Riak gets this error and says so.
func (s *Store) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	return store.ChangePage{}, fmt.Errorf("cannot read the change feed after %q: %w", after, errNoFeed)
}
