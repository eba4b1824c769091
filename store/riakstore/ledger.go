package riakstore

import (
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"slices"
	"strconv"
	"sync"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// The ledger is the archive's log of batches: slots 1, 2, 3, ... of
// ARCHIVE.log in the consistent bucket type, each created once. A writer
// only tries slot N after it has read slot N-1, so the slots fill without
// gaps and a reader stops at the first one not found. A Put's entry is
// its claim on its new messages (see the package doc); the change feed
// reads the same entries.
//
// # Ledger entry, version 1
//
//	offset  size     field
//	0       1        entry format version (1)
//	1       8        time the writer made the entry: Unix milliseconds of
//	                 its clock, big-endian
//	9       8        writer: random, one per Store handle
//	17      8        nonce: random, one per entry (tells a writer its own
//	                 entry from another's after a lost reply)
//	25      uvarint  number of items
//	        40 each  item: SHA-256 digest (32), call number (8, big-endian)
//
// A removal entry (version 2, remove.go) has the same first 25 bytes,
// then the call number removed (8, big-endian). A move entry (version 3,
// move.go) has them too, then the call number moved (8), when it was
// moved (Unix nanoseconds, 8, big-endian) and the list (1 to 64 bytes).
// A program that does not know a version refuses the whole ledger.

const (
	entryVersion   = 1
	removalVersion = 2
	moveVersion    = 3
)

type item struct {
	digest store.Digest
	number callnumber.Number
}

type entry struct {
	time   time.Time
	writer [8]byte
	nonce  [8]byte
	items  []item
	// removal, or move with a non-zero Number, marks the other entry
	// versions, which have no items.
	removal callnumber.Number
	move    store.Move
}

// size is the number of items the entry gives the change feed.
func (e *entry) size() int {
	if e.removal != 0 || e.move.Number != 0 {
		return 1
	}
	return len(e.items)
}

func appendEntry(dst []byte, e *entry) []byte {
	v := byte(entryVersion)
	switch {
	case e.removal != 0:
		v = removalVersion
	case e.move.Number != 0:
		v = moveVersion
	}
	dst = append(dst, v)
	dst = binary.BigEndian.AppendUint64(dst, uint64(e.time.UnixMilli()))
	dst = append(dst, e.writer[:]...)
	dst = append(dst, e.nonce[:]...)
	switch v {
	case removalVersion:
		return binary.BigEndian.AppendUint64(dst, uint64(e.removal))
	case moveVersion:
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.move.Number))
		dst = binary.BigEndian.AppendUint64(dst, uint64(e.move.Moved.UnixNano()))
		return append(dst, e.move.List...)
	}
	dst = binary.AppendUvarint(dst, uint64(len(e.items)))
	for _, it := range e.items {
		dst = append(dst, it.digest[:]...)
		dst = binary.BigEndian.AppendUint64(dst, uint64(it.number))
	}
	return dst
}

func decodeEntry(b []byte) (*entry, error) {
	const head = 1 + 8 + 8 + 8
	if len(b) < head+1 || b[0] != entryVersion && b[0] != removalVersion && b[0] != moveVersion {
		v := -1
		if len(b) > 0 {
			v = int(b[0])
		}
		return nil, fmt.Errorf("%w: ledger entry of %d bytes, version %d (this program reads versions %d, %d and %d)", record.ErrCorrupt, len(b), v, entryVersion, removalVersion, moveVersion)
	}
	e := &entry{time: time.UnixMilli(int64(binary.BigEndian.Uint64(b[1:9]))).UTC()}
	copy(e.writer[:], b[9:17])
	copy(e.nonce[:], b[17:25])
	if b[0] == removalVersion {
		if len(b) != head+8 {
			return nil, fmt.Errorf("%w: removal ledger entry of %d bytes", record.ErrCorrupt, len(b))
		}
		e.removal = callnumber.Number(binary.BigEndian.Uint64(b[head:]))
		if e.removal == 0 || e.removal >= 1<<callnumber.Bits {
			return nil, fmt.Errorf("%w: removal ledger entry: call number out of range", record.ErrCorrupt)
		}
		return e, nil
	}
	if b[0] == moveVersion {
		if len(b) < head+16+1 {
			return nil, fmt.Errorf("%w: move ledger entry of %d bytes", record.ErrCorrupt, len(b))
		}
		e.move = store.Move{
			Number: callnumber.Number(binary.BigEndian.Uint64(b[head:])),
			Moved:  time.Unix(0, int64(binary.BigEndian.Uint64(b[head+8:]))).UTC(),
			List:   string(b[head+16:]),
		}
		if e.move.Number == 0 || e.move.Number >= 1<<callnumber.Bits || store.CheckList(e.move.List) != nil {
			return nil, fmt.Errorf("%w: move ledger entry: call number out of range or bad list", record.ErrCorrupt)
		}
		return e, nil
	}
	n, k := binary.Uvarint(b[head:])
	if k <= 0 || n > uint64(len(b)) || uint64(len(b)-head-k) != n*40 {
		return nil, fmt.Errorf("%w: ledger entry: bad item count", record.ErrCorrupt)
	}
	rest := b[head+k:]
	e.items = make([]item, n)
	for i := range e.items {
		copy(e.items[i].digest[:], rest[:32])
		e.items[i].number = callnumber.Number(binary.BigEndian.Uint64(rest[32:40]))
		if e.items[i].number >= 1<<callnumber.Bits {
			return nil, fmt.Errorf("%w: ledger entry: call number out of range", record.ErrCorrupt)
		}
		rest = rest[40:]
	}
	return e, nil
}

func slotKey(slot uint64) string { return strconv.FormatUint(slot, 10) }

// entryCache keeps ledger entries read: they never change once written.
type entryCache struct {
	mu    sync.Mutex
	max   int
	m     map[uint64]*entry
	order []uint64
}

func (c *entryCache) init(max int) { c.max, c.m = max, make(map[uint64]*entry) }

func (c *entryCache) get(slot uint64) *entry {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[slot]
}

func (c *entryCache) add(slot uint64, e *entry) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if _, ok := c.m[slot]; ok {
		return
	}
	if len(c.order) >= c.max {
		delete(c.m, c.order[0])
		c.order = c.order[1:]
	}
	c.m[slot] = e
	c.order = append(c.order, slot)
}

// entry reads a ledger slot, or nil if it is not written yet.
func (s *Store) entry(ctx context.Context, slot uint64) (*entry, error) {
	if e := s.entries.get(slot); e != nil {
		return e, nil
	}
	v, err := s.fetchClaim(ctx, s.b.log, slotKey(slot))
	if err != nil || v == nil {
		return nil, err
	}
	e, err := decodeEntry(v)
	if err != nil {
		return nil, fmt.Errorf("ledger slot %d: %w", slot, err)
	}
	s.entries.add(slot, e)
	return e, nil
}

// entriesFrom reads up to max slots from first on, stopping at the first
// not written or once the entries hold items items. Its read-ahead window
// doubles while every slot is written, so a follower at the end asks for
// few.
func (s *Store) entriesFrom(ctx context.Context, first uint64, max, items int) ([]*entry, error) {
	var out []*entry
	window, have := 2, 0
	for len(out) < max && have < items {
		n := min(window, max-len(out))
		got := make([]*entry, n)
		err := parallel(ctx, n, n, func(ctx context.Context, i int) error {
			e, err := s.entry(ctx, first+uint64(len(out)+i))
			got[i] = e
			return err
		})
		if err != nil {
			return nil, err
		}
		for _, e := range got {
			if e == nil {
				return out, nil
			}
			out = append(out, e)
			have += e.size()
		}
		window = min(2*window, 64)
	}
	return out, nil
}

// lastSlot finds the highest slot written by a binary search, which works
// because slots fill without gaps.
func (s *Store) lastSlot(ctx context.Context, from uint64) (uint64, error) {
	lo, hi := from, from+1 // lo is written (or 0), hi is probed next
	for {
		e, err := s.entry(ctx, hi)
		if err != nil {
			return 0, err
		}
		if e == nil {
			break
		}
		lo, hi = hi, hi*2+1
	}
	for hi-lo > 1 { // lo written, hi not
		mid := lo + (hi-lo)/2
		e, err := s.entry(ctx, mid)
		if err != nil {
			return 0, err
		}
		if e != nil {
			lo = mid
		} else {
			hi = mid
		}
	}
	return lo, nil
}

// ledger is a writer's view of the recent ledger and the claims in it.
type ledger struct {
	mu     sync.Mutex
	ready  bool
	end    uint64 // highest slot read (all slots up to it are folded)
	claims map[store.Digest][]claim
	recent []recentEntry // by slot
	// ever, unless nil, holds the first 8 bytes of every digest that
	// slots 1 to end claim or reserve for a removal (see unclaimed). Nil
	// when the handle did not read the ledger from its start, or once it
	// holds maxEver digests.
	ever map[uint64]struct{}
}

// maxEver bounds ledger.ever's memory.
const maxEver = 1 << 20

// everKey is a digest's key in ledger.ever. Two digests may share one,
// which is safe: a digest taken for claimed is merely looked up.
func everKey(d store.Digest) uint64 { return binary.BigEndian.Uint64(d[:8]) }

type claim struct {
	slot   uint64
	number callnumber.Number
	time   time.Time
}

type recentEntry struct {
	slot    uint64
	time    time.Time
	digests []store.Digest
}

// retention is how long a writer keeps the claims it has read: longer
// than any claim can be valid, by any host's clock.
func (s *Store) retention() time.Duration {
	return s.opts.ClaimTimeout*3/2 + 2*s.opts.MaxClockSkew
}

// expiry is the age at which a claim may be taken over.
func (s *Store) expiry() time.Duration { return s.opts.ClaimTimeout + s.opts.MaxClockSkew }

func (lg *ledger) fold(slot uint64, e *entry) {
	r := recentEntry{slot: slot, time: e.time, digests: make([]store.Digest, len(e.items))}
	for i, it := range e.items {
		lg.claims[it.digest] = append(lg.claims[it.digest], claim{slot: slot, number: it.number, time: e.time})
		r.digests[i] = it.digest
		lg.remember(it.digest)
	}
	lg.recent = append(lg.recent, r)
}

// remember adds d to ever, or gives ever up once it is full.
func (lg *ledger) remember(d store.Digest) {
	if lg.ever == nil {
		return
	}
	if len(lg.ever) >= maxEver {
		lg.ever = nil
		return
	}
	lg.ever[everKey(d)] = struct{}{}
}

// prune forgets entries older than keep.
func (lg *ledger) prune(now time.Time, keep time.Duration) {
	cut := 0
	for cut < len(lg.recent) && now.Sub(lg.recent[cut].time) > keep {
		r := lg.recent[cut]
		for _, d := range r.digests {
			cs := slices.DeleteFunc(lg.claims[d], func(c claim) bool { return c.slot == r.slot })
			if len(cs) == 0 {
				delete(lg.claims, d)
			} else {
				lg.claims[d] = cs
			}
		}
		cut++
	}
	lg.recent = lg.recent[cut:]
}

// syncLedger brings the writer's view up to the end of the ledger; on
// first use it reads the whole ledger if it has at most full slots, else
// only the entries within the retention. Called with s.ledger.mu held.
func (s *Store) syncLedger(ctx context.Context, full uint64) error {
	lg := &s.ledger
	if !lg.ready {
		end, err := s.lastSlot(ctx, 0)
		if err != nil {
			return err
		}
		if err := s.readBack(ctx, end, full); err != nil {
			return err
		}
	}
	for {
		es, err := s.entriesFrom(ctx, lg.end+1, 64, math.MaxInt)
		if err != nil {
			return err
		}
		if err := s.rememberRemovals(ctx, es); err != nil {
			return err
		}
		for _, e := range es {
			lg.end++
			lg.fold(lg.end, e)
		}
		if len(es) < 64 {
			break
		}
	}
	lg.prune(time.Now(), s.retention())
	return nil
}

// readBack starts the writer's view at slot end: with the entries within
// the retention, or, if end is at most full, with none and an empty ever
// that the caller fills from the first slot. Called with s.ledger.mu held.
func (s *Store) readBack(ctx context.Context, end, full uint64) error {
	lg := &s.ledger
	lg.claims = make(map[store.Digest][]claim)
	if end <= full {
		lg.ever = make(map[uint64]struct{})
		lg.ready = true
		return nil
	}
	now := time.Now()
	var back []*entry
	for slot := end; slot > 0; {
		n := min(uint64(8), slot)
		got := make([]*entry, n)
		err := parallel(ctx, int(n), int(n), func(ctx context.Context, i int) error {
			e, err := s.entry(ctx, slot-uint64(i))
			if err == nil && e == nil {
				err = fmt.Errorf("ledger slot %d not found below the end %d", slot-uint64(i), end)
			}
			got[i] = e
			return err
		})
		if err != nil {
			return err
		}
		old := false
		for _, e := range got {
			if now.Sub(e.time) > s.retention() {
				old = true
				break
			}
			back = append(back, e)
		}
		if old {
			break
		}
		slot -= n
	}
	for i := len(back) - 1; i >= 0; i-- {
		lg.fold(end-uint64(i), back[i])
	}
	lg.end, lg.ready = end, true
	return nil
}

// rememberRemovals adds to ledger.ever the digests of the removals in es,
// which RecordRemoval reserves without a claim; their states predate
// their entries. Called with s.ledger.mu held.
func (s *Store) rememberRemovals(ctx context.Context, es []*entry) error {
	lg := &s.ledger
	if lg.ever == nil {
		return nil
	}
	var numbers []callnumber.Number
	for _, e := range es {
		if e.removal != 0 {
			numbers = append(numbers, e.removal)
		}
	}
	if len(numbers) == 0 {
		return nil
	}
	states, err := s.removalStates(ctx, numbers)
	if err != nil {
		return err
	}
	for _, n := range numbers {
		st := states[n]
		if st == nil {
			// Cannot happen; if it does, fall back to lookups.
			s.log.Warn("a removal in the ledger has no state", "callnumber", n.String())
			lg.ever = nil
			return nil
		}
		lg.remember(st.removal.Digest)
		if c := st.removal.Content; c != (store.Digest{}) {
			lg.remember(c)
		}
	}
	return nil
}

// unclaimed syncs the writer's view and reports which of ds no entry ever
// claimed or reserved; nil means look every digest up. A Put claims every
// message before writing it, so such a digest needs no lookup: this holds
// as of the sync, like a lookup sent then, and appendClaims sees later
// claims. The whole ledger is read only when it has at most len(ds)/2
// slots, since reading a slot costs more than a lookup.
func (s *Store) unclaimed(ctx context.Context, ds []store.Digest) ([]bool, error) {
	lg := &s.ledger
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if err := s.syncLedger(ctx, uint64(len(ds)/2)); err != nil {
		return nil, err
	}
	if lg.ever == nil {
		return nil, nil
	}
	out := make([]bool, len(ds))
	for i, d := range ds {
		_, claimed := lg.ever[everKey(d)]
		out[i] = !claimed
	}
	return out, nil
}

// owner returns the lowest-slot claim on digest d, valid at ref, for
// another number than n, or nil. Called with s.ledger.mu held.
func (s *Store) owner(d store.Digest, n callnumber.Number, ref time.Time) *claim {
	var best *claim
	for i, c := range s.ledger.claims[d] {
		if c.number == n || ref.Sub(c.time) > s.expiry() {
			continue
		}
		if best == nil || c.slot < best.slot {
			best = &s.ledger.claims[d][i]
		}
	}
	return best
}

// errStaleLookup is appendClaims' answer when the digests were looked up
// too long ago to be judged against the claims the writer keeps.
var errStaleLookup = errors.New("riakstore: digests looked up too long ago to claim them")

// lookupLimit is how old a digest lookup may be when its items are
// claimed. Claims that matter to a lookup at ref were made at ref-expiry
// or later, and the writer forgets them after the retention, so it must
// judge before ref+retention-expiry, or it may miss a claim whose message
// was stored after its lookup and store it twice.
func (s *Store) lookupLimit() time.Duration { return s.opts.ClaimTimeout / 2 }

// appendClaims appends one entry claiming items, judged at ref, the time
// of their lookup. Items another writer claimed first are returned as
// contested and left out; slot is 0 when none were left. started is when
// the winning create was sent.
func (s *Store) appendClaims(ctx context.Context, items []item, ref time.Time) (claimed, contested []item, started time.Time, slot uint64, err error) {
	lg := &s.ledger
	lg.mu.Lock()
	defer lg.mu.Unlock()
	claimed = items
	for {
		if err := s.syncLedger(ctx, 0); err != nil {
			return nil, nil, time.Time{}, 0, err
		}
		// Checked after the sync, which may have pruned claims.
		if time.Since(ref) > s.lookupLimit() {
			return nil, nil, time.Time{}, 0, errStaleLookup
		}
		keep := claimed[:0:0]
		for _, it := range claimed {
			if s.owner(it.digest, it.number, ref) != nil {
				contested = append(contested, it)
			} else {
				keep = append(keep, it)
			}
		}
		claimed = keep
		if len(claimed) == 0 {
			return nil, contested, time.Time{}, 0, nil
		}
		e := &entry{time: time.Now(), writer: s.writer, items: claimed}
		rand.Read(e.nonce[:])
		slot = lg.end + 1
		started = time.Now()
		created, err := s.create(ctx, s.b.log, slotKey(slot), appendEntry(nil, e))
		if err != nil {
			return nil, nil, time.Time{}, 0, err
		}
		if !created {
			// Someone else's, or ours whose reply was lost: the nonce
			// tells.
			got, err := s.entry(ctx, slot)
			if err != nil {
				return nil, nil, time.Time{}, 0, err
			}
			if got == nil {
				return nil, nil, time.Time{}, 0, fmt.Errorf("ledger slot %d: create refused, yet not found", slot)
			}
			if got.nonce != e.nonce {
				continue // the next round reads it and judges again
			}
			e = got
		} else {
			e.time = e.time.Truncate(time.Millisecond)
			s.entries.add(slot, e)
		}
		lg.end = slot
		lg.fold(slot, e)
		return claimed, contested, started, slot, nil
	}
}

// claimedByOther reads what other writers appended, and reports for each
// item whether its digest has a valid claim at ref by another number.
func (s *Store) claimedByOther(ctx context.Context, its []item, ref time.Time) ([]bool, error) {
	lg := &s.ledger
	lg.mu.Lock()
	defer lg.mu.Unlock()
	if err := s.syncLedger(ctx, 0); err != nil {
		return nil, err
	}
	out := make([]bool, len(its))
	for i, it := range its {
		out[i] = s.owner(it.digest, it.number, ref) != nil
	}
	return out, nil
}

// laterClaims returns, for each item, another number claimed for its
// digest after slot, if any, so a late writer sees whether its messages
// were taken over. It reads the slots rather than the kept claims, which
// a long stall may have pruned.
func (s *Store) laterClaims(ctx context.Context, its []item, slot uint64) ([]callnumber.Number, error) {
	want := make(map[store.Digest][]int, len(its))
	for i, it := range its {
		want[it.digest] = append(want[it.digest], i)
	}
	out := make([]callnumber.Number, len(its))
	const page = 256
	for next := slot + 1; ; {
		es, err := s.entriesFrom(ctx, next, page, math.MaxInt)
		if err != nil {
			return nil, err
		}
		for _, e := range es {
			for _, it := range e.items {
				for _, i := range want[it.digest] {
					if it.number != its[i].number {
						out[i] = it.number
					}
				}
			}
		}
		if len(es) < page {
			return out, nil
		}
		next += page
	}
}
