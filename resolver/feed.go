package resolver

import (
	"bytes"
	"encoding/xml"
	"net/http"
	"net/mail"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/mailview"
)

// Feed sizes.
const (
	// feedEntries is how many of a list's newest messages its feed holds.
	feedEntries = 30
	// feedTextBytes bounds the text of one entry.
	feedTextBytes = 4 << 10
)

// The Atom feed (RFC 4287) of a list.
type atomFeed struct {
	XMLName   xml.Name    `xml:"http://www.w3.org/2005/Atom feed"`
	ID        string      `xml:"id"`
	Title     string      `xml:"title"`
	Subtitle  string      `xml:"subtitle,omitempty"`
	Updated   string      `xml:"updated"`
	Generator string      `xml:"generator"`
	Links     []atomLink  `xml:"link"`
	Entries   []atomEntry `xml:"entry"`
}

type atomLink struct {
	Rel  string `xml:"rel,attr"`
	Type string `xml:"type,attr,omitempty"`
	Href string `xml:"href,attr"`
}

type atomPerson struct {
	Name  string `xml:"name"`
	Email string `xml:"email,omitempty"`
}

type atomText struct {
	Type string `xml:"type,attr"`
	Text string `xml:",chardata"`
}

type atomEntry struct {
	ID        string     `xml:"id"`
	Title     string     `xml:"title"`
	Updated   string     `xml:"updated"`
	Published string     `xml:"published"`
	Author    atomPerson `xml:"author"`
	Links     []atomLink `xml:"link"`
	Content   *atomText  `xml:"content,omitempty"`
}

// feed is GET /l/{list}/atom.xml: the list's newest messages by
// arrival (catalog.Arrival: a Date header years off does not put a
// message on top), newest first. Each entry's ID is its message's URL,
// permanent as call numbers are; published is its date, updated when the
// list had it.
func (s *Server) feed(w http.ResponseWriter, r *http.Request) {
	name, ok := s.listName(w, r)
	if !ok {
		return
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return
	}
	ctx := r.Context()
	if _, err := c.List(ctx, name); err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return
	}
	msgs, err := c.Recent(ctx, name, feedEntries)
	if err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return
	}
	base := s.baseURL(r)
	s.writeFeed(w, r, atomFeed{
		ID:       base + "/l/" + name + "/",
		Title:    name,
		Subtitle: "Messages of " + name + ", newest first",
		Links: []atomLink{
			{Rel: "self", Type: "application/atom+xml", Href: base + "/l/" + name + "/atom.xml"},
			{Rel: "alternate", Type: "text/html", Href: base + "/l/" + name + "/"},
		},
	}, msgs)
}

// threadFeed is GET /t/{callnumber}/atom.xml: the newest messages of a
// thread by arrival, newest first, to follow one discussion.
func (s *Server) threadFeed(w http.ResponseWriter, r *http.Request) {
	th, cn, ok := s.thread(w, r, r.PathValue("callnumber"))
	if !ok {
		return
	}
	var msgs []catalog.Message
	for _, n := range th.Nodes {
		if n.Message != nil {
			msgs = append(msgs, *n.Message)
		}
	}
	slices.SortStableFunc(msgs, func(a, b catalog.Message) int { return b.Arrived.Compare(a.Arrived) })
	msgs = msgs[:min(len(msgs), feedEntries)]
	base := s.baseURL(r)
	subject := th.Subject
	if subject == "" {
		subject = "(no subject)"
	}
	s.writeFeed(w, r, atomFeed{
		ID:       base + "/t/" + cn + "/",
		Title:    subject,
		Subtitle: "A thread of " + th.List + ", newest first",
		Links: []atomLink{
			{Rel: "self", Type: "application/atom+xml", Href: base + "/t/" + cn + "/atom.xml"},
			{Rel: "alternate", Type: "text/html", Href: base + "/t/" + cn + "/"},
		},
	}, msgs)
}

// writeFeed writes the feed f with an entry per message.
func (s *Server) writeFeed(w http.ResponseWriter, r *http.Request, f atomFeed, msgs []catalog.Message) {
	base := s.baseURL(r)
	f.Generator = "chibrary"
	f.Entries = make([]atomEntry, len(msgs))
	var updated time.Time
	var wg sync.WaitGroup
	var missing atomic.Bool
	for i, m := range msgs {
		e := &f.Entries[i]
		url := base + "/" + m.CallNumber
		e.ID, e.Title = url, m.Subject
		if e.Title == "" {
			e.Title = "(no subject)"
		}
		e.Updated, e.Published = atomTime(m.Arrived), atomTime(m.Date)
		if m.Arrived.After(updated) {
			updated = m.Arrived
		}
		e.Author = atomPerson{Name: m.From()}
		if e.Author.Name == "" {
			e.Author.Name = "unknown"
		}
		if a, err := mail.ParseAddress("<" + m.FromAddr + ">"); err == nil && a.Address == m.FromAddr {
			e.Author.Email = m.FromAddr
		}
		e.Links = []atomLink{{Rel: "alternate", Type: "text/html", Href: url}}
		wg.Go(func() {
			text, ok := s.entryText(r, m)
			if !ok {
				missing.Store(true)
			}
			if text != "" {
				e.Content = &atomText{Type: "text", Text: text}
			}
		})
	}
	wg.Wait()
	f.Updated = atomTime(updated)
	if missing.Load() {
		dontCache(w) // the store may give the text next time
	}
	var b bytes.Buffer
	b.WriteString(xml.Header)
	enc := xml.NewEncoder(&b)
	enc.Indent("", " ")
	if err := enc.Encode(f); err != nil {
		s.log.Error("cannot encode a feed", "feed", f.ID, "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The feed could not be written.")
		return
	}
	b.WriteByte('\n')
	s.writeBody(w, r, "application/atom+xml; charset=utf-8", b.Bytes())
}

// entryText is the beginning of a message's text, for its feed entry,
// and false if the store could not give the message.
func (s *Server) entryText(r *http.Request, m catalog.Message) (string, bool) {
	stored, err := s.getByText(r.Context(), m.CallNumber)
	if err != nil {
		return "", false
	}
	opts := s.opts.View
	opts.MaxTextBytes = feedTextBytes
	v := mailview.Parse(stored.Raw, opts)
	text := catalog.Text(v)
	if v.Truncated || len(text) > feedTextBytes {
		text = strings.ToValidUTF8(text[:min(len(text), feedTextBytes)], "") + "\n[...]"
	}
	return text, true
}

func atomTime(t time.Time) string { return t.UTC().Format(time.RFC3339) }

// baseURL is the archive's address for absolute links: Options.BaseURL,
// else the request's scheme and Host (a Host that is not a plain host
// name or address gives "localhost").
func (s *Server) baseURL(r *http.Request) string {
	if s.opts.BaseURL != "" {
		return strings.TrimRight(s.opts.BaseURL, "/")
	}
	scheme := "http"
	if r.TLS != nil {
		scheme = "https"
	}
	host := r.Host
	if host == "" || len(host) > 255 || strings.Trim(host, "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789.-:[]") != "" {
		host = "localhost"
	}
	return scheme + "://" + host
}
