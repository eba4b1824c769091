package nntpserve

import (
	"testing"

	"github.com/chibrary/chibrary/catalog"
)

// TestOverviewFrom: the From of the overview is an address a newsreader
// reads, also for pipermail's "johnml at michaweb.net" (RFC 5536 section
// 3.1.2 wants a From header's syntax, RFC 5322 section 3.4).
func TestOverviewFrom(t *testing.T) {
	tests := []struct{ name, addr, want string }{
		{"John Fawcett", "johnml at michaweb.net", `"John Fawcett" <johnml@michaweb.net>`},
		{"", "johnml at michaweb.net", "johnml@michaweb.net"},
		{"Ralf Baechle", "ralf@linux-mips.org", `"Ralf Baechle" <ralf@linux-mips.org>`},
		{"", "ralf@linux-mips.org", "ralf@linux-mips.org"},
		{"Jürgen", "j at example.de", "=?utf-8?q?J=C3=BCrgen?= <j@example.de>"},
		{"Someone", "not an address", "Someone"},
		{"Someone", "", "Someone"},
		{"", "", ""},
	}
	for _, tt := range tests {
		if got := from(&catalog.Entry{FromName: tt.name, FromAddr: tt.addr}); got != tt.want {
			t.Errorf("from(%q, %q) = %q, want %q", tt.name, tt.addr, got, tt.want)
		}
	}
}
