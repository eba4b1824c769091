package piexport

import (
	"bytes"
	"regexp"
	"strings"
	"testing"
	"time"
)

func TestParseDate(t *testing.T) {
	tests := []struct {
		in   string
		want string // "" for none
	}{
		{"Mon, 1 Jan 2024 10:00:00 +0100", "1704099600 +0100"},
		{"1 Jan 2024 10:00 -0530", "1704123000 -0530"},
		{"Tue, 02 Jan 24 10:00:00 GMT", "1704189600 +0000"},
		{"Tue, 2 Jan 99 10:00:00 EST", "915289200 -0500"},     // two digits: 1999
		{"Tue, 2 Jan 104 10:00:00 +0000", "1073037600 +0000"}, // three: 1900+
		{"Mon, 1 Jan 2024 10.00.00 +0100", "1704099600 +0100"},
		{"Mon, 1 Jan 2024 10:00:00 --0500", "1704121200 -0500"},
		{"Mon, 1 Jan 2024 10:00:00 +1500", "1704049200 +0000"}, // bogus zone
		{"Mon, 1 Jan 2024 10:00:00 +75", "1704098700 +0115"},   // two digits: minutes
		{"Mon, 32 Jan 2024 10:00:00 +0000", ""},
		{"Mon, 1 Foo 2024 10:00:00 +0000", ""},
		{"Mon, 1 Jan 1950 25:00:00 +0000", ""},
		{"1 Jan 1960 10:00:00 +0000", ""}, // before 1970
		{"yesterday", ""},
		{"", ""},
		{"Mon, 1 Jan 2024 10:00:00 +0100 (CET)", "1704099600 +0100"},
	}
	for _, tt := range tests {
		got, ok := parseDate(tt.in)
		s := ""
		if ok {
			s = got.String()
		}
		if s != tt.want {
			t.Errorf("parseDate(%q) = %q, want %q", tt.in, s, tt.want)
		}
	}
}

func TestTimes(t *testing.T) {
	added := time.Date(2020, 5, 6, 7, 8, 9, 0, time.UTC)
	tests := []struct {
		name              string
		raw               string
		author, committer string
	}{
		{"date", "Date: Mon, 1 Jan 2024 10:00:00 +0100\n\nb\n", "1704099600 +0100", "1704099600 +0100"},
		{"received", "Received: from a by b; Mon, 1 Jan 2024 12:00:00 +0000\nReceived: from c by a; Mon, 1 Jan 2024 11:00:00 +0000\nDate: Mon, 1 Jan 2024 10:00:00 +0100\n\nb\n",
			"1704099600 +0100", "1704110400 +0000"},
		{"folded received", "Received: from a\n by b;\n Mon, 1 Jan 2024 12:00:00 +0000\n\nb\n", "1704110400 +0000", "1704110400 +0000"},
		{"neither", "Subject: x\n\nb\n", "1588748889 +0000", "1588748889 +0000"},
		{"bad date, good second", "Date: never\nDate: Mon, 1 Jan 2024 10:00:00 +0000\n\nb\n", "1704103200 +0000", "1704103200 +0000"},
	}
	for _, tt := range tests {
		h := parseHeader([]byte(tt.raw))
		if a, c := authorTime(h, added).String(), committerTime(h, added).String(); a != tt.author || c != tt.committer {
			t.Errorf("%s: times = %s, %s; want %s, %s", tt.name, a, c, tt.author, tt.committer)
		}
	}
}

func TestMIDs(t *testing.T) {
	tests := []struct {
		raw  string
		want []string
	}{
		{"Message-ID: <a@b>\n\n", []string{"a@b"}},
		{"Message-Id: a@b\n\n", []string{"a@b"}},
		{"Message-ID: <a@b> <c@d>\nMessage-ID: <a@b>\n\n", []string{"a@b", "c@d"}},
		{"Message-ID:\n <folded@x>\n\n", []string{"folded@x"}},
		{"Subject: none\n\nMessage-ID: <in-body@x>\n", nil},
		{"Message-ID: <>\n\n", []string{"<>"}},
	}
	for _, tt := range tests {
		got := mids(parseHeader([]byte(tt.raw)))
		if strings.Join(got, " ") != strings.Join(tt.want, " ") {
			t.Errorf("mids(%q) = %q, want %q", tt.raw, got, tt.want)
		}
	}
}

func TestAppendMID(t *testing.T) {
	tests := []struct{ in, want string }{
		{"Subject: x\n\nbody\n", "Subject: x\nMessage-ID: <n@z>\n\nbody\n"},
		{"Subject: x\r\n\r\nbody\r\n", "Subject: x\r\nMessage-ID: <n@z>\r\n\r\nbody\r\n"},
		{"Subject: x", "Subject: x\nMessage-ID: <n@z>\n"},
		{"\nbody\n", "Message-ID: <n@z>\n\nbody\n"},
		{"", "Message-ID: <n@z>\n"},
	}
	for _, tt := range tests {
		if got := string(appendMID([]byte(tt.in), "n@z")); got != tt.want {
			t.Errorf("appendMID(%q) = %q, want %q", tt.in, got, tt.want)
		}
	}
}

func TestNewMID(t *testing.T) {
	raw := []byte("Subject: x\n\nb\n")
	d := gitTime{Unix: 1704099600, Zone: "+0100"}
	a, b := newMID(raw, "3kTMd2xB", d), newMID(raw, "2UrKPuW8", d)
	if a == b || a != newMID(raw, "3kTMd2xB", d) {
		t.Errorf("newMID = %q, %q: want one per call number, always the same", a, b)
	}
	if !regexp.MustCompile(`^20240101090000\.[A-Za-z0-9_-]{43}@z$`).MatchString(a) {
		t.Errorf("newMID = %q, want public-inbox's form", a)
	}
}

func TestParseTrailers(t *testing.T) {
	commit := "tree 1\nauthor a <> 1 +0000\n\nsubject\n\nCall-Number: 3kTMd2xB\nList-Number: 17\n"
	if cn, n, ok := parseTrailers([]byte(commit)); !ok || cn != "3kTMd2xB" || n != 17 {
		t.Errorf("parseTrailers = %q, %d, %v", cn, n, ok)
	}
	for _, bad := range []string{"subject\n", "Call-Number: nope\nList-Number: 1\n", "Call-Number: 3kTMd2xB\nList-Number: 0\n", "Call-Number: 3kTMd2xB\nList-Number: 99999999999\n"} {
		if _, _, ok := parseTrailers([]byte(bad)); ok {
			t.Errorf("parseTrailers(%q) read trailers", bad)
		}
	}
}

// FuzzParseDate: any text parses or not without a panic; a date read
// has a zone git takes and a time that is not negative.
func FuzzParseDate(f *testing.F) {
	for _, s := range []string{"Mon, 1 Jan 2024 10:00:00 +0100", "1 jan 99 1:2 EST", "Mon, 1 Jan 2024 10:00:00 +99999", "2 Feb 2024 9.5.7 --500", "Tue, 30 Feb 2024 10:00 +0000"} {
		f.Add(s)
	}
	zone := regexp.MustCompile(`^[+-][0-9]{4}$`)
	f.Fuzz(func(t *testing.T, s string) {
		d, ok := parseDate(s)
		if !ok {
			return
		}
		if d.Unix < 0 || !zone.MatchString(d.Zone) {
			t.Errorf("parseDate(%q) = %+v", s, d)
		}
	})
}

// FuzzHeader: a message's header, its Message-IDs, a Message-ID added
// (which it then has, last, the rest of the message unchanged) and the
// trailers of a commit, read from any bytes.
func FuzzHeader(f *testing.F) {
	for _, s := range []string{"Message-ID: <a@b>\nSubject: x\n\nbody\n", "Message-Id: a\r\n b\r\n\r\n", "\n\n", "Received: x; 1 Jan 2024 10:00:00 +0000\nCall-Number: 3kTMd2xB\nList-Number: 5\n", "no colon\nMessage-ID: <<>>\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		h := parseHeader(raw)
		ids := mids(h)
		for _, id := range ids {
			if id == "" || len(id) > maxMID || strings.ContainsAny(id, "\r\n\t") {
				t.Errorf("mids(%q) has %q", raw, id)
			}
		}
		authorTime(h, time.Unix(0, 0))
		committerTime(h, time.Unix(0, 0))
		parseTrailers(raw)
		out := appendMID(raw, "new@z")
		end := headerEnd(raw)
		if !bytes.HasPrefix(out, raw[:end]) || !bytes.HasSuffix(out, raw[end:]) {
			t.Fatalf("appendMID(%q) = %q: the message is changed", raw, out)
		}
		if end < maxHeader && !bytes.ContainsAny(raw[:end], "\x00") {
			got := mids(parseHeader(out))
			if len(got) == 0 || got[len(got)-1] != "new@z" && !containsID(ids, "new@z") {
				t.Errorf("appendMID(%q) = %q, whose Message-IDs are %q: want new@z last", raw, out, got)
			}
		}
	})
}

func containsID(ids []string, id string) bool {
	for _, x := range ids {
		if x == id {
			return true
		}
	}
	return false
}
