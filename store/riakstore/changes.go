package riakstore

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/hex"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// The change feed (store.Store.Changes) reads the ledger in slot order.
// A message not stored yet is pending: the cursor remembers it and later
// calls look again, until it appears or its claim expires. Of a
// removal's entries only the one its state names counts, and an entry
// stays pending while the state names none.
//
// A cursor is "L", 8 hex digits naming the archive, ":", the next slot
// and item to read ("12.40"), then for each slot with pending items "~",
// the slot, "." and a bitmap of the pending items in unpadded base64url
// (a removal entry has one item, 0). The empty cursor is slot 1, item 0.

// Bounds of one page, as in the bolt store.
const (
	defaultPageMessages = 100
	maxPageBytes        = 16 << 20
)

type cursor struct {
	slot    uint64 // next slot to read, from 1
	idx     int    // next item of that slot
	pending []pendingSlot
}

type pendingSlot struct {
	slot  uint64
	items []int // sorted
}

// tag names an archive in its cursors, so that a cursor of another
// archive is refused rather than taken for a position.
func tag(archive string) string {
	sum := sha256.Sum256([]byte("chibrary riak feed " + archive))
	return hex.EncodeToString(sum[:4])
}

func (c cursor) format(tag string) store.Cursor {
	if c.slot <= 1 && c.idx == 0 && len(c.pending) == 0 {
		return ""
	}
	var b strings.Builder
	b.WriteString("L" + tag + ":" + strconv.FormatUint(c.slot, 10) + "." + strconv.Itoa(c.idx))
	for _, p := range c.pending {
		bits := make([]byte, p.items[len(p.items)-1]/8+1)
		for _, i := range p.items {
			bits[i/8] |= 1 << (i % 8)
		}
		b.WriteString("~" + strconv.FormatUint(p.slot, 10) + "." + base64.RawURLEncoding.EncodeToString(bits))
	}
	return store.Cursor(b.String())
}

// parseCursor reads a cursor of this archive's feed. It accepts only the
// canonical form format writes, so that no two texts name one position.
func parseCursor(c store.Cursor, tag string) (cursor, error) {
	if c == "" {
		return cursor{slot: 1}, nil
	}
	bad := fmt.Errorf("%w: %q (this Riak archive's cursors start with L%s:)", store.ErrBadCursor, string(c), tag)
	s, ok := strings.CutPrefix(string(c), "L"+tag+":")
	if !ok {
		return cursor{}, bad
	}
	parts := strings.Split(s, "~")
	slotText, idxText, ok := strings.Cut(parts[0], ".")
	if !ok {
		return cursor{}, bad
	}
	slot, err1 := strconv.ParseUint(slotText, 10, 64)
	idx, err2 := strconv.ParseUint(idxText, 10, 31)
	if err1 != nil || err2 != nil || slot < 1 {
		return cursor{}, bad
	}
	cur := cursor{slot: slot, idx: int(idx)}
	for _, p := range parts[1:] {
		slotText, bitsText, ok := strings.Cut(p, ".")
		ps, err1 := strconv.ParseUint(slotText, 10, 64)
		bits, err2 := base64.RawURLEncoding.DecodeString(bitsText)
		if !ok || err1 != nil || err2 != nil || ps < 1 || len(bits) == 0 || len(bits) > 1<<16 {
			return cursor{}, bad
		}
		pend := pendingSlot{slot: ps}
		for i := range 8 * len(bits) {
			if bits[i/8]&(1<<(i%8)) != 0 {
				pend.items = append(pend.items, i)
			}
		}
		if len(pend.items) == 0 || ps > slot || ps == slot && pend.items[len(pend.items)-1] >= cur.idx ||
			len(cur.pending) > 0 && cur.pending[len(cur.pending)-1].slot >= ps {
			return cursor{}, bad
		}
		cur.pending = append(cur.pending, pend)
	}
	if cur.format(tag) != c {
		return cursor{}, bad
	}
	return cur, nil
}

// Changes implements store.Store.
func (s *Store) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	if err := s.begin(); err != nil {
		return store.ChangePage{}, err
	}
	defer s.end()
	page, err := s.changes(ctx, after, max)
	if err != nil {
		return store.ChangePage{}, fmt.Errorf("cannot read the change feed of archive %q after %q: %w", s.b.archive, after, err)
	}
	return page, nil
}

// candidate is an item of the ledger the feed may hand out.
type candidate struct {
	slot uint64
	idx  int
	e    *entry
}

// item is the candidate's item; the entry must not be a removal.
func (c candidate) item() item { return c.e.items[c.idx] }

func (s *Store) changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	t := tag(s.b.archive)
	cur, err := parseCursor(after, t)
	if err != nil {
		return store.ChangePage{}, err
	}
	if max <= 0 {
		max = defaultPageMessages
	}
	nothing := store.ChangePage{Messages: []store.Stored{}, Next: after}
	bd, err := s.binding(ctx)
	if err != nil {
		return store.ChangePage{}, err
	}
	if bd == nil {
		return nothing, nil // nothing was ever stored
	}
	ref := time.Now()
	page := nothing
	size := 0
	full := false
	pending := make(map[uint64][]int)
	// deliver hands out what is stored of cands until the page is full,
	// keeps the rest pending unless surely never stored or since removed,
	// and returns how many candidates it went through.
	deliver := func(cands []candidate) (int, error) {
		var numbers, removals []callnumber.Number
		for _, c := range cands {
			if c.e.removal != 0 {
				removals = append(removals, c.e.removal)
			} else if c.e.move.Number == 0 {
				numbers = append(numbers, c.item().number)
			}
		}
		got, removed, err := s.readMessages(ctx, bd.codec, numbers)
		if err != nil {
			return 0, err
		}
		states, err := s.removalStates(ctx, removals)
		if err != nil {
			return 0, err
		}
		for i, c := range cands {
			if full || page.Len() >= max {
				full = true
				return i, nil
			}
			if c.e.move.Number != 0 {
				page.Moves = append(page.Moves, c.e.move)
				continue
			}
			if c.e.removal != 0 {
				st := states[c.e.removal]
				switch {
				case st == nil:
					return 0, fmt.Errorf("%w: ledger slot %d names a removal of %v that is not recorded", record.ErrCorrupt, c.slot, c.e.removal)
				case st.Slot == c.slot:
					page.Removals = append(page.Removals, st.removal)
				case st.Slot == 0:
					// Its remover has not noted an entry yet, or died
					// first; a second Remove notes one.
					pending[c.slot] = append(pending[c.slot], c.idx)
				}
				// Another entry of the same removal.
				continue
			}
			m, ok := got[c.item().number]
			if ok {
				if len(page.Messages) > 0 && size+len(m.Raw) > maxPageBytes {
					full = true
					return i, nil
				}
				page.Messages = append(page.Messages, m)
				size += len(m.Raw)
				continue
			}
			if _, ok := removed[c.item().number]; ok {
				continue
			}
			keep, err := s.mayAppear(ctx, c, ref)
			if err != nil {
				return 0, err
			}
			if keep {
				pending[c.slot] = append(pending[c.slot], c.idx)
			}
		}
		return len(cands), nil
	}

	// Pending items first: they come from earlier slots.
	var cands []candidate
	for _, p := range cur.pending {
		e, err := s.entry(ctx, p.slot)
		if err != nil {
			return store.ChangePage{}, err
		}
		if e == nil || p.items[len(p.items)-1] >= e.size() {
			return store.ChangePage{}, fmt.Errorf("%w: %q names items of ledger slot %d that do not exist", store.ErrBadCursor, after, p.slot)
		}
		for _, i := range p.items {
			cands = append(cands, candidate{p.slot, i, e})
		}
	}
	done, err := deliver(cands)
	if err != nil {
		return store.ChangePage{}, err
	}
	for _, c := range cands[done:] {
		pending[c.slot] = append(pending[c.slot], c.idx)
	}

	// Then onward from the cursor while the page has room: items not
	// stored yet must not hold back the ones after them.
	pos := candidate{slot: cur.slot, idx: cur.idx}
	for !full && page.Len() < max {
		room := max - page.Len()
		es, err := s.entriesFrom(ctx, pos.slot, 256, room+pos.idx)
		if err != nil {
			return store.ChangePage{}, err
		}
		cands = cands[:0]
		slot, idx := pos.slot, pos.idx
		for _, e := range es {
			if idx > e.size() {
				return store.ChangePage{}, fmt.Errorf("%w: %q points past the end of ledger slot %d", store.ErrBadCursor, after, slot)
			}
			for ; idx < e.size() && len(cands) < room; idx++ {
				cands = append(cands, candidate{slot, idx, e})
			}
			if len(cands) >= room {
				break
			}
			slot, idx = slot+1, 0
		}
		if len(cands) == 0 {
			if len(es) > 0 { // entries without items: step over them
				pos = candidate{slot: pos.slot + uint64(len(es)), idx: 0}
				continue
			}
			break // the end of the ledger
		}
		done, err := deliver(cands)
		if err != nil {
			return store.ChangePage{}, err
		}
		if done < len(cands) {
			pos = candidate{slot: cands[done].slot, idx: cands[done].idx}
			break
		}
		last := cands[len(cands)-1]
		pos = candidate{slot: last.slot, idx: last.idx + 1}
		if pos.idx == last.e.size() {
			pos = candidate{slot: last.slot + 1}
		}
	}
	if page.Empty() {
		// Nothing new: the cursor stays, pending items included.
		return nothing, nil
	}
	next := cursor{slot: pos.slot, idx: pos.idx}
	for slot, items := range pending {
		slices.Sort(items)
		next.pending = append(next.pending, pendingSlot{slot: slot, items: slices.Compact(items)})
	}
	slices.SortFunc(next.pending, func(a, b pendingSlot) int {
		switch {
		case a.slot < b.slot:
			return -1
		case a.slot > b.slot:
			return 1
		}
		return 0
	})
	page.Next = next.format(t)
	return page, nil
}

// mayAppear reports whether an item not stored may still be: its claim
// has not expired. (readMessages asked every replica, and a live writer
// of an expired claim claims again before writing.)
func (s *Store) mayAppear(_ context.Context, c candidate, ref time.Time) (bool, error) {
	return ref.Sub(c.e.time) <= s.expiry(), nil
}
