// Package hostile generates a deterministic corpus of hostile mail, from
// broken software and from people trying to break an archive, shared by the
// tests of every path a message takes. Every message is a pure function of
// its name and, but for the empty one, ends in a line feed, so that an
// mboxrd round trip gives it back byte for byte. The large messages are
// streamed, never held in memory, so that a test can feed a program more
// than its size limit without needing that much memory itself.
package hostile

import (
	"bytes"
	"crypto/sha256"
	"fmt"
	"io"
	"strings"

	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
)

// Outcome is what a correct archive does with a message.
type Outcome int

// The outcomes: stored byte for byte however broken, or reported as too
// large without harming the neighbours.
const (
	Stored Outcome = iota
	TooLarge
)

func (o Outcome) String() string {
	switch o {
	case Stored:
		return "stored"
	case TooLarge:
		return "too large"
	}
	return fmt.Sprintf("Outcome(%d)", int(o))
}

// Message is one hostile message.
type Message struct {
	Name string // unique in a corpus, and in the Message-ID if any
	Why  string // what the message is hostile about
	Want Outcome
	// MessageID is without angle brackets, or "" when the message has none
	// a reader can be expected to find.
	MessageID string

	raw  []byte                  // nil for a generated message
	size int64                   // the size of a generated message
	gen  func(w io.Writer) error // writes a generated message
}

// Size returns the message's length in bytes.
func (m Message) Size() int64 {
	if m.gen == nil {
		return int64(len(m.raw))
	}
	return m.size
}

// Raw returns the message's bytes, allocating them for a generated one.
func (m Message) Raw() []byte {
	if m.gen == nil {
		return m.raw
	}
	var b bytes.Buffer
	b.Grow(int(m.size))
	m.gen(&b) // a bytes.Buffer does not fail
	return b.Bytes()
}

// WriteTo writes the message's bytes to w.
func (m Message) WriteTo(w io.Writer) (int64, error) {
	if m.gen == nil {
		n, err := w.Write(m.raw)
		return int64(n), err
	}
	cw := &countWriter{w: w}
	err := m.gen(cw)
	return cw.n, err
}

// Digest returns store.DigestOf the message's bytes, without holding a
// generated message in memory.
func (m Message) Digest() store.Digest {
	if m.gen == nil {
		return store.DigestOf(m.raw)
	}
	h := sha256.New()
	m.gen(h) // a hash does not fail
	var d store.Digest
	h.Sum(d[:0])
	return d
}

// Options select the messages of a corpus. The zero value is every message
// under 11 MB.
type Options struct {
	// Large adds BigMessage and one a byte over MaxMessageSize (0 means
	// mbox.DefaultMaxMessageSize).
	Large          bool
	MaxMessageSize int64
}

// Sizes of the big messages.
const (
	LongHeaderLine = 10 << 20 // the one header line of "long-header-line"
	BigMessage     = 50 << 20 // "big-50mb"
	NestingDepth   = 1000     // of "deep-multipart"
)

// Messages returns the corpus, in a fixed order.
func Messages(opts Options) []Message {
	msgs := []Message{
		plain("invalid-utf8", "invalid UTF-8 in headers and body: stray continuation bytes, overlong encodings, encoded surrogates, 0xFF",
			"Subject: caf\xc3 \xff\xfe broken \xc0\xaf overlong \xed\xa0\x80 surrogate\n"+
				"From: \"J\xf6rg \x80\x81\" <joerg@example.org>\n"+
				"Content-Type: text/plain; charset=utf-8\n",
			"Bytes that are not UTF-8: \xff\xfe\xfd, \xc3\x28, \xe2\x82, \xf0\x28\x8c\xbc.\n"+
				"An overlong slash \xc0\xaf and a surrogate \xed\xb2\x80.\n"),
		plain("bogus-charset", "charsets nobody knows, RFC 2047 words in them and malformed encoded words",
			"Subject: =?x-klingon?Q?tlhIngan_=FF=FE?= =?utf-8?B?!!!not-base64!!!?= =?iso-8859-1?Q?unterminated\n"+
				"From: =?bogus-charset-\"><script>alert(1)</script>?B?SGk=?= <bogus@example.org>\n"+
				"Content-Type: text/plain; charset=\"x-unheard-of\\\"; <script>\"\n"+
				"Content-Transfer-Encoding: quoted-printable\n",
			"Quoted-printable in an unknown charset: =E9=FF=00 and a broken soft break =\n"+
				"and =ZZ an invalid escape.\n"),
		deepMultipart(),
		longHeaderLine(),
		plain("nul-bytes", "NUL bytes in a header and in the body",
			"Subject: nul \x00 in the subject\n"+
				"X-Nul: \x00\x00\x00\n"+
				"Content-Type: text/plain\n",
			"a NUL \x00 in the middle of a line\n\x00\n\x00\x00 starts a line\n"),
		plain("from-lines", "From lines everywhere: in the header, in the body, after empty lines, quoted at several levels",
			"Subject: From lines everywhere\n"+
				"X-Note: the next line is not a header field\n"+
				"From someone@example.org Mon Jan  1 00:00:00 2001\n",
			"From the start of the body\n"+
				"\n"+
				"From sender@example.org Tue Feb  2 12:34:56 2021\n"+
				"\n"+
				">From quoted once\n"+
				">>From sender@example.org Tue Feb  2 12:34:56 2021\n"+
				"\n"+
				"From \n"+
				"From\n"+
				"\n"+
				"From MAILER-DAEMON Thu Jan  1 00:00:00 1970\n"),
		{Name: "header-only", Why: "a header and nothing else: no empty line, no body",
			raw: []byte("Message-ID: <header-only@hostile.test>\nSubject: only a header\nFrom: a@example.org\n"), MessageID: "header-only@hostile.test"},
		{Name: "empty", Why: "an empty message: zero bytes", raw: []byte{}},
		{Name: "only-newline", Why: "a message that is a single line feed", raw: []byte("\n")},
		plain("base64-garbage", "a base64 part that is not base64: bad characters, bad padding, truncated quanta, a NUL",
			"Subject: base64 garbage\n"+
				"MIME-Version: 1.0\n"+
				"Content-Type: multipart/mixed; boundary=\"g\"\n",
			"--g\n"+
				"Content-Type: text/plain; charset=utf-8\n"+
				"Content-Transfer-Encoding: base64\n"+
				"\n"+
				"!!!!####$$$$ not base64 at all ====\n"+
				"SGVsbG8=SGVsbG8=\n"+
				"QUJD\x00REVG\n"+
				"QQ\n"+
				"--g\n"+
				"Content-Type: application/octet-stream; name=\"../../../etc/passwd\"\n"+
				"Content-Disposition: attachment; filename=\"../../../etc/passwd\"\n"+
				"Content-Transfer-Encoding: base64\n"+
				"\n"+
				"=====\n"+
				"--g--\n"),
		htmlScripts(),
		plain("script-in-text", "markup in the header fields and the plain-text body, which must be shown escaped",
			"Subject: <script>alert('hostile')</script> <img src=x onerror=alert(1)>\n"+
				"From: \"<b onmouseover=alert(1)>x</b>\" <\"><script>alert(1)</script>@example.org>\n"+
				"Content-Type: text/plain; charset=us-ascii\n",
			"<script>alert('hostile')</script>\n"+
				"<a href=\"javascript:alert(1)\">click</a>\n"+
				"<iframe src=\"https://evil.example/\"></iframe>\n"+
				"]]></x><!-- --><svg/onload=alert(1)>\n"),
		{Name: "odd-message-id", Why: "a Message-ID made of path and URL syntax, for the /m/ route",
			raw: []byte("Message-ID: <../../etc/passwd?x=1&y=%2F#frag@hostile.test>\n" +
				"Subject: odd Message-ID\n\nbody\n"),
			MessageID: "../../etc/passwd?x=1&y=%2F#frag@hostile.test"},
		plain("many-headers", "20,000 header fields",
			strings.Repeat("X-Many: a header field among many\n", 20000), "body\n"),
		plain("cr-only", "bare CR line ends, which are not line ends in an mbox",
			"Subject: bare CR\rX-Hidden: after a bare CR\r", "line one\rline two\r\n"),
	}
	if opts.Large {
		limit := opts.MaxMessageSize
		if limit <= 0 {
			limit = mbox.DefaultMaxMessageSize
		}
		msgs = append(msgs,
			big("big-50mb", "a 50 MB message, under the importer's size limit", BigMessage, Stored),
			big("over-limit", fmt.Sprintf("a message one byte over the importer's size limit (%d bytes)", limit), limit+1, TooLarge),
		)
	}
	return msgs
}

// plain returns a message of header, after a Message-ID, and body.
func plain(name, why, header, body string) Message {
	id := name + "@hostile.test"
	raw := "Message-ID: <" + id + ">\n" + header + "\n" + body
	return Message{Name: name, Why: why, raw: []byte(raw), size: int64(len(raw)), MessageID: id}
}

func deepMultipart() Message {
	var b strings.Builder
	id := "deep-multipart@hostile.test"
	b.WriteString("Message-ID: <" + id + ">\nSubject: 1,000 nested multiparts\nMIME-Version: 1.0\n")
	for i := range NestingDepth {
		fmt.Fprintf(&b, "Content-Type: multipart/mixed; boundary=\"b%d\"\n\n--b%d\n", i, i)
	}
	b.WriteString("Content-Type: text/plain\n\nthe innermost part\n")
	for i := NestingDepth - 1; i >= 0; i-- {
		fmt.Fprintf(&b, "--b%d--\n", i)
	}
	raw := b.String()
	return Message{Name: "deep-multipart", Why: "multipart nested 1,000 levels deep",
		raw: []byte(raw), size: int64(len(raw)), MessageID: id}
}

func longHeaderLine() Message {
	id := "long-header-line@hostile.test"
	head := "Message-ID: <" + id + ">\nX-Long: "
	tail := "\nSubject: after a 10 MB header line\n\nbody\n"
	var b bytes.Buffer
	b.Grow(len(head) + LongHeaderLine + len(tail))
	b.WriteString(head)
	fill(&b, LongHeaderLine-len("X-Long: "), "word ")
	b.WriteString(tail)
	return Message{Name: "long-header-line", Why: "a single 10 MB header line, never folded",
		raw: b.Bytes(), size: int64(b.Len()), MessageID: id}
}

func htmlScripts() Message {
	html := `<html><head>
<meta http-equiv="refresh" content="0; url=javascript:alert(1)">
<base href="https://evil.example/">
<script>alert('hostile')</script>
<script src="https://evil.example/x.js"></script>
<style>body { background: url("javascript:alert(1)"); behavior: expression(alert(1)) }</style>
</head>
<body onload="alert(1)">
<p onclick="alert(1)">click</p>
<a href="javascript:alert(1)">a javascript link</a>
<a href="  JaVaScRiPt:alert(1)">a disguised one</a>
<img src="https://tracker.example/pixel.gif" onerror="alert(1)">
<iframe src="https://evil.example/"></iframe>
<object data="https://evil.example/x.swf"></object>
<embed src="https://evil.example/x.swf">
<form action="https://evil.example/"><input name=p></form>
<svg><script>alert(1)</script><a xlink:href="javascript:alert(1)">svg</a></svg>
<math><mi xlink:href="javascript:alert(1)">m</mi></math>
<div style="background:url(javascript:alert(1))">styled</div>
<scr<script>ipt>alert(1)</script>
<!--<script>alert(1)</script>-->
<noscript><p title="</noscript><img src=x onerror=alert(1)>"></noscript>
</body></html>
`
	return plain("html-scripts", "an HTML part full of scripts, event handlers, javascript: URLs, frames and remote content",
		"Subject: HTML with scripts\nMIME-Version: 1.0\nContent-Type: multipart/alternative; boundary=\"alt\"\n",
		"--alt\nContent-Type: text/plain; charset=us-ascii\n\nThe plain part.\n"+
			"--alt\nContent-Type: text/html; charset=utf-8\n\n"+html+
			"--alt--\n")
}

// big returns a generated message of exactly size bytes, with no line
// starting "From " or ">".
func big(name, why string, size int64, want Outcome) Message {
	id := name + "@hostile.test"
	head := "Message-ID: <" + id + ">\nSubject: " + name + "\nContent-Type: text/plain\n\n"
	return Message{Name: name, Why: why, Want: want, size: size, MessageID: id, gen: func(w io.Writer) error {
		if _, err := io.WriteString(w, head); err != nil {
			return err
		}
		// The last line is cut short to fit the final line feed.
		left := size - int64(len(head)) - 1
		line := []byte(strings.Repeat("QUJDREVGR0hJSktMTU5PUFFSU1RVVldYWVphYmNk", 2)[:76] + "\n")
		buf := bytes.Repeat(line, 1<<16/len(line))
		for left > 0 {
			chunk := buf
			if int64(len(chunk)) > left {
				chunk = chunk[:left]
			}
			if _, err := w.Write(chunk); err != nil {
				return err
			}
			left -= int64(len(chunk))
		}
		_, err := io.WriteString(w, "\n")
		return err
	}}
}

func fill(b *bytes.Buffer, n int, pattern string) {
	for n >= len(pattern) {
		b.WriteString(pattern)
		n -= len(pattern)
	}
	b.WriteString(pattern[:n])
}

// WriteMbox writes msgs to w as an mboxrd file, streaming generated ones.
func WriteMbox(w io.Writer, msgs []Message) error {
	mw := mbox.NewWriter(w)
	for i, m := range msgs {
		sep := fmt.Sprintf("From hostile-%d@hostile.test Mon Jan  1 00:00:%02d 2024", i, i%60)
		if m.gen == nil {
			if err := mw.WriteMessage(sep, m.raw); err != nil {
				return fmt.Errorf("cannot write %s: %w", m.Name, err)
			}
			continue
		}
		// A generated message has no line to quote and ends in a line
		// feed: this is exactly what mbox.Writer would write.
		if err := mw.Flush(); err != nil {
			return err
		}
		if _, err := io.WriteString(w, sep+"\n"); err != nil {
			return err
		}
		if _, err := m.WriteTo(w); err != nil {
			return fmt.Errorf("cannot write %s: %w", m.Name, err)
		}
		if _, err := io.WriteString(w, "\n"); err != nil {
			return err
		}
	}
	return mw.Flush()
}

// ContentLengthMbox returns an mbox whose messages all carry a
// Content-Length, the middle one a false 2 GiB, and the messages it holds.
// A reader must neither trust the 2 GiB nor lose a neighbour: From_ lines
// give the true lengths.
func ContentLengthMbox() ([]byte, []Message) {
	bodies := []string{"the first message\n", "the one that claims 2 GiB\n", "the last message\n"}
	var b bytes.Buffer
	var msgs []Message
	for i, body := range bodies {
		name := fmt.Sprintf("content-length-%d", i+1)
		id := name + "@hostile.test"
		length := fmt.Sprint(len(body))
		if i == 1 {
			length = "2147483648"
		}
		raw := "Message-ID: <" + id + ">\nSubject: " + name + "\nContent-Length: " + length + "\n\n" + body
		fmt.Fprintf(&b, "From cl%d@hostile.test Mon Jan  1 00:00:0%d 2024\n%s\n", i, i, raw)
		why := "a neighbour of the message with a false 2 GiB Content-Length"
		if i == 1 {
			why = "Content-Length: 2147483648 on a small message"
		}
		msgs = append(msgs, Message{Name: name, Why: why, raw: []byte(raw), size: int64(len(raw)), MessageID: id})
	}
	return b.Bytes(), msgs
}

type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}
