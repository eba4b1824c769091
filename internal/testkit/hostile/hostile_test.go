package hostile

import (
	"bytes"
	"errors"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
)

func TestMessagesAreDeterministic(t *testing.T) {
	a, b := Messages(Options{}), Messages(Options{})
	if len(a) != len(b) {
		t.Fatalf("two calls gave %d and %d messages", len(a), len(b))
	}
	for i := range a {
		if a[i].Name != b[i].Name || !bytes.Equal(a[i].Raw(), b[i].Raw()) {
			t.Errorf("message %d (%s) differs between two calls", i, a[i].Name)
		}
	}
}

func TestMessagesProperties(t *testing.T) {
	msgs := Messages(Options{})
	seen := map[string]bool{}
	for _, m := range msgs {
		t.Run(m.Name, func(t *testing.T) {
			if seen[m.Name] {
				t.Errorf("name %q used twice", m.Name)
			}
			seen[m.Name] = true
			raw := m.Raw()
			if got := int64(len(raw)); got != m.Size() {
				t.Errorf("Size() = %d, want len(Raw()) = %d", m.Size(), got)
			}
			if m.Name != "empty" && !bytes.HasSuffix(raw, []byte("\n")) {
				t.Errorf("Raw() does not end in a line feed")
			}
			if m.Why == "" {
				t.Errorf("Why is empty")
			}
			if got, want := m.Digest(), store.DigestOf(raw); got != want {
				t.Errorf("Digest() = %v, want %v", got, want)
			}
			if m.MessageID != "" && !bytes.Contains(raw, []byte("Message-ID: <"+m.MessageID+">\n")) {
				t.Errorf("MessageID %q is not in the header", m.MessageID)
			}
			var b bytes.Buffer
			if n, err := m.WriteTo(&b); err != nil || n != m.Size() || !bytes.Equal(b.Bytes(), raw) {
				t.Errorf("WriteTo = %d, %v (equal to Raw: %v), want %d, nil", n, err, bytes.Equal(b.Bytes(), raw), m.Size())
			}
		})
	}
}

// TestShapes checks that the messages are as hostile as their names say.
func TestShapes(t *testing.T) {
	byName := map[string][]byte{}
	for _, m := range Messages(Options{}) {
		byName[m.Name] = m.Raw()
	}
	tests := []struct {
		name  string
		check func(raw []byte) bool
	}{
		{"empty", func(raw []byte) bool { return len(raw) == 0 }},
		{"only-newline", func(raw []byte) bool { return string(raw) == "\n" }},
		{"header-only", func(raw []byte) bool { return !bytes.Contains(raw, []byte("\n\n")) }},
		{"nul-bytes", func(raw []byte) bool {
			head, body, _ := bytes.Cut(raw, []byte("\n\n"))
			return bytes.IndexByte(head, 0) >= 0 && bytes.IndexByte(body, 0) >= 0
		}},
		{"invalid-utf8", func(raw []byte) bool { return !isUTF8(raw) }},
		{"deep-multipart", func(raw []byte) bool {
			return bytes.Count(raw, []byte("Content-Type: multipart/mixed")) == NestingDepth
		}},
		{"long-header-line", func(raw []byte) bool {
			longest := 0
			for line := range bytes.Lines(raw) {
				longest = max(longest, len(bytes.TrimSuffix(line, []byte("\n"))))
			}
			return longest == LongHeaderLine
		}},
		{"from-lines", func(raw []byte) bool {
			head, body, _ := bytes.Cut(raw, []byte("\n\n"))
			return bytes.Contains(head, []byte("\nFrom ")) && bytes.Contains(body, []byte("\n\nFrom ")) && bytes.HasPrefix(body, []byte("From "))
		}},
		{"html-scripts", func(raw []byte) bool {
			return bytes.Contains(raw, []byte("text/html")) && bytes.Contains(raw, []byte("<script>"))
		}},
		{"many-headers", func(raw []byte) bool { return bytes.Count(raw, []byte("\nX-Many: ")) == 20000 }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			raw, ok := byName[tt.name]
			if !ok {
				t.Fatalf("no message named %q", tt.name)
			}
			if !tt.check(raw) {
				t.Errorf("%s is not what its name says (%d bytes)", tt.name, len(raw))
			}
		})
	}
}

func isUTF8(b []byte) bool { return strings.ToValidUTF8(string(b), "\uFFFD") == string(b) }

// readMbox reads every message of an mbox, keeping message errors.
func readMbox(t *testing.T, r io.Reader, opts mbox.Options) (raws [][]byte, errs []error) {
	t.Helper()
	mr := mbox.NewReader(r, opts)
	for {
		m, err := mr.Next()
		if errors.Is(err, io.EOF) {
			return raws, errs
		}
		var me *mbox.MessageError
		if errors.As(err, &me) {
			raws, errs = append(raws, nil), append(errs, err)
			continue
		}
		if err != nil {
			t.Fatalf("Next: %v", err)
		}
		raws, errs = append(raws, m.Raw), append(errs, nil)
	}
}

func TestWriteMboxRoundTrip(t *testing.T) {
	msgs := Messages(Options{})
	var b bytes.Buffer
	if err := WriteMbox(&b, msgs); err != nil {
		t.Fatal(err)
	}
	raws, errs := readMbox(t, &b, mbox.Options{Format: mbox.FormatMboxrd})
	if len(raws) != len(msgs) {
		t.Fatalf("read %d messages back, want %d", len(raws), len(msgs))
	}
	for i, m := range msgs {
		if errs[i] != nil {
			t.Errorf("%s: %v", m.Name, errs[i])
			continue
		}
		if !bytes.Equal(raws[i], m.Raw()) {
			t.Errorf("%s: read back %d bytes that differ from the %d written", m.Name, len(raws[i]), m.Size())
		}
	}
}

// TestLarge writes the large messages to a file (streamed) and reads them
// back with the importer's default limit: the 50 MB message comes back
// whole, the one over the limit is reported too large, and the message
// after it is intact.
func TestLarge(t *testing.T) {
	if testing.Short() {
		t.Skip("writes and reads 115 MB")
	}
	msgs := Messages(Options{Large: true})
	tail := Messages(Options{})[0]
	msgs = append(msgs, tail)
	path := filepath.Join(t.TempDir(), "large.mbox")
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := WriteMbox(f, msgs); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	f, err = os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	raws, errs := readMbox(t, f, mbox.Options{})
	if len(raws) != len(msgs) {
		t.Fatalf("read %d messages back, want %d", len(raws), len(msgs))
	}
	for i, m := range msgs {
		switch m.Want {
		case TooLarge:
			if !errors.Is(errs[i], mbox.ErrTooLarge) {
				t.Errorf("%s (%d bytes): error %v, want %v", m.Name, m.Size(), errs[i], mbox.ErrTooLarge)
			}
			if m.Size() != mbox.DefaultMaxMessageSize+1 {
				t.Errorf("%s: Size() = %d, want %d", m.Name, m.Size(), mbox.DefaultMaxMessageSize+1)
			}
		case Stored:
			if errs[i] != nil {
				t.Errorf("%s: %v", m.Name, errs[i])
			} else if store.DigestOf(raws[i]) != m.Digest() {
				t.Errorf("%s: read back %d bytes that differ from the %d written", m.Name, len(raws[i]), m.Size())
			}
		}
	}
}

func TestContentLengthMbox(t *testing.T) {
	data, msgs := ContentLengthMbox()
	if !bytes.Contains(data, []byte("Content-Length: 2147483648\n")) {
		t.Fatal("no 2 GiB Content-Length in the mbox")
	}
	for _, format := range []mbox.Format{mbox.FormatAuto, mbox.FormatMboxcl2, mbox.FormatMboxrd} {
		t.Run(string(format), func(t *testing.T) {
			raws, errs := readMbox(t, bytes.NewReader(data), mbox.Options{Format: format})
			if len(raws) != len(msgs) {
				t.Fatalf("read %d messages, want %d", len(raws), len(msgs))
			}
			for i, m := range msgs {
				if errs[i] != nil || !bytes.Equal(raws[i], m.Raw()) {
					t.Errorf("%s: got %q, %v, want %q", m.Name, raws[i], errs[i], m.Raw())
				}
			}
		})
	}
}

func TestOutcomeString(t *testing.T) {
	for o, want := range map[Outcome]string{Stored: "stored", TooLarge: "too large", Outcome(9): "Outcome(9)"} {
		if got := o.String(); got != want {
			t.Errorf("Outcome(%d).String() = %q, want %q", int(o), got, want)
		}
	}
}

// The costly cases have the properties of every message, and the sizes
// they say.
func TestCostly(t *testing.T) {
	threads := Threads(3, 2)
	var ids []string
	for _, m := range threads {
		ids = append(ids, m.MessageID)
	}
	msgs := append([]Message{Ordinary("ordinary", "parent@hostile.test", 1), ManyReferences(1000), NamesAll(ids, 10),
		SoftBreaks(1<<20 + 1), BigAttachment(1<<20 + 5)}, threads...)
	for _, m := range msgs {
		t.Run(m.Name, func(t *testing.T) {
			raw := m.Raw()
			if got := int64(len(raw)); got != m.Size() {
				t.Errorf("Size() = %d, want len(Raw()) = %d", m.Size(), got)
			}
			if !bytes.HasSuffix(raw, []byte("\n")) || m.Why == "" {
				t.Errorf("Raw() does not end in a line feed, or Why is empty")
			}
			if got, want := m.Digest(), store.DigestOf(raw); got != want {
				t.Errorf("Digest() = %v, want %v", got, want)
			}
			if !bytes.Contains(raw, []byte("Message-ID: <"+m.MessageID+">\n")) {
				t.Errorf("MessageID %q is not in the header", m.MessageID)
			}
			if !bytes.Contains(raw, []byte("\nDate: ")) {
				t.Errorf("no Date")
			}
		})
	}
	if n := bytes.Count(ManyReferences(1000).Raw(), []byte("@hostile.test>")); n != 1000+2 {
		t.Errorf("many-references names %d IDs, want 1000, In-Reply-To and its own", n)
	}
	if got := SoftBreaks(1 << 20).Size(); got != 1<<20 {
		t.Errorf("SoftBreaks(1 MiB).Size() = %d", got)
	}
	if !strings.Contains(string(threads[2].Raw()), "References: <thread-0-0@hostile.test> <thread-0-1@hostile.test>\n") {
		t.Errorf("the third message of a thread does not name the two before it:\n%s", threads[2].Raw())
	}
	if p := LongPhrase(LongPhraseWords); strings.Count(p, " ") != LongPhraseWords-1 || !strings.HasPrefix(p, `"a b c`) {
		t.Errorf("LongPhrase = %.40q...", p)
	}
}
