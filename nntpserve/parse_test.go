package nntpserve

import (
	"errors"
	"math"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"
)

func TestParseCommand(t *testing.T) {
	tests := []struct {
		line string
		want command
		err  bool
	}{
		{"group chibrary.a", command{"GROUP", []string{"chibrary.a"}}, false},
		{"OVER\t1-5  ", command{"OVER", []string{"1-5"}}, false},
		{"  LIST ACTIVE chibrary.*", command{"LIST", []string{"ACTIVE", "chibrary.*"}}, false},
		{"", command{}, true},
		{"   ", command{}, true},
		{"a b c d e f g h i j", command{}, true},
		{"GROUP a\x00b", command{}, true},
		{strings.Repeat("x", MaxLine), command{}, true},
	}
	for _, tt := range tests {
		got, err := parseCommand(tt.line)
		if (err != nil) != tt.err || err == nil && (got.name != tt.want.name || !slices.Equal(got.args, tt.want.args)) {
			t.Errorf("parseCommand(%q) = %+v, %v; want %+v, error %v", tt.line, got, err, tt.want, tt.err)
		}
	}
}

func TestParseRange(t *testing.T) {
	tests := []struct {
		s    string
		want articleRange
		err  bool
	}{
		{"5", articleRange{5, 5}, false},
		{"5-", articleRange{5, math.MaxUint32}, false},
		{"5-9", articleRange{5, 9}, false},
		{"9-5", articleRange{9, 5}, false},
		{"0-", articleRange{0, math.MaxUint32}, false},
		{"99999999999", articleRange{math.MaxUint32, math.MaxUint32}, false},
		{"12345678901234567", articleRange{}, true},
		{"-5", articleRange{}, true},
		{"5--", articleRange{}, true},
		{"+5", articleRange{}, true},
		{"", articleRange{}, true},
		{"a-b", articleRange{}, true},
	}
	for _, tt := range tests {
		got, err := parseRange(tt.s)
		if (err != nil) != tt.err || got != tt.want {
			t.Errorf("parseRange(%q) = %v, %v; want %v, error %v", tt.s, got, err, tt.want, tt.err)
		}
	}
}

func TestParseMsgID(t *testing.T) {
	for s, want := range map[string]string{
		"<a@b>": "a@b", "<x>": "x", "<>": "", "a@b": "", "<a b>": "", "<a>b>": "", "<a\x01>": "",
		"<" + strings.Repeat("x", 249) + ">": "",
	} {
		got, err := parseMsgID(s)
		if got != want || (err != nil) != (want == "") || err != nil && !errors.Is(err, errMsgID) {
			t.Errorf("parseMsgID(%q) = %q, %v; want %q", s, got, err, want)
		}
	}
}

func TestParseDateTime(t *testing.T) {
	now := time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)
	tests := []struct {
		date, clock string
		rest        []string
		want        time.Time
		err         bool
	}{
		{"20240102", "030405", nil, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"20240102", "030405", []string{"GMT"}, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"240102", "030405", nil, time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"990102", "030405", nil, time.Date(1999, 1, 2, 3, 4, 5, 0, time.UTC), false},
		{"260102", "000000", nil, time.Date(2026, 1, 2, 0, 0, 0, 0, time.UTC), false},
		{"20241302", "030405", nil, time.Time{}, true},
		{"2024012", "030405", nil, time.Time{}, true},
		{"20240102", "3045", nil, time.Time{}, true},
		{"20240102", "030405", []string{"UTC"}, time.Time{}, true},
		{"20240102", "030405", []string{"GMT", "x"}, time.Time{}, true},
	}
	for _, tt := range tests {
		got, err := parseDateTime(tt.date, tt.clock, tt.rest, now)
		if (err != nil) != tt.err || !got.Equal(tt.want) {
			t.Errorf("parseDateTime(%q, %q, %q) = %v, %v; want %v, error %v", tt.date, tt.clock, tt.rest, got, err, tt.want, tt.err)
		}
	}
}

func TestWildmat(t *testing.T) {
	tests := []struct {
		wildmat, name string
		want          bool
	}{
		{"*", "chibrary.linux-mips", true},
		{"chibrary.*", "chibrary.linux-mips", true},
		{"chibrary.linux-?ips", "chibrary.linux-mips", true},
		{"chibrary.linux", "chibrary.linux-mips", false},
		{"*,!chibrary.linux*", "chibrary.linux-mips", false},
		{"*,!chibrary.linux*,*mips", "chibrary.linux-mips", true},
		{"other.*", "chibrary.a", false},
		{"*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*a*b", strings.Repeat("a", 60), false},
	}
	for _, tt := range tests {
		w, err := parseWildmat(tt.wildmat)
		if err != nil {
			t.Fatalf("parseWildmat(%q) = %v", tt.wildmat, err)
		}
		if got := w.match(tt.name); got != tt.want {
			t.Errorf("%q matches %q = %v, want %v", tt.wildmat, tt.name, got, tt.want)
		}
	}
	for _, bad := range []string{"", "!a", "a,,b", "a,!", "a b", "a!b"} {
		if _, err := parseWildmat(bad); err == nil {
			t.Errorf("parseWildmat(%q) accepted", bad)
		}
	}
}

// wildRef is the definition of a wildmat pattern, by backtracking.
func wildRef(name, pattern string) bool {
	if pattern == "" {
		return name == ""
	}
	switch pattern[0] {
	case '*':
		for i := 0; i <= len(name); i++ {
			if wildRef(name[i:], pattern[1:]) {
				return true
			}
		}
		return false
	case '?':
		return name != "" && wildRef(name[1:], pattern[1:])
	}
	return name != "" && name[0] == pattern[0] && wildRef(name[1:], pattern[1:])
}

// FuzzWildmat parses wildmats and matches names: wild agrees with the
// backtracking definition, and a parsed wildmat's patterns are the
// input's.
func FuzzWildmat(f *testing.F) {
	for _, s := range [][2]string{{"chibrary.*", "chibrary.a"}, {"*,!a*", "ab"}, {"a?c", "abc"}, {"**?*", "x"}} {
		f.Add(s[0], s[1])
	}
	f.Fuzz(func(t *testing.T, wm, name string) {
		w, err := parseWildmat(wm)
		if err != nil {
			return
		}
		var parts []string
		for _, p := range w {
			if p.not {
				parts = append(parts, "!"+p.pattern)
			} else {
				parts = append(parts, p.pattern)
			}
		}
		if back := strings.Join(parts, ","); back != wm {
			t.Fatalf("parseWildmat(%q) reads back as %q", wm, back)
		}
		w.match(name)
		if len(name) <= 16 && len(wm) <= 12 {
			for _, p := range w {
				if got, want := wild(name, p.pattern), wildRef(name, p.pattern); got != want {
					t.Fatalf("wild(%q, %q) = %v, want %v", name, p.pattern, got, want)
				}
			}
		}
	})
}

// FuzzCommand parses command lines and their arguments as the server
// does: no panic, the words are the line's, and a range reads back.
func FuzzCommand(f *testing.F) {
	for _, s := range []string{"GROUP chibrary.a", "OVER 1-", "ARTICLE <a@b>", "NEWNEWS * 20240102 030405 GMT", "LIST ACTIVE *,!x", "hdr subject 3-9"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, line string) {
		cmd, err := parseCommand(line)
		if err != nil {
			return
		}
		if len(line)+2 > MaxLine || cmd.name == "" || cmd.name != strings.ToUpper(cmd.name) {
			t.Fatalf("parseCommand(%q) = %+v", line, cmd)
		}
		for _, a := range cmd.args {
			if a == "" || strings.ContainsAny(a, " \t") || !strings.Contains(line, a) {
				t.Fatalf("parseCommand(%q): argument %q", line, a)
			}
			if r, err := parseRange(a); err == nil {
				if r2, err := parseRange(r.String()); err != nil || r2 != r {
					t.Fatalf("range %q = %v reads back as %v, %v", a, r, r2, err)
				}
			}
			if id, err := parseMsgID(a); err == nil && "<"+id+">" != a {
				t.Fatalf("message-id %q = %q", a, id)
			}
			parseWildmat(a)
		}
		if len(cmd.args) >= 2 {
			parseDateTime(cmd.args[0], cmd.args[1], cmd.args[2:], time.Now())
		}
	})
}

// String writes the range back as a client would send it: for the
// round trip of FuzzParseRange and the failure messages.
func (r articleRange) String() string {
	switch {
	case r.lo == r.hi:
		return strconv.FormatUint(uint64(r.lo), 10)
	case r.hi == math.MaxUint32:
		return strconv.FormatUint(uint64(r.lo), 10) + "-"
	}
	return strconv.FormatUint(uint64(r.lo), 10) + "-" + strconv.FormatUint(uint64(r.hi), 10)
}
