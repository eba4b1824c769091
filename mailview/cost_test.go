package mailview

import (
	"bytes"
	"io"
	"runtime"
	"strings"
	"testing"

	"github.com/emersion/go-message"

	"github.com/chibrary/chibrary/internal/testkit/hostile"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The work of parsing a hostile message is bounded by its size: a header
// of 100,000 folded References lines (beyond MaxHeaderBytes, so read
// leniently) allocates a few times its size, not a copy of the field per
// line.
func TestCostBounded(t *testing.T) {
	raw := hostile.ManyReferences(hostile.ManyReferencesCount).Raw()
	got := allocated(func() { Parse(raw, Options{}) })
	if limit := uint64(16 * len(raw)); got > limit {
		t.Errorf("Parse(many-references, %d bytes) allocated %d bytes, want at most %d", len(raw), got, limit)
	}
}

// A text part whose encoding expands to almost nothing (quoted-printable
// made of soft line breaks) is read only as far as its encoding may
// plausibly go: the text is cut there, and said to be.
func TestTextDecodingBounded(t *testing.T) {
	raw := hostile.SoftBreaks(hostile.SoftBreaksSize).Raw()
	m := Parse(raw, Options{})
	if !m.Truncated || len(m.Parts) != 1 || !strings.HasPrefix(m.Parts[0].Text, "visible text") || strings.Contains(m.Parts[0].Text, "the end") {
		t.Errorf("Parse(soft-breaks) = truncated %v, parts %+v; want the visible text, cut before the end", m.Truncated, m.Parts)
	}
	// Honest encodings are read whole: quoted-printable of every byte
	// escaped (three times the text), base64, and many short parts.
	var qp strings.Builder
	for range 50_000 {
		qp.WriteString("=D0=9F=D1=80=D0=B8=D0=B2=D0=B5=D1=82=\n")
	}
	qp.WriteString("end\n")
	msg := "Content-Type: text/plain; charset=utf-8\nContent-Transfer-Encoding: quoted-printable\n\n" + qp.String()
	m = Parse([]byte(msg), Options{})
	if m.Truncated || len(m.Parts) != 1 || strings.Count(m.Parts[0].Text, "Привет") != 50_000 || !strings.HasSuffix(m.Parts[0].Text, "end\n") {
		t.Errorf("Parse(Cyrillic in quoted-printable) = truncated %v; want the whole text", m.Truncated)
	}
}

// An attachment's size is counted without decoding it where its
// encoding allows (base64 that is well formed), and equals the decoded
// size; WriteAttachment writes the decoded bytes, as AttachmentData
// returns them.
func TestAttachmentSizeCounted(t *testing.T) {
	const size = 3<<20 + 5
	raw := hostile.BigAttachment(size).Raw()
	m := Parse(raw, Options{})
	if len(m.Attachments) != 1 || m.Attachments[0].Size != size {
		t.Fatalf("Parse(big-attachment) attachments = %+v, want one of %d bytes", m.Attachments, size)
	}
	var b countingWriter
	a, err := WriteAttachment(raw, 0, Options{}, &b)
	if err != nil || a.Size != size || b.n != size || !b.pattern {
		t.Errorf("WriteAttachment = %+v, %v; wrote %d bytes (as generated: %v); want %d", a, err, b.n, b.pattern, size)
	}
}

// countingWriter counts what is written and checks it against
// hostile.AttachmentByte.
type countingWriter struct {
	n       int64
	pattern bool
}

func (c *countingWriter) Write(b []byte) (int, error) {
	if c.n == 0 {
		c.pattern = true
	}
	for i, x := range b {
		if x != hostile.AttachmentByte(c.n+int64(i)) {
			c.pattern = false
		}
	}
	c.n += int64(len(b))
	return len(b), nil
}

// base64Size counts what go-message's decoder gives, or says -1; it
// never gives a size the decoder would not.
func FuzzBase64Size(f *testing.F) {
	for _, s := range []string{"", "QUJD\n", "QUI=\n", "QQ==", "Q Q = =", "QUJD\r\nREVG\r\n", "QQ=Q", "QUJ", "!!!!", "QQ==QQ==", "\tQUJD REVG\n"} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		got, err := base64Size(bytes.NewReader(body))
		if err != nil {
			t.Fatalf("base64Size(%q) = %v", body, err)
		}
		if got == -1 {
			return
		}
		e, err := message.New(message.Header{}, bytes.NewReader(body))
		if err != nil {
			t.Fatal(err)
		}
		e.Header.Set("Content-Transfer-Encoding", "base64")
		e, _ = message.New(e.Header, bytes.NewReader(body))
		data, err := io.ReadAll(e.Body)
		if err != nil || int64(len(data)) != got {
			t.Errorf("base64Size(%q) = %d, but it decodes to %d bytes, %v", body, got, len(data), err)
		}
	})
}
