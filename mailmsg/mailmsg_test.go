package mailmsg

import (
	"errors"
	"slices"
	"strings"
	"testing"
	"time"
)

func TestParse(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		want    Meta
		wantErr bool
	}{
		{
			name: "plain",
			raw: "Message-ID: <a@b.example>\r\nDate: Mon, 02 Jan 2006 15:04:05 -0700\r\nFrom: Ann <ann@example.org>\r\n" +
				"Subject: hello\r\nList-Id: MIPS <linux-mips.vger.kernel.org>\r\nIn-Reply-To: <p@b>\r\nReferences: <r1@b> <p@b>\r\n\r\nbody\r\n",
			want: Meta{MessageID: "a@b.example", Date: "Mon, 02 Jan 2006 15:04:05 -0700", From: "Ann <ann@example.org>",
				Subject: "hello", ListID: "MIPS <linux-mips.vger.kernel.org>", InReplyTo: []string{"p@b"}, References: []string{"r1@b", "p@b"}},
		},
		{
			name: "encoded words in a legacy charset",
			raw:  "Message-Id: <x@y>\nSubject: =?ISO-8859-1?Q?caf=E9?=\nFrom: =?KOI8-R?B?8NLJ1w==?= <p@example.ru>\n\nbody\n",
			want: Meta{MessageID: "x@y", Subject: "café", From: "Прив <p@example.ru>"},
		},
		{
			name: "no message-id",
			raw:  "Subject: s\n\nbody\n",
			want: Meta{Subject: "s"},
		},
		{
			name: "message-id that is not a msg-id",
			raw:  "Message-ID: 12345 at host\n\n",
			want: Meta{MessageID: "12345 at host"},
		},
		{
			name: "a 10 MB header line: fields past MaxHeaderBytes are not read, and nothing fails",
			raw:  "X-Long: " + strings.Repeat("X", 10<<20) + "\nMessage-ID: <ok@x>\n\nbody",
			want: Meta{},
		},
		{
			name: "bad date and free-text In-Reply-To are not errors",
			raw:  "Message-ID: <d@x>\nDate: yesterday-ish\nIn-Reply-To: message from Ann <ann@x> of Monday <p@x>\nReferences: <r@x>\n\n",
			want: Meta{MessageID: "d@x", Date: "yesterday-ish", InReplyTo: []string{"ann@x", "p@x"}, References: []string{"r@x"}},
		},
		{
			name: "control characters are not part of a Message-ID",
			raw:  "Message-ID: <a\rb\x00c@x>\nReferences: <r\x7f1@x>\n\n",
			want: Meta{MessageID: "abc@x", References: []string{"r1@x"}},
		},
		{
			name: "folded fields, first occurrence wins, CRLF",
			raw:  "Received: from a\r\n\tby b\r\nSubject: one\r\n two\r\nsubject: later\r\nREFERENCES: <a@x>\r\n <b@x>\r\n\r\nSubject: in body\r\n",
			want: Meta{Subject: "one two", References: []string{"a@x", "b@x"}},
		},
		{
			name: "X-No-Archive, as Mailman reads it: any value",
			raw:  "Subject: private\nX-No-Archive: yes\n\nbody\n",
			want: Meta{Subject: "private", NoArchive: true},
		},
		{
			name: "X-No-Archive with another value, any case",
			raw:  "x-no-archive: please\n\n",
			want: Meta{NoArchive: true},
		},
		{
			name: "X-Archive: no",
			raw:  "X-Archive:  No \n\n",
			want: Meta{NoArchive: true},
		},
		{
			name: "X-Archive: yes, and X-No-Archive in the body",
			raw:  "X-Archive: yes\n\nX-No-Archive: yes\n",
			want: Meta{},
		},
		{
			name:    "a line that is no field is reported, fields after it still read",
			raw:     "Subject: s\nthis is not a field\nMessage-ID: <late@x>\n\n",
			want:    Meta{Subject: "s", MessageID: "late@x"},
			wantErr: true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Parse([]byte(tt.raw))
			if (err != nil) != tt.wantErr {
				t.Fatalf("Parse() error = %v, want error %v", err, tt.wantErr)
			}
			if err != nil && !errors.Is(err, ErrHeader) {
				t.Errorf("Parse() error = %v, want it to wrap ErrHeader", err)
			}
			if got.MessageID != tt.want.MessageID || got.Subject != tt.want.Subject || got.From != tt.want.From ||
				got.ListID != tt.want.ListID || got.Date != tt.want.Date ||
				!slices.Equal(got.InReplyTo, tt.want.InReplyTo) || !slices.Equal(got.References, tt.want.References) ||
				got.NoArchive != tt.want.NoArchive {
				t.Errorf("Parse() = %+v, want %+v", got, tt.want)
			}
		})
	}
}

func TestNormalizeMessageID(t *testing.T) {
	for in, want := range map[string]string{
		"<a@b>":            "a@b",
		"  <a@b>  ":        "a@b",
		"a@b":              "a@b",
		"<a@b> (comment)":  "a@b",
		"junk <a@b> <c@d>": "a@b",
		"<unterminated":    "unterminated",
		"":                 "",
	} {
		if got := NormalizeMessageID(in); got != want {
			t.Errorf("NormalizeMessageID(%q) = %q, want %q", in, got, want)
		}
	}
}

func FuzzParse(f *testing.F) {
	f.Add([]byte("Message-ID: <a@b>\nSubject: =?utf-8?q?x?=\n\nbody"))
	f.Add([]byte("\n\n"))
	f.Add([]byte("Message-ID: <a@b\nReferences: <<<>>>\n"))
	f.Fuzz(func(t *testing.T, raw []byte) {
		m, _ := Parse(raw)
		for _, id := range append([]string{m.MessageID}, append(m.InReplyTo, m.References...)...) {
			if strings.ContainsFunc(id, isControl) {
				t.Errorf("Parse(%q) has Message-ID %q with a control character", raw, id)
			}
		}
	})
}

func TestTime(t *testing.T) {
	m, err := Parse([]byte("Date: Mon, 02 Jan 2006 15:04:05 -0700\n\n"))
	if err != nil {
		t.Fatal(err)
	}
	got, err := m.Time()
	if want := time.Date(2006, 1, 2, 22, 4, 5, 0, time.UTC); err != nil || !got.Equal(want) {
		t.Errorf("Time() = %v, %v; want %v", got, err, want)
	}
	if _, err := (Meta{Date: "yesterday"}).Time(); err == nil {
		t.Error("Time() of a bad date = nil error, want one")
	}
}
