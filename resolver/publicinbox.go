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
//	GET /{list}/?q=...&x=m (or POST)      the messages a search finds, as mboxrd, gzip
//	GET /{list}/new.atom                  the list's Atom feed
//
// {list} is a list of the archive, or "all", every list. A Message-ID is
// one path segment, percent-encoded as b4 writes it (Python's
// quote_plus: "/" as %2F). A message archived in another list than the
// one named is found all the same: Message-IDs are the same everywhere
// (a message sent to two lists has a copy in each; /{list}/ picks that
// list's).

import (
	"errors"
	"fmt"
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
	if rest == "" {
		s.piList(w, r, first)
		return true
	}
	if rest == "new.atom" {
		httpserve.SetRoute(w, "GET /{list}/new.atom")
		http.Redirect(w, r, "/l/"+first+"/atom.xml", http.StatusMovedPermanently)
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
	httpserve.SetRoute(w, "GET /{list}/{message-id}/"+strings.TrimSuffix(suffix, "/"))
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
	}
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
// as b4 sends), else the list's page, or the search's.
func (s *Server) piList(w http.ResponseWriter, r *http.Request, list string) {
	httpserve.SetRoute(w, "GET /{list}/")
	q := r.URL.Query()
	if list != allLists {
		if c := s.catalog(); c != nil {
			if _, err := c.List(r.Context(), list); errors.Is(err, catalog.ErrNotFound) {
				s.fail(w, r, http.StatusNotFound, noSuchList(list))
				return
			}
		}
	}
	search := url.Values{}
	search.Set("q", q.Get("q"))
	if list != allLists {
		search.Set("list", list)
	}
	switch {
	case q.Get("x") == "m" || r.Method == http.MethodPost:
		if q.Get("q") == "" {
			s.fail(w, r, http.StatusBadRequest, "Give the search in ?q=.")
			return
		}
		// The search's own handler, with the list as its scope.
		u := *r.URL
		u.Path, u.RawQuery = "/search", search.Encode()
		r2 := r.Clone(r.Context())
		r2.URL = &u
		s.searchMbox(w, r2)
	case q.Get("q") != "":
		http.Redirect(w, r, "/search?"+search.Encode(), http.StatusFound)
	case list == allLists:
		http.Redirect(w, r, "/", http.StatusFound)
	default:
		http.Redirect(w, r, "/l/"+list+"/", http.StatusFound)
	}
}

// streamRawMbox writes messages as mboxrd text, as public-inbox's /raw
// does (every copy with the Message-ID, each after its From_ line).
func (s *Server) streamRawMbox(w http.ResponseWriter, r *http.Request, cns []string) {
	var b strings.Builder
	for _, cn := range cns {
		m, err := s.getByText(r.Context(), cn)
		if err != nil {
			s.failStore(w, r, err)
			return
		}
		if err := writeMboxrd(&b, fromLine(m), m.Raw); err != nil {
			s.fail(w, r, http.StatusInternalServerError, fmt.Sprintf("The message could not be written: %v", err))
			return
		}
	}
	h := w.Header()
	h.Set("Content-Type", "text/plain; charset=utf-8")
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Cache-Control", "no-cache")
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write([]byte(b.String()))
	}
}

// writeMboxrd writes one message in mboxrd (package mbox).
func writeMboxrd(w io.Writer, from string, raw []byte) error {
	mw := mbox.NewWriter(w)
	if err := mw.WriteMessage(from, raw); err != nil {
		return err
	}
	return mw.Flush()
}
