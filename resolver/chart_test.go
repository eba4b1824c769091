package resolver

import (
	"regexp"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/catalog"
)

var chartBarRE = regexp.MustCompile(`<rect x="(\d+)" y="(\d+)" width="8" height="(\d+)"><title>([^<]*)</title></rect>`)

// TestActivityChart: the last 24 months, empty ones included, each
// month's bar as high as its share of the busiest, with its title; older
// months left out; nothing for a list without months.
func TestActivityChart(t *testing.T) {
	if got := activityChart(nil); got != "" {
		t.Errorf("activityChart(nil) = %q, want nothing", got)
	}
	got := string(activityChart([]catalog.Month{
		{Year: 2024, Month: 3, Messages: 20},
		{Year: 2024, Month: 1, Messages: 1},
		{Year: 2022, Month: 4, Messages: 10},
		{Year: 2022, Month: 3, Messages: 99}, // 25 months back: not drawn
	}))
	if !strings.Contains(got, `aria-label="Messages per month, April 2022 to March 2024, at most 20 a month"`) {
		t.Errorf("the chart's label is wrong:\n%s", got)
	}
	var bars [][]string
	for _, m := range chartBarRE.FindAllStringSubmatch(got, -1) {
		bars = append(bars, m[1:])
	}
	want := [][]string{
		{"0", "20", "19", "2022-04: 10 messages"},
		{"210", "37", "2", "2024-01: 1 message"},
		{"230", "0", "39", "2024-03: 20 messages"},
	}
	if len(bars) != len(want) {
		t.Fatalf("bars = %q, want %q", bars, want)
	}
	for i := range want {
		if strings.Join(bars[i], " ") != strings.Join(want[i], " ") {
			t.Errorf("bar %d = %q, want %q", i, bars[i], want[i])
		}
	}
	if err := unsafeHTML(got); err != nil {
		t.Error(err)
	}
}

// TestListPageChart: a list's first page draws its activity.
func TestListPageChart(t *testing.T) {
	ca := newCatalogArchive(t)
	r := get(t, ca.srv.URL+"/l/demo/")
	if !strings.Contains(r.body, `<svg class="chart"`) || !strings.Contains(r.body, "<title>2024-03: 20 messages</title>") {
		t.Errorf("the list page does not chart its 20 messages of March 2024:\n%s", r.body)
	}
	if err := unsafeHTML(r.body); err != nil {
		t.Error(err)
	}
}
