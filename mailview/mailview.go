// Package mailview turns a stored message into what a reader sees: its
// main header fields decoded, the text of its body, the messages it
// carries (a forward, a list's DMARC wrapping) and its attachments, which
// AttachmentData takes out again.
//
// Mail is hostile input: Parse never fails or panics, and Options bound its
// work. Strings in a Message are valid UTF-8 without control characters
// but newline and tab, and unescaped; the only markup is Part.HTML, from a
// sanitizer that drops everything executable or remote.
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
	// DefaultMaxAttachmentBytes lets any attachment of the archive out.
	DefaultMaxAttachmentBytes = 64 << 20
)

// Errors of AttachmentData. Test with errors.Is.
var (
	// ErrNoAttachment: the message has no attachment of that number.
	ErrNoAttachment = errors.New("mailview: no such attachment")
	// ErrAttachmentTooLarge: it decodes to more than MaxAttachmentBytes.
	ErrAttachmentTooLarge = errors.New("mailview: attachment too large")
)

// Options bound the work Parse does on one message; 0 means the default.
type Options struct {
	// MaxDepth is how many multipart levels are followed.
	MaxDepth int
	// MaxParts is how many MIME parts are examined.
	MaxParts int
	// MaxTextBytes is how many bytes of body text are kept (then Truncated).
	MaxTextBytes int
	// MaxHeaderBytes bounds the header of the message and of each part.
	MaxHeaderBytes int
	// MaxAttachmentBytes bounds what AttachmentData decodes and returns.
	MaxAttachmentBytes int
	// SkipAttachments lists attachments without decoding their bodies just
	// to learn their size, for a reader that wants only the text (Size -1).
	SkipAttachments bool
	// TextOnly reads the body, not the header fields (enclosed ones' too).
	TextOnly bool
	// Enough, if set, is asked as a plain text part is read, EnoughStep
	// bytes at a time, whether the reader has what it wants (part: what was
	// read, transfer-decoded; its last added bytes are new). Once it says
	// so, the rest of the text is left unread and Truncated set.
	Enough func(part []byte, added int) bool
}

// EnoughStep is how many bytes of a text part are read per Options.Enough.
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

// Field is a header field, unfolded, its value decoded (RFC 2047) to UTF-8.
type Field struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

// Part is a piece of body to show: exactly one of Text, HTML and Message.
type Part struct {
	// Text is a text/plain body, converted to UTF-8.
	Text string
	// HTML is a sanitized text/html body, shown only where a message has
	// no plain alternative: formatting, tables and http(s)/mailto links.
	HTML template.HTML
	// Message is a message/rfc822 part (RFC 2046 section 5.2.1): a forward,
	// or what a list wrapped for DMARC. Its attachments are listed with the
	// outer message's, one numbering for all; it is an attachment too.
	Message *Message
}

// Attachment is a part that is not shown inline.
type Attachment struct {
	// Name is the sender's file name made safe for display, or "".
	Name string
	Type string
	// Size is the decoded size in bytes, or -1 with SkipAttachments and
	// where a large attachment cannot be counted without decoding it.
	Size int64

	// entity is its place among the MIME entities, depth first from 1.
	entity int
}

// Message is the readable view of a message.
type Message struct {
	// Fields are the main header fields present (displayed), in order.
	Fields []Field
	// Header is every header field of the message, in order, decoded.
	Header  []Field
	Subject string
	// MessageID is without angle brackets, as the archive indexes it.
	MessageID string
	// InReplyTo and References are Message-IDs without angle brackets.
	InReplyTo  []string
	References []string
	// Parts are the bodies to show.
	Parts []Part
	// Attachments are the parts not shown inline.
	Attachments []Attachment
	// Truncated is set when Options cut text or skipped parts.
	Truncated bool
	// Problems says, one line each, what could not be parsed.
	Problems []string
}

// displayed are the fields of Message.Fields, in order.
var displayed = [...]string{"From", "To", "Cc", "Date", "Subject", "List-Id"}

// policy is the HTML sanitizer, safe for concurrent use once built.
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

// ParseHeader reads only the header of raw. It never fails.
func ParseHeader(raw []byte, opts Options) *Message {
	p := &parser{opts: opts.withDefaults(), m: &Message{}, headerOnly: true}
	p.parse(raw)
	return p.m
}

// Parse reads raw, a message as stored. It never fails: see Problems.
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

	// capture is the entity whose decoded body WriteAttachment wants (0:
	// none), written to sink; tooLarge and sinkErr say what went wrong.
	capture  int
	sink     io.Writer
	written  int64
	found    bool
	tooLarge bool
	sinkErr  error

	// raw counts the undecoded bytes of the entity newEntity made last.
	raw *rawCounter
	// textRaw and textOut: the text parts' undecoded bytes and text so far.
	textRaw, textOut int64
}

// AttachmentData returns the attachment numbered n (an index into
// Message.Attachments) and its decoded bytes.
func AttachmentData(raw []byte, n int, opts Options) (Attachment, []byte, error) {
	var b bytes.Buffer
	a, err := WriteAttachment(raw, n, opts, &b)
	if err != nil {
		return a, nil, err
	}
	return a, b.Bytes(), nil
}

// WriteAttachment writes the decoded bytes of the attachment numbered n to
// w as it decodes them; after an error w may hold part of them.
func WriteAttachment(raw []byte, n int, opts Options, w io.Writer) (Attachment, error) {
	// Neither walk decodes the other attachments.
	opts.SkipAttachments = true
	m := Parse(raw, opts)
	if n < 0 || n >= len(m.Attachments) {
		return Attachment{}, fmt.Errorf("%w: %d of %d", ErrNoAttachment, n, len(m.Attachments))
	}
	a := m.Attachments[n]
	// The same walk again, writing the bytes of that one entity: parsing
	// is deterministic, so the entity numbers agree.
	p := &parser{opts: opts.withDefaults(), m: &Message{}, capture: a.entity, sink: w}
	p.textLeft = p.opts.MaxTextBytes
	p.parse(raw)
	switch {
	case p.sinkErr != nil:
		return a, fmt.Errorf("cannot write attachment %d: %w", n, p.sinkErr)
	case p.tooLarge:
		return a, fmt.Errorf("%w: more than %d bytes", ErrAttachmentTooLarge, p.opts.MaxAttachmentBytes)
	case !p.found:
		return a, fmt.Errorf("%w: %d not found again", ErrNoAttachment, n)
	}
	a.Size = p.written
	return a, nil
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
	e, err := p.newEntity(message.Header{Header: th}, br)
	if err != nil && e == nil {
		p.problem("%v", err)
		return
	}
	if err != nil {
		p.problem("%v", err)
	}
	p.entity(e, 0)
}

// rawCounter counts the undecoded bytes its decoder reads.
type rawCounter struct {
	r io.Reader
	n int64
	// limit, if bounded, is where reading stops with errTooSparse.
	limit   int64
	bounded bool
}

// errTooSparse stops a decoder that reads far more than it gives, as soft
// line breaks of quoted-printable do (they decode to nothing).
var errTooSparse = errors.New("too little text for its encoded size")

func (c *rawCounter) Read(b []byte) (int, error) {
	if c.bounded {
		if c.n >= c.limit {
			return 0, errTooSparse
		}
		if int64(len(b)) > c.limit-c.n {
			b = b[:c.limit-c.n]
		}
	}
	n, err := c.r.Read(b)
	c.n += int64(n)
	return n, err
}

// newEntity is message.New, counting the undecoded bytes read (p.raw).
func (p *parser) newEntity(h message.Header, body io.Reader) (*message.Entity, error) {
	p.raw = &rawCounter{r: body}
	return message.New(h, p.raw)
}

// multipartReader reads the parts of a multipart entity with newEntity.
type multipartReader struct {
	p *parser
	r *textproto.MultipartReader
}

func (p *parser) multipart(e *message.Entity) message.MultipartReader {
	_, params, _ := e.Header.ContentType()
	return &multipartReader{p: p, r: textproto.NewMultipartReader(e.Body, params["boundary"])}
}

func (r *multipartReader) NextPart() (*message.Entity, error) {
	part, err := r.r.NextPart()
	if err != nil {
		return nil, err
	}
	return r.p.newEntity(message.Header{Header: part.Header}, part)
}

func (r *multipartReader) Close() error { return nil }

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
	// The displayed fields are the first of their names (h.Text's), taken
	// as they pass: each field's encoded words are decoded once.
	var shown [len(displayed)]int // 1 + the field's index in Header
	for f := h.Fields(); f.Next(); {
		v, err := f.Text()
		if err != nil {
			v = f.Value()
		}
		p.m.Header = append(p.m.Header, Field{Name: clean(f.Key()), Value: clean(v)})
		if i := slices.Index(displayed[:], f.Key()); i >= 0 && shown[i] == 0 {
			shown[i] = len(p.m.Header)
		}
	}
	for i, name := range displayed {
		if shown[i] == 0 {
			continue
		}
		v := p.m.Header[shown[i]-1].Value
		if name == "Subject" {
			p.m.Subject = v
		}
		p.m.Fields = append(p.m.Fields, Field{Name: name, Value: v})
	}
}

// lenient reads a header the MIME parser refused: "Name: value" lines with
// continuations (RFC 5322 section 2.2.3), up to the first empty line.
func (p *parser) lenient(raw []byte) {
	rest := raw
	// A field's value is gathered as bytes: appending each
	// continuation line to a string would copy the field every time.
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
		p.text(bytes.NewReader(rest), nil)
	}
}

// entity shows one MIME entity (RFC 2045, RFC 2046).
func (p *parser) entity(e *message.Entity, depth int) {
	raw := p.raw
	p.raw = nil
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
		mr := p.multipart(e)
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
			p.html(e.Body, raw)
		} else {
			p.text(e.Body, raw)
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
		// The multipart reader skips to the next boundary.
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: -1, entity: entity})
	case entity == p.capture:
		body := p.attachmentBody(e.Body, entity)
		if _, err := io.Copy(io.Discard, body); err != nil {
			p.problem("attachment %q: %v", name, err)
		}
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: body.n, entity: entity})
	default:
		p.m.Attachments = append(p.m.Attachments, Attachment{Name: name, Type: clean(mediaType), Size: p.attachmentSize(e, raw, name), entity: entity})
	}
}

// decodedSizeLimit is the largest attachment (undecoded) whose size is
// counted by decoding it; a larger one is counted only where its encoding
// allows (well-formed base64, or none and not text/*), else -1.
const decodedSizeLimit = 1 << 20

// attachmentSize returns the decoded size of attachment e, raw unread.
func (p *parser) attachmentSize(e *message.Entity, raw *rawCounter, name string) int64 {
	if raw == nil {
		return p.decodedSize(e.Body, name)
	}
	buf, err := io.ReadAll(io.LimitReader(raw.r, decodedSizeLimit+1))
	if err != nil {
		p.problem("attachment %q: %v", name, err)
	}
	if len(buf) <= decodedSizeLimit {
		// Decoded as e.Body would have been, from the bytes read.
		small, _ := message.New(e.Header, bytes.NewReader(buf))
		return p.decodedSize(small.Body, name)
	}
	mediaType, _, _ := e.Header.ContentType()
	text := strings.HasPrefix(strings.ToLower(mediaType), "text/")
	rest := io.MultiReader(bytes.NewReader(buf), raw.r)
	switch enc := strings.ToLower(strings.TrimSpace(e.Header.Get("Content-Transfer-Encoding"))); {
	case !text && (enc == "" || enc == "7bit" || enc == "8bit" || enc == "binary"):
		n, err := io.Copy(io.Discard, rest)
		if err != nil {
			p.problem("attachment %q: %v", name, err)
		}
		return n
	case !text && enc == "base64":
		n, err := base64Size(rest)
		if err != nil {
			p.problem("attachment %q: %v", name, err)
		}
		return n
	}
	if _, err := io.Copy(io.Discard, rest); err != nil {
		p.problem("attachment %q: %v", name, err)
	}
	return -1
}

func (p *parser) decodedSize(body io.Reader, name string) int64 {
	n, err := io.Copy(io.Discard, body)
	if err != nil {
		p.problem("attachment %q: %v", name, err)
	}
	return n
}

// base64Size returns the decoded size of a base64 body (RFC 2045 section
// 6.8) read from r, counting its letters without decoding; -1 for a body
// a decoder would reject.
func base64Size(r io.Reader) (int64, error) {
	buf := make([]byte, 64<<10)
	var letters, pad int64
	valid := true
	for {
		n, err := r.Read(buf)
		chunk := buf[:n]
		seen := classes(chunk)
		// The letters are what is not white space (nor "=", counted by
		// the padding branch): counting white space is the cheaper loop.
		l := int64(len(chunk))
		for _, ws := range []byte(" \t\r\n") {
			if seen&base64Class[ws] != 0 {
				l -= int64(bytes.Count(chunk, []byte{ws}))
			}
		}
		switch {
		case seen&b64Other != 0:
			valid = false
		case pad > 0 && seen&b64Letter != 0:
			valid = false // letters after the padding
		case seen&b64Pad != 0:
			// Padding: only white space and at most two "=" from here on.
			i := bytes.IndexByte(chunk, '=')
			for _, c := range chunk[i:] {
				switch base64Class[c] {
				case b64Pad:
					pad++
					l--
				case b64Letter:
					valid = false
				}
			}
			letters += l
		default:
			letters += l
		}
		if err == io.EOF {
			break
		}
		if err != nil {
			return -1, err
		}
	}
	if !valid || pad > 2 || (letters+pad)%4 != 0 || (pad > 0 && letters%4 == 0) {
		return -1, nil
	}
	return (letters+pad)/4*3 - pad, nil
}

// classes returns the base64Class bits of the bytes of b, eight at a time.
func classes(b []byte) byte {
	var seen byte
	for len(b) >= 8 {
		seen |= base64Class[b[0]] | base64Class[b[1]] | base64Class[b[2]] | base64Class[b[3]] |
			base64Class[b[4]] | base64Class[b[5]] | base64Class[b[6]] | base64Class[b[7]]
		b = b[8:]
	}
	for _, c := range b {
		seen |= base64Class[c]
	}
	return seen
}

// Classes of base64 bytes: a letter, "=", another byte, each white space.
const (
	b64Letter = 1 << iota
	b64Pad
	b64Other
	b64Space
	b64Tab
	b64CR
	b64LF
)

// base64Class classifies bytes as go-message decodes base64 (skipping all white space).
var base64Class = func() (t [256]byte) {
	for i := range t {
		t[i] = b64Other
	}
	for _, c := range []byte("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/") {
		t[c] = b64Letter
	}
	t[' '], t['\t'], t['\r'], t['\n'] = b64Space, b64Tab, b64CR, b64LF
	t['='] = b64Pad
	return t
}()

// attachmentBody wraps entity's body, counting and capturing its bytes.
func (p *parser) attachmentBody(r io.Reader, entity int) *countingReader {
	c := &countingReader{r: r}
	if entity == p.capture && p.capture > 0 {
		p.found = true
		c.p = p
	}
	return c
}

// countingReader counts what is read through it and, for the entity
// WriteAttachment wants, writes it to p.sink up to MaxAttachmentBytes.
type countingReader struct {
	r io.Reader
	n int64
	p *parser
}

func (c *countingReader) Read(b []byte) (int, error) {
	n, err := c.r.Read(b)
	c.n += int64(n)
	if p := c.p; p != nil && n > 0 && !p.tooLarge && p.sinkErr == nil {
		if p.written+int64(n) > int64(p.opts.MaxAttachmentBytes) {
			p.tooLarge = true
		} else if _, werr := p.sink.Write(b[:n]); werr != nil {
			p.sinkErr = werr
		} else {
			p.written += int64(n)
		}
	}
	return n, err
}

// embedded shows a message/rfc822 body as a Part, parsed like a message.
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
		p.text(br, nil)
		return
	}
	h := message.Header{Header: th}
	p.header(h)
	if !p.opts.TextOnly {
		inner.MessageID = clean(mailmsg.NormalizeMessageID(h.Get("Message-Id")))
	}
	e, err := p.newEntity(h, br)
	if err != nil && e == nil {
		p.problem("%v", err)
		return
	}
	if err != nil {
		p.problem("%v", err)
	}
	p.entity(e, depth)
}

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

// alternative shows the first alternative of a multipart/alternative (RFC
// 2046 section 5.1.4) that has plain text, else the first that shows any.
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

// readText reads at most what is left of MaxTextBytes from r, as UTF-8.
func (p *parser) readText(r io.Reader, raw *rawCounter, plain bool) string {
	var enough func([]byte, int) bool
	if plain {
		enough = p.opts.Enough
	}
	b, err := p.readChunks(r, raw, enough)
	if err != nil {
		p.problem("cannot read body: %v", err)
	}
	if len(b) > p.textLeft {
		// The rest is left unread: decoding it only to throw it away is
		// most of the cost of a long text.
		b = b[:p.textLeft]
		p.m.Truncated = true
	}
	p.textLeft -= len(b)
	return toUTF8(string(b))
}

// Bounds of the reading of text against its undecoded size: text parts
// are read while their undecoded bytes stay within textRawFloor plus
// textRawRatio times the text they gave (quoted-printable triples a byte);
// past that the text is cut, since soft line breaks decode to nothing.
const (
	textRawFloor = 64 << 10
	textRawRatio = 4
)

// readChunks reads at most one byte more than what is left of
// MaxTextBytes from r, EnoughStep bytes at a time, stopping early
// (Truncated) when enough says so or when raw outgrows the text.
func (p *parser) readChunks(r io.Reader, raw *rawCounter, enough func([]byte, int) bool) ([]byte, error) {
	limit := p.textLeft + 1
	var start int64
	if raw != nil {
		start = raw.n
	}
	var b []byte
	defer func() {
		if raw != nil {
			p.textRaw += raw.n - start
			raw.bounded = false
		}
		p.textOut += int64(len(b))
	}()
	for len(b) < limit {
		step := min(EnoughStep, limit-len(b))
		b = slices.Grow(b, step)
		// As io.ReadFull, but an io.ErrUnexpectedEOF is the reader's
		// own (base64 cut short): a problem, as io.ReadAll reports it.
		chunk := b[len(b) : len(b)+step]
		n := 0
		var err error
		for n < len(chunk) && err == nil {
			if raw != nil {
				// As far as the text could go if this read gave all it may.
				raw.limit = start - p.textRaw + textRawFloor + textRawRatio*(p.textOut+int64(len(b)+len(chunk)))
				raw.bounded = true
			}
			var k int
			k, err = r.Read(chunk[n:])
			n += k
		}
		b = b[:len(b)+n]
		if errors.Is(err, errTooSparse) {
			// The rest is left unread, as past MaxTextBytes.
			p.problem("a text part gives too little text for its encoded size; the rest is not shown")
			p.m.Truncated = true
			p.textLeft = len(b)
			return b, nil
		}
		if err == io.EOF {
			return b, nil
		}
		if err != nil {
			return b, err
		}
		if len(b) < limit && enough != nil && enough(b, n) {
			// The rest is left unread, as past MaxTextBytes.
			p.m.Truncated = true
			p.textLeft = len(b)
			return b, nil
		}
	}
	return b, nil
}

func (p *parser) text(r io.Reader, raw *rawCounter) {
	s := cleanBody(p.readText(r, raw, true))
	if strings.TrimSpace(s) != "" {
		p.m.Parts = append(p.m.Parts, Part{Text: s})
	}
}

func (p *parser) html(r io.Reader, raw *rawCounter) {
	// The sanitizer keeps control characters (a NUL) the page must not show.
	s := policy.Sanitize(cleanBody(p.readText(r, raw, false)))
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

// printableASCII reports text that clean (cleanBody, with lines) keeps as is.
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
