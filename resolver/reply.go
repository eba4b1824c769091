package resolver

import (
	"net/mail"
	"strings"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// replyInfo is how to answer a message in public, as its page says it
// (lore.kernel.org's "Reply instructions"): a mailto link with
// In-Reply-To, and the git send-email line, both to the list's address.
type replyInfo struct {
	To, Cc, MessageID, Subject string
	// Mailto is the mailto: URL (RFC 6068), every value percent-encoded.
	Mailto string
	// Git is the git send-email command line, every value single-quoted
	// for a POSIX shell.
	Git string
}

// replyTo returns the reply instructions of a message, or nil when its
// list's address is not known (a List-Post header of its own, else the
// list's, else the address a list rewrote its From to) or it has no
// Message-ID to answer.
func replyTo(v *mailview.Message, listAddr string, snd catalog.Sender) *replyInfo {
	to := catalog.ListPost(v.Header)
	if to == "" {
		to = listAddr
	}
	if to == "" {
		to = snd.Via
	}
	if !safeAddr(to) || v.MessageID == "" || strings.ContainsFunc(v.MessageID, isControl) {
		return nil
	}
	r := &replyInfo{To: to, MessageID: v.MessageID, Subject: v.Subject}
	if !strings.HasPrefix(strings.ToLower(r.Subject), "re:") {
		r.Subject = "Re: " + r.Subject
	}
	if safeAddr(snd.Addr) && !strings.EqualFold(snd.Addr, to) {
		r.Cc = snd.Addr
	}
	r.Subject = strings.Map(func(c rune) rune {
		if isControl(c) {
			return ' '
		}
		return c
	}, r.Subject)
	m := "mailto:" + to + "?In-Reply-To=" + mailtoEscape("<"+r.MessageID+">")
	if r.Cc != "" {
		m += "&Cc=" + mailtoEscape(r.Cc)
	}
	r.Mailto = m + "&Subject=" + mailtoEscape(r.Subject)
	g := "git send-email --in-reply-to=" + shellQuote("<"+r.MessageID+">") + " --to=" + shellQuote(to)
	if r.Cc != "" {
		g += " --cc=" + shellQuote(r.Cc)
	}
	r.Git = g + " /path/to/YOUR_REPLY"
	return r
}

func isControl(c rune) bool { return c < ' ' || c == 0x7f }

// safeAddr accepts a plain address: one a mailto: URL and a command line
// can carry as it is.
func safeAddr(a string) bool {
	if a == "" || len(a) > 254 {
		return false
	}
	for _, c := range a {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@.-_+", c)) {
			return false
		}
	}
	p, err := mail.ParseAddress(a)
	return err == nil && p.Address == a
}

// mailtoEscape percent-encodes a header value of a mailto: URL: all but
// the unreserved characters (RFC 3986 section 2.3), so that "&", "=",
// "+" and "%" in it are the value's.
func mailtoEscape(s string) string {
	const hex = "0123456789ABCDEF"
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '-' || c == '.' || c == '_' || c == '~' || c == '@' {
			b.WriteByte(c)
			continue
		}
		b.WriteByte('%')
		b.WriteByte(hex[c>>4])
		b.WriteByte(hex[c&15])
	}
	return b.String()
}

// shellQuote quotes s for a POSIX shell: in single quotes, each single
// quote inside closed, escaped with a backslash and reopened.
func shellQuote(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}
