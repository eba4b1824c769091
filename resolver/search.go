package resolver

import (
	"errors"
	"net/http"
	"strconv"
	"strings"
	"sync"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// Search pages.
const (
	resultsPerPage = 20
	// excerptBytes is about how much text a result shows.
	excerptBytes = 300
	// maxResultPages bounds how deep a search is paged.
	maxResultPages = 250
)

// searchView is GET /search?q=...: a page of results, and its JSON twin.
type searchView struct {
	Query string `json:"query"`
	// Sort is "newest" or "relevance".
	Sort    string         `json:"sort"`
	Page    int            `json:"page"`
	Pages   int            `json:"pages"`
	Total   int            `json:"total"`
	Results []searchResult `json:"results"`
	// Problem says why the search could not be run ("" if it was).
	Problem string `json:"-"`
}

type searchResult struct {
	catalog.Message
	Excerpt []catalog.Fragment `json:"excerpt"`
}

// search runs the query of the request, or answers with the error.
func (s *Server) search(w http.ResponseWriter, r *http.Request) (*searchView, bool) {
	page, ok := s.pageNumber(w, r)
	if !ok {
		return nil, false
	}
	v := &searchView{Query: strings.TrimSpace(r.URL.Query().Get("q")), Sort: "newest", Page: max(page, 1)}
	// The box of a list page searches that list: list:NAME joins the
	// query, where the reader sees it and can take it out.
	if l := r.URL.Query().Get("list"); l != "" {
		if !catalog.ValidListName(l) {
			s.fail(w, r, http.StatusBadRequest, "Not a list name: list names are lower-case letters, digits, '.', '_' and '-'.")
			return nil, false
		}
		if v.Query != "" && !strings.Contains(strings.ToLower(v.Query), "list:") {
			v.Query += " list:" + l
		}
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
	res, err := c.Search(r.Context(), q, sort, (v.Page-1)*resultsPerPage, resultsPerPage)
	if err != nil {
		s.failCatalog(w, r, err, "")
		return nil, false
	}
	v.Total = res.Total
	v.Pages = min(maxResultPages, max(1, (res.Total+resultsPerPage-1)/resultsPerPage))
	if v.Page > v.Pages {
		s.fail(w, r, http.StatusNotFound, "There are "+strconv.Itoa(v.Pages)+" pages of results; there is no page "+strconv.Itoa(v.Page)+".")
		return nil, false
	}
	v.Results = make([]searchResult, len(res.Messages))
	words := q.Words()
	var wg sync.WaitGroup
	for i, m := range res.Messages {
		v.Results[i].Message = m
		wg.Go(func() {
			stored, err := s.getByText(r.Context(), m.CallNumber)
			if err != nil {
				return
			}
			v.Results[i].Excerpt = catalog.Excerpt(catalog.Text(mailview.Parse(stored.Raw, s.opts.View)), words, excerptBytes)
		})
	}
	wg.Wait()
	return v, true
}

func (s *Server) searchPage(w http.ResponseWriter, r *http.Request) {
	v, ok := s.search(w, r)
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

func (s *Server) searchJSON(w http.ResponseWriter, r *http.Request) {
	v, ok := s.search(w, r)
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
		writeJSON(w, http.StatusOK, v)
	}
}
