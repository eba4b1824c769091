package catalog

import (
	"net/mail"
	"strings"

	"github.com/chibrary/chibrary/mailview"
)

// Sender is who wrote a message. Lists that rewrite the From of mail from
// domains with a strict DMARC policy (Mailman, Google Groups, sympa) send
// it as "Name via LIST <list@host>", with the writer's address in
// X-Original-From, X-Original-Sender or Reply-To. The catalog shows and
// searches the writer (RealSender); the rewritten From stays in the
// headers shown.
type Sender struct {
	Name, Addr string
	// Via is the list's address the From was rewritten to, "" for mail
	// as its writer sent it.
	Via string
}

// maxVia bounds the display name searched for " via ".
const maxVia = 512

// RealSender returns the writer of a message whose decoded header fields
// are h, and for a From a list rewrote, the list's address as Via. A
// rewritten From is told by an X-Original-From naming another address, or
// by a display name "Name via LIST" with LIST in the From's address; the
// writer's address is then X-Original-From's, else X-Original-Sender's,
// else Reply-To's when it names one other address, else unknown ("").
func RealSender(h []mailview.Field) Sender {
	var from, xof, xos, replyTo string
	for _, f := range h {
		switch {
		case from == "" && strings.EqualFold(f.Name, "From"):
			from = f.Value
		case xof == "" && strings.EqualFold(f.Name, "X-Original-From"):
			xof = f.Value
		case xos == "" && strings.EqualFold(f.Name, "X-Original-Sender"):
			xos = f.Value
		case replyTo == "" && strings.EqualFold(f.Name, "Reply-To"):
			replyTo = f.Value
		}
	}
	name, addr := sender(from)
	s := Sender{Name: name, Addr: addr}
	real, via := viaName(name, addr)
	if xof != "" {
		if n, a := sender(xof); a != "" && !strings.EqualFold(a, addr) {
			if n == "" {
				n = real
			}
			return Sender{Name: n, Addr: a, Via: addr}
		}
	}
	if !via {
		return s
	}
	s = Sender{Name: real, Via: addr}
	if _, a := sender(xos); a != "" && !strings.EqualFold(a, addr) {
		s.Addr = a
	} else if _, a := sender(replyTo); a != "" && !strings.EqualFold(a, addr) && !strings.Contains(replyTo, ",") {
		s.Addr = a
	}
	return s
}

// viaName reads "Name via LIST" (and Google Groups' "'Name' via LIST")
// where LIST is in the address (the list's: "Maria Via Rossi
// <maria@example.org>" is a name): the name, and whether it was so.
func viaName(display, addr string) (string, bool) {
	if len(display) > maxVia {
		return display, false
	}
	i := strings.LastIndex(lowerASCII(display), " via ")
	if i <= 0 {
		return display, false
	}
	if l := ListName(display[i+5:]); l == "" || !strings.Contains(strings.ToLower(addr), l) {
		return display, false
	}
	name := strings.TrimSpace(display[:i])
	if len(name) >= 2 && (name[0] == '\'' && name[len(name)-1] == '\'' || name[0] == '"' && name[len(name)-1] == '"') {
		name = strings.TrimSpace(name[1 : len(name)-1])
	}
	if name == "" {
		return display, false
	}
	return name, true
}

// lowerASCII lower-cases the ASCII letters of s and nothing else, so that
// an offset in it is one in s: strings.ToLower may change the length of
// other characters (and of bytes that are not UTF-8).
func lowerASCII(s string) string {
	b := []byte(s)
	for i, c := range b {
		if 'A' <= c && c <= 'Z' {
			b[i] = c + 'a' - 'A'
		}
	}
	return string(b)
}

// Address returns a sender's address (Message.FromAddr, Entry.FromAddr)
// as a mail or news client takes it: the address itself, or the one an
// archive wrote so that harvesters would not read it, as pipermail writes
// "johnml at michaweb.net"; "" for anything else.
func Address(addr string) string {
	addr = strings.TrimSpace(addr)
	if a, err := mail.ParseAddress(addr); err == nil && a.Address == addr {
		return addr
	}
	local, domain, ok := strings.Cut(addr, " at ")
	local, domain = strings.TrimSpace(local), strings.TrimSpace(domain)
	if !ok || !strings.Contains(domain, ".") || strings.ContainsAny(local+domain, " @") {
		return ""
	}
	a := local + "@" + domain
	if p, err := mail.ParseAddress(a); err != nil || p.Address != a {
		return ""
	}
	return a
}
