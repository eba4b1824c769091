package catalog

// b4's change-id: what b4 (https://b4.docs.kernel.org) names a series by
// across its versions. "b4 prep" makes it once for a series, of the day,
// the branch's name and 12 hex digits of a random UUID
// ("20240913-mgtime-20c98bcda88e"; b4's ez.py, start_new_series), and
// "b4 send" writes it in the series' first message, the cover letter or
// a lone patch, below the "---" with the base commit:
//
//	---
//	base-commit: 9852d85ec9d492ebef56dc5f229416c925758edc
//	change-id: 20240913-mgtime-20c98bcda88e
//
// and, since b4 0.14, in its X-Change-ID header. Its versions keep it
// whatever their subject becomes; b4 finds them by searching for the
// line (get_series_by_change_id, which matches "^\s*change-id:\s*ID$").

import (
	"regexp"
	"strings"

	"github.com/chibrary/chibrary/mailview"
)

// MaxChangeID is the longest change-id read: b4's slug is a branch's
// name, which b4 keeps short.
const MaxChangeID = 128

// changeIDRE is a change-id: the date, the slug (b4 turns every run of
// characters other than letters, digits and "_" into "-", and lowers the
// case), and the random part.
var changeIDRE = regexp.MustCompile(`^[0-9]{8}-[\pL\pN_-]*[\pL\pN_]-[0-9a-f]{8,32}$`)

// changeIDLines is how many change-id lines of a text ChangeID reads.
const changeIDLines = 4

// ChangeID returns the change-id of b4 a message carries: its X-Change-ID
// header, else the first change-id line of its text (the text as the
// search index keeps it: quoted lines, where a reply repeats it, are not
// read). "" for none, or one that is not a change-id.
func ChangeID(h []mailview.Field, text string) string {
	for _, f := range h {
		if strings.EqualFold(f.Name, "X-Change-ID") {
			if id := changeID(f.Value); id != "" {
				return id
			}
		}
	}
	for n, rest := 0, text; n < changeIDLines && rest != ""; {
		var line string
		line, rest, _ = strings.Cut(rest, "\n")
		if v, ok := changeIDLine(line); ok {
			n++
			if id := changeID(v); id != "" {
				return id
			}
		}
	}
	return ""
}

// changeIDLine returns the value of a change-id line, as b4 reads one
// (`(?i)^[ \t]*change-id:[ \t]*(\S+)[ \t\r]*$`, which the tests keep as
// the oracle: a regular expression over a message's whole text cost a
// rebuild of the catalog a tenth of its CPU).
func changeIDLine(line string) (string, bool) {
	const name = "change-id:"
	line = strings.TrimLeft(line, " \t")
	if len(line) < len(name) {
		return "", false
	}
	for i := range len(name) {
		c := line[i]
		if 'A' <= c && c <= 'Z' {
			c += 'a' - 'A'
		}
		if c != name[i] {
			return "", false
		}
	}
	v := strings.TrimRight(strings.TrimLeft(line[len(name):], " \t"), " \t\r")
	// \S, as Go's regular expressions read it: none of \t \n \f \r and space.
	if v == "" || strings.ContainsAny(v, " \t\n\f\r") {
		return "", false
	}
	return v, true
}

// changeID returns s, trimmed and in lower case, if it is a change-id,
// else "".
func changeID(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	if len(s) > MaxChangeID || !changeIDRE.MatchString(s) {
		return ""
	}
	return s
}
