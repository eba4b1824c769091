package resolver

import (
	"net/http"
	"strings"

	"github.com/chibrary/chibrary/internal/httpserve"
)

// piHelpText is /{list}/_/text/help/ (public-inbox's WwwText.pm): the
// search help, which public-inbox's tools and liblore look for to know an
// archive of public-inbox's kind. Its first line is its title, as there.
const piHelpText = `help for this archive's search

This archive answers the requests of public-inbox (the software of
lore.kernel.org) beside its own, so that b4 and lei work with it as
with lore. Its search reads two dialects, in one query if need be.

public-inbox's search language
------------------------------

  s:       match within Subject  e.g. s:"a quick brown fox"
  d:       match date-time range, e.g. d:20240115.. d:2024-01-01..2024-02-01
           d:..2.weeks.ago (open-ended ranges, git's approxidate forms)
  dt:      match date-time range, d: to the second (YYYYMMDDHHMMSS)
  rt:      match received time, like d: if the sender's clock was correct
  b:       match within message body, including text attachments
  bs:      match within the Subject and body
  nq:      match non-quoted text within message body
  q:       match quoted text within message body
  n:       match filename of attachment(s)
  t:       match within the To header
  c:       match within the Cc header
  f:       match within the From header
  a:       match within the To, Cc, and From headers
  tc:      match within the To and Cc headers
  l:       match contents of the List-Id header
  m:       match the Message-ID
  z:       match the message size (z:1000..50000)
  dfn:     match filename from diff
  dfa:     match diff removed (-) lines
  dfb:     match diff added (+) lines
  dfhh:    match diff hunk header context (usually a function name)
  dfctx:   match diff context lines
  dfpre:   match pre-image git blob ID
  dfpost:  match post-image git blob ID
  dfblob:  match either pre or post-image git blob ID
  patchid: match ` + "`git patch-id --stable'" + ` output

  AND, OR, NOT (in capitals), +word, -word, (parentheses), "phrases",
  and word* (words starting so) combine them.

The archive's own
-----------------

  from:X subject:X list:NAME after:DATE before:DATE, words, "phrases",
  word*, -word and OR, as its search page says (/search).

A query with a part the archive cannot answer is refused (HTTP 400)
with a message that names the part; no part of a query is silently
read as something else.

Requests
--------

  LIST is a list of the archive, or "all" for every list.

  /LIST/?q=QUERY             the search's page
  /LIST/?q=QUERY&x=m         the matches as mboxrd, gzip (GET or POST):
                             the newest 1,000
  /LIST/?q=QUERY&x=m&t=1     ... and the whole threads they are in
                             (a POST body starting "x=" does the same)
  /LIST/?q=QUERY&x=A         the newest matches as an Atom feed
  POST /LIST/MESSAGE-ID/?q=QUERY&x=m
                             the matches within that message's thread
  /LIST/MESSAGE-ID/          the message; raw, t.mbox.gz, T/, t.atom
  /LIST/new.atom             the newest messages, as an Atom feed
  /r/MESSAGE-ID              the message, whichever list it is in

b4's configuration (git config):

  b4.midmask    = https://ARCHIVE/all/%s
  b4.linkmask   = https://ARCHIVE/r/%s
  b4.searchmask = https://ARCHIVE/all/?x=m&t=1&q=%s

lei:

  lei q -I https://ARCHIVE/all/ -o ~/Mail/out 's:"cache flush" AND d:2.weeks.ago..'
`

// piText serves /{list}/_/text/... (rest is what follows the list):
// the help, as a page (help/) or as text (help/raw); _/text and
// _/text/help go to help/, as public-inbox's do.
func (s *Server) piText(w http.ResponseWriter, r *http.Request, list, rest string) {
	httpserve.SetRoute(w, "GET /{list}/_/text/help/")
	switch rest {
	case "_/text", "_/text/", "_/text/help":
		http.Redirect(w, r, s.baseURL(r)+"/"+list+"/_/text/help/", http.StatusFound)
	case "_/text/help/":
		s.render(w, r, http.StatusOK, "pihelp.html", struct{ Title, Text string }{
			Title: strings.SplitN(piHelpText, "\n", 2)[0], Text: piHelpText,
		})
	case "_/text/help/raw":
		s.writeBody(w, r, "text/plain; charset=utf-8", []byte(piHelpText))
	default:
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address: the help is at _/text/help/.")
	}
}
