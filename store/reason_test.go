package store_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/store"
)

func TestCheckReason(t *testing.T) {
	for _, tt := range []struct {
		name, reason string
		ok           bool
	}{
		{"empty", "", true},
		{"plain", "at the author's request", true},
		{"accents and scripts", "à la demande de l'auteur, по просьбе автора, 著者の依頼", true},
		{"right to left, as written", "بناء على طلب المؤلف", true},
		{"longest", strings.Repeat("x", store.MaxReason), true},
		{"too long", strings.Repeat("x", store.MaxReason+1), false},
		{"two lines", "one\ntwo", false},
		{"a tab", "a\tb", false},
		{"not UTF-8", "a\xffb", false},
		{"right-to-left override", "gro.elpmaxe\u202e", false},
		{"left-to-right embedding", "\u202aa", false},
		{"isolate", "\u2067a\u2069", false},
		{"right-to-left mark", "a\u200fb", false},
		{"Arabic letter mark", "a\u061cb", false},
	} {
		err := store.CheckReason(tt.reason)
		if tt.ok && err != nil || !tt.ok && !errors.Is(err, store.ErrBadReason) {
			t.Errorf("%s: CheckReason(%q) = %v, want ok %v", tt.name, tt.reason, err, tt.ok)
		}
	}
}
