package mbox

import (
	"bytes"
	"fmt"
)

// detectMessages is how many messages of the sample auto-detection looks at.
const detectMessages = 100

const (
	landYes = iota
	landNo
	landUnknown // the sample is too short to tell
	landCut     // the body runs past the end of the whole input
)

// detect picks the variant of an mbox from its first bytes (see
// Reader.Format); complete says the sample is the whole input.
func detect(sample []byte, complete bool) (Format, string) {
	var landed, missed, noCL, msgs int
	cut := false
	pos := firstSeparator(sample, complete)
	for pos >= 0 && msgs < detectMessages {
		msgs++
		_, next, ok := lineAt(sample, pos, complete)
		if !ok {
			break
		}
		clen, bodyStart, ok := scanHeader(sample, next, complete)
		if !ok {
			break
		}
		if clen >= 0 {
			at, res := landsAt(sample, int64(bodyStart)+clen, complete)
			if res == landUnknown {
				break
			}
			if res == landCut {
				// A cut-short input says nothing against Content-Length
				// framing, unless a From_ line in the body shows the length
				// is wrong.
				if findSeparator(sample, bodyStart, true, complete) >= 0 {
					missed++
				} else {
					cut = true
				}
				break
			}
			if res == landYes {
				landed++
				pos = at
				continue
			}
			missed++
		} else {
			noCL++
		}
		pos = findSeparator(sample, bodyStart, true, complete)
	}

	var quoted, quoted2 int
	for p := 0; p < len(sample); {
		l, n, ok := lineAt(sample, p, complete)
		if !ok {
			break
		}
		if isQuotedFrom(l) {
			quoted++
			if len(l) > 1 && l[1] == '>' {
				quoted2++
			}
		}
		p = n
	}

	if landed > 0 && missed == 0 && noCL == 0 {
		if cut {
			return FormatMboxcl2, fmt.Sprintf("auto: the Content-Length of %d sampled messages ends exactly at the next From_ line, and the last one's runs past the end of the input (truncated?)", landed)
		}
		return FormatMboxcl2, fmt.Sprintf("auto: the Content-Length of all %d sampled messages ends exactly at the next From_ line", landed)
	}
	why := "no Content-Length framing"
	if landed+missed > 0 {
		why = fmt.Sprintf("Content-Length framing in %d of %d sampled messages", landed, msgs)
	}
	if quoted2 > 0 {
		return FormatMboxrd, fmt.Sprintf("auto: %s; %d \">>From \" lines in the sample suggest mboxrd quoting", why, quoted2)
	}
	return FormatMboxrd, fmt.Sprintf("auto: %s; mboxrd is the default (read as mboxrd, an mboxo file loses only one '>' of body lines that began \">From \")", why)
}

// lineAt returns the line starting at p (with its newline) and where the
// next one starts; ok is false when the sample ends inside the line.
func lineAt(s []byte, p int, complete bool) (line []byte, next int, ok bool) {
	if p >= len(s) {
		return nil, p, false
	}
	if i := bytes.IndexByte(s[p:], '\n'); i >= 0 {
		return s[p : p+i+1], p + i + 1, true
	}
	return s[p:], len(s), complete
}

func firstSeparator(s []byte, complete bool) int {
	if hasFromPrefix(s) {
		return 0
	}
	return findSeparator(s, 0, false, complete)
}

// findSeparator returns where the next From_ line at or after p starts,
// or -1; prevEmpty says whether the line before p was empty.
func findSeparator(s []byte, p int, prevEmpty, complete bool) int {
	for p < len(s) {
		l, n, ok := lineAt(s, p, complete)
		if !ok {
			return -1
		}
		if prevEmpty && isSeparator(l) {
			return p
		}
		prevEmpty = isEmpty(l)
		p = n
	}
	return -1
}

// scanHeader reads the header starting at p: its Content-Length (-1 when
// absent) and where the body starts.
func scanHeader(s []byte, p int, complete bool) (clen int64, body int, ok bool) {
	clen = -1
	for {
		l, n, ok := lineAt(s, p, complete)
		if !ok {
			return 0, 0, false
		}
		if isEmpty(l) {
			return clen, n, true
		}
		if v, ok := contentLength(l); ok && clen < 0 {
			clen = v
		}
		p = n
	}
}

// landsAt tells whether a body ending at end is followed by what
// Reader.stepCL accepts, and where the next From_ line starts.
func landsAt(s []byte, end int64, complete bool) (int, int) {
	if end > int64(len(s)) {
		if !complete {
			return 0, landUnknown
		}
		return 0, landCut
	}
	p := int(end)
	if p == len(s) {
		if complete {
			return p, landYes
		}
		return 0, landUnknown
	}
	for i := 0; i < 2; i++ {
		l, n, ok := lineAt(s, p, complete)
		if !ok {
			return 0, landUnknown
		}
		if isSeparator(l) && (l[len(l)-1] == '\n' || complete) {
			return p, landYes
		}
		if i > 0 || !isEmpty(l) {
			return 0, landNo
		}
		if n == len(s) {
			if complete {
				return n, landYes
			}
			return 0, landUnknown
		}
		p = n
	}
	return 0, landNo
}
