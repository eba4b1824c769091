package catalog

// Subject threading: mail without threading headers (pipermail-era mail,
// replies whose clients dropped the "Re:"), and mail whose references the
// list does not know if its subject has a reply prefix. Such a message
// joins a thread of its list with the same BaseSubject active within
// subjectWindow of it: of at most maxSubjectThreads, the first whose text
// it quotes (JoinedQuoting); else the first where it or the thread's root
// has a reply prefix; else the first someone else started, if the subject
// is distinctive (three words and minDistinct characters): "help" from two
// people is two questions. It never merges two threads, and what it
// compares is bounded: sketchLines lines of each message without
// references, maxQuoteHashes lines it quotes, and the newest
// sketchMessages messages of each thread. Before all that, a patch of a
// series ("[PATCH v2 3/18]") joins the thread of the cover letter ("[PATCH
// v2 0/18]") its sender sent just before (JoinedSeries, seriesCover).

import (
	"encoding/binary"
	"hash/fnv"
	"regexp"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/patch"
)

// JoinedBy says why a message sits where it does in its thread.
type JoinedBy int

const (
	// JoinedByID: by the Message-IDs it and the others name, or its start.
	JoinedByID JoinedBy = iota
	// JoinedBySubject: by its subject, a reply prefix on it or the root.
	JoinedBySubject
	// JoinedQuoting: by its subject, quoting a message of the thread.
	JoinedQuoting
	// JoinedSameSubject: by its subject, in a thread someone else started.
	JoinedSameSubject
	// JoinedSeries: a patch of a series, under the cover letter ("[PATCH
	// v2 0/18]") its sender sent just before (seriesCover).
	JoinedSeries
)

// MarshalText names it in JSON.
func (j JoinedBy) MarshalText() ([]byte, error) { return []byte(j.String()), nil }

func (j JoinedBy) String() string {
	switch j {
	case JoinedBySubject:
		return "subject"
	case JoinedQuoting:
		return "subject-quoting"
	case JoinedSameSubject:
		return "same-subject"
	case JoinedSeries:
		return "series"
	}
	return "references"
}

// Bounds of subject threading.
const (
	maxSubjectThreads = 8
	// maxSubjectRows bounds the threads read to find them: threads
	// whose base has the same textKey are read and passed over.
	maxSubjectRows = 1024
	sketchLines    = 8
	maxQuoteHashes = 16
	sketchMessages = 20
	// minDistinct is the shortest subject joined without a reply prefix.
	minDistinct = 16
	// minSketchLine is the shortest line compared: shorter ones ("Hi,",
	// "Thanks!") are in every other message.
	minSketchLine = 20
)

// normLine is a line as compared: lower-case, white space collapsed.
func normLine(l string) string {
	return strings.ToLower(strings.Join(strings.Fields(l), " "))
}

func lineHash(l string) uint64 {
	h := fnv.New64a()
	h.Write([]byte(l))
	return h.Sum64()
}

// sketch returns the hashes of the first sketchLines distinct lines of a
// message's own text long enough to compare, up to its signature.
func sketch(body string) []byte {
	var out []byte
	seen := map[uint64]bool{}
	for line := range strings.Lines(body) {
		if strings.TrimRight(line, "\r\n") == "-- " {
			break
		}
		l := normLine(line)
		if len(l) < minSketchLine {
			continue
		}
		h := lineHash(l)
		if seen[h] {
			continue
		}
		seen[h] = true
		out = binary.BigEndian.AppendUint64(out, h)
		if len(out) >= 8*sketchLines {
			break
		}
	}
	return out
}

// quoteHashes returns the hashes of the first maxQuoteHashes distinct
// quoted lines long enough to compare, without their '>' marks.
func quoteHashes(quoted string) []uint64 {
	var out []uint64
	for line := range strings.Lines(quoted) {
		l := normLine(strings.TrimLeft(line, "> \t"))
		if len(l) < minSketchLine {
			continue
		}
		h := lineHash(l)
		dup := false
		for _, x := range out {
			dup = dup || x == h
		}
		if !dup {
			out = append(out, h)
			if len(out) >= maxQuoteHashes {
				break
			}
		}
	}
	return out
}

// quotesSketch reports whether one of the hashes is in the sketch.
func quotesSketch(quotes []uint64, sk []byte) bool {
	for i := 0; i+8 <= len(sk); i += 8 {
		h := binary.BigEndian.Uint64(sk[i:])
		for _, q := range quotes {
			if q == h {
				return true
			}
		}
	}
	return false
}

// Bounds of the paths kept of one message's patches.
const (
	maxPaths = 200
	// fileEnd ends each path in the files column, so that dfn:PATH, the
	// phrase of PATH's words and fileEnd, matches a path's last components.
	fileEnd = "zzdfnend"
)

// diffOf scans the patches in a message's own text (at most maxPaths
// files); false for a text without one.
func diffOf(body string) (patch.Diff, bool) {
	if !strings.Contains(body, "\n+++ ") && !strings.Contains(body, "diff --git ") {
		return patch.Diff{}, false // no patch: not worth a scan
	}
	_, d := patch.Scan(body, patch.Limits{MaxFiles: maxPaths})
	return d, true
}

// filesText returns the paths a diff touches, each followed by fileEnd,
// one a line (the search index's files column).
func filesText(d patch.Diff) string {
	var b strings.Builder
	for _, p := range d.Paths() {
		b.WriteString(p)
		b.WriteString(" " + fileEnd + "\n")
	}
	return b.String()
}

// bySubject finds the thread d joins by its subject, if any, and how,
// when no thread was found by Message-ID.
func (ix *indexer) bySubject(d *doc) (thread int64, how JoinedBy, quotes int64, err error) {
	if d.base == "" {
		return 0, JoinedByID, 0, nil
	}
	if t, cover, err := ix.seriesCover(d); err != nil || t != 0 {
		return t, JoinedSeries, cover, err
	}
	date := d.date.Unix()
	window := int64(subjectWindow / time.Second)
	rows, err := ix.threadsBySubject.QueryContext(ix.ctx, d.list, textKey(d.base), date-window, date+window, maxSubjectRows)
	if err != nil {
		return 0, 0, 0, err
	}
	type cand struct {
		id          int64
		rootReply   bool
		rootAddr    string
		rootName    string
		rootSubject string
	}
	var cands []cand
	for len(cands) < maxSubjectThreads && rows.Next() {
		var c cand
		var subject string
		if err := rows.Scan(&c.id, &c.rootReply, &c.rootAddr, &c.rootName, &subject); err != nil {
			rows.Close()
			return 0, 0, 0, err
		}
		if base, _ := BaseSubject(subject); base == d.base { // not another base of the same key
			c.rootSubject = subject
			cands = append(cands, c)
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return 0, 0, 0, err
	}
	if len(d.quotes) > 0 {
		for _, c := range cands {
			q, err := ix.quoted(c.id, d.quotes)
			if err != nil {
				return 0, 0, 0, err
			}
			if q != 0 {
				return c.id, JoinedQuoting, q, nil
			}
		}
	}
	for _, c := range cands {
		if d.reply || c.rootReply {
			return c.id, JoinedBySubject, 0, nil
		}
	}
	if len(d.base) >= minDistinct && strings.Count(d.base, " ") >= 2 {
		for _, c := range cands {
			other := c.rootAddr != "" && !strings.EqualFold(c.rootAddr, d.fromAddr) ||
				c.rootAddr == "" && d.fromAddr == "" && c.rootName != d.fromName
			// "[PATCH v17] x" after "[PATCH v16] x" is the patch sent
			// again, not an answer to it.
			if pt, ok := patchTag(d.subject); ok {
				if ct, ok := patchTag(c.rootSubject); ok && ct != pt {
					other = false
				}
			}
			if other {
				return c.id, JoinedSameSubject, 0, nil
			}
		}
	}
	return 0, JoinedByID, 0, nil
}

// quoted returns the newest of the thread's newest sketchMessages
// messages that a line of quotes comes from, or 0.
func (ix *indexer) quoted(thread int64, quotes []uint64) (int64, error) {
	rows, err := ix.sketches.QueryContext(ix.ctx, thread, sketchMessages)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id int64
		var sk []byte
		if err := rows.Scan(&id, &sk); err != nil {
			return 0, err
		}
		if quotesSketch(quotes, sk) {
			return id, nil
		}
	}
	return 0, rows.Err()
}

// threadsBySubjectSQL reads the threads a message may join by subject
// (list, textKey of base, window, at most how many), newest first, with
// their root's sender and subject.
const threadsBySubjectSQL = `SELECT t.id, t.root_reply, r.from_addr, r.from_name, r.subject FROM threads t JOIN messages r ON r.id = t.root
	WHERE t.list = ? AND t.base_key = ? AND t.last >= ? AND t.first <= ? ORDER BY t.last DESC, t.id DESC LIMIT ?`

// sketchesSQL reads the sketches of a thread's newest messages.
const sketchesSQL = `SELECT id, sketch FROM messages WHERE thread = ? AND sketch IS NOT NULL ORDER BY date DESC, id DESC LIMIT ?`

// Bounds of a series' patches joining their cover letter.
const (
	// seriesWindow is how long after its cover letter a patch may come:
	// git send-email sends a series in seconds.
	seriesWindow = 6 * time.Hour
	// maxSeriesRows bounds the sender's messages read for the cover.
	maxSeriesRows = 200
)

// seriesPartRE reads a series' "[PATCH v2 03/18]": what comes before the
// numbers, the number and the count.
var seriesPartRE = regexp.MustCompile(`\[([^\[\]]*?)\s*\b0*(\d{1,4})/0*(\d{1,4})\s*\]`)

// seriesPart reads the part of a series a subject says it is.
func seriesPart(subject string) (tag string, n, of int, ok bool) {
	m := seriesPartRE.FindStringSubmatch(subject)
	if m == nil {
		return "", 0, 0, false
	}
	n, _ = strconv.Atoi(m[2])
	of, _ = strconv.Atoi(m[3])
	return strings.ToLower(strings.Join(strings.Fields(m[1]), " ")), n, of, of > 0 && n <= of
}

// CoverLetter reports whether a subject is a series' cover letter's:
// "[PATCH v2 0/18] ...".
func CoverLetter(subject string) bool {
	_, n, _, ok := seriesPart(subject)
	return ok && n == 0
}

// seriesCover returns the thread and the cover letter ("[PATCH v2
// 0/18]") of a patch of a series ("[PATCH v2 3/18]") that its sender sent
// within seriesWindow before it, in its list; 0 for none. A patch's
// subject is not its cover's, so the subject rules never join them.
func (ix *indexer) seriesCover(d *doc) (thread, cover int64, err error) {
	tag, n, of, ok := seriesPart(d.subject)
	if !ok || n == 0 || d.fromAddr == "" {
		return 0, 0, nil
	}
	date := d.date.Unix()
	rows, err := ix.seriesCovers.QueryContext(ix.ctx, d.list, date-int64(seriesWindow/time.Second), date, d.fromAddr, maxSeriesRows)
	if err != nil {
		return 0, 0, err
	}
	defer rows.Close()
	for rows.Next() {
		var id, t int64
		var subject string
		if err := rows.Scan(&id, &t, &subject); err != nil {
			return 0, 0, err
		}
		if ctag, cn, cof, ok := seriesPart(subject); ok && cn == 0 && cof == of && ctag == tag {
			return t, id, nil
		}
	}
	return 0, 0, rows.Err()
}

// seriesCoversSQL reads a sender's messages of a list in a time window,
// newest first (list, from, to, address, at most how many).
const seriesCoversSQL = `SELECT id, thread, subject FROM messages WHERE list = ? AND date BETWEEN ? AND ? AND from_addr = ? ORDER BY date DESC, id DESC LIMIT ?`

// patchTag returns the bracket of a patch's subject that says what it is
// ("[PATCH v2 3/18]", "[RFC PATCH]"), lower-case, without the part's
// numbers: "patch v2", "rfc patch"; false for a subject without one.
func patchTag(subject string) (string, bool) {
	for rest := subject; ; {
		i := strings.IndexByte(rest, '[')
		if i < 0 {
			return "", false
		}
		j := strings.IndexByte(rest[i:], ']')
		if j < 0 {
			return "", false
		}
		tag := strings.ToLower(rest[i+1 : i+j])
		rest = rest[i+j+1:]
		if !strings.Contains(tag, "patch") && !strings.Contains(tag, "rfc") {
			continue
		}
		if m := seriesPartRE.FindStringSubmatchIndex("[" + tag + "]"); m != nil {
			tag = tag[:max(m[3]-1, 0)] // what comes before the numbers
		}
		return strings.Join(strings.Fields(tag), " "), true
	}
}
