package imapserve

import (
	"context"
	"errors"
	"slices"
	"sort"
	"strings"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"

	"github.com/chibrary/chibrary/catalog"
)

// view is a session's view of its selected mailbox: the UIDs of the
// messages it was told of, in order, message sequence number i+1 being
// uids[i] (RFC 3501 section 2.3.1.2). It changes only when the client is
// told (EXISTS, EXPUNGE), as IMAP requires.
type view struct {
	list     string
	validity uint32
	// cat is the catalog the view was last brought up to date from: its
	// gone log is the one goneSeq counts in.
	cat  *catalog.Catalog
	uids []uint32
	// high is the highest UID the client may know of (UIDNEXT - 1): a
	// message numbered above it is new.
	high uint32
	// goneSeq is the last entry of the catalog's gone log applied.
	goneSeq int64
	// state is the hub's state when the view was last brought up to
	// date.
	state string
	// readOnly: EXAMINE, where FETCH does not set \Seen.
	readOnly bool
	// flags are the flags the client set with STORE (or FETCH set), by
	// UID: kept for the session only (PERMANENTFLAGS is empty, RFC 3501
	// section 7.1).
	flags map[uint32][]imap.Flag
}

// flagsOf returns a message's flags in this session.
func (v *view) flagsOf(uid uint32) []imap.Flag { return v.flags[uid] }

// hasFlag reports whether the message has flag f in this session.
func (v *view) hasFlag(uid uint32, f imap.Flag) bool {
	for _, g := range v.flags[uid] {
		if strings.EqualFold(string(g), string(f)) {
			return true
		}
	}
	return false
}

// setFlags changes a message's flags and reports whether they changed.
func (v *view) setFlags(uid uint32, op imap.StoreFlagsOp, fs []imap.Flag) bool {
	old := v.flags[uid]
	var next []imap.Flag
	switch op {
	case imap.StoreFlagsSet:
		next = nil
		for _, f := range fs {
			next = addFlag(next, f)
		}
	case imap.StoreFlagsAdd:
		next = slices.Clone(old)
		for _, f := range fs {
			next = addFlag(next, f)
		}
	case imap.StoreFlagsDel:
		next = slices.DeleteFunc(slices.Clone(old), func(g imap.Flag) bool {
			return slices.ContainsFunc(fs, func(f imap.Flag) bool { return strings.EqualFold(string(f), string(g)) })
		})
	}
	if len(next) == 0 {
		delete(v.flags, uid)
	} else {
		if v.flags == nil {
			v.flags = map[uint32][]imap.Flag{}
		}
		v.flags[uid] = next
	}
	return !slices.Equal(old, next)
}

func addFlag(fs []imap.Flag, f imap.Flag) []imap.Flag {
	if slices.ContainsFunc(fs, func(g imap.Flag) bool { return strings.EqualFold(string(f), string(g)) }) {
		return fs
	}
	return append(fs, f)
}

// load reads the view of a list: the gone log's end first, then the
// mailbox's next number, then the numbers, so that a message that comes
// or goes meanwhile is seen by the next refresh and none is missed.
func load(ctx context.Context, c *catalog.Catalog, list, state string) (*view, catalog.Mailbox, error) {
	_, lastGone, err := c.NumbersState(ctx)
	if err != nil {
		return nil, catalog.Mailbox{}, err
	}
	b, err := c.Mailbox(ctx, list)
	if err != nil {
		return nil, catalog.Mailbox{}, err
	}
	uids, err := c.Numbers(ctx, list, 1)
	if err != nil {
		return nil, catalog.Mailbox{}, err
	}
	v := &view{list: list, cat: c, validity: b.Validity, uids: uids, high: b.Next - 1, goneSeq: lastGone, state: state}
	if n := len(uids); n > 0 {
		v.high = max(v.high, uids[n-1])
	}
	return v, b, nil
}

// uidNext is the UIDNEXT the client is told.
func (v *view) uidNext() imap.UID { return imap.UID(v.high + 1) }

// refresh tells the client of the messages that left (EXPUNGE, only when
// allowExpunge: not during FETCH, STORE and SEARCH, RFC 3501 section 7.4.1)
// and came (EXISTS), or returns errRenumbered if UIDVALIDITY changed.
func (v *view) refresh(ctx context.Context, c *catalog.Catalog, w *imapserver.UpdateWriter, allowExpunge bool, state string) error {
	if c != v.cat {
		return v.resync(ctx, c, w, allowExpunge, state)
	}
	if state == v.state {
		return nil
	}
	b, err := c.Mailbox(ctx, v.list)
	if err != nil {
		return err
	}
	if b.Validity != v.validity {
		return errRenumbered
	}
	done := true
	if allowExpunge {
		for {
			gone, err := c.GoneSince(ctx, v.goneSeq, 1000)
			if err != nil {
				return err
			}
			for _, g := range gone {
				v.goneSeq = g.Seq
				if g.List != v.list {
					continue
				}
				i, ok := slices.BinarySearch(v.uids, g.Num)
				if !ok {
					continue // never told of it
				}
				v.uids = slices.Delete(v.uids, i, i+1)
				if err := w.WriteExpunge(uint32(i + 1)); err != nil {
					return err
				}
			}
			if len(gone) < 1000 {
				break
			}
		}
	} else {
		done = false // the gone log is read at the next chance
	}
	if b.Next-1 > v.high {
		fresh, err := c.Numbers(ctx, v.list, v.high+1)
		if err != nil {
			return err
		}
		v.high = b.Next - 1
		if len(fresh) > 0 {
			v.uids = append(v.uids, fresh...)
			v.high = max(v.high, fresh[len(fresh)-1])
			if err := w.WriteNumMessages(uint32(len(v.uids))); err != nil {
				return err
			}
		}
	}
	if done {
		v.state = state
	}
	return nil
}

// sameNumbers reports whether c numbers the view's list as the view's
// catalog did (the same UIDVALIDITY): a catalog rebuilt from the old one
// carries its numbers over, one built anew does not.
func (v *view) sameNumbers(ctx context.Context, c *catalog.Catalog) (bool, error) {
	if c == v.cat {
		return true, nil
	}
	b, err := c.Mailbox(ctx, v.list)
	if errors.Is(err, catalog.ErrNotFound) {
		return false, nil
	}
	if err != nil {
		return false, err
	}
	return b.Validity == v.validity, nil
}

// resync brings the view up to date from c, a catalog other than its
// own (the keeper swapped in a rebuilt one): its gone log is another, so
// the view's UIDs are compared with c's instead. It returns errRenumbered
// if c numbers the list anew. Without allowExpunge it waits for a call
// with it.
func (v *view) resync(ctx context.Context, c *catalog.Catalog, w *imapserver.UpdateWriter, allowExpunge bool, state string) error {
	same, err := v.sameNumbers(ctx, c)
	if err != nil {
		return err
	}
	if !same {
		return errRenumbered
	}
	if !allowExpunge {
		return nil
	}
	// The gone log's end first, then the numbers: what leaves meanwhile
	// is in the log after it, and found gone (or not told of) then.
	_, lastGone, err := c.NumbersState(ctx)
	if err != nil {
		return err
	}
	b, err := c.Mailbox(ctx, v.list)
	if err != nil {
		return err
	}
	now, err := c.Numbers(ctx, v.list, 1)
	if err != nil {
		return err
	}
	for i := 0; i < len(v.uids); {
		if _, ok := slices.BinarySearch(now, v.uids[i]); ok {
			i++
			continue
		}
		v.uids = slices.Delete(v.uids, i, i+1)
		if err := w.WriteExpunge(uint32(i + 1)); err != nil {
			return err
		}
	}
	// New messages are above the highest UID the client knows; a number
	// at or below it that the client was not told of cannot be announced
	// (UIDs only grow) and is left out until the list is selected again.
	i, _ := slices.BinarySearch(now, v.high+1)
	if fresh := now[i:]; len(fresh) > 0 {
		v.uids = append(v.uids, fresh...)
		v.high = fresh[len(fresh)-1]
		if err := w.WriteNumMessages(uint32(len(v.uids))); err != nil {
			return err
		}
	}
	v.high = max(v.high, b.Next-1)
	v.cat, v.goneSeq, v.state = c, lastGone, state
	return nil
}

// span is a run of message sequence numbers lo..hi, both included,
// from 1.
type span struct{ lo, hi uint32 }

// spans returns the sequence numbers of the messages in set, in order,
// without repeats. "*" is the last message; a range past the end stops
// at the last message (so "n:*" always holds it, as RFC 3501 section
// 6.4.8 has it for UIDs); numbers of no message are left out.
func (v *view) spans(set imap.NumSet) []span {
	n := uint32(len(v.uids))
	if n == 0 {
		return nil
	}
	var out []span
	switch set := set.(type) {
	case imap.SeqSet:
		for _, r := range set {
			lo, hi := r.Start, r.Stop
			if lo == 0 {
				lo = n
			}
			if hi == 0 {
				hi = n
			}
			if lo > hi {
				lo, hi = hi, lo
			}
			if lo > n {
				continue
			}
			out = append(out, span{lo, min(hi, n)})
		}
	case imap.UIDSet:
		if imap.IsSearchRes(set) {
			return nil // SEARCHRES is not offered
		}
		last := v.uids[n-1]
		for _, r := range set {
			lo, hi := uint32(r.Start), uint32(r.Stop)
			if lo == 0 {
				lo = last
			}
			if hi == 0 {
				hi = last
			}
			if lo > hi {
				lo, hi = hi, lo
			}
			i := sort.Search(int(n), func(i int) bool { return v.uids[i] >= lo })
			j := sort.Search(int(n), func(i int) bool { return v.uids[i] > hi })
			if i < j {
				out = append(out, span{uint32(i + 1), uint32(j)})
			}
		}
	}
	return merge(out)
}

// merge sorts spans and joins those that overlap or touch.
func merge(s []span) []span {
	slices.SortFunc(s, func(a, b span) int {
		switch {
		case a.lo < b.lo:
			return -1
		case a.lo > b.lo:
			return 1
		}
		return 0
	})
	var out []span
	for _, x := range s {
		if k := len(out) - 1; k >= 0 && x.lo <= out[k].hi+1 {
			out[k].hi = max(out[k].hi, x.hi)
			continue
		}
		out = append(out, x)
	}
	return out
}

// intersect returns the sequence numbers in both a and b (each sorted,
// without overlaps).
func intersect(a, b []span) []span {
	var out []span
	for i, j := 0, 0; i < len(a) && j < len(b); {
		lo, hi := max(a[i].lo, b[j].lo), min(a[i].hi, b[j].hi)
		if lo <= hi {
			out = append(out, span{lo, hi})
		}
		if a[i].hi < b[j].hi {
			i++
		} else {
			j++
		}
	}
	return out
}
