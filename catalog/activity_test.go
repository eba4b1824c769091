package catalog

import (
	"fmt"
	"testing"
	"time"
)

// TestActivity: a list's posters, threads and messages dated in a span,
// senders told apart by address whatever its case (by name without one),
// other lists and other days left out, removed messages gone, and the
// bound on the messages read.
func TestActivity(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	seq := 0
	put := func(from, list, subject, inReplyTo string, date time.Time) string {
		seq++
		h := fmt.Sprintf("From: %s\nSubject: %s\nMessage-ID: <%d@example.org>\nDate: %s\n", from, subject, seq, date.Format(time.RFC1123Z))
		if inReplyTo != "" {
			h += "In-Reply-To: <" + inReplyTo + ">\n"
		}
		return a.put([]byte(fmt.Sprintf("%s\nx %d\n", h, seq)), list)
	}
	since, until := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 31, 0, 0, 0, 0, time.UTC)
	put("Old <old@example.org>", "l", "before", "", since.Add(-time.Second))
	put("Ann <ann@example.org>", "l", "first thread", "", since) // 2
	put("Bob <bob@example.org>", "l", "Re: first thread", "2@example.org", since.Add(time.Hour))
	put("Ann Again <ANN@example.org>", "l", "second thread", "", since.AddDate(0, 0, 10))
	spam := put("Nameless", "l", "third thread", "", until.Add(-time.Second))
	put("Late <late@example.org>", "l", "after", "", until)
	put("Dee <dee@example.org>", "other", "elsewhere", "", since.AddDate(0, 0, 1))
	mustSync(t, c, a.st)

	check := func(limit int, want Activity) {
		t.Helper()
		got, err := c.activity(t.Context(), "l", since, until, limit)
		if err != nil {
			t.Fatal(err)
		}
		if got != want {
			t.Errorf("activity(l, %d) = %+v, want %+v", limit, got, want)
		}
	}
	check(maxActivityMessages, Activity{Posters: 3, Threads: 3, Messages: 4})
	// The newest two: Nameless's and Ann's second thread.
	check(2, Activity{Posters: 2, Threads: 2, Messages: 2, AtLeast: true})
	if got, err := c.Activity(t.Context(), "none", since, until); err != nil || got != (Activity{}) {
		t.Errorf("Activity(none) = %+v, %v; want nothing", got, err)
	}

	n, _, err := a.codec().Parse(spam)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.Remove(t.Context(), n, "spam"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	check(maxActivityMessages, Activity{Posters: 2, Threads: 2, Messages: 3})
}

// BenchmarkActivity measures a list's activity over 30 days: the busiest
// 30 days of the corpus (the sample of linux-mips), and a span with more
// messages than Activity reads (its bound, maxActivityMessages).
func BenchmarkActivity(b *testing.B) {
	b.Run("corpus", func(b *testing.B) {
		c := corpusCatalog(b)
		months, err := c.Months(b.Context(), "linux-mips")
		if err != nil {
			b.Fatal(err)
		}
		busiest := months[0]
		for _, m := range months {
			if m.Messages > busiest.Messages {
				busiest = m
			}
		}
		since := time.Date(busiest.Year, busiest.Month, 1, 0, 0, 0, 0, time.UTC)
		benchActivity(b, c, "linux-mips", since)
	})
	b.Run("bound", func(b *testing.B) {
		a := newArchive(b)
		c := openCatalog(b)
		since := time.Date(2024, 3, 1, 0, 0, 0, 0, time.UTC)
		for i := range maxActivityMessages + 100 {
			a.put([]byte(fmt.Sprintf("From: P%d <p%d@example.org>\nSubject: s%d\nMessage-ID: <%d@example.org>\nDate: %s\n\nx\n",
				i%500, i%500, i%1000, i, since.Add(time.Duration(i)*time.Minute).Format(time.RFC1123Z))), "l")
		}
		mustSync(b, c, a.st)
		benchActivity(b, c, "l", since)
	})
}

func benchActivity(b *testing.B, c *Catalog, list string, since time.Time) {
	var got Activity
	b.ResetTimer()
	for b.Loop() {
		var err error
		if got, err = c.Activity(b.Context(), list, since, since.AddDate(0, 0, 30)); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(got.Messages), "messages")
	b.Logf("%s from %s: %+v", list, since.Format(time.DateOnly), got)
}
