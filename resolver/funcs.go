package resolver

import (
	"fmt"
	"html"
	"html/template"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/catalog"
)

// Dates on pages are UTC, to the minute, and say so: the same for every
// reader, and as mail archives show them.
const (
	dateLayout     = "2006-01-02"
	dateTimeLayout = "2006-01-02 15:04 UTC"
)

var funcs = template.FuncMap{
	"pathescape": pathEscape,
	"date":       func(t time.Time) string { return t.UTC().Format(dateLayout) },
	"datetime":   func(t time.Time) string { return t.UTC().Format(dateTimeLayout) },
	"isodate":    func(t time.Time) string { return t.UTC().Format(time.RFC3339) },
	"ym":         func(y int, m time.Month) string { return time.Date(y, m, 1, 0, 0, 0, 0, time.UTC).Format("2006-01") },
	"monthname":  func(y int, m time.Month) string { return m.String() + " " + strconv.Itoa(y) },
	"add":        func(a, b int) int { return a + b },
	// body is a message's text, sanitized HTML and enclosed messages;
	// folded folds long quotes.
	"body":        bodyHTML,
	"calendar":    calendar,
	"chart":       activityChart,
	"diffstat":    diffstatText,
	"listsubject": func(subject, list string) string { return listSubject(subject, list) },
	"rows":        rows,
	"threadlist":  threadList,
	// depth is the indentation class of a thread node: d0..d10.
	"depth": func(d int) int { return min(d, 10) },
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

// listSubject returns a subject as a row of its list shows it: without
// a leading tag that names the list ("[Linux-MIPS] x" on linux-mips,
// "[samba-technical] x" on samba-technical.lists.samba.org): every row
// would repeat it. Other tags ([PATCH 2/3]) stay.
func listSubject(subject, list string) string {
	s := strings.TrimLeft(subject, " \t")
	j := strings.IndexByte(s, ']')
	if !strings.HasPrefix(s, "[") || j < 2 || j > 64 {
		return subject
	}
	tag := catalog.ListName(s[1:j])
	if tag == "" || tag != list && !strings.HasPrefix(list, tag+".") && !strings.HasPrefix(list, tag+"-") {
		return subject
	}
	if rest := strings.TrimLeft(s[j+1:], " \t"); rest != "" {
		return rest
	}
	return subject
}

// calendar draws a list's months (newest first) as a table, a row per
// year, newest first, a cell per month with its number of messages
// linking to its page. It is written here rather than in a template: a
// list of twenty years has 240 cells, and html/template's escaping of
// each made the calendar cost more than the rest of the page. Nothing in
// it comes from mail: list names are [a-z0-9._-]+ and are escaped anyway.
func calendar(list string, months []catalog.Month) template.HTML {
	var b strings.Builder
	b.WriteString(`<div class="scroll"><table class="calendar">` + "\n" + `<thead><tr><th scope="col">Year</th>`)
	for m := time.January; m <= time.December; m++ {
		// "Jan", or "J" on a narrow screen.
		b.WriteString(`<th scope="col"><span class="long">` + m.String()[:3] + `</span><span class="short" aria-hidden="true">` + m.String()[:1] + `</span></th>`)
	}
	b.WriteString("</tr></thead>\n<tbody>\n")
	esc := html.EscapeString(list)
	for i := 0; i < len(months); {
		year := months[i].Year
		var counts [13]int
		for ; i < len(months) && months[i].Year == year; i++ {
			counts[months[i].Month] = months[i].Messages
		}
		fmt.Fprintf(&b, `<tr><th scope="row">%d</th>`, year)
		for m := 1; m <= 12; m++ {
			if counts[m] == 0 {
				b.WriteString("<td></td>")
				continue
			}
			fmt.Fprintf(&b, `<td><a href="/l/%s/%04d-%02d/" title="%d messages">%d</a></td>`, esc, year, m, counts[m], counts[m])
		}
		b.WriteString("</tr>\n")
	}
	b.WriteString("</tbody>\n</table></div>")
	return template.HTML(b.String())
}

// threadRow is a thread as a list or month page shows it, formatted
// here: html/template escapes each action at some cost, and a page has
// fifty rows.
type threadRow struct {
	CallNumber, Subject, From string
	// Replies says how many, and on a month page how many that month.
	Replies string
	// When is "last " before the date of the last reply, "" for a thread
	// of one message.
	When, ISO, Date string
}

// threadList renders the threads of a list or month page, every value
// escaped by html.EscapeString (text, and double-quoted attribute
// values). It is what an html/template would write (TestThreadList keeps
// one to compare with), without its contextual escaping of each action:
// a month of the whole linux-mips archive has up to 600 threads, and
// escaping their 4,200 actions was half the page's CPU.
func threadList(list string, ts []catalog.ThreadSummary) template.HTML {
	var b strings.Builder
	b.WriteString(`<ol class="threads">` + "\n")
	e := html.EscapeString
	for _, r := range rows(list, ts) {
		fmt.Fprintf(&b, "<li>\n<a class=\"subject\" href=\"/t/%s/\">%s</a>\n"+
			"<span class=\"meta\">%s · %s · %s<time datetime=\"%s\">%s</time></span>\n</li>\n",
			e(r.CallNumber), e(r.Subject), e(r.From), e(r.Replies), e(r.When), e(r.ISO), e(r.Date))
	}
	if len(ts) == 0 {
		b.WriteString(`<li class="note">No threads.</li>` + "\n")
	}
	b.WriteString("</ol>")
	return template.HTML(b.String())
}

func rows(list string, ts []catalog.ThreadSummary) []threadRow {
	out := make([]threadRow, len(ts))
	for i, t := range ts {
		r := threadRow{CallNumber: t.Root.CallNumber, Subject: listSubject(t.Root.Subject, list), From: t.Root.From()}
		if r.Subject == "" {
			r.Subject = "(no subject)"
		}
		switch t.Messages {
		case 1:
			r.Replies = "no replies"
		case 2:
			r.Replies = "1 reply"
		default:
			r.Replies = strconv.Itoa(t.Messages-1) + " replies"
		}
		if t.InMonth > 0 && t.InMonth != t.Messages {
			r.Replies += " (" + strconv.Itoa(t.InMonth) + " this month)"
		}
		date := t.First
		if t.Messages > 1 {
			r.When, date = "last ", t.Last
		}
		r.ISO, r.Date = date.UTC().Format(time.RFC3339), date.UTC().Format(dateTimeLayout)
		out[i] = r
	}
	return out
}

// diffstatText says what a version of a patch or series changes, in
// git's words: "2 patches, 3 files changed, 10 insertions(+), 4
// deletions(-)" (the patches only when more than one).
func diffstatText(st *catalog.Diffstat) string {
	var b strings.Builder
	if st.Patches > 1 {
		b.WriteString(strconv.Itoa(st.Patches) + " patches, ")
	}
	b.WriteString(strconv.Itoa(st.Files))
	if st.Files == 1 {
		b.WriteString(" file changed, ")
	} else {
		b.WriteString(" files changed, ")
	}
	b.WriteString(strconv.Itoa(st.Added))
	if st.Added == 1 {
		b.WriteString(" insertion(+), ")
	} else {
		b.WriteString(" insertions(+), ")
	}
	b.WriteString(strconv.Itoa(st.Deleted))
	if st.Deleted == 1 {
		b.WriteString(" deletion(-)")
	} else {
		b.WriteString(" deletions(-)")
	}
	return b.String()
}
