package imapserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"mime"
	"slices"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-message/textproto"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailwire"
)

var errSearchTooLong = &imap.Error{
	Type: imap.StatusResponseTypeNo,
	Code: imap.ResponseCodeLimit,
	Text: "The search took too long: search the message text (TEXT, BODY) or Subject and From, which the index answers",
}

// Search answers SEARCH and UID SEARCH (RFC 3501 section 6.4.4) from the
// catalog rows, TEXT and BODY from the full-text index (words, the last a
// prefix, not the substrings IMAP describes); only headers other than
// Subject, From and Message-ID read the store, within SearchTimeout.
func (ss *session) Search(kind imapserver.NumKind, criteria *imap.SearchCriteria, options *imap.SearchOptions) (*imap.SearchData, error) {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v := ss.mbox
	if v == nil {
		return nil, nil
	}
	done, err := ss.holdView(v)
	if err != nil {
		return nil, ss.count("SEARCH", err)
	}
	defer done()
	ctx, cancel := context.WithTimeout(ss.ctx, ss.s.opts.SearchTimeout)
	defer cancel()
	sr := &searcher{ss: ss, ctx: ctx, v: v, texts: map[string][]uint32{}}
	if err := sr.prepare(criteria); err != nil {
		return nil, ss.count("SEARCH", ss.storeErr("search", err))
	}
	spans := []span{{1, uint32(len(v.uids))}}
	if len(v.uids) == 0 {
		spans = nil
	}
	// The sets a search is limited to narrow what is read.
	for _, s := range criteria.SeqNum {
		spans = intersect(spans, v.spans(s))
	}
	for _, s := range criteria.UID {
		spans = intersect(spans, v.spans(s))
	}
	var (
		uids imap.UIDSet
		seqs imap.SeqSet
		data imap.SearchData
	)
	err = ss.eachEntry(v, spans, func(es []catalog.Entry, seqNums []uint32) error {
		for i := range es {
			m := &candidate{e: &es[i], seq: seqNums[i]}
			ok, err := sr.match(m, criteria)
			if err != nil {
				return err
			}
			if !ok {
				continue
			}
			data.Count++
			if data.Min == 0 {
				data.Min = pick(kind, m)
			}
			data.Max = pick(kind, m)
			if kind == imapserver.NumKindUID {
				uids.AddNum(imap.UID(m.e.Num))
			} else {
				seqs.AddNum(m.seq)
			}
		}
		return nil
	})
	if errors.Is(err, context.DeadlineExceeded) && ss.ctx.Err() == nil {
		return nil, ss.count("SEARCH", errSearchTooLong)
	}
	if err != nil {
		return nil, ss.count("SEARCH", ss.storeErr("search", err))
	}
	data.All = seqs
	if kind == imapserver.NumKindUID {
		data.All = uids
	}
	return &data, ss.count("SEARCH", nil)
}

func pick(kind imapserver.NumKind, m *candidate) uint32 {
	if kind == imapserver.NumKindUID {
		return m.e.Num
	}
	return m.seq
}

// searcher evaluates one search's criteria.
type searcher struct {
	ss  *session
	ctx context.Context
	v   *view
	// texts are the numbers of the messages with each TEXT or BODY
	// string ("T:" or "B:" before it), sorted; nil matches every
	// message, for a string the index cannot look for.
	texts map[string][]uint32
}

// candidate is a message being matched; its header is read once, when a
// criterion needs it.
type candidate struct {
	e      *catalog.Entry
	seq    uint32
	header *textproto.Header
}

// prepare looks up every TEXT and BODY string of c in the full-text index.
func (sr *searcher) prepare(c *imap.SearchCriteria) error {
	look := func(prefix, s string, body bool) error {
		key := prefix + s
		if _, ok := sr.texts[key]; ok {
			return nil
		}
		if err := searchable(s); err != nil {
			return err
		}
		q := textQuery(s, body)
		if q == nil {
			sr.texts[key] = nil
			return nil
		}
		nums, err := sr.ss.cat.SearchNumbers(sr.ctx, sr.v.list, q)
		if err != nil {
			return err
		}
		sr.texts[key] = nums
		return nil
	}
	for _, s := range c.Text {
		if err := look("T:", s, false); err != nil {
			return err
		}
	}
	for _, s := range c.Body {
		if err := look("B:", s, true); err != nil {
			return err
		}
	}
	for i := range c.Not {
		if err := sr.prepare(&c.Not[i]); err != nil {
			return err
		}
	}
	for i := range c.Or {
		if err := sr.prepare(&c.Or[i][0]); err != nil {
			return err
		}
		if err := sr.prepare(&c.Or[i][1]); err != nil {
			return err
		}
	}
	return nil
}

// searchable says why the index cannot answer a TEXT or BODY string: one
// that is not UTF-8 (RFC 3501 section 6.4.4: the charset, UTF-8 or
// US-ASCII here, says what its bytes are), or one not empty without a
// word (catalog.HasWord), which the index, of words, cannot find. Matching
// every message, or none, would be a wrong answer given as a right one.
func searchable(s string) error {
	if !utf8.ValidString(s) {
		return &imap.Error{Type: imap.StatusResponseTypeBad, Code: imap.ResponseCodeClientBug, Text: "A search string is not UTF-8"}
	}
	if s != "" && !catalog.HasWord(s) {
		return &imap.Error{Type: imap.StatusResponseTypeNo, Code: imap.ResponseCodeCannot,
			Text: fmt.Sprintf("The archive searches the text for words: %q has none", s)}
	}
	return nil
}

// textQuery is the catalog query of a TEXT (or, body, BODY) string: its
// words as a phrase, the last one a prefix; nil for the empty string,
// which every message has (searchable turns away the others without a
// word).
func textQuery(s string, body bool) *catalog.Query {
	if !catalog.HasWord(s) {
		return nil
	}
	t := catalog.Term{Text: s, Phrase: true, Prefix: true}
	if body {
		t.Field = "body"
	}
	return &catalog.Query{Terms: []catalog.Term{t}}
}

// match reports whether m matches every criterion of c.
func (sr *searcher) match(m *candidate, c *imap.SearchCriteria) (bool, error) {
	e := m.e
	for _, s := range c.SeqNum {
		if !sr.inSet(s, m) {
			return false, nil
		}
	}
	for _, s := range c.UID {
		if !sr.inSet(s, m) {
			return false, nil
		}
	}
	// Dates: the date alone, the time and the zone disregarded.
	day := dayOf(e.Date)
	if !c.Since.IsZero() && day.Before(dayOf(c.Since)) || !c.SentSince.IsZero() && day.Before(dayOf(c.SentSince)) {
		return false, nil
	}
	if !c.Before.IsZero() && !day.Before(dayOf(c.Before)) || !c.SentBefore.IsZero() && !day.Before(dayOf(c.SentBefore)) {
		return false, nil
	}
	if c.Larger > 0 && e.WireSize <= c.Larger || c.Smaller > 0 && e.WireSize >= c.Smaller {
		return false, nil
	}
	for _, f := range c.Flag {
		if !sr.v.hasFlag(e.Num, f) {
			return false, nil
		}
	}
	for _, f := range c.NotFlag {
		if sr.v.hasFlag(e.Num, f) {
			return false, nil
		}
	}
	for _, s := range c.Text {
		if !has(sr.texts["T:"+s], e.Num) {
			return false, nil
		}
	}
	for _, s := range c.Body {
		if !has(sr.texts["B:"+s], e.Num) {
			return false, nil
		}
	}
	for _, h := range c.Header {
		ok, err := sr.header(m, h)
		if err != nil || !ok {
			return false, err
		}
	}
	for i := range c.Not {
		ok, err := sr.match(m, &c.Not[i])
		if err != nil || ok {
			return false, err
		}
	}
	for i := range c.Or {
		ok, err := sr.match(m, &c.Or[i][0])
		if err != nil {
			return false, err
		}
		if !ok {
			if ok, err = sr.match(m, &c.Or[i][1]); err != nil || !ok {
				return false, err
			}
		}
	}
	if c.ModSeq != nil {
		return false, nil // CONDSTORE is not offered
	}
	return true, nil
}

func (sr *searcher) inSet(s imap.NumSet, m *candidate) bool {
	for _, sp := range sr.v.spans(s) {
		if m.seq >= sp.lo && m.seq <= sp.hi {
			return true
		}
	}
	return false
}

func dayOf(t time.Time) time.Time {
	y, mo, d := t.Date()
	return time.Date(y, mo, d, 0, 0, 0, 0, time.UTC)
}

// has reports whether sorted holds n; a nil sorted holds everything.
func has(sorted []uint32, n uint32) bool {
	if sorted == nil {
		return true
	}
	_, ok := slices.BinarySearch(sorted, n)
	return ok
}

// header matches a header criterion: Subject, From and Message-ID from
// the catalog row, any other by reading the message's header.
func (sr *searcher) header(m *candidate, h imap.SearchCriteriaHeaderField) (bool, error) {
	switch strings.ToLower(h.Key) {
	case "subject":
		return contains(m.e.Subject, h.Value), nil
	case "from":
		return contains(m.e.From(), h.Value), nil
	case "message-id":
		if m.e.MessageID == "" {
			return false, nil
		}
		return contains("<"+m.e.MessageID+">", h.Value), nil
	}
	if m.header == nil {
		if err := sr.ctx.Err(); err != nil {
			return false, err
		}
		n, err := callnumber.Parse(m.e.CallNumber)
		if err != nil {
			return false, err
		}
		st, err := sr.ss.s.st.Get(sr.ctx, n)
		if err != nil {
			return false, err
		}
		raw := st.Raw[:mailwire.BodyStart(st.Raw)]
		hdr, _ := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw)))
		m.header = &hdr
	}
	values := m.header.Values(h.Key)
	if len(values) == 0 {
		return false, nil
	}
	for _, v := range values {
		if contains(v, h.Value) {
			return true, nil
		}
		if d, err := (&mime.WordDecoder{}).DecodeHeader(v); err == nil && contains(d, h.Value) {
			return true, nil
		}
	}
	return false, nil
}

// contains is IMAP's match: a substring, case ignored.
func contains(s, sub string) bool {
	return strings.Contains(strings.ToLower(s), strings.ToLower(sub))
}
