package catalog

import (
	"net/mail"
	"slices"
	"strings"
	"time"
	"unicode"

	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/mailwire"
	"github.com/chibrary/chibrary/store"
)

// Unlisted is the list of a message archived without --list and without a
// List-Id header.
const Unlisted = "unlisted"

// DateSource says where a message's date comes from (Arrival).
type DateSource int

const (
	// DateHeader: the message's Date header.
	DateHeader DateSource = iota
	// DateReceived: the topmost Received header (Arrival).
	DateReceived
	// DateArchived: the time the archive stored it.
	DateArchived
)

// MarshalText names the source in JSON.
func (s DateSource) MarshalText() ([]byte, error) { return []byte(s.String()), nil }

// String names the source: "date", "received" or "archived".
func (s DateSource) String() string {
	switch s {
	case DateHeader:
		return "date"
	case DateReceived:
		return "received"
	}
	return "archived"
}

// doc is what the catalog keeps of one message.
type doc struct {
	cn          string
	list        string
	date        time.Time
	dateSource  DateSource
	fromName    string
	fromAddr    string
	subject     string
	base        string
	reply       bool
	msgid       string
	refs        []string // the IDs it names, parent last (see references)
	size        int
	wireSize    int64 // with CRLF line ends (mailwire)
	lines       int   // of the body
	attachments int
	added       time.Time
	// arrived is when the list had it (Arrival).
	arrived time.Time
	// via is the list's address when the list rewrote the From (RealSender).
	via string
	// listPost is the list's address its List-Post header names, or "".
	listPost string
	// listDescription and listSubscribe are what its List-Id and
	// List-Subscribe say of the list (listinfo.go), or "".
	listDescription, listSubscribe string
	// body and quoted are the text the search index keeps (indexText).
	body, quoted string
	// files is the paths its patches touch (filesText).
	files string
	// The diff lines of body, which body then no longer has, and the
	// rest of what public-inbox's search reads (diffindex.go): its
	// attachments' names, To, Cc and List-Id.
	dfa, dfb, dfctx, dfhh, dfpre, dfpost, patchID string
	names, to, cc, listID                         string
	// changeID is b4's change-id of a patch that is not a reply
	// (changeid.go), or "".
	changeID string
	// stat is what the diff of such a patch changes (versions.go).
	stat patchStat
	// sketch and quotes are what subject threading compares (subject.go).
	sketch []byte
	quotes []uint64
	// spooled, in a rebuild, is its text for the spool (spoolBlock).
	spooled []byte
}

// extract reads what the catalog keeps from a stored message. It never
// fails: mail that does not parse still gets a row.
func extract(m store.Stored, opts mailview.Options) doc {
	// Attachments are counted, not read: their sizes are not kept.
	opts.SkipAttachments = true
	v := mailview.Parse(m.Raw, opts)
	d := doc{
		cn:          m.Number.String(),
		subject:     v.Subject,
		msgid:       v.MessageID,
		size:        len(m.Raw),
		attachments: len(v.Attachments),
		added:       m.Added.UTC(),
	}
	d.body, d.quoted = indexText(v)
	d.wireSize, d.lines = mailwire.Size(m.Raw)
	if d.msgid == "" {
		d.msgid = m.MessageID
	}
	d.base, d.reply = BaseSubject(d.subject)
	d.refs = references(v.References, v.InReplyTo, d.msgid)
	var from, date, listID string
	var to, cc []string
	for _, f := range v.Fields {
		switch f.Name {
		case "From":
			from = f.Value
		case "Date":
			date = f.Value
		case "List-Id":
			listID = f.Value
		}
	}
	// Every To and Cc field (some mailers write one per recipient).
	for _, f := range v.Header {
		switch {
		case strings.EqualFold(f.Name, "To"):
			to = append(to, f.Value)
		case strings.EqualFold(f.Name, "Cc"):
			cc = append(cc, f.Value)
		}
	}
	d.to, d.cc = strings.Join(to, "\n"), strings.Join(cc, "\n")
	if i := strings.LastIndexByte(listID, '<'); i >= 0 {
		if j := strings.IndexByte(listID[i:], '>'); j > 0 {
			d.listID = strings.ToLower(listID[i+1 : i+j])
		}
	}
	var names []string
	for _, a := range v.Attachments {
		if a.Name != "" {
			names = append(names, a.Name)
		}
	}
	d.names = strings.Join(names, "\n")
	snd := RealSender(v.Header)
	if snd.Name == "" && snd.Addr == "" {
		snd.Name, snd.Addr = sender(from)
	}
	d.fromName, d.fromAddr, d.via = snd.Name, snd.Addr, snd.Via
	d.listPost = ListPost(v.Header)
	d.listDescription, d.listSubscribe = ListDescription(v.Header), ListSubscribe(v.Header)
	patchDiff, hasDiff := diffOf(d.body)
	if hasDiff {
		d.files = filesText(patchDiff)
	}
	if len(d.refs) == 0 {
		d.sketch = sketch(d.body)
	}
	d.patchID = patchID(d.body)
	if _, patch := patchVersion(d.subject); patch && !d.reply {
		d.changeID = ChangeID(v.Header, d.body)
		if hasDiff {
			d.stat = statOf(patchDiff)
		}
	}
	var diff *diffText
	d.body, diff = splitDiff(d.body)
	d.dfa, d.dfb, d.dfctx, d.dfhh = diff.removed.String(), diff.added.String(), diff.context.String(), diff.hunks.String()
	d.dfpre, d.dfpost = diff.pre.String(), diff.post.String()
	d.quotes = quoteHashes(d.quoted)
	d.list = ListName(m.List)
	if d.list == "" {
		d.list = listFromID(listID)
	}
	if d.list == "" {
		d.list = Unlisted
	}
	d.date, d.dateSource, d.arrived = Arrival(date, received(v.Header), d.added)
	return d
}

// Date windows of Arrival: a Date header this long before the message
// reached the list's server, or after, is taken for a wrong clock.
const (
	maxTransit = 30 * 24 * time.Hour
	maxAhead   = 24 * time.Hour
)

// Arrival returns the date a message is shown and put in its month by, its
// source, and when the list had it (what "newest" orders by), given its
// Date header, the dates of its Received headers, topmost first (none for
// none), and when it was archived. A plausible topmost Received date
// overrides a Date header more than maxTransit before or maxAhead after
// it (a clock years off), unless a Received date below it agrees with the
// Date and no hop after that one is dated before it: then the message was
// written and sent when it says, and a list server sent it out again
// later (a re-delivery), which moves neither its month nor its arrival.
// (A sender's own server, stamping with the sender's wrong clock, is
// followed by a hop dated before it, which tells the two apart.)
func Arrival(date string, received []string, added time.Time) (time.Time, DateSource, time.Time) {
	var rt time.Time
	rok := false
	if len(received) > 0 {
		rt, rok = plausible(received[0], added)
	}
	dt, dok := plausible(date, added)
	agrees := func(hop time.Time) bool { return !dt.Before(hop.Add(-maxTransit)) && !dt.After(hop.Add(maxAhead)) }
	if dok && (!rok || agrees(rt)) {
		if rok {
			return dt, DateHeader, rt
		}
		return dt, DateHeader, dt
	}
	if dok && rok {
		// From the top down, the earliest hop seen so far: a hop that
		// agrees with the Date counts when none above it is earlier.
		earliest := rt
		for _, r := range received[1:] {
			hop, ok := plausible(r, added)
			if !ok {
				continue
			}
			if hop.After(earliest.Add(maxAhead)) {
				break // time ran backwards: a wrong clock from here down
			}
			if agrees(hop) {
				return dt, DateHeader, hop
			}
			earliest = hop
		}
	}
	if rok {
		return rt, DateReceived, rt
	}
	return added, DateArchived, added
}

// ListPost returns the address of a List-Post header (RFC 2369 section
// 3.4: <mailto:list@host>), or "" (also for "NO").
func ListPost(h []mailview.Field) string {
	for _, f := range h {
		if !strings.EqualFold(f.Name, "List-Post") {
			continue
		}
		v := f.Value
		i := strings.Index(lowerASCII(v), "<mailto:")
		if i < 0 {
			return ""
		}
		v = v[i+len("<mailto:"):]
		j := strings.IndexAny(v, ">?")
		if j < 0 {
			return ""
		}
		addr := strings.TrimSpace(v[:j])
		if a, err := mail.ParseAddress(addr); err == nil {
			return a.Address
		}
		return ""
	}
	return ""
}

// MaxReferences is how many of the IDs a message names are kept: the last.
const MaxReferences = 50

// references returns the IDs a message names, parent last, without its own
// ID and repeats, at most MaxReferences. As JWZ advises, References wins
// (RFC 5322 section 3.6.4: its last ID is the parent); In-Reply-To is used
// only without it, and only its first ID: old mailers wrote "In-Reply-To:
// <user@host>'s message of ..." with an address in the brackets. IDs that
// cannot be a message's (realID) are left out first, so that "<1>" named
// by unrelated patches joins none of them.
func references(refs, inReplyTo []string, own string) []string {
	refs, inReplyTo = realIDs(refs), realIDs(inReplyTo)
	if len(refs) == 0 && len(inReplyTo) > 0 {
		refs = inReplyTo[:1]
	}
	// Read from the end, so that a message naming any number of IDs costs
	// no more than one naming MaxReferences.
	seen := map[string]bool{own: true, "": true}
	var out []string
	for i := len(refs) - 1; i >= 0 && len(out) < MaxReferences; i-- {
		if id := refs[i]; !seen[id] {
			seen[id] = true
			out = append(out, id)
		}
	}
	slices.Reverse(out)
	return out
}

// maxHops bounds the Received headers read: real mail has a dozen.
const maxHops = 50

// realID reports whether id can be a Message-ID another message has:
// RFC 5322 section 3.6.4's id-left "@" id-right, neither side empty, or
// the "left at right" that pipermail's text archives make of every
// address, Message-IDs included. Some git send-email users answered its
// "Message-ID to be used as In-Reply-To" with "1" or "2", writing
// References: <1> into patches that have nothing to do with each other.
func realID(id string) bool {
	if i := strings.LastIndexByte(id, '@'); i > 0 && i < len(id)-1 {
		return true
	}
	left, right, ok := strings.Cut(id, " at ")
	return ok && strings.TrimSpace(left) != "" && strings.TrimSpace(right) != ""
}

// realIDs returns ids without those that cannot be real (realID); ids
// itself when all can.
func realIDs(ids []string) []string {
	for i, id := range ids {
		if !realID(id) {
			out := slices.Clone(ids[:i])
			for _, id := range ids[i+1:] {
				if realID(id) {
					out = append(out, id)
				}
			}
			return out
		}
	}
	return ids
}

// received returns the dates of the Received headers (RFC 5321 section
// 4.4: the text after its last semicolon), topmost first, "" for one
// without; at most maxHops.
func received(h []mailview.Field) []string {
	var out []string
	for _, f := range h {
		if len(out) == maxHops {
			break
		}
		if strings.EqualFold(f.Name, "Received") {
			d := ""
			if i := strings.LastIndexByte(f.Value, ';'); i >= 0 {
				d = strings.TrimSpace(f.Value[i+1:])
			}
			out = append(out, d)
		}
	}
	return out
}

// plausible parses an RFC 5322 date and accepts it if it lies between 1970
// and two days after the message was archived: real archives hold dates of
// 1900, 2038 and clocks set to the epoch.
func plausible(s string, added time.Time) (time.Time, bool) {
	if s == "" {
		return time.Time{}, false
	}
	t, err := mail.ParseDate(s)
	if err != nil {
		// Trailing comments like "(PDT)" or "(MET DST)" trip the parser.
		if i := strings.IndexByte(s, '('); i > 0 {
			t, err = mail.ParseDate(strings.TrimSpace(s[:i]))
		}
		if err != nil {
			return time.Time{}, false
		}
	}
	t = t.UTC()
	if t.Before(time.Date(1970, 1, 2, 0, 0, 0, 0, time.UTC)) || t.After(added.Add(48*time.Hour)) {
		return time.Time{}, false
	}
	return t, true
}

// sender splits a decoded From field into a display name and an address.
func sender(from string) (name, addr string) {
	if from == "" {
		return "", ""
	}
	if a, err := mail.ParseAddress(from); err == nil {
		return strings.TrimSpace(a.Name), a.Address
	}
	if as, err := mail.ParseAddressList(from); err == nil && len(as) > 0 {
		return strings.TrimSpace(as[0].Name), as[0].Address
	}
	// Unparseable: "Name <addr>" loosely, or an address in old "addr (Name)" form.
	if i := strings.LastIndexByte(from, '<'); i >= 0 {
		if j := strings.IndexByte(from[i:], '>'); j > 0 {
			return strings.Trim(strings.TrimSpace(from[:i]), `"`), strings.TrimSpace(from[i+1 : i+j])
		}
	}
	if i := strings.IndexByte(from, '('); i > 0 && strings.HasSuffix(from, ")") {
		return strings.TrimSpace(from[i+1 : len(from)-1]), strings.TrimSpace(from[:i])
	}
	if strings.Contains(from, "@") && !strings.ContainsAny(from, " \t") {
		return "", from
	}
	return from, ""
}

// ListName returns the form a list name takes in the catalog and in URLs
// (store.ListName: the one place list names are made canonical).
func ListName(s string) string { return store.ListName(s) }

// ValidListName reports whether s is a list name as ListName writes it.
func ValidListName(s string) bool { return s != "" && ListName(s) == s }

// listFromID returns the list named by a List-Id header value (RFC 2919
// section 3: the list-id between angle brackets, after an optional phrase).
func listFromID(v string) string {
	if i := strings.LastIndexByte(v, '<'); i >= 0 {
		if j := strings.IndexByte(v[i:], '>'); j > 0 {
			return ListName(v[i+1 : i+j])
		}
	}
	return ListName(v)
}

// replyPrefixes mark a reply in a subject: English and the usual
// translations (German, Scandinavian, Dutch, Polish, Italian, Finnish).
var replyPrefixes = []string{"re", "aw", "sv", "antw", "odp", "rif", "vs"}

// BaseSubject returns a subject as threads are grouped by, without reply
// and forward prefixes ("Re:", "Re[2]:", "AW:") and leading [tags], white
// space collapsed, lower-case; and whether a reply prefix was there.
func BaseSubject(s string) (base string, reply bool) {
	s = strings.TrimSpace(s)
	for {
		if strings.HasPrefix(s, "[") {
			if j := strings.IndexByte(s, ']'); j > 0 && j < 60 {
				s = strings.TrimSpace(s[j+1:])
				continue
			}
		}
		word, rest, ok := prefix(s)
		if !ok {
			break
		}
		switch {
		case word == "fwd" || word == "fw":
		case isReply(word):
			reply = true
		default:
			ok = false
		}
		if !ok {
			break
		}
		s = strings.TrimSpace(rest)
	}
	// A subject renamed in passing keeps the old one in "(was: ...)": the
	// thread goes on under the new one, which its replies often keep
	// alone ("Re: IP27: BUG() [was: Random hard locks]", then "Re: IP27:
	// BUG()").
	l := lowerASCII(s)
	for _, was := range []string{" (was:", " [was:", " (was ", " [was "} {
		if i := strings.Index(l, was); i > 0 {
			s, l = s[:i], l[:i]
		}
	}
	return strings.ToLower(strings.Join(strings.FieldsFunc(s, unicode.IsSpace), " ")), reply
}

func isReply(w string) bool {
	for _, p := range replyPrefixes {
		if w == p {
			return true
		}
	}
	return false
}

// prefix splits "Re: x", "RE[2]: x", "Re^3: x" and "Re(2): x" into the
// lower-case word and the rest.
func prefix(s string) (word, rest string, ok bool) {
	i := 0
	for i < len(s) && i < 5 && (s[i] >= 'a' && s[i] <= 'z' || s[i] >= 'A' && s[i] <= 'Z') {
		i++
	}
	if i == 0 {
		return "", "", false
	}
	word = strings.ToLower(s[:i])
	j := i
	if j < len(s) && (s[j] == '[' || s[j] == '(' || s[j] == '^') {
		k := j + 1
		for k < len(s) && s[k] >= '0' && s[k] <= '9' {
			k++
		}
		if k < len(s) && (s[j] == '^' || s[k] == ']' || s[k] == ')') {
			if s[j] != '^' {
				k++
			}
			j = k
		}
	}
	if j < len(s) && s[j] == ':' {
		return word, s[j+1:], true
	}
	return "", "", false
}
