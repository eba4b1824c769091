package resolver

import (
	"net/mail"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// TestReplyTo: the reply instructions answer all, as lore.kernel.org's
// do: to the list of this message (its List-Post, else its List-Id,
// before the list's address of older mail), with the sender and every To
// and Cc copied once.
func TestReplyTo(t *testing.T) {
	header := func(kv ...string) []mailview.Field {
		var h []mailview.Field
		for i := 0; i < len(kv); i += 2 {
			h = append(h, mailview.Field{Name: kv[i], Value: kv[i+1]})
		}
		return h
	}
	tests := []struct {
		name     string
		header   []mailview.Field
		listAddr string
		wantTo   string
		wantCc   []string
		wantGit  string
	}{
		{
			name: "a vger patch on a list that moved",
			header: header("From", "Thomas Bogendoerfer <tsbogend@alpha.franken.de>",
				"To", "Paul Burton <paulburton@kernel.org>, linux-mips@vger.kernel.org",
				"Cc", `"Doe, John" <john@example.org>, Ralf Baechle <ralf@linux-mips.org>`,
				"List-Id", "<linux-mips.vger.kernel.org>"),
			listAddr: "linux-mips@linux-mips.org",
			wantTo:   "linux-mips@vger.kernel.org",
			wantCc:   []string{"tsbogend@alpha.franken.de", "paulburton@kernel.org", "john@example.org", "ralf@linux-mips.org"},
			wantGit: `git send-email \
    --in-reply-to='<p1@kernel.org>' \
    --to='linux-mips@vger.kernel.org' \
    --cc='tsbogend@alpha.franken.de' \
    --cc='paulburton@kernel.org' \
    --cc='john@example.org' \
    --cc='ralf@linux-mips.org' \
    /path/to/YOUR_REPLY`,
		},
		{
			name: "List-Post first, the list in To or Cc not repeated",
			header: header("From", "A <a@example.org>",
				"To", "B <b@example.org>",
				"Cc", "CAKE@lists.bufferbloat.net, a@example.org",
				"List-Id", "Cake <cake.lists.bufferbloat.net>",
				"List-Post", "<mailto:cake@lists.bufferbloat.net>"),
			listAddr: "cake@old.example.net",
			wantTo:   "cake@lists.bufferbloat.net",
			wantCc:   []string{"a@example.org", "b@example.org"},
		},
		{
			name: "a List-Id as the To spells it",
			header: header("From", "A <a@example.org>",
				"To", "Samba-Technical@lists.samba.org",
				"List-Id", "<samba-technical.lists.samba.org>"),
			wantTo: "Samba-Technical@lists.samba.org",
			wantCc: []string{"a@example.org"},
		},
		{
			name:     "without List-Id or List-Post: the list's address",
			header:   header("From", "A <a@example.org>", "To", "l@lists.example.org", "Cc", "c@example.org"),
			listAddr: "l@lists.example.org",
			wantTo:   "l@lists.example.org",
			wantCc:   []string{"a@example.org", "c@example.org"},
		},
		{
			name:     "a List-Id that is no address",
			header:   header("From", "A <a@example.org>", "List-Id", "<mylist.localhost>"),
			listAddr: "l@lists.example.org",
			wantTo:   "l@lists.example.org",
			wantCc:   []string{"a@example.org"},
		},
		{
			name:     "pipermail's addresses",
			header:   header("From", "alice at example.org (Alice)", "To", "fetchmail-friends at lists.example.org", "Cc", "bob at example.org (Bob)"),
			listAddr: "fetchmail-friends@lists.example.org",
			wantTo:   "fetchmail-friends@lists.example.org",
			wantCc:   []string{"alice@example.org", "bob@example.org"},
		},
		{
			name:   "an unparseable To: the addresses in it",
			header: header("From", "A <a@example.org>", "To", "Jürgen \"J <j@example.org>, k@example.org", "List-Id", "<l.lists.example.org>"),
			wantTo: "l@lists.example.org",
			wantCc: []string{"a@example.org", "k@example.org"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := &mailview.Message{Header: tt.header, MessageID: "p1@kernel.org", Subject: "[PATCH] MIPS: fix"}
			r := replyTo(v, tt.listAddr, catalog.RealSender(tt.header))
			if r == nil {
				t.Fatalf("replyTo() = nil, want a reply to %s", tt.wantTo)
			}
			if r.To != tt.wantTo || !slices.Equal(r.Cc, tt.wantCc) {
				t.Errorf("replyTo() to %q cc %q, want to %q cc %q", r.To, r.Cc, tt.wantTo, tt.wantCc)
			}
			if tt.wantGit != "" && r.Git != tt.wantGit {
				t.Errorf("replyTo().Git = %s\nwant %s", r.Git, tt.wantGit)
			}
		})
	}
}

// TestReplyToKeepsEveryCopy: reply to all copies every address of To and
// Cc, whatever names mailview decoded beside them: a name whose encoded
// word held a comma, an "@" or quotes, groups and their ends, a quoted
// name with a comma next to one net/mail refuses.
func TestReplyToKeepsEveryCopy(t *testing.T) {
	raw := "From: =?UTF-8?Q?Ren=C3=A9_A?= <a@example.org>\r\n" +
		"To: l@lists.example.org, Team: t1@example.org, T2 <t2@example.org>;, undisclosed-recipients:;\r\n" +
		"Cc: =?UTF-8?Q?J=C3=BCrgen_Doe?= <j@example.org>, =?UTF-8?Q?Doe=2C_John?= <john@example.org>,\r\n" +
		" =?UTF-8?Q?x=40y?= <xy@example.org>, \"Quoted, Name\" <q@example.org>,\r\n" +
		" =?UTF-8?Q?=22Ann=22_=28home=29?= <ann@example.org>, bob@example.org (Bob, at home)\r\n" +
		"Message-ID: <m1@example.org>\r\nSubject: hi\r\n\r\nbody\r\n"
	v := mailview.Parse([]byte(raw), mailview.Options{})
	r := replyTo(v, "l@lists.example.org", catalog.RealSender(v.Header))
	if r == nil {
		t.Fatal("replyTo() = nil, want a reply to l@lists.example.org")
	}
	want := []string{"a@example.org", "t1@example.org", "t2@example.org", "j@example.org", "john@example.org",
		"xy@example.org", "q@example.org", "ann@example.org", "bob@example.org"}
	if !slices.Equal(r.Cc, want) {
		t.Errorf("replyTo().Cc = %q, want %q", r.Cc, want)
	}
	if wantMailto := "mailto:l@lists.example.org?In-Reply-To=%3Cm1@example.org%3E&Cc=" +
		strings.Join(want, "%2C") + "&Subject=Re%3A%20hi"; r.Mailto != wantMailto {
		t.Errorf("replyTo().Mailto = %s, want %s", r.Mailto, wantMailto)
	}
}

// TestScanAddressList: the addresses of decoded lists, and the lists it
// leaves to net/mail.
func TestScanAddressList(t *testing.T) {
	tests := []struct {
		in   string
		want []string
		ok   bool
	}{
		{"a@example.org", []string{"a@example.org"}, true},
		{"A <a@example.org>, b@example.org (B), , <c@example.org>", []string{"a@example.org", "b@example.org", "c@example.org"}, true},
		{"Doe, John <j@example.org>", []string{"Doe", "j@example.org"}, true},
		{`"a, b" <a@example.org>, x@y <x@example.org>`, []string{"a@example.org", "x@example.org"}, true},
		{"G: a@example.org, B <b@example.org>;, E:;", []string{"a@example.org", "b@example.org"}, true},
		{"<a@example.org> (the (nested) comment)", []string{"a@example.org"}, true},
		{`Jürgen "J <j@example.org>, k@example.org`, nil, false}, // an unclosed quote
		{"A <a@example.org> <b@example.org>", nil, false},
		{"a@ example.org", nil, false}, // net/mail reads a@example.org
		{`"a.b"@example.org`, nil, false},
		{"a@example.org (unclosed", nil, false},
		{"a@example.org)", nil, false},
		{"bob at example.org (Bob)", nil, false}, // pipermail: the comma split's
		{"<a@example.org", nil, false},
		{"a;b:c@example.org", nil, false},
	}
	for _, tt := range tests {
		got, ok := scanAddressList(nil, tt.in)
		if ok != tt.ok || ok && !slices.Equal(got, tt.want) {
			t.Errorf("scanAddressList(%q) = %q, %v, want %q, %v", tt.in, got, ok, tt.want, tt.ok)
		}
	}
}

// FuzzScanAddressList holds scanAddressList to net/mail: of a list
// net/mail reads, it reads the same addresses a reply copies, or leaves
// the list to net/mail.
func FuzzScanAddressList(f *testing.F) {
	f.Fuzz(func(t *testing.T, s string) {
		got, ok := scanAddressList(nil, s)
		if !ok {
			return
		}
		as, err := mail.ParseAddressList(s)
		if err != nil {
			return // one it reads and net/mail does not: the names it decoded
		}
		var want []string
		for _, a := range as {
			want = append(want, a.Address)
		}
		if g, w := copied(got), copied(want); !slices.Equal(g, w) {
			t.Errorf("scanAddressList(%q) copies %q, net/mail's addresses %q", s, g, w)
		}
	})
}

// copied returns the addresses a reply copies of those given (as replyTo
// takes them).
func copied(as []string) []string {
	var out []string
	for _, a := range as {
		if !safeAddr(a) {
			a = catalog.Address(a)
		}
		if safeAddr(a) {
			out = append(out, a)
		}
	}
	return out
}

// FuzzSafeAddr holds safeAddr to what it stands for: of the strings of
// letters, digits and "@.-_+", those net/mail.ParseAddress gives back as
// they are, at most 254 bytes.
func FuzzSafeAddr(f *testing.F) {
	f.Fuzz(func(t *testing.T, a string) {
		want := a != "" && len(a) <= 254 && !strings.ContainsFunc(a, func(c rune) bool {
			return !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.ContainsRune("@.-_+", c))
		})
		if want {
			p, err := mail.ParseAddress(a)
			want = err == nil && p.Address == a
		}
		if got := safeAddr(a); got != want {
			t.Errorf("safeAddr(%q) = %v, want %v", a, got, want)
		}
	})
}
