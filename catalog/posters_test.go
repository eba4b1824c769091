package catalog

import (
	"fmt"
	"slices"
	"testing"
	"time"
)

// TestPosters: a list's senders counted by month, by address whatever its
// case (by name without one), as messages come, are removed and move to
// another list.
func TestPosters(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	seq := 0
	put := func(from, list string, date time.Time) string {
		seq++
		return a.put([]byte(fmt.Sprintf("From: %s\nSubject: s%d\nMessage-ID: <%d@example.org>\nDate: %s\n\nx %d\n", from, seq, seq, date.Format(time.RFC1123Z), seq)), list)
	}
	jan, feb, mar := time.Date(2024, 1, 10, 0, 0, 0, 0, time.UTC), time.Date(2024, 2, 10, 0, 0, 0, 0, time.UTC), time.Date(2024, 3, 10, 0, 0, 0, 0, time.UTC)
	put("Ann <ann@example.org>", "l", jan)
	put("Ann <ann@example.org>", "l", feb)
	put("Ann Again <ANN@example.org>", "l", mar)
	put("Bob <bob@example.org>", "l", feb)
	bob := put("Bob <bob@example.org>", "l", mar)
	put("Cy <cy@example.org>", "l", mar)
	put("Nameless", "l", mar)
	put("Dee <dee@example.org>", "other", mar)
	mustSync(t, c, a.st)

	check := func(since time.Time, limit int, want []string, wantPeople int) {
		t.Helper()
		ps, people, err := c.Posters(t.Context(), "l", since, limit)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for _, p := range ps {
			got = append(got, fmt.Sprintf("%s <%s> %d", p.Name, p.Address, p.Messages))
		}
		if !slices.Equal(got, want) || people != wantPeople {
			t.Errorf("Posters(l, %s, %d) = %q, %d; want %q, %d", since.Format("2006-01"), limit, got, people, want, wantPeople)
		}
	}
	check(jan, 10, []string{"Ann Again <ann@example.org> 3", "Bob <bob@example.org> 2", "Cy <cy@example.org> 1", "Nameless <> 1"}, 4)
	check(feb.AddDate(0, 0, 5), 2, []string{"Ann Again <ann@example.org> 2", "Bob <bob@example.org> 2"}, 4)
	check(mar, 10, []string{"Ann Again <ann@example.org> 1", "Bob <bob@example.org> 1", "Cy <cy@example.org> 1", "Nameless <> 1"}, 4)

	n, _, err := a.codec().Parse(bob)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.Move(t.Context(), n, "other"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	check(mar, 10, []string{"Ann Again <ann@example.org> 1", "Cy <cy@example.org> 1", "Nameless <> 1"}, 3)
	if ps, _, err := c.Posters(t.Context(), "other", mar, 10); err != nil || len(ps) != 2 {
		t.Errorf("Posters(other) after a move = %+v, %v; want Bob and Dee", ps, err)
	}
	if _, err := a.st.Remove(t.Context(), n, "spam"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	if ps, people, err := c.Posters(t.Context(), "other", mar, 10); err != nil || len(ps) != 1 || people != 1 || ps[0].Address != "dee@example.org" {
		t.Errorf("Posters(other) after a removal = %+v, %d, %v; want Dee alone", ps, people, err)
	}
}
