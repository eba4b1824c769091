package resolver

import (
	"net/mail"
	"strings"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// replyInfo is how to answer a message in public, as its page says it
// (lore.kernel.org's "Reply instructions"): reply to all, that is to the
// list's address with the sender and every To and Cc of the message in
// Cc, by a mailto link with In-Reply-To or a git send-email line.
type replyInfo struct {
	To, MessageID, Subject string
	// Cc are the message's sender and its other recipients.
	Cc []string
	// Mailto is the mailto: URL (RFC 6068), every value percent-encoded.
	Mailto string
	// Git is the git send-email command, an option a line (each line
	// but the last ending in a backslash), every value single-quoted for a
	// POSIX shell.
	Git string
}

// maxReplyCc bounds the addresses a reply copies: a message sent to
// hundreds gets a line a reader can still read.
const maxReplyCc = 50

// replyTo returns the reply instructions of a message, or nil when its
// list's address is not known or it has no Message-ID to answer. The
// list's address is the message's own (its List-Post, else the address
// its List-Id names), else its list's (listAddr: a list's address changes
// over the years, as linux-mips's did from linux-mips.org to vger), else
// the address a list rewrote its From to. The reply goes to all, as
// lore.kernel.org's: the sender and every To and Cc are copied.
func replyTo(v *mailview.Message, listAddr string, snd catalog.Sender) *replyInfo {
	to := catalog.ListPost(v.Header)
	if to == "" {
		to = listIDAddress(v.Header)
	}
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
	seen := map[string]bool{strings.ToLower(to): true}
	cc := func(a string) {
		if x := catalog.Address(a); x != "" {
			a = x // pipermail's "user at host"
		}
		if k := strings.ToLower(a); safeAddr(a) && !seen[k] && len(r.Cc) < maxReplyCc {
			seen[k] = true
			r.Cc = append(r.Cc, a)
		}
	}
	cc(snd.Addr)
	for _, a := range recipients(v.Header) {
		cc(a)
	}
	r.Subject = strings.Map(func(c rune) rune {
		if isControl(c) {
			return ' '
		}
		return c
	}, r.Subject)
	m := "mailto:" + to + "?In-Reply-To=" + mailtoEscape("<"+r.MessageID+">")
	if len(r.Cc) > 0 {
		m += "&Cc=" + mailtoEscape(strings.Join(r.Cc, ","))
	}
	r.Mailto = m + "&Subject=" + mailtoEscape(r.Subject)
	// A line an option, as lore.kernel.org writes it: a long list of
	// copies stays readable, and the shell joins the lines.
	const next = " \\\n    "
	g := "git send-email" + next + "--in-reply-to=" + shellQuote("<"+r.MessageID+">") + next + "--to=" + shellQuote(to)
	for _, a := range r.Cc {
		g += next + "--cc=" + shellQuote(a)
	}
	r.Git = g + next + "/path/to/YOUR_REPLY"
	return r
}

// recipients returns the addresses of a message's To and Cc fields, in
// order (RFC 5322 section 3.6.3).
func recipients(h []mailview.Field) []string {
	var out []string
	for _, f := range h {
		if !strings.EqualFold(f.Name, "To") && !strings.EqualFold(f.Name, "Cc") {
			continue
		}
		if as, err := mail.ParseAddressList(f.Value); err == nil {
			for _, a := range as {
				out = append(out, a.Address)
			}
			continue
		}
		// A list net/mail refuses (an 8-bit name, a stray character,
		// pipermail's "user at host (Name)"): each address between commas
		// that is one on its own.
		for _, p := range strings.Split(f.Value, ",") {
			p = strings.TrimSpace(p)
			if i := strings.IndexByte(p, '('); i > 0 && strings.HasSuffix(p, ")") {
				p = strings.TrimSpace(p[:i]) // "addr (Name)"
			}
			if a, err := mail.ParseAddress(p); err == nil {
				out = append(out, a.Address)
			} else if a := catalog.Address(p); a != "" {
				out = append(out, a)
			}
		}
	}
	return out
}

// listIDAddress returns the posting address a message's List-Id names
// (RFC 2919: "<list-label.namespace>", which Mailman, vger and Google
// Groups make of the list's address: linux-mips.vger.kernel.org is
// linux-mips@vger.kernel.org), as its To or Cc spells it when one does;
// "" without a List-Id, or one whose namespace is not a domain.
func listIDAddress(h []mailview.Field) string {
	var id string
	for _, f := range h {
		if strings.EqualFold(f.Name, "List-Id") {
			id = f.Value
			break
		}
	}
	if i := strings.LastIndexByte(id, '<'); i >= 0 {
		id = id[i+1:]
		if j := strings.IndexByte(id, '>'); j >= 0 {
			id = id[:j]
		}
	}
	label, domain, ok := strings.Cut(strings.TrimSpace(id), ".")
	if !ok || label == "" || !strings.Contains(domain, ".") || strings.HasSuffix(strings.ToLower(domain), ".localhost") {
		return ""
	}
	addr := label + "@" + domain
	for _, a := range recipients(h) {
		if strings.EqualFold(a, addr) {
			return a
		}
	}
	return addr
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
