package imapwatch

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"slices"
	"strings"
	"syscall"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/chibrary/chibrary/ingest"
)

// session catches up with the mailbox and follows it until ctx is cancelled
// (nil) or something fails. reached means the mailbox was selected: the
// backoff starts over.
func (w *Watcher) session(ctx context.Context, st *State, first bool) (reached bool, err error) {
	c, encrypted, err := w.connect(ctx)
	if err != nil {
		return false, err
	}
	defer c.Close()

	caps := c.Caps()
	if w.opts.After.Action == Move {
		if err := w.ensureFolder(c, w.opts.After.Folder); err != nil {
			return false, err
		}
	}
	if w.opts.After.Action == Delete && !caps.Has(imap.CapUIDPlus) {
		w.log.Warn("server has no UIDPLUS: --after delete uses EXPUNGE, which also removes messages others flagged \\Deleted")
	}

	// RFC 9051 section 6.3.2; EXAMINE (read-only) when nothing is changed.
	g := w.guard(c)
	sel, err := c.Select(w.opts.Mailbox, &imap.SelectOptions{ReadOnly: !w.opts.After.modifies()}).Wait()
	g.stop()
	if err != nil {
		if ie, ok := imapError(err); ok && ie.Code == imap.ResponseCodeNonExistent {
			err = fmt.Errorf("%w: %s: %v", ErrNoMailbox, w.opts.Mailbox, ie)
			if first {
				return false, fatalError{err}
			}
			return false, err
		}
		return false, fmt.Errorf("cannot select %s: %w", w.opts.Mailbox, err)
	}
	// RFC 9051 section 2.3.1.1: UIDs are only meaningful with the
	// UIDVALIDITY they came with. When it changes, every message may have
	// a new UID: start again from the first, the store turns those already
	// archived into duplicates.
	if st.UIDValidity != sel.UIDValidity {
		if st.UIDValidity != 0 {
			w.log.Warn("UIDVALIDITY changed: fetching the whole mailbox again (messages already archived come back as duplicates)",
				"old", st.UIDValidity, "new", sel.UIDValidity, "last_uid", st.LastUID)
		}
		st.UIDValidity, st.LastUID, st.Retry = sel.UIDValidity, 0, nil
		st.Updated = time.Now().UTC()
		if err := w.save(st); err != nil {
			return true, err
		}
	}
	w.log.Info("connected", "tls", encrypted, "messages", sel.NumMessages, "uidvalidity", sel.UIDValidity, "uidnext", sel.UIDNext,
		"last_uid", st.LastUID, "idle", caps.Has(imap.CapIdle))

	for {
		if err := w.catchUp(ctx, c, st); err != nil {
			return true, err
		}
		if w.unsaved {
			if err := w.save(st); err != nil {
				return true, err
			}
		}
		if ctx.Err() != nil {
			w.logout(c)
			return true, nil
		}
		if w.onIdle != nil {
			w.onIdle()
		}
		if caps.Has(imap.CapIdle) {
			err = w.idle(ctx, c)
		} else {
			err = w.poll(ctx, c)
		}
		if err != nil {
			return true, err
		}
		if ctx.Err() != nil {
			w.logout(c)
			return true, nil
		}
	}
}

func (w *Watcher) logout(c *imapclient.Client) {
	g := w.guard(c)
	defer g.stop()
	_ = c.Logout().Wait()
}

// connect dials, protects and logs in; encrypted says whether the
// connection is TLS.
func (w *Watcher) connect(ctx context.Context) (c *imapclient.Client, encrypted bool, err error) {
	opts := &imapclient.Options{
		TLSConfig: w.tlsConfig(),
		UnilateralDataHandler: &imapclient.UnilateralDataHandler{
			// An untagged EXISTS (RFC 9051 section 7.4.1): new mail.
			Mailbox: func(d *imapclient.UnilateralDataMailbox) {
				if d.NumMessages != nil {
					select {
					case w.wake <- struct{}{}:
					default:
					}
				}
			},
		},
	}
	conn, err := w.dial(ctx)
	if err != nil {
		return nil, false, err
	}
	switch w.opts.Security {
	case ImplicitTLS:
		cfg := opts.TLSConfig.Clone()
		if cfg.NextProtos == nil {
			cfg.NextProtos = []string{"imap"} // ALPN, RFC 7301
		}
		tc := tls.Client(conn, cfg)
		hctx, cancel := context.WithTimeout(ctx, w.opts.CommandTimeout)
		err := tc.HandshakeContext(hctx)
		cancel()
		if err != nil {
			conn.Close()
			var rh tls.RecordHeaderError
			if errors.As(err, &rh) {
				// The server answered in plain text: retrying will not
				// change that.
				return nil, false, fatalError{fmt.Errorf("cannot start TLS with %s: the server does not speak TLS on this port (imaps:// to a plain IMAP port? use imap://): %w", w.opts.Addr, err)}
			}
			return nil, false, fmt.Errorf("cannot start TLS with %s: %w", w.opts.Addr, err)
		}
		c, encrypted = imapclient.New(tc, opts), true
	case StartTLS:
		c = imapclient.New(conn, opts)
		g := w.guard(c)
		caps := c.Caps()
		g.stop()
		if caps == nil {
			c.Close()
			return nil, false, fmt.Errorf("cannot read the capabilities of %s", w.opts.Addr)
		}
		if caps.Has(imap.CapStartTLS) {
			// imapclient upgrades only a fresh connection.
			c.Close()
			if conn, err = w.dial(ctx); err != nil {
				return nil, false, err
			}
			t := time.AfterFunc(w.opts.CommandTimeout, func() { conn.Close() })
			c, err = imapclient.NewStartTLS(conn, opts)
			t.Stop()
			if err != nil {
				conn.Close()
				return nil, false, fmt.Errorf("cannot start TLS with %s: %w", w.opts.Addr, err)
			}
			encrypted = true
		}
	}
	if !encrypted && !w.opts.AllowPlaintext && !isLoopback(w.host) {
		c.Close()
		return nil, false, fmt.Errorf("%w to %s: the server offers no STARTTLS (use imaps://, or allow plain-text login explicitly)", ErrPlaintext, w.opts.Addr)
	}
	g := w.guard(c)
	defer g.stop()
	if c.Caps().Has(imap.CapLoginDisabled) {
		c.Close()
		return nil, false, fmt.Errorf("%w: %s disables LOGIN on this connection", ErrAuth, w.opts.Addr)
	}
	// RFC 9051 section 6.2.3. The error carries the server's text, never
	// the password.
	if err := c.Login(w.opts.User, w.opts.Password).Wait(); err != nil {
		c.Close()
		if ie, ok := imapError(err); ok && ie.Type == imap.StatusResponseTypeNo && ie.Code != imap.ResponseCodeUnavailable {
			return nil, false, fmt.Errorf("%w: %s as %s: %s", ErrAuth, w.opts.Addr, w.opts.User, ie.Text)
		}
		return nil, false, fmt.Errorf("cannot log in to %s: %w", w.opts.Addr, err)
	}
	return c, encrypted, nil
}

func (w *Watcher) dial(ctx context.Context) (net.Conn, error) {
	dctx, cancel := context.WithTimeout(ctx, w.opts.CommandTimeout)
	defer cancel()
	conn, err := w.opts.Dial(dctx, "tcp", w.opts.Addr)
	if err != nil {
		return nil, fmt.Errorf("cannot connect to %s: %w", w.opts.Addr, err)
	}
	return conn, nil
}

func (w *Watcher) tlsConfig() *tls.Config {
	cfg := &tls.Config{}
	if w.opts.TLSConfig != nil {
		cfg = w.opts.TLSConfig.Clone()
	}
	if cfg.ServerName == "" {
		cfg.ServerName = w.host
	}
	return cfg
}

func isLoopback(host string) bool {
	if strings.EqualFold(host, "localhost") {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// ensureFolder creates the --after move target if it does not exist, so
// that a fresh account works at once (the creation is logged).
func (w *Watcher) ensureFolder(c *imapclient.Client, name string) error {
	g := w.guard(c)
	defer g.stop()
	list, err := c.List("", name, nil).Collect()
	if err != nil {
		return fmt.Errorf("cannot list %s: %w", name, err)
	}
	if len(list) > 0 {
		return nil
	}
	if err := c.Create(name, nil).Wait(); err != nil {
		return fmt.Errorf("cannot create folder %s: %w", name, err)
	}
	w.log.Info("created folder for --after move", "folder", name)
	return nil
}

// catchUp archives every message above st.LastUID, in batches, and returns
// when there are none left or ctx is cancelled (between two batches).
func (w *Watcher) catchUp(ctx context.Context, c *imapclient.Client, st *State) error {
	// UID SEARCH UID n:* (RFC 9051 section 6.4.4); with ESEARCH (RFC 4731)
	// the answer is a compact set however large the mailbox.
	var opts *imap.SearchOptions
	if c.Caps().Has(imap.CapESearch) {
		opts = &imap.SearchOptions{ReturnAll: true}
	}
	crit := &imap.SearchCriteria{UID: []imap.UIDSet{{{Start: imap.UID(st.LastUID + 1), Stop: 0}}}}
	g := w.guard(c)
	data, err := c.UIDSearch(crit, opts).Wait()
	g.stop()
	if err != nil {
		return fmt.Errorf("cannot search %s: %w", w.opts.Mailbox, err)
	}
	set, _ := data.All.(imap.UIDSet)
	w.log.Debug("searched", "above", st.LastUID, "found", set.String())
	if err := w.retry(ctx, c, st); err != nil {
		return err
	}
	// "n:*" also matches the highest UID when it is below n.
	next := uidsAbove(set, imap.UID(st.LastUID))
	for {
		if ctx.Err() != nil {
			return nil
		}
		window := next(w.opts.BatchMessages)
		if len(window) == 0 {
			return nil
		}
		batches, err := w.plan(c, window)
		if err != nil {
			return err
		}
		for _, b := range batches {
			if ctx.Err() != nil {
				return nil
			}
			if err := w.batch(ctx, c, st, b, false); err != nil {
				return err
			}
		}
		// The window's UIDs that vanished before the size fetch.
		if last := uint32(window[len(window)-1]); last > st.LastUID {
			st.LastUID = last
			st.Updated = time.Now().UTC()
			if err := saveState(w.opts.StatePath, *st); err != nil {
				return fatalError{err}
			}
		}
	}
}

// uidsAbove returns an iterator over the UIDs of set above last, in
// ascending order, n at a time, without expanding the whole set.
func uidsAbove(set imap.UIDSet, last imap.UID) func(n int) []imap.UID {
	ranges := slices.Clone(set)
	for i := range ranges {
		if ranges[i].Start > ranges[i].Stop && ranges[i].Stop != 0 {
			ranges[i].Start, ranges[i].Stop = ranges[i].Stop, ranges[i].Start
		}
	}
	slices.SortFunc(ranges, func(a, b imap.UIDRange) int { return int(a.Start) - int(b.Start) })
	cur := last
	return func(n int) []imap.UID {
		var out []imap.UID
		for len(ranges) > 0 && len(out) < n {
			r := ranges[0]
			lo := max(r.Start, cur+1)
			if r.Stop == 0 || lo > r.Stop { // "*" was resolved by the server; 0 never comes back
				ranges = ranges[1:]
				continue
			}
			hi := min(r.Stop, lo+imap.UID(n-len(out))-1)
			for u := lo; u <= hi; u++ {
				out = append(out, u)
			}
			cur = hi
			if hi == r.Stop {
				ranges = ranges[1:]
			}
		}
		return out
	}
}

// plan splits window into batches of at most BatchBytes, from the sizes
// the server reports (RFC822.SIZE); UIDs that no longer exist are dropped.
func (w *Watcher) plan(c *imapclient.Client, window []imap.UID) ([][]imap.UID, error) {
	g := w.guard(c)
	defer g.stop()
	msgs, err := c.Fetch(imap.UIDSetNum(window...), &imap.FetchOptions{UID: true, RFC822Size: true}).Collect()
	if err != nil {
		return nil, fmt.Errorf("cannot fetch message sizes: %w", err)
	}
	slices.SortFunc(msgs, func(a, b *imapclient.FetchMessageBuffer) int { return int(a.UID) - int(b.UID) })
	var batches [][]imap.UID
	var cur []imap.UID
	var size int64
	for _, m := range msgs {
		if m.UID == 0 {
			continue
		}
		if len(cur) > 0 && size+m.RFC822Size > w.opts.BatchBytes {
			batches = append(batches, cur)
			cur, size = nil, 0
		}
		cur = append(cur, m.UID)
		size += m.RFC822Size
	}
	if len(cur) > 0 {
		batches = append(batches, cur)
	}
	return batches, nil
}

// retry tries again the messages of State.Retry, once per connection.
func (w *Watcher) retry(ctx context.Context, c *imapclient.Client, st *State) error {
	if len(st.Retry) == 0 || ctx.Err() != nil {
		return nil
	}
	uids := make([]imap.UID, len(st.Retry))
	for i, u := range st.Retry {
		uids[i] = imap.UID(u)
	}
	w.log.Info("trying again messages that could not be archived", "uids", len(uids))
	// Each batch removes what it archived, or what is gone, and puts back
	// what failed again.
	for len(uids) > 0 {
		n := min(len(uids), w.opts.BatchMessages)
		if err := w.batch(ctx, c, st, uids[:n], true); err != nil {
			return err
		}
		uids = uids[n:]
	}
	return nil
}

// batch fetches uids, archives them, acts on them (--after) and saves the
// state, in that order. A retry batch (uids from State.Retry) leaves
// LastUID alone.
func (w *Watcher) batch(ctx context.Context, c *imapclient.Client, st *State, uids []imap.UID, retry bool) error {
	prepared, got, err := w.fetch(c, st.UIDValidity, uids)
	if err != nil {
		return err
	}
	// Messages whose senders asked not to be archived are left out (and
	// left as they are in the mailbox), as Mailman leaves them out.
	var skipped int
	if !w.opts.ArchiveNoArchive {
		keep := prepared[:0:0]
		var keptUIDs []imap.UID
		for i, p := range prepared {
			if p.Meta.NoArchive && p.Err == nil {
				skipped++
				w.log.Info("not archived: the message asks not to be (X-No-Archive); left in the mailbox as it is", "uid", got[i], "message_id", p.Meta.MessageID)
				continue
			}
			keep, keptUIDs = append(keep, p), append(keptUIDs, got[i])
		}
		prepared, got = keep, keptUIDs
	}
	// A shutdown lets the batch finish: the store gets it whole.
	actx := context.WithoutCancel(ctx)
	outs, err := w.opts.Archiver.Archive(actx, prepared)
	if err != nil {
		return fmt.Errorf("cannot archive UIDs %d-%d: %w", uids[0], uids[len(uids)-1], err)
	}
	var done imap.UIDSet
	var imported, dups, removed, failed int
	var again []uint32 // failed for a reason that may pass
	for i, o := range outs {
		uid := got[i]
		switch o.Status {
		case ingest.Removed:
			removed++
			done.AddNum(uid)
			w.log.Info("not archived again: the same message was removed from the archive", "uid", uid, "callnumber", o.Number, "message_id", o.MessageID)
		case ingest.Imported:
			imported++
			done.AddNum(uid)
			w.log.Debug("archived", "uid", uid, "callnumber", o.Number, "message_id", o.MessageID)
		case ingest.Duplicate:
			dups++
			done.AddNum(uid)
			w.log.Debug("duplicate", "uid", uid, "callnumber", o.Number, "message_id", o.MessageID)
		default:
			failed++
			if errors.Is(o.Err, ErrTooLarge) {
				w.log.Error("cannot archive message; leaving it in the mailbox untouched", "uid", uid, "err", o.Err)
				continue
			}
			w.log.Error("cannot archive message; leaving it in the mailbox untouched, to be tried again at the next connection", "uid", uid, "err", o.Err)
			again = append(again, uint32(uid))
		}
	}
	w.opts.Metrics.add(imported, dups, failed, time.Now())
	w.opts.Metrics.skip(skipped, removed)
	// Only now, with the batch durable in the store, may the mailbox change.
	if w.opts.After.modifies() && len(done) > 0 {
		g := w.guard(c)
		err := w.opts.After.apply(c, done)
		g.stop()
		if err != nil {
			return err
		}
	}
	// The batch's UIDs leave the retry list (archived, or gone from the
	// mailbox) unless they failed again.
	st.Retry = slices.DeleteFunc(st.Retry, func(u uint32) bool { return slices.Contains(uids, imap.UID(u)) })
	for _, u := range again {
		if len(st.Retry) >= maxRetry {
			w.log.Error("too many messages to try again; this one will not be", "uid", u, "limit", maxRetry)
			continue
		}
		st.Retry = append(st.Retry, u)
	}
	if !retry {
		st.LastUID = uint32(uids[len(uids)-1])
	}
	st.Updated = time.Now().UTC()
	if err := w.save(st); err != nil {
		return err
	}
	w.log.Info("archived batch", "imported", imported, "duplicates", dups, "removed", removed, "skipped", skipped, "failed", failed,
		"first_uid", uids[0], "last_uid", st.LastUID)
	return nil
}

// save writes the state file. A full disk is not the end: the watcher goes
// on and writes it again at the next batch (killed meanwhile, it would only
// fetch duplicates). Any other failure is the operator's to mend: fatal.
func (w *Watcher) save(st *State) error {
	err := saveState(w.opts.StatePath, *st)
	switch {
	case err == nil:
		if w.unsaved {
			w.log.Info("the state file is written again", "path", w.opts.StatePath)
			w.unsaved = false
		}
		return nil
	case errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT):
		if !w.unsaved {
			w.log.Error("cannot write the state file: the disk is full; going on, and trying again at every batch", "path", w.opts.StatePath, "err", err)
			w.unsaved = true
		}
		return nil
	}
	return fatalError{err}
}

// fetch reads the raw messages uids with UID FETCH BODY.PEEK[] (RFC 9051
// section 6.4.5; PEEK leaves \Seen alone) and prepares them, in UID order.
// Each body is read straight from the literal into a buffer of its size.
func (w *Watcher) fetch(c *imapclient.Client, uidValidity uint32, uids []imap.UID) ([]ingest.Prepared, []imap.UID, error) {
	set := imap.UIDSetNum(uids...)
	section := &imap.FetchItemBodySection{Peek: true}
	g := w.guard(c)
	defer g.stop()
	cmd := c.Fetch(set, &imap.FetchOptions{UID: true, BodySection: []*imap.FetchItemBodySection{section}})
	type msg struct {
		uid imap.UID
		p   ingest.Prepared
	}
	var msgs []msg
	var readErr error
	for m := cmd.Next(); m != nil; m = cmd.Next() {
		var uid imap.UID
		var body []byte
		var bodyErr error
		seen := false
		for item := m.Next(); item != nil; item = m.Next() {
			g.touch()
			switch it := item.(type) {
			case imapclient.FetchItemDataUID:
				uid = it.UID
			case imapclient.FetchItemDataBodySection:
				seen = true
				if it.Literal == nil {
					bodyErr = errors.New("the server sent no body (NIL)")
					continue
				}
				if size := it.Literal.Size(); size > w.opts.MaxMessageSize {
					// The size comes from the server: never allocate it
					// unchecked. Read past the literal to stay in sync.
					bodyErr = fmt.Errorf("%w: %d bytes (limit %d)", ErrTooLarge, size, w.opts.MaxMessageSize)
					if _, err := io.Copy(io.Discard, it.Literal); err != nil && readErr == nil {
						readErr = err
					}
					continue
				}
				body = make([]byte, it.Literal.Size())
				if _, err := io.ReadFull(it.Literal, body); err != nil && readErr == nil {
					readErr = err
				}
			}
		}
		if uid == 0 || !set.Contains(uid) {
			continue // not ours (e.g. a flag change announced meanwhile)
		}
		where := w.where(uidValidity, uid)
		if !seen {
			bodyErr = errors.New("the server sent no body")
		}
		p := ingest.Prepared{Where: where, Err: bodyErr}
		if bodyErr == nil {
			p = ingest.Prepare(body, where)
		}
		msgs = append(msgs, msg{uid, p})
	}
	if err := cmd.Close(); err != nil {
		return nil, nil, fmt.Errorf("cannot fetch messages: %w", err)
	}
	if readErr != nil {
		return nil, nil, fmt.Errorf("cannot fetch messages: %w", readErr)
	}
	slices.SortFunc(msgs, func(a, b msg) int { return int(a.uid) - int(b.uid) })
	prepared := make([]ingest.Prepared, len(msgs))
	got := make([]imap.UID, len(msgs))
	for i, m := range msgs {
		prepared[i], got[i] = m.p, m.uid
	}
	return prepared, got, nil
}

// where names a message as an IMAP URL (RFC 5092) for logs and errors.
func (w *Watcher) where(uidValidity uint32, uid imap.UID) string {
	return fmt.Sprintf("imap://%s@%s/%s;UIDVALIDITY=%d/;UID=%d", w.opts.User, w.opts.Addr, w.opts.Mailbox, uidValidity, uid)
}

// idle waits with IDLE (RFC 2177) until the server announces new mail,
// IdleRefresh passes or ctx is cancelled, then ends the IDLE.
func (w *Watcher) idle(ctx context.Context, c *imapclient.Client) error {
	g := w.guard(c)
	cmd, err := c.Idle()
	g.stop()
	if err != nil {
		return fmt.Errorf("cannot start IDLE: %w", err)
	}
	refresh := w.opts.IdleRefresh
	if w.unsaved {
		refresh = min(refresh, 10*w.opts.MinBackoff) // to write the state again soon
	}
	t := time.NewTimer(refresh)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-w.wake:
	case <-t.C:
	case <-c.Closed():
		cmd.Close()
		return errors.New("connection closed by the server")
	}
	g = w.guard(c)
	defer g.stop()
	if err := cmd.Close(); err != nil {
		return fmt.Errorf("cannot end IDLE: %w", err)
	}
	if err := cmd.Wait(); err != nil {
		return fmt.Errorf("IDLE failed: %w", err)
	}
	return nil
}

// poll waits PollInterval (or until ctx is cancelled), then sends a NOOP,
// for servers without IDLE (RFC 9051 section 6.1.2: NOOP lets the server
// announce new messages).
func (w *Watcher) poll(ctx context.Context, c *imapclient.Client) error {
	t := time.NewTimer(w.opts.PollInterval)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return nil
	case <-w.wake:
	case <-t.C:
	case <-c.Closed():
		return errors.New("connection closed by the server")
	}
	g := w.guard(c)
	defer g.stop()
	if err := c.Noop().Wait(); err != nil {
		return fmt.Errorf("cannot poll: %w", err)
	}
	return nil
}

// guard closes c when the server stays silent for CommandTimeout: a command
// on a connection dropped without RST (by a NAT) would wait for ever.
type guard struct {
	t *time.Timer
	d time.Duration
}

func (w *Watcher) guard(c *imapclient.Client) *guard {
	return &guard{d: w.opts.CommandTimeout, t: time.AfterFunc(w.opts.CommandTimeout, func() {
		w.log.Warn("server silent; closing the connection", "timeout", w.opts.CommandTimeout)
		c.Close()
	})}
}

// touch pushes the deadline back: data is flowing.
func (g *guard) touch() { g.t.Reset(g.d) }
func (g *guard) stop()  { g.t.Stop() }
