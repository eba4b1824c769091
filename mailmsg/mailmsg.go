// Package mailmsg reads what the archive indexes and reports from a raw
// message's header (RFC 5322 section 3.6): Message-ID, Date, From,
// Subject, List-Id (RFC 2919), In-Reply-To and References.
//
// Real archives hold headers no parser accepts. Parse never fails a
// message: it returns what it could read and the reason it could not read
// the rest, and the caller stores the bytes regardless.
package mailmsg

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	// Register the charsets of RFC 2047 encoded words (ISO-8859-*,
	// windows-125*, KOI8-R, ...), which real list archives are full of.
	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset"
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

// MaxHeaderBytes bounds how much of a message is read as its header.
const MaxHeaderBytes = 1 << 20

// ErrHeader is wrapped by Parse's error when the header is malformed.
var ErrHeader = errors.New("mailmsg: malformed header")

// Meta is what Parse read from a header. Strings are decoded (RFC 2047) to
// UTF-8 where the field allows encoded words.
type Meta struct {
	// MessageID is the Message-ID without angle brackets, or "".
	MessageID  string
	Date       time.Time // zero when missing or unparseable
	From       string
	Subject    string
	ListID     string
	InReplyTo  []string // Message-IDs without angle brackets
	References []string // Message-IDs without angle brackets
}

// Parse reads the header of raw. Fields that do not parse are left empty
// (or, for text fields, undecoded). When the header block itself cannot be
// read, Parse returns a best-effort Message-ID and an error wrapping
// ErrHeader that says what was wrong.
func Parse(raw []byte) (Meta, error) {
	br := bufio.NewReaderSize(io.LimitReader(bytes.NewReader(raw), MaxHeaderBytes), 4096)
	th, err := textproto.ReadHeader(br)
	if err != nil {
		return Meta{MessageID: scanMessageID(raw)}, fmt.Errorf("%w: %v", ErrHeader, err)
	}
	h := mail.Header{Header: message.Header{Header: th}}
	var m Meta
	if m.MessageID, err = h.MessageID(); err != nil || m.MessageID == "" {
		// Many real Message-IDs are not RFC 5322 msg-ids (spaces, no @,
		// no brackets); index them by their text rather than not at all.
		m.MessageID = NormalizeMessageID(h.Get("Message-Id"))
	}
	// Fields that do not parse are left empty: only an unreadable header
	// block is worth a warning, since the message is stored as is anyway.
	if h.Has("Date") {
		m.Date, _ = h.Date()
	}
	if m.Subject, err = h.Subject(); err != nil {
		m.Subject = h.Get("Subject")
	}
	if m.From, err = h.Text("From"); err != nil {
		m.From = h.Get("From")
	}
	if m.ListID, err = h.Text("List-Id"); err != nil {
		m.ListID = h.Get("List-Id")
	}
	m.InReplyTo = msgIDs(h.Get("In-Reply-To"))
	m.References = msgIDs(h.Get("References"))
	return m, nil
}

// msgIDs returns the <...> tokens of a threading field (RFC 5322 section
// 3.6.4), without brackets. Real In-Reply-To fields often carry free text
// around them ("message from X of date <id>"), which is skipped.
func msgIDs(v string) []string {
	var ids []string
	for {
		i := strings.IndexByte(v, '<')
		if i < 0 {
			return ids
		}
		j := strings.IndexByte(v[i:], '>')
		if j < 0 {
			return ids
		}
		if id := strings.TrimSpace(v[i+1 : i+j]); id != "" {
			ids = append(ids, id)
		}
		v = v[i+j+1:]
	}
}

// NormalizeMessageID returns a Message-ID header value as the archive
// indexes it: trimmed, without the angle brackets of the first msg-id.
func NormalizeMessageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
	}
	return strings.Trim(v, "<> \t")
}

// scanMessageID finds a Message-ID field by a plain line scan, for headers
// the parser refused.
func scanMessageID(raw []byte) string {
	if len(raw) > MaxHeaderBytes {
		raw = raw[:MaxHeaderBytes]
	}
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			return "" // end of the header
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if ok && strings.EqualFold(string(bytes.TrimSpace(name)), "Message-Id") {
			return NormalizeMessageID(string(value))
		}
	}
	return ""
}
