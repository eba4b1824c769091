// Package mailview turns a stored message into what a reader sees: its
// main header fields decoded to UTF-8, the text of its body, the messages
// it carries (a forward, or a list's DMARC wrapping), and a list of its
// attachments, each of which can be taken out again (AttachmentData).
//
// Mail is hostile input. Parse never fails and never panics: a message that
// is not valid MIME still yields its header fields as far as they parse and
// its body as text. The work is bounded by Options (nesting depth, number
// of parts, bytes of text). Every string in a Message is valid UTF-8 with
// no control characters other than newline and tab (in bodies); none of
// them is escaped, so callers must escape them (html/template does). The
// only markup is Part.HTML, produced by a sanitizer that keeps formatting
// and links and drops everything executable or remote.
package mailview

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"html/template"
	"io"
	"math"
	"net/url"
	"slices"
	"strings"
	"unicode"
	"unicode/utf8"

	"github.com/emersion/go-message"
	"github.com/emersion/go-message/charset" // registers the RFC 2047 / MIME charsets
	"github.com/emersion/go-message/textproto"
	"github.com/microcosm-cc/bluemonday"

	"github.com/chibrary/chibrary/mailmsg"
)

// Defaults of Options.
const (
	DefaultMaxDepth       = 20
	DefaultMaxParts       = 1000
	DefaultMaxTextBytes   = 4 << 20
	DefaultMaxHeaderBytes = 1 << 20
	// DefaultMaxAttachmentBytes is as large as a stored message can be:
	// any attachment of the archive can be taken out.
	DefaultMaxAttachmentBytes = 64 << 20
)

// Errors of AttachmentData. Test with errors.Is.
var (
	// ErrNoAttachment: the message has no attachment of that number.
	ErrNoAttachment = errors.New("mailview: no such attachment")
	// ErrAttachmentTooLarge: the attachment decodes to more than
	// Options.MaxAttachmentBytes.
	ErrAttachmentTooLarge = errors.New("mailview: attachment too large")
)

// Options bound the work Parse does on one message. The zero value uses the
// defaults above.
type Options struct {
	// MaxDepth is how many multipart levels are followed; deeper parts are
	// not shown. 0 means DefaultMaxDepth.
	MaxDepth int
	// MaxParts is how many MIME parts are examined. 0 means DefaultMaxParts.
	MaxParts int
	// MaxTextBytes is how many bytes of body text (all parts together) are
	// kept; the rest is cut and Truncated set. 0 means DefaultMaxTextBytes.
	MaxTextBytes int
	// MaxHeaderBytes bounds the header block of the message and of each
	// part. 0 means DefaultMaxHeaderBytes.
	MaxHeaderBytes int
	// MaxAttachmentBytes bounds what AttachmentData decodes and returns.
	// 0 means DefaultMaxAttachmentBytes.
	MaxAttachmentBytes int
	// SkipAttachments lists attachments without reading their bodies, for
	// a reader that wants only the text (a search index, an excerpt): a
	// base64 attachment of megabytes is then not decoded just to learn its
	// size, and Attachment.Size is -1. Enclosed messages are still read.
	SkipAttachments bool
	// TextOnly reads the body and not the header fields, for a reader
	// that wants only the text (an excerpt): Fields, Header, Subject,
	// MessageID, InReplyTo and References stay empty, also those of
	// enclosed messages. Parts and Attachments are as without it.
	TextOnly bool
	// Enough, if set, is asked as a plain text part is read, EnoughStep
	// bytes at a time, whether the reader has what it wants: part is what
	// has been read of the part (transfer-decoded, before its charset is
	// applied), of which the last added bytes are new. Once it says so,
	// the rest of the text (of that part and of the parts after it) is
	// left unread and Truncated is set: an excerpt stops decoding a long
	// message at the first words searched for. HTML parts are read to
	// MaxTextBytes as without it (their text is what is left of markup
	// that Enough would see).
	Enough func(part []byte, added int) bool
}

// EnoughStep is how many bytes of a text part are read between two
// questions to Options.Enough.
const EnoughStep = 4 << 10

func (o Options) withDefaults() Options {
	if o.MaxDepth <= 0 {
		o.MaxDepth = DefaultMaxDepth
	}
	if o.MaxParts <= 0 {
		o.MaxParts = DefaultMaxParts
	}
	if o.MaxTextBytes <= 0 {
		o.MaxTextBytes = DefaultMaxTextBytes
	}
	if o.MaxHeaderBytes <= 0 {
		o.MaxHeaderBytes = DefaultMaxHeaderBytes
	}
	if o.MaxAttachmentBytes <= 0 {
		o.MaxAttachmentBytes = DefaultMaxAttachmentBytes
	}
	return o
}

// Field is a header field with its value decoded (RFC 2047) to UTF-8 and
// unfolded.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Part is a piece of body to show, in message order. Exactly one of Text,
// HTML and Message is set.
type Part struct {
	// Text is a text/plain body, converted to UTF-8.
	Text string
	// HTML is a text/html body (shown only where a message has no plain
	// alternative) after sanitizing: formatting, tables and http(s)/mailto
	// links only; no scripts, styles, images, forms or frames.
	HTML template.HTML
	// Message is a message/rfc822 part (RFC 2046 section 5.2.1): a
	// forwarded message, or the original that a list wrapped to pass
	// DMARC. It has its own Fields and Parts; its attachments are listed
	// with the outer message's (Message.Attachments), so that one number
	// names each attachment of the whole message. The part itself is also
	// an attachment (the message as a file).
	Message *Message
}

// Attachment is a part that is not shown inline.
type Attachment struct {
	// Name is the file name the sender gave, made safe for display (no
	// path, no control or bidirectional-override characters), or "".
	Name string
	// Type is the media type, e.g. "application/pdf".
	Type string
	// Size is the decoded size in bytes (-1 with Options.SkipAttachments).
	Size int64

	// entity is the attachment's place among the message's MIME entities,
	// depth first, counting from 1: how AttachmentData finds it again.
	entity int
}

// Message is the readable view of a message.
type Message struct {
	// Fields are the main header fields present, in display order: From,
	// To, Cc, Date, Subject, List-Id.
	Fields []Field
	// Header is every header field of the message, in order, decoded.
	Header []Field
	// Subject is the decoded Subject, or "".
	Subject string
	// MessageID is the Message-ID without angle brackets, as the archive
	// indexes it, or "".
	MessageID string
	// InReplyTo and References are the Message-IDs the message refers to,
	// without angle brackets.
	InReplyTo  []string
	References []string
	// Parts are the bodies to show.
	Parts []Part
	// Attachments are the parts not shown inline.
	Attachments []Attachment
	// Truncated is set when text was cut or parts were skipped because of
	// Options.
	Truncated bool
	// Problems says, one line each, what could not be parsed.
	Problems []string
}

// displayed are the fields of Message.Fields, in order.
var displayed = []string{"From", "To", "Cc", "Date", "Subject", "List-Id"}

// policy is the HTML sanitizer. A bluemonday Policy is safe for concurrent
// use once built.
var policy = func() *bluemonday.Policy {
	p := bluemonday.NewPolicy()
	p.AllowElements("p", "br", "hr", "div", "span", "b", "i", "u", "s", "em", "strong",
		"small", "big", "sub", "sup", "tt", "code", "pre", "kbd", "samp", "var", "blockquote",
		"q", "cite", "abbr", "dl", "dt", "dd", "h1", "h2", "h3", "h4", "h5", "h6", "center", "font")
	p.AllowLists()
	p.AllowTables()
	p.RequireParseableURLs(true)
	p.RequireNoFollowOnLinks(true)
	// A relative link in mail would point into the archive itself, and so
	// would "https:path" (no host) on an archive served over https.
	p.AllowRelativeURLs(false)
	hasHost := func(u *url.URL) bool { return u.Host != "" && u.Opaque == "" }
	p.AllowURLSchemeWithCustomPolicy("http", hasHost)
	p.AllowURLSchemeWithCustomPolicy("https", hasHost)
	p.AllowURLSchemes("mailto")
	p.AllowAttrs("href").OnElements("a")
	p.RequireNoReferrerOnLinks(true)
	p.AddSpaceWhenStrippingTag(true)
	// Drop what these elements contain, not just their tags.
	p.SkipElementsContent("script", "style", "title", "head", "noscript", "template", "iframe", "object", "svg", "math")
	return p
}()

// ParseHeader reads only the header of raw: Parts and Attachments stay
// empty. It never fails.
func ParseHeader(raw []byte, opts Options) *Message {
	p := &parser{opts: opts.withDefaults(), m: &Message{}, headerOnly: true}
	p.parse(raw)
	return p.m
}

// Parse reads raw, a message as the store keeps it. It never fails; what it
// could not read is listed in Problems.
func Parse(raw []byte, opts Options) *Message {
	p := &parser{opts: opts.withDefaults(), m: &Message{}}
	p.textLeft = p.opts.MaxTextBytes
	p.parse(raw)
	return p.m
}

type parser struct {
	opts       Options
	headerOnly bool
	m          *Message
	parts      int
	textLeft   int

	// capture is the entity whose decoded body AttachmentData wants (0:
	// none); captured holds it, and tooLarge says it exceeded
	// MaxAttachmentBytes.
	capture  int
	captured []byte
	found    bool
	tooLarge bool
}

// AttachmentData returns the attachment numbered n (an index into Parse's
// Message.Attachments) and its decoded bytes. It fails with
// ErrNoAttachment when there is no such attachment and
// ErrAttachmentTooLarge when it decodes to more than
// Options.MaxAttachmentBytes.
func AttachmentData(raw []byte, n int, opts Options) (Attachment, []byte, error) {
	// Neither walk decodes the other attachments.
	opts.SkipAttachments = true
	m := Parse(raw, opts)
	if n < 0 || n >= len(m.Attachments) {
		return Attachment{}, nil, fmt.Errorf("%w: %d of %d", ErrNoAttachment, n, len(m.Attachments))
	}
	a := m.Attachments[n]
	// The same walk again, keeping the bytes of that one entity: parsing
	// is deterministic, so the entity numbers agree.
	p := &parser{opts: opts.withDefaults(), m: &Message{}, capture: a.entity}
	p.textLeft = p.opts.MaxTextBytes
	p.parse(raw)
	switch {
	case p.tooLarge:
		return a, nil, fmt.Errorf("%w: more than %d bytes", ErrAttachmentTooLarge, p.opts.MaxAttachmentBytes)
	case !p.found:
		return a, nil, fmt.Errorf("%w: %d not found again", ErrNoAttachment, n)
	}
	if p.captured == nil {
		p.captured = []byte{}
	}
	a.Size = int64(len(p.captured))
	return a, p.captured, nil
}

func (p *parser) problem(format string, args ...any) {
	if len(p.m.Problems) < 20 {
		p.m.Problems = append(p.m.Problems, clean(fmt.Sprintf(format, args...)))
	}
}

func (p *parser) parse(raw []byte) {
	if !p.opts.TextOnly {
		meta, _ := mailmsg.Parse(raw) // the archive's own reading of Message-ID and threading
		p.m.MessageID = clean(meta.MessageID)
		p.m.InReplyTo = cleanAll(meta.InReplyTo)
		p.m.References = cleanAll(meta.References)
	}

	lr := &limitedReader{r: bytes.NewReader(raw), n: p.opts.MaxHeaderBytes}
	br := bufio.NewReader(lr)
	th, err := textproto.ReadHeader(br)
	lr.n = math.MaxInt // the limit is for the header only
	if err != nil {
		// Not a MIME header: show what looks like fields, and the rest as text.
		p.problem("malformed header: %v", err)
		p.lenient(raw)
		return
	}
	p.header(message.Header{Header: th})
	if p.headerOnly {
		return
	}
	e, err := message.New(message.Header{Header: th}, br)
	if err != nil && e == nil {
		p.problem("%v", err)
		return
	}
	if err != nil {
		p.problem("%v", err)
	}
	p.entity(e, 0)
}

// limitedReader reads at most n bytes of r, then fails with
// errHeaderTooBig (an io.LimitReader would look like a clean end).
type limitedReader struct {
	r io.Reader
	n int
}

var errHeaderTooBig = errors.New("header block too big")

func (l *limitedReader) Read(b []byte) (int, error) {
	if l.n <= 0 {
		return 0, errHeaderTooBig
	}
	if len(b) > l.n {
		b = b[:l.n]
	}
	n, err := l.r.Read(b)
	l.n -= n
	return n, err
}

func (p *parser) header(h message.Header) {
	if p.opts.TextOnly {
		return
	}
	for f := h.Fields(); f.Next(); {
		v, err := f.Text()
		if err != nil {
			v = f.Value()
		}
		p.m.Header = append(p.m.Header, Field{Name: clean(f.Key()), Value: clean(v)})
	}
	for _, name := range displayed {
		if !h.Has(name) {
			continue
		}
		v, err := h.Text(name)
		if err != nil {
			v = h.Get(name)
		}
		v = clean(v)
		if name == "Subject" {
			p.m.Subject = v
		}
		p.m.Fields = append(p.m.Fields, Field{Name: name, Value: v})
	}
}

// lenient reads a header the MIME parser refused: lines of "Name: value"
// with continuation lines (RFC 5322 section 2.2.3) up to the first empty
// line, skipping lines that are neither; the body is shown as text.
func (p *parser) lenient(raw []byte) {
	rest := raw
	// A field's value is gathered as bytes: appending a continuation
	// line to a string copied the field for each of 100,000 of them.
	type field struct {
		name  string
		value []byte
	}
	var fields []field
	for len(rest) > 0 && len(raw)-len(rest) < p.opts.MaxHeaderBytes {
		line := rest
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			line, rest = rest[:i], rest[i+1:]
		} else {
			rest = nil
		}
		line = bytes.TrimRight(line, "\r")
		if len(line) == 0 {
			break
		}
		if (line[0] == ' ' || line[0] == '\t') && len(fields) > 0 {
			f := &fields[len(fields)-1]
			f.value = append(append(f.value, ' '), bytes.TrimSpace(line)...)
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok || len(bytes.TrimSpace(name)) == 0 || bytes.ContainsAny(name, " \t") {
			continue
		}
		fields = append(fields, field{name: string(name), value: slices.Clip(bytes.TrimSpace(value))})
	}
	var h message.Header
	for i := len(fields) - 1; i >= 0; i-- { // Add prepends
		h.Add(fields[i].name, string(fields[i].value))
	}
	p.header(h)
	if !p.headerOnly {
		p.text(bytes.NewReader(rest))
	}
}

// entity shows one MIME entity (RFC 2045, RFC 2046).
func (p *parser) entity(e *message.Entity, depth int) {
	p.parts++
	if p.parts > p.opts.MaxParts {
		if p.parts == p.opts.MaxParts+1 {
			p.problem("more than %d parts; the rest are not shown", p.opts.MaxParts)
		}
		p.m.Truncated = true
		return
	}
	mediaType, params, err := e.Header.ContentType()
	if err != nil {
		// RFC 2045 section 5.2: a syntactically invalid Content-Type is
		// read as the default, text/plain; charset=us-ascii.
		p.problem("bad Content-Type: %v", err)
		mediaType, params = "text/plain", nil
	}
	mediaType = strings.ToLower(mediaType)
	disposition, dparams, _ := e.Header.ContentDisposition()
	name := fileName(dparams["filename"], params["name"])
	attachment := strings.EqualFold(disposition, "attachment")
	entity := p.parts

	switch {
	case strings.HasPrefix(mediaType, "multipart/"):
		if depth >= p.opts.MaxDepth {
			p.problem("multipart nesting deeper than %d levels is not shown", p.opts.MaxDepth)
			p.m.Truncated = true
			return
		}
		mr := e.MultipartReader()
		if mediaType == "multipart/alternative" {
			p.alternative(mr, depth+1)
			return
		}
		// multipart/mixed, /signed (RFC 1847: the content, then the
		// signature, which is listed as an attachment), /related, /digest
		// and unknown subtypes (RFC 2046 section 5.1.7: treat as mixed).
		p.eachPart(mr, depth+1, func(part *message.Entity) { p.entity(part, depth+1) })
	case mediaType == "text/plain" && !attachment, mediaType == "text/html" && !attachment && name == "":
		if mediaType == "text/html" {
			p.html(e.Body)
		} else {
			p.text(e.Body)
		}
	case (mediaType == "message/rfc822" || mediaType == "message/global") && depth < p.opts.MaxDepth:
		// RFC 6532 section 3.5: message/global is message/rfc822 with
		// UTF-8 in its header, which the header reader takes as it is.
		body := p.attachmentBody(e.Body, entity)
		p.embedded(body, depth+1)
		_, err := io.Copy(io.Discard, body) // what the embedded parse left
		if err != nil {
			p.problem("embedded message: %v", err)
		}
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: body.n, entity: entity})
	case p.opts.SkipAttachments && entity != p.capture:
		// The multipart reader skips the undecoded bytes to the next
		// boundary.
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: -1, entity: entity})
	default:
		body := p.attachmentBody(e.Body, entity)
		if _, err := io.Copy(io.Discard, body); err != nil {
			p.problem("attachment %q: %v", name, err)
		}
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: body.n, entity: entity})
	}
}

// attachmentBody wraps the body of entity number entity: it counts the
// bytes read, and keeps them when AttachmentData wants this entity.
func (p *parser) attachmentBody(r io.Reader, entity int) *countingReader {
	c := &countingReader{r: r}
	if entity == p.capture && p.capture > 0 {
		p.found = true
		c.keep = &p.captured
		c.limit = p.opts.MaxAttachmentBytes
		c.over = &p.tooLarge
	}
	return c
}

// countingReader counts what is read through it and, if keep is set,
// appends it there up to limit bytes (setting *over beyond).
type countingReader struct {
	r     io.Reader
	n     int64
	keep  *[]byte
	limit int
	over  *bool
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if c.keep != nil && n > 0 {
		if len(*c.keep)+n > c.limit {
			*c.over = true
			*c.keep = nil
			c.keep = nil
		} else {
			*c.keep = append(*c.keep, b[:n]...)
		}
	}
	return n, err
}

// embedded shows a message/rfc822 body as a Part of its own: its header
// fields and its body, parsed like a top-level message.
func (p *parser) embedded(r io.Reader, depth int) {
	saved := p.m
	inner := &Message{}
	p.m = inner
	defer func() {
		p.m = saved
		p.m.Truncated = p.m.Truncated || inner.Truncated
		for _, pr := range inner.Problems {
			p.problem("embedded message: %s", pr)
		}
		inner.Problems, inner.Truncated = nil, false
		p.m.Attachments = append(p.m.Attachments, inner.Attachments...)
		inner.Attachments = nil
		p.m.Parts = append(p.m.Parts, Part{Message: inner})
	}()
	lr := &limitedReader{r: r, n: p.opts.MaxHeaderBytes}
	br := bufio.NewReader(lr)
	th, err := textproto.ReadHeader(br)
	lr.n = math.MaxInt
	if err != nil {
		p.problem("malformed header: %v", err)
		p.text(br)
		return
	}
	h := message.Header{Header: th}
	p.header(h)
	if !p.opts.TextOnly {
		inner.MessageID = clean(mailmsg.NormalizeMessageID(h.Get("Message-Id")))
	}
	e, err := message.New(h, br)
	if err != nil && e == nil {
		p.problem("%v", err)
		return
	}
	if err != nil {
		p.problem("%v", err)
	}
	p.entity(e, depth)
}

// eachPart calls fn for each part of mr, recording parse errors.
func (p *parser) eachPart(mr message.MultipartReader, depth int, fn func(*message.Entity)) {
	if mr == nil {
		return
	}
	for p.parts <= p.opts.MaxParts {
		part, err := mr.NextPart()
		if errors.Is(err, io.EOF) {
			return
		}
		if err != nil && !(message.IsUnknownCharset(err) || message.IsUnknownEncoding(err)) || part == nil {
			p.problem("cannot read multipart body: %v", err)
			return
		}
		if err != nil {
			p.problem("%v", err)
		}
		fn(part)
	}
}

// alternative shows one of the alternatives of a multipart/alternative
// (RFC 2046 section 5.1.4): the first that has plain text, else the first
// that shows anything.
func (p *parser) alternative(mr message.MultipartReader, depth int) {
	var chosen *Message
	plain := func(m *Message) bool {
		for _, part := range m.Parts {
			if part.Text != "" {
				return true
			}
		}
		return false
	}
	p.eachPart(mr, depth, func(part *message.Entity) {
		if chosen != nil && plain(chosen) {
			io.Copy(io.Discard, part.Body) // no need to look further
			return
		}
		saved := p.m
		p.m = &Message{}
		p.entity(part, depth)
		alt := p.m
		p.m = saved
		p.m.Truncated = p.m.Truncated || alt.Truncated
		for _, pr := range alt.Problems {
			p.problem("%s", pr)
		}
		if chosen == nil && (len(alt.Parts) > 0 || len(alt.Attachments) > 0) || plain(alt) {
			chosen = alt
		}
	})
	if chosen != nil {
		p.m.Parts = append(p.m.Parts, chosen.Parts...)
		p.m.Attachments = append(p.m.Attachments, chosen.Attachments...)
	}
}

// readText reads at most what is left of MaxTextBytes from r, as UTF-8;
// plain text with Options.Enough asked as it is read.
func (p *parser) readText(r io.Reader, plain bool) string {
	var b []byte
	var err error
	if plain && p.opts.Enough != nil {
		b, err = p.readUntilEnough(r)
	} else {
		b, err = io.ReadAll(io.LimitReader(r, int64(p.textLeft)+1))
	}
	if err != nil {
		p.problem("cannot read body: %v", err)
	}
	if len(b) > p.textLeft {
		// The rest is left unread: decoding it (quoted-printable,
		// base64, a charset) only to throw it away is most of the cost
		// of a long text, and a multipart reader skips to the next part
		// by itself.
		b = b[:p.textLeft]
		p.m.Truncated = true
	}
	p.textLeft -= len(b)
	return toUTF8(string(b))
}

// readUntilEnough reads at most one byte more than what is left of
// MaxTextBytes from r, EnoughStep bytes at a time, until Options.Enough
// says that what it read is enough: then nothing more of the text is read,
// and Truncated is set.
func (p *parser) readUntilEnough(r io.Reader) ([]byte, error) {
	limit := p.textLeft + 1
	var b []byte
	for len(b) < limit {
		step := min(EnoughStep, limit-len(b))
		b = slices.Grow(b, step)
		// As io.ReadFull, but an io.ErrUnexpectedEOF is the reader's
		// own (base64 cut short): a problem, as io.ReadAll reports it.
		chunk := b[len(b) : len(b)+step]
		n := 0
		var err error
		for n < len(chunk) && err == nil {
			var k int
			k, err = r.Read(chunk[n:])
			n += k
		}
		b = b[:len(b)+n]
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) < limit && p.opts.Enough(b, n) {
			// The rest is left unread, as past MaxTextBytes.
			p.m.Truncated = true
			p.textLeft = len(b)
			return b, nil
		}
	}
	return b, nil
}

func (p *parser) text(r io.Reader) {
	s := cleanBody(p.readText(r, true))
	if strings.TrimSpace(s) != "" {
		p.m.Parts = append(p.m.Parts, Part{Text: s})
	}
}

func (p *parser) html(r io.Reader) {
	// The sanitizer keeps control characters in text (a NUL: found by
	// the CI fuzz run), which the page must not show.
	s := policy.Sanitize(cleanBody(p.readText(r, false)))
	if strings.TrimSpace(s) != "" {
		p.m.Parts = append(p.m.Parts, Part{HTML: template.HTML(s)})
	}
}

// toUTF8 returns s if it is valid UTF-8, and otherwise reads it as
// windows-1252, the usual charset of undeclared 8-bit mail.
func toUTF8(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	r, err := charset.Reader("windows-1252", strings.NewReader(s))
	if err == nil {
		if b, err := io.ReadAll(r); err == nil && utf8.Valid(b) {
			return string(b)
		}
	}
	return strings.ToValidUTF8(s, "\uFFFD")
}

// clean makes a header value displayable: valid UTF-8, every control,
// line break and bidirectional-formatting character replaced by a space.
func clean(s string) string {
	s = toUTF8(s)
	if printableASCII(s, false) {
		return strings.TrimSpace(s)
	}
	return strings.TrimSpace(strings.Map(func(r rune) rune {
		if unicode.IsControl(r) || isBidi(r) {
			return ' '
		}
		return r
	}, s))
}

func cleanAll(ss []string) []string {
	out := make([]string, 0, len(ss))
	for _, s := range ss {
		if s = clean(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}

// cleanBody keeps newlines and tabs, turns CRLF and lone CR into LF and
// drops other control and bidirectional-override characters.
func cleanBody(s string) string {
	s = strings.ReplaceAll(s, "\r\n", "\n")
	if printableASCII(s, true) {
		return s // most mail: nothing to clean, and no rune to decode
	}
	return strings.Map(func(r rune) rune {
		switch {
		case r == '\n', r == '\t':
			return r
		case r == '\r':
			return '\n'
		case unicode.IsControl(r), isBidi(r):
			return -1
		}
		return r
	}, s)
}

// printableASCII reports whether s is printable ASCII, with newlines and
// tabs if lines is set: text that clean and cleanBody leave as it is.
func printableASCII(s string, lines bool) bool {
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c < 0x7f || lines && (c == '\n' || c == '\t') {
			continue
		}
		return false
	}
	return true
}

// isBidi reports the explicit bidirectional formatting characters, which
// can make "exe.txt" look like "txt.exe" (Unicode TR #9).
func isBidi(r rune) bool {
	return r >= 0x202A && r <= 0x202E || r >= 0x2066 && r <= 0x2069 || r == 0x200E || r == 0x200F || r == 0x061C
}

// fileName returns the first non-empty of the names, without any path and
// made displayable (RFC 2183 section 2.3: receivers must not trust it).
func fileName(names ...string) string {
	for _, n := range names {
		n = clean(n)
		if i := strings.LastIndexAny(n, `/\`); i >= 0 {
			n = n[i+1:]
		}
		n = strings.TrimSpace(n)
		if n == "." || n == ".." {
			n = ""
		}
		if len(n) > 255 {
			n = strings.ToValidUTF8(n[:255], "")
		}
		if n != "" {
			return n
		}
	}
	return ""
}
