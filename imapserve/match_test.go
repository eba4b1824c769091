package imapserve

import "testing"

func TestMatchMailbox(t *testing.T) {
	tests := []struct {
		name, ref, pattern string
		want               bool
	}{
		{"linux-mips", "", "*", true},
		{"linux-mips", "", "%", true},
		{"linux-mips", "", "linux-mips", true},
		{"linux-mips", "", "Linux-MIPS", true},
		{"linux-mips", "", "linux*", true},
		{"linux-mips", "", "*mips", true},
		{"linux-mips", "", "l*x-%s", true},
		{"linux-mips", "", "linux", false},
		{"linux-mips", "", "", false},
		{"linux-mips", "linux", "*", true},
		{"linux-mips", "linux", "-mips", true},
		{"linux-mips", "other", "*", false},
		{"linux-mips", "other", "/linux*", true},
		{"a/b", "", "a%", false},
		{"a/b", "", "a*", true},
		{"a/b", "", "a/%", true},
		{"git.kernel.org", "", "git.%.org", true},
		{"aaaaaaaaaaaaaaaaaaaaaaaaaaaaaa", "", "*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", false},
	}
	for _, tt := range tests {
		if got := matchMailbox(tt.name, tt.ref, tt.pattern); got != tt.want {
			t.Errorf("matchMailbox(%q, %q, %q) = %v, want %v", tt.name, tt.ref, tt.pattern, got, tt.want)
		}
	}
}

// globRef is the definition, by backtracking: slow, and plainly right.
func globRef(name, pattern string) bool {
	if pattern == "" {
		return name == ""
	}
	switch pattern[0] {
	case '*', '%':
		for i := 0; i <= len(name); i++ {
			if globRef(name[i:], pattern[1:]) {
				return true
			}
			if i < len(name) && pattern[0] == '%' && name[i] == byte(Delim) {
				return false
			}
		}
		return false
	}
	return name != "" && name[0] == pattern[0] && globRef(name[1:], pattern[1:])
}

// FuzzGlob compares glob with the backtracking definition, on inputs
// short enough for it.
func FuzzGlob(f *testing.F) {
	for _, s := range [][2]string{{"linux-mips", "l*x-%s"}, {"a/b", "a%"}, {"a/b/c", "*/%"}, {"", "%*"}, {"abab", "*ab"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, name, pattern string) {
		if len(name) > 16 || len(pattern) > 12 {
			return
		}
		if got, want := glob(name, pattern), globRef(name, pattern); got != want {
			t.Errorf("glob(%q, %q) = %v, want %v", name, pattern, got, want)
		}
	})
}
