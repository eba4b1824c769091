// Package mbox reads and writes mbox files: the "From_"-separated message
// databases of RFC 4155, in the variants real archives come in.
//
// A line is a separator when it begins with "From ", starts the input or
// follows an empty line, and, since RFC 4155 section 2 warns that body lines
// are not always escaped, looks like "From <sender> <date>": a month name and
// a clock time follow the sender (pipermail's "From user at example.org"
// lines qualify). [Message.Raw] is the message as received, less the From_
// line, the empty line before the next one and (mboxrd) one level of >From
// quoting; CRLF files keep their CRLF.
//
// [FormatMboxrd] quoting is reversible; that of [FormatMboxo] and
// [FormatMboxcl] is not, so quoted lines are kept as they are. Mboxcl and
// [FormatMboxcl2] frame a body by its Content-Length when that lands on the
// end of the input or on a From_ line, and otherwise fall back to From_
// lines with a warning. [FormatAuto] samples the first MiB.
//
// Errors name their place as "name:line". After a *[MessageError] (a message
// over MaxMessageSize, data before the first From_ line, a message the input
// failed or ended inside) Next may be called again. A message that cannot be
// read whole is never returned in part.
package mbox

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"strconv"
)

// DefaultMaxMessageSize is the message size limit when Options leaves it 0.
const DefaultMaxMessageSize = 64 << 20

// bufferSize is also the auto-detection sample; longer lines come in pieces.
const bufferSize = 1 << 20

// Format names an mbox variant.
type Format string

// The mbox variants.
const (
	FormatAuto    Format = "auto"
	FormatMboxrd  Format = "mboxrd"
	FormatMboxo   Format = "mboxo"
	FormatMboxcl  Format = "mboxcl"
	FormatMboxcl2 Format = "mboxcl2"
)

// Errors. Test with errors.Is.
var (
	ErrTooLarge      = errors.New("mbox: message too large")
	ErrLeadingData   = errors.New("mbox: data before the first From_ line")
	ErrUnknownFormat = errors.New("mbox: unknown format")
	ErrBadSeparator  = errors.New("mbox: bad From_ line") // given to the writer
	// ErrIncomplete: the input failed or ended inside a message, which is
	// therefore not returned.
	ErrIncomplete = errors.New("mbox: message incomplete")
)

// ParseFormat returns the Format named s ("" is FormatAuto).
func ParseFormat(s string) (Format, error) {
	switch f := Format(s); f {
	case "":
		return FormatAuto, nil
	case FormatAuto, FormatMboxrd, FormatMboxo, FormatMboxcl, FormatMboxcl2:
		return f, nil
	}
	return "", fmt.Errorf("%w %q (want auto, mboxrd, mboxo, mboxcl or mboxcl2)", ErrUnknownFormat, s)
}

// Options configure a Reader; zero values are defaults.
type Options struct {
	Name           string // in errors and warnings; "" is "mbox"
	Format         Format // "" is FormatAuto
	MaxMessageSize int64  // of Raw; 0 is DefaultMaxMessageSize
}

// Message is one message of an mbox.
type Message struct {
	Raw       []byte // the caller may keep it
	Line      int    // of the From_ line, from 1
	Offset    int64  // of the From_ line
	Separator string // the From_ line without its line end
	Warnings  []string
}

// MessageError reports a message (or leading data) that could be delimited
// but not read. Reading can go on after it.
type MessageError struct {
	Name string
	Line int
	Err  error
}

func (e *MessageError) Error() string { return fmt.Sprintf("%s:%d: %v", e.Name, e.Line, e.Err) }

func (e *MessageError) Unwrap() error { return e.Err }

// piece is one line of input, or part of one longer than the buffer. b is
// valid until the next read.
type piece struct {
	b     []byte
	start bool // b begins a line
	end   bool // b ends its line: with '\n' or at the end of the input
	line  int
	off   int64
}

func (p piece) full() bool { return p.start && p.end }

// candidate is a From_ line met inside a Content-Length body, where the
// message would have been split without Content-Length.
type candidate struct {
	blank, from, fromLen int // indexes in buf
	line                 int
	off                  int64
}

// Reader reads messages from an mbox stream, keeping at most one message
// (up to MaxMessageSize) in memory besides its read buffer.
type Reader struct {
	name   string
	format Format // as asked
	picked Format // as read
	reason string
	max    int64

	br          *bufio.Reader
	pending     []byte // input pushed back after a failed Content-Length
	pendPos     int
	srcEOF      bool
	atLineStart bool
	line        int   // line number where the next piece starts
	offset      int64 // offset of the next piece

	started bool
	err     error // sticky fatal error
	queued  error // a MessageError to return before the next message
	broken  bool  // the input failed to read: nothing more can be read

	haveSep   bool
	sep       string
	sepLine   int
	sepOffset int64
	sepWarn   []string

	buf       []byte // the message being read
	tooLarge  bool
	prevEmpty bool
	lastStart int
	inHeader  bool
	sawEmpty  bool
	clen      int64 // Content-Length, -1 if none
	clMode    bool
	clRemain  int64
	cut       bool // the input ended inside the Content-Length body
	cand      *candidate
	candBuf   candidate
	warnings  []string
	scratch   []byte
}

// NewReader returns a Reader of r.
func NewReader(r io.Reader, opts Options) *Reader {
	rd := &Reader{
		name:        opts.Name,
		format:      opts.Format,
		max:         opts.MaxMessageSize,
		br:          bufio.NewReaderSize(&stickyReader{r: r}, bufferSize),
		atLineStart: true,
		line:        1,
	}
	if rd.name == "" {
		rd.name = "mbox"
	}
	if rd.format == "" {
		rd.format = FormatAuto
	}
	if rd.max <= 0 {
		rd.max = DefaultMaxMessageSize
	}
	return rd
}

// Format returns the variant being read, known after the first Next. Auto
// picks mboxcl2 when every Content-Length of the sample lands exactly on
// the next From_ line, else mboxrd: mboxo cannot be told apart by looking,
// and mboxrd loses least when wrong (one '>' of lines that began ">From ",
// where mboxo would keep an extra '>' on every quoted line).
func (r *Reader) Format() Format {
	if r.picked == "" {
		return r.format
	}
	return r.picked
}

// FormatReason says why Format was picked ("" unless it was auto).
func (r *Reader) FormatReason() string { return r.reason }

func (r *Reader) where(line int) string { return r.name + ":" + strconv.Itoa(line) }

func (r *Reader) warnf(line int, format string, args ...any) {
	r.warnings = append(r.warnings, r.where(line)+": "+fmt.Sprintf(format, args...))
}

// read returns the next piece of input, or io.EOF.
func (r *Reader) read() (piece, error) {
	p := piece{start: r.atLineStart, line: r.line, off: r.offset}
	if r.pendPos < len(r.pending) {
		rest := r.pending[r.pendPos:]
		if i := bytes.IndexByte(rest, '\n'); i >= 0 {
			p.b, p.end = rest[:i+1], true
		} else {
			p.b, p.end = rest, r.srcEOF
		}
		r.pendPos += len(p.b)
		if r.pendPos == len(r.pending) {
			r.pending, r.pendPos = r.pending[:0], 0
		}
	} else {
		if r.srcEOF {
			return p, io.EOF
		}
		b, err := r.br.ReadSlice('\n')
		switch {
		case err == nil:
			p.end = true
		case errors.Is(err, bufio.ErrBufferFull):
		case errors.Is(err, io.EOF):
			r.srcEOF = true
			if len(b) == 0 {
				return p, io.EOF
			}
			p.end = true
		default:
			return p, fmt.Errorf("cannot read line %d: %w", r.line, err)
		}
		p.b = b
	}
	r.offset += int64(len(p.b))
	r.atLineStart = p.b[len(p.b)-1] == '\n'
	if r.atLineStart {
		r.line++
	}
	return p, nil
}

// unread pushes b back in front of the remaining input; b starts a line
// that is line number line at offset off.
func (r *Reader) unread(b []byte, line int, off int64) {
	rest := r.pending[r.pendPos:]
	n := make([]byte, 0, len(b)+len(rest))
	n = append(append(n, b...), rest...)
	r.pending, r.pendPos = n, 0
	r.line, r.offset, r.atLineStart = line, off, true
}

// Next returns the next message, or io.EOF after the last one. After a
// *MessageError, Next may be called again; any other error is fatal.
func (r *Reader) Next() (*Message, error) {
	if r.err != nil {
		return nil, r.err
	}
	if !r.started {
		r.started = true
		if err := r.start(); err != nil {
			r.err = err
			return nil, err
		}
	}
	if r.queued != nil {
		err := r.queued
		r.queued = nil
		return nil, err
	}
	if !r.haveSep || r.broken {
		r.err = io.EOF
		return nil, io.EOF
	}
	line := r.sepLine
	m, err := r.readMessage()
	if err != nil {
		var me *MessageError
		switch {
		case errors.As(err, &me):
		case r.broken:
			// Report the message, never a part of it, and stop.
			r.err = io.EOF
			return nil, &MessageError{Name: r.name, Line: line, Err: fmt.Errorf("%w: %w", ErrIncomplete, err)}
		default:
			r.err = err
		}
		return nil, err
	}
	return m, nil
}

// start picks the format and finds the first From_ line.
func (r *Reader) start() error {
	switch r.format {
	case FormatMboxrd, FormatMboxo, FormatMboxcl, FormatMboxcl2:
		r.picked = r.format
	case FormatAuto:
		// A read error ends the sample early; the reading below meets it
		// again (the reader is sticky) and reports it.
		sample, err := r.br.Peek(bufferSize)
		complete := errors.Is(err, io.EOF)
		r.picked, r.reason = detect(sample, complete)
	default:
		_, err := ParseFormat(string(r.format))
		return fmt.Errorf("%s: %w", r.where(1), err)
	}

	// RFC 4155 section 2: the input starts with a From_ line. Anything
	// else up to the first separator is reported, never dropped silently.
	var (
		leadBytes, leadLines int64
		blankOnly            = true
		prevEmpty            bool
		first                = true
	)
	for {
		p, err := r.read()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			r.broken = true
			r.queued = &MessageError{Name: r.name, Line: 1, Err: fmt.Errorf("%w: %w", ErrIncomplete, err)}
			return nil
		}
		if p.full() && (first && hasFromPrefix(p.b) || prevEmpty && isSeparator(p.b)) {
			r.setSep(p)
			if first && !isSeparator(p.b) {
				r.sepWarn = append(r.sepWarn, r.where(p.line)+": From_ line does not look like \"From sender date\"")
			}
			break
		}
		first = false
		leadBytes += int64(len(p.b))
		if p.end {
			leadLines++
		}
		empty := p.full() && isEmpty(p.b)
		blankOnly = blankOnly && empty
		prevEmpty = empty
	}
	switch {
	case leadBytes == 0:
	case blankOnly:
		w := fmt.Sprintf("%s: %d empty lines before the first From_ line skipped", r.where(1), leadLines)
		r.sepWarn = append(r.sepWarn, w)
	default:
		r.queued = &MessageError{Name: r.name, Line: 1, Err: fmt.Errorf("%w (%d bytes in lines 1-%d)", ErrLeadingData, leadBytes, leadLines)}
	}
	return nil
}

func (r *Reader) setSep(p piece) {
	r.haveSep = true
	r.sep = string(trimEOL(p.b))
	r.sepLine = p.line
	r.sepOffset = p.off
}

// readMessage reads the message whose From_ line was the last separator.
func (r *Reader) readMessage() (*Message, error) {
	line, off, sep := r.sepLine, r.sepOffset, r.sep
	r.haveSep = false
	r.warnings = append(r.warnings[:0], r.sepWarn...)
	r.sepWarn = r.sepWarn[:0]
	r.buf = r.buf[:0]
	r.tooLarge, r.prevEmpty, r.lastStart = false, false, 0
	r.inHeader, r.sawEmpty = true, false
	r.clen, r.clMode, r.clRemain, r.cand, r.cut = -1, false, 0, nil, false
	useCL := r.picked == FormatMboxcl || r.picked == FormatMboxcl2

	for !r.haveSep {
		p, err := r.read()
		if errors.Is(err, io.EOF) {
			r.atEOF(line)
			break
		}
		if err != nil {
			r.broken = true
			r.buf = shrink(r.buf)
			return nil, err
		}
		if r.clMode {
			if err := r.stepCL(p); err != nil {
				r.broken = true
				r.buf = shrink(r.buf)
				return nil, err
			}
			continue
		}
		r.step(p, useCL)
	}

	if r.tooLarge || int64(len(r.buf)) > r.max {
		r.buf = shrink(r.buf)
		return nil, &MessageError{Name: r.name, Line: line, Err: fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, r.max)}
	}
	if r.cut {
		r.buf = shrink(r.buf)
		return nil, &MessageError{Name: r.name, Line: line, Err: fmt.Errorf("%w: the input ends %d bytes short of its Content-Length of %d (truncated file?)", ErrIncomplete, r.clRemain, r.clen)}
	}
	// A copy of exactly the message's size: the buffer itself may be up to
	// twice as large, and is dropped after a large message.
	raw := bytes.Clone(r.buf)
	r.buf = shrink(r.buf)
	m := &Message{
		Raw:       raw,
		Line:      line,
		Offset:    off,
		Separator: sep,
	}
	if m.Raw == nil {
		m.Raw = []byte{}
	}
	if len(r.warnings) > 0 {
		m.Warnings = append([]string(nil), r.warnings...)
	}
	return m, nil
}

// atEOF finishes the last message.
func (r *Reader) atEOF(line int) {
	landed := false
	if r.clMode {
		if r.clRemain > 0 {
			if r.cand == nil || r.tooLarge {
				// No From_ line in the body to fall back to: cut short.
				r.cut = true
				return
			}
			r.clFallback(nil)
			return
		} else {
			landed = true // the body is exactly Content-Length bytes
		}
	}
	// The empty line that ends the last message is the mbox's, not the
	// message's (RFC 4155 section 2: each message ends with an empty line).
	if r.prevEmpty && !r.tooLarge && !landed {
		r.buf = r.buf[:r.lastStart]
	}
	if !r.sawEmpty {
		r.warnf(line, "input ends inside the message header (truncated?)")
	} else if !r.atLineStart {
		r.warnf(r.line, "input ends without a final newline (truncated?)")
	}
}

// shrink empties buf, dropping it when it grew large, so that one huge
// message does not pin its buffer for the rest of the input.
func shrink(buf []byte) []byte {
	if cap(buf) > 4<<20 {
		return nil
	}
	return buf[:0]
}

// add appends message bytes, or skips them once the message is too large;
// two bytes of slack let the separating empty line go before the check.
func (r *Reader) add(b []byte) {
	if r.tooLarge {
		return
	}
	if int64(len(r.buf)+len(b)) > r.max+2 {
		r.tooLarge = true
		r.buf = r.buf[:0]
		r.cand = nil
		return
	}
	r.buf = append(r.buf, b...)
}

// step handles one piece of a message split at From_ lines.
func (r *Reader) step(p piece, useCL bool) {
	if p.full() && r.prevEmpty && isSeparator(p.b) {
		// The empty line before a From_ line belongs to the mbox.
		if !r.tooLarge {
			r.buf = r.buf[:r.lastStart]
		}
		r.setSep(p)
		return
	}
	b := p.b
	if p.start {
		r.lastStart = len(r.buf)
		// mboxrd: remove one level of >From quoting.
		if r.picked == FormatMboxrd && isQuotedFrom(b) {
			b = b[1:]
		}
	}
	r.add(b)
	empty := p.full() && isEmpty(p.b)
	if r.inHeader {
		switch {
		case empty:
			r.inHeader, r.sawEmpty = false, true
			if useCL && r.clen >= 0 {
				r.clMode, r.clRemain = true, r.clen
			}
		case useCL && p.full() && r.clen < 0:
			if n, ok := contentLength(p.b); ok {
				r.clen = n
			}
		}
	} else if empty {
		r.sawEmpty = true
	}
	r.prevEmpty = empty
}

// stepCL handles one piece of a body framed by Content-Length.
func (r *Reader) stepCL(p piece) error {
	n := int64(len(p.b))
	switch {
	case r.clRemain == 0:
		// The body is complete: it must be followed by a From_ line, or
		// an empty line and then a From_ line or the end of the input.
		if p.full() && isSeparator(p.b) {
			r.setSep(p)
			return nil
		}
		if p.full() && isEmpty(p.b) {
			r.scratch = append(r.scratch[:0], p.b...)
			blank := p
			blank.b = r.scratch
			q, err := r.read()
			if errors.Is(err, io.EOF) {
				// Landed at the end of the input; the caller's next read
				// sees EOF again and finds nothing to trim.
				r.clMode, r.prevEmpty = false, false
				return nil
			}
			if err != nil {
				return err
			}
			if q.full() && isSeparator(q.b) {
				r.setSep(q)
				return nil
			}
			r.clFallback([]piece{blank, q})
			return nil
		}
		r.clFallback([]piece{p})
	case n > r.clRemain:
		// The body ends inside this line: only its line end may follow,
		// and then a From_ line or the end of the input.
		tail := p.b[r.clRemain:]
		if p.end && (string(tail) == "\n" || string(tail) == "\r\n") {
			r.scratch = append(r.scratch[:0], p.b...)
			whole := p
			whole.b = r.scratch
			keep := r.clRemain
			q, err := r.read()
			if err != nil && !errors.Is(err, io.EOF) {
				return err
			}
			if errors.Is(err, io.EOF) || q.full() && isSeparator(q.b) {
				r.add(r.scratch[:keep])
				r.clRemain = 0
				r.clMode = false
				r.prevEmpty = false // nothing to remove
				r.sawEmpty = true
				if err == nil {
					r.setSep(q)
				}
				return nil
			}
			r.clFallback([]piece{whole, q})
			return nil
		}
		r.clFallback([]piece{p})
	default:
		r.clRemain -= n
		if p.full() && r.prevEmpty && isSeparator(p.b) && r.cand == nil && !r.tooLarge {
			r.candBuf = candidate{blank: r.lastStart, from: len(r.buf), fromLen: len(p.b), line: p.line, off: p.off}
			r.cand = &r.candBuf
		}
		if p.start {
			r.lastStart = len(r.buf)
		}
		r.add(p.b)
		empty := p.full() && isEmpty(p.b)
		if empty {
			r.sawEmpty = true
		}
		r.prevEmpty = empty
	}
	return nil
}

// clFallback gives up Content-Length framing for this message, splitting at
// the first From_ line of the body if any. more are pieces read ahead.
func (r *Reader) clFallback(more []piece) {
	r.clMode = false
	r.warnf(r.sepLine, "Content-Length: %d does not end at a From_ line; split at From_ lines instead", r.clen)
	if c := r.cand; c != nil && !r.tooLarge {
		for _, p := range more {
			r.buf = append(r.buf, p.b...)
		}
		from := r.buf[c.from : c.from+c.fromLen]
		r.haveSep = true
		r.sep = string(trimEOL(from))
		r.sepLine, r.sepOffset = c.line, c.off
		r.unread(r.buf[c.from+c.fromLen:], c.line+1, c.off+int64(c.fromLen))
		r.buf = r.buf[:c.blank]
		return
	}
	for _, p := range more {
		r.step(p, false)
		if r.haveSep {
			return
		}
	}
}

func hasFromPrefix(b []byte) bool {
	return len(b) >= 5 && string(b[:5]) == "From "
}

// isEmpty reports whether the line b is empty ("\n" or "\r\n").
func isEmpty(b []byte) bool {
	return len(b) == 1 && b[0] == '\n' || len(b) == 2 && b[0] == '\r' && b[1] == '\n'
}

// isQuotedFrom reports whether b matches ^>+From .
func isQuotedFrom(b []byte) bool {
	i := 0
	for i < len(b) && b[i] == '>' {
		i++
	}
	return i > 0 && hasFromPrefix(b[i:])
}

func trimEOL(b []byte) []byte {
	b = bytes.TrimSuffix(b, []byte("\n"))
	return bytes.TrimSuffix(b, []byte("\r"))
}

// isSeparator reports whether the line b looks like "From sender date"
// (RFC 4155 section 2): a month name and a clock time follow the sender.
func isSeparator(b []byte) bool {
	if !hasFromPrefix(b) {
		return false
	}
	rest := trimEOL(b[5:])
	var month, clock bool
	for i, w := 0, 0; i < len(rest); w++ {
		for i < len(rest) && (rest[i] == ' ' || rest[i] == '\t') {
			i++
		}
		j := i
		for j < len(rest) && rest[j] != ' ' && rest[j] != '\t' {
			j++
		}
		if w > 0 && j > i {
			word := rest[i:j]
			month = month || isMonth(word)
			clock = clock || isClock(word)
		}
		i = j
	}
	return month && clock
}

func isMonth(w []byte) bool {
	w = bytes.TrimSuffix(w, []byte(","))
	if len(w) != 3 {
		return false
	}
	m := [3]byte{w[0] | 0x20, w[1] | 0x20, w[2] | 0x20}
	switch string(m[:]) {
	case "jan", "feb", "mar", "apr", "may", "jun", "jul", "aug", "sep", "oct", "nov", "dec":
		return true
	}
	return false
}

// isClock reports whether w is h:mm or hh:mm, optionally followed by :ss.
func isClock(w []byte) bool {
	digit := func(c byte) bool { return '0' <= c && c <= '9' }
	i := 0
	for i < len(w) && i < 2 && digit(w[i]) {
		i++
	}
	if i == 0 || i >= len(w) || w[i] != ':' {
		return false
	}
	rest := w[i+1:]
	if len(rest) < 2 || !digit(rest[0]) || !digit(rest[1]) {
		return false
	}
	rest = rest[2:]
	return len(rest) == 0 || len(rest) == 3 && rest[0] == ':' && digit(rest[1]) && digit(rest[2])
}

// contentLength parses a "Content-Length: N" header line.
func contentLength(b []byte) (int64, bool) {
	const name = "content-length:"
	if len(b) < len(name) || !bytes.EqualFold(b[:len(name)], []byte(name)) {
		return 0, false
	}
	v := bytes.TrimSpace(b[len(name):])
	n, err := strconv.ParseInt(string(v), 10, 64)
	if err != nil || n < 0 || v[0] == '+' {
		return 0, false
	}
	return n, true
}

// stickyReader returns the first error of r (io.EOF included) on every
// later call, so that the reading meets again what auto-detection met.
type stickyReader struct {
	r   io.Reader
	err error
}

func (s *stickyReader) Read(p []byte) (int, error) {
	if s.err != nil {
		return 0, s.err
	}
	n, err := s.r.Read(p)
	s.err = err
	return n, err
}
