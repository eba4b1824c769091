package resolver

import (
	"net/http"

	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/chibrary/chibrary/internal/version"
)

// A Route is a path the server answers, as its help shows it.
type Route struct {
	Path string // variables in capitals: /l/LIST/YYYY-MM/
	Doc  string // what it serves; continued on the next route with no Path
}

// route is a Route with what serves it. A route with a handler registers
// pattern on the ServeMux; one without is served by a dispatching pattern
// above it, and pattern is the name that dispatcher gives it in logs and
// metrics (httpserve.SetRoute). A route with no Path is not shown.
type route struct {
	Route
	pattern string
	handler func(*Server, http.ResponseWriter, *http.Request)
	cached  bool // served through the page cache
}

// routes is every route of the server, in the order its help lists them.
var routes = []route{
	{Route{"/", "the lists; a box for a call number, Message-ID or URL"}, "GET /{$}", (*Server).index, false},
	{Route{"/go?n=TEXT", "redirect to what the box names, or to its search"}, "GET /go", (*Server).goTo, false},
	{Route{"", ""}, "GET /l/{$}", (*Server).listsRedirect, false},
	{Route{"/l/LIST/", "a list's latest threads (?page=N) and its months"}, "GET /l/{list}/{$}", (*Server).listPage, true},
	{Route{"/l/LIST/YYYY-MM/", "the threads of a month"}, "GET /l/{list}/{month}/{$}", (*Server).monthPage, true},
	{Route{"", ""}, "GET /l/{list}/{file}", (*Server).listFile, false},
	{Route{"/l/LIST/atom.xml", "Atom feed of the list's newest messages"}, "GET /l/{list}/atom.xml", nil, false},
	{Route{"/l/LIST/YYYY-MM.mbox.gz", "the month as mboxrd (gzip), streamed"}, "GET /l/{list}/{month}.mbox.gz", nil, false},
	{Route{"/t/CALLNUMBER/", "the whole thread of a message (?page=N)"}, "GET /t/{callnumber}/{$}", (*Server).threadPage, true},
	{Route{"", ""}, "GET /t/{file}", (*Server).threadFile, false},
	{Route{"/t/CALLNUMBER.mbox.gz", "the thread as mboxrd (gzip)"}, "GET /t/{callnumber}.mbox.gz", nil, false},
	{Route{"/t/CALLNUMBER/atom.xml", "Atom feed of the thread"}, "GET /t/{callnumber}/atom.xml", (*Server).threadFeed, true},
	{Route{"/search?q=WORDS", "full-text search (from:, subject:, dfn:, list:, after:, OR...)"}, "GET /search", (*Server).searchPage, false},
	{Route{"", ""}, "POST /search", (*Server).searchPage, false},
	{Route{"/search?q=WORDS&x=m", "the results as mboxrd (gzip), GET or POST"}, "GET /search?x=m", nil, false},
	{Route{"", ""}, "GET /{first}/{rest...}", (*Server).twoSegments, false},
	{Route{"/CALLNUMBER", "a message, in its thread"}, "GET /{callnumber}", (*Server).cachedMessage, false},
	{Route{"/CALLNUMBER/raw", "the stored bytes (message/rfc822)"}, "GET /{callnumber}/raw", nil, false},
	{Route{"/CALLNUMBER/attachments/N/NAME", "an attachment, as a download"}, "GET /{callnumber}/attachments/{n}/{name}", nil, false},
	{Route{"/m/MESSAGE-ID", "redirect to the message(s) with that Message-ID"}, "GET /m/{message-id}", nil, false},
	{Route{"/LIST/MESSAGE-ID/", "public-inbox's routes (LIST or all), for b4 and lei"}, "GET /{list}/{message-id}/", nil, false},
	{Route{"/LIST/MESSAGE-ID/raw", "... the message's bytes"}, "GET /{list}/{message-id}/raw", nil, false},
	{Route{"/LIST/MESSAGE-ID/t.mbox.gz", "... its thread as mboxrd (gzip); T/ and t.atom too"}, "GET /{list}/{message-id}/t.mbox.gz", nil, false},
	{Route{"/LIST/", "... the list; ?q=WORDS&x=m: a search as mboxrd (gzip), GET or POST"}, "GET /{list}/", nil, false},
	{Route{"", "... &t=1: the whole threads of the matches; x=A: as Atom"}, "", nil, false},
	{Route{"", ""}, "POST /{list}/{$}", (*Server).publicInboxPost, false},
	{Route{"/LIST/MESSAGE-ID/?q=WORDS&x=m", "... a search within the message's thread (POST)"}, "POST /{list}/{message-id}/?x=m", nil, false},
	{Route{"", ""}, "POST /{first}/{rest...}", (*Server).publicInboxPostPath, false},
	{Route{"/LIST/new.atom", "... the list's feed (all: every list's)"}, "GET /{list}/new.atom", nil, false},
	{Route{"/LIST/_/text/help/", "... the search's help, both dialects"}, "GET /{list}/_/text/help/", nil, false},
	{Route{"/r/MESSAGE-ID", "... to the message under its list"}, "GET /r/{message-id}", nil, false},
	{Route{"/LIST/git/N.git", "with --public-inbox: epoch N of the list's export, for git clone"}, "GET /{list}/git/{N}.git", nil, false},
	{Route{"", "(git's smart HTTP, read-only) and public-inbox-clone URL/LIST/"}, "", nil, false},
	{Route{"/manifest.js.gz", "... grokmirror's manifest (grok-pull); LIST/manifest.js.gz: a list's"}, "GET /manifest.js.gz", (*Server).manifestRoot, false},
	{Route{"/api/v1/lists", "JSON: the lists"}, "GET /api/v1/lists", (*Server).listsJSON, true},
	{Route{"/api/v1/lists/LIST", "... a list (?page=N)"}, "GET /api/v1/lists/{list}", (*Server).listJSON, true},
	{Route{"/api/v1/lists/LIST/YYYY-MM", "... a month"}, "GET /api/v1/lists/{list}/{month}", (*Server).monthJSON, true},
	{Route{"/api/v1/threads/CALLNUMBER", "... a thread"}, "GET /api/v1/threads/{callnumber}", (*Server).threadJSON, true},
	{Route{"/api/v1/search?q=WORDS", "... a search"}, "GET /api/v1/search", (*Server).searchJSON, false},
	{Route{"/api/v1/messages/CALLNUMBER", "... a message's headers and place in its thread"}, "GET /api/v1/messages/{callnumber}", (*Server).messageJSON, false},
	{Route{"/api/v1/stats", "... the number of messages, the catalog's state"}, "GET /api/v1/stats", (*Server).stats, false},
	{Route{"/api/v1/removals", "the messages taken down: when and why"}, "GET /api/v1/removals", (*Server).removals, false},
	{Route{"/api/v1/changes?after=CURSOR", "the change feed, for mirrors (docs/mirrors.md): public"}, "GET " + changesPath, (*Server).changesFeed, false},
	{Route{"", "unless --changes-token-file; it carries the shuffle key"}, "", nil, false},
	{Route{"/api/v1/version", "the build: program, version, revision"}, "GET /api/v1/version", (*Server).version, false},
	{Route{"/healthz", "200 when the store can be read, else 503"}, "GET /healthz", (*Server).healthz, false},
	{Route{"/metrics", "Prometheus metrics"}, "GET /metrics", (*Server).metrics, false},
	{Route{"/robots.txt", "what crawlers may fetch"}, "GET /robots.txt", (*Server).robots, false},
	{Route{"/favicon.ico", "the site's icon"}, "GET /favicon.ico", (*Server).favicon, false},
	{Route{"/static/style.css", "the pages' style sheet"}, "GET /static/style.css", (*Server).stylesheet, false},
	{Route{"/static/keys.js", "the pages' keyboard shortcuts (? shows them; every page works without it)"}, "GET /static/keys.js", (*Server).keysScript, false},
}

// Routes returns the routes the server answers, for help texts.
func Routes() []Route {
	var out []Route
	for _, r := range routes {
		if r.Path != "" || r.Doc != "" {
			out = append(out, r.Route)
		}
	}
	return out
}

func (s *Server) handleRoutes() {
	s.versionHandler = version.Handler("resolver")
	s.metricsHandler = promhttp.HandlerFor(s.reg, promhttp.HandlerOpts{})
	for _, r := range routes {
		if r.handler == nil {
			continue
		}
		h := func(w http.ResponseWriter, req *http.Request) { r.handler(s, w, req) }
		if r.cached {
			h = s.cachedPage(h)
		}
		s.mux.HandleFunc(r.pattern, h)
	}
}

func (s *Server) version(w http.ResponseWriter, r *http.Request) { s.versionHandler.ServeHTTP(w, r) }

func (s *Server) metrics(w http.ResponseWriter, r *http.Request) { s.metricsHandler.ServeHTTP(w, r) }

func (s *Server) listsRedirect(w http.ResponseWriter, r *http.Request) {
	http.Redirect(w, r, "/", http.StatusMovedPermanently)
}

// publicInboxPost is a search as mbox, POSTed as b4 does (publicinbox.go).
func (s *Server) publicInboxPost(w http.ResponseWriter, r *http.Request) {
	if !s.publicInbox(w, r, r.PathValue("list"), "") {
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address.")
	}
}

// publicInboxPostPath is a POST to /{list}/{message-id}/: a search within
// the thread, as liblore sends (publicinbox.go).
func (s *Server) publicInboxPostPath(w http.ResponseWriter, r *http.Request) {
	if s.servePIExport(w, r, r.PathValue("first"), r.PathValue("rest")) {
		return
	}
	if !s.publicInbox(w, r, r.PathValue("first"), r.PathValue("rest")) {
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address.")
	}
}
