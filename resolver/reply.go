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
	// The To and Cc fields are parsed once, for the List-Id's spelling
	// and for the copies.
	var rcpts []string
	parsed := false
	recipientsOnce := func() []string {
		if !parsed {
			rcpts, parsed = recipients(v.Header), true
		}
		return rcpts
	}
	to := catalog.ListPost(v.Header)
	if to == "" {
		to = listIDAddress(v.Header, recipientsOnce)
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
		if !safeAddr(a) { // else catalog.Address would give it back as it is
			if x := catalog.Address(a); x != "" {
				a = x // pipermail's "user at host"
			}
			if !safeAddr(a) {
				return
			}
		}
		if k := strings.ToLower(a); !seen[k] && len(r.Cc) < maxReplyCc {
			seen[k] = true
			r.Cc = append(r.Cc, a)
		}
	}
	cc(snd.Addr)
	for _, a := range recipientsOnce() {
		cc(a)
	}
	r.Subject = strings.Map(func(c rune) rune {
		if isControl(c) {
			return ' '
		}
		return c
	}, r.Subject)
	id := "<" + r.MessageID + ">"
	var m strings.Builder
	m.Grow(64 + 3*(len(to)+len(id)+len(r.Subject)) + 4*len(r.Cc)*len(to))
	m.WriteString("mailto:")
	m.WriteString(to)
	m.WriteString("?In-Reply-To=")
	writeMailto(&m, id)
	for i, a := range r.Cc {
		if i == 0 {
			m.WriteString("&Cc=")
		} else {
			m.WriteString("%2C") // the comma between addresses, escaped
		}
		writeMailto(&m, a)
	}
	m.WriteString("&Subject=")
	writeMailto(&m, r.Subject)
	r.Mailto = m.String()
	// A line an option, as lore.kernel.org writes it: a long list of
	// copies stays readable, and the shell joins the lines.
	const next = " \\\n    "
	var g strings.Builder
	g.Grow(128 + len(id) + len(to) + len(r.Cc)*(len(next)+len("--cc=''")+len(to)))
	g.WriteString("git send-email" + next + "--in-reply-to=")
	writeShellQuoted(&g, id)
	g.WriteString(next + "--to=")
	writeShellQuoted(&g, to)
	for _, a := range r.Cc {
		g.WriteString(next + "--cc=")
		writeShellQuoted(&g, a)
	}
	g.WriteString(next + "/path/to/YOUR_REPLY")
	r.Git = g.String()
	return r
}

// recipients returns the addresses of a message's To and Cc fields, in
// order (RFC 5322 section 3.6.3), as mailview decoded them.
func recipients(h []mailview.Field) []string {
	var out []string
	for _, f := range h {
		if !strings.EqualFold(f.Name, "To") && !strings.EqualFold(f.Name, "Cc") {
			continue
		}
		if as, ok := scanAddressList(out, f.Value); ok {
			out = as
			continue
		}
		if as, err := mail.ParseAddressList(f.Value); err == nil {
			for _, a := range as {
				out = append(out, a.Address)
			}
			continue
		}
		// A list neither reads (an unclosed quote, a stray character,
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

// scanAddressList appends to out the addresses of an address list as
// mailview decoded it (RFC 5322 section 3.4: mailboxes and groups between
// commas, a mailbox "addr-spec" or "display-name <addr-spec>"), without
// the cost of net/mail, which reads the names too. A decoded name may
// hold what its encoded word hid from a parser ("Doe, John", "x@y"):
// only commas outside quotes, comments and angle brackets part
// addresses, and a mailbox's address is what its angle brackets hold.
// It reports false, leaving the list to net/mail, for anything else: an
// unclosed quote, comment or bracket, several addresses in one mailbox,
// an addr-spec with a quote, a backslash, a space or a comment inside.
// Of a list net/mail reads, it reads the same addresses (FuzzScanAddressList
// holds it to that).
func scanAddressList(out []string, s string) ([]string, bool) {
	start := 0
	for i := 0; i <= len(s); i++ {
		if i < len(s) {
			switch s[i] {
			case '"', '(':
				next, ok := skipQuoteOrComment(s, i)
				if !ok {
					return out, false
				}
				i = next - 1
				continue
			case ')':
				return out, false
			case ',':
			default:
				continue
			}
		}
		a, ok := mailboxAddress(s[start:i])
		if !ok {
			return out, false
		}
		if a != "" {
			out = append(out, a)
		}
		start = i + 1
	}
	return out, true
}

// skipQuoteOrComment returns the index just past the quoted string or
// the comment (RFC 5322 sections 3.2.4 and 3.2.2: comments nest, a
// backslash quotes the character after it) that begins at s[i], a '"'
// or a '('; false if s ends before it does.
func skipQuoteOrComment(s string, i int) (int, bool) {
	depth := 0
	for j := i; j < len(s); j++ {
		switch c := s[j]; {
		case c == '\\' && j > i:
			j++
		case s[i] == '"':
			if c == '"' && j > i {
				return j + 1, true
			}
		case c == '(':
			depth++
		case c == ')':
			if depth--; depth == 0 {
				return j + 1, true
			}
		}
	}
	return len(s), false
}

// mailboxAddress returns the address of one element of an address list
// (scanAddressList, which has seen its quotes and comments closed), ""
// for none (an empty element, a group's end), and false when it cannot
// tell.
func mailboxAddress(e string) (string, bool) {
	lt, gt, colon, semi := -1, -1, -1, -1
	for i := 0; i < len(e); i++ {
		switch e[i] {
		case '"', '(':
			next, ok := skipQuoteOrComment(e, i)
			if !ok {
				return "", false
			}
			i = next - 1
		case '<':
			if lt >= 0 {
				return "", false
			}
			lt = i
		case '>':
			if gt >= 0 || lt < 0 {
				return "", false
			}
			gt = i
		case ':':
			if lt < 0 {
				colon = i // a group's name ends
			}
		case ';':
			if semi >= 0 {
				return "", false
			}
			semi = i // a group ends
		}
	}
	if lt >= 0 != (gt >= 0) {
		return "", false
	}
	var spec string
	if lt >= 0 {
		// After "<addr>" only spaces, comments and a group's end.
		if semi >= 0 && semi < gt || !blank(e[gt+1:], ";") {
			return "", false
		}
		spec = strings.Trim(e[lt+1:gt], " \t")
	} else {
		if semi >= 0 && (semi < colon || !blank(e[semi+1:], "")) {
			return "", false
		}
		spec = e[colon+1:]
		if semi >= 0 {
			spec = e[colon+1 : semi]
		}
		var ok bool
		if spec, ok = uncomment(spec, ""); !ok {
			return "", false
		}
		spec = strings.Trim(spec, " \t")
	}
	if strings.ContainsAny(spec, "\"\\()<>:;, \t\r\n") {
		return "", false
	}
	return spec, true
}

// blank reports whether s holds nothing but white space, comments and the
// characters of also.
func blank(s, also string) bool {
	u, ok := uncomment(s, also)
	return ok && strings.TrimSpace(u) == ""
}

// uncomment returns s without its comments and the characters of drop;
// false for a comment s does not close. (Quotes are not looked for: what
// is left of one makes the callers refuse.)
func uncomment(s, drop string) (string, bool) {
	if !strings.ContainsAny(s, "("+drop) {
		return s, true
	}
	var b strings.Builder
	for i := 0; i < len(s); i++ {
		switch c := s[i]; {
		case c == '(':
			next, ok := skipQuoteOrComment(s, i)
			if !ok {
				return "", false
			}
			i = next - 1
		case strings.IndexByte(drop, c) < 0:
			b.WriteByte(c)
		}
	}
	return b.String(), true
}

// listIDAddress returns the posting address a message's List-Id names
// (RFC 2919: "<list-label.namespace>", which Mailman, vger and Google
// Groups make of the list's address: linux-mips.vger.kernel.org is
// linux-mips@vger.kernel.org), as its To or Cc spells it when one does;
// "" without a List-Id, or one whose namespace is not a domain. rcpts
// returns the addresses of the To and Cc fields (recipients).
func listIDAddress(h []mailview.Field, rcpts func() []string) string {
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
	for _, a := range rcpts() {
		if strings.EqualFold(a, addr) {
			return a
		}
	}
	return addr
}

func isControl(c rune) bool { return c < ' ' || c == 0x7f }

// safeAddr accepts a plain address, one a mailto: URL and a command line
// can carry as it is: an addr-spec of two dot-atoms (RFC 5322 section
// 3.4.1) of letters, digits and "-_+", no longer than 254 bytes. Of the
// strings of those characters, it accepts those net/mail.ParseAddress
// gives back unchanged (FuzzSafeAddr holds it to that), without its cost.
func safeAddr(a string) bool {
	if a == "" || len(a) > 254 {
		return false
	}
	at := -1
	for i := 0; i < len(a); i++ {
		switch c := a[i]; {
		case c >= 'a' && c <= 'z', c >= 'A' && c <= 'Z', c >= '0' && c <= '9', c == '-', c == '_', c == '+':
		case c == '.':
			// No dot at either end of an atom, and no two together.
			if i == 0 || i == len(a)-1 || a[i-1] == '.' || a[i-1] == '@' || a[i+1] == '.' || a[i+1] == '@' {
				return false
			}
		case c == '@':
			if at >= 0 || i == 0 || i == len(a)-1 {
				return false
			}
			at = i
		default:
			return false
		}
	}
	return at > 0
}

// writeMailto writes s percent-encoded as a header value of a mailto: URL:
// all but the unreserved characters (RFC 3986 section 2.3), so that "&",
// "=", "+" and "%" in it are the value's.
func writeMailto(b *strings.Builder, s string) {
	const hex = "0123456789ABCDEF"
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
}

// writeShellQuoted writes s to b quoted for a POSIX shell: in single
// quotes, each single quote inside closed, escaped with a backslash and
// reopened.
func writeShellQuoted(b *strings.Builder, s string) {
	b.WriteByte('\'')
	for {
		i := strings.IndexByte(s, '\'')
		if i < 0 {
			break
		}
		b.WriteString(s[:i])
		b.WriteString(`'\''`)
		s = s[i+1:]
	}
	b.WriteString(s)
	b.WriteByte('\'')
}
