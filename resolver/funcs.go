package resolver

import (
	"html/template"
	"strconv"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// Dates on pages are UTC, to the minute: the same for every reader, and
// as mail archives show them.
const (
	dateLayout     = "2006-01-02"
	dateTimeLayout = "2006-01-02 15:04"
)

var funcs = template.FuncMap{
	"size":       humanSize,
	"pathescape": pathEscape,
	"date":       func(t time.Time) string { return t.UTC().Format(dateLayout) },
	"datetime":   func(t time.Time) string { return t.UTC().Format(dateTimeLayout) },
	"isodate":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ym":         func(y int, m time.Month) string { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Format("2006-01") },
	"monthname":  func(y int, m time.Month) string { return m.String() + " " + strconv.Itoa(y) },
	"add":        func(a, b int) int { return a + b },
	"text":       func(s string) template.HTML { return renderText(s, textOptions{}) },
	"foldedtext": func(s string) template.HTML { return renderText(s, textOptions{Fold: 6}) },
	// parts passes a message's parts and how to show their text to the
	// recursive "parts" template.
	"parts":   func(m *mailview.Message, folded bool) partsOf { return partsOf{m, folded} },
	"years":   years,
	"attname": attachmentName,
	// depth is the indentation class of a thread node: d0..d10.
	"depth":   func(d int) int { return min(d, 10) },
	"replies": func(n int) int { return n - 1 },
	// plural writes a count with its noun: "1 message", "2 messages".
	"plural": func(n int, noun string) string {
		if n == 1 {
			return "1 " + noun
		}
		return strconv.Itoa(n) + " " + noun + "s"
	},
	"subjectOr": func(s string) string {
		if s == "" {
			return "(no subject)"
		}
		return s
	},
}

type partsOf struct {
	M      *mailview.Message
	Folded bool
}

// yearRow is a year of a list's months, January to December.
type yearRow struct {
	Year   int
	Months [12]catalog.Month // Messages 0: none that month
	Total  int
}

// years arranges a list's months (newest first) as a calendar, newest
// year first.
func years(months []catalog.Month) []yearRow {
	var out []yearRow
	for _, m := range months {
		if len(out) == 0 || out[len(out)-1].Year != m.Year {
			out = append(out, yearRow{Year: m.Year})
			for i := range out[len(out)-1].Months {
				out[len(out)-1].Months[i] = catalog.Month{Year: m.Year, Month: time.Month(i + 1)}
			}
		}
		row := &out[len(out)-1]
		row.Months[m.Month-1].Messages = m.Messages
		row.Total += m.Messages
	}
	return out
}
