package resolver

import (
	"slices"
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
