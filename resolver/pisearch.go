package resolver

// public-inbox's request rules for searches (lib/PublicInbox/WWW.pm,
// SearchView.pm, Mbox.pm of public-inbox 1.9), as b4 and lei send them:
//
//	/{list}/?q=Q&x=m        the matches as mboxrd, gzip (GET or POST; b4's
//	                        searchmask, lei's "lei q -I URL")
//	... &t=1                the whole threads of the matches (lei q -t,
//	                        b4's searchmask)
//	POST body "x=..."       whole threads too, as public-inbox reads its
//	                        form's "full threads" button (any x= but x=0)
//	/{list}/?q=Q&x=A        the matches as an Atom feed
//	/{list}/{message-id}/?q=Q&x=m (POST, or GET with x=m or x=A)
//	                        the matches within that message's thread
//
// The search is the archive's own (catalog.ParseQuery, Catalog.Search):
// a query it cannot answer is a 400 that says why, one that does not
// finish in its time a 503 (searchBusy). Every answer is
// bounded: the newest maxMboxResults matches, and with t=1 at most
// maxMboxThreads of their threads and maxMboxMessages messages in all,
// each streamed from the store one at a time (streamMbox).

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
)

// Bounds of a search's whole threads (t=1).
const (
	// maxMboxThreads is how many threads of the matches are read, those
	// of the newest first.
	maxMboxThreads = 200
	// maxMboxMessages is how many messages the threads give at most
	// (the matches themselves are always in).
	maxMboxMessages = 5000
)

// piParams are the query parameters of a public-inbox request.
type piParams struct {
	q string
	// x is the view: "m" (mboxrd.gz), "A" (Atom), else a page.
	x string
	// threads: whole threads of the matches (t=1, or a POST body x=...).
	threads bool
	// given: there was a q parameter at all (an empty one included).
	given bool
}

// readPIParams reads a request's parameters as public-inbox does
// (WWW.pm, call): pairs split at "&" or ";", "+" as a space, escapes
// undone, the last of a name winning; a POST body is read only for its
// first three bytes, "x=" and not "x=0" asking for whole threads
// (SearchView.pm, mbox_results).
func readPIParams(r *http.Request) piParams {
	var p piParams
	for _, pair := range strings.FieldsFunc(r.URL.RawQuery, func(c rune) bool { return c == '&' || c == ';' }) {
		k, v, _ := strings.Cut(pair, "=")
		if u, err := url.QueryUnescape(v); err == nil {
			v = u
		} // else as it is, as public-inbox's uri_unescape leaves it
		switch k {
		case "q":
			p.q, p.given = v, true
		case "x":
			p.x = v
		case "t":
			p.threads = v != "" && v != "0"
		}
	}
	if r.Method == http.MethodPost && r.Body != nil {
		var b [3]byte
		n, _ := io.ReadFull(r.Body, b[:])
		if n == 3 && b[0] == 'x' && b[1] == '=' && b[2] != '0' {
			p.threads = true
		}
	}
	p.q = strings.TrimSpace(p.q)
	return p
}

// piSearch answers a search at /{list}/ (thread nil), or at
// /{list}/{message-id}/ within that message's thread: the matches as
// mboxrd or Atom. Within a thread, only the thread's list and the span
// of its dates are searched, and the matches outside it dropped.
func (s *Server) piSearch(w http.ResponseWriter, r *http.Request, c *catalog.Catalog, list string, p piParams, thread *catalog.Thread) {
	if p.q == "" {
		s.fail(w, r, http.StatusBadRequest, "Give the search in ?q=.")
		return
	}
	q, err := catalog.ParseQuery(p.q)
	if errors.Is(err, catalog.ErrQuery) {
		s.fail(w, r, http.StatusBadRequest, "This search cannot be run: "+strings.TrimPrefix(err.Error(), catalog.ErrQuery.Error()+": "))
		return
	}
	if err != nil {
		s.failCatalog(w, r, err, "")
		return
	}
	// A list's search is that list's, unless the query names lists
	// itself (as /search?list= does).
	if list != allLists && len(q.Lists) == 0 {
		q.Lists = []string{list}
	}
	var inThread map[string]bool
	if thread != nil {
		inThread = map[string]bool{}
		lo, hi := time.Time{}, time.Time{}
		for _, n := range thread.Nodes {
			if m := n.Message; m != nil {
				inThread[m.CallNumber] = true
				if lo.IsZero() || m.Date.Before(lo) {
					lo = m.Date
				}
				if m.Date.After(hi) {
					hi = m.Date
				}
			}
		}
		// Only the thread's list and dates need be searched.
		if len(q.Lists) > 0 && !slices.Contains(q.Lists, thread.List) {
			s.fail(w, r, http.StatusNotFound, "No message of this thread matches this search.")
			return
		}
		q.Lists = []string{thread.List}
		if !lo.IsZero() {
			lo = lo.Truncate(time.Second)
			hi = hi.Truncate(time.Second).Add(time.Second)
			if q.After == nil || q.After.Before(lo) {
				q.After = &lo
			}
			if q.Before == nil || q.Before.After(hi) {
				q.Before = &hi
			}
		}
	}
	limit := maxMboxResults
	if p.x == "A" {
		limit = feedEntries
		if thread != nil {
			limit = maxMboxResults // the thread's are among them
		}
	}
	done, ok := s.searchTurn(w, r)
	if !ok {
		return
	}
	res, err := c.Search(r.Context(), q, catalog.SearchOptions{Sort: catalog.Newest, Limit: limit, CountLimit: 1})
	done()
	if errors.Is(err, catalog.ErrSearchCost) {
		s.searchBusy(w, r) // 503, as the search pages answer
		return
	}
	if err != nil {
		s.failCatalog(w, r, err, "")
		return
	}
	matches := res.Messages
	if thread != nil {
		matches = slices.DeleteFunc(matches, func(m catalog.Message) bool { return !inThread[m.CallNumber] })
	}
	if p.x == "A" {
		s.searchFeed(w, r, list, p.q, matches[:min(len(matches), feedEntries)])
		return
	}
	if len(matches) == 0 {
		s.fail(w, r, http.StatusNotFound, "No message matches this search.")
		return
	}
	var cns []string
	switch {
	case p.threads && thread != nil:
		cns = threadNumbers([]*catalog.Thread{thread})
	case p.threads:
		cns, ok = s.matchThreads(w, r, c, matches)
		if !ok {
			return
		}
	default:
		cns = make([]string, len(matches))
		for i, m := range matches {
			cns[len(cns)-1-i] = m.CallNumber // oldest first, as in an mbox
		}
	}
	name := "results-" + p.q
	if p.threads {
		name = "results-thread-" + p.q
	}
	s.streamMbox(w, r, safeFileName(name)+".mbox.gz", cns)
}

// matchThreads returns the call numbers of the threads of matches (newest
// first), in date order, within maxMboxThreads and maxMboxMessages; the
// matches are all in.
func (s *Server) matchThreads(w http.ResponseWriter, r *http.Request, c *catalog.Catalog, matches []catalog.Message) ([]string, bool) {
	seen := map[string]bool{}
	var msgs []*catalog.Message
	add := func(m *catalog.Message) {
		if !seen[m.CallNumber] {
			seen[m.CallNumber] = true
			msgs = append(msgs, m)
		}
	}
	threads := 0
	for i := range matches {
		m := &matches[i]
		if seen[m.CallNumber] {
			continue // in a thread read already
		}
		if threads >= maxMboxThreads || len(msgs) >= maxMboxMessages {
			add(m)
			continue
		}
		th, err := c.Thread(r.Context(), m.CallNumber)
		if errors.Is(err, catalog.ErrNotFound) {
			add(m) // removed meanwhile: streamMbox says so
			continue
		}
		if err != nil {
			s.failCatalog(w, r, err, "")
			return nil, false
		}
		threads++
		add(m)
		for _, n := range th.Nodes {
			if n.Message != nil && len(msgs) < maxMboxMessages+len(matches) {
				add(n.Message)
			}
		}
	}
	sortByDate(msgs)
	cns := make([]string, len(msgs))
	for i, m := range msgs {
		cns[i] = m.CallNumber
	}
	return cns, true
}

// threadNumbers returns the call numbers of the threads' messages, each
// once, in date order.
func threadNumbers(threads []*catalog.Thread) []string {
	seen := map[string]bool{}
	var msgs []*catalog.Message
	for _, th := range threads {
		for _, n := range th.Nodes {
			if n.Message != nil && !seen[n.Message.CallNumber] {
				seen[n.Message.CallNumber] = true
				msgs = append(msgs, n.Message)
			}
		}
	}
	sortByDate(msgs)
	cns := make([]string, len(msgs))
	for i, m := range msgs {
		cns[i] = m.CallNumber
	}
	return cns
}

// searchTurn waits for a search's turn, as the search pages do (search.go):
// searches take turns on the catalog's search connections, each turn
// followed by a rest as long. done ends the turn.
func (s *Server) searchTurn(w http.ResponseWriter, r *http.Request) (done func(), ok bool) {
	select {
	case s.searching <- struct{}{}:
		start := time.Now()
		return func() {
			time.AfterFunc(time.Since(start), func() { <-s.searching })
		}, true
	case <-r.Context().Done():
		s.fail(w, r, http.StatusServiceUnavailable, "cancelled")
		return nil, false
	}
}

// searchFeed writes a search's newest matches as an Atom feed (x=A): a
// search followed without subscribing.
func (s *Server) searchFeed(w http.ResponseWriter, r *http.Request, list, query string, msgs []catalog.Message) {
	base := s.baseURL(r)
	v := url.Values{"q": {query}}
	self := url.Values{"q": {query}, "x": {"A"}}
	if list != allLists {
		v.Set("list", list)
	}
	s.writeFeed(w, r, atomFeed{
		ID:       base + r.URL.EscapedPath() + "?" + self.Encode(),
		Title:    "Search: " + query,
		Subtitle: "Messages of " + list + " that match, newest first",
		Links: []atomLink{
			{Rel: "self", Type: "application/atom+xml", Href: base + r.URL.EscapedPath() + "?" + self.Encode()},
			{Rel: "alternate", Type: "text/html", Href: base + "/search?" + v.Encode()},
		},
	}, msgs)
}

// allFeed is GET /all/new.atom: the newest messages of every list.
func (s *Server) allFeed(w http.ResponseWriter, r *http.Request) {
	httpserve.SetRoute(w, "GET /all/new.atom")
	c, ok := s.catalogFor(w, r)
	if !ok {
		return
	}
	lists, err := c.Lists(r.Context())
	if err != nil {
		s.failCatalog(w, r, err, "")
		return
	}
	var msgs []catalog.Message
	for _, l := range lists {
		recent, err := c.Recent(r.Context(), l.Name, feedEntries)
		if err != nil {
			s.failCatalog(w, r, err, "")
			return
		}
		msgs = append(msgs, recent...)
	}
	slices.SortStableFunc(msgs, func(a, b catalog.Message) int { return b.Arrived.Compare(a.Arrived) })
	msgs = msgs[:min(len(msgs), feedEntries)]
	base := s.baseURL(r)
	s.writeFeed(w, r, atomFeed{
		ID:       base + "/all/",
		Title:    "all",
		Subtitle: "Messages of every list, newest first",
		Links: []atomLink{
			{Rel: "self", Type: "application/atom+xml", Href: base + "/all/new.atom"},
			{Rel: "alternate", Type: "text/html", Href: base + "/"},
		},
	}, msgs)
}

// safeFileName makes a search a download's file name: letters, digits,
// '.', '-' and '_', the rest '_', at most 100 bytes.
func safeFileName(s string) string {
	b := []byte(s)
	for i, c := range b {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '-' || c == '_') {
			b[i] = '_'
		}
	}
	return string(b[:min(len(b), 100)])
}
