package resolver

import (
	"errors"
	"net/http"
	"net/url"
	"strings"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailmsg"
)

// target is what the box on the index names: a call number or a
// Message-ID.
type target struct {
	CallNumber string
	MessageID  string
}

// errNoTarget: the text names neither a call number nor a Message-ID.
var errNoTarget = errors.New("resolver: not a call number, Message-ID or archive URL")

// parseTarget reads what a reader pastes into the box:
//
//   - a call number: 3kTMd2xB
//   - a Message-ID, with or without its angle brackets, or as a mid: URL
//     (RFC 2392): <x@example.org>, x@example.org, mid:x@example.org
//   - a URL of this archive or of another one that names a message by
//     call number or Message-ID: https://archive.example/3kTMd2xB/raw,
//     .../m/x@example.org, .../t/3kTMd2xB/, and the URLs of archives
//     that put the Message-ID in the path, as public-inbox does
//     (https://lore.kernel.org/linux-mips/x@example.org/).
//
// A Message-ID is anything with an '@' that is not a URL; call numbers
// have none.
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
	case strings.Contains(text, "@"):
		return messageID(text)
	}
	return target{CallNumber: text}, nil
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
// the message TEXT names (see parseTarget).
func (s *Server) goTo(w http.ResponseWriter, r *http.Request) {
	t, err := parseTarget(r.URL.Query().Get("n"))
	if err != nil {
		s.fail(w, r, http.StatusBadRequest, "Type a call number (3kTMd2xB), a Message-ID (<x@example.org>) or the URL of a message.")
		return
	}
	if t.MessageID != "" {
		// Only a local path: whatever the ID holds, it is one escaped
		// segment after /m/.
		http.Redirect(w, r, "/m/"+url.PathEscape(t.MessageID), http.StatusFound)
		return
	}
	n, _, err := s.codecs.resolve(r.Context(), t.CallNumber)
	switch {
	case errors.Is(err, ErrMalformed):
		s.fail(w, r, http.StatusBadRequest, "Not a call number: "+strings.TrimPrefix(err.Error(), ErrMalformed.Error()+": "))
	case err != nil:
		s.failStore(w, r, err)
	default:
		http.Redirect(w, r, "/"+n.String(), http.StatusFound)
	}
}
