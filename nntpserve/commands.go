package nntpserve

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"math"
	"mime"
	"net/mail"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/emersion/go-message/textproto"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailwire"
	"github.com/chibrary/chibrary/store"
)

const (
	// chunk is how many catalog rows a long answer reads at a time.
	chunk = 500
	// maxNewNews bounds the message-ids of one NEWNEWS.
	maxNewNews = 100000
)

// errFault is a catalog or store error, answered 403 (RFC 3977 section
// 3.2.1).
var errFault = errors.New("nntpserve: internal fault")

// overviewFormat is the overview's fields after the article number (RFC
// 3977 section 8.4).
var overviewFormat = []string{"Subject:", "From:", "Date:", "Message-ID:", "References:", ":bytes", ":lines"}

// dispatch answers one command; quit ends the connection.
func (cn *conn) dispatch(cmd command) (quit bool, err error) {
	code := 0
	defer func() {
		result := "error"
		if code > 0 {
			result = fmt.Sprintf("%dxx", code/100)
		}
		name := cmd.name
		if _, known := handlers[name]; !known {
			name = "unknown"
		}
		cn.s.m.commands.WithLabelValues(name, result).Inc()
	}()
	h, ok := handlers[cmd.name]
	if !ok {
		code = 500
		cn.reply(code, "unknown command")
		return false, nil
	}
	// One catalog for the whole command: the one the keeper serves now.
	c, release := cn.s.cats.Current()
	defer func() {
		cn.cat = nil
		release()
	}()
	if c == nil && !catalogFree[cmd.name] {
		code = 403
		cn.reply(code, "the archive's index of its lists is not there right now (it is being built again); try again shortly")
		return false, nil
	}
	cn.cat = c
	code, err = h(cn, cmd.args)
	if errors.Is(err, errFault) {
		code = 403
		cn.reply(code, "the archive cannot be read right now; try again later")
		return false, nil
	}
	return cmd.name == "QUIT", err
}

// catalogFree are the commands answered without the catalog.
var catalogFree = map[string]bool{
	"CAPABILITIES": true, "MODE": true, "QUIT": true, "DATE": true, "HELP": true,
	"POST": true, "IHAVE": true, "AUTHINFO": true, "STARTTLS": true,
}

// A handler answers a command and returns the code it answered with.
type handler func(cn *conn, args []string) (int, error)

var handlers map[string]handler

func init() {
	handlers = map[string]handler{
		"CAPABILITIES": (*conn).capabilities,
		"MODE":         (*conn).mode,
		"QUIT":         func(cn *conn, _ []string) (int, error) { cn.reply(205, "bye"); return 205, nil },
		"DATE":         (*conn).date,
		"HELP":         (*conn).help,
		"LIST":         (*conn).list,
		"GROUP":        (*conn).groupCmd,
		"LISTGROUP":    (*conn).listGroup,
		"LAST":         func(cn *conn, args []string) (int, error) { return cn.step(args, true) },
		"NEXT":         func(cn *conn, args []string) (int, error) { return cn.step(args, false) },
		"ARTICLE":      func(cn *conn, args []string) (int, error) { return cn.sendArticle(args, 220) },
		"HEAD":         func(cn *conn, args []string) (int, error) { return cn.sendArticle(args, 221) },
		"BODY":         func(cn *conn, args []string) (int, error) { return cn.sendArticle(args, 222) },
		"STAT":         func(cn *conn, args []string) (int, error) { return cn.sendArticle(args, 223) },
		"OVER":         (*conn).over,
		"XOVER":        (*conn).over,
		"HDR":          func(cn *conn, args []string) (int, error) { return cn.hdr(args, 225) },
		"XHDR":         func(cn *conn, args []string) (int, error) { return cn.hdr(args, 221) }, // RFC 2980 section 2.6
		"NEWNEWS":      (*conn).newNews,
		"NEWGROUPS":    (*conn).newGroups,
		"POST":         func(cn *conn, _ []string) (int, error) { cn.reply(440, "posting not permitted"); return 440, nil },
		"IHAVE":        func(cn *conn, _ []string) (int, error) { cn.reply(435, "article not wanted"); return 435, nil },
		"AUTHINFO":     (*conn).authinfo,
		"STARTTLS":     (*conn).startTLS,
	}
}

func (cn *conn) syntax() (int, error) {
	cn.reply(501, "syntax error")
	return 501, nil
}

// text writes a multi-line block's lines, dot-stuffed (RFC 3977 section
// 3.1.1), and its terminating dot.
func (cn *conn) text(lines ...string) {
	for _, l := range lines {
		if strings.HasPrefix(l, ".") {
			cn.bw.WriteByte('.')
		}
		cn.bw.WriteString(l)
		cn.bw.WriteString("\r\n")
	}
}

func (cn *conn) end() { cn.bw.WriteString(".\r\n") }

func (cn *conn) capabilities(args []string) (int, error) {
	cn.reply(101, "capability list follows")
	caps := []string{"VERSION 2", "READER", "LIST ACTIVE NEWSGROUPS OVERVIEW.FMT HEADERS", "OVER MSGID", "HDR", "NEWNEWS", "AUTHINFO USER", "IMPLEMENTATION chibrary"}
	if cn.s.opts.TLS != nil && !cn.tls {
		caps = append(caps, "STARTTLS")
	}
	cn.text(caps...)
	cn.end()
	return 101, nil
}

func (cn *conn) mode(args []string) (int, error) {
	if len(args) != 1 || !strings.EqualFold(args[0], "READER") {
		return cn.syntax()
	}
	cn.reply(201, "reader mode, posting not permitted")
	return 201, nil
}

func (cn *conn) date(args []string) (int, error) {
	cn.reply(111, "%s", time.Now().UTC().Format("20060102150405"))
	return 111, nil
}

func (cn *conn) help(args []string) (int, error) {
	cn.reply(100, "help text follows")
	cn.text("This archive is read-only: every mailing list is a newsgroup "+cn.s.opts.Prefix+".LIST.",
		"Commands: CAPABILITIES MODE LIST GROUP LISTGROUP LAST NEXT ARTICLE HEAD BODY STAT",
		"          OVER XOVER HDR XHDR NEWNEWS NEWGROUPS DATE HELP AUTHINFO STARTTLS QUIT")
	cn.end()
	return 100, nil
}

func (cn *conn) authinfo(args []string) (int, error) {
	if len(args) != 2 {
		return cn.syntax()
	}
	switch strings.ToUpper(args[0]) {
	case "USER":
		cn.reply(381, "any password")
		return 381, nil
	case "PASS":
		cn.reply(281, "welcome: this archive is open to all")
		return 281, nil
	}
	cn.reply(503, "only AUTHINFO USER and PASS, and any will do")
	return 503, nil
}

// startTLS starts TLS (RFC 4642): the state is reset, as the client
// must ask for the capabilities again.
func (cn *conn) startTLS(args []string) (int, error) {
	if len(args) != 0 {
		return cn.syntax()
	}
	if cn.tls {
		cn.reply(502, "already using TLS")
		return 502, nil
	}
	if cn.s.opts.TLS == nil {
		cn.reply(580, "TLS is not offered here")
		return 580, nil
	}
	cn.reply(382, "continue with TLS negotiation")
	if err := cn.flush(); err != nil {
		return 382, err
	}
	if cn.br.Buffered() > 0 {
		return 382, errors.New("nntpserve: data sent before the TLS handshake")
	}
	tc := tls.Server(cn.c, cn.s.opts.TLS)
	cn.c.SetDeadline(time.Now().Add(30 * time.Second))
	if err := tc.HandshakeContext(cn.ctx); err != nil {
		return 382, err
	}
	cn.attach(tc)
	cn.tls, cn.group, cn.article = true, "", 0
	return 382, nil
}

// group returns the list of a newsgroup name, or "".
func (cn *conn) listOf(group string) string {
	list, ok := strings.CutPrefix(group, cn.s.opts.Prefix+".")
	if !ok || catalog.ListName(list) != list {
		return ""
	}
	return list
}

func (cn *conn) groupName(list string) string { return cn.s.opts.Prefix + "." + list }

// mailbox reads a list's numbers, errFault on a catalog error.
func (cn *conn) mailbox(list string) (catalog.Mailbox, bool, error) {
	b, err := cn.cat.Mailbox(cn.ctx, list)
	if errors.Is(err, catalog.ErrNotFound) {
		return catalog.Mailbox{}, false, nil
	}
	if err != nil {
		return catalog.Mailbox{}, false, cn.fault("read group "+list, err)
	}
	return b, true, nil
}

// fault logs a catalog or store error and returns errFault.
func (cn *conn) fault(what string, err error) error {
	cn.s.cats.Notice(cn.cat, err)
	if cn.ctx.Err() == nil {
		cn.s.log.Error("cannot "+what, "err", err)
	}
	return fmt.Errorf("%w: %w", errFault, err)
}

// lowHigh are a group's low and high water marks (RFC 3977 section
// 6.1.1.2: an empty group's high is one below its low).
func lowHigh(b catalog.Mailbox) (uint32, uint32) {
	if b.Messages == 0 {
		return b.Next, b.Next - 1
	}
	return b.Low, b.High
}

func (cn *conn) groupCmd(args []string) (int, error) {
	if len(args) != 1 {
		return cn.syntax()
	}
	list := cn.listOf(args[0])
	b, ok, err := cn.mailbox(list)
	if err != nil {
		return 0, err
	}
	if list == "" || !ok {
		cn.reply(411, "no such newsgroup")
		return 411, nil
	}
	low, high := lowHigh(b)
	cn.group, cn.article = list, 0
	if b.Messages > 0 {
		cn.article = low
	}
	cn.reply(211, "%d %d %d %s", b.Messages, low, high, args[0])
	return 211, nil
}

func (cn *conn) listGroup(args []string) (int, error) {
	if len(args) > 2 {
		return cn.syntax()
	}
	list, name := cn.group, cn.groupName(cn.group)
	if len(args) > 0 {
		list, name = cn.listOf(args[0]), args[0]
		if list == "" {
			cn.reply(411, "no such newsgroup")
			return 411, nil
		}
	} else if list == "" {
		cn.reply(412, "no newsgroup selected")
		return 412, nil
	}
	r := articleRange{1, math.MaxUint32}
	if len(args) == 2 {
		var err error
		if r, err = parseRange(args[1]); err != nil {
			return cn.syntax()
		}
	}
	b, ok, err := cn.mailbox(list)
	if err != nil {
		return 0, err
	}
	if !ok {
		cn.reply(411, "no such newsgroup")
		return 411, nil
	}
	nums, err := cn.cat.Numbers(cn.ctx, list, max(r.lo, 1))
	if err != nil {
		return 0, cn.fault("read group "+list, err)
	}
	low, high := lowHigh(b)
	cn.group, cn.article = list, 0
	if b.Messages > 0 {
		cn.article = low
	}
	cn.reply(211, "%d %d %d %s list follows", b.Messages, low, high, name)
	for _, n := range nums {
		if n > r.hi {
			break
		}
		cn.bw.WriteString(strconv.FormatUint(uint64(n), 10))
		cn.bw.WriteString("\r\n")
	}
	cn.end()
	return 211, nil
}

// step answers LAST and NEXT.
func (cn *conn) step(args []string, back bool) (int, error) {
	if len(args) != 0 {
		return cn.syntax()
	}
	if cn.group == "" {
		cn.reply(412, "no newsgroup selected")
		return 412, nil
	}
	if cn.article == 0 {
		cn.reply(420, "current article number is invalid")
		return 420, nil
	}
	n, ok, err := cn.cat.Neighbour(cn.ctx, cn.group, cn.article, back)
	if err != nil {
		return 0, cn.fault("read group "+cn.group, err)
	}
	if !ok {
		if back {
			cn.reply(422, "no previous article in this group")
			return 422, nil
		}
		cn.reply(421, "no next article in this group")
		return 421, nil
	}
	es, err := cn.cat.Entries(cn.ctx, cn.group, n, n, 1, false)
	if err != nil {
		return 0, cn.fault("read group "+cn.group, err)
	}
	cn.article = n
	id := ""
	if len(es) == 1 {
		id = es[0].MessageID
	}
	cn.reply(223, "%d <%s>", n, id)
	return 223, nil
}

// lookup finds the article an ARTICLE-like command names: a message-id,
// a number in the selected group, or the current article. It answers the
// errors itself (code != 0).
func (cn *conn) lookup(args []string) (e catalog.Entry, num uint32, code int, err error) {
	switch {
	case len(args) > 1:
		code, err = cn.syntax()
		return
	case len(args) == 1 && isMsgID(args[0]):
		id, perr := parseMsgID(args[0])
		if perr != nil {
			code, err = cn.syntax()
			return
		}
		es, lerr := cn.cat.EntriesByMessageID(cn.ctx, id)
		if lerr != nil {
			return e, 0, 0, cn.fault("find message <"+id+">", lerr)
		}
		if len(es) == 0 {
			cn.reply(430, "no article with that message-id")
			return e, 0, 430, nil
		}
		// Several messages with one Message-ID: the first archived.
		return es[0], 0, 0, nil
	}
	if cn.group == "" {
		cn.reply(412, "no newsgroup selected")
		return e, 0, 412, nil
	}
	n := cn.article
	if len(args) == 1 {
		var perr error
		if n, perr = parseNumber(args[0]); perr != nil {
			code, err = cn.syntax()
			return
		}
	} else if n == 0 {
		cn.reply(420, "current article number is invalid")
		return e, 0, 420, nil
	}
	es, lerr := cn.cat.Entries(cn.ctx, cn.group, n, n, 1, true)
	if lerr != nil {
		return e, 0, 0, cn.fault("read group "+cn.group, lerr)
	}
	if len(es) == 0 {
		if len(args) == 0 {
			cn.reply(420, "current article number is invalid")
			return e, 0, 420, nil
		}
		cn.reply(423, "no article with that number")
		return e, 0, 423, nil
	}
	if len(args) == 1 {
		cn.article = n
	}
	return es[0], n, 0, nil
}

// sendArticle answers ARTICLE (220), HEAD (221), BODY (222) and STAT (223).
func (cn *conn) sendArticle(args []string, code int) (int, error) {
	e, n, c, err := cn.lookup(args)
	if c != 0 || err != nil {
		return c, err
	}
	if code == 223 {
		cn.reply(223, "%d <%s>", n, e.MessageID)
		return 223, nil
	}
	art, err := cn.open(&e)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRemoved) {
		cn.reply(423, "no article with that number")
		return 423, nil
	}
	if err != nil {
		return 0, err
	}
	defer art.release()
	r := io.NewSectionReader(art.ReaderAt, 0, art.size)
	switch code {
	case 221:
		// The header without the blank line that ends it.
		head := art.body
		var end [4]byte
		if n, _ := art.ReadAt(end[:], head-4); n == 4 && string(end[:]) == "\r\n\r\n" {
			head -= 2
		}
		r = io.NewSectionReader(art.ReaderAt, 0, head)
	case 222:
		r = io.NewSectionReader(art.ReaderAt, art.body, art.size-art.body)
	}
	cn.reply(code, "%d <%s>", n, e.MessageID)
	if err := cn.block(r); err != nil {
		// Half an article is sent: the connection cannot go on.
		cn.s.log.Error("cannot send an article", "callnumber", e.CallNumber, "err", err)
		return 0, fmt.Errorf("cannot send article %s: %w", e.CallNumber, err)
	}
	cn.s.m.articles.Inc()
	return code, nil
}

// spoolThreshold is the largest article (its wire form) a connection
// holds in memory while it sends it. A larger one is sent from a spool
// file that every connection sending it shares (package spool): a
// client that reads slowly, or not at all, then holds a file's place,
// not the message.
const spoolThreshold = 1 << 20

// article is a message's wire form, in memory or in a spool file.
type article struct {
	io.ReaderAt
	size, body int64 // its length, where its body starts
	release    func()
}

// open returns the wire form of e's message.
func (cn *conn) open(e *catalog.Entry) (*article, error) {
	if e.WireSize <= cn.s.spoolAbove {
		raw, err := cn.get(e.CallNumber)
		if err != nil {
			return nil, err
		}
		wire := mailwire.AppendCRLF(nil, raw)
		return &article{bytes.NewReader(wire), int64(len(wire)), int64(mailwire.BodyStart(wire)), func() {}}, nil
	}
	b, err := cn.s.spools.Get(cn.ctx, "nntp/"+e.CallNumber, func(w io.Writer) (any, error) {
		raw, err := cn.get(e.CallNumber)
		if err != nil {
			return nil, err
		}
		wire := mailwire.AppendCRLF(nil, raw)
		_, err = w.Write(wire)
		return int64(mailwire.BodyStart(wire)), err
	})
	if err != nil {
		return nil, err
	}
	return &article{b.Open(), b.Size(), b.Info().(int64), func() { cn.s.spools.Release(b) }}, nil
}

// get reads a message from the store, errFault on an error other than
// store.ErrNotFound.
func (cn *conn) get(cn8 string) ([]byte, error) {
	n, err := callnumber.Parse(cn8)
	if err != nil {
		return nil, cn.fault("read message "+cn8, err)
	}
	m, err := cn.s.st.Get(cn.ctx, n)
	if errors.Is(err, store.ErrRemoved) {
		return nil, err // since the catalog was read
	}
	if errors.Is(err, store.ErrNotFound) {
		cn.s.log.Warn("a message of the catalog is not in the store", "callnumber", cn8)
		return nil, err
	}
	if err != nil {
		return nil, cn.fault("read message "+cn8, err)
	}
	return m.Raw, nil
}

// block writes r, CRLF lines, dot-stuffed, a piece at a time, ending its
// last line if it has no end, then the terminating dot; it fails only
// as reading r does (a write error shows at the next flush).
func (cn *conn) block(r io.Reader) error {
	br := cn.s.readers.Get().(*bufio.Reader)
	defer cn.s.readers.Put(br)
	br.Reset(r)
	start := true // at the start of a line
	for {
		chunk, err := br.ReadSlice('\n')
		if len(chunk) > 0 {
			if start && chunk[0] == '.' {
				cn.bw.WriteByte('.')
			}
			cn.bw.Write(chunk)
			start = chunk[len(chunk)-1] == '\n'
		}
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil && !errors.Is(err, bufio.ErrBufferFull) {
			br.Reset(nil)
			return err
		}
	}
	br.Reset(nil)
	if !start {
		cn.bw.WriteString("\r\n")
	}
	cn.end()
	return nil
}

// entries calls fn with the catalog rows of the selected group's
// articles in r, a chunk at a time.
func (cn *conn) entries(r articleRange, refs bool, fn func([]catalog.Entry)) error {
	for lo := max(r.lo, 1); lo <= r.hi; {
		es, err := cn.cat.Entries(cn.ctx, cn.group, lo, r.hi, chunk, refs)
		if err != nil {
			return cn.fault("read group "+cn.group, err)
		}
		if len(es) == 0 {
			return nil
		}
		fn(es)
		last := es[len(es)-1].Num
		if len(es) < chunk || last == math.MaxUint32 {
			return nil
		}
		lo = last + 1
	}
	return nil
}

// rangeArg reads the range argument of OVER and HDR: a range, a
// message-id, or none (the current article). It answers the errors
// itself (code != 0).
func (cn *conn) rangeArg(args []string) (r articleRange, byID *catalog.Entry, code int, err error) {
	if len(args) == 1 && isMsgID(args[0]) {
		e, _, c, err := cn.lookup(args)
		if c != 0 || err != nil {
			return r, nil, c, err
		}
		return r, &e, 0, nil
	}
	if cn.group == "" {
		cn.reply(412, "no newsgroup selected")
		return r, nil, 412, nil
	}
	switch len(args) {
	case 0:
		if cn.article == 0 {
			cn.reply(420, "current article number is invalid")
			return r, nil, 420, nil
		}
		return articleRange{cn.article, cn.article}, nil, 0, nil
	case 1:
		r, perr := parseRange(args[0])
		if perr != nil {
			code, err = cn.syntax()
			return r, nil, code, err
		}
		return r, nil, 0, nil
	}
	code, err = cn.syntax()
	return r, nil, code, err
}

// over answers OVER and XOVER (RFC 3977 section 8.3).
func (cn *conn) over(args []string) (int, error) {
	r, byID, code, err := cn.rangeArg(args)
	if code != 0 || err != nil {
		return code, err
	}
	if byID != nil {
		cn.reply(224, "overview information follows")
		cn.overview(byID, 0)
		cn.end()
		return 224, nil
	}
	// Read the first chunk before answering, so that a range with no
	// article is told as such.
	first, err := cn.cat.Entries(cn.ctx, cn.group, max(r.lo, 1), r.hi, chunk, true)
	if err != nil {
		return 0, cn.fault("read group "+cn.group, err)
	}
	if len(first) == 0 {
		cn.reply(423, "no articles in that range")
		return 423, nil
	}
	cn.reply(224, "overview information follows")
	write := func(es []catalog.Entry) {
		for i := range es {
			cn.overview(&es[i], es[i].Num)
		}
	}
	write(first)
	if last := first[len(first)-1].Num; len(first) == chunk && last < r.hi {
		if err := cn.entries(articleRange{last + 1, r.hi}, true, write); err != nil {
			// The answer is under way: end it.
			cn.end()
			return 224, err
		}
	}
	cn.end()
	return 224, nil
}

// overview writes one overview line.
func (cn *conn) overview(e *catalog.Entry, n uint32) {
	fields := []string{strconv.FormatUint(uint64(n), 10)}
	for _, f := range overviewFormat {
		fields = append(fields, field(e, f))
	}
	cn.bw.WriteString(strings.Join(fields, "\t"))
	cn.bw.WriteString("\r\n")
}

// field returns a header or metadata item of e as the overview and HDR
// give it, "" when the catalog does not have it (ok false).
func fieldOK(e *catalog.Entry, name string) (string, bool) {
	var v string
	switch strings.ToLower(strings.TrimSuffix(name, ":")) {
	case "subject":
		v = encodeWords(e.Subject)
	case "from":
		v = from(e)
	case "date":
		v = e.Date.UTC().Format("Mon, 02 Jan 2006 15:04:05 -0700")
	case "message-id":
		if e.MessageID != "" {
			v = "<" + e.MessageID + ">"
		}
	case "references":
		var b strings.Builder
		for i, r := range e.References {
			if i > 0 {
				b.WriteByte(' ')
			}
			b.WriteString("<" + r + ">")
		}
		v = b.String()
	case ":bytes":
		v = strconv.FormatInt(e.WireSize, 10)
	case ":lines":
		v = strconv.Itoa(e.Lines)
	default:
		return "", false
	}
	return clean(v), true
}

func field(e *catalog.Entry, name string) string {
	v, _ := fieldOK(e, name)
	return v
}

// clean makes a value fit on an overview or HDR line: no CR, LF, NUL or
// TAB (RFC 3977 section 8.3.2: CRLF removed, TAB as a space).
func clean(v string) string {
	if !strings.ContainsAny(v, "\r\n\t\x00") {
		return v
	}
	return strings.Map(func(r rune) rune {
		switch r {
		case '\r', '\n', 0:
			return -1
		case '\t':
			return ' '
		}
		return r
	}, v)
}

// encodeWords writes text that is not ASCII as RFC 2047 encoded words, as
// a header would have it.
func encodeWords(s string) string {
	for i := 0; i < len(s); i++ {
		if s[i] >= 0x80 {
			return mime.QEncoding.Encode("utf-8", s)
		}
	}
	return s
}

// from writes the sender as a From header would (RFC 5322 section 3.4),
// with an address a newsreader can use: pipermail's "johnml at
// michaweb.net" is johnml@michaweb.net (catalog.Address); without one, the
// name alone.
func from(e *catalog.Entry) string {
	addr := catalog.Address(e.FromAddr)
	switch {
	case addr != "" && e.FromName != "":
		return (&mail.Address{Name: e.FromName, Address: addr}).String()
	case addr != "":
		return addr
	case e.FromName != "":
		return encodeWords(e.FromName)
	}
	return encodeWords(e.FromAddr)
}

// hdr answers HDR (225) and XHDR (221) (RFC 3977 section 8.5): the
// catalog's fields from its rows, any other header from the messages.
func (cn *conn) hdr(args []string, ok int) (int, error) {
	if len(args) < 1 {
		return cn.syntax()
	}
	name := args[0]
	r, byID, code, err := cn.rangeArg(args[1:])
	if code != 0 || err != nil {
		return code, err
	}
	_, fromCatalog := fieldOK(&catalog.Entry{}, name)
	value := func(e *catalog.Entry) (string, error) {
		if fromCatalog {
			return field(e, name), nil
		}
		raw, err := cn.get(e.CallNumber)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRemoved) {
			return "", nil
		}
		if err != nil {
			return "", err
		}
		h, _ := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(raw[:mailwire.BodyStart(raw)])))
		return clean(h.Get(name)), nil
	}
	if byID != nil {
		v, err := value(byID)
		if err != nil {
			return 0, err
		}
		cn.reply(ok, "headers follow")
		cn.text("0 " + v)
		cn.end()
		return ok, nil
	}
	first, err := cn.cat.Entries(cn.ctx, cn.group, max(r.lo, 1), r.hi, chunk, true)
	if err != nil {
		return 0, cn.fault("read group "+cn.group, err)
	}
	if len(first) == 0 {
		cn.reply(423, "no articles in that range")
		return 423, nil
	}
	cn.reply(ok, "headers follow")
	var werr error
	write := func(es []catalog.Entry) {
		for i := range es {
			if werr != nil {
				return
			}
			v, err := value(&es[i])
			if err != nil {
				werr = err
				return
			}
			cn.bw.WriteString(strconv.FormatUint(uint64(es[i].Num), 10) + " " + v + "\r\n")
		}
	}
	write(first)
	if last := first[len(first)-1].Num; werr == nil && len(first) == chunk && last < r.hi {
		if err := cn.entries(articleRange{last + 1, r.hi}, true, write); err != nil && werr == nil {
			werr = err
		}
	}
	cn.end()
	return ok, werr
}

// groups returns the lists whose newsgroup names match w.
func (cn *conn) groups(w wildmat) ([]catalog.Mailbox, error) {
	boxes, err := cn.cat.Mailboxes(cn.ctx)
	if err != nil {
		return nil, cn.fault("list the groups", err)
	}
	return slices.DeleteFunc(boxes, func(b catalog.Mailbox) bool {
		return w != nil && !w.match(cn.groupName(b.List))
	}), nil
}

// list answers LIST (RFC 3977 section 7.6).
func (cn *conn) list(args []string) (int, error) {
	keyword := "ACTIVE"
	if len(args) > 0 {
		keyword = strings.ToUpper(args[0])
	}
	if len(args) > 2 {
		return cn.syntax()
	}
	var w wildmat
	if len(args) == 2 {
		if keyword == "OVERVIEW.FMT" {
			return cn.syntax()
		}
		if keyword != "HEADERS" {
			var err error
			if w, err = parseWildmat(args[1]); err != nil {
				return cn.syntax()
			}
		}
	}
	switch keyword {
	case "ACTIVE", "NEWSGROUPS":
		boxes, err := cn.groups(w)
		if err != nil {
			return 0, err
		}
		cn.reply(215, "list of newsgroups follows")
		for _, b := range boxes {
			if keyword == "ACTIVE" {
				low, high := lowHigh(b)
				cn.text(fmt.Sprintf("%s %d %d n", cn.groupName(b.List), high, low))
			} else {
				cn.text(fmt.Sprintf("%s\tThe %s mailing list (read-only archive)", cn.groupName(b.List), b.List))
			}
		}
		cn.end()
		return 215, nil
	case "OVERVIEW.FMT":
		cn.reply(215, "order of fields in overview database")
		cn.text(overviewFormat...)
		cn.end()
		return 215, nil
	case "HEADERS":
		if len(args) == 2 && !strings.EqualFold(args[1], "MSGID") && !strings.EqualFold(args[1], "RANGE") {
			return cn.syntax()
		}
		cn.reply(215, "headers and metadata items supported")
		cn.text(":", ":bytes", ":lines")
		cn.end()
		return 215, nil
	}
	cn.reply(501, "unknown LIST keyword")
	return 501, nil
}

// newNews answers NEWNEWS (RFC 3977 section 7.4): the message-ids of
// the messages of the matching groups archived since the date.
func (cn *conn) newNews(args []string) (int, error) {
	if len(args) < 3 {
		return cn.syntax()
	}
	w, err := parseWildmat(args[0])
	if err != nil {
		return cn.syntax()
	}
	since, err := parseDateTime(args[1], args[2], args[3:], time.Now())
	if err != nil {
		return cn.syntax()
	}
	boxes, err := cn.groups(w)
	if err != nil {
		return 0, err
	}
	var lists []string
	for _, b := range boxes {
		lists = append(lists, b.List)
	}
	ids, _, err := cn.cat.ArchivedSince(cn.ctx, lists, since, maxNewNews)
	if err != nil {
		return 0, cn.fault("find new messages", err)
	}
	cn.reply(230, "list of new articles follows")
	for _, id := range ids {
		cn.text("<" + id + ">")
	}
	cn.end()
	return 230, nil
}

// newGroups answers NEWGROUPS: the catalog does not keep when a list
// began, so no group is ever new.
func (cn *conn) newGroups(args []string) (int, error) {
	if len(args) < 2 {
		return cn.syntax()
	}
	if _, err := parseDateTime(args[0], args[1], args[2:], time.Now()); err != nil {
		return cn.syntax()
	}
	cn.reply(231, "list of new newsgroups follows")
	cn.end()
	return 231, nil
}
