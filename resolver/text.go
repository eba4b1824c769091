package resolver

import (
	"fmt"
	"io"
	"net/url"
	"strings"

	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/patch"
)

// textOptions say how writeText shows a text/plain body.
type textOptions struct {
	// Fold puts runs of more than Fold quoted lines in a <details>
	// element, closed (0: never): a thread page reads better with the
	// quotes of earlier messages folded away.
	Fold int
	// kinds, with scanned set, are the text's patch.Scan by maxDiffBytes
	// already made (diffstatOf's): it is not scanned again.
	kinds   []patch.Kind
	scanned bool
}

// htmlWriter is what writeText writes to: a *strings.Builder, a
// *pageWriter.
type htmlWriter interface {
	io.Writer
	io.StringWriter
}

// writeText shows a text/plain body (mailview's cleaned text) as HTML:
// every character escaped, http(s) URLs as links, and the lines grouped
// in runs of one quote level (RFC 3676 section 4.5: a line's quote depth
// is its number of leading '>', spaces between them allowed as many
// mailers write them), each run a <pre> whose class says its level
// (q1..q4, deeper levels as q4), so that quotes can be told apart.
// The quote marks stay in the text: copying a quote copies it as it was
// written. A signature (after a "-- " line, RFC 3676 section 4.3) is a
// run of its own, class sig.
//
// A patch in the text (package patch: git format-patch, diff -u) is
// coloured: each of its lines is a span whose class says its part (dh a
// file header, dk a hunk header, da added, dd deleted), in the first
// maxDiffBytes of the text; the rest is plain, so that a 40 MB patch
// costs no more than 2 MB of one.
func writeText(b htmlWriter, s string, o textOptions) {
	b.WriteString(`<div class="text">`)
	lines := strings.SplitAfter(s, "\n")
	if len(lines) > 0 && lines[len(lines)-1] == "" {
		lines = lines[:len(lines)-1]
	}
	kinds := o.kinds
	if !o.scanned && hasPatch(s) {
		kinds, _ = patch.Scan(s, patch.Limits{MaxBytes: maxDiffBytes})
	}
	kind := func(i int) patch.Kind {
		if i < len(kinds) {
			return kinds[i]
		}
		return patch.Text
	}
	sigLine := func(i int) bool {
		return strings.TrimRight(lines[i], "\r\n") == "-- " && kind(i) == patch.Text
	}
	inSig := false
	for i := 0; i < len(lines); {
		level := quoteLevel(lines[i])
		if level == 0 && sigLine(i) {
			inSig = true
		}
		j := i + 1
		for j < len(lines) && quoteLevel(lines[j]) == level && (inSig || level > 0 || !sigLine(j)) {
			j++
		}
		run := lines[i:j]
		class := ""
		switch {
		case level > 0:
			class = fmt.Sprintf("q q%d", min(level, 4))
		case inSig:
			class = "sig"
		}
		fold := level > 0 && o.Fold > 0 && len(run) > o.Fold
		if fold {
			fmt.Fprintf(b, `<details class="quote"><summary>%d quoted lines</summary>`, len(run))
		}
		if class != "" {
			fmt.Fprintf(b, `<pre class="%s">`, class)
		} else {
			b.WriteString(`<pre>`)
		}
		for k, l := range run {
			class := ""
			if kd := kind(i + k); level == 0 && !inSig && int(kd) < len(diffClass) {
				class = diffClass[kd]
			}
			if class == "" {
				linkify(b, l)
				continue
			}
			// The line end stays outside the span: a span per line.
			body := strings.TrimRight(l, "\r\n")
			b.WriteString(`<span class="`)
			b.WriteString(class)
			b.WriteString(`">`)
			escape(b, body)
			b.WriteString(`</span>`)
			b.WriteString(l[len(body):])
		}
		b.WriteString(`</pre>`)
		if fold {
			b.WriteString(`</details>`)
		}
		i = j
	}
	b.WriteString(`</div>`)
}

// maxDiffBytes is how much of a text is read for patches: colouring and
// the diffstat stop there.
const maxDiffBytes = 2 << 20

// diffClass is the class of a patch's line of each kind.
// An array rather than a map: it is read for every line of a patch.
var diffClass = [...]string{patch.Header: "dh", patch.Hunk: "dk", patch.Added: "da", patch.Deleted: "dd", patch.Context: ""}

// hasPatch tells, cheaply, whether a text may hold a patch.
func hasPatch(s string) bool {
	return strings.Contains(s, "\n+++ ") || strings.HasPrefix(s, "diff --git ") || strings.Contains(s, "\ndiff --git ")
}

// diffstat is what a message's patches do, as its page shows it above
// the text (as git format-patch writes it under the commit message).
type diffstat struct {
	Files          []patch.File
	More           int // files not listed
	Added, Deleted int
	Truncated      bool
	Changed        int // files in all
	// part is the index in the message's parts of the first text with a
	// patch, and kinds its lines' (as writeText scans it).
	part  int
	kinds []patch.Kind
}

// maxStatFiles bounds the files a diffstat lists.
const maxStatFiles = 100

// diffstatOf returns the diffstat of a message's own text parts (not of
// the messages it encloses), or nil when they hold no patch.
func diffstatOf(v *mailview.Message) *diffstat {
	var files []patch.File
	truncated := false
	budget := maxDiffBytes
	part, kinds := -1, []patch.Kind(nil)
	for i, p := range v.Parts {
		if p.Text == "" || !hasPatch(p.Text) || budget <= 0 {
			continue
		}
		k, d := patch.Scan(p.Text, patch.Limits{MaxBytes: budget, MaxFiles: patch.DefaultMaxFiles})
		if part < 0 {
			// The first is scanned with writeText's limits (MaxFiles is
			// its default): its kinds are writeText's.
			part, kinds = i, k
		}
		budget -= len(p.Text)
		files = append(files, d.Files...)
		truncated = truncated || d.Truncated
	}
	if len(files) == 0 {
		return nil
	}
	ds := &diffstat{Changed: len(files), Truncated: truncated, part: part, kinds: kinds}
	for _, f := range files {
		ds.Added += f.Added
		ds.Deleted += f.Deleted
	}
	if len(files) > maxStatFiles {
		ds.More = len(files) - maxStatFiles
		files = files[:maxStatFiles]
	}
	ds.Files = files
	return ds
}

// quoteLevel counts the '>' at the start of a line, allowing spaces
// between them ("> > x" is level 2).
func quoteLevel(l string) int {
	n := 0
	for i := 0; i < len(l); i++ {
		switch l[i] {
		case '>':
			n++
		case ' ':
			if n == 0 {
				return 0
			}
		default:
			return n
		}
	}
	return n
}

// linkify writes s escaped, with its http(s) URLs as links.
func linkify(b htmlWriter, s string) {
	for {
		i := nextURL(s)
		if i < 0 {
			escape(b, s)
			return
		}
		escape(b, s[:i])
		end := urlEnd(s[i:])
		raw := s[i : i+end]
		if u, ok := linkTarget(raw); ok {
			b.WriteString(`<a href="`)
			escape(b, u)
			b.WriteString(`" rel="nofollow noopener noreferrer">`)
			escape(b, raw)
			b.WriteString(`</a>`)
		} else {
			escape(b, raw)
		}
		s = s[i+end:]
	}
}

// escape writes s as html.EscapeString returns it.
func escape(b io.StringWriter, s string) { htmlEscapes.write(b, s) }

// nextURL returns where the next "http://" or "https://" starts in s (not
// in the middle of a word: "xhttp://" is not a URL), or -1.
func nextURL(s string) int {
	for i := 0; i+7 <= len(s); i++ {
		if s[i]|0x20 != 'h' || i > 0 && isWordByte(s[i-1]) {
			continue
		}
		if rest := s[i:]; hasPrefixFold(rest, "http://") || hasPrefixFold(rest, "https://") {
			return i
		}
	}
	return -1
}

func hasPrefixFold(s, prefix string) bool {
	return len(s) >= len(prefix) && strings.EqualFold(s[:len(prefix)], prefix)
}

func isWordByte(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c >= 0x80
}

// urlEnd returns the length of the URL at the start of s: up to white
// space or a character that cannot be in a URL in running text (<, >, ",
// backtick), then without trailing punctuation that ends a sentence, and
// without a closing bracket that has no opening one inside the URL
// ("(see https://x.org/a)").
func urlEnd(s string) int {
	n := strings.IndexFunc(s, func(r rune) bool {
		return r <= ' ' || r == '<' || r == '>' || r == '"' || r == '`' || r == 0x7f || r == '\u00a0'
	})
	if n < 0 {
		n = len(s)
	}
	for n > 0 {
		c := s[n-1]
		switch {
		case strings.IndexByte(".,;:!?'*", c) >= 0:
			n--
			continue
		case c == ')' && strings.Count(s[:n], "(") < strings.Count(s[:n], ")"),
			c == ']' && strings.Count(s[:n], "[") < strings.Count(s[:n], "]"),
			c == '}' && strings.Count(s[:n], "{") < strings.Count(s[:n], "}"):
			n--
			continue
		}
		break
	}
	return n
}

// linkTarget returns the href of a URL found in text: an http(s) URL
// that names a host, re-serialized so that the attribute holds nothing
// the parser did not understand. Anything else is left as text.
func linkTarget(raw string) (string, bool) {
	u, err := url.Parse(raw)
	if err != nil || u.Opaque != "" || u.Host == "" || u.User != nil {
		return "", false
	}
	switch strings.ToLower(u.Scheme) {
	case "http", "https":
	default:
		return "", false
	}
	u.Scheme = strings.ToLower(u.Scheme)
	if strings.HasPrefix(u.Host, ":") || strings.ContainsAny(u.Host, "\\") {
		return "", false
	}
	href := u.String()
	// Harmless inside an http(s) URL, but not worth a link that a
	// filter might read as a script URL.
	if low := strings.ToLower(href); strings.Contains(low, "javascript:") || strings.Contains(low, "vbscript:") {
		return "", false
	}
	return href, true
}
