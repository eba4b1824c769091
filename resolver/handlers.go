package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// Versions of the rendered representations, part of their ETags: bump one
// when its output changes so that revalidating clients get the new form.
const (
	htmlVersion = "h2"
	jsonVersion = "j2"
)

// maxListed bounds the messages listed for one shared Message-ID.
const maxListed = 200

// errorPage is what error.html shows.
type errorPage struct {
	Status  int
	Title   string
	Message string
}

// fail answers a request with an error: an HTML page, or JSON for the API.
func (s *Server) fail(w http.ResponseWriter, r *http.Request, status int, msg string) {
	h := w.Header()
	h.Del("ETag")
	h.Del("Cache-Control")
	h.Del("Content-Disposition")
	h.Set("Content-Security-Policy", csp)
	if status == http.StatusServiceUnavailable && h.Get("Retry-After") == "" {
		h.Set("Retry-After", "1")
	}
	if strings.HasPrefix(r.URL.Path, "/api/") {
		httpserve.WriteJSON(w, status, map[string]string{"error": msg})
		return
	}
	s.render(w, r, status, "error.html", errorPage{Status: status, Title: http.StatusText(status), Message: msg})
}

// failStore answers for an error of the store.
func (s *Server) failStore(w http.ResponseWriter, r *http.Request, err error) {
	var removed *store.RemovedError
	switch {
	case errors.As(err, &removed):
		s.gone(w, r, removed.Removal)
	case errors.Is(err, store.ErrNotFound):
		s.fail(w, r, http.StatusNotFound, "There is no such message. No message in this archive has that call number.")
	case busy(err):
		s.log.Warn("store busy", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusServiceUnavailable, "The archive is busy; try again in a moment.")
	case errors.Is(err, context.Canceled), r.Context().Err() != nil:
		// The client went away; nobody reads the answer.
		s.fail(w, r, http.StatusServiceUnavailable, "cancelled")
	default:
		s.log.Error("store error", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The archive could not read that message.")
	}
}

// gone answers 410 for a removed message, with the date and reason of
// its removal. Caches may keep the answer a day: a removal is for good.
func (s *Server) gone(w http.ResponseWriter, r *http.Request, rm store.Removal) {
	msg := "This message was removed from the archive on " + rm.Removed.UTC().Format(dateLayout)
	if rm.Reason != "" {
		// Isolated (U+2068 ... U+2069), so that a reason recorded before
		// CheckReason refused direction marks cannot turn the text
		// around it.
		msg += ": \u2068" + rm.Reason + "\u2069"
	}
	msg += ". Its call number stays, and names no other message."
	h := w.Header()
	h.Del("ETag")
	h.Del("Content-Disposition")
	h.Set("Content-Security-Policy", csp)
	h.Set("Cache-Control", "public, max-age=86400")
	if strings.HasPrefix(r.URL.Path, "/api/") {
		httpserve.WriteJSON(w, http.StatusGone, removalJSON{Error: msg, CallNumber: rm.Number.String(), RemovedAt: rm.Removed.UTC(), Reason: rm.Reason})
		return
	}
	s.render(w, r, http.StatusGone, "error.html", errorPage{Status: http.StatusGone, Title: "Removed", Message: msg})
}

// removalJSON is a removal as the API shows it (GET /api/v1/removals, and
// a removed message's 410).
type removalJSON struct {
	Error      string    `json:"error,omitempty"`
	CallNumber string    `json:"callnumber"`
	RemovedAt  time.Time `json:"removed_at"`
	Reason     string    `json:"reason"`
}

// removals lists the removals: what was taken down, when and why.
func (s *Server) removals(w http.ResponseWriter, r *http.Request) {
	out := []removalJSON{}
	list, err := s.st.Removals(r.Context())
	if err != nil {
		s.failStore(w, r, err)
		return
	}
	for _, x := range list {
		out = append(out, removalJSON{CallNumber: x.Number.String(), RemovedAt: x.Removed.UTC(), Reason: x.Reason})
	}
	w.Header().Set("Cache-Control", "no-cache")
	httpserve.WriteJSON(w, http.StatusOK, out)
}

// busy reports a store that could not answer in time: the bolt store could
// not get its file lock (another process held it longer than the store
// waits), or the operation ran out of time.
func busy(err error) bool {
	return errors.Is(err, store.ErrUnavailable) || errors.Is(err, context.DeadlineExceeded)
}

// lookup resolves text and gets its message, or answers with the error.
func (s *Server) lookup(w http.ResponseWriter, r *http.Request, text string) (store.Stored, callnumber.Fields, bool) {
	n, f, err := s.codecs.resolve(r.Context(), text)
	if errors.Is(err, ErrMalformed) {
		s.fail(w, r, http.StatusBadRequest, malformed(err))
		return store.Stored{}, f, false
	}
	if err != nil {
		s.failStore(w, r, err)
		return store.Stored{}, f, false
	}
	m, err := s.st.Get(r.Context(), n)
	if err != nil {
		s.failStore(w, r, err)
		return store.Stored{}, f, false
	}
	return m, f, true
}

// notModified sets the validators of an immutable message response and
// answers 304 when the client already has it (RFC 9110 section 13.1.2:
// If-None-Match uses the weak comparison).
func notModified(w http.ResponseWriter, r *http.Request, d store.Digest, version string) bool {
	return notModifiedAs(w, r, d, version, immutable)
}

// notModifiedAs is notModified with another Cache-Control.
func notModifiedAs(w http.ResponseWriter, r *http.Request, d store.Digest, version, cacheControl string) bool {
	etag := `"` + d.String()
	if version != "" {
		etag += "-" + version
	}
	etag += `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", cacheControl)
	if etagMatch(r.Header.Get("If-None-Match"), etag) {
		w.WriteHeader(http.StatusNotModified)
		return true
	}
	return false
}

func etagMatch(header, etag string) bool {
	for _, t := range strings.Split(header, ",") {
		t = strings.TrimSpace(t)
		if t == "*" || strings.TrimPrefix(t, "W/") == etag {
			return true
		}
	}
	return false
}

func (s *Server) render(w http.ResponseWriter, r *http.Request, status int, name string, data any) {
	var b bytes.Buffer
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("cannot render page", "template", name, "path", r.URL.EscapedPath(), "err", err)
		http.Error(w, "internal error", http.StatusInternalServerError)
		return
	}
	writeHTML(w, status, b.Bytes())
}

// writeHTML answers with the page body.
func writeHTML(w http.ResponseWriter, status int, body []byte) {
	w.Header().Set("Content-Type", "text/html; charset=utf-8")
	w.Header().Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(status)
	w.Write(body)
}

// twoSegments dispatches /m/{message-id}, /{callnumber}/raw,
// /{callnumber}/attachments/{n}/{name} and the routes of public-inbox
// (publicinbox.go).
func (s *Server) twoSegments(w http.ResponseWriter, r *http.Request) {
	first, rest := r.PathValue("first"), r.PathValue("rest")
	switch {
	case first == "m":
		httpserve.SetRoute(w, "GET /m/{message-id}")
		s.byMessageID(w, r, rest)
	case rest == "raw":
		httpserve.SetRoute(w, "GET /{callnumber}/raw")
		s.raw(w, r, first)
	case strings.HasPrefix(rest, "attachments/"):
		httpserve.SetRoute(w, "GET /{callnumber}/attachments/{n}/{name}")
		s.attachment(w, r, first, strings.TrimPrefix(rest, "attachments/"))
	case s.servePIExport(w, r, first, rest):
	case s.publicInbox(w, r, first, rest):
	default:
		httpserve.SetRoute(w, "unmatched")
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address.")
	}
}

// link is a call number with what identifies its message to a reader.
type link struct {
	CallNumber string
	MessageID  string
	Subject    string
	From       string
	Date       string
}

// describe fills in the subject, sender and date of the message raw.
func (l *link) describe(raw []byte, opts mailview.Options) {
	for _, f := range mailview.ParseHeader(raw, opts).Fields {
		switch f.Name {
		case "Subject":
			l.Subject = f.Value
		case "From":
			l.From = f.Value
		case "Date":
			l.Date = f.Value
		}
	}
}

type pageData struct {
	CallNumber string
	Title      string
	View       *mailview.Message
	List       string
	InReplyTo  []link
	References []link
	// Nav is the message's place in its thread and list; nil without a
	// catalog, or before it has indexed the message.
	Nav *navigation
	// Replies says whether the message names a parent at all (else a
	// tree parent is only the thread's start, joined by subject).
	Replies bool
	// Sender is the writer of a message whose From a list rewrote
	// (catalog.RealSender); nil otherwise.
	Sender *catalog.Sender
	// Diffstat is what its patches change; nil without one.
	Diffstat *diffstat
	// Reply says how to answer it; nil when the list's address is not
	// known.
	Reply *replyInfo
	// Copies are the same message (its Message-ID) archived in other
	// lists.
	Copies []catalog.Message
}

func (s *Server) page(w http.ResponseWriter, r *http.Request) {
	cn := r.PathValue("callnumber")
	m, _, ok := s.lookup(w, r, cn)
	if !ok {
		return
	}
	// The message never changes, its place among others does: with a
	// catalog, the page is revalidated, its ETag naming both.
	nav := s.navigate(r.Context(), m.Number.String())
	if nav == nil && notModified(w, r, m.Digest, htmlVersion) ||
		nav != nil && notModifiedAs(w, r, m.Digest, htmlVersion+"-"+fingerprint(nav), "no-cache") {
		return
	}
	d, complete := s.pageData(r.Context(), m, nav)
	// A page is kept only whole: without its place in the thread (not
	// indexed yet) or a link the store did not answer for, it is not.
	if complete && nav != nil {
		cacheable(w)
	}
	b := pageBuffers.Get().(*pageWriter)
	defer putPageBuffer(b)
	writePage(b, &d)
	writeHTML(w, http.StatusOK, b.Bytes())
}

// pageBuffers keep message pages' buffers for the next page, writeHTML
// having copied what they hold.
var pageBuffers = sync.Pool{New: func() any { return new(pageWriter) }}

// maxPooledPage bounds the buffers kept: a page of a large message
// should not hold its memory for good.
const maxPooledPage = 256 << 10

func putPageBuffer(b *pageWriter) {
	if b.Cap() <= maxPooledPage {
		b.Reset()
		pageBuffers.Put(b)
	}
}

// pageData gathers what the page of message m shows, nav its place (nil
// without one), and reports whether the store answered every lookup.
func (s *Server) pageData(ctx context.Context, m store.Stored, nav *navigation) (pageData, bool) {
	v := mailview.Parse(m.Raw, s.opts.View)
	d := pageData{CallNumber: m.Number.String(), Title: v.Subject, View: v, List: m.List}
	if d.Title == "" {
		d.Title = "(no subject)"
	}
	// At most MaxReferences lookups, In-Reply-To first, then the last
	// References: the closest ancestors (RFC 5322 section 3.6.4). Not
	// when the thread says what the message replies to: the page shows
	// that instead (and each lookup is a read of the store).
	complete := true
	if nav == nil || nav.Parent == nil && nav.ParentRemoved == nil && nav.MissingParent == "" {
		budget := s.opts.MaxReferences
		inReplyTo := firstUnique(v.InReplyTo, nil, &budget)
		refs := v.References
		if len(refs) > budget {
			refs = refs[len(refs)-budget:]
		}
		refs = firstUnique(refs, inReplyTo, &budget)
		var found map[string][]callnumber.Number
		found, complete = s.archived(ctx, append(slices.Clip(inReplyTo), refs...))
		d.InReplyTo = links(inReplyTo, found, m.Number)
		d.References = links(refs, found, m.Number)
	}
	d.Nav, d.Replies = nav, len(v.InReplyTo)+len(v.References) > 0
	if nav == nil || nav.Parent == nil {
		complete = s.label(ctx, d.InReplyTo) && complete
	}
	if nav == nil {
		complete = s.label(ctx, d.References) && complete
	}
	snd := catalog.RealSender(v.Header)
	if snd.Via != "" {
		d.Sender = &snd
	}
	d.Diffstat = diffstatOf(v)
	listAddr := ""
	if nav != nil {
		listAddr, d.Copies = nav.ListAddress, nav.Copies
	}
	d.Reply = replyTo(v, listAddr, snd)
	return d, complete
}

// label fills in the subject, sender and date of linked messages: from
// the catalog when it has them, else from their header in the store. It
// reports whether the store gave every one it was asked for.
func (s *Server) label(ctx context.Context, ls []link) bool {
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i := range ls {
		l := &ls[i]
		if c := s.catalog(ctx); c != nil && s.cats.Status().Broken == "" {
			if m, err := c.Message(ctx, l.CallNumber); err == nil {
				l.Subject, l.From, l.Date = m.Subject, m.From(), m.Date.Format(dateTimeLayout)
				continue
			}
		}
		wg.Go(func() {
			m, err := s.getByText(ctx, l.CallNumber)
			if err != nil {
				failed.Store(true)
				return
			}
			l.describe(m.Raw, s.opts.View)
		})
	}
	wg.Wait()
	return !failed.Load()
}

// firstUnique returns the ids not in skip, without repeats, at most
// *budget of them (which it decreases).
func firstUnique(ids, skip []string, budget *int) []string {
	var out []string
	for _, id := range ids {
		if *budget <= 0 {
			break
		}
		if slices.Contains(skip, id) || slices.Contains(out, id) {
			continue
		}
		out = append(out, id)
		*budget--
	}
	return out
}

// links returns links to the archived messages with the given Message-IDs,
// other than self, in the order of ids.
func links(ids []string, found map[string][]callnumber.Number, self callnumber.Number) []link {
	var out []link
	for _, id := range ids {
		for _, n := range found[id] {
			if n != self {
				out = append(out, link{CallNumber: n.String(), MessageID: id})
			}
		}
	}
	return out
}

// archived looks up the call numbers of the messages with the given
// Message-IDs, all at once: on a bbolt store shared with a writer, every
// lookup may wait for the writer's batch, and concurrent lookups wait for
// the same one instead of one each. It reports whether every lookup was
// answered.
func (s *Server) archived(ctx context.Context, ids []string) (map[string][]callnumber.Number, bool) {
	found := make([][]callnumber.Number, len(ids))
	var wg sync.WaitGroup
	var failed atomic.Bool
	for i, id := range ids {
		wg.Go(func() {
			ns, err := s.st.ByMessageID(ctx, id)
			if err != nil {
				s.log.Warn("cannot look up a referenced message", "err", err)
				failed.Store(true)
				return
			}
			found[i] = ns
		})
	}
	wg.Wait()
	m := make(map[string][]callnumber.Number, len(ids))
	for i, id := range ids {
		m[id] = found[i]
	}
	return m, !failed.Load()
}

func (s *Server) raw(w http.ResponseWriter, r *http.Request, cn string) {
	// A large message is served from a file that its readers share (see
	// spoolThreshold).
	sp, first, release := s.spools.join("raw/" + cn)
	defer release()
	if !first && sp.wait(r.Context()) && sp.f != nil {
		if !rawHeader(w, r, sp.digest, sp.info.(string)) {
			sp.serve(s.stream(w), r)
		}
		return
	}
	m, _, ok := s.lookup(w, r, cn)
	if first && (!ok || len(m.Raw) <= spoolThreshold) {
		sp.skip()
	}
	if !ok {
		return
	}
	if first && len(m.Raw) > spoolThreshold {
		name := m.Number.String()
		err := s.spools.make(r.Context(), sp, m.Digest, func(_ context.Context, w io.Writer) (any, error) {
			_, err := w.Write(m.Raw)
			return name, err
		})
		m = store.Stored{} // the readers share the file
		if err != nil {
			s.failStore(w, r, err)
			return
		}
		if !rawHeader(w, r, sp.digest, name) {
			sp.serve(s.stream(w), r)
		}
		return
	}
	if rawHeader(w, r, m.Digest, m.Number.String()) {
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(m.Raw)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(m.Raw)
	}
}

// rawHeader sets the header fields of a raw message named name (its call
// number), and answers 304 (true) when the reader has it.
func rawHeader(w http.ResponseWriter, r *http.Request, d store.Digest, name string) bool {
	h := w.Header()
	h.Set("Content-Security-Policy", rawCSP)
	if notModified(w, r, d, "") {
		return true
	}
	h.Set("Content-Type", "message/rfc822")
	// The name is the call number: nothing from the mail reaches a header.
	h.Set("Content-Disposition", `inline; filename="`+name+`.eml"`)
	return false
}

// messageJSON is the body of GET /api/v1/messages/{callnumber}.
type messageJSON struct {
	CallNumber string           `json:"callnumber"`
	Version    uint8            `json:"version"`
	Run        uint32           `json:"run"`
	Sequence   uint16           `json:"sequence"`
	MessageID  string           `json:"message_id"`
	List       string           `json:"list"`
	Digest     string           `json:"digest"`
	Size       int              `json:"size"`
	Added      *time.Time       `json:"added,omitempty"`
	Subject    string           `json:"subject"`
	InReplyTo  []string         `json:"in_reply_to"`
	References []string         `json:"references"`
	Headers    []mailview.Field `json:"headers"`
	// Thread is what the message page shows of its thread; absent when
	// the catalog cannot say (none, not built yet, not indexed yet).
	Thread *placeJSON `json:"thread,omitempty"`
	// PatchVersion is the version of a patch its subject says (1 for
	// "[PATCH]", 3 for "[PATCH v3 2/7]"); absent for a message that is
	// not a patch, or when the catalog cannot say.
	PatchVersion int `json:"patch_version,omitempty"`
	// Versions are the patch's other versions, the lowest first (the
	// first posting of each); absent when it has none.
	Versions []versionJSON `json:"versions,omitempty"`
	// Diffstat is what this version changes (of a cover letter, its
	// series' patches together); only beside versions, and absent when
	// the archive has no diff of it.
	Diffstat *catalog.Diffstat `json:"diffstat,omitempty"`
}

// versionJSON is another version of a patch.
type versionJSON struct {
	CallNumber string    `json:"callnumber"`
	Version    int       `json:"version"`
	Subject    string    `json:"subject"`
	Date       time.Time `json:"date"`
	// Diffstat is what that version changes (of a cover letter, its
	// series' patches together); absent when the archive has no diff.
	Diffstat *catalog.Diffstat `json:"diffstat,omitempty"`
}

// placeJSON is a message's place in its thread and list, as its page
// shows it (navigation): null links where there is none.
type placeJSON struct {
	// CallNumber and Subject are the thread's: its first archived
	// message, the subject it goes by.
	CallNumber string `json:"callnumber"`
	Subject    string `json:"subject"`
	Messages   int    `json:"messages"`
	Position   int    `json:"position"` // 1-based, in reading order
	List       string `json:"list"`
	Month      string `json:"month"` // yyyy-mm, of the message
	// Parent is the message this one answers (or, for a message naming
	// none, the one its subject joins); null for the thread's start.
	Parent *linkJSON `json:"parent"`
	// MissingParent is the Message-ID of the message this one answers
	// when the archive does not have it.
	MissingParent string     `json:"missing_parent,omitempty"`
	PrevInThread  *linkJSON  `json:"prev_in_thread"`
	NextInThread  *linkJSON  `json:"next_in_thread"`
	PrevByDate    *linkJSON  `json:"prev_by_date"` // in the list
	NextByDate    *linkJSON  `json:"next_by_date"`
	Replies       []linkJSON `json:"replies"`
}

// linkJSON is another message, as a link to it shows it.
type linkJSON struct {
	CallNumber string    `json:"callnumber"`
	Subject    string    `json:"subject"`
	From       string    `json:"from"`
	Date       time.Time `json:"date"`
}

func linkJSONOf(l *msgLink) *linkJSON {
	if l == nil {
		return nil
	}
	return &linkJSON{CallNumber: l.CallNumber, Subject: l.Subject, From: l.From, Date: l.Date}
}

func placeOf(nav *navigation) *placeJSON {
	p := &placeJSON{
		CallNumber: nav.ThreadCN, Subject: nav.ThreadSubject, Messages: nav.ThreadMessages, Position: nav.Position,
		List: nav.List, Month: nav.Month, Parent: linkJSONOf(nav.Parent), MissingParent: nav.MissingParent,
		PrevInThread: linkJSONOf(nav.PrevInThread), NextInThread: linkJSONOf(nav.NextInThread),
		PrevByDate: linkJSONOf(nav.PrevByDate), NextByDate: linkJSONOf(nav.NextByDate),
		Replies: []linkJSON{},
	}
	for i := range nav.Replies {
		p.Replies = append(p.Replies, *linkJSONOf(&nav.Replies[i]))
	}
	return p
}

func (s *Server) messageJSON(w http.ResponseWriter, r *http.Request) {
	m, f, ok := s.lookup(w, r, r.PathValue("callnumber"))
	if !ok {
		return
	}
	// As for the page: the message never changes, its place does.
	nav := s.navigate(r.Context(), m.Number.String())
	if nav == nil && notModified(w, r, m.Digest, jsonVersion) ||
		nav != nil && notModifiedAs(w, r, m.Digest, jsonVersion+"-"+fingerprint(nav), "no-cache") {
		return
	}
	v := mailview.ParseHeader(m.Raw, s.opts.View)
	out := messageJSON{
		CallNumber: m.Number.String(), Version: f.Version, Run: f.Run, Sequence: f.Sequence,
		MessageID: m.MessageID, List: m.List, Digest: m.Digest.String(), Size: len(m.Raw),
		Subject: v.Subject, InReplyTo: v.InReplyTo, References: v.References, Headers: v.Header,
	}
	if !m.Added.IsZero() {
		t := m.Added.UTC()
		out.Added = &t
	}
	if out.Headers == nil {
		out.Headers = []mailview.Field{}
	}
	if nav != nil {
		out.Thread = placeOf(nav)
		out.PatchVersion = nav.PatchVersion
		for _, v := range nav.Versions {
			out.Versions = append(out.Versions, versionJSON{CallNumber: v.CallNumber, Version: v.Version, Subject: v.Subject, Date: v.Date, Diffstat: v.Stat})
		}
		out.Diffstat = nav.Stat
	}
	httpserve.WriteJSON(w, http.StatusOK, out)
}

type listData struct {
	MessageID string
	Messages  []link
	More      bool
}

func (s *Server) byMessageID(w http.ResponseWriter, r *http.Request, text string) {
	id := mailmsg.NormalizeMessageID(text)
	if id == "" {
		s.fail(w, r, http.StatusNotFound, "No message in this archive has that Message-ID.")
		return
	}
	ns, err := s.st.ByMessageID(r.Context(), id)
	if err != nil {
		s.failStore(w, r, err)
		return
	}
	switch len(ns) {
	case 0:
		s.fail(w, r, http.StatusNotFound, "No message in this archive has that Message-ID.")
		return
	case 1:
		http.Redirect(w, r, "/"+ns[0].String(), http.StatusFound)
		return
	}
	d := listData{MessageID: id, More: len(ns) > maxListed}
	for _, n := range ns[:min(len(ns), maxListed)] {
		l := link{CallNumber: n.String(), MessageID: id}
		if m, err := s.st.Get(r.Context(), n); err == nil {
			l.describe(m.Raw, s.opts.View)
		}
		d.Messages = append(d.Messages, l)
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.render(w, r, http.StatusOK, "list.html", d)
}

type statsJSON struct {
	Messages int64 `json:"messages"`
	// Catalog are the catalog's totals and its follower's state, when
	// there is a catalog.
	Catalog *catalog.Stats `json:"catalog,omitempty"`
}

func (s *Server) stats(w http.ResponseWriter, r *http.Request) {
	n, err := s.st.Count(r.Context())
	if err != nil {
		s.failStore(w, r, err)
		return
	}
	out := statsJSON{Messages: n}
	if c := s.catalog(r.Context()); c != nil {
		if st, err := c.Stats(r.Context()); err == nil {
			out.Catalog = &st
		} else {
			s.noticeDamage(c, err)
			s.log.Warn("cannot read the catalog's totals", "err", err)
		}
	}
	w.Header().Set("Cache-Control", "no-cache")
	httpserve.WriteJSON(w, http.StatusOK, out)
}

// healthz answers 200 when the store can be read now, 503 otherwise. It
// reads the store (its message count) rather than anything cached, so
// that a store that became unreadable (a compaction stopped half-way, a
// Riak cluster out of reach) is reported while it is so. The reason is
// logged when it changes, not at every probe. A store with consensus
// groups (Riak) is also asked whether they all serve: while some do not,
// reads go on (200) but imports and new runs wait, and the answer says so
// on a second line, with the command that shows the groups.
func (s *Server) healthz(w http.ResponseWriter, r *http.Request) {
	ctx, cancel := context.WithTimeout(r.Context(), 5*time.Second)
	defer cancel()
	w.Header().Set("Cache-Control", "no-store")
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	_, err := s.st.Count(ctx)
	var claims error
	if c, ok := s.st.(interface{ Consensus(context.Context) error }); ok && err == nil {
		claims = c.Consensus(ctx)
	}
	if (err != nil || claims != nil) && r.Context().Err() != nil {
		return // the prober went away
	}
	why := ""
	if err != nil {
		why = err.Error()
	} else if claims != nil {
		why = "claims"
	}
	if old := s.unhealthy.Swap(&why); old == nil || *old != why {
		if err != nil {
			s.log.Error("health check failed: the store cannot be read", "err", err)
		} else if claims != nil {
			s.log.Error("health check: messages can be read, but imports and new runs wait", "err", claims)
		} else if old != nil {
			s.log.Info("health check passes again: the store can be read")
		}
	}
	if err != nil {
		w.WriteHeader(http.StatusServiceUnavailable)
		fmt.Fprintln(w, "store unavailable (the resolver's log says why)")
		return
	}
	fmt.Fprintln(w, "ok")
	if claims != nil {
		fmt.Fprintf(w, "claims unavailable, imports and new runs wait: %v\n", claims)
	}
}

func (s *Server) stylesheet(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/css; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("Content-Length", strconv.Itoa(len(s.style)))
	w.Write(s.style)
}
