package resolver

// Routes of public-inbox (https://public-inbox.org/), the software of
// lore.kernel.org, beside the archive's own, so that the tools kernel
// developers use against lore (b4, lei, a browser's habits) work here
// unchanged, given the archive's address (b4's midmask and linkmask:
// docs/reading.md):
//
//	GET /{list}/{message-id}              301 to /{list}/{message-id}/, under the list that has it
//	GET /{list}/{message-id}/             302 to /{callnumber}, the message's page
//	GET /{list}/{message-id}/raw          the message (its copies with that ID) as mboxrd text
//	GET /{list}/{message-id}/t.mbox.gz    its thread as mboxrd, gzip
//	GET /{list}/{message-id}/T/, /t/      302 to its thread's page
//	GET /{list}/{message-id}/t.atom       its thread's Atom feed
//	GET /{list}/?q=...&x=m (or POST)      the messages a search finds, as mboxrd, gzip;
//	                                      x=A as Atom; t=1 their threads (pisearch.go)
//	POST /{list}/{message-id}/?q=...&x=m  the matches within its thread
//	GET /{list}/new.atom                  the list's Atom feed (all: every list's)
//	GET /{list}/_/text/help/              the search's help (pihelp.go)
//	GET /r/{message-id}                   to /{list}/{message-id}/, its list's (lore's short links)
//
// {list} is a list of the archive, or "all", every list. A Message-ID is
// one path segment, percent-encoded as b4 writes it (Python's
// quote_plus: "/" as %2F). A message archived in another list than the
// one named is found all the same: Message-IDs are the same everywhere
// (a message sent to two lists has a copy in each; /{list}/ picks that
// list's).

import (
	"errors"
	"io"
	"net/http"
	"net/url"
	"slices"
	"strings"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

// allLists is public-inbox's name of every list.
const allLists = "all"

// reservedFirst are the first path segments of the archive's own routes:
// never a list here.
var reservedFirst = []string{"m", "l", "t", "api", "static", "search", "go"}

// maxThreadsAll bounds the threads /all/{message-id}/t.mbox.gz joins (one
// per copy of a cross-posted message).
const maxThreadsAll = 8

// publicInbox serves /{list}/... (first is the list, rest what follows
// it in the path, unescaped) and reports false for a path that is none of
// its routes.
func (s *Server) publicInbox(w http.ResponseWriter, r *http.Request, first, rest string) bool {
	if first != allLists && (!catalog.ValidListName(first) || slices.Contains(reservedFirst, first)) {
		return false
	}
	switch {
	case rest == "":
		s.piList(w, r, first)
		return true
	case first == shortLinks:
		return s.piShortLink(w, r)
	case rest == "new.atom" && first == allLists:
		s.allFeed(w, r)
		return true
	case rest == "new.atom":
		httpserve.SetRoute(w, "GET /{list}/new.atom")
		http.Redirect(w, r, "/l/"+first+"/atom.xml", http.StatusMovedPermanently)
		return true
	case rest == "_/text" || strings.HasPrefix(rest, "_/text/"):
		s.piText(w, r, first, rest)
		return true
	}
	// The Message-ID is the first segment of the escaped path after the
	// list: it may hold an escaped "/".
	esc := strings.TrimPrefix(r.URL.EscapedPath(), "/"+url.PathEscape(first)+"/")
	if esc == r.URL.EscapedPath() {
		esc = strings.TrimPrefix(r.URL.EscapedPath(), "/"+first+"/")
	}
	seg, suffix, slash := strings.Cut(esc, "/")
	if slash && suffix == "" {
		suffix = "/"
	}
	id, err := url.PathUnescape(seg)
	if err != nil || !strings.Contains(id, "@") && suffix == "" {
		return false
	}
	id = mailmsg.NormalizeMessageID(id)
	if id == "" {
		return false
	}
	switch suffix {
	case "", "/":
	case "raw", "t.mbox.gz", "T/", "t/", "T", "t", "t.atom":
	default:
		return false
	}
	// A search within the message's thread: POSTed (liblore, a
	// public-inbox form), or asked for with x=m or x=A.
	var p piParams
	if suffix == "/" {
		p = readPIParams(r)
		if r.Method == http.MethodPost || p.given && (p.x == "m" || p.x == "A") {
			suffix = "?q"
		}
	} else if r.Method == http.MethodPost {
		return false
	}
	if suffix == "?q" {
		httpserve.SetRoute(w, "POST /{list}/{message-id}/?x=m")
	} else {
		httpserve.SetRoute(w, "GET /{list}/{message-id}/"+strings.TrimSuffix(suffix, "/"))
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return true
	}
	copies, err := c.Copies(r.Context(), id)
	if err != nil {
		s.failCatalog(w, r, err, "")
		return true
	}
	if len(copies) == 0 {
		s.fail(w, r, http.StatusNotFound, "No message in this archive has that Message-ID.")
		return true
	}
	// This list's copies, else every copy (it is in another list).
	mine := copies
	if first != allLists {
		mine = nil
		for _, m := range copies {
			if m.List == first {
				mine = append(mine, m)
			}
		}
		if len(mine) == 0 {
			mine = copies
		}
	}
	here := mine[0]
	switch suffix {
	case "":
		list := first
		if list != allLists && here.List != list || list == allLists {
			list = here.List
		}
		http.Redirect(w, r, s.baseURL(r)+"/"+list+"/"+url.PathEscape(id)+"/", http.StatusMovedPermanently)
	case "/":
		http.Redirect(w, r, "/"+here.CallNumber, http.StatusFound)
	case "T/", "t/", "T", "t":
		http.Redirect(w, r, "/t/"+here.CallNumber+"/#m"+here.CallNumber, http.StatusFound)
	case "t.atom":
		http.Redirect(w, r, "/t/"+here.CallNumber+"/atom.xml", http.StatusFound)
	case "raw":
		cns := make([]string, len(mine))
		for i, m := range mine {
			cns[i] = m.CallNumber
		}
		s.streamRawMbox(w, r, cns)
	case "t.mbox.gz":
		s.piThreadMbox(w, r, c, mine)
	case "?q":
		th, err := c.Thread(r.Context(), here.CallNumber)
		if err != nil {
			s.failCatalog(w, r, err, "No message in this archive has that Message-ID.")
			return true
		}
		if p.q == "" {
			// No search: the whole thread.
			s.streamMbox(w, r, "t.mbox.gz", threadNumbers([]*catalog.Thread{th}))
			return true
		}
		s.piSearch(w, r, c, here.List, p, th)
	}
	return true
}

// shortLinks is lore's first path segment of a message's short link
// (/r/{message-id}, b4's linkmask): never a list here.
const shortLinks = "r"

// piShortLink is /r/{message-id}[/]: a redirect to the message under its
// list, /{list}/{message-id}/, as lore's are (to /all/ there; here the
// list is known).
func (s *Server) piShortLink(w http.ResponseWriter, r *http.Request) bool {
	esc := strings.TrimPrefix(r.URL.EscapedPath(), "/"+shortLinks+"/")
	seg, suffix, _ := strings.Cut(esc, "/")
	id, err := url.PathUnescape(seg)
	if err != nil || suffix != "" {
		return false
	}
	httpserve.SetRoute(w, "GET /r/{message-id}")
	if id = mailmsg.NormalizeMessageID(id); id == "" {
		s.fail(w, r, http.StatusNotFound, "That is not a Message-ID.")
		return true
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return true
	}
	copies, err := c.Copies(r.Context(), id)
	if err != nil {
		s.failCatalog(w, r, err, "")
		return true
	}
	if len(copies) == 0 {
		s.fail(w, r, http.StatusNotFound, "No message in this archive has that Message-ID.")
		return true
	}
	http.Redirect(w, r, s.baseURL(r)+"/"+copies[0].List+"/"+url.PathEscape(id)+"/", http.StatusMovedPermanently)
	return true
}

// piThreadMbox writes the threads of the given copies of a message, one
// file, every message once, in date order.
func (s *Server) piThreadMbox(w http.ResponseWriter, r *http.Request, c *catalog.Catalog, copies []catalog.Message) {
	seen := map[string]bool{}
	var msgs []*catalog.Message
	for _, m := range copies[:min(len(copies), maxThreadsAll)] {
		if seen[m.CallNumber] {
			continue // in a thread read already
		}
		th, err := c.Thread(r.Context(), m.CallNumber)
		if errors.Is(err, catalog.ErrNotFound) {
			continue
		}
		if err != nil {
			s.failCatalog(w, r, err, "")
			return
		}
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
	s.streamMbox(w, r, "t.mbox.gz", cns)
}

// piList is /{list}/: a search's messages as mboxrd with x=m (or a POST,
// as b4 and lei send), as Atom with x=A (pisearch.go), else the search's
// page, or the list's.
func (s *Server) piList(w http.ResponseWriter, r *http.Request, list string) {
	httpserve.SetRoute(w, "GET /{list}/")
	p := readPIParams(r)
	if list != allLists {
		if c := s.catalog(r.Context()); c != nil {
			if _, err := c.List(r.Context(), list); errors.Is(err, catalog.ErrNotFound) {
				s.fail(w, r, http.StatusNotFound, noSuchList(list))
				return
			}
		}
	}
	search := url.Values{}
	search.Set("q", p.q)
	if list != allLists {
		search.Set("list", list)
	}
	switch {
	case p.x == "m" || p.x == "A" || r.Method == http.MethodPost:
		if p.x == "A" {
			httpserve.SetRoute(w, "GET /{list}/?x=A")
		} else {
			httpserve.SetRoute(w, "GET /{list}/?x=m")
		}
		c, ok := s.catalogFor(w, r)
		if !ok {
			return
		}
		s.piSearch(w, r, c, list, p, nil)
	case p.q != "":
		http.Redirect(w, r, "/search?"+search.Encode(), http.StatusFound)
	case list == allLists:
		http.Redirect(w, r, "/", http.StatusFound)
	default:
		http.Redirect(w, r, "/l/"+list+"/", http.StatusFound)
	}
}

// streamRawMbox writes messages as mboxrd text, as public-inbox's /raw
// does (every copy with the Message-ID, each after its From_ line),
// spooled and served as a download is (spoolMbox).
func (s *Server) streamRawMbox(w http.ResponseWriter, r *http.Request, cns []string) {
	sp, release, ok := s.spoolMbox(w, r, cns, false)
	if !ok {
		return
	}
	defer release()
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", sp.info.(string))
	sp.serve(s.stream(w), r)
}

// writeMboxrd writes one message in mboxrd (package mbox).
func writeMboxrd(w io.Writer, from string, raw []byte) error {
	mw := mbox.NewWriter(w)
	if err := mw.WriteMessage(from, raw); err != nil {
		return err
	}
	return mw.Flush()
}
