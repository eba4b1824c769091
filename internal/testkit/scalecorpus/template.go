package scalecorpus

import (
	"bytes"
	"strconv"
	"strings"
	"time"
)

// A template is one sample message taken apart once, so that each copy
// is written by appending its pieces with the copy's own in between.
type template struct {
	sender string // of the From_ line
	eol    string // the message's line end, for the lines the generator adds
	fields []field
	body   []byte // from the blank line that ends the header on; nil if none
	date   time.Time
	dated  bool
	root   string // the thread's root Message-ID, or a name of its own
}

type fieldKind uint8

const (
	plainField   fieldKind = iota
	idsField               // Message-ID, In-Reply-To, References: ids say where each token starts
	dateField              // Date: written anew from the template's date
	subjectField           // Subject: a tagging list's tag goes at valueAt
	droppedField           // the sample list's own fields
)

type field struct {
	raw     []byte // the whole field, folded lines and line end included
	kind    fieldKind
	ids     []int // idsField: the offsets just after each token's '<'
	valueAt int   // subjectField: the offset of the value
}

// parseTemplate takes raw (a message as mbox.Reader gives it, without its
// From_ line) apart. It accepts any bytes: what is not a header field
// (RFC 5322 section 2.2) is kept as it is.
func parseTemplate(separator string, raw []byte) *template {
	t := &template{eol: "\n", sender: "MAILER-DAEMON"}
	if i := bytes.IndexByte(raw, '\n'); i > 0 && raw[i-1] == '\r' {
		t.eol = "\r\n"
	}
	if f := strings.Fields(separator); len(f) >= 2 && f[0] == "From" && printable(f[1]) {
		t.sender = f[1]
	}
	rest := raw
	for len(rest) > 0 {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line = rest[:i+1]
		}
		if len(bytes.TrimRight(line, "\r\n")) == 0 {
			t.body = rest
			break
		}
		rest = rest[len(line):]
		if line[0] == ' ' || line[0] == '\t' {
			// A folded line continues the field before it; one before
			// any field would continue the Received line render puts
			// first, so it goes.
			if len(t.fields) > 0 {
				f := &t.fields[len(t.fields)-1]
				f.raw = append(f.raw, line...)
			}
			continue
		}
		t.fields = append(t.fields, field{raw: append([]byte(nil), line...)})
	}
	if t.body != nil {
		t.body = append([]byte(nil), t.body...)
	}
	for i := range t.fields {
		f := &t.fields[i]
		name, _, ok := bytes.Cut(f.raw, []byte(":"))
		if !ok {
			continue
		}
		name = bytes.TrimRight(name, " \t")
		switch {
		case !keep(name):
			f.kind = droppedField
		case bytesEqualFold(name, "message-id"), bytesEqualFold(name, "in-reply-to"), bytesEqualFold(name, "references"):
			f.kind = idsField
			f.ids = tokens(f.raw, len(name)+1)
		case bytesEqualFold(name, "date"):
			f.kind = dateField
		case bytesEqualFold(name, "subject"):
			f.kind = subjectField
			f.valueAt = len(name) + 1
			for f.valueAt < len(f.raw) && (f.raw[f.valueAt] == ' ' || f.raw[f.valueAt] == '\t') {
				f.valueAt++
			}
		}
	}
	id, refs, inReplyTo, date, ok := mailmsgParse(raw)
	t.date, t.dated = date, ok
	switch {
	case len(refs) > 0:
		t.root = refs[0]
	case len(inReplyTo) > 0:
		t.root = inReplyTo[0]
	case id != "":
		t.root = id
	default:
		t.root = "#" + string(raw[:min(len(raw), 200)])
	}
	return t
}

// tokens returns the offsets just after the '<' of each msg-id token of
// b from start: '<', then no space, '<' or '>', then '>' (as
// testcorpus.WriteScaled finds them).
func tokens(b []byte, start int) []int {
	var ids []int
	for i := start; i < len(b); i++ {
		if b[i] != '<' {
			continue
		}
		j := i + 1
		for j < len(b) && !isTokenStop(b[j]) {
			j++
		}
		if j < len(b) && b[j] == '>' && j > i+1 {
			ids = append(ids, i+1)
			i = j
		}
	}
	return ids
}

func isTokenStop(c byte) bool {
	return c == '<' || c == '>' || c == ' ' || c == '\t' || c == '\r' || c == '\n'
}

func printable(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] <= ' ' || s[i] >= 0x7f {
			return false
		}
	}
	return s != ""
}

// render appends copy k of the message, as list l distributes it, to buf
// and returns it with its From_ line. g numbers the message among all
// the generator writes, for its Received line's id.
func (t *template) render(buf []byte, k, g uint64, shift time.Duration, l listHeaders) ([]byte, string) {
	date := sampleDate
	if t.dated {
		date = t.date
	}
	date = date.Add(shift)
	sep := "From " + t.sender + " " + date.UTC().Format("Mon Jan _2 15:04:05 2006")
	eol := t.eol

	// The list's server received it first of all that is shown above
	// the sender's own Received lines.
	buf = append(buf, "Received: from mail.example.net (mail.example.net [192.0.2.25])"...)
	buf = append(buf, eol...)
	buf = append(buf, "\tby "...)
	buf = append(buf, l.server...)
	buf = append(buf, " with ESMTP id "...)
	buf = strconv.AppendUint(buf, g, 36)
	buf = append(buf, '.')
	buf = append(buf, l.name...)
	buf = append(buf, eol...)
	buf = append(buf, "\tfor <"...)
	buf = append(buf, l.name...)
	buf = append(buf, '@')
	buf = append(buf, l.server...)
	buf = append(buf, ">; "...)
	buf = appendDate(buf, date)
	buf = append(buf, eol...)

	prefix := strconv.AppendUint(nil, k, 10)
	prefix = append(prefix, '.')
	for i := range t.fields {
		f := &t.fields[i]
		switch f.kind {
		case droppedField:
			continue
		case idsField:
			at := 0
			for _, o := range f.ids {
				buf = append(buf, f.raw[at:o]...)
				buf = append(buf, prefix...)
				at = o
			}
			buf = append(buf, f.raw[at:]...)
		case dateField:
			if !t.dated {
				buf = append(buf, f.raw...)
				break
			}
			buf = append(buf, "Date: "...)
			buf = appendDate(buf, date.In(t.date.Location()))
			buf = append(buf, eol...)
			continue
		case subjectField:
			buf = append(buf, f.raw[:f.valueAt]...)
			if l.tag && !bytes.HasPrefix(f.raw[f.valueAt:], []byte("["+l.name+"]")) {
				buf = append(buf, '[')
				buf = append(buf, l.name...)
				buf = append(buf, "] "...)
			}
			buf = append(buf, f.raw[f.valueAt:]...)
		default:
			buf = append(buf, f.raw...)
		}
		if buf[len(buf)-1] != '\n' {
			buf = append(buf, eol...)
		}
	}
	for _, h := range [...][2]string{
		{"Sender: ", "-owner@"},
		{"List-Id: <", "."},
		{"X-Mailing-List: ", "@"},
		{"List-Post: <mailto:", "@"},
		{"List-Subscribe: <mailto:", "+subscribe@"},
		{"List-Unsubscribe: <mailto:", "+unsubscribe@"},
	} {
		buf = append(buf, h[0]...)
		buf = append(buf, l.name...)
		buf = append(buf, h[1]...)
		buf = append(buf, l.server...)
		if strings.Contains(h[0], "<") {
			buf = append(buf, '>')
		}
		buf = append(buf, eol...)
	}
	if t.body == nil {
		return append(buf, eol...), sep
	}
	return append(buf, t.body...), sep
}
