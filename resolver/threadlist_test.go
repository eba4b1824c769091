package resolver

import (
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/htmlcheck"
)

// threadList writes what the "threads" template writes, byte for byte,
// for hostile subjects and names as for plain ones, and none at all.
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
		},
	} {
		var want strings.Builder
		if err := templates.ExecuteTemplate(&want, "threads", ts); err != nil {
			t.Fatal(err)
		}
		got := string(threadList(ts))
		if got != want.String() {
			t.Errorf("threadList(%d threads) =\n%s\nwant (the template's)\n%s", len(ts), got, want.String())
		}
		if err := htmlcheck.Check(got, htmlcheck.Options{ArchiveLinks: true}); err != nil {
			t.Errorf("threadList(%d threads) is not safe HTML: %v", len(ts), err)
		}
	}
}
