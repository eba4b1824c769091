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
			want: Meta{MessageID: "a@b.example", Date: time.Date(2006, 1, 2, 22, 4, 5, 0, time.UTC), From: "Ann <ann@example.org>",
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
			name:    "malformed header still yields the message-id",
			raw:     "Message-ID: <ok@x>\n" + strings.Repeat("X", 5000) + "\n\nbody",
			want:    Meta{MessageID: "ok@x"},
			wantErr: true,
		},
		{
			name: "bad date and free-text In-Reply-To are not errors",
			raw:  "Message-ID: <d@x>\nDate: yesterday-ish\nIn-Reply-To: message from Ann <ann@x> of Monday <p@x>\nReferences: <r@x>\n\n",
			want: Meta{MessageID: "d@x", InReplyTo: []string{"ann@x", "p@x"}, References: []string{"r@x"}},
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
				got.ListID != tt.want.ListID || !got.Date.Equal(tt.want.Date) ||
				!slices.Equal(got.InReplyTo, tt.want.InReplyTo) || !slices.Equal(got.References, tt.want.References) {
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
		if strings.ContainsAny(m.MessageID, "\r\n") {
			t.Errorf("Parse(%q).MessageID = %q contains a line break", raw, m.MessageID)
		}
	})
}
