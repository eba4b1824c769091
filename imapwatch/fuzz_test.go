package imapwatch

import (
	"errors"
	"testing"
)

// FuzzParseAfter: whatever ParseAfter accepts, String gives back.
func FuzzParseAfter(f *testing.F) {
	for _, s := range []string{"keep", "seen", "delete", "move:Archived", "move:", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		a, err := ParseAfter(s)
		if err != nil {
			if !errors.Is(err, ErrBadAfter) {
				t.Fatalf("ParseAfter(%q) error %v is not ErrBadAfter", s, err)
			}
			return
		}
		b, err := ParseAfter(a.String())
		if err != nil || b != a {
			t.Fatalf("ParseAfter(%q) = %+v; again from %q: %+v, %v", s, a, a.String(), b, err)
		}
	})
}

// FuzzParseURL: an accepted URL has a user, a host:port and a mailbox;
// errors are ErrBadURL.
func FuzzParseURL(f *testing.F) {
	for _, s := range []string{"imaps://u@h/INBOX", "imap://u%40x@[::1]:1143/a/b", "imaps://u:p@h", "imaps://h"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		tg, err := ParseURL(s)
		if err != nil {
			if !errors.Is(err, ErrBadURL) {
				t.Fatalf("ParseURL(%q) error %v is not ErrBadURL", s, err)
			}
			return
		}
		if tg.User == "" || tg.Addr == "" || tg.Mailbox == "" {
			t.Fatalf("ParseURL(%q) = %+v: empty field", s, tg)
		}
	})
}
