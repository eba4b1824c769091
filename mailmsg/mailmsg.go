// Package mailmsg reads what the archive indexes from a raw message's
// header (RFC 5322 section 3.6, List-Id of RFC 2919). Real archives hold
// headers no parser accepts, so Parse never fails a message: it returns
// what it could read and why it could not read the rest.
package mailmsg

import (
	"bytes"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/emersion/go-message"
	_ "github.com/emersion/go-message/charset" // the charsets real archives are full of
	"github.com/emersion/go-message/mail"
	"github.com/emersion/go-message/textproto"
)

// MaxHeaderBytes bounds how much of a message is read as its header.
const MaxHeaderBytes = 1 << 20

// ErrHeader is wrapped by Parse's error when the header is malformed.
var ErrHeader = errors.New("mailmsg: malformed header")

// Meta is what Parse read from a header, decoded (RFC 2047) to UTF-8 where
// the field allows encoded words. Message-IDs are without angle brackets.
type Meta struct {
	MessageID  string
	Date       string // as written; see Time
	From       string
	Subject    string
	ListID     string
	InReplyTo  []string
	References []string
	NoArchive  bool // any X-No-Archive, or "X-Archive: no", as Mailman reads them
}

// Time parses Date (RFC 5322 section 3.3): costly, and off the import path.
func (m Meta) Time() (time.Time, error) {
	h := mail.Header{}
	h.Set("Date", m.Date)
	return h.Date()
}

var wanted = [...]string{"message-id", "date", "from", "subject", "list-id", "in-reply-to", "references", "x-no-archive", "x-archive"}

// Parse reads the header of raw; a malformed block also gives an error
// wrapping ErrHeader. Only the wanted fields go to go-message: real archive
// headers are mostly Received chains, costly to build.
func Parse(raw []byte) (Meta, error) {
	th, herr := scan(raw)
	h := mail.Header{Header: message.Header{Header: th}}
	var m Meta
	var err error
	if m.MessageID, err = h.MessageID(); err != nil || m.MessageID == "" {
		// Many real Message-IDs are not RFC 5322 msg-ids (spaces, no @,
		// no brackets); index them by their text rather than not at all.
		m.MessageID = NormalizeMessageID(h.Get("Message-Id"))
	}
	// Only a malformed header block is worth a warning.
	m.Date = strings.TrimSpace(h.Get("Date"))
	if m.Subject, err = h.Subject(); err != nil {
		m.Subject = h.Get("Subject")
	}
	if m.From, err = h.Text("From"); err != nil {
		m.From = h.Get("From")
	}
	if m.ListID, err = h.Text("List-Id"); err != nil {
		m.ListID = h.Get("List-Id")
	}
	m.MessageID = stripControls(m.MessageID)
	m.InReplyTo = msgIDs(h.Get("In-Reply-To"))
	m.References = msgIDs(h.Get("References"))
	m.NoArchive = h.Has("X-No-Archive") || strings.EqualFold(strings.TrimSpace(h.Get("X-Archive")), "no")
	return m, herr
}

// stripControls removes ASCII control characters, which no msg-id may hold
// (RFC 5322 section 3.6.4) and would make a poor index key and URL.
func stripControls(id string) string {
	if !strings.ContainsFunc(id, isControl) {
		return id
	}
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if isControl(r) {
			return -1
		}
		return r
	}, id))
}

func isControl(r rune) bool { return r < 0x20 || r == 0x7f }

// scan collects the first occurrence of each wanted field of the header
// block (RFC 5322 section 2.2), unfolded; a malformed line is reported.
func scan(raw []byte) (textproto.Header, error) {
	var h textproto.Header
	var bad []string
	if len(raw) > MaxHeaderBytes {
		raw = raw[:MaxHeaderBytes]
	}
	var name string  // the wanted field being read, or ""
	var value []byte // its unfolded value so far
	have := map[string]bool{}
	flush := func() {
		if name != "" && !have[name] {
			have[name] = true
			h.Add(name, strings.TrimSpace(string(value)))
		}
		name, value = "", value[:0]
	}
	for n := 1; len(raw) > 0; n++ {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break // end of the header
		}
		if line[0] == ' ' || line[0] == '\t' {
			if name != "" {
				value = append(value, line...)
			} else if n == 1 {
				bad = append(bad, "line 1 is a continuation")
			}
			continue
		}
		flush()
		colon := bytes.IndexByte(line, ':')
		if colon <= 0 {
			if len(bad) < 3 {
				bad = append(bad, fmt.Sprintf("line %d is not a header field", n))
			}
			continue
		}
		field := bytes.TrimRight(line[:colon], " \t")
		for _, w := range wanted {
			if len(field) == len(w) && strings.EqualFold(string(field), w) {
				name = w
				value = append(value[:0], line[colon+1:]...)
				break
			}
		}
	}
	flush()
	if len(bad) > 0 {
		return h, fmt.Errorf("%w: %s", ErrHeader, strings.Join(bad, ", "))
	}
	return h, nil
}

// msgIDs returns the <...> tokens of a threading field (RFC 5322 section
// 3.6.4), skipping the free text real In-Reply-To fields often carry.
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
		if id := stripControls(strings.TrimSpace(v[i+1 : i+j])); id != "" {
			ids = append(ids, id)
		}
		v = v[i+j+1:]
	}
}

// NormalizeMessageID returns a Message-ID as the archive indexes it:
// trimmed, without the angle brackets of the first msg-id.
func NormalizeMessageID(v string) string {
	v = strings.TrimSpace(v)
	if i := strings.IndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return strings.TrimSpace(v[i+1 : i+j])
		}
	}
	return strings.Trim(v, "<> \t")
}
