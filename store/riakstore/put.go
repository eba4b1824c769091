package riakstore

import (
	"context"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"sync"
	"sync/atomic"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/batch"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Put implements store.Store; see the package doc for its guarantees.
func (s *Store) Put(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
	if err := s.begin(); err != nil {
		return nil, err
	}
	defer s.end()
	if len(msgs) == 0 {
		return []store.Result{}, nil
	}
	res, err := s.putBatch(ctx, msgs)
	if err != nil {
		return nil, fmt.Errorf("cannot put %d messages: %w", len(msgs), err)
	}
	return res, nil
}

// packState is a pack as prefetched, and as this Put has written it since.
type packState struct {
	entries map[uint16]packEntry
	terms   map[string]bool // Message-ID index terms
	vclock  []byte
	size    int64 // bytes of its value(s) as last read or written
}

// prefetched answers batch.Make from values fetched before it runs.
type prefetched struct {
	s        *Store
	codec    *callnumber.Codec
	leases   map[uint32]bool
	packs    map[string]*packState
	digests  map[store.Digest]callnumber.Number // of stored (or removed) messages
	removals map[callnumber.Number]*store.Removal
	// gens are the first free generations of unbelieved digest entries.
	gens map[store.Digest]int
	// ref is when the digests were looked up: claims are judged as of then.
	ref time.Time
}

func (p *prefetched) HasLease(_ context.Context, run uint32) (bool, error) {
	return p.leases[run], nil
}

// Removal implements batch.Lookup.
func (p *prefetched) Removal(_ context.Context, n callnumber.Number) (*store.Removal, error) {
	if r := p.removals[n]; r != nil {
		return r, nil
	}
	f, err := p.codec.Decode(n)
	if err != nil {
		return nil, nil
	}
	ps := p.packs[packKey(f)]
	if ps == nil {
		return nil, nil
	}
	e, ok := ps.entries[f.Sequence]
	if !ok || !e.removed {
		return nil, nil
	}
	r, err := record.UnmarshalRemoval(n, e.rec)
	if err != nil {
		return nil, err
	}
	return &r, nil
}

func (p *prefetched) Raw(ctx context.Context, n callnumber.Number) ([]byte, bool, error) {
	f, err := p.codec.Decode(n)
	if err != nil {
		return nil, false, nil // batch.Make refuses it before asking
	}
	ps := p.packs[packKey(f)]
	if ps == nil {
		return nil, false, nil
	}
	e, ok := ps.entries[f.Sequence]
	if !ok || e.removed {
		return nil, false, nil
	}
	m, err := p.s.entryMessage(ctx, n, e, p.s.decoder(ctx))
	if err != nil {
		return nil, false, err
	}
	return m.Raw, true, nil
}

func (p *prefetched) Digest(_ context.Context, d store.Digest) (callnumber.Number, bool, error) {
	n, ok := p.digests[d]
	return n, ok, nil
}

// prefetch reads, in parallel, what batch.Make asks about.
func (s *Store) prefetch(ctx context.Context, codec *callnumber.Codec, msgs []store.Message) (*prefetched, error) {
	pre := &prefetched{
		s: s, codec: codec,
		leases:   make(map[uint32]bool),
		packs:    make(map[string]*packState),
		digests:  make(map[store.Digest]callnumber.Number),
		removals: make(map[callnumber.Number]*store.Removal),
		gens:     make(map[store.Digest]int),
	}
	var runs []uint32
	var packs []string
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
		if k := packKey(f); pre.packs[k] == nil {
			pre.packs[k] = &packState{}
			packs = append(packs, k)
		}
	}
	s.cache.Unlock()
	var digests []store.Digest
	seen := make(map[store.Digest]bool, len(msgs))
	for _, m := range msgs {
		if !seen[m.Digest] {
			seen[m.Digest] = true
			digests = append(digests, m.Digest)
		}
	}
	// The contents of those with a Message-ID, which batch.Make looks up
	// for a removed message's (no claim names them: only removals do, so
	// most need no lookup).
	messages := len(digests)
	for _, m := range msgs {
		if c := store.ContentOf(m.Raw, m.MessageID); c != (store.Digest{}) && !seen[c] {
			seen[c] = true
			digests = append(digests, c)
		}
	}
	pre.ref = time.Now()
	// Digests no claim ever named need no lookup (see unclaimed).
	fresh, err := s.unclaimed(ctx, digests)
	if err != nil {
		return nil, err
	}
	lookup := digests
	if fresh != nil {
		lookup = nil
		skipped := 0
		for i, d := range digests {
			switch {
			case !fresh[i]:
				lookup = append(lookup, d)
			case i < messages:
				skipped++
			}
		}
		s.skipped.Add(int64(skipped)) // messages' digests only
	}
	var mu sync.Mutex
	var states []digestState
	err = parallel(ctx, len(runs)+len(packs)+1, s.opts.Parallel, func(ctx context.Context, j int) error {
		switch {
		case j < len(runs):
			l, err := s.lease(ctx, runs[j])
			if err != nil || l == nil {
				return err
			}
			mu.Lock()
			pre.leases[runs[j]] = true
			mu.Unlock()
			s.markKnown(runs[j])
		case j < len(runs)+len(packs):
			k := packs[j-len(runs)]
			f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, k, quick)
			if err != nil {
				return err
			}
			p, err := mergePack(f.values, s.decoder(ctx))
			if err == nil && (p.stale || p.suspect) {
				// Writing the pack then drops a removed message's remains.
				p.terms, err = s.cleanTerms(ctx, p)
			}
			if err != nil {
				return fmt.Errorf("pack %s: %w", k, err)
			}
			var size int64
			for _, v := range f.values {
				size += int64(len(v.Value))
			}
			mu.Lock()
			*pre.packs[k] = packState{entries: p.entries, terms: p.terms, vclock: f.vclock, size: size}
			mu.Unlock()
		default:
			var err error
			states, err = s.lookupDigests(ctx, codec, lookup)
			return err
		}
		return nil
	})
	if err != nil {
		return nil, err
	}
	for i, st := range states {
		if st.stored != 0 {
			pre.digests[lookup[i]] = st.stored
			if st.removed != nil {
				pre.removals[st.stored] = st.removed
			}
		} else if st.gen > 0 {
			pre.gens[lookup[i]] = st.gen
		}
	}
	return pre, nil
}

// putBatch is Put: check the batch whole, claim its new messages in the
// ledger, write those claimed, and wait for those another writer claimed
// first.
func (s *Store) putBatch(ctx context.Context, msgs []store.Message) ([]store.Result, error) {
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
	w := &batchWrite{s: s, msgs: msgs, plan: plan, pre: pre, index: make(map[callnumber.Number]int)}
	var todo []int
	skip := make([]bool, len(msgs))
	for i, a := range plan.Actions {
		if a == batch.Write {
			todo = append(todo, i)
			w.index[msgs[i].Number] = i
		} else {
			skip[i] = true
		}
	}
	if len(todo) > 0 {
		// Compressed before the claim, so the claim's clock does not run
		// during compression.
		w.added = time.Now().UTC()
		if w.recs, err = s.comp.Encode(ctx, msgs, skip, w.added); err != nil {
			return nil, err
		}
	}
	ref := pre.ref
	for len(todo) > 0 {
		items := make([]item, len(todo))
		for j, i := range todo {
			items[j] = item{digest: msgs[i].Digest, number: msgs[i].Number}
		}
		if err := s.at("claiming"); err != nil {
			return nil, err
		}
		claimed, contested, started, slot, err := s.appendClaims(ctx, items, ref)
		var again []item
		if errors.Is(err, errStaleLookup) {
			// A claim made since the lookup may be forgotten already.
			s.log.Warn("digests looked up too long ago to claim: looking them up again", "messages", len(items), "age", time.Since(ref))
			again, err = items, nil
		}
		if err != nil {
			return nil, err
		}
		if len(claimed) > 0 {
			if err := s.at("claimed"); err != nil {
				return nil, err
			}
			if again, err = w.write(ctx, claimed, started, slot); err != nil {
				return nil, err
			}
		}
		if len(contested) > 0 {
			retake, err := w.await(ctx, contested)
			if err != nil {
				return nil, err
			}
			again = append(again, retake...)
		}
		// A message stored meanwhile is a duplicate: look again.
		todo = todo[:0]
		ref = time.Now()
		states, err := s.lookupDigests(ctx, bd.codec, digestsOf(again))
		if err != nil {
			return nil, err
		}
		for j, it := range again {
			if states[j].stored != 0 {
				w.duplicate(it.number, states[j])
			} else {
				w.entry(it.digest, states[j].gen)
				todo = append(todo, w.index[it.number])
			}
		}
	}
	res := w.results()
	// Messages an earlier try of this batch stored but the digest index
	// does not name: write their entries.
	var repair []int
	for i, a := range plan.Actions {
		if a == batch.Retried {
			if _, ok := pre.digests[msgs[i].Digest]; !ok {
				repair = append(repair, i)
			}
		}
	}
	err = parallel(ctx, len(repair), s.opts.Parallel, func(ctx context.Context, j int) error {
		m := &msgs[repair[j]]
		return s.putDigest(ctx, m.Digest, m.Number, pre.gens[m.Digest])
	})
	if err != nil {
		return nil, err
	}
	if w.written > 0 {
		count, err := s.addCount(ctx, w.written)
		if err != nil {
			return nil, err
		}
		// Durable: the store may train a dictionary now.
		s.comp.Stored(ctx, count)
	}
	return res, nil
}

// batchWrite is one Put under way.
type batchWrite struct {
	s     *Store
	msgs  []store.Message
	plan  batch.Plan
	pre   *prefetched
	index map[callnumber.Number]int // message index of each number to write
	recs  [][]byte                  // the record of each message to write
	added time.Time                 // when the records say it was added

	mu      sync.Mutex
	dups    map[int]dup // messages found stored by another writer
	written int64
}

// entry notes the generation a digest's new entry goes to.
func (w *batchWrite) entry(d store.Digest, gen int) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.pre.gens[d] = gen
}

func (w *batchWrite) entryOf(d store.Digest) int {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.pre.gens[d]
}

func digestsOf(its []item) []store.Digest {
	out := make([]store.Digest, len(its))
	for i, it := range its {
		out[i] = it.digest
	}
	return out
}

// dup is the number a message was found stored under, and whether it
// was removed since.
type dup struct {
	of      callnumber.Number
	removed bool
}

func (w *batchWrite) duplicate(n callnumber.Number, st digestState) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.dups == nil {
		w.dups = make(map[int]dup)
	}
	w.dups[w.index[n]] = dup{st.stored, st.removed != nil}
}

// results are the plan's results, with messages another writer stored,
// and their later copies in the batch, as duplicates of its number.
func (w *batchWrite) results() []store.Result {
	res := append([]store.Result(nil), w.plan.Results...)
	for i, d := range w.dups {
		res[i] = store.Result{Number: d.of, Duplicate: true, Removed: d.removed}
	}
	for i, a := range w.plan.Actions {
		if a != batch.Duplicate {
			continue
		}
		if j, ok := w.index[res[i].Number]; ok {
			if d, ok := w.dups[j]; ok {
				res[i].Number, res[i].Removed = d.of, d.removed
			}
		}
	}
	return res
}

// write stores claimed messages: for each pack, the digest entries of its
// new messages and the large ones' objects, then the pack. A claim
// already half its timeout old could expire mid-write, so its items are
// returned to be claimed again instead.
func (w *batchWrite) write(ctx context.Context, claimed []item, started time.Time, slot uint64) (again []item, err error) {
	s := w.s
	if time.Since(started) > s.opts.ClaimTimeout/2 {
		s.log.Warn("claim too old to write under: claiming again", "slot", slot, "messages", len(claimed), "age", time.Since(started))
		return claimed, nil
	}
	if err := s.at("writing"); err != nil {
		return nil, err
	}
	type packWrite struct {
		key   string
		state *packState
		msgs  []int
	}
	byPack := make(map[string]*packWrite)
	var order []*packWrite
	for _, it := range claimed {
		i := w.index[it.number]
		k := packKey(w.plan.Fields[i])
		pw := byPack[k]
		if pw == nil {
			pw = &packWrite{key: k, state: w.pre.packs[k]}
			byPack[k] = pw
			order = append(order, pw)
		}
		pw.msgs = append(pw.msgs, i)
	}
	p := newPool(ctx, s.opts.Parallel)
	for _, pw := range order {
		// No message is stored before its digest entry: the last entry
		// task to finish writes the pack.
		var left atomic.Int32
		left.Store(int32(len(pw.msgs)))
		for _, i := range pw.msgs {
			p.Go(func(ctx context.Context) error {
				m := &w.msgs[i]
				if err := s.putDigest(ctx, m.Digest, m.Number, w.entryOf(m.Digest)); err != nil {
					return err
				}
				if left.Add(-1) == 0 {
					p.Go(func(ctx context.Context) error { return w.writePack(ctx, pw.key, pw.state, pw.msgs) })
				}
				return nil
			})
		}
	}
	if err := p.Wait(); err != nil {
		return nil, err
	}
	if err := s.at("written"); err != nil {
		return nil, err
	}
	if age := time.Since(started); age > s.opts.ClaimTimeout/2 {
		// Written later than the claim is sure to hold. Nothing can be
		// undone (a reader may have seen the messages); log it.
		later, err := s.laterClaims(ctx, claimed, slot)
		if err != nil {
			return nil, err
		}
		for j, n := range later {
			if n != 0 {
				s.log.Error("message stored twice: this writer took longer than the claim timeout to write it, and another writer took it over meanwhile", "callnumber", claimed[j].number.String(), "other", n.String(), "age", age, "claim_timeout", s.opts.ClaimTimeout)
			}
		}
	}
	return nil, nil
}

// writePack adds the messages msgs to the pack key, writing large ones'
// objects first.
func (w *batchWrite) writePack(ctx context.Context, key string, state *packState, msgs []int) error {
	s := w.s
	if err := s.at("pack"); err != nil {
		return err
	}
	w.mu.Lock()
	entries := make(map[uint16]packEntry, len(state.entries)+len(msgs))
	for seq, e := range state.entries {
		entries[seq] = e
	}
	terms := make(map[string]bool, len(state.terms)+len(msgs))
	for t := range state.terms {
		terms[t] = true
	}
	vclock, was := state.vclock, state.size
	w.mu.Unlock()
	for _, i := range msgs {
		m := &w.msgs[i]
		e := packEntry{seq: w.plan.Fields[i].Sequence, rec: w.recs[i]}
		if len(m.Raw) > largeMessage {
			obj := &riak.Object{ContentType: "application/octet-stream", Value: encodeLarge(w.recs[i])}
			if err := s.put(ctx, s.b.types.KV, s.b.large, m.Number.String(), obj, nil); err != nil {
				return err
			}
			s.messageBytes.Add(int64(len(obj.Value)))
			s.keptBytes.Add(int64(len(obj.Value)))
			stub := record.Message{Digest: m.Digest, Added: w.added, MessageID: m.MessageID, List: m.List}
			if !m.Added.IsZero() {
				stub.Added = m.Added.UTC()
			}
			e.large, e.rec = true, record.AppendMessage(make([]byte, 0, record.Size(stub)), stub)
		}
		entries[e.seq] = e
		if m.MessageID != "" {
			terms[msgIDKey(m.MessageID)] = true
		}
	}
	vclock, size, err := s.putPack(ctx, key, entries, terms, vclock)
	if err != nil {
		return err
	}
	if vclock == nil {
		// A sibling went in beside this write, perhaps a removal this
		// write did not know of: settle the pack.
		p, vc, sz, err := s.settlePack(ctx, key)
		if err != nil {
			return err
		}
		entries, terms, vclock, size = p.entries, p.terms, vc, sz
	}
	s.keptBytes.Add(size - was)
	w.mu.Lock()
	state.entries, state.terms, state.vclock, state.size = entries, terms, vclock, size
	w.written += int64(len(msgs))
	w.mu.Unlock()
	return nil
}

// await waits for messages another writer claimed first: each becomes a
// duplicate of that writer's number once it is stored, or is returned to
// be claimed again once that claim has expired.
func (w *batchWrite) await(ctx context.Context, contested []item) (retake []item, err error) {
	s := w.s
	pause := 20 * time.Millisecond
	for len(contested) > 0 {
		ref := time.Now()
		states, err := s.lookupDigests(ctx, w.pre.codec, digestsOf(contested))
		if err != nil {
			return nil, err
		}
		var open []item
		for j, it := range contested {
			if states[j].stored != 0 {
				w.duplicate(it.number, states[j])
			} else {
				open = append(open, it)
			}
		}
		if len(open) == 0 {
			break
		}
		held, err := s.claimedByOther(ctx, open, ref)
		if err != nil {
			return nil, err
		}
		contested = contested[:0]
		for j, it := range open {
			if held[j] {
				contested = append(contested, it)
			} else {
				s.log.Info("taking over a claim whose message never appeared", "digest", hex.EncodeToString(it.digest[:8]), "callnumber", it.number.String())
				retake = append(retake, it)
			}
		}
		if len(contested) == 0 {
			break
		}
		select {
		case <-time.After(pause):
		case <-ctx.Done():
			return nil, ctx.Err()
		}
		pause = min(2*pause, 500*time.Millisecond)
	}
	return retake, nil
}

// putPack writes a pack with the causal context of its last read or
// write, and returns the new causal context and the value's size. It
// waits for every replica, for the index queries (see the package doc).
func (s *Store) putPack(ctx context.Context, key string, entries map[uint16]packEntry, terms map[string]bool, vclock []byte) ([]byte, int64, error) {
	obj := packObject(entries, terms)
	cmd, err := s.do(ctx, func() (riak.Command, error) {
		o := *obj
		o.VClock = vclock
		return riak.NewStoreValueCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.packs).WithKey(key).
			WithContent(&o).WithW(rAll).WithReturnHead(true).WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return nil, 0, fmt.Errorf("cannot store pack %s/%s/%s: %w", s.b.types.KV, s.b.packs, key, err)
	}
	size := int64(len(obj.Value))
	s.written.Add(size)
	s.messageBytes.Add(size)
	r := cmd.(*riak.StoreValueCommand).Response
	if r == nil || len(r.Values) > 1 {
		// Siblings: without their entries in hand, a later write must not
		// replace them, so it goes in blind.
		return nil, size, nil
	}
	return r.VClock, size, nil
}

// maxSettle bounds the writes of settlePack: only a concurrent writer of
// the same pack can make another one necessary.
const maxSettle = 8

// errUnsettled: a pack kept changing under settlePack.
var errUnsettled = errors.New("riakstore: a pack kept changing while it was written without a removed message's remains")

// settlePack reads a pack from every replica and, while a sibling holds a
// removed message or its index term, writes it anew with the causal
// context read, which replaces every sibling.
func (s *Store) settlePack(ctx context.Context, key string) (pack, []byte, int64, error) {
	decode := s.decoder(ctx)
	for attempt := 0; ; attempt++ {
		f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, key, all)
		if err != nil {
			return pack{}, nil, 0, err
		}
		p, err := mergePack(f.values, decode)
		if err != nil {
			return pack{}, nil, 0, fmt.Errorf("pack %s: %w", key, err)
		}
		var size int64
		for _, v := range f.values {
			size += int64(len(v.Value))
		}
		if !p.stale && !p.suspect {
			return p, f.vclock, size, nil
		}
		terms, err := s.cleanTerms(ctx, p)
		if err != nil {
			return pack{}, nil, 0, fmt.Errorf("pack %s: %w", key, err)
		}
		if !p.stale && maps.Equal(terms, p.terms) {
			return p, f.vclock, size, nil // another message has the Message-ID
		}
		if attempt == maxSettle {
			return pack{}, nil, 0, fmt.Errorf("%w: %s/%s/%s after %d writes", errUnsettled, s.b.types.KV, s.b.packs, key, attempt)
		}
		if err := s.at("settle"); err != nil {
			return pack{}, nil, 0, err
		}
		p.terms = terms
		vclock, size, err := s.putPack(ctx, key, p.entries, terms, f.vclock)
		if err != nil {
			return pack{}, nil, 0, err
		}
		if vclock != nil {
			p.stale, p.suspect = false, false
			return p, vclock, size, nil
		}
	}
}

// cleanTerms returns the Message-ID index terms of the messages p holds,
// decoding every one, so that a removed message's term goes.
func (s *Store) cleanTerms(ctx context.Context, p pack) (map[string]bool, error) {
	decode := s.decoder(ctx)
	terms := make(map[string]bool)
	for _, e := range p.entries {
		if e.removed {
			continue
		}
		var (
			m   record.Message
			err error
		)
		if e.large {
			m, err = record.DecodeMessage(e.rec)
		} else {
			m, err = decode(e.rec)
		}
		if err != nil {
			return nil, fmt.Errorf("entry %d: %w", e.seq, err)
		}
		if m.MessageID != "" {
			terms[msgIDKey(m.MessageID)] = true
		}
	}
	return terms, nil
}

// addCount adds n to the message count and returns the new count.
func (s *Store) addCount(ctx context.Context, n int64) (int64, error) {
	cmd, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewUpdateCounterCommandBuilder().
			WithBucketType(s.b.types.Counters).WithBucket(s.b.counts).WithKey("messages").
			WithIncrement(n).WithReturnBody(true).WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		return 0, fmt.Errorf("cannot add %d to the message count: %w", n, err)
	}
	var count int64
	if r := cmd.(*riak.UpdateCounterCommand).Response; r != nil {
		count = r.CounterValue
	}
	return count, nil
}

// pool runs functions with at most limit at once; a function may add
// more. Wait returns the first error, which cancels the others.
type pool struct {
	ctx    context.Context
	cancel context.CancelFunc
	sem    chan struct{}
	wg     sync.WaitGroup
	mu     sync.Mutex
	err    error
}

func newPool(ctx context.Context, limit int) *pool {
	ctx, cancel := context.WithCancel(ctx)
	return &pool{ctx: ctx, cancel: cancel, sem: make(chan struct{}, limit)}
}

// Go runs fn on its own goroutine once a slot is free.
func (p *pool) Go(fn func(ctx context.Context) error) {
	p.wg.Go(func() {
		select {
		case p.sem <- struct{}{}:
		case <-p.ctx.Done():
			p.fail(p.ctx.Err())
			return
		}
		err := fn(p.ctx)
		<-p.sem
		if err != nil {
			p.fail(err)
		}
	})
}

func (p *pool) fail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.err == nil || errors.Is(p.err, context.Canceled) && !errors.Is(err, context.Canceled) {
		p.err = err
	}
	p.cancel()
}

// Wait waits for every function, and returns the first error.
func (p *pool) Wait() error {
	p.wg.Wait()
	p.cancel()
	return p.err
}
