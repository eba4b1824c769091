package mailview

import (
	"bytes"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/chibrary/chibrary/internal/testkit/htmlcheck"
)

func fixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "web", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func field(m *Message, name string) string {
	for _, f := range m.Fields {
		if f.Name == name {
			return f.Value
		}
	}
	return ""
}

func allText(m *Message) string {
	var b strings.Builder
	for _, p := range m.Parts {
		b.WriteString(p.Text)
		b.WriteString(string(p.HTML))
	}
	return b.String()
}

func TestParseFixtures(t *testing.T) {
	tests := []struct {
		file        string
		fields      map[string]string
		messageID   string
		inReplyTo   []string
		bodyHas     []string
		bodyHasNot  []string
		attachments []Attachment
		html        bool
		problems    bool
	}{
		{
			file:        "signed.eml",
			fields:      map[string]string{"From": "Signer <signer@example.com>", "Subject": "A signed message"},
			messageID:   "signed-1@example.com",
			bodyHas:     []string{"This text is signed and must be shown."},
			bodyHasNot:  []string{"BEGIN PGP SIGNATURE"},
			attachments: []Attachment{{Name: "signature.asc", Type: "application/pgp-signature", Size: 88}},
		},
		{
			file: "latin1.eml",
			fields: map[string]string{
				"From":    "Jörg Müller <joerg@example.de>",
				"To":      "Привет <privet@example.ru>",
				"Subject": "Žluťoučký kůň and “quotes”",
			},
			messageID: "latin1-1@example.de",
			bodyHas:   []string{"Grüße aus Köln, ça va très bien."},
		},
		{
			file:        "alternative.eml",
			fields:      map[string]string{"Subject": "Plain and HTML"},
			messageID:   "alt-1@example.com",
			inReplyTo:   []string{"signed-1@example.com"},
			bodyHas:     []string{"The plain alternative, café."},
			bodyHasNot:  []string{"HTML</b> alternative"},
			attachments: []Attachment{{Name: "pass txt.exe", Type: "application/octet-stream", Size: 10}},
		},
		{
			file:       "hostile.eml",
			messageID:  "hostile-1@example.com",
			html:       true,
			bodyHas:    []string{"Hostile body text stays visible.", `href="https://example.org/ok"`, "click me"},
			bodyHasNot: []string{"<script", "onerror", "onload", "javascript:", "<img", "<iframe", "<form", "<style", "tracker.example", "style=", "<scr", "<svg"},
		},
		{
			file:      "broken.eml",
			fields:    map[string]string{"From": "Broken <broken@example.com>", "Subject": "A broken header"},
			messageID: "broken-1@example.com",
			bodyHas:   []string{"Body of the broken message <b>not bold</b>."},
			problems:  true,
		},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			m := Parse(fixture(t, tt.file), Options{})
			for name, want := range tt.fields {
				if got := field(m, name); got != want {
					t.Errorf("%s = %q, want %q", name, got, want)
				}
			}
			if m.MessageID != tt.messageID {
				t.Errorf("MessageID = %q, want %q", m.MessageID, tt.messageID)
			}
			if tt.inReplyTo != nil && strings.Join(m.InReplyTo, " ") != strings.Join(tt.inReplyTo, " ") {
				t.Errorf("InReplyTo = %q, want %q", m.InReplyTo, tt.inReplyTo)
			}
			body := allText(m)
			for _, s := range tt.bodyHas {
				if !strings.Contains(body, s) {
					t.Errorf("body %q does not contain %q", body, s)
				}
			}
			for _, s := range tt.bodyHasNot {
				if strings.Contains(strings.ToLower(body), strings.ToLower(s)) {
					t.Errorf("body %q contains %q", body, s)
				}
			}
			if tt.attachments != nil || len(m.Attachments) > 0 {
				if len(m.Attachments) != len(tt.attachments) {
					t.Fatalf("Attachments = %+v, want %+v", m.Attachments, tt.attachments)
				}
				for i := range tt.attachments {
					got := m.Attachments[i]
					if got.Name != tt.attachments[i].Name || got.Type != tt.attachments[i].Type || got.Size != tt.attachments[i].Size {
						t.Errorf("Attachments[%d] = %+v, want %+v", i, m.Attachments[i], tt.attachments[i])
					}
				}
			}
			gotHTML := len(m.Parts) > 0 && m.Parts[0].HTML != ""
			if gotHTML != tt.html {
				t.Errorf("first part is HTML: %v, want %v", gotHTML, tt.html)
			}
			if (len(m.Problems) > 0) != tt.problems {
				t.Errorf("Problems = %q, want some: %v", m.Problems, tt.problems)
			}
		})
	}
}

func TestHostileHeadersAreText(t *testing.T) {
	m := Parse(fixture(t, "hostile.eml"), Options{})
	// Encoded words decode to markup, which stays text for the template to
	// escape; CR and LF never survive in a value.
	if got, want := field(m, "To"), "<script>document.title='pwned-to'</script> <victim@example.org>"; got != want {
		t.Errorf("To = %q, want %q", got, want)
	}
	if got, want := field(m, "Cc"), "Mallory  Set-Cookie: session=stolen <m@example.net>"; got != want {
		t.Errorf("Cc = %q, want %q", got, want)
	}
	for _, f := range m.Header {
		if strings.ContainsAny(f.Name+f.Value, "\r\n\x00") {
			t.Errorf("header field %q: %q holds a control character", f.Name, f.Value)
		}
	}
}

func TestNoMIME(t *testing.T) {
	tests := []struct {
		name    string
		raw     string
		subject string
		body    string
	}{
		{"body only", "just text, no header at all\n", "", ""},
		{"empty", "", "", ""},
		{"no body", "Subject: hi\n", "hi", ""},
		{"CRLF", "Subject: crlf\r\n\r\nline one\r\nline two\r\n", "crlf", "line one\nline two\n"},
		{"8-bit header", "Subject: caf\xe9\n\nbody\n", "café", "body\n"},
		{"bad content type", "Subject: x\nContent-Type: text/plain; charset\n\nstill shown\n", "x", "still shown\n"},
		{"unknown charset", "Subject: x\nContent-Type: text/plain; charset=x-unknown-42\n\nstill shown\n", "x", "still shown\n"},
		{"unknown encoding", "Subject: x\nContent-Transfer-Encoding: x-rot13\n\nstill shown\n", "x", "still shown\n"},
		{"no boundary", "Subject: x\nContent-Type: multipart/mixed\n\n--b\n\nhidden\n--b--\n", "x", ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := Parse([]byte(tt.raw), Options{})
			if m.Subject != tt.subject {
				t.Errorf("Subject = %q, want %q", m.Subject, tt.subject)
			}
			if got := allText(m); got != tt.body {
				t.Errorf("body = %q, want %q", got, tt.body)
			}
		})
	}
}

// nested returns a message with depth levels of multipart/mixed around a
// text part.
func nested(depth int) []byte {
	var b bytes.Buffer
	b.WriteString("Subject: deep\nMIME-Version: 1.0\n")
	for i := 0; i < depth; i++ {
		b.WriteString("Content-Type: multipart/mixed; boundary=\"b" + itoa(i) + "\"\n\n--b" + itoa(i) + "\n")
	}
	b.WriteString("Content-Type: text/plain\n\nthe innermost text\n")
	for i := depth - 1; i >= 0; i-- {
		b.WriteString("--b" + itoa(i) + "--\n")
	}
	return b.Bytes()
}

func itoa(i int) string {
	return strings.TrimLeft(string(rune('0'+i/100))+string(rune('0'+i/10%10))+string(rune('0'+i%10)), "0") + "x"
}

func TestLimits(t *testing.T) {
	t.Run("depth within limit", func(t *testing.T) {
		m := Parse(nested(5), Options{MaxDepth: 5})
		if got := allText(m); got != "the innermost text" || m.Truncated {
			t.Errorf("body = %q, truncated %v; want the text, not truncated", got, m.Truncated)
		}
	})
	t.Run("depth beyond limit", func(t *testing.T) {
		m := Parse(nested(6), Options{MaxDepth: 5})
		if got := allText(m); got != "" || !m.Truncated {
			t.Errorf("body = %q, truncated %v; want nothing, truncated", got, m.Truncated)
		}
	})
	t.Run("default depth, 10000 levels", func(t *testing.T) {
		m := Parse(nested(10000), Options{})
		if !m.Truncated || m.Subject != "deep" {
			t.Errorf("Subject %q truncated %v; want deep, truncated", m.Subject, m.Truncated)
		}
	})
	t.Run("text bytes", func(t *testing.T) {
		raw := "Subject: long\n\n" + strings.Repeat("0123456789", 100)
		m := Parse([]byte(raw), Options{MaxTextBytes: 25})
		if got := allText(m); got != "0123456789012345678901234" || !m.Truncated {
			t.Errorf("body = %q, truncated %v; want 25 bytes, truncated", got, m.Truncated)
		}
	})
	t.Run("parts", func(t *testing.T) {
		var b strings.Builder
		b.WriteString("Subject: many\nContent-Type: multipart/mixed; boundary=b\n\n")
		for i := 0; i < 50; i++ {
			b.WriteString("--b\nContent-Type: text/plain\n\npart\n")
		}
		b.WriteString("--b--\n")
		m := Parse([]byte(b.String()), Options{MaxParts: 10})
		if len(m.Parts) != 9 || !m.Truncated {
			t.Errorf("%d parts shown, truncated %v; want 9 (the root counts), truncated", len(m.Parts), m.Truncated)
		}
	})
	t.Run("header bytes", func(t *testing.T) {
		raw := "Subject: big\n" + strings.Repeat("X-Filler: 0123456789\n", 1000) + "\nbody\n"
		m := Parse([]byte(raw), Options{MaxHeaderBytes: 1000})
		if len(m.Problems) == 0 || m.Subject != "big" {
			t.Errorf("Subject %q problems %q; want big and a problem", m.Subject, m.Problems)
		}
	})
}

func TestStringsAreClean(t *testing.T) {
	for _, name := range []string{"hostile.eml", "hostile-plain.eml", "alternative.eml", "latin1.eml", "broken.eml"} {
		m := Parse(fixture(t, name), Options{})
		checkClean(t, name, m)
	}
}

func checkClean(t testing.TB, name string, m *Message) {
	t.Helper()
	bad := func(s string, body bool) bool {
		if !utf8.ValidString(s) {
			return true
		}
		for _, r := range s {
			if body && (r == '\n' || r == '\t') {
				continue
			}
			if r < 0x20 || r == 0x7f || isBidi(r) {
				return true
			}
		}
		return false
	}
	for _, f := range append(append([]Field{}, m.Header...), m.Fields...) {
		if bad(f.Name, false) || bad(f.Value, false) {
			t.Errorf("%s: field %q: %q is not clean", name, f.Name, f.Value)
		}
	}
	for _, s := range append(append([]string{m.Subject, m.MessageID}, m.InReplyTo...), m.References...) {
		if bad(s, false) {
			t.Errorf("%s: %q is not clean", name, s)
		}
	}
	for _, a := range m.Attachments {
		if bad(a.Name, false) || strings.ContainsAny(a.Name, `/\`) {
			t.Errorf("%s: attachment name %q is not clean", name, a.Name)
		}
	}
	for _, p := range m.Parts {
		if p.Message != nil {
			if p.Text != "" || p.HTML != "" {
				t.Errorf("%s: a part has an embedded message and text", name)
			}
			checkClean(t, name+" (embedded)", p.Message)
			if len(p.Message.Attachments) > 0 {
				t.Errorf("%s: embedded message keeps its own attachments %+v, want them listed with the outer message's", name, p.Message.Attachments)
			}
		}
		if bad(p.Text, true) || bad(string(p.HTML), true) {
			t.Errorf("%s: part %q is not clean", name, p.Text+string(p.HTML))
		}
		if err := htmlcheck.Check(string(p.HTML), htmlcheck.Options{}); err != nil {
			t.Errorf("%s: sanitized HTML %q: %v", name, p.HTML, err)
		}
	}
}

func FuzzParse(f *testing.F) {
	entries, err := os.ReadDir(filepath.Join("..", "fixtures", "web"))
	if err != nil {
		f.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".eml") {
			f.Add(fixture(f, e.Name()))
		}
	}
	f.Add(nested(30))
	f.Fuzz(func(t *testing.T, raw []byte) {
		opts := Options{MaxTextBytes: 1 << 16}
		m := Parse(raw, opts)
		checkClean(t, "fuzz", m)
		// Every listed attachment can be taken out, with the size listed
		// (if counted).
		for i, a := range m.Attachments {
			got, data, err := AttachmentData(raw, i, opts)
			if err != nil {
				t.Fatalf("AttachmentData(%d) = %v, want attachment %+v", i, err, a)
			}
			if a.Size == -1 { // not counted (larger than decodedSizeLimit)
				a.Size = got.Size
			}
			if got != a || int64(len(data)) != a.Size {
				t.Fatalf("AttachmentData(%d) = %+v with %d bytes, want %+v", i, got, len(data), a)
			}
		}
		if _, _, err := AttachmentData(raw, len(m.Attachments), opts); !errors.Is(err, ErrNoAttachment) {
			t.Fatalf("AttachmentData(%d) of %d = %v, want ErrNoAttachment", len(m.Attachments), len(m.Attachments), err)
		}
		checkTextOnly(t, "fuzz", raw, opts)
		// Read EnoughStep at a time, never enough: as read at once.
		never := opts
		never.Enough = func([]byte, int) bool { return false }
		if got := Parse(raw, never); !reflect.DeepEqual(got, m) {
			t.Fatalf("Parse with Enough never enough = %+v, want %+v", got, m)
		}
		always := opts
		always.Enough = func([]byte, int) bool { return true }
		checkClean(t, "fuzz, always enough", Parse(raw, always))
	})
}

// checkTextOnly: Parse with TextOnly finds the same parts and attachments
// as without, and no header fields.
func checkTextOnly(t *testing.T, name string, raw []byte, opts Options) {
	t.Helper()
	full := withoutHeader(Parse(raw, opts))
	opts.TextOnly = true
	text := Parse(raw, opts)
	if !reflect.DeepEqual(text, full) {
		t.Errorf("%s: Parse with TextOnly = %+v, want %+v", name, text, full)
	}
}

// withoutHeader returns m without what TextOnly leaves out.
func withoutHeader(m *Message) *Message {
	out := *m
	out.Fields, out.Header, out.Subject, out.MessageID, out.InReplyTo, out.References = nil, nil, "", "", nil, nil
	out.Parts = nil
	for _, p := range m.Parts {
		if p.Message != nil {
			p.Message = withoutHeader(p.Message)
		}
		out.Parts = append(out.Parts, p)
	}
	return &out
}

func TestTextOnly(t *testing.T) {
	entries, err := os.ReadDir(filepath.Join("..", "fixtures", "web"))
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		if strings.HasSuffix(e.Name(), ".eml") {
			raw := fixture(t, e.Name())
			checkTextOnly(t, e.Name(), raw, Options{})
			checkTextOnly(t, e.Name()+" skipping attachments", raw, Options{SkipAttachments: true, MaxTextBytes: 1 << 10})
		}
	}
}

func TestHTMLLinks(t *testing.T) {
	raw := "Content-Type: text/html\n\n" +
		`<a href="https://example.org/x">ok</a> <a href="mailto:a@example.org">mail</a> ` +
		`<a href="https:0">opaque</a> <a href="http:/path">hostless</a> <a href="/rel">rel</a> <a href="//evil.example/">schemeless</a> <a href="javascript:alert(1)">js</a>`
	m := Parse([]byte(raw), Options{})
	if len(m.Parts) == 0 {
		t.Fatal("no part parsed")
	}
	html := string(m.Parts[0].HTML)
	for _, want := range []string{`href="https://example.org/x"`, `href="mailto:a@example.org"`} {
		if !strings.Contains(html, want) {
			t.Errorf("sanitized HTML lost %s: %s", want, html)
		}
	}
	for _, bad := range []string{"https:0", "http:/path", `"/rel"`, "//evil", "javascript"} {
		if strings.Contains(html, bad) {
			t.Errorf("sanitized HTML keeps %s: %s", bad, html)
		}
	}
}

// TestEmbeddedMessage: a list that wraps a message to pass DMARC (Mailman's
// "wrap message") sends the original as a message/rfc822 part. The view
// shows that message with its own header and text, not only the footer.
func TestEmbeddedMessage(t *testing.T) {
	m := Parse(fixture(t, "dmarc.eml"), Options{})
	if len(m.Parts) != 2 {
		t.Fatalf("Parts = %+v, want the embedded message and the footer", m.Parts)
	}
	in := m.Parts[0].Message
	if in == nil {
		t.Fatalf("Parts[0] = %+v, want an embedded message", m.Parts[0])
	}
	if got := field(in, "From"); got != "Alice Example <alice@example.com>" {
		t.Errorf("embedded From = %q, want Alice Example <alice@example.com>", got)
	}
	if in.Subject != "Sprocket sizes" || in.MessageID != "original-1@example.com" {
		t.Errorf("embedded Subject, MessageID = %q, %q, want Sprocket sizes, original-1@example.com", in.Subject, in.MessageID)
	}
	if got := allText(in); !strings.Contains(got, "sprockets come in three sizes") {
		t.Errorf("embedded text = %q, want the wrapped message's text", got)
	}
	if !strings.Contains(m.Parts[1].Text, "Widgets mailing list") {
		t.Errorf("Parts[1] = %+v, want the list footer", m.Parts[1])
	}
	want := []struct {
		name, typ string
		size      int64
	}{{"sizes.csv", "text/csv", 28}, {"", "message/rfc822", 0}}
	if len(m.Attachments) != len(want) {
		t.Fatalf("Attachments = %+v, want %+v", m.Attachments, want)
	}
	for i, w := range want {
		a := m.Attachments[i]
		if a.Name != w.name || a.Type != w.typ || w.size > 0 && a.Size != w.size {
			t.Errorf("Attachments[%d] = %+v, want %+v", i, a, w)
		}
	}
	_, data, err := AttachmentData(fixture(t, "dmarc.eml"), 1, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(data, []byte("From: Alice Example <alice@example.com>\n")) || !bytes.Contains(data, []byte("large,36\n")) {
		t.Errorf("the embedded message as a file = %q, want it whole", data)
	}
}

func TestAttachmentData(t *testing.T) {
	raw := fixture(t, "attachments.eml")
	tests := []struct {
		n    int
		name string
		typ  string
		data string
	}{
		{0, "evil.html", "text/html", "<html><body><script>document.title='pwned-attachment'</script>HTML attachment</body></html>"}, // the line end before a boundary is the boundary's (RFC 2046 section 5.1.1)
		{1, "pic.svg", "image/svg+xml", `<svg xmlns="http://www.w3.org/2000/svg"><script>alert(1)</script></svg>`},
		{2, "fix.patch", "text/x-diff", "--- a/x.c\n+++ b/x.c\n@@ -1 +1 @@\n-bug\n+fix"},
	}
	for _, tt := range tests {
		a, data, err := AttachmentData(raw, tt.n, Options{})
		if err != nil {
			t.Errorf("AttachmentData(%d) = %v", tt.n, err)
			continue
		}
		if a.Name != tt.name || a.Type != tt.typ || string(data) != tt.data || a.Size != int64(len(data)) {
			t.Errorf("AttachmentData(%d) = %+v %q, want %s %s %q", tt.n, a, data, tt.name, tt.typ, tt.data)
		}
	}
	// The attachment of the chosen alternative of alternative.eml.
	if a, data, err := AttachmentData(fixture(t, "alternative.eml"), 0, Options{}); err != nil || a.Name != "pass txt.exe" || !bytes.Equal(data, []byte{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}) {
		t.Errorf("AttachmentData(alternative.eml, 0) = %+v %v %v, want pass txt.exe and bytes 0..9", a, data, err)
	}
	for _, n := range []int{-1, 3, 1000} {
		if _, _, err := AttachmentData(raw, n, Options{}); !errors.Is(err, ErrNoAttachment) {
			t.Errorf("AttachmentData(%d) = %v, want ErrNoAttachment", n, err)
		}
	}
	if _, _, err := AttachmentData(raw, 0, Options{MaxAttachmentBytes: 10}); !errors.Is(err, ErrAttachmentTooLarge) {
		t.Errorf("AttachmentData with MaxAttachmentBytes 10 = %v, want ErrAttachmentTooLarge", err)
	}
}

// TestSkipAttachments: the text and the list of attachments are the same
// without reading attachments' bodies; only their sizes are unknown.
func TestSkipAttachments(t *testing.T) {
	for _, name := range []string{"attachments.eml", "dmarc.eml"} {
		raw, err := os.ReadFile(filepath.Join("..", "fixtures", "web", name))
		if err != nil {
			t.Fatal(err)
		}
		full := Parse(raw, Options{})
		skim := Parse(raw, Options{SkipAttachments: true})
		if len(full.Attachments) == 0 {
			t.Fatalf("%s: no attachments to skip", name)
		}
		if len(skim.Attachments) != len(full.Attachments) {
			t.Fatalf("%s: %d attachments skimmed, %d read", name, len(skim.Attachments), len(full.Attachments))
		}
		for i, a := range skim.Attachments {
			f := full.Attachments[i]
			wantSize := int64(-1)
			if f.Type == "message/rfc822" {
				wantSize = f.Size // enclosed messages are read for their text
			}
			if a.Name != f.Name || a.Type != f.Type || a.Size != wantSize {
				t.Errorf("%s: attachment %d = %q %q %d, want %q %q %d", name, i, a.Name, a.Type, a.Size, f.Name, f.Type, wantSize)
			}
		}
		if !reflect.DeepEqual(skim.Parts, full.Parts) {
			t.Errorf("%s: the text differs when attachments are skipped", name)
		}
		// AttachmentData reads the one it is asked for, and says its size.
		for i, f := range full.Attachments {
			a, data, err := AttachmentData(raw, i, Options{})
			if err != nil || int64(len(data)) != f.Size || a.Size != f.Size {
				t.Errorf("%s: AttachmentData(%d) = %d bytes (size %d), %v; want %d", name, i, len(data), a.Size, err, f.Size)
			}
		}
	}
}

func TestEnough(t *testing.T) {
	line := "a line of text, repeated to make a long part.\n" // 47 bytes
	long := strings.Repeat(line, 400)                         // 18,800 bytes
	raw := "From: a@example.org\r\nSubject: long\r\nMIME-Version: 1.0\r\n" +
		"Content-Type: multipart/mixed; boundary=b\r\n\r\n" +
		"--b\r\nContent-Type: text/plain\r\n\r\n" + long +
		"--b\r\nContent-Type: text/plain\r\n\r\nthe second part\r\n" +
		"--b\r\nContent-Type: text/html\r\n\r\n<p>an HTML part</p>\r\n--b--\r\n"

	var asked []int // len(part) at each question
	m := Parse([]byte(raw), Options{Enough: func(part []byte, added int) bool {
		if len(part)-added != max(0, len(part)-EnoughStep) && added != len(part) {
			t.Errorf("asked with %d bytes of which %d new: not EnoughStep at a time", len(part), added)
		}
		asked = append(asked, len(part))
		return len(part) >= 6000
	}})
	if want := []int{EnoughStep, 2 * EnoughStep}; !slices.Equal(asked, want) {
		t.Errorf("Enough asked with %v bytes; want %v", asked, want)
	}
	if !m.Truncated || len(m.Parts) != 1 || len(m.Parts[0].Text) != 2*EnoughStep || m.Parts[0].Text != long[:2*EnoughStep] {
		t.Fatalf("Parse with Enough: Truncated %v, %d parts (first %d bytes); want the first part's first %d bytes only, truncated",
			m.Truncated, len(m.Parts), len(m.Parts[0].Text), 2*EnoughStep)
	}

	// Never enough: everything is read, as without Enough; an HTML part is
	// not asked about.
	asked = nil
	m = Parse([]byte(raw), Options{Enough: func(part []byte, added int) bool {
		asked = append(asked, len(part))
		return false
	}})
	if whole := Parse([]byte(raw), Options{}); !reflect.DeepEqual(m, whole) {
		t.Errorf("Parse with Enough never enough = %+v\nwant as without it %+v", m, whole)
	}
	if want := []int{EnoughStep, 2 * EnoughStep, 3 * EnoughStep, 4 * EnoughStep}; !slices.Equal(asked, want) {
		t.Errorf("Enough asked with %v bytes; want %v (the first part only, not its end)", asked, want)
	}
}

// TestDisplayedFields: the fields a page shows are the first of each name
// (as net/textproto's Get), decoded, in the page's order, whatever the
// spelling of their names and wherever they stand in the header.
func TestDisplayedFields(t *testing.T) {
	raw := "subject: =?UTF-8?Q?caf=C3=A9?= first\r\n" +
		"X-Other: x\r\n" +
		"FROM: =?ISO-8859-1?Q?J=F6rg?= <j@example.org>\r\n" +
		"Subject: second\r\n" +
		"To: a@example.org\r\n" +
		"Date: Mon, 2 Jan 2006 15:04:05 +0000\r\n" +
		"To: b@example.org\r\n" +
		"\r\nbody\r\n"
	m := Parse([]byte(raw), Options{})
	want := []Field{
		{"From", "Jörg <j@example.org>"},
		{"To", "a@example.org"},
		{"Date", "Mon, 2 Jan 2006 15:04:05 +0000"},
		{"Subject", "café first"},
	}
	if !slices.Equal(m.Fields, want) {
		t.Errorf("Fields = %q, want %q", m.Fields, want)
	}
	if m.Subject != "café first" {
		t.Errorf("Subject = %q", m.Subject)
	}
	if len(m.Header) != 7 {
		t.Errorf("Header has %d fields, want all 7: %q", len(m.Header), m.Header)
	}
}
