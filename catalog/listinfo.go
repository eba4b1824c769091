package catalog

// A list's face: what it says it is (List-Id's phrase) and how to join it
// (List-Subscribe), as its mail last said (RFC 2919, RFC 2369).

import (
	"net/url"
	"strings"
	"unicode/utf8"

	"github.com/chibrary/chibrary/mailview"
)

// Bounds of what a message may say of its list.
const (
	// MaxListDescription bounds a List-Id's phrase, in bytes (RFC 2919
	// has no bound; real ones are a few words).
	MaxListDescription = 200
	// MaxSubscribeURL bounds a List-Subscribe URL, in bytes.
	MaxSubscribeURL = 500
)

// ListDescription returns the phrase of a message's List-Id ("Linux MIPS
// discussion" of `"Linux MIPS discussion" <linux-mips.linux-mips.org>`),
// blanks collapsed, at most MaxListDescription bytes; "" without one, or
// with one that only repeats the list's name (`linux-mips
// <linux-mips.eddie.linux-mips.org>`, as many list servers write it).
func ListDescription(h []mailview.Field) string {
	for _, f := range h {
		if !strings.EqualFold(f.Name, "List-Id") {
			continue
		}
		phrase, id, ok := strings.Cut(f.Value, "<")
		if !ok {
			return ""
		}
		name, _, _ := strings.Cut(id, ".")
		phrase = strings.Join(strings.Fields(phrase), " ")
		if len(phrase) >= 2 && phrase[0] == '"' && phrase[len(phrase)-1] == '"' {
			phrase = strings.Join(strings.Fields(strings.ReplaceAll(phrase[1:len(phrase)-1], `\"`, `"`)), " ")
		}
		phrase = strings.Map(func(r rune) rune {
			if r < ' ' || r == 0x7f || r == utf8.RuneError {
				return -1
			}
			return r
		}, phrase)
		if strings.EqualFold(phrase, strings.TrimSpace(name)) {
			return ""
		}
		if len(phrase) > MaxListDescription {
			cut := MaxListDescription
			for cut > 0 && !utf8.RuneStart(phrase[cut]) {
				cut--
			}
			phrase = phrase[:cut] + "…"
		}
		return phrase
	}
	return ""
}

// ListSubscribe returns where a message's List-Subscribe says to join
// the list: its first https or http URL, else its first mailto URL; ""
// without one (or with another scheme: nothing else reaches a page).
func ListSubscribe(h []mailview.Field) string {
	for _, f := range h {
		if !strings.EqualFold(f.Name, "List-Subscribe") {
			continue
		}
		var web, mail string
		for rest := f.Value; ; {
			i := strings.IndexByte(rest, '<')
			if i < 0 {
				break
			}
			j := strings.IndexByte(rest[i:], '>')
			if j < 0 {
				break
			}
			raw := strings.TrimSpace(rest[i+1 : i+j])
			rest = rest[i+j+1:]
			if len(raw) > MaxSubscribeURL || strings.ContainsAny(raw, " \t\"'") {
				continue
			}
			u, err := url.Parse(raw)
			if err != nil {
				continue
			}
			switch strings.ToLower(u.Scheme) {
			case "https", "http":
				if web == "" && u.Host != "" {
					web = u.String()
				}
			case "mailto":
				if mail == "" && u.Opaque != "" {
					mail = u.String()
				}
			}
		}
		if web != "" {
			return web
		}
		return mail
	}
	return ""
}
