package store

import "strings"

// ListName returns the canonical form of a list name, the one the store
// records, the catalog indexes and URLs carry: lower-case, [a-z0-9._-]
// (anything else becomes '-'), without leading or trailing punctuation, at
// most MaxList bytes; "" if nothing is left. "Linux MIPS", Linux-MIPS and
// linux-mips are the list linux-mips: every program compares list names in
// this form, so that the forms a user may type are one list.
func ListName(s string) string {
	s = strings.ToLower(strings.TrimSpace(s))
	var b strings.Builder
	for _, r := range s {
		switch {
		case r >= 'a' && r <= 'z', r >= '0' && r <= '9', r == '.', r == '_', r == '-':
			b.WriteRune(r)
		default:
			b.WriteByte('-')
		}
	}
	out := strings.Trim(b.String(), "-._")
	if len(out) > MaxList {
		out = strings.Trim(out[:MaxList], "-._")
	}
	return out
}
