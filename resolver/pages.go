package resolver

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// Page sizes.
const (
	// threadsPerPage is how many threads a list page shows.
	threadsPerPage = 50
	// messagesPerThreadPage is how many messages (with their text) a
	// thread page shows; longer threads are paged.
	messagesPerThreadPage = 50
	// maxTreeRows is how much of a thread's tree a message page draws
	// whole; a larger thread shows the message's ancestors, siblings and
	// replies.
	maxTreeRows = 40
	// maxSiblings and maxReplies bound those of a large thread's tree.
	maxSiblings, maxReplies = 10, 30
)

// listName reads the {list} of the path. A malformed name is 400; a name
// that is well formed once lower-cased redirects there.
func (s *Server) listName(w http.ResponseWriter, r *http.Request) (string, bool) {
	name := r.PathValue("list")
	if catalog.ValidListName(name) {
		return name, true
	}
	if low := strings.ToLower(name); catalog.ValidListName(low) {
		// The segments before the list's are lower-case words, so the
		// first "/"+name (it has an upper-case letter) is the list's.
		u := *r.URL
		u.Path, u.RawPath = strings.Replace(u.Path, "/"+name, "/"+low, 1), ""
		http.Redirect(w, r, u.RequestURI(), http.StatusMovedPermanently)
		return "", false
	}
	s.fail(w, r, http.StatusBadRequest, "Not a list name: list names are lower-case letters, digits, '.', '_' and '-'.")
	return "", false
}

// month reads a yyyy-mm month; a malformed one is 400.
func (s *Server) month(w http.ResponseWriter, r *http.Request, text string) (int, time.Month, bool) {
	y, m, ok := catalog.ParseMonth(text)
	if !ok {
		s.fail(w, r, http.StatusBadRequest, "Not a month: months are written yyyy-mm, as in 2024-03.")
	}
	return y, m, ok
}

// pageNumber reads ?page=N (1 when absent); anything but a positive
// number is 400.
func (s *Server) pageNumber(w http.ResponseWriter, r *http.Request) (int, bool) {
	v := r.URL.Query().Get("page")
	if v == "" {
		return 0, true
	}
	n, err := strconv.Atoi(v)
	if err != nil || n < 1 || n > 1_000_000 {
		s.fail(w, r, http.StatusBadRequest, "Not a page number: ?page= takes 1, 2, 3 ...")
		return 0, false
	}
	return n, true
}

func noSuchList(name string) string {
	return fmt.Sprintf("There is no list named %q in this archive.", name)
}

// ---- the index -------------------------------------------------------

type indexData struct {
	Messages int64
	Known    bool
	Lists    []listEntry
	// NoCatalog says why the lists are not shown ("" when they are).
	NoCatalog string
}

func (s *Server) index(w http.ResponseWriter, r *http.Request) {
	d := indexData{}
	if n, err := s.st.Count(r.Context()); err == nil {
		d.Messages, d.Known = n, true
	} else {
		s.log.Warn("cannot count messages", "err", err)
	}
	switch c, st := s.catalog(r.Context()), s.cats.Status(); {
	case c == nil && st.Rebuilding != nil:
		d.NoCatalog = building(st.Rebuilding, true) + "; they will be here when it is done. Every message can still be opened by its call number or Message-ID."
	case c == nil || st.Broken != "":
		d.NoCatalog = "The lists of this archive cannot be shown right now; every message can still be opened by its call number or Message-ID."
	case st.Building != nil:
		d.NoCatalog = building(st.Building, false) + "; they will be here when it is done. Every message can already be opened by its call number or Message-ID."
	default:
		lists, err := s.listEntries(r.Context(), c)
		if err != nil {
			s.noticeDamage(c, err)
			s.log.Warn("cannot read the lists", "err", err)
			d.NoCatalog = "The lists of this archive cannot be shown right now."
		}
		d.Lists = lists
	}
	w.Header().Set("Cache-Control", "no-cache")
	s.render(w, r, http.StatusOK, "index.html", d)
}

// listsJSON is GET /api/v1/lists.
func (s *Server) listsJSON(w http.ResponseWriter, r *http.Request) {
	c, ok := s.catalogFor(w, r)
	if !ok {
		return
	}
	lists, err := s.listEntries(r.Context(), c)
	if err != nil {
		s.failCatalog(w, r, err, "")
		return
	}
	s.writeFresh(w, r, struct {
		Lists []listEntry `json:"lists"`
	}{lists})
}

// listEntry is a list as the front page and /api/v1/lists show it.
type listEntry struct {
	catalog.List
	Recent *recent `json:"last_30_days"`
}

// listEntries returns the lists, described, each with its recent
// activity.
func (s *Server) listEntries(ctx context.Context, c *catalog.Catalog) ([]listEntry, error) {
	lists, err := c.Lists(ctx)
	if err != nil {
		return nil, err
	}
	gen, err := c.Generation(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]listEntry, len(lists))
	for i, l := range lists {
		s.describe(&l)
		out[i].List = l
		if out[i].Recent, err = s.recentOf(ctx, c, gen, l.Name); err != nil {
			return nil, err
		}
	}
	return out, nil
}

// ---- a list ----------------------------------------------------------

// listView is a page of a list: GET /l/{list}/ and its JSON twin.
type listView struct {
	List    catalog.List            `json:"list"`
	Page    int                     `json:"page"`
	Pages   int                     `json:"pages"`
	Threads []catalog.ThreadSummary `json:"threads"`
	Months  []catalog.Month         `json:"months"`
	// Posters are who wrote most in the list's last year (the twelve
	// months to its newest message), on its first page; People is how
	// many wrote then, from the month Since.
	Posters []posterLink `json:"posters,omitempty"`
	People  int          `json:"people,omitempty"`
	Since   string       `json:"since,omitempty"` // yyyy-mm
	// Recent is the list's activity of its last 30 days, on its first
	// page.
	Recent *recent `json:"last_30_days,omitempty"`
}

// posterLink is a poster, with the search of their messages to the list.
type posterLink struct {
	catalog.Poster
	Search string `json:"-"`
}

// topPosters is how many posters a list's first page names.
const topPosters = 10

func (s *Server) listView(w http.ResponseWriter, r *http.Request) (*listView, bool) {
	name, ok := s.listName(w, r)
	if !ok {
		return nil, false
	}
	page, ok := s.pageNumber(w, r)
	if !ok {
		return nil, false
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return nil, false
	}
	ctx := r.Context()
	l, err := c.List(ctx, name)
	if err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return nil, false
	}
	s.describe(&l)
	v := &listView{List: l, Page: max(page, 1)}
	threads, total, err := c.Threads(ctx, name, (v.Page-1)*threadsPerPage, threadsPerPage)
	if err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return nil, false
	}
	v.Threads, v.Pages = threads, max(1, (total+threadsPerPage-1)/threadsPerPage)
	if v.Page > v.Pages {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("List %s has %d pages of threads; there is no page %d.", name, v.Pages, v.Page))
		return nil, false
	}
	if v.Months, err = c.Months(ctx, name); err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return nil, false
	}
	if v.Page == 1 {
		gen, err := c.Generation(ctx)
		if err == nil {
			v.Recent, err = s.recentOf(ctx, c, gen, name)
		}
		if err != nil {
			s.failCatalog(w, r, err, noSuchList(name))
			return nil, false
		}
	}
	if v.Page == 1 && len(v.Months) > 0 {
		newest := v.Months[0]
		since := time.Date(newest.Year, newest.Month-11, 1, 0, 0, 0, 0, time.UTC)
		posters, people, err := c.Posters(ctx, name, since, topPosters)
		if err != nil {
			s.failCatalog(w, r, err, noSuchList(name))
			return nil, false
		}
		v.People, v.Since = people, since.Format("2006-01")
		for _, p := range posters {
			who := p.Address
			if who == "" {
				who = `"` + strings.ReplaceAll(p.Name, `"`, ``) + `"`
			}
			v.Posters = append(v.Posters, posterLink{Poster: p, Search: "/search?q=" + url.QueryEscape("from:"+who+" list:"+name)})
		}
	}
	return v, true
}

func (s *Server) listPage(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.listView(w, r); ok {
		s.renderFresh(w, r, "listpage.html", v)
	}
}

func (s *Server) listJSON(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.listView(w, r); ok {
		s.writeFresh(w, r, v)
	}
}

// listFile dispatches GET /l/{list}/{file}: the feed, a month's download,
// and a month without its slash.
func (s *Server) listFile(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	switch {
	case file == "atom.xml":
		httpserve.SetRoute(w, "GET /l/{list}/atom.xml")
		s.cachedPage(s.feed)(w, r)
	case strings.HasSuffix(file, ".mbox.gz"):
		httpserve.SetRoute(w, "GET /l/{list}/{month}.mbox.gz")
		s.monthMbox(w, r, strings.TrimSuffix(file, ".mbox.gz"))
	default:
		httpserve.SetRoute(w, "GET /l/{list}/{month}")
		if _, ok := s.listName(w, r); !ok {
			return
		}
		if _, _, ok := s.month(w, r, file); ok {
			http.Redirect(w, r, r.URL.Path+"/", http.StatusMovedPermanently)
		}
	}
}

// ---- a month ---------------------------------------------------------

// monthView is GET /l/{list}/{yyyy}-{mm}/ and its JSON twin.
type monthView struct {
	List     string                  `json:"list"`
	Year     int                     `json:"year"`
	Month    time.Month              `json:"month"`
	Messages int                     `json:"messages"`
	Threads  []catalog.ThreadSummary `json:"threads"`
	// Prev and Next are the months before and after with messages.
	Prev *catalog.Month `json:"prev,omitempty"`
	Next *catalog.Month `json:"next,omitempty"`
}

func (s *Server) monthView(w http.ResponseWriter, r *http.Request) (*monthView, bool) {
	name, ok := s.listName(w, r)
	if !ok {
		return nil, false
	}
	y, m, ok := s.month(w, r, r.PathValue("month"))
	if !ok {
		return nil, false
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return nil, false
	}
	ctx := r.Context()
	months, err := c.Months(ctx, name)
	if err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return nil, false
	}
	if len(months) == 0 {
		s.fail(w, r, http.StatusNotFound, noSuchList(name))
		return nil, false
	}
	v := &monthView{List: name, Year: y, Month: m}
	found := false
	for i, mo := range months { // newest first
		if mo.Year == y && mo.Month == m {
			found, v.Messages = true, mo.Messages
			if i+1 < len(months) {
				v.Prev = &months[i+1]
			}
			if i > 0 {
				v.Next = &months[i-1]
			}
		}
	}
	if !found {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("List %s has no messages in %s %d.", name, m, y))
		return nil, false
	}
	if v.Threads, err = c.MonthThreads(ctx, name, y, m); err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return nil, false
	}
	return v, true
}

func (s *Server) monthPage(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.monthView(w, r); ok {
		s.renderFresh(w, r, "month.html", v)
	}
}

func (s *Server) monthJSON(w http.ResponseWriter, r *http.Request) {
	if v, ok := s.monthView(w, r); ok {
		s.writeFresh(w, r, v)
	}
}

// ---- a thread --------------------------------------------------------

// threadView is GET /t/{callnumber}/: one page of a thread's messages,
// with their text.
type threadView struct {
	CallNumber string
	// Self is this page's path, for links to the messages on it.
	Self   string
	Thread *catalog.Thread
	Page   int
	Pages  int
	// View is viewNested or viewFlat; ViewQuery is "&view=flat" for the
	// flat one, which every link to another page of it carries.
	View, ViewQuery string
	// Canonical is the one URL of what the page shows.
	Canonical    string
	Participants []Participant
	Replies      int
	Entries      []threadEntry
	// Outline is the whole thread in a line per message (who said
	// what), for a thread of outlineFrom messages or more.
	Outline []outlineRow
	// OutlineCut says the outline stops at maxOutline rows.
	OutlineCut bool
	// OutlineOpen shows the outline unfolded: on a thread's first page,
	// when it is short enough not to push the messages screens down.
	OutlineOpen bool
}

// outlineRow is a message of a thread's outline.
type outlineRow struct {
	Depth int
	// Href is the message on the thread's pages.
	Href, From, Subject string
	Date                time.Time
	// Here says the message is on this page.
	Here bool
	// Placeholder is set for a message the thread names and does not
	// have (Href, From and Date empty): Removed says when it was removed,
	// nil for one never archived.
	Placeholder bool
	Removed     *catalog.Removed
}

// Bounds of a thread's outline.
const (
	outlineFrom = 5
	maxOutline  = 500
	// openOutline is the most rows an outline shows unfolded.
	openOutline = 30
)

// outline returns a thread's outline (nil for a short thread).
func outline(th *catalog.Thread, cn string, page int, pageOf func(j int) int, viewQuery string) ([]outlineRow, bool) {
	if th.Messages < outlineFrom {
		return nil, false
	}
	var rows []outlineRow
	bases := baseSubjects{}
	for j, n := range th.Nodes {
		if len(rows) == maxOutline {
			return rows, true
		}
		if n.Message == nil {
			// Its place, so that its replies are not indented under
			// nothing (a removed message keeps its place: docs/removal.md).
			rows = append(rows, outlineRow{Depth: n.Depth, Placeholder: true, Removed: n.Removed})
			continue
		}
		p := pageOf(j)
		href := "/t/" + cn + "/"
		if p > 1 {
			href += "?page=" + strconv.Itoa(p) + viewQuery
		} else if viewQuery != "" {
			href += "?" + viewQuery[1:]
		}
		href += "#m" + n.Message.CallNumber
		row := outlineRow{Depth: n.Depth, Href: href, From: n.Message.From(), Date: n.Message.Date, Here: p == page}
		if newSubject(th, j, bases) || j == 0 {
			row.Subject = listSubject(n.Message.Subject, th.List)
			if row.Subject == "" {
				row.Subject = "(no subject)"
			}
		}
		rows = append(rows, row)
	}
	return rows, false
}

// threadEntry is one node of a thread page.
type threadEntry struct {
	Node    catalog.Node
	Current bool
	// Parent is the message this one answers, when it is in the thread;
	// ParentOnPage says it is on this page too.
	Parent       *catalog.Message
	ParentOnPage bool
	// View is the message as a reader sees it; nil for a placeholder or a
	// message the store could not give.
	View *mailview.Message
	// Unreadable says why View is nil for a message.
	Unreadable string
	// NewSubject says the subject differs from the parent's.
	NewSubject bool
	// Why says why a message its subject placed sits here.
	Why string
}

// thread looks up the thread of the {callnumber} of the path: 400 for a
// malformed number, 404 for no such message, 503 for a message the
// catalog has not indexed yet.
func (s *Server) thread(w http.ResponseWriter, r *http.Request, text string) (*catalog.Thread, string, bool) {
	n, _, err := s.codecs.resolve(r.Context(), text)
	if errors.Is(err, ErrMalformed) {
		s.fail(w, r, http.StatusBadRequest, malformed(err))
		return nil, "", false
	}
	if err != nil {
		s.failStore(w, r, err)
		return nil, "", false
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return nil, "", false
	}
	cn := n.String()
	th, err := c.Thread(r.Context(), cn)
	if errors.Is(err, catalog.ErrNotFound) {
		// Not in the catalog: not in the store either, or not yet.
		if _, err := s.st.Get(r.Context(), n); err != nil {
			s.failStore(w, r, err)
			return nil, "", false
		}
		w.Header().Set("Retry-After", "2")
		s.fail(w, r, http.StatusServiceUnavailable, "This message is archived, but not in the index of threads yet: its thread will be here in a moment.")
		return nil, "", false
	}
	if err != nil {
		s.failCatalog(w, r, err, "")
		return nil, "", false
	}
	return th, cn, true
}

func (s *Server) threadPage(w http.ResponseWriter, r *http.Request) {
	page, ok := s.pageNumber(w, r)
	if !ok {
		return
	}
	view, ok := s.threadViewParam(w, r)
	if !ok {
		return
	}
	th, cn, ok := s.thread(w, r, r.PathValue("callnumber"))
	if !ok {
		return
	}
	v := &threadView{CallNumber: cn, Thread: th, Page: page, View: view}
	if view == viewFlat {
		v.ViewQuery = "&view=" + viewFlat
	}
	order := threadOrder(th, view)
	// pos[j] is node j's place in order, -1 when the view leaves it out.
	pos := make([]int, len(th.Nodes))
	for i := range pos {
		pos[i] = -1
	}
	for i, j := range order {
		pos[j] = i
	}
	v.Pages = max(1, (len(order)+messagesPerThreadPage-1)/messagesPerThreadPage)
	if v.Page == 0 {
		// The page that holds the message the URL names.
		v.Page = 1
		if i := th.Index(cn); i >= 0 && pos[i] >= 0 {
			v.Page = pos[i]/messagesPerThreadPage + 1
		}
	}
	if v.Page > v.Pages {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("This thread has %d pages; there is no page %d.", v.Pages, v.Page))
		return
	}
	v.Self = "/t/" + cn + "/"
	if page != 0 {
		v.Self += "?page=" + strconv.Itoa(page) + v.ViewQuery
	} else if view != viewNested {
		v.Self += "?view=" + view
	}
	// The one URL of what this page shows: no ?page= for the first, no
	// ?view= for the nested view.
	v.Canonical = "/t/" + cn + "/"
	switch {
	case v.Page > 1:
		v.Canonical += "?page=" + strconv.Itoa(v.Page) + v.ViewQuery
	case view != viewNested:
		v.Canonical += "?view=" + view
	}
	v.Participants = participants(th)
	v.Replies = replies(th)
	v.Outline, v.OutlineCut = outline(th, cn, v.Page, func(j int) int { return pos[j]/messagesPerThreadPage + 1 }, v.ViewQuery)
	v.OutlineOpen = v.Page == 1 && len(v.Outline) <= openOutline
	from := (v.Page - 1) * messagesPerThreadPage
	to := min(from+messagesPerThreadPage, len(order))
	v.Entries = make([]threadEntry, to-from)
	var wg sync.WaitGroup
	bases := baseSubjects{}
	for i, j := range order[from:to] {
		n := th.Nodes[j]
		e := &v.Entries[i]
		e.Node = n
		if view == viewFlat {
			e.Node.Depth = 0
		}
		if n.Parent >= 0 {
			e.Parent = th.Nodes[n.Parent].Message
			e.ParentOnPage = pos[n.Parent] >= from && pos[n.Parent] < to
		}
		if n.Message == nil {
			continue
		}
		e.Current = n.Message.CallNumber == cn
		e.NewSubject = newSubject(th, j, bases) || i == 0
		e.Why = why(n.Message)
		// Concurrently: on a bbolt store shared with a writer, the reads
		// wait for the writer's batch together rather than one by one.
		wg.Go(func() {
			m, err := s.getByText(r.Context(), n.Message.CallNumber)
			if err != nil {
				if !errors.Is(err, context.Canceled) {
					s.log.Warn("cannot read a message of a thread", "callnumber", n.Message.CallNumber, "err", err)
				}
				e.Unreadable = "This message cannot be read right now."
				if errors.Is(err, store.ErrNotFound) {
					e.Unreadable = "This message is in the thread's index, but the archive could not give its text."
				}
				return
			}
			// The thread shows how many attachments, not their sizes.
			view := s.opts.View
			view.SkipAttachments = true
			e.View = mailview.Parse(m.Raw, view)
		})
	}
	wg.Wait()
	for _, e := range v.Entries {
		if e.Unreadable != "" {
			dontCache(w) // the store may give it next time
		}
	}
	s.renderFresh(w, r, "thread.html", v)
}

// threadViewParam reads ?view= of a thread page: nested (the default) or
// flat; anything else is a 400 that says which there are.
func (s *Server) threadViewParam(w http.ResponseWriter, r *http.Request) (string, bool) {
	switch v := r.URL.Query().Get("view"); v {
	case "", "nested":
		return viewNested, true
	case viewFlat:
		return viewFlat, true
	default:
		s.fail(w, r, http.StatusBadRequest, "Not a view of a thread: ?view= takes nested (replies under what they answer, the default) or flat (by date).")
		return "", false
	}
}

// getByText gets the message of a call number the catalog gave.
func (s *Server) getByText(ctx context.Context, cn string) (store.Stored, error) {
	n, _, err := s.codecs.resolve(ctx, cn)
	if err != nil {
		return store.Stored{}, err
	}
	return s.st.Get(ctx, n)
}

// threadJSON is GET /api/v1/threads/{callnumber}: the whole tree.
func (s *Server) threadJSON(w http.ResponseWriter, r *http.Request) {
	th, cn, ok := s.thread(w, r, r.PathValue("callnumber"))
	if !ok {
		return
	}
	s.writeFresh(w, r, struct {
		CallNumber string `json:"callnumber"`
		*catalog.Thread
		Replies      int           `json:"replies"`
		Participants []Participant `json:"participants"`
	}{cn, th, replies(th), participants(th)})
}

// threadFile dispatches GET /t/{file}: a thread's download, and a thread
// without its slash.
func (s *Server) threadFile(w http.ResponseWriter, r *http.Request) {
	file := r.PathValue("file")
	if cn, ok := strings.CutSuffix(file, ".mbox.gz"); ok {
		httpserve.SetRoute(w, "GET /t/{callnumber}.mbox.gz")
		s.threadMbox(w, r, cn)
		return
	}
	httpserve.SetRoute(w, "GET /t/{callnumber}")
	if err := CheckSyntax(file); err != nil {
		s.fail(w, r, http.StatusBadRequest, malformed(err))
		return
	}
	http.Redirect(w, r, "/t/"+file+"/", http.StatusMovedPermanently)
}

// ---- a message in its thread -----------------------------------------

// msgLink is a message as a link shows it.
type msgLink struct {
	CallNumber string
	Subject    string
	From       string
	Date       time.Time
}

func linkOf(m *catalog.Message) *msgLink {
	if m == nil {
		return nil
	}
	return &msgLink{CallNumber: m.CallNumber, Subject: m.Subject, From: m.From(), Date: m.Date}
}

// treeRow is one line of the small tree on a message page.
type treeRow struct {
	Depth int
	// Link is nil for a placeholder: a message others answer that the
	// archive does not have.
	Link    *msgLink
	Current bool
	// NewSubject says the subject differs from the parent's (beyond
	// "Re:"): only then is it shown, as mail readers do.
	NewSubject bool
	// Removed is set on a placeholder of a message that was removed.
	Removed *catalog.Removed
	// SameFrom says the parent has the same sender: a row that shows its
	// subject (a patch of a series under its cover letter) leaves the
	// name out.
	SameFrom bool
}

// navigation is a message's place in its thread and list, for its page.
type navigation struct {
	List string
	// Month is the message's month, yyyy-mm, for its month page.
	Month          string
	ThreadCN       string // the thread's first message
	ThreadSubject  string
	ThreadMessages int
	Position       int // 1-based, in reading order
	Tree           []treeRow
	// TreeCut says the tree shows only part of the thread.
	TreeCut bool
	// ThreadPage is the thread page that shows this message.
	ThreadPage                 int
	PrevInThread, NextInThread *msgLink
	PrevByDate, NextByDate     *msgLink
	Parent                     *msgLink
	// MissingParent is the Message-ID of the message this one answers,
	// when the archive does not have it; ParentRemoved says when and why
	// it was removed, if it was.
	MissingParent string
	ParentRemoved *catalog.Removed
	Replies       []msgLink
	// Why says why the message sits where it does when its subject put
	// it there ("" when its references did).
	Why string
	// ListAddress is the list's posting address, "" if unknown.
	ListAddress string
	// Copies are the same message in other lists.
	Copies []catalog.Message
	// PatchVersion is the version of a patch (1 for "[PATCH]", 3 for
	// "[PATCH v3 2/7]"), 0 for a message that is not one; Versions are
	// its other versions (catalog.Versions), the lowest first.
	PatchVersion int
	Versions     []catalog.Version
	// Stat is what the patch changes, of a cover letter what its
	// series' patches change (catalog.VersionStat); read only when it
	// has other versions, nil when the archive has no diff of it.
	Stat *catalog.Diffstat
	// Series says the message is a series' cover letter ("[PATCH v2
	// 0/3]"): its versions are the series'.
	Series bool
}

// why says why a message joined by subject sits where it does.
func why(m *catalog.Message) string {
	switch m.Joined {
	case catalog.JoinedQuoting:
		return "It names no message of this thread (no In-Reply-To or References the archive has), so its subject put it here, under the message it quotes."
	case catalog.JoinedBySubject:
		return "It names no message of this thread (no In-Reply-To or References the archive has), so its subject put it here: a reply to the same subject, days apart at most."
	case catalog.JoinedSeries:
		return "It names no message of this thread (no In-Reply-To or References), so its subject put it here: a patch of the series this thread's cover letter opens, from the same sender just after it."
	case catalog.JoinedSameSubject:
		return "It names no message of this thread (no In-Reply-To or References), so its subject put it here: someone else had asked under the same subject days before."
	}
	return ""
}

// navigate returns the navigation of message cn, or nil when the catalog
// cannot say (none, not ready, not indexed yet, or an error, logged).
func (s *Server) navigate(ctx context.Context, cn string) *navigation {
	c := s.catalog(ctx)
	if st := s.cats.Status(); c == nil || st.Broken != "" || st.Building != nil {
		return nil
	}
	place, err := c.Place(ctx, cn)
	if err != nil {
		s.noticeDamage(c, err)
		if !errors.Is(err, catalog.ErrNotFound) && !errors.Is(err, context.Canceled) {
			s.log.Warn("cannot read a message's thread", "callnumber", cn, "err", err)
		}
		return nil
	}
	th := place.Thread
	i := th.Index(cn)
	if i < 0 { // beyond catalog.MaxThreadMessages
		return nil
	}
	node := th.Nodes[i]
	nav := &navigation{
		List: th.List, Month: node.Message.Date.Format("2006-01"),
		ThreadSubject: th.Subject, ThreadMessages: th.Messages,
		ThreadPage:    i/messagesPerThreadPage + 1,
		PrevInThread:  linkOf(th.Prev(i)),
		NextInThread:  linkOf(th.Next(i)),
		MissingParent: node.MissingParent,
		ParentRemoved: node.Removed,
	}
	for j, n := range th.Nodes {
		if n.Message != nil {
			if nav.ThreadCN == "" {
				nav.ThreadCN = n.Message.CallNumber
			}
			if j <= i {
				nav.Position++
			}
		}
	}
	if node.Parent >= 0 {
		nav.Parent = linkOf(th.Nodes[node.Parent].Message)
	}
	for _, k := range node.Children {
		if m := th.Nodes[k].Message; m != nil {
			nav.Replies = append(nav.Replies, *linkOf(m))
		}
	}
	nav.Tree, nav.TreeCut = tree(th, i)
	nav.Why = why(node.Message)
	nav.PrevByDate, nav.NextByDate = linkOf(place.Prev), linkOf(place.Next)
	nav.ListAddress, nav.Copies = place.ListAddress, place.Copies
	if v, vs, stat, err := c.Versions(ctx, node.Message); err == nil {
		nav.PatchVersion, nav.Versions, nav.Stat = v, vs, stat
		nav.Series = v > 0 && catalog.CoverLetter(node.Message.Subject)
	} else if !errors.Is(err, context.Canceled) {
		s.noticeDamage(c, err)
		s.log.Warn("cannot read the versions of a patch", "callnumber", cn, "err", err)
	}
	return nav
}

// NewerVersion returns the newest of a patch's other versions if it is
// newer than the patch, else nil.
func (nav *navigation) NewerVersion() *catalog.Version {
	if n := len(nav.Versions); n > 0 && nav.Versions[n-1].Version > nav.PatchVersion {
		return &nav.Versions[n-1]
	}
	return nil
}

// Of names what the versions are of: "series" for a cover letter, else
// "patch".
func (nav *navigation) Of() string {
	if nav.Series {
		return "series"
	}
	return "patch"
}

// versionRow is a version of a patch as its page lists it.
type versionRow struct {
	catalog.Version
	Current bool // the patch of the page
}

// VersionRows returns the versions of a patch, its own among them, the
// lowest first.
func (nav *navigation) VersionRows() []versionRow {
	var rows []versionRow
	mine := false
	for _, v := range nav.Versions {
		if !mine && v.Version > nav.PatchVersion {
			rows = append(rows, versionRow{Version: catalog.Version{Version: nav.PatchVersion, Stat: nav.Stat}, Current: true})
			mine = true
		}
		rows = append(rows, versionRow{Version: v})
	}
	if !mine {
		rows = append(rows, versionRow{Version: catalog.Version{Version: nav.PatchVersion, Stat: nav.Stat}, Current: true})
	}
	return rows
}

// tree returns the rows of the small tree of node i: the whole thread
// when it is small, else the node's ancestors, some of its siblings and
// its replies.
func tree(th *catalog.Thread, i int) ([]treeRow, bool) {
	bases := baseSubjects{}
	row := func(j int) treeRow {
		n := th.Nodes[j]
		row := treeRow{Depth: n.Depth, Link: linkOf(n.Message), Current: j == i, NewSubject: newSubject(th, j, bases)}
		if n.Message == nil {
			row.Removed = n.Removed
		} else if n.Parent >= 0 {
			if p := th.Nodes[n.Parent].Message; p != nil {
				row.SameFrom = p.From() == n.Message.From()
			}
		}
		return row
	}
	var rows []treeRow
	if len(th.Nodes) <= maxTreeRows {
		for j := range th.Nodes {
			rows = append(rows, row(j))
		}
		return rows, len(th.Nodes) < th.Messages
	}
	var up []int
	for p := th.Nodes[i].Parent; p >= 0 && len(up) < maxTreeRows; p = th.Nodes[p].Parent {
		up = append(up, p)
	}
	for k := len(up) - 1; k >= 0; k-- {
		rows = append(rows, row(up[k]))
	}
	var siblings []int
	if p := th.Nodes[i].Parent; p >= 0 {
		siblings = th.Nodes[p].Children
	}
	// The siblings around node i, then its replies under it.
	at := 0
	for k, sib := range siblings {
		if sib == i {
			at = k
		}
	}
	lo, hi := max(0, at-maxSiblings/2), min(len(siblings), at+maxSiblings/2+1)
	if len(siblings) == 0 {
		rows = append(rows, row(i))
	}
	for _, sib := range siblings[lo:hi] {
		rows = append(rows, row(sib))
		if sib == i {
			for _, k := range th.Nodes[i].Children[:min(len(th.Nodes[i].Children), maxReplies)] {
				rows = append(rows, row(k))
			}
		}
	}
	if len(siblings) == 0 {
		for _, k := range th.Nodes[i].Children[:min(len(th.Nodes[i].Children), maxReplies)] {
			rows = append(rows, row(k))
		}
	}
	return rows, true
}

// newSubject reports whether node j's subject says more than "Re:" its
// parent's (for a root: the thread's), bases keeping the base subjects
// of the thread's nodes asked before.
func newSubject(th *catalog.Thread, j int, bases baseSubjects) bool {
	n := th.Nodes[j]
	if n.Message == nil {
		return false
	}
	prev := th.Subject
	for p := n.Parent; p >= 0; p = th.Nodes[p].Parent {
		if m := th.Nodes[p].Message; m != nil {
			prev = m.Subject
			break
		}
	}
	return bases.of(n.Message.Subject) != bases.of(prev) || n.Parent < 0 && n.Message.Subject != th.Subject
}

// baseSubjects keeps the base subjects (catalog.BaseSubject) of the
// subjects asked for: a thread's messages mostly share one ("Re: ..."),
// and newSubject asks for each node's and its parent's.
type baseSubjects map[string]string

func (b baseSubjects) of(s string) string {
	base, ok := b[s]
	if !ok {
		base, _ = catalog.BaseSubject(s)
		b[s] = base
	}
	return base
}

// fingerprint is a short hash of what a page shows besides the message
// itself, for its ETag: every field of nav, each string and list with its
// length before it so that no two navigations write the same bytes
// (TestFingerprintFields changes each field in turn). Written by hand: as
// JSON, through reflection, it cost a cold page a few percent.
func fingerprint(nav *navigation) string {
	var f fpWriter
	f.str(nav.List, nav.Month, nav.ThreadCN, nav.ThreadSubject)
	f.num(int64(nav.ThreadMessages), int64(nav.Position), int64(len(nav.Tree)))
	for i := range nav.Tree {
		r := &nav.Tree[i]
		f.num(int64(r.Depth))
		f.link(r.Link)
		f.flag(r.Current, r.NewSubject, r.SameFrom)
		f.removed(r.Removed)
	}
	f.flag(nav.TreeCut)
	f.num(int64(nav.ThreadPage))
	f.link(nav.PrevInThread)
	f.link(nav.NextInThread)
	f.link(nav.PrevByDate)
	f.link(nav.NextByDate)
	f.link(nav.Parent)
	f.str(nav.MissingParent)
	f.removed(nav.ParentRemoved)
	f.num(int64(len(nav.Replies)))
	for i := range nav.Replies {
		f.link(&nav.Replies[i])
	}
	f.str(nav.Why, nav.ListAddress)
	f.num(int64(len(nav.Copies)))
	for i := range nav.Copies {
		m := &nav.Copies[i]
		f.str(m.CallNumber, m.List, m.FromName, m.FromAddr, m.Subject, m.MessageID, m.Via)
		f.time(m.Date, m.Archived, m.Arrived)
		f.num(int64(m.DateSource), m.Size, int64(m.Attachments), int64(m.Joined))
	}
	f.num(int64(nav.PatchVersion), int64(len(nav.Versions)))
	for i := range nav.Versions {
		v := &nav.Versions[i]
		f.str(v.CallNumber, v.Subject)
		f.num(int64(v.Version))
		f.time(v.Date)
		f.stat(v.Stat)
	}
	f.stat(nav.Stat)
	f.flag(nav.Series)
	sum := sha256.Sum256(f.b)
	return base64.RawURLEncoding.EncodeToString(sum[:9])
}

// fpWriter writes the bytes fingerprint hashes.
type fpWriter struct{ b []byte }

func (f *fpWriter) str(ss ...string) {
	for _, s := range ss {
		f.b = binary.AppendUvarint(f.b, uint64(len(s)))
		f.b = append(f.b, s...)
	}
}

func (f *fpWriter) num(ns ...int64) {
	for _, n := range ns {
		f.b = binary.AppendVarint(f.b, n)
	}
}

func (f *fpWriter) flag(bs ...bool) {
	for _, b := range bs {
		if b {
			f.b = append(f.b, 1)
		} else {
			f.b = append(f.b, 0)
		}
	}
}

func (f *fpWriter) time(ts ...time.Time) {
	for _, t := range ts {
		f.num(t.Unix(), int64(t.Nanosecond()))
	}
}

func (f *fpWriter) link(l *msgLink) {
	f.flag(l != nil)
	if l != nil {
		f.str(l.CallNumber, l.Subject, l.From)
		f.time(l.Date)
	}
}

func (f *fpWriter) removed(r *catalog.Removed) {
	f.flag(r != nil)
	if r != nil {
		f.time(r.Date)
		f.str(r.Reason)
	}
}

func (f *fpWriter) stat(d *catalog.Diffstat) {
	f.flag(d != nil)
	if d != nil {
		f.num(int64(d.Patches), int64(d.Files), int64(d.Added), int64(d.Deleted))
	}
}

// ---- responses that change ---------------------------------------------

// renderFresh renders a page that changes as the archive grows: an ETag
// of its bytes, revalidated on every use.
func (s *Server) renderFresh(w http.ResponseWriter, r *http.Request, name string, data any) {
	var b strings.Builder
	if err := templates.ExecuteTemplate(&b, name, data); err != nil {
		s.log.Error("cannot render page", "template", name, "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The page could not be rendered.")
		return
	}
	s.writeBody(w, r, "text/html; charset=utf-8", []byte(b.String()))
}

// writeFresh is renderFresh for JSON.
func (s *Server) writeFresh(w http.ResponseWriter, r *http.Request, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		s.log.Error("cannot encode JSON", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The answer could not be encoded.")
		return
	}
	s.writeBody(w, r, "application/json", append(b, '\n'))
}

func (s *Server) writeBody(w http.ResponseWriter, r *http.Request, contentType string, body []byte) {
	sum := sha256.Sum256(body)
	etag := `W/"` + base64.RawURLEncoding.EncodeToString(sum[:12]) + `"`
	h := w.Header()
	h.Set("ETag", etag)
	h.Set("Cache-Control", "no-cache")
	if cw, ok := w.(*captureWriter); ok {
		cw.fresh = true
	}
	if etagMatch(r.Header.Get("If-None-Match"), strings.TrimPrefix(etag, "W/")) {
		w.WriteHeader(http.StatusNotModified)
		return
	}
	h.Set("Content-Type", contentType)
	h.Set("Content-Length", strconv.Itoa(len(body)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(body)
	}
}

// ---- small files -------------------------------------------------------

// robotsTxt lets crawlers read the pages, and keeps them off what costs
// much and says nothing new: the raw messages, downloads, the JSON and the
// lookups (RFC 9309).
const robotsTxt = `User-agent: *
Disallow: /api/
Disallow: /go
Disallow: /m/
Disallow: /*/raw$
Disallow: /*/attachments/
Disallow: /*.mbox.gz$
`

func (s *Server) robots(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Cache-Control", "public, max-age=86400")
	h.Set("Content-Length", strconv.Itoa(len(robotsTxt)))
	w.Write([]byte(robotsTxt))
}

func (s *Server) favicon(w http.ResponseWriter, r *http.Request) {
	h := w.Header()
	h.Set("Content-Type", "image/x-icon")
	h.Set("Cache-Control", "public, max-age=604800")
	h.Set("Content-Length", strconv.Itoa(len(faviconICO)))
	w.Write(faviconICO)
}

// pathEscape escapes a Message-ID for a /m/ link: one path segment, with
// ':' escaped too, so that no link of the archive's reads as a URL
// scheme ("/m/javascript:x@y" is harmless, but it is not worth a filter's
// doubt).
func pathEscape(s string) string { return strings.ReplaceAll(url.PathEscape(s), ":", "%3A") }
