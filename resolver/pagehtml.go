package resolver

import (
	"bytes"
	"fmt"
	"html/template"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/mailview"
)

// A message's page is written here rather than by an html/template, as
// the thread lists are (threadList): html/template escapes each of the
// page's actions through reflection, which cost more than
// the page's own work. pageWriter escapes every value as html/template
// would where it stands, byte for byte: TestMessagePageHTML renders the
// template this replaced next to it, for hostile messages and for the
// corpus.

// pageWriter is an HTML page being written.
type pageWriter struct{ bytes.Buffer }

// text writes s escaped for HTML text or a quoted attribute value, as
// html/template's htmlEscaper and attrEscaper do.
func (w *pageWriter) text(s string) { templateEscapes.write(w, s) }

// byteReplacer writes a string with some of its bytes replaced, without
// making a string of it.
type byteReplacer [256]string

func (t *byteReplacer) write(w io.StringWriter, s string) {
	last := 0
	for i := 0; i < len(s); i++ {
		if r := t[s[i]]; r != "" {
			w.WriteString(s[last:i])
			w.WriteString(r)
			last = i + 1
		}
	}
	w.WriteString(s[last:])
}

// templateEscapes are html/template's escapes of HTML text and quoted
// attribute values; htmlEscapes are html.EscapeString's.
var (
	templateEscapes = byteReplacer{0: "\uFFFD", '"': "&#34;", '&': "&amp;", '\'': "&#39;", '+': "&#43;", '<': "&lt;", '>': "&gt;"}
	htmlEscapes     = byteReplacer{'"': "&#34;", '&': "&amp;", '\'': "&#39;", '<': "&lt;", '>': "&gt;"}
)

// url writes s inside a URL attribute after its scheme and host, as
// html/template's urlNormalizer then attrEscaper do: what is not allowed
// in a URL percent-encoded, the rest escaped for the attribute.
func (w *pageWriter) url(s string) {
	var b []byte
	last := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		switch {
		case 'a' <= c && c <= 'z', 'A' <= c && c <= 'Z', '0' <= c && c <= '9':
			continue
		case bytes.IndexByte([]byte("!#$&*+,/:;=?@[]-._~"), c) >= 0:
			continue
		case c == '%' && i+2 < len(s) && isHex(s[i+1]) && isHex(s[i+2]):
			continue
		}
		b = append(b, s[last:i]...)
		b = fmt.Appendf(b, "%%%02x", c)
		last = i + 1
	}
	if b == nil {
		w.text(s)
		return
	}
	w.text(string(append(b, s[last:]...)))
}

func isHex(c byte) bool {
	return '0' <= c && c <= '9' || 'a' <= c && c <= 'f' || 'A' <= c && c <= 'F'
}

// safeURL writes a whole URL as html/template does in an href: one
// whose scheme is not http, https or mailto is replaced.
func (w *pageWriter) safeURL(s string) {
	if !isSafeURL(s) {
		s = "#ZgotmplZ"
	}
	w.url(s)
}

// isSafeURL is html/template's: no scheme, or http, https or mailto.
func isSafeURL(s string) bool {
	scheme, _, ok := strings.Cut(s, ":")
	if !ok || strings.Contains(scheme, "/") {
		return true
	}
	return strings.EqualFold(scheme, "http") || strings.EqualFold(scheme, "https") || strings.EqualFold(scheme, "mailto")
}

// num writes n in decimal, which needs no escaping.
func (w *pageWriter) num(n int) { w.WriteString(strconv.Itoa(n)) }

// str writes pieces of markup as they are.
func (w *pageWriter) str(parts ...string) {
	for _, p := range parts {
		w.WriteString(p)
	}
}

// subject writes a subject, or "(no subject)".
func (w *pageWriter) subject(s string) {
	if s == "" {
		s = "(no subject)"
	}
	w.text(s)
}

// time writes the <time> element of t.
func (w *pageWriter) time(t time.Time) {
	t = t.UTC()
	w.str(`<time datetime="`, t.Format(time.RFC3339), `">`, t.Format(dateTimeLayout), `</time>`)
}

// who writes a message's sender and date in a line.
func (w *pageWriter) who(l *msgLink) {
	w.str(`<span class="from">`)
	w.text(l.From)
	w.str(`</span> `)
	w.time(l.Date)
}

// link opens a link to the message cn.
func (w *pageWriter) link(cn string) {
	w.str(`<a href="/`)
	w.url(cn)
	w.str(`">`)
}

// pageHead and pageFoot are the site's "head" template, around the
// title it escapes, and its "foot", rendered once.
var pageHead, pageFoot = func() ([2]string, string) {
	const mark = "PAGE-TITLE-MARK"
	var head, foot strings.Builder
	if err := templates.ExecuteTemplate(&head, "head", mark); err != nil {
		panic(err)
	}
	if err := templates.ExecuteTemplate(&foot, "foot", nil); err != nil {
		panic(err)
	}
	before, after, ok := strings.Cut(head.String(), mark)
	if !ok || strings.Contains(after, mark) {
		panic("the head template does not show its title once")
	}
	return [2]string{before, after}, foot.String()
}()

// writePage writes the page of d.
func writePage(w *pageWriter, d *pageData) {
	w.str(pageHead[0])
	w.text(d.Title)
	w.str(pageHead[1], "\n")
	nav := d.Nav
	if nav != nil {
		w.str(`<nav class="crumbs"><a href="/">Archive</a> › <a href="/l/`)
		w.url(nav.List)
		w.str(`/">`)
		w.text(nav.List)
		w.str(`</a> › <a href="/l/`)
		w.url(nav.List)
		w.str(`/`)
		w.url(nav.Month)
		w.str(`/">`)
		w.text(nav.Month)
		w.str(`</a></nav>`)
	}
	w.str("\n<article class=\"message\">\n<h1>")
	w.text(d.Title)
	w.str("</h1>\n<dl class=\"fields\">\n")
	writeFields(w, d.View, false)
	if s := d.Sender; s != nil {
		w.str(`<dt>Sender</dt><dd class="sender">`)
		w.text(s.Name)
		if s.Addr != "" {
			w.str(` &lt;`)
			w.text(s.Addr)
			w.str(`&gt;`)
		}
		w.str(` <span class="meta">(the list `)
		w.text(s.Via)
		w.str(" rewrote the From)</span></dd>\n")
	}
	switch {
	case nav != nil:
		w.str(`<dt>List</dt><dd><a href="/l/`)
		w.url(nav.List)
		w.str(`/">`)
		w.text(nav.List)
		w.str("</a></dd>\n")
	case d.List != "":
		w.str(`<dt>Archived for</dt><dd>`)
		w.text(d.List)
		w.str("</dd>\n")
	}
	w.str("</dl>\n")
	if nav != nil {
		writeNav(w, d, nav)
	} else if len(d.InReplyTo) > 0 || len(d.References) > 0 {
		w.str("<nav class=\"thread\">\n")
		writeLinks := func(open string, ls []link) {
			if len(ls) == 0 {
				return
			}
			w.str(open)
			for _, l := range ls {
				w.link(l.CallNumber)
				if l.Subject != "" {
					w.text(l.Subject)
				} else {
					w.text(l.CallNumber)
				}
				w.str(`</a> <span class="meta">`)
				w.text(l.From)
				w.str(`</span> `)
			}
			w.str(`</p>`)
		}
		writeLinks(`<p class="replyto">In reply to `, d.InReplyTo)
		w.str("\n")
		writeLinks(`<p>References: `, d.References)
		w.str("\n</nav>\n")
	}
	w.str("\n")
	if ds := d.Diffstat; ds != nil {
		writeDiffstat(w, ds)
	}
	w.str("<section class=\"body\">\n")
	writeParts(w, d.View, false, d.Diffstat)
	w.str("\n</section>\n")
	if as := d.View.Attachments; len(as) > 0 {
		w.str("<section class=\"attachments\">\n<h2>Attachments</h2>\n<ul>\n")
		for i, a := range as {
			name := attachmentName(a, i)
			w.str(`<li><a href="/`)
			w.url(d.CallNumber)
			w.str(`/attachments/`)
			w.num(i)
			w.str(`/`)
			w.url(pathEscape(name))
			w.str(`" download>`)
			w.text(name)
			w.str(`</a> <span class="meta">`)
			w.text(a.Type)
			w.str(`, `)
			w.text(humanSize(a.Size))
			w.str("</span></li>\n")
		}
		w.str("</ul>\n</section>\n")
	}
	w.str("\n")
	if d.View.Truncated {
		w.str(`<p class="note">Parts of this message are too long or too deeply nested to show here; the raw message has everything.</p>`)
	}
	w.str("\n")
	if ps := d.View.Problems; len(ps) > 0 {
		w.str(`<details class="problems"><summary>Parsing problems</summary><ul>`)
		for _, p := range ps {
			w.str(`<li>`)
			w.text(p)
			w.str(`</li>`)
		}
		w.str(`</ul></details>`)
	}
	w.str("\n")
	if nav != nil && len(nav.Replies) > 0 {
		w.str("<section class=\"replies\">\n<h2>Replies</h2>\n<ul>\n")
		for i := range nav.Replies {
			r := &nav.Replies[i]
			w.str(`<li>`)
			w.link(r.CallNumber)
			w.subject(r.Subject)
			w.str(`</a> <span class="meta">`)
			w.who(r)
			w.str("</span></li>\n")
		}
		w.str("</ul>\n</section>\n")
	}
	w.str("\n")
	if r := d.Reply; r != nil {
		w.str("<section class=\"reply\" id=\"reply\">\n<h2>Reply</h2>\n<p>Answer on the list by plain-text mail, to all (the list, the sender and every recipient), in one of these ways:</p>\n<ul>\n<li>save <a href=\"/")
		w.url(d.CallNumber)
		w.str("/raw\">the raw message</a>, open it in your mail client and reply to all;</li>\n<li>with <code>git send-email</code>:<pre class=\"cmd\">")
		w.text(r.Git)
		w.str("</pre></li>\n<li>or, if your mail client takes In-Reply-To from a link: <a href=\"")
		w.safeURL(r.Mailto)
		w.str(`">reply to `)
		w.text(r.To)
		switch len(r.Cc) {
		case 0:
		case 1:
			w.str(", a copy to ")
			w.text(r.Cc[0])
		default:
			w.str(", copies to ")
			w.num(len(r.Cc))
			w.str(" others")
		}
		w.str("</a>.</li>\n</ul>\n</section>\n")
	}
	w.str("<footer class=\"links\">\n<span class=\"cn\">")
	w.text(d.CallNumber)
	w.str("</span>\n<a href=\"/")
	w.url(d.CallNumber)
	w.str("/raw\">raw message</a>\n<a href=\"/api/v1/messages/")
	w.url(d.CallNumber)
	w.str("\">JSON</a>\n")
	if nav != nil {
		w.str(`<a href="/t/`)
		w.url(d.CallNumber)
		w.str(`.mbox.gz">thread (mbox.gz)</a>`)
	}
	w.str("\n</footer>\n</article>\n", pageFoot, "\n")
}

// writeFields writes the header fields a message shows, and its
// Message-ID, as rows of a <dl>; without its Subject when the page's
// title shows it.
func writeFields(w *pageWriter, m *mailview.Message, subject bool) {
	for _, f := range m.Fields {
		if f.Name == "Subject" && !subject {
			continue
		}
		w.str(`<dt>`)
		w.text(f.Name)
		w.str(`</dt><dd>`)
		w.text(f.Value)
		w.str("</dd>\n")
	}
	if id := m.MessageID; id != "" {
		w.str(`<dt>Message-ID</dt><dd class="mid"><a href="/m/`)
		w.url(pathEscape(id))
		w.str(`">&lt;`)
		w.text(id)
		w.str("&gt;</a></dd>\n")
	}
}

// writeNav writes a message's place in its thread and list.
func writeNav(w *pageWriter, d *pageData, nav *navigation) {
	w.str("<nav class=\"thread\" aria-label=\"Thread\">\n")
	switch {
	case nav.Parent != nil:
		w.str(`<p class="replyto">`)
		if d.Replies {
			w.str(`In reply to`)
		} else {
			w.str(`In the thread of`)
		}
		w.str(` `)
		w.link(nav.Parent.CallNumber)
		w.subject(nav.Parent.Subject)
		w.str(`</a> <span class="meta">`)
		w.who(nav.Parent)
		w.str("</span></p>\n")
	case nav.ParentRemoved != nil:
		w.str(`<p class="replyto missing">In reply to a message removed from the archive on `)
		w.str(nav.ParentRemoved.Date.UTC().Format(dateLayout))
		w.str("</p>\n")
	case nav.MissingParent != "":
		w.str(`<p class="replyto missing">In reply to a message that is not in the archive: <span class="mid">&lt;`)
		w.text(nav.MissingParent)
		w.str("&gt;</span></p>\n")
	case len(d.InReplyTo) > 0:
		w.str(`<p class="replyto">In reply to `)
		for _, l := range d.InReplyTo {
			w.link(l.CallNumber)
			w.subject(l.Subject)
			w.str(`</a> <span class="meta">`)
			w.text(l.From)
			w.str(`</span> `)
		}
		w.str("</p>\n")
	}
	w.str("\n")
	if nav.Why != "" {
		w.str(`<p class="why">`)
		w.text(nav.Why)
		w.str("</p>\n")
	}
	if len(nav.Copies) > 0 {
		w.str(`<p class="copies">Also archived in `)
		for i, c := range nav.Copies {
			if i > 0 {
				w.str(`, `)
			}
			w.link(c.CallNumber)
			w.text(c.List)
			w.str(`</a>`)
		}
		w.str(" (sent to several lists).</p>\n")
	}
	if len(nav.Versions) > 0 {
		writeVersions(w, nav)
	}
	if nav.ThreadMessages > 1 {
		w.str(`<p class="where">Message `)
		w.num(nav.Position)
		w.str(` of `)
		w.num(nav.ThreadMessages)
		w.str(` in the thread <a href="/t/`)
		w.url(d.CallNumber)
		w.str(`/`)
		if nav.ThreadPage > 1 {
			w.str(`?page=`)
			w.num(nav.ThreadPage)
		}
		w.str(`#m`)
		w.url(d.CallNumber)
		w.str(`">`)
		w.subject(nav.ThreadSubject)
		w.str(`</a></p>`)
	}
	w.str("\n")
	if len(nav.Tree) > 1 {
		w.str("<ul class=\"tree\">\n")
		for i := range nav.Tree {
			writeTreeRow(w, &nav.Tree[i])
		}
		w.str("</ul>\n")
		if nav.TreeCut {
			w.str(`<p class="meta">Part of the thread; <a href="/t/`)
			w.url(d.CallNumber)
			w.str(`/">read it whole</a>.</p>`)
		}
		w.str("\n")
	}
	w.str("\n<ul class=\"prevnext\">\n")
	step := func(l *msgLink, attrs, label string) {
		w.str(`<li>`)
		if l != nil {
			w.str(`<a `, attrs, `href="/`)
			w.url(l.CallNumber)
			w.str(`">`, label, `</a>`)
		} else {
			w.str(`<span class="off">`, label, `</span>`)
		}
		w.str(`</li>`)
	}
	if nav.ThreadMessages > 1 {
		step(nav.PrevInThread, `rel="prev" `, "← Previous in thread")
		w.str("\n")
		step(nav.NextInThread, `rel="next" `, "Next in thread →")
	}
	w.str("\n")
	step(nav.PrevByDate, `class="bydate-prev" `, "← Previous by date")
	w.str("\n")
	step(nav.NextByDate, `class="bydate-next" `, "Next by date →")
	w.str("\n</ul>\n</nav>\n")
}

// writeTreeRow writes a line of a message's small tree.
func writeTreeRow(w *pageWriter, r *treeRow) {
	w.str(`<li class="d`)
	w.num(min(r.Depth, 10))
	if r.Current {
		w.str(` current`)
	}
	w.str(`">`)
	switch l := r.Link; {
	case l != nil:
		open := func() {
			if r.Current {
				w.str(`<strong>`)
			} else {
				w.link(l.CallNumber)
			}
		}
		end := func() {
			if r.Current {
				w.str(`</strong>`)
			} else {
				w.str(`</a>`)
			}
		}
		open()
		if r.NewSubject {
			w.subject(l.Subject)
		} else {
			w.text(l.From)
		}
		end()
		w.str(` <span class="meta">`)
		if r.NewSubject && !r.SameFrom {
			w.text(l.From)
			w.str(` · `)
		}
		w.time(l.Date)
		w.str(`</span>`)
	case r.Removed != nil:
		w.str(`<span class="placeholder">a message removed on `, r.Removed.Date.UTC().Format(dateLayout), `</span>`)
	default:
		w.str(`<span class="placeholder">a message not in the archive</span>`)
	}
	w.str("</li>\n")
}

// writeDiffstat writes what a message's patches change.
func writeDiffstat(w *pageWriter, ds *diffstat) {
	plural := func(n int, noun string) {
		w.num(n)
		w.str(" ", noun)
		if n != 1 {
			w.str("s")
		}
	}
	w.str(`<details class="diffstat" open><summary>`)
	plural(ds.Changed, "file")
	w.str(` changed, <span class="da">`)
	plural(ds.Added, "insertion")
	w.str(`(+)</span>, <span class="dd">`)
	plural(ds.Deleted, "deletion")
	w.str("(-)</span></summary>\n<table class=\"diffstat\">\n")
	for _, f := range ds.Files {
		w.str(`<tr><td class="path">`)
		if f.OldPath != "" {
			w.text(f.OldPath)
			w.str(` → `)
		}
		w.text(f.Path)
		w.str(`</td><td class="num">`)
		if f.Binary {
			w.str(`binary`)
		} else {
			w.str(`<span class="da">+`)
			w.num(f.Added)
			w.str(`</span> <span class="dd">-`)
			w.num(f.Deleted)
			w.str(`</span>`)
		}
		w.str("</td></tr>\n")
	}
	w.str("</table>\n")
	if ds.More != 0 {
		w.str(`<p class="meta">and `)
		plural(ds.More, "more file")
		w.str(`</p>`)
	}
	if ds.Truncated {
		w.str(`<p class="meta">Counted in the first 2 MiB of the text.</p>`)
	}
	w.str("\n</details>\n")
}

// writeParts writes the body of a message: its text, sanitized HTML and
// the messages it carries, each with its header; folded folds long
// quotes (a thread page). ds is the message's diffstatOf, or nil: the
// text it scanned first for patches is not scanned again.
func writeParts(w *pageWriter, m *mailview.Message, folded bool, ds *diffstat) {
	for i, p := range m.Parts {
		switch {
		case p.Message != nil:
			w.str("<section class=\"embedded\">\n<p class=\"embedded-label\">Enclosed message</p>\n<dl class=\"fields\">\n")
			writeFields(w, p.Message, true)
			w.str("</dl>\n")
			writeParts(w, p.Message, folded, nil)
			w.str("\n</section>\n")
		case p.HTML != "":
			w.str(`<div class="html">`, string(p.HTML), "</div>\n")
		case folded:
			writeText(w, p.Text, textOptions{Fold: 6})
			w.str("\n")
		case ds != nil && i == ds.part:
			writeText(w, p.Text, textOptions{kinds: ds.kinds, scanned: true})
			w.str("\n")
		default:
			writeText(w, p.Text, textOptions{})
			w.str("\n")
		}
	}
	if len(m.Parts) == 0 {
		w.str("<p class=\"note\">This message has no text to show.</p>\n")
	}
}

// bodyHTML is writeParts for a template.
func bodyHTML(m *mailview.Message, folded bool) template.HTML {
	var w pageWriter
	writeParts(&w, m, folded, nil)
	return template.HTML(w.String())
}

// writeVersions writes the other versions of a patch, and says first when
// a newer one was posted.
func writeVersions(w *pageWriter, nav *navigation) {
	if v := nav.NewerVersion(); v != nil {
		w.str(`<p class="newer"><strong>A newer version of this `, nav.Of(), ` was posted:</strong> `)
		w.link(v.CallNumber)
		w.str(`v`)
		w.num(v.Version)
		w.str(`</a>, `)
		w.str(v.Date.UTC().Format(dateLayout))
		w.str(".</p>\n")
	}
	w.str(`<div class="versions"><p>Versions of this `, nav.Of(), `:</p><ul>`)
	for _, v := range nav.VersionRows() {
		w.str(`<li>`)
		if v.Current {
			w.str(`<span aria-current="page">v`)
			w.num(v.Version.Version)
			w.str(` (this one)</span>`)
			if v.Stat != nil {
				w.str(` <span class="meta">`)
				w.text(diffstatText(v.Stat))
				w.str(`</span>`)
			}
		} else {
			w.link(v.CallNumber)
			w.str(`v`)
			w.num(v.Version.Version)
			w.str(`</a> <span class="meta">`)
			w.str(v.Date.UTC().Format(dateLayout))
			if v.Stat != nil {
				w.str(`: `)
				w.text(diffstatText(v.Stat))
			}
			w.str(`</span>`)
		}
		w.str(`</li>`)
	}
	w.str("</ul></div>\n")
}
