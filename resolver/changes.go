package resolver

import (
	"compress/gzip"
	"context"
	"crypto/subtle"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/klauspost/compress/zstd"
	"github.com/prometheus/client_golang/prometheus"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/store"
)

// Bounds of GET /api/v1/changes: a page of the store's feed at a time is
// in memory, whatever the limit asked.
const (
	// DefaultChangesLimit and MaxChangesLimit bound the messages and
	// removals of one answer (?limit=N).
	DefaultChangesLimit = 1000
	MaxChangesLimit     = 10000
	// maxChangesBytes ends an answer early once its messages add up to
	// this many bytes (it holds at least one page of the store's feed).
	maxChangesBytes = 64 << 20
	// MaxChangesWait bounds a long poll (?wait=SECONDS): an answer with
	// nothing new waits that long for something.
	MaxChangesWait = 60 * time.Second
	// DefaultChangesClients is how many answers are written at once to
	// token holders, and as many to anonymous readers (feedGate); more
	// are told to come back (503).
	DefaultChangesClients = 4
	// changesPage is how many entries one read of the store's feed asks.
	changesPage = 500
	// changesPoll is how often a long poll looks at the store's feed.
	changesPoll = 250 * time.Millisecond
	// changesPath is the feed's route, which readers' requests are not.
	changesPath = "/api/v1/changes"

	// While readers ask for pages, an answer works for feedBurst at a
	// time, then rests feedRest times as long: a mirror catching up takes
	// a twentieth of a core from them. With no reader for feedQuiet, it
	// works without rest.
	feedBurst = time.Millisecond
	feedRest  = 19
	feedQuiet = 250 * time.Millisecond
)

// reader reports whether a request for path is a reader's: anything but
// the change feed, and the health checks and metrics scrapes that
// monitoring sends every few seconds.
func reader(path string) bool {
	return path != changesPath && path != "/healthz" && path != "/metrics"
}

// readers follows the readers' requests (reader): how many are in flight,
// and when the last one came.
type readers struct {
	inFlight atomic.Int64
	last     atomic.Int64 // UnixNano of the last one's start
}

// enter counts a request in until the function it returns is called.
func (rd *readers) enter() func() {
	rd.last.Store(time.Now().UnixNano())
	rd.inFlight.Add(1)
	return func() { rd.inFlight.Add(-1) }
}

// busy reports whether a reader is being served or came in the last
// feedQuiet.
func (rd *readers) busy(now time.Time) bool {
	return rd.inFlight.Load() > 0 || now.UnixNano()-rd.last.Load() < int64(feedQuiet)
}

// pacer keeps a change feed answer from slowing the pages readers ask
// for: while they do, the answer rests after every feedBurst of work.
type pacer struct {
	readers *readers
	worked  time.Time // when the current burst of work began
	rested  prometheus.Counter
}

// step is called after each entry written. Once the burst is over and
// readers are busy, it flushes what was written (so the mirror has it
// while the answer rests) and rests; it returns ctx's error if ctx ends
// first.
func (p *pacer) step(ctx context.Context, flush func() error) error {
	now := time.Now()
	work := now.Sub(p.worked)
	if work < feedBurst {
		return nil
	}
	if !p.readers.busy(now) {
		p.worked = now
		return nil
	}
	if err := flush(); err != nil {
		return err
	}
	t := time.NewTimer(min(feedRest*work, time.Second))
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
	}
	p.worked = time.Now()
	p.rested.Add(p.worked.Sub(now).Seconds())
	return nil
}

// feedGate admits change feed requests. Token holders (the mirrors given
// --changes-token-file) and anonymous readers have slots apart, so that
// anonymous readers, however many, never shut a token holder out. A slot
// is held while a page of the store's feed is read and while the answer
// is written, not while a long poll waits for something new: four
// waiting pollers do not hold the four slots. Anonymous requests in
// flight, waiting or not, are bounded per address and in all, since each
// reads the store's feed every changesPoll.
type feedGate struct {
	holders, anonymous chan struct{}
	perAddress, most   int

	mu       sync.Mutex
	inFlight map[string]int // anonymous requests per address
	total    int
}

// Bounds of anonymous change feed requests in flight, waiting or not.
const (
	// DefaultChangesPerAddress is how many one address may have: a
	// mirror asks one answer at a time.
	DefaultChangesPerAddress = 2
	// DefaultChangesAnonymous is how many all addresses together may
	// have; each costs a read of the store's feed every changesPoll.
	DefaultChangesAnonymous = 64
)

func newFeedGate(slots int) *feedGate {
	return &feedGate{
		holders:    make(chan struct{}, slots),
		anonymous:  make(chan struct{}, slots),
		perAddress: DefaultChangesPerAddress,
		most:       DefaultChangesAnonymous,
		inFlight:   make(map[string]int),
	}
}

// errGateAddress and errGateFull say why an anonymous request was not let in.
var (
	errGateAddress = errors.New("too many change feed requests from this address")
	errGateFull    = errors.New("too many anonymous change feed requests")
)

// enter counts an anonymous request from addr in until the function it
// returns is called.
func (g *feedGate) enter(addr string) (func(), error) {
	g.mu.Lock()
	defer g.mu.Unlock()
	switch {
	case g.inFlight[addr] >= g.perAddress:
		return nil, errGateAddress
	case g.total >= g.most:
		return nil, errGateFull
	}
	g.inFlight[addr]++
	g.total++
	return func() {
		g.mu.Lock()
		defer g.mu.Unlock()
		g.total--
		if g.inFlight[addr]--; g.inFlight[addr] <= 0 {
			delete(g.inFlight, addr)
		}
	}, nil
}

// slots returns the slots of a token holder or of an anonymous reader.
func (g *feedGate) slots(holder bool) chan struct{} {
	if holder {
		return g.holders
	}
	return g.anonymous
}

// remoteHost is the address a request came from, without its port.
func remoteHost(r *http.Request) string {
	if h, _, err := net.SplitHostPort(r.RemoteAddr); err == nil {
		return h
	}
	return r.RemoteAddr
}

// changesFeed serves GET /api/v1/changes?after=CURSOR[&limit=N][&wait=S]:
// the store's change feed after CURSOR (empty: from the start) in the
// format of package changes, for mirrors. The answer is streamed, page by
// page of the store's feed, compressed with zstd or gzip as the client
// accepts; nothing is rendered.
func (s *Server) changesFeed(w http.ResponseWriter, r *http.Request) {
	holder := false
	if s.opts.ChangesToken != "" {
		got, given := strings.CutPrefix(r.Header.Get("Authorization"), "Bearer ")
		holder = given && subtle.ConstantTimeCompare([]byte(got), []byte(s.opts.ChangesToken)) == 1
		// A wrong token is said even on a public feed: the mirror that
		// sends it would otherwise lose its slots without knowing why.
		if !holder && (given || !s.opts.ChangesPublic) {
			w.Header().Set("WWW-Authenticate", `Bearer realm="chibrary changes"`)
			s.fail(w, r, http.StatusUnauthorized, "This archive's change feed needs a token (Authorization: Bearer TOKEN).")
			return
		}
	}
	q := r.URL.Query()
	after := store.Cursor(q.Get("after"))
	limit := DefaultChangesLimit
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			s.fail(w, r, http.StatusBadRequest, "limit is a number of records, 1 or more.")
			return
		}
		limit = min(n, MaxChangesLimit)
	}
	var wait time.Duration
	if v := q.Get("wait"); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 0 {
			s.fail(w, r, http.StatusBadRequest, "wait is a number of seconds.")
			return
		}
		wait = min(time.Duration(n)*time.Second, MaxChangesWait)
	}
	if !holder {
		leave, err := s.feedGate.enter(remoteHost(r))
		switch {
		case errors.Is(err, errGateAddress):
			w.Header().Set("Retry-After", "5")
			s.fail(w, r, http.StatusTooManyRequests, fmt.Sprintf("Your address already has %d requests of the change feed open; one at a time is enough for a mirror.", s.feedGate.perAddress))
			return
		case err != nil:
			w.Header().Set("Retry-After", "5")
			s.fail(w, r, http.StatusServiceUnavailable, "Too many anonymous readers are reading the change feed; come back in a few seconds.")
			return
		}
		defer leave()
	}
	ctx := r.Context()
	b, err := s.st.Binding(ctx)
	if errors.Is(err, store.ErrUnbound) {
		w.Header().Set("Retry-After", "60")
		s.fail(w, r, http.StatusServiceUnavailable, "This archive holds no message yet.")
		return
	}
	if err != nil {
		s.failStore(w, r, err)
		return
	}
	// The first page, before anything is written: a bad cursor is 400,
	// and a long poll waits for it, holding a slot only while it reads.
	slots := s.feedGate.slots(holder)
	var page store.ChangePage
	deadline := time.Now().Add(wait)
	for {
		select {
		case slots <- struct{}{}:
		default:
			w.Header().Set("Retry-After", "5")
			s.fail(w, r, http.StatusServiceUnavailable, "Too many mirrors are reading the change feed; come back in a few seconds.")
			return
		}
		page, err = s.st.Changes(ctx, after, min(limit, changesPage))
		if err != nil || !page.Empty() || !time.Now().Before(deadline) {
			break
		}
		<-slots
		t := time.NewTimer(min(changesPoll, time.Until(deadline)))
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		}
	}
	defer func() { <-slots }()
	if errors.Is(err, store.ErrBadCursor) {
		s.fail(w, r, http.StatusBadRequest, "Not a cursor of this archive's change feed: start again with an empty one (after=).")
		return
	}
	if err != nil {
		s.failStore(w, r, err)
		return
	}

	h := w.Header()
	h.Set("Content-Type", changes.ContentType)
	h.Set("Cache-Control", "no-store")
	h.Add("Vary", "Accept-Encoding")
	body, closeBody := compressed(w, r.Header.Get("Accept-Encoding"))
	rc := http.NewResponseController(w)
	// A long answer to a slow mirror may outlast the server's write
	// timeout: each page gets a minute of its own.
	rc.SetWriteDeadline(time.Now().Add(time.Minute))
	fw, err := changes.NewWriter(body, b)
	if err != nil {
		s.log.Error("cannot write the change feed", "err", err)
		return
	}
	sent, size := 0, 0
	leases := map[uint32]bool{}
	cursor := after
	abort := func(err error) {
		if !errors.Is(err, context.Canceled) {
			s.log.Warn("change feed answer cut short", "after", string(after), "err", err)
		}
	}
	// A mirror catching up gives way to readers (pacer); the answer is
	// flushed after every page of the store's feed.
	pace := pacer{readers: &s.readers, worked: time.Now(), rested: s.feedRested}
	flush := fw.Flush
	for {
		for _, m := range page.Messages {
			if err := s.writeLease(ctx, fw, leases, m.Number); err != nil {
				abort(err)
				return
			}
			if err := fw.Message(m); err != nil {
				abort(err)
				return
			}
			size += len(m.Raw)
			if err := pace.step(ctx, flush); err != nil {
				abort(err)
				return
			}
		}
		for _, mv := range page.Moves {
			if err := s.writeLease(ctx, fw, leases, mv.Number); err != nil {
				abort(err)
				return
			}
			if err := fw.Move(mv); err != nil {
				abort(err)
				return
			}
		}
		for _, rm := range page.Removals {
			if err := s.writeLease(ctx, fw, leases, rm.Number); err != nil {
				abort(err)
				return
			}
			if err := fw.Removal(rm); err != nil {
				abort(err)
				return
			}
		}
		sent += page.Len()
		cursor = page.Next
		if page.Empty() || sent >= limit || size >= maxChangesBytes {
			break
		}
		if err := flush(); err != nil {
			abort(err)
			return
		}
		rc.SetWriteDeadline(time.Now().Add(time.Minute))
		if page, err = s.st.Changes(ctx, cursor, min(limit-sent, changesPage)); err != nil {
			abort(err)
			return
		}
	}
	if err := fw.End(cursor, !page.Empty()); err != nil {
		abort(err)
		return
	}
	if err := closeBody(); err != nil {
		abort(err)
	}
}

// writeLease writes the lease of n's run unless the answer has it.
func (s *Server) writeLease(ctx context.Context, fw *changes.Writer, written map[uint32]bool, n callnumber.Number) error {
	codec, err := s.codecs.get(ctx)
	if err != nil {
		return err
	}
	f, err := codec.Decode(n)
	if err != nil {
		return fmt.Errorf("cannot decode %v: %w", n, err)
	}
	if written[f.Run] {
		return nil
	}
	l, err := s.st.Lease(ctx, f.Run)
	if err != nil {
		return err
	}
	written[f.Run] = true
	return fw.Lease(l)
}

// compressed returns the body to write, compressed as the client accepts
// (zstd, then gzip), and what ends it.
func compressed(w http.ResponseWriter, accept string) (io.Writer, func() error) {
	accepts := func(enc string) bool {
		for _, part := range strings.Split(accept, ",") {
			name, params, _ := strings.Cut(strings.TrimSpace(part), ";")
			if !strings.EqualFold(strings.TrimSpace(name), enc) {
				continue
			}
			if v, ok := strings.CutPrefix(strings.ReplaceAll(params, " ", ""), "q="); ok {
				if q, err := strconv.ParseFloat(v, 64); err != nil || q == 0 {
					return false
				}
			}
			return true
		}
		return false
	}
	switch {
	case accepts("zstd"):
		w.Header().Set("Content-Encoding", "zstd")
		zw, err := zstd.NewWriter(w, zstd.WithEncoderLevel(zstd.SpeedFastest), zstd.WithEncoderConcurrency(1), zstd.WithWindowSize(1<<20))
		if err == nil {
			return zw, zw.Close
		}
		w.Header().Del("Content-Encoding")
	case accepts("gzip"):
		w.Header().Set("Content-Encoding", "gzip")
		gw, _ := gzip.NewWriterLevel(w, gzip.BestSpeed)
		return gw, gw.Close
	}
	return w, func() error { return nil }
}
