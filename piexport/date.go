package piexport

import (
	"net/mail"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// gitTime is a time as git writes it in a commit: seconds since the epoch
// (never negative: git's times are unsigned) and the writer's zone,
// "+HHMM" or "-HHMM".
type gitTime struct {
	Unix int64
	Zone string
}

func (t gitTime) String() string { return strconv.FormatInt(t.Unix, 10) + " " + t.Zone }

// obsoleteZones are RFC 5322 section 4.3's obsolete zone names, as
// public-inbox's MsgTime reads them.
var obsoleteZones = map[string]string{
	"EST": "-0500", "EDT": "-0400", "CST": "-0600", "CDT": "-0500",
	"MST": "-0700", "MDT": "-0600", "PST": "-0800", "PDT": "-0700",
	"UT": "+0000", "GMT": "+0000", "Z": "+0000",
}

// dateRE is public-inbox's (MsgTime.pm, str2date_zone): an optional day
// of the week, day, month name, year of 2 to 4 digits, hours, minutes,
// optional seconds (':' or '.' between them) and a required zone.
var dateRE = regexp.MustCompile(`(?:[A-Za-z]+,?\s+)?([0-9]+),?\s+([A-Za-z]+)\s+([0-9]{2,4})\s+([0-9]+)[:.]([0-9]{2}|\s?[0-9])(?:[:.]([0-9]{2}|\s?[0-9]))?\s+([+-])?[+-]*([0-9]+|EST|EDT|CST|CDT|MST|MDT|PST|PDT|UT|GMT|Z)(?:\s|$)`)

// receivedRE finds the date of a Received field (MsgTime.pm,
// msg_received_at).
var receivedRE = regexp.MustCompile(`(?s)\s*([0-9]+\s+[a-zA-Z]+\s+[0-9]{2,4}\s+[0-9]+[^0-9][0-9]+(?:[^0-9][0-9]+)\s+([+-][0-9]+))`)

var months = map[string]time.Month{}

func init() {
	for m := time.January; m <= time.December; m++ {
		name := strings.ToLower(m.String())
		months[name] = m
		months[name[:3]] = m
	}
}

// parseDate reads a Date (or a Received field's date) as public-inbox
// does (MsgTime.pm, str2date_zone): its own pattern first, the zone kept
// as written; dates it does not match are read by net/mail (where
// public-inbox asks Date::Parse). ok is false for what neither reads.
func parseDate(s string) (gitTime, bool) {
	m := dateRE.FindStringSubmatch(s)
	if m == nil {
		return parseOther(s)
	}
	atoi := func(s string) (int, bool) {
		n, err := strconv.Atoi(strings.TrimSpace(s))
		return n, err == nil
	}
	day, ok1 := atoi(m[1])
	mon, ok2 := months[strings.ToLower(m[2])]
	year, ok3 := atoi(m[3])
	hour, ok4 := atoi(m[4])
	min, ok5 := atoi(m[5])
	sec := 0
	ok6 := true
	if m[6] != "" {
		sec, ok6 = atoi(m[6])
	}
	if !ok1 || !ok2 || !ok3 || !ok4 || !ok5 || !ok6 {
		return gitTime{}, false
	}
	if len(m[3]) <= 3 {
		year += 1900
		if year < 1950 {
			year += 100
		}
	}
	// Time::Local's timegm refuses what is out of range, and
	// public-inbox then tries the next field.
	if hour > 23 || min > 59 || sec > 59 || day < 1 || day > daysIn(mon, year) {
		return gitTime{}, false
	}
	ts := time.Date(year, mon, day, hour, min, sec, 0, time.UTC).Unix()
	if ts < 0 {
		return gitTime{}, false
	}
	sign, tz := m[7], m[8]
	if off, ok := obsoleteZones[tz]; ok {
		sign, tz = off[:1], off[1:]
	}
	if len(tz) > 6 {
		// public-inbox's Perl would read it as a float; nobody writes it.
		return gitTime{}, false
	}
	var tzH, tzM int
	switch len(tz) {
	case 1:
		tzH, _ = strconv.Atoi(tz)
	case 2:
		tzM, _ = strconv.Atoi(tz)
	default:
		tzH, _ = strconv.Atoi(tz[:len(tz)-2])
		tzM, _ = strconv.Atoi(tz[len(tz)-2:])
	}
	for tzM >= 60 {
		tzM -= 60
		tzH++
	}
	if sign == "" {
		sign = "+"
	}
	off := int64(tzM*60 + tzH*3600)
	if sign == "-" {
		off = -off
	}
	ts -= off
	if off == 0 {
		sign = "+"
	}
	zone := sign + pad2(tzH) + pad2(tzM)
	if tzH*100+tzM >= 1400 {
		// public-inbox: "bogus TZ offset ... assuming +0000" (the time
		// stays as read with the bogus offset).
		zone = "+0000"
	}
	return gitTime{Unix: max(ts, 0), Zone: zone}, true
}

func pad2(n int) string {
	if n < 10 {
		return "0" + strconv.Itoa(n)
	}
	return strconv.Itoa(n)
}

func daysIn(m time.Month, year int) int {
	return time.Date(year, m+1, 0, 0, 0, 0, 0, time.UTC).Day()
}

// parseOther reads the dates public-inbox leaves to Date::Parse: those
// net/mail reads (RFC 5322 section 3.3, obsolete forms included).
func parseOther(s string) (gitTime, bool) {
	t, err := mail.ParseDate(strings.TrimSpace(s))
	if err != nil || t.Unix() < 0 {
		return gitTime{}, false
	}
	_, off := t.Zone()
	sign := "+"
	if off < 0 {
		sign, off = "-", -off
	}
	h, m := off/3600, off/60%60
	if h >= 14 {
		return gitTime{Unix: t.Unix(), Zone: "+0000"}, true
	}
	return gitTime{Unix: t.Unix(), Zone: sign + pad2(h) + pad2(m)}, true
}

// dateOnly is the first Date field public-inbox reads (msg_date_only).
func dateOnly(h header) (gitTime, bool) {
	for _, v := range h.values("Date") {
		if t, ok := parseDate(v); ok {
			return t, true
		}
	}
	return gitTime{}, false
}

// receivedAt is the date of the first Received field (the last hop) that
// has one (msg_received_at).
func receivedAt(h header) (gitTime, bool) {
	for _, v := range h.values("Received") {
		m := receivedRE.FindStringSubmatch(v)
		if m == nil {
			continue
		}
		if t, ok := parseDate(m[1]); ok {
			return t, true
		}
	}
	return gitTime{}, false
}

// authorTime is the time of a message's commit's author, as public-inbox
// writes it (msg_datestamp): its Date, else when it was received, else
// fallback (public-inbox takes the time of the import; the export takes
// when the archive got the message, so that a run again writes the same).
func authorTime(h header, fallback time.Time) gitTime {
	if t, ok := dateOnly(h); ok {
		return t
	}
	if t, ok := receivedAt(h); ok {
		return t
	}
	return gitTime{Unix: max(fallback.Unix(), 0), Zone: "+0000"}
}

// committerTime is the time of a message's commit's committer
// (msg_timestamp): when it was received, else its Date, else fallback.
func committerTime(h header, fallback time.Time) gitTime {
	if t, ok := receivedAt(h); ok {
		return t
	}
	if t, ok := dateOnly(h); ok {
		return t
	}
	return gitTime{Unix: max(fallback.Unix(), 0), Zone: "+0000"}
}
