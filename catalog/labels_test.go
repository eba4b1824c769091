package catalog

import (
	"fmt"
	"math/rand/v2"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"
)

func TestLateBaseSQL(t *testing.T) {
	if got := strconv.FormatInt(lateBase, 10); got != lateBaseSQL {
		t.Errorf("lateBaseSQL = %s, want %s", lateBaseSQL, got)
	}
}

func TestBetween(t *testing.T) {
	const d = 1_000_000_000
	tests := []struct {
		name             string
		hasPred, hasSucc bool
		pred, predDate   int64
		succ, date       int64
		want             int64
		ok               bool
	}{
		{"the first", false, false, 0, 0, 0, d, labelBase, true},
		{"appended", true, false, 500, d - 5, 0, d, 500 + labelGap, true},
		{"older than all", false, true, 0, 0, labelBase, d, labelBase - labelLead, true},
		{"older than all, near 0", false, true, 0, 0, 10, d, 5, true},
		{"older than all, at 1", false, true, 0, 0, 1, d, 0, false},
		{"between, a gap", true, true, 100, d - 5, 116, d, 108, true},
		{"between, a long gap", true, true, 100, d - 5, 1000, d, 100 + labelGap, true},
		{"of the same date: right after", true, true, 100, d, 116, d, 101, true},
		{"no room", true, true, 100, d - 5, 101, d, 0, false},
		{"no room after one of its date", true, true, 100, d, 101, d, 0, false},
	}
	for _, tt := range tests {
		got, ok := between(tt.hasPred, tt.hasSucc, tt.pred, tt.predDate, tt.succ, tt.date)
		if ok != tt.ok || ok && got != tt.want {
			t.Errorf("%s: between = %d, %v; want %d, %v", tt.name, got, ok, tt.want, tt.ok)
		}
		if ok && (tt.hasPred && got <= tt.pred || tt.hasSucc && got >= tt.succ || got <= 0) {
			t.Errorf("%s: between = %d, not between %d and %d", tt.name, got, tt.pred, tt.succ)
		}
	}
	if lateLabel(-5, 3) != lateBase|3 || lateLabel(1<<40, 3) != lateBase|lateDateMax<<lateIDBits|3 {
		t.Errorf("lateLabel does not clamp dates")
	}
}

// labelled is a message as the labels test sees it.
type labelled struct {
	cn       string
	id, date int64
	label    int64
	late     bool
	list     string
}

// labelsOf reads every message's label.
func labelsOf(t *testing.T, c *Catalog) []labelled {
	t.Helper()
	rows, err := c.r.QueryContext(t.Context(), `SELECT cn, id, date, label, list FROM messages ORDER BY date, id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []labelled
	for rows.Next() {
		var m labelled
		var label *int64
		if err := rows.Scan(&m.cn, &m.id, &m.date, &label, &m.list); err != nil {
			t.Fatal(err)
		}
		if label == nil {
			t.Fatalf("message %s has no label", m.cn)
		}
		m.label, m.late = *label, *label >= lateBase
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return out
}

// checkLabels: labels and late labels are each in the order of the
// messages' (date, id), late labels hold their message's date and id.
func checkLabels(t *testing.T, ms []labelled) (late int) {
	t.Helper()
	var last, lastLate int64
	for _, m := range ms {
		if m.late {
			late++
			if m.label != lateLabel(m.date, m.id) {
				t.Errorf("message %s (date %d, id %d): late label %x, want %x", m.cn, m.date, m.id, m.label, lateLabel(m.date, m.id))
			}
			if m.label <= lastLate {
				t.Errorf("message %s: late label %x after %x, out of date order", m.cn, m.label, lastLate)
			}
			lastLate = m.label
			continue
		}
		if m.label <= last {
			t.Errorf("message %s (date %d, id %d): label %d after %d, out of date order", m.cn, m.date, m.id, m.label, last)
		}
		last = m.label
	}
	return late
}

// TestLabels indexes messages in the orders a store may hand them out,
// and checks that every search reads them as it would the messages
// themselves, newest first by (date, id), whether they took labels or
// late labels; and that a rebuild labels them all densely in date order.
func TestLabels(t *testing.T) {
	const n = 300
	base := time.Date(2009, 3, 1, 0, 0, 0, 0, time.UTC)
	// Dates: mostly a few hours apart, some the same second.
	dates := make([]time.Time, n)
	rng := rand.New(rand.NewPCG(7, 8))
	for i := range dates {
		dates[i] = base.Add(time.Duration(i/3) * 5 * time.Hour).Add(time.Duration(rng.IntN(2)) * time.Minute)
	}
	orders := map[string]func() []int{
		"ascending": func() []int { return identity(n) },
		"descending": func() []int {
			o := identity(n)
			slices.Reverse(o)
			return o
		},
		"shuffled": func() []int {
			o := identity(n)
			rng.Shuffle(len(o), func(i, j int) { o[i], o[j] = o[j], o[i] })
			return o
		},
		"older archive after a newer": func() []int {
			o := identity(n)
			return append(o[n/2:], o[:n/2]...)
		},
		"copies": func() []int { // every date thrice, copy after copy
			var o []int
			for range 3 {
				o = append(o, identity(n/3)...)
			}
			return o
		},
	}
	for name, order := range orders {
		t.Run(name, func(t *testing.T) {
			a := newArchive(t)
			c := openCatalog(t)
			for k, i := range order() {
				list := "one"
				if i%4 == 0 {
					list = "two"
				}
				raw := fmt.Appendf(nil, "From: Sender %d <s%d@example.org>\nTo: all@example.org\nSubject: note %d\nMessage-ID: <m%d.%d@example.org>\nDate: %s\n\ncommon word%d\n",
					i, i, i, i, k, dates[i].Format(time.RFC1123Z), i%5)
				a.put(raw, list)
				if k%17 == 0 {
					mustSync(t, c, a.st)
				}
			}
			mustSync(t, c, a.st)
			ms := labelsOf(t, c)
			if len(ms) != n {
				t.Fatalf("%d messages indexed, want %d", len(ms), n)
			}
			late := checkLabels(t, ms)
			if name == "ascending" && late > 0 {
				t.Errorf("%d late labels for messages indexed in date order, want none", late)
			}
			t.Logf("%s: %d of %d late", name, late, n)
			checkSearches(t, c, ms)

			// A rebuild labels them all, in date order, a gap apart.
			path := filepath.Join(t.TempDir(), "rebuilt.db")
			if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{PageSize: 7}, Options{}); err != nil {
				t.Fatal(err)
			}
			rc, err := Open(t.Context(), path, Options{ReadOnly: true, SearchTimeout: time.Minute})
			if err != nil {
				t.Fatal(err)
			}
			defer rc.Close()
			rms := labelsOf(t, rc)
			for i, m := range rms {
				if want := int64(labelBase + i*labelGap); m.label != want {
					t.Fatalf("rebuilt: message %d by date (%s) has label %d, want %d", i, m.cn, m.label, want)
				}
			}
			checkSearches(t, rc, rms)

			// A late message and a labelled one removed: gone from searches.
			var gone []labelled
			for _, late := range []bool{true, false} {
				if i := slices.IndexFunc(ms, func(m labelled) bool { return m.late == late }); i >= 0 {
					gone = append(gone, ms[i])
					ms = slices.Delete(ms, i, i+1)
				}
			}
			for _, m := range gone {
				n, _, err := a.codec().Parse(m.cn)
				if err != nil {
					t.Fatal(err)
				}
				if _, err := a.st.Remove(t.Context(), n, "test"); err != nil {
					t.Fatal(err)
				}
			}
			mustSync(t, c, a.st)
			checkSearches(t, c, ms)
		})
	}
}

func identity(n int) []int {
	o := make([]int, n)
	for i := range o {
		o[i] = i
	}
	return o
}

// checkSearches compares searches, by page, with what ms says they find.
func checkSearches(t *testing.T, c *Catalog, ms []labelled) {
	t.Helper()
	newest := slices.Clone(ms)
	slices.SortFunc(newest, func(a, b labelled) int {
		if a.date != b.date {
			return int(b.date - a.date)
		}
		return int(b.id - a.id)
	})
	from, to := newest[len(newest)*2/3].date, newest[len(newest)/3].date
	for _, tt := range []struct {
		q    string
		keep func(m labelled) bool
	}{
		{"common", func(labelled) bool { return true }},
		{"common list:two", func(m labelled) bool { return m.list == "two" }},
		{fmt.Sprintf("common after:%s before:%s", time.Unix(from, 0).UTC().Format(time.DateOnly), time.Unix(to, 0).UTC().Format(time.DateOnly)),
			func(m labelled) bool { return m.date >= dayOf(from) && m.date < dayOf(to) }},
		// public-inbox's: the same range as d:, and To read from the
		// fts_addr index, whose rows have the same labels.
		{fmt.Sprintf("s:note d:%s..%s", time.Unix(from, 0).UTC().Format("20060102"), time.Unix(to-86400, 0).UTC().Format("20060102")),
			func(m labelled) bool { return m.date >= dayOf(from) && m.date < dayOf(to) }},
		{"t:all", func(labelled) bool { return true }},
		{"t:all list:two", func(m labelled) bool { return m.list == "two" }},
	} {
		var want []string
		for _, m := range newest {
			if tt.keep(m) {
				want = append(want, m.cn)
			}
		}
		q, err := ParseQuery(tt.q)
		if err != nil {
			t.Fatal(err)
		}
		var got []string
		for off := 0; ; off += 7 {
			res, err := c.Search(t.Context(), q, SearchOptions{Offset: off, Limit: 7})
			if err != nil {
				t.Fatalf("Search(%q) = %v", tt.q, err)
			}
			if res.Total != len(want) {
				t.Errorf("Search(%q) total = %d, want %d", tt.q, res.Total, len(want))
			}
			for _, m := range res.Messages {
				got = append(got, m.CallNumber)
			}
			if len(res.Messages) < 7 {
				break
			}
		}
		if !slices.Equal(got, want) {
			t.Errorf("Search(%q), newest first = %d messages\n%v\nwant %d\n%v", tt.q, len(got), got, len(want), want)
		}
		res, err := c.Search(t.Context(), q, SearchOptions{Sort: Relevance, Limit: len(ms) + 1})
		if err != nil {
			t.Fatalf("Search(%q, relevance) = %v", tt.q, err)
		}
		var rel []string
		for _, m := range res.Messages {
			rel = append(rel, m.CallNumber)
		}
		slices.Sort(rel)
		sorted := slices.Sorted(slices.Values(want))
		if !slices.Equal(rel, sorted) {
			t.Errorf("Search(%q, relevance) found %d messages, want %d", tt.q, len(rel), len(want))
		}
	}
	// IMAP and NNTP searches find them too.
	var two []uint32
	q, _ := ParseQuery("common")
	two, err := c.SearchNumbers(t.Context(), "two", q)
	if err != nil {
		t.Fatal(err)
	}
	if want := len(slices.DeleteFunc(slices.Clone(ms), func(m labelled) bool { return m.list != "two" })); len(two) != want {
		t.Errorf("SearchNumbers(two, common) = %d numbers, want %d", len(two), want)
	}
}

// dayOf returns the start of the UTC day of a Unix date.
func dayOf(date int64) int64 { return date - date%86400 }
