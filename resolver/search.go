package resolver

import (
	"context"
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailview"
)

// Search pages.
const (
	resultsPerPage = 20
	// excerptBytes is about how much text a result shows.
	excerptBytes = 300
	// excerptTextBytes is how much of a message's text an excerpt is
	// looked for in.
	excerptTextBytes  = 64 << 10
	excerptFirstBytes = 16 << 10
	// maxResultPages bounds how deep a search is paged.
	maxResultPages = 250
	// maxMboxResults is how many messages a search's mbox download
	// (x=m) holds at most: the newest.
	maxMboxResults = 1000
	// countedResults is how many matches a search counts at least (and
	// then at least to the end of the page asked for): past it, a page
	// says "more than" that many. Counting every match of a common word
	// in a whole list's archive (tens of thousands) costs more than
	// finding a page of them.
	countedResults = 1000
)

// searchView is GET /search?q=...: a page of results, and its JSON twin.
type searchView struct {
	Query string `json:"query"`
	// Sort is "newest" or "relevance".
	Sort  string `json:"sort"`
	Page  int    `json:"page"`
	Pages int    `json:"pages"`
	// Total is how many messages match; with More, how many were counted
	// of the more that match.
	Total int  `json:"total"`
	More  bool `json:"more,omitempty"`
	// MorePages: with More, there may be pages after Pages.
	MorePages bool           `json:"more_pages,omitempty"`
	Results   []searchResult `json:"results"`
	// Problem says why the search could not be run ("" if it was).
	Problem string `json:"-"`
	// Groups are the results by thread, in the order of each thread's
	// first result on the page: a thread matched by many of its
	// messages takes one row.
	Groups []resultGroup `json:"-"`
	// Advice says what to try when nothing was found.
	Advice []string `json:"-"`
}

// resultGroup is a result and the others of its thread on the page.
type resultGroup struct {
	First  searchResult
	Others []searchResult
}

// group gathers results by thread.
func group(results []searchResult) []resultGroup {
	var out []resultGroup
	at := map[int64]int{}
	for _, r := range results {
		if i, ok := at[r.ThreadID()]; ok && r.ThreadID() != 0 {
			out[i].Others = append(out[i].Others, r)
			continue
		}
		at[r.ThreadID()] = len(out)
		out = append(out, resultGroup{First: r})
	}
	return out
}

// advice says what to try after a search that found nothing.
func advice(q *catalog.Query) []string {
	var out []string
	positive := 0
	for _, t := range q.Terms {
		if !t.Negated && !t.Or {
			positive++
		}
	}
	if positive > 1 {
		out = append(out, "Every word must match: leave some out, or put OR between words either of which will do (bugs OR crashes).")
	}
	if len(q.Lists) > 0 {
		out = append(out, "Search every list: take out list:.")
	}
	if q.After != nil || q.Before != nil {
		out = append(out, "Widen the dates: take out after: or before:.")
	}
	for _, t := range q.Terms {
		switch {
		case t.Phrase && !t.Negated:
			out = append(out, "A phrase must match word for word: try its words without the quotes.")
		case t.Field == "dfn":
			out = append(out, "dfn: matches a path by its last components (dfn:setup.c, dfn:kernel/setup.c), not the middle of a path.")
		case !t.Prefix && !t.Negated && len(t.Text) > 4 && !t.Phrase:
			out = append(out, "Words match whole: "+t.Text+" does not find "+t.Text+"s; write "+t.Text+"* for every word that starts with it.")
		}
		if len(out) >= 4 {
			break
		}
	}
	return append(out, "Check the spelling; letter case and accents do not matter.")
}

type searchResult struct {
	catalog.Message
	Excerpt []catalog.Fragment `json:"excerpt"`
}

// search runs the query of the request, or answers with the error.
func (s *Server) search(w http.ResponseWriter, r *http.Request, mbox bool) (*searchView, bool) {
	page, ok := s.pageNumber(w, r)
	if !ok {
		return nil, false
	}
	v := &searchView{Query: strings.TrimSpace(r.URL.Query().Get("q")), Sort: "newest", Page: max(page, 1)}
	list := r.URL.Query().Get("list")
	if list == "all" {
		list = "" // public-inbox's name of every list
	}
	if list != "" && !catalog.ValidListName(list) {
		s.fail(w, r, http.StatusBadRequest, "Not a list name: list names are lower-case letters, digits, '.', '_' and '-'.")
		return nil, false
	}
	sort := catalog.Newest
	switch r.URL.Query().Get("sort") {
	case "", "newest":
	case "relevance":
		sort, v.Sort = catalog.Relevance, "relevance"
	default:
		s.fail(w, r, http.StatusBadRequest, "Results are sorted by newest or by relevance: ?sort=newest or ?sort=relevance.")
		return nil, false
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return nil, false
	}
	if v.Query == "" {
		return v, true // the form and its help
	}
	q, err := catalog.ParseQuery(v.Query)
	// The box of a list or month page searches that list (list=NAME)
	// unless the query names lists itself: list:NAME joins the query,
	// where the reader sees it and can take it out.
	if list != "" {
		switch {
		case err == nil && len(q.Lists) == 0:
			q.Lists = []string{list}
			v.Query += " list:" + list
		case err != nil && !mayNameList(v.Query):
			// Keep the list for the query the reader corrects.
			v.Query += " list:" + list
		}
	}
	if errors.Is(err, catalog.ErrQuery) {
		v.Problem = strings.TrimPrefix(err.Error(), catalog.ErrQuery.Error()+": ")
		return v, true
	}
	if err != nil {
		s.failCatalog(w, r, err, "")
		return nil, false
	}
	if v.Page > maxResultPages {
		s.fail(w, r, http.StatusNotFound, "Only the first "+strconv.Itoa(maxResultPages)+" pages of results are shown: narrow the search.")
		return nil, false
	}
	// Searches take turns on half the CPUs (their catalog connections
	// are as many), and each turn is followed by a rest as long: pages
	// have the rest of the machine, however costly and many the
	// searches.
	select {
	case s.searching <- struct{}{}:
		start := time.Now()
		defer func() {
			rest := time.Since(start)
			time.AfterFunc(rest, func() { <-s.searching })
		}()
	case <-r.Context().Done():
		s.fail(w, r, http.StatusServiceUnavailable, "cancelled")
		return nil, false
	}
	opts := catalog.SearchOptions{
		Sort:   sort,
		Offset: (v.Page - 1) * resultsPerPage, Limit: resultsPerPage,
		CountLimit: max(countedResults, v.Page*resultsPerPage),
	}
	if mbox {
		opts = catalog.SearchOptions{Sort: sort, Limit: maxMboxResults, CountLimit: 1}
	}
	res, err := c.Search(r.Context(), q, opts)
	if errors.Is(err, catalog.ErrSearchCost) {
		s.searchBusy(w, r)
		return nil, false
	}
	if err != nil {
		s.failCatalog(w, r, err, "")
		return nil, false
	}
	if mbox {
		v.Results = make([]searchResult, len(res.Messages))
		for i, m := range res.Messages {
			v.Results[i].Message = m
		}
		return v, true
	}
	v.Total, v.More = res.Total, res.More
	if v.Total == 0 {
		v.Advice = advice(q)
	}
	v.Pages = min(maxResultPages, max(1, (res.Total+resultsPerPage-1)/resultsPerPage))
	v.MorePages = res.More && v.Pages < maxResultPages
	if v.Page > v.Pages {
		s.fail(w, r, http.StatusNotFound, "There are "+strconv.Itoa(v.Pages)+" pages of results; there is no page "+strconv.Itoa(v.Page)+".")
		return nil, false
	}
	v.Results = make([]searchResult, len(res.Messages))
	words := q.Words()
	inText := q.SearchesText()
	var wg sync.WaitGroup
	for i, m := range res.Messages {
		v.Results[i].Message = m
		if text, cut, ok := s.texts.get(m.CallNumber); ok {
			ex := catalog.Excerpt(text, words, excerptBytes)
			if !cut || !inText || marked(ex) {
				v.Results[i].Excerpt = ex
				continue
			}
		}
		wg.Go(func() {
			v.Results[i].Excerpt = s.excerpt(r.Context(), m.CallNumber, words, inText)
		})
	}
	wg.Wait()
	v.Groups = group(v.Results)
	return v, true
}

// searchRetryAfter is how long a reader is asked to wait after a search
// that did not finish in its time, in seconds.
const searchRetryAfter = "5"

// searchBusy answers a search that took more than the time one search
// is given (catalog.ErrSearchCost): 503 with Retry-After. The archive
// cannot tell a search the machine was too busy to finish from one that
// costs too much on an idle machine, and the first is no fault of the
// reader's; what the query itself asks for (too many words, a prefix
// the archive does not know) is refused when it is parsed, with a 400.
func (s *Server) searchBusy(w http.ResponseWriter, r *http.Request) {
	w.Header().Set("Retry-After", searchRetryAfter)
	s.fail(w, r, http.StatusServiceUnavailable, "The archive is busy and this search did not finish in the time one search is given: try again in a few seconds. A narrower search (rarer words, a list:, a date range) takes less.")
}

func (s *Server) searchPage(w http.ResponseWriter, r *http.Request) {
	if r.URL.Query().Get("x") == "m" || r.Method == http.MethodPost {
		s.searchMbox(w, r)
		return
	}
	v, ok := s.search(w, r, false)
	if !ok {
		return
	}
	w.Header().Set("Cache-Control", "no-cache")
	status := http.StatusOK
	if v.Problem != "" {
		status = http.StatusBadRequest
	}
	s.render(w, r, status, "search.html", v)
}

// searchMbox is GET (or POST, as public-inbox and b4 ask) /search?q=...&x=m:
// the newest maxMboxResults messages that match, oldest first, as an
// mboxrd download.
func (s *Server) searchMbox(w http.ResponseWriter, r *http.Request) {
	httpserve.SetRoute(w, "GET /search?x=m")
	v, ok := s.search(w, r, true)
	if !ok {
		return
	}
	switch {
	case v.Query == "":
		s.fail(w, r, http.StatusBadRequest, "Give the search in ?q=.")
		return
	case v.Problem != "":
		s.fail(w, r, http.StatusBadRequest, "This search cannot be run: "+v.Problem)
		return
	case len(v.Results) == 0:
		s.fail(w, r, http.StatusNotFound, "No message matches this search.")
		return
	}
	cns := make([]string, len(v.Results))
	for i, m := range v.Results {
		cns[len(cns)-1-i] = m.CallNumber // oldest first, as in an mbox
	}
	s.streamMbox(w, r, "search.mbox.gz", cns)
}

func (s *Server) searchJSON(w http.ResponseWriter, r *http.Request) {
	v, ok := s.search(w, r, false)
	if !ok {
		return
	}
	switch {
	case v.Query == "":
		s.fail(w, r, http.StatusBadRequest, "Give the search in ?q=.")
	case v.Problem != "":
		s.fail(w, r, http.StatusBadRequest, v.Problem)
	default:
		w.Header().Set("Cache-Control", "no-cache")
		httpserve.WriteJSON(w, http.StatusOK, v)
	}
}

// excerpt cuts the excerpt of message cn for words from its text and
// keeps the text for the next search.
func (s *Server) excerpt(ctx context.Context, cn string, words []string, inText bool) []catalog.Fragment {
	stored, err := s.getByText(ctx, cn)
	if err != nil {
		return nil
	}
	ex, text, cut := cutExcerpt(stored.Raw, s.opts.View, words, inText)
	s.texts.put(cn, text, cut)
	return ex
}

// cutExcerpt returns the excerpt of message raw for words, the text it
// was cut from, and whether that text is cut short of excerptTextBytes.
// When the query looks for words in the text (inText), the text is
// decoded up to the first place the excerpt marks (catalog.MatchSeen), at
// most excerptTextBytes; otherwise, or for words MatchSeen does not look
// for, the first excerptFirstBytes, and up to excerptTextBytes only when
// the words are in the text but not there. Decoding the text is most of
// an excerpt's cost, and the words are mostly near the start.
func cutExcerpt(raw []byte, view mailview.Options, words []string, inText bool) (ex []catalog.Fragment, text string, cut bool) {
	// An excerpt needs the text, not the header or the attachments.
	view.SkipAttachments = true
	view.TextOnly = true
	view.MaxTextBytes = excerptFirstBytes
	stopped := false // by MatchSeen
	if inText {
		if seen := catalog.MatchSeen(words, 2*excerptBytes); seen != nil {
			view.MaxTextBytes = excerptTextBytes
			view.Enough = func(part []byte, added int) bool {
				stopped = seen(part, added)
				return stopped
			}
		}
	}
	mv := mailview.Parse(raw, view)
	text = catalog.Text(mv)
	ex = catalog.Excerpt(text, words, excerptBytes)
	// Read further when the words are in the text and the excerpt marks
	// none: MatchSeen can stop at a word that is no word of the text as
	// shown (one the charset decoding changes, say).
	if mv.Truncated && inText && !marked(ex) && (stopped || view.MaxTextBytes == excerptFirstBytes) {
		view.MaxTextBytes, view.Enough, stopped = excerptTextBytes, nil, false
		mv = mailview.Parse(raw, view)
		text = catalog.Text(mv)
		ex = catalog.Excerpt(text, words, excerptBytes)
	}
	return ex, text, mv.Truncated && (stopped || view.MaxTextBytes == excerptFirstBytes)
}

// mayNameList reports whether a query that does not parse has a piece
// that looks like a list: operator, which its list page's scope then
// does not join.
func mayNameList(query string) bool {
	for _, f := range strings.Fields(query) {
		if strings.HasPrefix(strings.ToLower(strings.TrimLeft(f, "-")), "list:") {
			return true
		}
	}
	return false
}

// marked reports whether an excerpt marks a word searched for.
func marked(ex []catalog.Fragment) bool {
	for _, f := range ex {
		if f.Match {
			return true
		}
	}
	return false
}
