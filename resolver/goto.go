package resolver

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store"
)

// target is what the box on every page names: a call number or a
// Message-ID.
type target struct {
	CallNumber string
	MessageID  string
	// Maybe says the text only might be one: a bare word of 8 letters and
	// digits, or a bare word with an '@'. If no message has it, the text
	// is searched for instead.
	Maybe bool
}

// errNoTarget: the text names neither a call number nor a Message-ID.
var errNoTarget = errors.New("resolver: not a call number, Message-ID or archive URL")

// parseTarget reads what a reader pastes into the box:
//
//   - a call number: 3kTMd2xB
//   - a Message-ID, with or without its angle brackets, or as a mid: URL
//     (RFC 2392): <x@example.org>, x@example.org, mid:x@example.org (a
//     bare one is one word with an '@' and no search operator before it:
//     from:x@example.org is a search)
//   - a URL of this archive or of another one that names a message by
//     call number or Message-ID: https://archive.example/3kTMd2xB/raw,
//     .../m/x@example.org, .../t/3kTMd2xB/, and the URLs of archives
//     that put the Message-ID in the path, as public-inbox does
//     (https://lore.kernel.org/linux-mips/x@example.org/).
//
// Anything else is not a target (errNoTarget): the box searches for it.
func parseTarget(text string) (target, error) {
	text = strings.TrimSpace(text)
	if text == "" {
		return target{}, errNoTarget
	}
	low := strings.ToLower(text)
	switch {
	case strings.HasPrefix(low, "mid:"):
		id, err := url.PathUnescape(text[len("mid:"):])
		if err != nil {
			id = text[len("mid:"):]
		}
		return messageID(id)
	case strings.HasPrefix(low, "http://"), strings.HasPrefix(low, "https://"):
		u, err := url.Parse(text)
		if err != nil {
			return target{}, errNoTarget
		}
		return fromPath(u.EscapedPath())
	case strings.HasPrefix(text, "/"):
		return fromPath(text)
	case strings.HasPrefix(text, "<") && strings.HasSuffix(text, ">"):
		return messageID(text)
	case strings.ContainsAny(text, " \t\r\n\"") || strings.HasPrefix(text, "-"):
		return target{}, errNoTarget
	case strings.Contains(text, "@"):
		if op, _, ok := strings.Cut(text, ":"); ok && !strings.Contains(op, "@") {
			return target{}, errNoTarget // from:x@y
		}
		t, err := messageID(text)
		t.Maybe = true
		return t, err
	case CheckSyntax(text) == nil:
		return target{CallNumber: text, Maybe: true}, nil
	}
	return target{}, errNoTarget
}

func messageID(text string) (target, error) {
	id := mailmsg.NormalizeMessageID(text)
	if id == "" {
		return target{}, errNoTarget
	}
	return target{MessageID: id}, nil
}

// fromPath finds a message in the escaped path of a URL: a /m/ID, a
// segment that is a call number (as the first one of this archive's
// message, thread and attachment URLs is), or a segment with an '@'.
func fromPath(escaped string) (target, error) {
	segs := strings.Split(strings.Trim(escaped, "/"), "/")
	if len(segs) >= 2 && segs[0] == "m" {
		id, err := url.PathUnescape(strings.Join(segs[1:], "/"))
		if err != nil {
			return target{}, errNoTarget
		}
		return messageID(id)
	}
	for _, seg := range segs {
		seg = strings.TrimSuffix(seg, ".mbox.gz")
		if _, err := callnumber.Parse(seg); err == nil {
			return target{CallNumber: seg}, nil
		}
	}
	for _, seg := range segs {
		if id, err := url.PathUnescape(seg); err == nil && strings.Contains(id, "@") {
			return messageID(id)
		}
	}
	return target{}, errNoTarget
}

// goTo is the target of the box on every page: /go?n=TEXT redirects to
// the message TEXT names (see parseTarget), or searches for it.
func (s *Server) goTo(w http.ResponseWriter, r *http.Request) {
	text := strings.TrimSpace(r.URL.Query().Get("n"))
	t, err := parseTarget(text)
	switch {
	case err == nil:
		loc, ok := s.targetLocation(w, r, t)
		if !ok {
			return
		}
		if loc != "" {
			http.Redirect(w, r, loc, http.StatusFound)
			return
		}
		// Maybe a call number or a Message-ID, but no message has it.
	case text == "" || isURL(text):
		s.fail(w, r, http.StatusBadRequest, "Type a call number (2UrKPuW8), a Message-ID (<x@example.org>), the URL of a message, or words to search for.")
		return
	}
	if s.catalog(r.Context()) != nil || s.cats.Path() != "" {
		// A list page's box names its list: search that list.
		loc := "/search?q=" + url.QueryEscape(text)
		if l := r.URL.Query().Get("list"); catalog.ValidListName(l) {
			loc += "&list=" + url.QueryEscape(l)
		}
		http.Redirect(w, r, loc, http.StatusFound)
		return
	}
	// No catalog, no search.
	if t.MessageID != "" {
		s.fail(w, r, http.StatusNotFound, "No message in this archive has that Message-ID.")
		return
	}
	if err := CheckSyntax(text); err != nil {
		s.fail(w, r, http.StatusBadRequest, malformed(err)+" Type a call number (2UrKPuW8), a Message-ID (<x@example.org>) or the URL of a message.")
		return
	}
	s.fail(w, r, http.StatusNotFound, "There is no such message: no message in this archive has that call number.")
}

func isURL(text string) bool {
	low := strings.ToLower(text)
	return strings.HasPrefix(low, "http://") || strings.HasPrefix(low, "https://") || strings.HasPrefix(low, "mid:") || strings.HasPrefix(text, "/")
}

// targetLocation returns where a target is: a local path. For a target
// the text only maybe names, it returns "" (and true) when no message
// has it; it answers the request itself (false) on an error of the
// store.
func (s *Server) targetLocation(w http.ResponseWriter, r *http.Request, t target) (string, bool) {
	if t.MessageID != "" {
		// Only a local path: whatever the ID holds, it is one escaped
		// segment after /m/.
		loc := "/m/" + url.PathEscape(t.MessageID)
		if !t.Maybe {
			return loc, true
		}
		ns, err := s.st.ByMessageID(r.Context(), t.MessageID)
		if err != nil {
			s.failStore(w, r, err)
			return "", false
		}
		if len(ns) == 0 {
			return "", true
		}
		return loc, true
	}
	n, _, err := s.codecs.resolve(r.Context(), t.CallNumber)
	if err == nil {
		_, err = s.st.Get(r.Context(), n)
	}
	switch {
	case err == nil:
		return "/" + n.String(), true
	case errors.Is(err, ErrMalformed), errors.Is(err, store.ErrNotFound):
		if t.Maybe {
			return "", true
		}
		// A URL that names a message this archive does not have.
		return "/" + t.CallNumber, true
	}
	s.failStore(w, r, err)
	return "", false
}
