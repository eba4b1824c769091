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

// Parse reads the header of raw. On a malformed header it still returns
// every field it could read (at least a best-effort Message-ID) and an
// error wrapping ErrHeader that says what was wrong.
func Parse(raw []byte) (Meta, error) {
	br := bufio.NewReaderSize(io.LimitReader(bytes.NewReader(raw), MaxHeaderBytes), 4096)
	th, err := textproto.ReadHeader(br)
	if err != nil {
		return Meta{MessageID: scanMessageID(raw)}, fmt.Errorf("%w: %v", ErrHeader, err)
	}
	h := mail.Header{Header: message.Header{Header: th}}
	var m Meta
	var errs []string
	note := func(field string, err error) {
		if err != nil {
			errs = append(errs, field+": "+err.Error())
		}
	}
	if m.MessageID, err = h.MessageID(); err != nil || m.MessageID == "" {
		// Many real Message-IDs are not RFC 5322 msg-ids (spaces, no @,
		// no brackets); index them by their text rather than not at all.
		m.MessageID = NormalizeMessageID(h.Get("Message-Id"))
	}
	if h.Has("Date") {
		m.Date, err = h.Date()
		note("Date", err)
	}
	m.Subject, err = h.Subject()
	note("Subject", err)
	m.From, err = h.Text("From")
	note("From", err)
	m.ListID, err = h.Text("List-Id")
	note("List-Id", err)
	m.InReplyTo, err = h.MsgIDList("In-Reply-To")
	note("In-Reply-To", err)
	m.References, err = h.MsgIDList("References")
	note("References", err)
	if len(errs) > 0 {
		return m, fmt.Errorf("%w: %s", ErrHeader, strings.Join(errs, "; "))
	}
	return m, nil
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
