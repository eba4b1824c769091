// Package mailwire gives a stored message the CRLF form IMAP (RFC 9051
// section 2.3.1.1) and NNTP (RFC 3977 section 3.1.1) send: every LF without
// a CR before it gets one. A CRLF already there is kept, so the wire form is
// its own wire form, and its digest (store.DigestOf) is the stored one's.
package mailwire

import "bytes"

// Size returns the length of raw's wire form, and the lines of its body (a
// last line without a line end counts).
func Size(raw []byte) (size int64, bodyLines int) {
	size = int64(len(raw)) + int64(bareLFs(raw))
	body := raw[BodyStart(raw):]
	bodyLines = bytes.Count(body, []byte{'\n'})
	if len(body) > 0 && body[len(body)-1] != '\n' {
		bodyLines++
	}
	return size, bodyLines
}

func bareLFs(raw []byte) int {
	n := 0
	for i := 0; ; {
		j := bytes.IndexByte(raw[i:], '\n')
		if j < 0 {
			return n
		}
		if i+j == 0 || raw[i+j-1] != '\r' {
			n++
		}
		i += j + 1
	}
}

// AppendCRLF appends the wire form of raw to dst and returns it.
func AppendCRLF(dst, raw []byte) []byte {
	dst = growFor(dst, len(raw)+bareLFs(raw))
	for len(raw) > 0 {
		j := bytes.IndexByte(raw, '\n')
		if j < 0 {
			return append(dst, raw...)
		}
		dst = append(dst, raw[:j]...)
		if j > 0 && raw[j-1] == '\r' {
			dst = append(dst, '\n')
		} else {
			dst = append(dst, '\r', '\n')
		}
		raw = raw[j+1:]
	}
	return dst
}

func growFor(dst []byte, n int) []byte {
	if cap(dst)-len(dst) < n {
		d := make([]byte, len(dst), len(dst)+n)
		copy(d, dst)
		return d
	}
	return dst
}

// BodyStart returns where the body of msg begins, after the first empty
// line (RFC 5322 section 2.1) with LF or CRLF; len(msg) if there is none.
func BodyStart(msg []byte) int {
	for i := 0; i < len(msg); {
		j := bytes.IndexByte(msg[i:], '\n')
		if j < 0 {
			return len(msg)
		}
		line := msg[i : i+j]
		if len(line) == 0 || len(line) == 1 && line[0] == '\r' {
			return i + j + 1
		}
		i += j + 1
	}
	return len(msg)
}
