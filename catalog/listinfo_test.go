package catalog

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chibrary/chibrary/mailview"
)

func TestListDescription(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{`"Linux MIPS discussion" <linux-mips.linux-mips.org>`, "Linux MIPS discussion"},
		{"Discussion of  the\tCake <cake.lists.bufferbloat.net>", "Discussion of the Cake"},
		{"linux-mips <linux-mips.eddie.linux-mips.org>", ""},
		{"<linux-mips.vger.kernel.org>", ""},
		{"no angle brackets", ""},
		{`"a \"quoted\" word" <x.example.org>`, `a "quoted" word`},
		{"bell\a and\x00 nul <x.example.org>", "bell and nul"},
		{strings.Repeat("é", 150) + " <x.example.org>", strings.Repeat("é", 100) + "…"},
	} {
		got := ListDescription([]mailview.Field{{Name: "X-Other", Value: "y <z>"}, {Name: "list-id", Value: tt.in}})
		if got != tt.want {
			t.Errorf("ListDescription(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestListSubscribe(t *testing.T) {
	for _, tt := range []struct{ in, want string }{
		{"<mailto:cake-request@lists.bufferbloat.net?subject=subscribe>, <https://lists.bufferbloat.net/listinfo/cake>", "https://lists.bufferbloat.net/listinfo/cake"},
		{"<mailto:majordomo@vger.kernel.org?body=subscribe%20linux-mips>", "mailto:majordomo@vger.kernel.org?body=subscribe%20linux-mips"},
		{"<javascript:alert(1)>, <data:text/html,x>", ""},
		{"<https://>", ""},
		{"<https://example.org/a b>", ""},
		{"<" + strings.Repeat("a", 600) + ">", ""},
		{"no url", ""},
		{"<mailto:", ""},
	} {
		got := ListSubscribe([]mailview.Field{{Name: "List-Subscribe", Value: tt.in}})
		if got != tt.want {
			t.Errorf("ListSubscribe(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

// FuzzListInfo: whatever a message says of its list, the description is
// bounded valid text without control characters, and a subscription is
// an http(s) or mailto URL.
func FuzzListInfo(f *testing.F) {
	for _, s := range []string{`"Linux MIPS" <linux-mips.example.org>`, "<mailto:a@b?subject=subscribe>, <https://x/y>", "<javascript:x>", "\xff <a.b>"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		d := ListDescription([]mailview.Field{{Name: "List-Id", Value: v}})
		if len(d) > MaxListDescription+len("…") || strings.ContainsFunc(d, func(r rune) bool { return r < ' ' || r == 0x7f }) {
			t.Fatalf("ListDescription(%q) = %q", v, d)
		}
		if !utf8.ValidString(d) && utf8.ValidString(v) {
			t.Fatalf("ListDescription(%q) = %q, not UTF-8", v, d)
		}
		u := ListSubscribe([]mailview.Field{{Name: "List-Subscribe", Value: v}})
		if u != "" && !strings.HasPrefix(u, "https://") && !strings.HasPrefix(u, "http://") && !strings.HasPrefix(u, "mailto:") || len(u) > 3*MaxSubscribeURL {
			t.Fatalf("ListSubscribe(%q) = %q", v, u)
		}
	})
}
