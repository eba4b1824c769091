package nntpserve

import (
	"errors"
	"math"
	"strconv"
	"strings"
	"time"
)

// Limits of what a client sends.
const (
	// MaxLine is the longest command line, CRLF included (RFC 3977
	// section 3.1).
	MaxLine = 512
	// maxArgs bounds the arguments of a command: none takes more than 4.
	maxArgs = 8
	// maxMsgID is the longest message-id (RFC 3977 section 3.6).
	maxMsgID = 250
)

var (
	errSyntax = errors.New("nntpserve: syntax error")
	errRange  = errors.New("nntpserve: not a range")
	errMsgID  = errors.New("nntpserve: not a message-id")
	errDate   = errors.New("nntpserve: not a date and time")
)

// command is a parsed command line: its keyword in upper case and its
// arguments (RFC 3977 section 3.1: words separated by spaces or tabs).
type command struct {
	name string
	args []string
}

// parseCommand splits a command line (without its CRLF).
func parseCommand(line string) (command, error) {
	if len(line)+2 > MaxLine {
		return command{}, errSyntax
	}
	words := strings.FieldsFunc(line, func(r rune) bool { return r == ' ' || r == '\t' })
	if len(words) == 0 || len(words) > maxArgs+1 {
		return command{}, errSyntax
	}
	for _, w := range words {
		for i := 0; i < len(w); i++ {
			if c := w[i]; c < 0x20 || c == 0x7f {
				return command{}, errSyntax
			}
		}
	}
	return command{name: strings.ToUpper(words[0]), args: words[1:]}, nil
}

// articleRange is a range of article numbers, both included (RFC 3977
// section 3.1.1: "n", "n-" up to the last, "n-m").
type articleRange struct{ lo, hi uint32 }

// parseRange reads a range.
func parseRange(s string) (articleRange, error) {
	lo, rest, dash := strings.Cut(s, "-")
	a, err := parseNumber(lo)
	if err != nil {
		return articleRange{}, errRange
	}
	if !dash {
		return articleRange{a, a}, nil
	}
	if rest == "" {
		return articleRange{a, math.MaxUint32}, nil
	}
	b, err := parseNumber(rest)
	if err != nil {
		return articleRange{}, errRange
	}
	return articleRange{a, b}, nil
}

// parseNumber reads an article number: 1 to 16 digits (RFC 3977 section
// 3.1.1); one past 32 bits is no article this server has, and reads as
// the largest.
func parseNumber(s string) (uint32, error) {
	if s == "" || len(s) > 16 {
		return 0, errRange
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return 0, errRange
		}
	}
	n, err := strconv.ParseUint(s, 10, 64)
	if err != nil {
		return 0, errRange
	}
	return uint32(min(n, math.MaxUint32)), nil
}

// parseMsgID reads a message-id argument, "<...>" of printable US-ASCII
// without ">" inside (RFC 3977 section 3.6), and returns it without its
// angle brackets, as the catalog keeps it.
func parseMsgID(s string) (string, error) {
	if len(s) < 3 || len(s) > maxMsgID || s[0] != '<' || s[len(s)-1] != '>' {
		return "", errMsgID
	}
	id := s[1 : len(s)-1]
	for i := 0; i < len(id); i++ {
		if c := id[i]; c <= ' ' || c >= 0x7f || c == '>' {
			return "", errMsgID
		}
	}
	return id, nil
}

// isMsgID reports whether s looks like a message-id rather than a range.
func isMsgID(s string) bool { return strings.HasPrefix(s, "<") }

// parseDateTime reads the date and time of NEWNEWS and NEWGROUPS (RFC
// 3977 section 7.3.2): "yyyymmdd hhmmss" or "yymmdd hhmmss", where a
// two-digit year is the one nearest now in the current century or the
// one before; then "GMT" or nothing, the server's time zone, which here
// is UTC as well.
func parseDateTime(date, clock string, rest []string, now time.Time) (time.Time, error) {
	if len(rest) > 1 || len(rest) == 1 && rest[0] != "GMT" {
		return time.Time{}, errDate
	}
	if len(clock) != 6 || !digits(clock) || !digits(date) {
		return time.Time{}, errDate
	}
	switch len(date) {
	case 8:
	case 6:
		yy, _ := strconv.Atoi(date[:2])
		century := now.UTC().Year() / 100 * 100
		y := century + yy
		if y > now.UTC().Year() {
			y -= 100
		}
		date = strconv.Itoa(y) + date[2:]
	default:
		return time.Time{}, errDate
	}
	t, err := time.Parse("20060102150405", date+clock)
	if err != nil {
		return time.Time{}, errDate
	}
	return t, nil
}

func digits(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return s != ""
}

// wildmat is a parsed wildmat (RFC 3977 section 4): patterns, each
// possibly negated; the last that matches a name decides.
type wildmat []wildPattern

type wildPattern struct {
	pattern string
	not     bool
}

// parseWildmat reads a wildmat: patterns of "*", "?" and other
// characters (not "!", "," or space), joined by commas, each after the
// first possibly negated with "!". A backslash and brackets, which some
// servers read as in the older wildmat of INN, are plain characters.
func parseWildmat(s string) (wildmat, error) {
	if s == "" {
		return nil, errSyntax
	}
	var w wildmat
	for i, p := range strings.Split(s, ",") {
		not := false
		if strings.HasPrefix(p, "!") {
			if i == 0 {
				return nil, errSyntax
			}
			not, p = true, p[1:]
		}
		if p == "" || strings.ContainsAny(p, "! \t") {
			return nil, errSyntax
		}
		w = append(w, wildPattern{p, not})
	}
	return w, nil
}

// match reports whether name matches w.
func (w wildmat) match(name string) bool {
	for i := len(w) - 1; i >= 0; i-- {
		if wild(name, w[i].pattern) {
			return !w[i].not
		}
	}
	return false
}

// wild matches name against one pattern of "*" (any characters) and "?"
// (one character), by dynamic programming over the pattern: time
// proportional to len(name) times len(pattern) whatever the pattern.
// Names are matched byte by byte: group names are ASCII.
func wild(name, pattern string) bool {
	m := len(pattern)
	dp := make([]bool, m+1)
	next := make([]bool, m+1)
	dp[0] = true
	for j := 1; j <= m && pattern[j-1] == '*'; j++ {
		dp[j] = true
	}
	for i := 0; i < len(name); i++ {
		next[0] = false
		for j := 1; j <= m; j++ {
			switch pc := pattern[j-1]; pc {
			case '*':
				next[j] = next[j-1] || dp[j]
			case '?':
				next[j] = dp[j-1]
			default:
				next[j] = dp[j-1] && pc == name[i]
			}
		}
		dp, next = next, dp
	}
	return dp[m]
}
