package resolver

import (
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/catalog"
)

// chartMonths is how many months the activity chart of a list page
// draws: the last two years of the list, ending at its newest month.
const chartMonths = 24

// Bar geometry in the chart's own units (its viewBox); the style sheet
// sets the size it is drawn at.
const (
	chartBar, chartGap, chartHeight = 8, 2, 40
)

// activityChart draws a list's messages per month (months newest first,
// as the catalog gives them) as an inline SVG bar chart, on the server:
// no script, no request. Every bar has a title (the month and its
// count); the whole reads as one image with a label that says the same
// as the calendar beside it.
func activityChart(months []catalog.Month) template.HTML {
	if len(months) == 0 {
		return ""
	}
	// Count by month, from the newest back chartMonths months, empty
	// months included.
	newest := time.Date(months[0].Year, months[0].Month, 1, 0, 0, 0, 0, time.UTC)
	counts := make([]int, chartMonths) // counts[0] is the oldest
	most := 0
	for _, m := range months {
		t := time.Date(m.Year, m.Month, 1, 0, 0, 0, 0, time.UTC)
		back := (newest.Year()-t.Year())*12 + int(newest.Month()-t.Month())
		if back < 0 || back >= chartMonths {
			continue
		}
		counts[chartMonths-1-back] += m.Messages
		most = max(most, counts[chartMonths-1-back])
	}
	oldest := newest.AddDate(0, 1-chartMonths, 0)
	var b strings.Builder
	b.WriteString(`<figure class="activity"><svg class="chart" viewBox="0 0 `)
	b.WriteString(strconv.Itoa(chartMonths * (chartBar + chartGap)))
	b.WriteString(` `)
	b.WriteString(strconv.Itoa(chartHeight))
	b.WriteString(`" preserveAspectRatio="none" role="img" aria-label="Messages per month, `)
	b.WriteString(oldest.Format("January 2006"))
	b.WriteString(` to `)
	b.WriteString(newest.Format("January 2006"))
	b.WriteString(`, at most `)
	b.WriteString(strconv.Itoa(most))
	b.WriteString(` a month">`)
	b.WriteString(`<rect class="base" x="0" y="`)
	b.WriteString(strconv.Itoa(chartHeight - 1))
	b.WriteString(`" width="`)
	b.WriteString(strconv.Itoa(chartMonths * (chartBar + chartGap)))
	b.WriteString(`" height="1"></rect>`)
	for i, n := range counts {
		if n == 0 {
			continue
		}
		// At least 2 units high, so that a month of one message shows.
		h := max(2, n*(chartHeight-1)/max(most, 1))
		month := oldest.AddDate(0, i, 0)
		b.WriteString(`<rect x="`)
		b.WriteString(strconv.Itoa(i * (chartBar + chartGap)))
		b.WriteString(`" y="`)
		b.WriteString(strconv.Itoa(chartHeight - 1 - h))
		b.WriteString(`" width="`)
		b.WriteString(strconv.Itoa(chartBar))
		b.WriteString(`" height="`)
		b.WriteString(strconv.Itoa(h))
		b.WriteString(`"><title>`)
		b.WriteString(month.Format("2006-01"))
		b.WriteString(`: `)
		b.WriteString(strconv.Itoa(n))
		if n == 1 {
			b.WriteString(` message`)
		} else {
			b.WriteString(` messages`)
		}
		b.WriteString(`</title></rect>`)
	}
	b.WriteString(`</svg><figcaption><span>`)
	b.WriteString(oldest.Format("Jan 2006"))
	b.WriteString(`</span> <span>messages per month</span> <span>`)
	b.WriteString(newest.Format("Jan 2006"))
	b.WriteString(`</span></figcaption></figure>`)
	return template.HTML(b.String())
}
