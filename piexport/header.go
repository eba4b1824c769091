package piexport

import (
	"bytes"
	"crypto/sha256"
	"encoding/base64"
	"regexp"
	"strings"
	"time"
)

// maxHeader bounds the part of a message read as its header: a message
// whose header goes on longer is read as if it ended there.
const maxHeader = 1 << 20

// header is a message's header fields (RFC 5322 section 2.2), in order,
// each unfolded.
type header []field

type field struct{ name, value string }

// parseHeader reads the header fields of raw: the lines up to the first
// empty one (LF or CRLF line ends), a line that begins with a space or a
// tab continuing the field before it (section 2.2.3). A line that is no
// field (no colon) is skipped, as public-inbox's reader skips it.
func parseHeader(raw []byte) header {
	if len(raw) > maxHeader {
		raw = raw[:maxHeader]
	}
	var h header
	for len(raw) > 0 {
		line := raw
		if i := bytes.IndexByte(raw, '\n'); i >= 0 {
			line, raw = raw[:i], raw[i+1:]
		} else {
			raw = nil
		}
		line = bytes.TrimSuffix(line, []byte("\r"))
		if len(line) == 0 {
			break
		}
		if line[0] == ' ' || line[0] == '\t' {
			if len(h) > 0 {
				h[len(h)-1].value += " " + strings.TrimSpace(string(line))
			}
			continue
		}
		name, value, ok := bytes.Cut(line, []byte(":"))
		if !ok {
			continue
		}
		h = append(h, field{strings.TrimSpace(string(name)), strings.TrimSpace(string(value))})
	}
	return h
}

// values returns the values of the fields named name (case-insensitive).
func (h header) values(name string) []string {
	var out []string
	for _, f := range h {
		if strings.EqualFold(f.name, name) {
			out = append(out, f.value)
		}
	}
	return out
}

// maxMID is public-inbox's MAX_MID_SIZE (a Xapian term's limit): a longer
// Message-ID is cut there.
const maxMID = 244

var midRE = regexp.MustCompile(`<([^>]+)>`)

// mids are a message's Message-IDs as public-inbox reads them (MID.pm,
// mids): every <...> of every Message-ID field, or the field's whole
// value where it has none; without line breaks and tabs, cut at 244
// bytes, each once, empty ones left out.
func mids(h header) []string {
	var out []string
	seen := map[string]bool{}
	for _, v := range h.values("Message-ID") {
		ids := []string{v}
		if m := midRE.FindAllStringSubmatch(v, -1); m != nil {
			ids = ids[:0]
			for _, s := range m {
				ids = append(ids, s[1])
			}
		}
		for _, id := range ids {
			id = strings.Map(func(r rune) rune {
				if r == '\n' || r == '\t' || r == '\r' {
					return -1
				}
				return r
			}, id)
			if len(id) > maxMID {
				id = id[:maxMID]
			}
			if id == "" || seen[id] {
				continue
			}
			seen[id] = true
			out = append(out, id)
		}
	}
	return out
}

// newMID makes a Message-ID for a message that has none, or whose
// Message-IDs are all taken by other messages of the inbox, in
// public-inbox's form (Import.pm, digest2mid): the message's date
// (authorTime, UTC) as YYYYMMDDhhmmss, a dot, a digest in URL-safe base64
// and "@z". public-inbox digests a normal form of the message
// (ContentHash); the export digests its bytes and its call number, so
// that the same message always gets the same Message-ID, and two copies
// get two.
func newMID(raw []byte, callNumber string, date gitTime) string {
	d := sha256.New()
	d.Write([]byte(callNumber))
	d.Write([]byte{0})
	d.Write(raw)
	return time.Unix(date.Unix, 0).UTC().Format("20060102150405") + "." +
		base64.RawURLEncoding.EncodeToString(d.Sum(nil)) + "@z"
}

// appendMID returns raw with a Message-ID field added at the end of its
// header, as public-inbox adds the one it makes (Import.pm, append_mid),
// with the line ends the message uses.
func appendMID(raw []byte, id string) []byte {
	eol := "\n"
	if i := bytes.IndexByte(raw, '\n'); i > 0 && raw[i-1] == '\r' {
		eol = "\r\n"
	}
	line := "Message-ID: <" + id + ">" + eol
	end := headerEnd(raw)
	out := make([]byte, 0, len(raw)+len(line)+len(eol))
	out = append(out, raw[:end]...)
	if end > 0 && raw[end-1] != '\n' {
		out = append(out, eol...)
	}
	out = append(out, line...)
	return append(out, raw[end:]...)
}

// headerEnd is the offset in raw of the empty line that ends the header
// (len(raw) when there is none).
func headerEnd(raw []byte) int {
	off := 0
	for off < len(raw) {
		i := bytes.IndexByte(raw[off:], '\n')
		line := raw[off:]
		if i >= 0 {
			line = raw[off : off+i]
		}
		if len(bytes.TrimSuffix(line, []byte("\r"))) == 0 {
			return off
		}
		if i < 0 {
			return len(raw)
		}
		off += i + 1
	}
	return len(raw)
}
