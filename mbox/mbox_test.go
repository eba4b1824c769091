package mbox

import (
	"bytes"
	"compress/gzip"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
)

// item is one result of Next: a message or a per-message error.
type item struct {
	line int
	sep  string
	raw  string
	warn []string // substrings, one per warning, in order
	err  error    // errors.Is target for a *MessageError
}

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "mbox", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// readAll reads r to io.EOF, failing on a fatal error.
func readAll(t testing.TB, r *Reader) []item {
	t.Helper()
	var got []item
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			return got
		}
		if err != nil {
			var me *MessageError
			if !errors.As(err, &me) {
				t.Fatalf("Next: fatal error %v", err)
			}
			got = append(got, item{line: me.Line, err: err})
			continue
		}
		got = append(got, item{line: m.Line, sep: m.Separator, raw: string(m.Raw), warn: m.Warnings})
	}
}

func checkItems(t *testing.T, got, want []item) {
	t.Helper()
	if len(got) != len(want) {
		for i, g := range got {
			t.Logf("got[%d] = line %d sep %q err %v raw %q", i, g.line, g.sep, g.err, g.raw)
		}
		t.Fatalf("got %d items, want %d", len(got), len(want))
	}
	for i, w := range want {
		g := got[i]
		if w.err != nil {
			if !errors.Is(g.err, w.err) || g.line != w.line {
				t.Errorf("item %d: got line %d error %v, want line %d error %v", i, g.line, g.err, w.line, w.err)
			}
			continue
		}
		if g.err != nil {
			t.Errorf("item %d: got error %v, want a message", i, g.err)
			continue
		}
		if g.line != w.line || g.sep != w.sep {
			t.Errorf("item %d: got line %d separator %q, want line %d separator %q", i, g.line, g.sep, w.line, w.sep)
		}
		if g.raw != w.raw {
			t.Errorf("item %d: got raw\n%q\nwant\n%q", i, g.raw, w.raw)
		}
		if len(g.warn) != len(w.warn) {
			t.Errorf("item %d: got warnings %q, want %d matching %q", i, g.warn, len(w.warn), w.warn)
			continue
		}
		for j := range w.warn {
			if !strings.Contains(g.warn[j], w.warn[j]) {
				t.Errorf("item %d: warning %q does not contain %q", i, g.warn[j], w.warn[j])
			}
		}
	}
}

const (
	rd1 = "From: Alice <alice@example.org>\nTo: list@example.org\nSubject: quoting\nMessage-ID: <rd1@example.org>\nDate: Mon, 1 Jan 2001 10:00:00 +0000\n\n" +
		"A body line that began with From:\nFrom here on, things are quoted.\nAnd a quoted reply line:\n>From the previous message, quoted.\n>>From deeper still.\n> From with a space is not quoting.\n"
	rd2 = "From: Bob <bob@example.org>\nTo: list@example.org\nSubject: Re: quoting\nMessage-ID: <rd2@example.org>\nIn-Reply-To: <rd1@example.org>\nDate: Mon, 1 Jan 2001 11:00:00 +0000\n\n" +
		"From the start.\n\nFrom alice@example.org Mon Jan  1 10:00:00 2001\nThat looked like a separator, and was quoted.\n"
	rd3 = "From: Carol <carol@example.org>\nSubject: last\nMessage-ID: <rd3@example.org>\n\nLast message, ending with an empty body line.\n\n"
)

var mboxrdWant = []item{
	{line: 1, sep: "From alice@example.org Mon Jan  1 10:00:00 2001", raw: rd1},
	{line: 15, sep: "From bob@example.org Mon Jan  1 11:00:00 2001", raw: rd2},
	{line: 28, sep: "From carol@example.org Mon Jan  1 12:00:00 2001", raw: rd3},
}

func TestReaderFixtures(t *testing.T) {
	tests := []struct {
		name       string
		file       string
		format     Format
		wantFormat Format
		want       []item
	}{
		{name: "mboxrd", file: "mboxrd.mbox", format: FormatMboxrd, wantFormat: FormatMboxrd, want: mboxrdWant},
		{name: "mboxrd auto", file: "mboxrd.mbox", wantFormat: FormatMboxrd, want: mboxrdWant},
		{
			name: "mboxrd read as mboxo keeps quoting", file: "mboxrd.mbox", format: FormatMboxo, wantFormat: FormatMboxo,
			want: []item{
				{line: 1, sep: "From alice@example.org Mon Jan  1 10:00:00 2001", raw: strings.NewReplacer(
					"\nFrom here", "\n>From here", "\n>From the", "\n>>From the", "\n>>From deeper", "\n>>>From deeper").Replace(rd1)},
				{line: 15, sep: "From bob@example.org Mon Jan  1 11:00:00 2001", raw: strings.NewReplacer(
					"\nFrom the start", "\n>From the start", "\nFrom alice", "\n>From alice").Replace(rd2)},
				{line: 28, sep: "From carol@example.org Mon Jan  1 12:00:00 2001", raw: rd3},
			},
		},
		{
			name: "mboxo", file: "mboxo.mbox", format: FormatMboxo, wantFormat: FormatMboxo,
			want: []item{
				{line: 1, sep: "From alice@example.org Tue Jan  2 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: mboxo\nMessage-ID: <o1@example.org>\n\n>From here the writer quoted a From line.\n>>From this one was already quoted.\n"},
				{line: 9, sep: "From bob@example.org Tue Jan  2 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: Re: mboxo\nMessage-ID: <o2@example.org>\n\nSecond.\n"},
			},
		},
		{
			name: "mboxcl2", file: "mboxcl2.mbox", format: FormatMboxcl2, wantFormat: FormatMboxcl2,
			want: mboxcl2Want,
		},
		{name: "mboxcl2 auto", file: "mboxcl2.mbox", wantFormat: FormatMboxcl2, want: mboxcl2Want},
		{name: "mboxcl reads like mboxcl2", file: "mboxcl2.mbox", format: FormatMboxcl, wantFormat: FormatMboxcl, want: mboxcl2Want},
		{
			name: "mboxcl2 wrong Content-Length falls back", file: "mboxcl2-bad-length.mbox", format: FormatMboxcl2, wantFormat: FormatMboxcl2,
			want: []item{
				{line: 1, sep: "From alice@example.org Thu Jan  4 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: wrong length\nMessage-ID: <bad1@example.org>\nContent-Length: 5\n\nThis body is longer than five bytes.\n",
					warn: []string{"mboxcl2-bad-length.mbox:1: Content-Length: 5 does not end at a From_ line"}},
				{line: 9, sep: "From bob@example.org Thu Jan  4 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: right length\nMessage-ID: <bad2@example.org>\nContent-Length: 6\n\nRight\n"},
			},
		},
		{
			name: "mboxcl2 wrong Content-Length auto is mboxrd", file: "mboxcl2-bad-length.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From alice@example.org Thu Jan  4 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: wrong length\nMessage-ID: <bad1@example.org>\nContent-Length: 5\n\nThis body is longer than five bytes.\n"},
				{line: 9, sep: "From bob@example.org Thu Jan  4 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: right length\nMessage-ID: <bad2@example.org>\nContent-Length: 6\n\nRight\n"},
			},
		},
		{
			name: "crlf", file: "crlf.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From alice@example.org Fri Jan  5 10:00:00 2001", raw: "From: Alice <alice@example.org>\r\nSubject: crlf one\r\nMessage-ID: <crlf1@example.org>\r\n\r\nLine one.\r\nFrom quoted.\r\n"},
				{line: 9, sep: "From bob@example.org Fri Jan  5 11:00:00 2001", raw: "From: Bob <bob@example.org>\r\nSubject: crlf two\r\nMessage-ID: <crlf2@example.org>\r\n\r\nLine two.\r\n"},
			},
		},
		{
			name: "From lines in the body that are not separators", file: "from-in-body.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From alice@example.org Sat Jan  6 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: From lines in the body\nMessage-ID: <fib1@example.org>\n\n" +
					"A paragraph whose next line begins with From\nFrom here it goes on, no empty line before it.\n\nFrom my point of view, this follows an empty line but has no date.\n\n" +
					"From bob@example.org without a date either\nFrom alice@example.org Sat Jan  6 10:00:00 2001\nThat one looks like a separator but follows a non-empty line.\n"},
				{line: 15, sep: "From bob@example.org Sat Jan  6 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: second\nMessage-ID: <fib2@example.org>\n\nSecond message.\n"},
			},
		},
		{
			name: "truncated last message", file: "truncated.mbox",
			want: []item{
				{line: 1, sep: "From alice@example.org Sun Jan  7 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: complete\nMessage-ID: <tr1@example.org>\n\nComplete.\n"},
				{line: 8, sep: "From bob@example.org Sun Jan  7 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: cut\nMessage-ID: <tr2@example.org>\n\nThis message was cut in the mid",
					warn: []string{"truncated.mbox:13: input ends without a final newline"}},
			},
			wantFormat: FormatMboxrd,
		},
		{
			name: "truncated in the header", file: "truncated-header.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From alice@example.org Sun Jan  7 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: complete\nMessage-ID: <th1@example.org>\n\nComplete.\n"},
				{line: 8, sep: "From bob@example.org Sun Jan  7 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: cut in the hea",
					warn: []string{"truncated-header.mbox:8: input ends inside the message header"}},
			},
		},
		{
			name: "8-bit headers", file: "8bit-headers.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From jose@example.org Mon Jan  8 10:00:00 2001", raw: "From: José Ñúñez <jose@example.org>\nSubject: Größe und Übermaß\nMessage-ID: <8bit1@example.org>\n\nUTF-8 in the header.\n"},
				{line: 8, sep: "From jose@example.org Mon Jan  8 11:00:00 2001", raw: "From: Jos\xe9 \xd1\xfa\xf1ez <jose@example.org>\nSubject: Latin-1 fa\xe7ade\nMessage-ID: <8bit2@example.org>\n\nLatin-1 in the header: \xe7.\n"},
			},
		},
		{
			name: "unknown charset", file: "unknown-charset.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From kirk@example.org Tue Jan  9 10:00:00 2001", raw: "From: Kirk <kirk@example.org>\nSubject: =?x-klingon?Q?Qapla=E9?=\nMessage-ID: <cs1@example.org>\nMIME-Version: 1.0\nContent-Type: text/plain; charset=x-klingon\nContent-Transfer-Encoding: 8bit\n\ntlhIngan Hol \xe9\xff\xfe Dajatlh'a'?\n"},
			},
		},
		{
			name: "no Message-ID", file: "no-message-id.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From anon@example.org Wed Jan 10 10:00:00 2001", raw: "From: Anonymous <anon@example.org>\nSubject: no Message-ID here\nDate: Wed, 10 Jan 2001 10:00:00 +0000\n\nThis message has no Message-ID.\n"},
			},
		},
		{
			name: "duplicate Message-ID", file: "duplicate-message-id.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, sep: "From alice@example.org Thu Jan 11 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: first of two\nMessage-ID: <same@example.org>\n\nThe first message with this Message-ID.\n"},
				{line: 8, sep: "From bob@example.org Thu Jan 11 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: second of two, different bytes\nMessage-ID: <same@example.org>\n\nA different message with the same Message-ID.\n"},
			},
		},
		{
			name: "leading garbage", file: "leading-garbage.mbox", wantFormat: FormatMboxrd,
			want: []item{
				{line: 1, err: ErrLeadingData},
				{line: 4, sep: "From alice@example.org Fri Jan 12 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: after the garbage\nMessage-ID: <lg1@example.org>\n\nReal message.\n"},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(bytes.NewReader(fixture(t, tt.file)), Options{Name: tt.file, Format: tt.format})
			checkItems(t, readAll(t, r), tt.want)
			if got := r.Format(); got != tt.wantFormat {
				t.Errorf("Format() = %q (%s), want %q", got, r.FormatReason(), tt.wantFormat)
			}
		})
	}
}

var mboxcl2Want = []item{
	{line: 1, sep: "From alice@example.org Wed Jan  3 10:00:00 2001", raw: "From: Alice <alice@example.org>\nSubject: cl2 one\nMessage-ID: <cl1@example.org>\nContent-Length: 117\n\n" +
		"A body with\nFrom lines inside.\n\nFrom mallory@example.org Wed Jan  3 09:00:00 2001\nThat line looked like a separator.\n"},
	{line: 13, sep: "From bob@example.org Wed Jan  3 11:00:00 2001", raw: "From: Bob <bob@example.org>\nSubject: cl2 two\nMessage-ID: <cl2@example.org>\nContent-Length: 41\n\nFrom the top: a body starting with From.\n"},
	{line: 21, sep: "From carol@example.org Wed Jan  3 12:00:00 2001", raw: "From: Carol <carol@example.org>\nSubject: cl2 three\nMessage-ID: <cl3@example.org>\nContent-Length: 29\n\nNo final newline in this body"},
}

func TestReaderPipermail(t *testing.T) {
	zr, err := gzip.NewReader(bytes.NewReader(fixture(t, "pipermail-2001-January.txt.gz")))
	if err != nil {
		t.Fatal(err)
	}
	r := NewReader(zr, Options{Name: "pipermail-2001-January.txt"})
	checkItems(t, readAll(t, r), []item{
		{line: 1, sep: "From alice at example.org  Mon Jan  1 00:00:00 2001", raw: "From: alice at example.org (Alice)\nDate: Mon, 1 Jan 2001 00:00:00 +0000\nSubject: [Demo] New year\nMessage-ID: <pm1@example.org>\n\nHappy new year.\n"},
		{line: 9, sep: "From bob at example.org  Tue Jan  2 08:30:00 2001", raw: "From: bob at example.org (Bob)\nDate: Tue, 2 Jan 2001 08:30:00 +0000\nSubject: [Demo] New year\nIn-Reply-To: <pm1@example.org>\nReferences: <pm1@example.org>\nMessage-ID: <pm2@example.org>\n\nFrom me too: happy new year.\n"},
	})
}

func TestReaderEdgeCases(t *testing.T) {
	const sepA = "From a@example.org Mon Jan  1 00:00:00 2001"
	const sepB = "From b@example.org Mon Jan  1 00:00:01 2001"
	tests := []struct {
		name   string
		in     string
		format Format
		want   []item
	}{
		{name: "empty input", in: "", want: nil},
		{name: "only blank lines", in: "\n\n", want: []item{{line: 1, err: ErrLeadingData}}[:0]},
		{name: "no From_ line at all", in: "Subject: x\n\nbody\n", want: []item{{line: 1, err: ErrLeadingData}}},
		{name: "blank lines before the first From_ line", in: "\n\n" + sepA + "\nS: 1\n\nb\n",
			want: []item{{line: 3, sep: sepA, raw: "S: 1\n\nb\n", warn: []string{"x:1: 2 empty lines before the first From_ line skipped"}}}},
		{name: "first From_ line without a date", in: "From someone\nS: 1\n\nb\n",
			want: []item{{line: 1, sep: "From someone", raw: "S: 1\n\nb\n", warn: []string{"does not look like"}}}},
		{name: "empty messages", in: sepA + "\n\n" + sepB + "\n\n",
			want: []item{{line: 1, sep: sepA, raw: ""}, {line: 3, sep: sepB, raw: ""}}},
		{name: "separator at end without newline", in: sepA + "\nS: 1\n\nb\n\n" + sepB,
			want: []item{{line: 1, sep: sepA, raw: "S: 1\n\nb\n"}, {line: 6, sep: sepB, raw: "", warn: []string{"inside the message header"}}}},
		{name: "no empty line before the end", in: sepA + "\nS: 1\n\nb\n",
			want: []item{{line: 1, sep: sepA, raw: "S: 1\n\nb\n"}}},
		{name: "two empty lines: one is the message's", in: sepA + "\nS: 1\n\nb\n\n\n" + sepB + "\nS: 2\n\n",
			want: []item{{line: 1, sep: sepA, raw: "S: 1\n\nb\n\n"}, {line: 7, sep: sepB, raw: "S: 2\n"}}},
		{name: "CRLF empty line before an LF From_ line", in: sepA + "\r\nS: 1\r\n\r\nb\r\n\r\n" + sepB + "\nS: 2\n\n",
			want: []item{{line: 1, sep: sepA, raw: "S: 1\r\n\r\nb\r\n"}, {line: 6, sep: sepB, raw: "S: 2\n"}}},
		{name: "Content-Length landing directly on a From_ line", format: FormatMboxcl2,
			in:   sepA + "\nContent-Length: 2\n\nb\n" + sepB + "\nS: 2\n\nx\n",
			want: []item{{line: 1, sep: sepA, raw: "Content-Length: 2\n\nb\n"}, {line: 5, sep: sepB, raw: "S: 2\n\nx\n"}}},
		{name: "Content-Length too long for the input", format: FormatMboxcl2,
			in:   sepA + "\nContent-Length: 200\n\nb\n\n" + sepB + "\nS: 2\n\nx\n",
			want: []item{{line: 1, sep: sepA, raw: "Content-Length: 200\n\nb\n", warn: []string{"Content-Length: 200 does not end"}}, {line: 6, sep: sepB, raw: "S: 2\n\nx\n"}}},
		{name: "Content-Length ends inside a later line: split at the From_ line inside", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: " + strconv.Itoa(len("b\n\n"+sepB+"\nS: ")) + "\n\nb\n\n" + sepB + "\nS: 2\n\nx\nmore\n\n" + sepA + "\nS: 3\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 50\n\nb\n", warn: []string{"Content-Length: 50 does not end"}},
				{line: 6, sep: sepB, raw: "S: 2\n\nx\nmore\n"},
				{line: 12, sep: sepA, raw: "S: 3\n", warn: []string{"inside the message header"}},
			}},
		{name: "Content-Length ends at a line not followed by a From_ line: split at the From_ line inside", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: " + strconv.Itoa(len("b\n\n"+sepB+"\nS: 2\n")) + "\n\nb\n\n" + sepB + "\nS: 2\nx\n\n" + sepA + "\nS: 3\n\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 52\n\nb\n", warn: []string{"Content-Length: 52 does not end"}},
				{line: 6, sep: sepB, raw: "S: 2\nx\n"},
				{line: 10, sep: sepA, raw: "S: 3\n"},
			}},
		{name: "Content-Length ends at a line not followed by a From_ line, no From_ line inside", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: 2\n\nb\nc\n\n" + sepB + "\nS: 2\n\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 2\n\nb\nc\n", warn: []string{"Content-Length: 2 does not end"}},
				{line: 7, sep: sepB, raw: "S: 2\n"},
			}},
		{name: "Content-Length ends at a line followed by an empty line and text", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: 2\n\nb\n\nc\n\n" + sepB + "\nS: 2\n\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 2\n\nb\n\nc\n", warn: []string{"Content-Length: 2 does not end"}},
				{line: 8, sep: sepB, raw: "S: 2\n"},
			}},
		{name: "Content-Length in the middle of a line", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: 1\n\nbc\n\n" + sepB + "\nS: 2\n\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 1\n\nbc\n", warn: []string{"Content-Length: 1 does not end"}},
				{line: 6, sep: sepB, raw: "S: 2\n"},
			}},
		{name: "Content-Length body without final newline then a From_ line", format: FormatMboxcl2,
			in: sepA + "\nContent-Length: 1\n\nb\n" + sepB + "\nS: 2\n\n",
			want: []item{
				{line: 1, sep: sepA, raw: "Content-Length: 1\n\nb"},
				{line: 5, sep: sepB, raw: "S: 2\n"},
			}},
		{name: "Content-Length body ending in empty lines at the end of input", format: FormatMboxcl2,
			in:   sepA + "\nContent-Length: 3\n\nb\n\n",
			want: []item{{line: 1, sep: sepA, raw: "Content-Length: 3\n\nb\n\n"}}},
		{name: "Content-Length body then the mbox's empty line at the end of input", format: FormatMboxcl2,
			in:   sepA + "\nContent-Length: 2\n\nb\n\n",
			want: []item{{line: 1, sep: sepA, raw: "Content-Length: 2\n\nb\n"}}},
		{name: "header From_ line without empty line stays", in: sepA + "\nS: 1\n" + sepB + "\n\nb\n",
			want: []item{{line: 1, sep: sepA, raw: "S: 1\n" + sepB + "\n\nb\n"}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := NewReader(strings.NewReader(tt.in), Options{Name: "x", Format: tt.format})
			checkItems(t, readAll(t, r), tt.want)
		})
	}
}

func TestReaderTooLarge(t *testing.T) {
	const sep = "From a@example.org Mon Jan  1 00:00:00 2001"
	big := strings.Repeat("0123456789abcdef\n", 100) // 1700 bytes
	in := sep + "\nS: 1\n\nsmall\n\n" + sep + "\nS: 2\n\n" + big + "\n" + sep + "\nS: 3\n\nsmall\n"
	for _, format := range []Format{FormatMboxrd, FormatMboxcl2} {
		t.Run(string(format), func(t *testing.T) {
			r := NewReader(strings.NewReader(in), Options{Name: "big", Format: format, MaxMessageSize: 1000})
			got := readAll(t, r)
			checkItems(t, got, []item{
				{line: 1, sep: sep, raw: "S: 1\n\nsmall\n"},
				{line: 6, err: ErrTooLarge},
				{line: 110, sep: sep, raw: "S: 3\n\nsmall\n"},
			})
			if msg := got[1].err.Error(); !strings.HasPrefix(msg, "big:6: ") {
				t.Errorf("error %q does not start with name:line", msg)
			}
		})
	}
	// Exactly at the limit is accepted; one byte more is not.
	raw := "S: 1\n\n" + strings.Repeat("x", 94) + "\n" // 101 bytes
	for _, tc := range []struct {
		max  int64
		want error
	}{{101, nil}, {100, ErrTooLarge}} {
		r := NewReader(strings.NewReader(sep+"\n"+raw+"\n"+sep+"\n"), Options{MaxMessageSize: tc.max})
		_, err := r.Next()
		if !errors.Is(err, tc.want) {
			t.Errorf("MaxMessageSize %d: Next() error %v, want %v", tc.max, err, tc.want)
		}
	}
}

func TestReaderUnknownFormat(t *testing.T) {
	r := NewReader(strings.NewReader(""), Options{Format: "mboxzz"})
	if _, err := r.Next(); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("Next() error %v, want %v", err, ErrUnknownFormat)
	}
	if _, err := r.Next(); !errors.Is(err, ErrUnknownFormat) {
		t.Fatalf("second Next() error %v, want the same fatal error", err)
	}
}

// failingReader yields data, then fails with errDisk: every time, or
// once and then reads as empty (io.EOF) when once is set.
type failingReader struct {
	data   []byte
	once   bool
	failed bool
}

var errDisk = errors.New("disk on fire")

func (f *failingReader) Read(p []byte) (int, error) {
	if len(f.data) == 0 {
		if f.once && f.failed {
			return 0, io.EOF
		}
		f.failed = true
		return 0, errDisk
	}
	n := copy(p, f.data)
	f.data = f.data[n:]
	return n, nil
}

// A read error inside a message (a truncated or corrupt compressed
// input) fails that message, whole: nothing of it is returned, and reading
// stops there.
func TestReaderReadError(t *testing.T) {
	const (
		sep1 = "From a@b Mon Jan  1 00:00:00 2001\n"
		sep2 = "From c@d Mon Jan  1 01:00:00 2001\n"
	)
	tests := []struct {
		name   string
		data   string
		format Format
		want   []item
	}{
		{name: "inside the only message", data: sep1 + "S: 1\n\nb\n", format: FormatMboxrd,
			want: []item{{line: 1, err: ErrIncomplete}}},
		{name: "inside the second message", data: sep1 + "S: 1\n\nb\n\n" + sep2 + "S: 2\n\npart of a li", format: FormatMboxrd,
			want: []item{{line: 1, sep: sep1[:len(sep1)-1], raw: "S: 1\n\nb\n"}, {line: 6, err: ErrIncomplete}}},
		{name: "met while detecting the format", data: sep1 + "S: 1\n\nb\n", format: FormatAuto,
			want: []item{{line: 1, err: ErrIncomplete}}},
		{name: "inside a Content-Length body", data: sep1 + "Content-Length: 100\n\nb\n", format: FormatMboxcl2,
			want: []item{{line: 1, err: ErrIncomplete}}},
		{name: "before the first From_ line", data: "", format: FormatMboxrd,
			want: []item{{line: 1, err: ErrIncomplete}}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// failingReader fails once, then reads as empty: the Reader
			// must not take that for the end of the input.
			r := NewReader(&failingReader{data: []byte(tt.data), once: true}, Options{Name: "f", Format: tt.format})
			got := readAll(t, r)
			checkItems(t, got, tt.want)
			last := got[len(got)-1].err
			if !errors.Is(last, errDisk) || !strings.HasPrefix(last.Error(), "f:") {
				t.Errorf("error %v, want %v with name:line", last, errDisk)
			}
		})
	}
}

// A file that ends inside a Content-Length body is cut short: the message
// fails (nothing partial is returned), and auto-detection still sees the
// Content-Length framing of the messages before it.
func TestReaderContentLengthCut(t *testing.T) {
	for _, format := range []Format{FormatAuto, FormatMboxcl2} {
		t.Run(string(format), func(t *testing.T) {
			r := NewReader(bytes.NewReader(fixture(t, "mboxcl2-truncated.mbox")), Options{Name: "cut", Format: format})
			got := readAll(t, r)
			if r.Format() != FormatMboxcl2 {
				t.Errorf("Format() = %s (%s), want mboxcl2", r.Format(), r.FormatReason())
			}
			if len(got) != 3 || got[0].err != nil || got[1].err != nil {
				t.Fatalf("got %+v, want two messages and a failure", got)
			}
			if !errors.Is(got[2].err, ErrIncomplete) || got[2].line != 21 || !strings.Contains(got[2].err.Error(), "Content-Length of 400") {
				t.Errorf("third item: line %d error %v, want line 21 %v naming the Content-Length", got[2].line, got[2].err, ErrIncomplete)
			}
		})
	}
	// A Content-Length running past the end of a one-message input is
	// not evidence of mboxcl2: auto reads it as mboxrd, keeping it.
	one := "From a@b Mon Jan  1 00:00:00 2001\nContent-Length: 99\n\nshort\n"
	r := NewReader(strings.NewReader(one), Options{Format: FormatAuto})
	if got := readAll(t, r); len(got) != 1 || got[0].err != nil || r.Format() != FormatMboxrd {
		t.Errorf("one message with a long Content-Length: %+v as %s, want it kept as mboxrd", got, r.Format())
	}
}

func TestReaderLongLines(t *testing.T) {
	// Lines longer than the read buffer come in pieces; bytes are kept.
	const sep = "From a@example.org Mon Jan  1 00:00:00 2001"
	long := ">From " + strings.Repeat("y", 3*bufferSize) + "\n"
	in := sep + "\nS: 1\n\n" + long + "\n" + sep + "\nS: 2\n\n"
	r := NewReader(strings.NewReader(in), Options{Format: FormatMboxrd})
	checkItems(t, readAll(t, r), []item{
		{line: 1, sep: sep, raw: "S: 1\n\n" + long[1:]},
		{line: 6, sep: sep, raw: "S: 2\n"},
	})
}

func TestParseFormat(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want Format
		err  error
	}{
		{"", FormatAuto, nil}, {"auto", FormatAuto, nil}, {"mboxrd", FormatMboxrd, nil}, {"mboxo", FormatMboxo, nil},
		{"mboxcl", FormatMboxcl, nil}, {"mboxcl2", FormatMboxcl2, nil}, {"MBOXRD", "", ErrUnknownFormat}, {"maildir", "", ErrUnknownFormat},
	} {
		got, err := ParseFormat(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseFormat(%q) = %q, %v, want %q, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func TestIsSeparator(t *testing.T) {
	for _, tc := range []struct {
		line string
		want bool
	}{
		{"From alice@example.org Mon Jan  1 10:00:00 2001\n", true},
		{"From alice at example.org  Mon Jan  1 00:00:00 2001\n", true},
		{"From - Sat Jan  3 01:05:34 1996\r\n", true},
		{"From 1e6360e89b239699ef1f5344e1d3a5c0b3c5bef1 Mon Sep 17 00:00:00 2001\n", true},
		{"From a@b Sat, 3 Jan 1996 01:05 +0100\n", true},
		{"From MAILER-DAEMON Fri Jul  8 12:08:34 2011", true},
		{"From my point of view\n", false},
		{"From Jan at 10:00\n", false}, // the month is the sender
		{"From a@b Mon Jan  1\n", false},
		{"From a@b 10:00:00 2001\n", false},
		{"from a@b Mon Jan  1 10:00:00 2001\n", false},
		{">From a@b Mon Jan  1 10:00:00 2001\n", false},
		{"From a@b Mon Jan  1 1:0:00 2001\n", false},
		{"From a@b Mon Jan  1 100:00 2001\n", false},
		{"From \n", false},
	} {
		if got := isSeparator([]byte(tc.line)); got != tc.want {
			t.Errorf("isSeparator(%q) = %v, want %v", tc.line, got, tc.want)
		}
	}
}
