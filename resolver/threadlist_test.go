package resolver

import (
	"html/template"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/testkit/htmlcheck"
)

// threadsTemplate is the thread list as an html/template, whose
// contextual escaping threadList must match.
var threadsTemplate = template.Must(template.New("threads").Funcs(funcs).Parse(`<ol class="threads">
{{range rows "linux-mips" .}}<li>
<a class="subject" href="/t/{{.CallNumber}}/">{{.Subject}}</a>
<span class="meta">{{.From}} · {{.Replies}} · {{.When}}<time datetime="{{.ISO}}">{{.Date}}</time></span>
</li>
{{else}}<li class="note">No threads.</li>
{{end}}</ol>`))

// threadList writes what the thread list's html/template writes, byte for
// byte, for hostile subjects and names as for plain ones, and none at all.
func TestThreadList(t *testing.T) {
	day := time.Date(2019, 2, 3, 4, 5, 6, 0, time.UTC)
	summary := func(cn, subject, name, addr string, msgs, inMonth int) catalog.ThreadSummary {
		return catalog.ThreadSummary{
			Root:     catalog.Message{CallNumber: cn, Subject: subject, FromName: name, FromAddr: addr},
			Messages: msgs, InMonth: inMonth, First: day, Last: day.Add(50 * time.Hour),
		}
	}
	for _, ts := range [][]catalog.ThreadSummary{
		nil,
		{summary("2UrKPuW8", "Call numbers", "Ralf Bächle", "ralf@linux-mips.org", 1, 0)},
		{
			summary("aqIiZRje", `<script>alert("x")</script> & 'quotes' "too"`, `"><img src=x onerror=alert(1)>`, "a&b@example.org", 3, 2),
			summary("FKW9EvTP", "", "", "", 2, 0),
			summary("axnBHf9j", "Café ☕ </a> <!-- -->", "\u202eevil", "x@y", 12, 12),
			summary("3kTMd2xB", "[Linux-MIPS] [PATCH] <b>", "x", "x@y", 1, 0),
		},
	} {
		var want strings.Builder
		if err := threadsTemplate.Execute(&want, ts); err != nil {
			t.Fatal(err)
		}
		got := string(threadList("linux-mips", ts))
		if got != want.String() {
			t.Errorf("threadList(%d threads) =\n%s\nwant (the template's)\n%s", len(ts), got, want.String())
		}
		if err := htmlcheck.Check(got, htmlcheck.Options{ArchiveLinks: true}); err != nil {
			t.Errorf("threadList(%d threads) is not safe HTML: %v", len(ts), err)
		}
	}
}

func TestListSubject(t *testing.T) {
	tests := []struct{ subject, list, want string }{
		{"[Linux-MIPS] cache flush", "linux-mips", "cache flush"},
		{"[samba-technical] x", "samba-technical.lists.samba.org", "x"},
		{"[fetchmail] IDLE", "fetchmail-users", "IDLE"},
		{"[PATCH 2/3] MIPS: x", "linux-mips", "[PATCH 2/3] MIPS: x"},
		{"[linux-mips]", "linux-mips", "[linux-mips]"}, // nothing else
		{"[mips] x", "linux-mips", "[mips] x"},         // another list's tag
		{"Re: [linux-mips] x", "linux-mips", "Re: [linux-mips] x"},
	}
	for _, tt := range tests {
		if got := listSubject(tt.subject, tt.list); got != tt.want {
			t.Errorf("listSubject(%q, %q) = %q, want %q", tt.subject, tt.list, got, tt.want)
		}
	}
}
