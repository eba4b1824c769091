// Package mirror follows another archive's change feed (GET
// /api/v1/changes, package changes) into a store of its own: the same
// messages under the same call numbers and leases, removals and moves, so
// that the mirror serves every URL of the origin.
//
// The origin is untrusted: every message's digest is checked, its size
// bounded, its call number decoded under the origin's authority and its
// run's lease recorded first; the store refuses what does not fit, and the
// mirror stops rather than store anything wrongly. The cursor is saved only
// once everything before it is durably stored.
package mirror

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"mime"
	"net"
	"net/http"
	"net/url"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"compress/gzip"
	"github.com/klauspost/compress/zstd"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/store"
)

// Defaults of Options.
const (
	DefaultWait = 30 * time.Second
	// DefaultLimit is the origin's own default: the cursor, kept once an
	// answer ends, moves on every 1,000 records, about a second's work
	// for an origin whose readers keep it busy (its feed gives way to them).
	DefaultLimit         = 1000
	DefaultBatchMessages = 500
	DefaultBatchBytes    = 8 << 20
	DefaultMinBackoff    = time.Second
	DefaultMaxBackoff    = time.Minute
	// DefaultOnceAttempts is how many times CatchUp retries a passing failure.
	DefaultOnceAttempts = 8
	// OnceStalls is how many stalled answers (ErrStalled) CatchUp takes
	// before it gives up: each cost ReadTimeout already.
	OnceStalls = 2
	// DefaultReadTimeout is how long one read of an answer's body may
	// wait for a byte: the origin rests a second at most between bursts
	// of work, and reads a page of its store in well under a minute.
	DefaultReadTimeout = time.Minute
	// DefaultMaxRemovals is how many messages held here one answer may
	// remove unless Options.AcceptMassRemoval.
	DefaultMaxRemovals = 100
	// MaxClockSkew is how far in the future a removal may be dated: the
	// origin's clock may be a little ahead of the mirror's.
	MaxClockSkew = 15 * time.Minute
	// stepLeases bounds the leases read before they are handed on.
	stepLeases = 256
)

// ErrOrigin: the origin sent something damaged, inconsistent, or against
// what the mirror holds. The mirror stops; nothing wrong was stored.
var ErrOrigin = errors.New("mirror: the origin's change feed cannot be mirrored")

// ErrMassRemoval: an answer removes more messages held here than
// Options.MaxRemovals. None of its removals was applied; the mirror stops
// until told to accept them (Options.AcceptMassRemoval). It wraps ErrOrigin.
var ErrMassRemoval = fmt.Errorf("%w: a mass removal", ErrOrigin)

// ErrNotFeed: the origin's URL answers something that is not a change
// feed (a web page: not an archive's base URL). It wraps ErrOrigin.
var ErrNotFeed = fmt.Errorf("%w: not a change feed", ErrOrigin)

// ErrStalled: the origin sent nothing for Options.ReadTimeout in the
// middle of an answer. A passing failure: the mirror asks again.
var ErrStalled = errors.New("mirror: the origin stalled")

// Options configure a Mirror.
type Options struct {
	// From is the origin's base URL (https://lists.example.org/). Required.
	From string
	// Token, if set, is sent as a bearer token (an origin's private feed).
	Token string
	// Store receives the messages and the removals. Required.
	Store store.Store
	// StatePath is the file that keeps the cursor. Required.
	StatePath string
	// Client makes the requests; nil is a client with sane timeouts.
	Client *http.Client
	// Logger receives what the mirror does; nil discards it.
	Logger *slog.Logger
	// Metrics are updated as the mirror works; nil records nothing.
	Metrics *Metrics
	// Progress, if set, is called after each answer of the origin.
	Progress func(Stats)
	// Wait is how long a request long-polls once caught up (0: DefaultWait).
	Wait time.Duration
	// Limit bounds the records of one answer; zero is DefaultLimit.
	Limit int
	// BatchMessages and BatchBytes bound one Put; zero is the defaults.
	BatchMessages, BatchBytes int
	// MinBackoff and MaxBackoff bound the pause after a passing failure.
	MinBackoff, MaxBackoff time.Duration
	// MaxMessage is the largest message taken; zero is 64 MiB.
	MaxMessage int64
	// ReadTimeout bounds each read of an answer's body: an origin that
	// sends nothing for that long is given up (ErrStalled, and asked
	// again). The deadline moves with every byte received; time spent
	// storing does not count. Zero is DefaultReadTimeout.
	ReadTimeout time.Duration
	// MaxRemovals bounds how many messages held here one answer may
	// remove; zero is DefaultMaxRemovals. An answer that removes more is
	// refused whole (ErrMassRemoval), none of its removals applied.
	// Removals of messages never held here (a new mirror catching up)
	// do not count.
	MaxRemovals int
	// AcceptMassRemoval applies every removal the origin sends, however
	// many in one answer: an origin that removed many messages on
	// purpose (a spam wave).
	AcceptMassRemoval bool
	// Now is the clock removal dates are checked against; nil is time.Now.
	Now func() time.Time
}

// Stats say what a mirror did.
type Stats struct {
	Messages int64 // messages received (new or not)
	New      int64 // of which stored here now
	Removals int64
	Moves    int64
	Bytes    int64
	// CaughtUp says the origin had nothing more at the last answer.
	CaughtUp bool
}

// Mirror follows one origin into one store.
type Mirror struct {
	opts  Options
	log   *slog.Logger
	base  *url.URL
	state State
	stats Stats
}

// State is what the state file keeps.
type State struct {
	Origin    string       `json:"origin"`
	Authority string       `json:"authority,omitempty"`
	Cursor    store.Cursor `json:"cursor"`
	Updated   time.Time    `json:"updated,omitzero"`
	// HighestRun is the highest run whose lease came from the origin: a
	// run authority restored from a backup to number into this store
	// must be bumped past it.
	HighestRun uint32 `json:"highest_run,omitempty"`
}

// New checks opts and reads the state file, if there is one.
func New(opts Options) (*Mirror, error) {
	if opts.Store == nil || opts.StatePath == "" {
		return nil, errors.New("mirror: Options.Store and Options.StatePath are required")
	}
	base, err := ParseOrigin(opts.From)
	if err != nil {
		return nil, err
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Client == nil {
		opts.Client = &http.Client{Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext,
			DisableCompression:    true, // Accept-Encoding is ours
			ResponseHeaderTimeout: MaxWait + 30*time.Second,
			IdleConnTimeout:       90 * time.Second,
			TLSHandshakeTimeout:   10 * time.Second,
		}}
	}
	if opts.Wait <= 0 {
		opts.Wait = DefaultWait
	}
	opts.Wait = min(opts.Wait, MaxWait)
	if opts.Limit <= 0 {
		opts.Limit = DefaultLimit
	}
	if opts.BatchMessages <= 0 {
		opts.BatchMessages = DefaultBatchMessages
	}
	if opts.BatchBytes <= 0 {
		opts.BatchBytes = DefaultBatchBytes
	}
	if opts.MinBackoff <= 0 {
		opts.MinBackoff = DefaultMinBackoff
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = DefaultMaxBackoff
	}
	if opts.ReadTimeout <= 0 {
		opts.ReadTimeout = DefaultReadTimeout
	}
	if opts.MaxRemovals <= 0 {
		opts.MaxRemovals = DefaultMaxRemovals
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	m := &Mirror{opts: opts, log: opts.Logger.With("origin", base.String()), base: base}
	st, err := ReadState(opts.StatePath)
	switch {
	case errors.Is(err, os.ErrNotExist):
		m.state = State{Origin: base.String()}
	case err != nil:
		return nil, err
	case st.Origin != base.String():
		return nil, fmt.Errorf("mirror: %s is the state of a mirror of %s, not of %s: give another state file", opts.StatePath, st.Origin, base)
	default:
		m.state = st
	}
	return m, nil
}

// MaxWait is the longest long poll an origin grants.
const MaxWait = 60 * time.Second

// ParseOrigin checks an origin's URL: http or https, a host, no query.
func ParseOrigin(s string) (*url.URL, error) {
	u, err := url.Parse(s)
	if err != nil || (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" || u.RawQuery != "" || u.Fragment != "" || u.User != nil {
		return nil, fmt.Errorf("mirror: origin %q is not an http:// or https:// URL of an archive (https://lists.example.org/)", s)
	}
	if !strings.HasSuffix(u.Path, "/") {
		u.Path += "/"
	}
	return u, nil
}

// StatePathFor is the default state file of a mirror of origin in dir.
func StatePathFor(dir, origin string) string {
	sum := sha256.Sum256([]byte(origin))
	host := "origin"
	if u, err := url.Parse(origin); err == nil && u.Host != "" {
		host = strings.Map(func(r rune) rune {
			if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '.' || r == '-' {
				return r
			}
			return '_'
		}, strings.ToLower(u.Host))
	}
	return filepath.Join(dir, "mirror", host+"-"+hex.EncodeToString(sum[:4])+".json")
}

// ReadState reads a state file.
func ReadState(path string) (State, error) {
	b, err := os.ReadFile(path)
	if err != nil {
		return State{}, err
	}
	var st State
	if err := json.Unmarshal(b, &st); err != nil {
		return State{}, fmt.Errorf("mirror: state file %s is damaged (%v): delete it to mirror from the beginning again (nothing is stored twice)", path, err)
	}
	return st, nil
}

// saveState writes the state durably: a new file, synced, renamed over the
// old, and the directory synced.
func saveState(path string, st State) error {
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	dir := filepath.Dir(path)
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return fmt.Errorf("cannot save the mirror's state: %w", err)
	}
	tmp, err := os.CreateTemp(dir, filepath.Base(path)+".*.tmp")
	if err != nil {
		return fmt.Errorf("cannot save the mirror's state: %w", err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), path)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot save the mirror's state: %w", err)
	}
	if d, err := os.Open(dir); err == nil {
		d.Sync()
		d.Close()
	}
	return nil
}

// State returns where the mirror stands.
func (m *Mirror) State() State { return m.state }

// CatchUp reads the origin's feed until it has nothing more. A passing
// failure (the network, the origin busy, an answer cut short) is tried
// again, DefaultOnceAttempts times at most (a stalled answer, OnceStalls
// times); ErrOrigin and store refusals are not.
func (m *Mirror) CatchUp(ctx context.Context) (Stats, error) {
	err := m.run(ctx, true)
	return m.stats, err
}

// Run follows the origin until ctx is done, then returns nil; or returns
// the error that makes going on pointless (ErrOrigin, a store refusal).
// Passing failures are logged and tried again with backoff.
func (m *Mirror) Run(ctx context.Context) error {
	err := m.run(ctx, false)
	if ctx.Err() != nil {
		return nil
	}
	return err
}

func (m *Mirror) run(ctx context.Context, once bool) error {
	failures, stalls := 0, 0
	for {
		more, err := m.fetch(ctx, !once && m.stats.CaughtUp)
		switch {
		case err == nil:
			failures = 0
			if !more {
				m.stats.CaughtUp = true
				if once {
					return nil
				}
			}
			continue
		case ctx.Err() != nil:
			return ctx.Err()
		case fatal(err):
			m.opts.Metrics.failed()
			return err
		}
		failures++
		m.opts.Metrics.failed()
		if errors.Is(err, ErrStalled) {
			stalls++
		}
		if once && (failures >= DefaultOnceAttempts || stalls >= OnceStalls) {
			return fmt.Errorf("cannot catch up with %s after %d attempts: %w", m.base, failures, err)
		}
		d := backoff(failures, m.opts.MinBackoff, m.opts.MaxBackoff)
		m.log.Warn("cannot read the origin's change feed; trying again", "err", err, "retry_in", d.Round(time.Millisecond))
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
	}
}

func backoff(failures int, lo, hi time.Duration) time.Duration {
	d := lo << min(failures-1, 16)
	if d > hi || d <= 0 {
		d = hi
	}
	return d/2 + rand.N(d/2+1)
}

// fatal reports an error that trying again will not cure.
func fatal(err error) bool {
	for _, e := range []error{ErrOrigin, ErrMassRemoval, ErrNotFeed, changes.ErrFormat, store.ErrNumberTaken, store.ErrForeignAuthority, store.ErrRunReused,
		store.ErrInvalidMessage, store.ErrUnknownRun, store.ErrBadReason, store.ErrClosed} {
		if errors.Is(err, e) {
			return true
		}
	}
	var se *statusError
	return errors.As(err, &se) && se.fatal()
}

// statusError is an answer of the origin other than 200.
type statusError struct {
	code int
	body string
}

func (e *statusError) Error() string {
	return fmt.Sprintf("the origin answered %d %s: %s", e.code, http.StatusText(e.code), e.body)
}

// fatal: 4xx but 408 and 429 are the mirror's mistake or the origin's
// refusal, which asking again will not change.
func (e *statusError) fatal() bool {
	return e.code >= 400 && e.code < 500 && e.code != http.StatusRequestTimeout && e.code != http.StatusTooManyRequests
}

// fetch asks the origin for what follows the cursor (waiting when wait is
// set), applies it, saves the new cursor and reports whether more is ready.
func (m *Mirror) fetch(ctx context.Context, wait bool) (bool, error) {
	q := url.Values{}
	q.Set("after", string(m.state.Cursor))
	q.Set("limit", strconv.Itoa(m.opts.Limit))
	if wait {
		q.Set("wait", strconv.Itoa(int(m.opts.Wait/time.Second)))
	}
	u := m.base.JoinPath("api/v1/changes")
	u.RawQuery = q.Encode()
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u.String(), nil)
	if err != nil {
		return false, err
	}
	req.Header.Set("Accept", changes.ContentType)
	req.Header.Set("Accept-Encoding", "zstd, gzip")
	if m.opts.Token != "" {
		req.Header.Set("Authorization", "Bearer "+m.opts.Token)
	}
	resp, err := m.opts.Client.Do(req)
	if err != nil {
		return false, err
	}
	defer resp.Body.Close()
	if resp.StatusCode == http.StatusBadRequest && m.state.Cursor != "" && strings.Contains(resp.Header.Get("Content-Type"), "json") {
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		if strings.Contains(string(b), "Not a cursor") {
			// The origin's store was replaced or converted: read its
			// feed again from the start (duplicates are free).
			m.log.Warn("the origin does not know the mirror's cursor: reading its feed again from the beginning", "cursor", m.state.Cursor)
			m.state.Cursor = ""
			return true, nil
		}
		return false, &statusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	ct := resp.Header.Get("Content-Type")
	if resp.StatusCode != http.StatusOK {
		if resp.StatusCode == http.StatusNotFound || resp.StatusCode == http.StatusMethodNotAllowed {
			return false, m.notFeed(u, resp.StatusCode, ct)
		}
		b, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
		return false, &statusError{resp.StatusCode, strings.TrimSpace(string(b))}
	}
	if mt, _, _ := mime.ParseMediaType(ct); mt != changes.ContentType {
		return false, m.notFeed(u, resp.StatusCode, ct)
	}
	resp.Body = &stallReader{r: resp.Body, timeout: m.opts.ReadTimeout, ctx: ctx, cancel: cancel, origin: m.base.String()}
	body, err := decompress(resp)
	if err != nil {
		return false, err
	}
	defer body.Close()
	return m.apply(ctx, body)
}

// notFeed says in plain words that u answered something other than a
// change feed.
func (m *Mirror) notFeed(u *url.URL, code int, contentType string) error {
	what := contentType
	if mt, _, err := mime.ParseMediaType(contentType); err == nil {
		what = mt
	}
	switch {
	case what == "text/html":
		what = "an HTML page (text/html)"
	case what == "":
		what = "something without a Content-Type"
	}
	if code != http.StatusOK {
		what = fmt.Sprintf("%d %s with %s", code, http.StatusText(code), what)
	}
	return fmt.Errorf("%w: %s answered %s, not a change feed (%s): is %s an archive's base URL, where its resolver serves /api/v1/changes?",
		ErrNotFeed, u.Redacted(), what, changes.ContentType, m.base)
}

// stallReader gives each Read of an answer's body ReadTimeout to return
// something: the deadline moves with progress, and the time between
// reads (the mirror storing what it read) does not count. A read past it
// cancels the request with ErrStalled as the cause.
type stallReader struct {
	r       io.ReadCloser
	timeout time.Duration
	ctx     context.Context
	cancel  context.CancelCauseFunc
	origin  string
	read    atomic.Int64
	timer   *time.Timer
}

func (s *stallReader) Read(p []byte) (int, error) {
	if s.timer == nil {
		s.timer = time.AfterFunc(s.timeout, s.stalled)
	} else {
		s.timer.Reset(s.timeout)
	}
	n, err := s.r.Read(p)
	s.timer.Stop()
	s.read.Add(int64(n))
	if err != nil && !errors.Is(err, io.EOF) {
		if cause := context.Cause(s.ctx); errors.Is(cause, ErrStalled) {
			err = cause
		}
	}
	return n, err
}

func (s *stallReader) stalled() {
	s.cancel(fmt.Errorf("%w: %s sent nothing for %v in the middle of its answer (after %d bytes of it)", ErrStalled, s.origin, s.timeout, s.read.Load()))
}

func (s *stallReader) Close() error {
	if s.timer != nil {
		s.timer.Stop()
	}
	return s.r.Close()
}

// decompress returns the body as the origin sent it, decoded.
func decompress(resp *http.Response) (io.ReadCloser, error) {
	switch enc := strings.ToLower(strings.TrimSpace(resp.Header.Get("Content-Encoding"))); enc {
	case "", "identity":
		return io.NopCloser(resp.Body), nil
	case "gzip":
		zr, err := gzip.NewReader(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("cannot read the origin's answer: %w", err)
		}
		return zr, nil
	case "zstd":
		zr, err := zstd.NewReader(resp.Body, zstd.WithDecoderConcurrency(1), zstd.WithDecoderMaxWindow(8<<20))
		if err != nil {
			return nil, fmt.Errorf("cannot read the origin's answer: %w", err)
		}
		return zr.IOReadCloser(), nil
	default:
		return nil, fmt.Errorf("%w: the answer is encoded %q", ErrOrigin, enc)
	}
}

// step is what the reader hands the applier: the leases read since the
// last step, then a batch of messages, or a removal, or the end; or the
// error that ended the answer (after the rest of the step).
type step struct {
	leases  []callnumber.Lease
	batch   []store.Message
	size    int
	removal *store.Removal
	move    *store.Move
	end     *changes.Record
	err     error
}

// apply stores what one answer holds, in order, and saves its cursor.
// Reading (decompressing, checking digests) and storing overlap: a reader
// goroutine hands batches to the applier, two at most in waiting and
// 2*BatchBytes of messages at most (or one message larger than that), so
// that the origin goes on sending while a batch is written.
func (m *Mirror) apply(ctx context.Context, body io.Reader) (more bool, err error) {
	fr, err := changes.NewReader(body, changes.Options{MaxMessage: m.opts.MaxMessage})
	if err != nil {
		return false, m.originErr(err)
	}
	b := fr.Binding()
	if m.state.Authority != "" && m.state.Authority != b.Authority {
		return false, fmt.Errorf("%w: the origin now serves the archive of authority %s, and this mirror follows that of %s", ErrOrigin, b.Authority, m.state.Authority)
	}
	steps := make(chan step, 2)
	stop := make(chan struct{})
	budget := newInflight(2 * m.opts.BatchBytes)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer close(stop)
	wg.Go(func() { m.read(fr, steps, budget, stop) })

	highest := m.state.HighestRun
	var removals []store.Removal // at most Limit
	for st := range steps {
		for _, l := range st.leases {
			l.Key = b.Key
			if err := m.opts.Store.RecordLease(ctx, l); err != nil {
				return false, fmt.Errorf("cannot record the lease of run %d: %w", l.Run, err)
			}
			highest = max(highest, l.Run)
		}
		if len(st.batch) > 0 {
			res, err := m.opts.Store.Put(ctx, st.batch)
			budget.release(st.size)
			if err != nil {
				return false, fmt.Errorf("cannot store what the origin sent: %w", err)
			}
			for i, r := range res {
				if r.Number != st.batch[i].Number {
					return false, fmt.Errorf("%w: the origin sends message %v, whose bytes this mirror holds as %v", ErrOrigin, st.batch[i].Number, r.Number)
				}
				if !r.Duplicate {
					m.stats.New++
				}
			}
			m.stats.Messages += int64(len(st.batch))
			m.stats.Bytes += int64(st.size)
			m.opts.Metrics.stored(len(st.batch), st.size)
		}
		if mv := st.move; mv != nil {
			// A move of a message removed since: the removal follows.
			if _, err := m.opts.Store.RecordMove(ctx, *mv); err != nil && !errors.Is(err, store.ErrRemoved) {
				return false, fmt.Errorf("cannot apply the origin's move of %v: %w", mv.Number, err)
			}
			m.stats.Moves++
			m.log.Info("moved, as the origin did", "callnumber", mv.Number, "list", mv.List, "moved_at", mv.Moved)
		}
		if r := st.removal; r != nil {
			if m.opts.AcceptMassRemoval {
				if err := m.remove(ctx, *r); err != nil {
					return false, err
				}
			} else {
				// Applied once the answer is whole: an answer that
				// removes too many is refused before any is applied.
				removals = append(removals, *r)
			}
		}
		if st.err != nil {
			// What was verified is kept; the cursor stays where it was.
			return false, m.originErr(st.err)
		}
		if end := st.end; end != nil {
			if err := m.checkRemovals(ctx, removals); err != nil {
				return false, err
			}
			for _, r := range removals {
				if err := m.remove(ctx, r); err != nil {
					return false, err
				}
			}
			m.state.Authority = b.Authority
			m.state.Cursor = end.Next
			m.state.HighestRun = highest
			m.state.Updated = time.Now().UTC()
			if err := saveState(m.opts.StatePath, m.state); err != nil {
				return false, err
			}
			m.opts.Metrics.synced(m.state.Updated)
			if m.opts.Progress != nil {
				p := m.stats
				p.CaughtUp = !end.More
				m.opts.Progress(p)
			}
			return end.More, nil
		}
	}
	return false, errors.New("mirror: the answer's reader stopped early") // not reached: it ends with end or err
}

// checkRemovals refuses removals that would remove more than
// MaxRemovals messages held here.
func (m *Mirror) checkRemovals(ctx context.Context, removals []store.Removal) error {
	if len(removals) <= m.opts.MaxRemovals {
		return nil
	}
	held := 0
	for _, r := range removals {
		n, err := m.opts.Store.ByDigest(ctx, r.Digest)
		if errors.Is(err, store.ErrNotFound) || (err == nil && n != r.Number) {
			continue // never held here (the store refuses the other case)
		}
		if err == nil {
			_, err = m.opts.Store.Get(ctx, n)
		}
		switch {
		case errors.Is(err, store.ErrRemoved) || errors.Is(err, store.ErrNotFound):
		case err != nil:
			return fmt.Errorf("cannot check the origin's removal of %v: %w", r.Number, err)
		default:
			held++
		}
	}
	if held > m.opts.MaxRemovals {
		return fmt.Errorf("%w: one answer of %s removes %d messages this mirror holds, more than %d; none of them was removed here. If the origin removed them on purpose, run the mirror with --accept-mass-removal (once, with --once)",
			ErrMassRemoval, m.base, held, m.opts.MaxRemovals)
	}
	return nil
}

// remove applies the origin's removal r.
func (m *Mirror) remove(ctx context.Context, r store.Removal) error {
	if _, err := m.opts.Store.RecordRemoval(ctx, r); err != nil {
		return fmt.Errorf("cannot apply the origin's removal of %v: %w", r.Number, err)
	}
	m.stats.Removals++
	m.opts.Metrics.removed()
	m.log.Info("removed, as the origin did", "callnumber", r.Number, "removed_at", r.Removed, "reason", r.Reason)
	return nil
}

// read reads the answer's records into steps until its end, an error or stop.
func (m *Mirror) read(fr *changes.Reader, steps chan<- step, budget *inflight, stop <-chan struct{}) {
	defer close(steps)
	var cur step
	send := func() bool {
		if cur.size > 0 && !budget.acquire(cur.size, stop) {
			return false
		}
		select {
		case steps <- cur:
			cur = step{}
			return true
		case <-stop:
			return false
		}
	}
	// The origin writes at most Limit messages, moves and removals, and
	// a lease before the first of each run: an answer with more is not
	// the origin's feed, and would grow the mirror without end.
	var leases, records int
	fail := func(err error) {
		cur.err = err
		send()
	}
	for {
		rec, err := fr.Next()
		if err != nil {
			fail(err)
			return
		}
		switch rec.Kind {
		case changes.KindLease:
			if leases++; leases > m.opts.Limit {
				fail(fmt.Errorf("%w: the answer holds more than %d leases, for an answer of %d records at most", ErrOrigin, m.opts.Limit, m.opts.Limit))
				return
			}
		case changes.KindMessage, changes.KindMove, changes.KindRemoval:
			if records++; records > m.opts.Limit {
				fail(fmt.Errorf("%w: the answer holds more than the %d records asked for", ErrOrigin, m.opts.Limit))
				return
			}
		}
		switch rec.Kind {
		case changes.KindLease:
			cur.leases = append(cur.leases, rec.Lease)
			if len(cur.leases) >= stepLeases && !send() {
				return
			}
		case changes.KindMessage:
			msg := rec.Message
			if len(cur.batch) > 0 && cur.size+len(msg.Raw) > m.opts.BatchBytes && !send() {
				return
			}
			cur.batch = append(cur.batch, store.Message(msg))
			cur.size += len(msg.Raw)
			if len(cur.batch) >= m.opts.BatchMessages || cur.size >= m.opts.BatchBytes {
				if !send() {
					return
				}
			}
		case changes.KindRemoval:
			r := rec.Removal
			if now := m.opts.Now(); r.Removed.After(now.Add(MaxClockSkew)) {
				fail(fmt.Errorf("%w: the removal of %v is dated %s, in the future (the mirror's clock says %s)", ErrOrigin, r.Number,
					r.Removed.UTC().Format(time.RFC3339), now.UTC().Format(time.RFC3339)))
				return
			}
			cur.removal = &r
			if !send() {
				return
			}
		case changes.KindMove:
			mv := rec.Move
			cur.move = &mv
			if !send() {
				return
			}
		case changes.KindEnd:
			cur.end = &rec
			send()
			return
		}
	}
}

// inflight bounds the bytes of messages read and not yet stored. One
// goroutine acquires, another releases.
type inflight struct {
	mu          sync.Mutex
	used, limit int
	freed       chan struct{}
}

func newInflight(limit int) *inflight {
	return &inflight{limit: limit, freed: make(chan struct{}, 1)}
}

// acquire waits until n more bytes fit (any n fits when none are in
// flight), or stop is closed (false).
func (f *inflight) acquire(n int, stop <-chan struct{}) bool {
	for {
		f.mu.Lock()
		if f.used == 0 || f.used+n <= f.limit {
			f.used += n
			f.mu.Unlock()
			return true
		}
		f.mu.Unlock()
		select {
		case <-f.freed:
		case <-stop:
			return false
		}
	}
}

// release gives back n bytes.
func (f *inflight) release(n int) {
	if n == 0 {
		return
	}
	f.mu.Lock()
	f.used -= n
	f.mu.Unlock()
	select {
	case f.freed <- struct{}{}:
	default:
	}
}

// originErr marks a malformed answer as the origin's fault; a truncated
// one stays a passing failure.
func (m *Mirror) originErr(err error) error {
	if errors.Is(err, changes.ErrFormat) {
		return fmt.Errorf("%w: %w", ErrOrigin, err)
	}
	return err
}

// Origins returns the origins of the mirrors that keep their state in
// dir's default place (StatePathFor): a data directory that a mirror
// fills. Sorted; none for a directory no mirror wrote to.
func Origins(dir string) ([]string, error) {
	paths, err := filepath.Glob(filepath.Join(filepath.Dir(StatePathFor(dir, "http://x/")), "*.json"))
	if err != nil {
		return nil, err
	}
	var origins []string
	for _, p := range paths {
		st, err := ReadState(p)
		if err != nil {
			return nil, err
		}
		if st.Origin != "" {
			origins = append(origins, st.Origin)
		}
	}
	slices.Sort(origins)
	return slices.Compact(origins), nil
}
