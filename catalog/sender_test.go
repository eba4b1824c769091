package catalog

import "testing"

// TestAddress: a sender's address as archives write it, made an address
// again: pipermail's "user at host" and Mailman's "user at host.tld".
func TestAddress(t *testing.T) {
	tests := []struct{ in, want string }{
		{"ralf@linux-mips.org", "ralf@linux-mips.org"},
		{"johnml at michaweb.net", "johnml@michaweb.net"},
		{"  johnml  at  michaweb.net ", "johnml@michaweb.net"},
		{"john.doe at lists.example.org", "john.doe@lists.example.org"},
		{"not an address", ""},
		{"at at at", ""},
		{"a at b at c.org", ""},
		{"", ""},
		{"<ralf@linux-mips.org>", ""},
	}
	for _, tt := range tests {
		if got := Address(tt.in); got != tt.want {
			t.Errorf("Address(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}
