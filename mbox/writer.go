package mbox

import (
	"bufio"
	"bytes"
	"fmt"
	"io"
	"strings"
)

// DefaultSeparator is the From_ line Writer uses when given none.
const DefaultSeparator = "From MAILER-DAEMON Thu Jan  1 00:00:00 1970"

// Writer writes an mboxrd file. Reading it back gives each message's Raw and
// Separator, except that a message not ending in a newline gets one. The
// line ends it adds are CRLF when the message's first line ends in CRLF.
type Writer struct {
	w *bufio.Writer
}

// NewWriter returns a Writer to w. Call Flush when done.
func NewWriter(w io.Writer) *Writer {
	return &Writer{w: bufio.NewWriterSize(w, 64<<10)}
}

// WriteMessage writes one message. separator ("" is DefaultSeparator) must
// look like a From_ line, without a line end, or the reader would not find
// it: otherwise the error wraps ErrBadSeparator.
func (w *Writer) WriteMessage(separator string, raw []byte) error {
	if separator == "" {
		separator = DefaultSeparator
	}
	if !isSeparator([]byte(separator)) || strings.ContainsAny(separator, "\r\n") {
		return fmt.Errorf("cannot write message: %w: %q", ErrBadSeparator, separator)
	}
	eol := lineEnd(raw)
	w.w.WriteString(separator)
	w.w.WriteString(eol)
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line = raw[:i+1]
		}
		raw = raw[len(line):]
		if isQuotedFrom(line) || hasFromPrefix(line) {
			w.w.WriteByte('>')
		}
		w.w.Write(line)
		if len(raw) == 0 && line[len(line)-1] != '\n' {
			if line[len(line)-1] == '\r' {
				w.w.WriteByte('\n') // complete the CRLF
			} else {
				w.w.WriteString(eol)
			}
		}
	}
	if _, err := w.w.WriteString(eol); err != nil {
		return fmt.Errorf("cannot write message: %w", err)
	}
	return nil
}

// Flush writes any buffered data to the underlying writer.
func (w *Writer) Flush() error {
	if err := w.w.Flush(); err != nil {
		return fmt.Errorf("cannot write mbox: %w", err)
	}
	return nil
}

// lineEnd is CRLF when raw's first line ends in CRLF, or raw is one line
// ending in CR.
func lineEnd(raw []byte) string {
	i := bytes.IndexByte(raw, '\n')
	if i > 0 && raw[i-1] == '\r' || i < 0 && len(raw) > 0 && raw[len(raw)-1] == '\r' {
		return "\r\n"
	}
	return "\n"
}
