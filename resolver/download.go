package resolver

import (
	"compress/gzip"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/mail"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/httpserve"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
)

// monthMbox is GET /l/{list}/{yyyy}-{mm}.mbox.gz.
func (s *Server) monthMbox(w http.ResponseWriter, r *http.Request, month string) {
	name, ok := s.listName(w, r)
	if !ok {
		return
	}
	y, m, ok := s.month(w, r, month)
	if !ok {
		return
	}
	c, ok := s.catalogFor(w, r)
	if !ok {
		return
	}
	if _, err := c.List(r.Context(), name); err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return
	}
	cns, err := c.MonthMessages(r.Context(), name, y, m)
	if err != nil {
		s.failCatalog(w, r, err, noSuchList(name))
		return
	}
	if len(cns) == 0 {
		s.fail(w, r, http.StatusNotFound, fmt.Sprintf("List %s has no messages in %s %d.", name, m, y))
		return
	}
	s.streamMbox(w, r, fmt.Sprintf("%s-%04d-%02d.mbox.gz", name, y, m), cns)
}

// threadMbox is GET /t/{callnumber}.mbox.gz: the thread's messages, oldest
// first.
func (s *Server) threadMbox(w http.ResponseWriter, r *http.Request, text string) {
	th, cn, ok := s.thread(w, r, text)
	if !ok {
		return
	}
	var msgs []*catalog.Message
	for _, n := range th.Nodes {
		if n.Message != nil {
			msgs = append(msgs, n.Message)
		}
	}
	// Date order, as in a month's file: the order a reader of an mbox
	// expects, and the order the messages were written in.
	sortByDate(msgs)
	cns := make([]string, len(msgs))
	for i, m := range msgs {
		cns[i] = m.CallNumber
	}
	s.streamMbox(w, r, "thread-"+cn+".mbox.gz", cns)
}

func sortByDate(msgs []*catalog.Message) {
	// Insertion sort keeps equal dates in reading order; threads are
	// small and mostly in order already.
	for i := 1; i < len(msgs); i++ {
		for j := i; j > 0 && msgs[j].Date.Before(msgs[j-1].Date); j-- {
			msgs[j], msgs[j-1] = msgs[j-1], msgs[j]
		}
	}
}

// streamMbox serves the messages cns as a gzipped mboxrd file (RFC 4155
// with mboxrd quoting: package mbox). Importing the file gives back
// every message byte for byte (see mbox.Writer for the one exception: a
// message without a final line end gets one).
func (s *Server) streamMbox(w http.ResponseWriter, r *http.Request, filename string, cns []string) {
	sp, release, ok := s.spoolMbox(w, r, cns, true)
	if !ok {
		return
	}
	defer release()
	h := w.Header()
	h.Set("Content-Type", "application/gzip")
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": filename}))
	h.Set("Content-Security-Policy", rawCSP)
	h.Set("Cache-Control", "no-cache")
	h.Set("ETag", sp.info.(string))
	sp.serve(s.stream(w), r)
}

// spoolMbox returns the spool of the messages cns as an mboxrd file,
// gzipped if gz, for the caller to serve and then release; false when it
// has answered already (an error) or the reader went away.
//
// The file is written once into a spool (see spools), which every
// reader of the same messages at the time shares, and served from it
// with ranges (a download cut off is resumed with Range and If-Range)
// and a write deadline that moves as the reader reads (Stream). Writing
// it takes the memory of one message at a time, whatever the size of
// the month and the number of its readers; the first byte goes out once
// the whole file is written.
//
// A gzipped file leaves out a message the catalog names but the store
// has not (another store than the catalog's, or removed meanwhile); a
// plain one (public-inbox's /raw, of the copies of one message) answers
// for it as the message's own page does (404, 410).
func (s *Server) spoolMbox(w http.ResponseWriter, r *http.Request, cns []string, gz bool) (sp *spool, release func(), ok bool) {
	ctx := r.Context()
	// The file is a function of the call numbers alone (a call number's
	// bytes never change; a removal takes it out of the catalog's
	// lists), so readers of the same messages by any route share it.
	key := sha256.New()
	io.WriteString(key, mboxFormat)
	if !gz {
		io.WriteString(key, " plain")
	}
	for _, cn := range cns {
		io.WriteString(key, "\n"+cn)
	}
	sum := store.Digest(key.Sum(nil))
	sp, first, release := s.spools.join("mbox/" + hex.EncodeToString(sum[:]))
	if first {
		path := r.URL.EscapedPath()
		// The file is written for every reader who joins meanwhile:
		// wctx ends only once no reader is left (spools.make).
		s.spools.make(ctx, sp, sum, func(wctx context.Context, f io.Writer) (any, error) {
			if !gz {
				return s.writePlainMbox(wctx, f, cns)
			}
			return s.writeMbox(wctx, f, cns, path)
		})
	} else if !sp.wait(ctx) {
		release()
		return nil, nil, false // the reader went away
	}
	switch {
	case sp.err == nil:
		return sp, release, true
	case ctx.Err() != nil:
		// The reader went away.
	case errors.Is(sp.err, context.Canceled) || errors.Is(sp.err, context.DeadlineExceeded):
		// The reader who was to write it went away before it could.
		s.fail(w, r, http.StatusServiceUnavailable, "The archive is busy; try again in a moment.")
	default:
		s.failStore(w, r, sp.err)
	}
	release()
	return nil, nil, false
}

// mboxFormat names the way a download is written (From_ lines, quoting,
// compression): a change to any of them changes it, and so the key of
// every download's spool.
const mboxFormat = "mboxrd gzip 1"

// writeMbox writes the messages cns to w as a gzipped mboxrd file, one
// at a time: each is read from the store, written and dropped before
// the next. It returns the file's ETag, made of its bytes. A message
// the store does not have, or has removed since the catalog was read,
// is left out.
func (s *Server) writeMbox(ctx context.Context, w io.Writer, cns []string, path string) (string, error) {
	sum := sha256.New()
	gz, _ := gzip.NewWriterLevel(io.MultiWriter(w, sum), gzip.DefaultCompression)
	mw := mbox.NewWriter(gz)
	for _, cn := range cns {
		if err := ctx.Err(); err != nil {
			return "", err // no reader is left (spools.make)
		}
		m, err := s.getByText(ctx, cn)
		if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRemoved) {
			// The catalog names it, the store does not have it: another
			// store than the catalog's, or removed meanwhile. Leave it
			// out, say so.
			s.log.Warn("a message of the catalog is not in the store: left out of a download", "callnumber", cn, "path", path, "err", err)
			continue
		}
		if err != nil {
			return "", fmt.Errorf("cannot read message %s for a download: %w", cn, err)
		}
		if err := mw.WriteMessage(fromLine(m), m.Raw); err != nil {
			return "", fmt.Errorf("cannot spool a download: %w", err)
		}
	}
	if err := mw.Flush(); err != nil {
		return "", fmt.Errorf("cannot spool a download: %w", err)
	}
	if err := gz.Close(); err != nil {
		return "", fmt.Errorf("cannot spool a download: %w", err)
	}
	return `"` + hex.EncodeToString(sum.Sum(nil)[:16]) + `"`, nil
}

// writePlainMbox writes the messages cns to w as mboxrd text, as
// public-inbox's /raw does (every copy with the Message-ID, each after
// its From_ line), and returns its ETag, made of its bytes.
func (s *Server) writePlainMbox(ctx context.Context, w io.Writer, cns []string) (string, error) {
	sum := sha256.New()
	mw := io.MultiWriter(w, sum)
	for _, cn := range cns {
		if err := ctx.Err(); err != nil {
			return "", err // no reader is left (spools.make)
		}
		m, err := s.getByText(ctx, cn)
		if err != nil {
			return "", err // the store's error, for failStore
		}
		if err := writeMboxrd(mw, fromLine(m), m.Raw); err != nil {
			return "", fmt.Errorf("cannot spool a download: %w", err)
		}
	}
	return `"` + hex.EncodeToString(sum.Sum(nil)[:16]) + `"`, nil
}

// stream returns w for writing a large body (httpserve.Stream): its
// write deadline moves as the reader reads.
func (s *Server) stream(w http.ResponseWriter) http.ResponseWriter {
	return httpserve.Stream(w, orDefault(s.opts.WriteIdleTimeout, DefaultWriteIdleTimeout))
}

// fromLine returns the From_ line of a message in a download (RFC 4155
// section 2): "From ", the sender's address, and the date in asctime
// form, UTC. The store keeps no envelope, so the address is the From
// header's and the date the Date header's (else the time the message was
// archived); where either is unusable, MAILER-DAEMON and the archiving
// time stand in.
func fromLine(m store.Stored) string {
	meta, _ := mailmsg.Parse(m.Raw)
	sender := "MAILER-DAEMON"
	if a, err := mail.ParseAddress(meta.From); err == nil && envelopeSafe(a.Address) {
		sender = a.Address
	}
	date := m.Added
	if t, err := meta.Time(); err == nil && t.Year() >= 1970 && t.Year() < 10000 {
		date = t
	}
	if date.IsZero() {
		date = time.Unix(0, 0)
	}
	return "From " + sender + " " + date.UTC().Format("Mon Jan _2 15:04:05 2006")
}

// envelopeSafe reports whether an address can stand in a From_ line: one
// word of printable ASCII.
func envelopeSafe(a string) bool {
	if a == "" || len(a) > 254 {
		return false
	}
	for i := 0; i < len(a); i++ {
		if a[i] <= ' ' || a[i] >= 0x7f {
			return false
		}
	}
	return true
}

// attachment is GET /{callnumber}/attachments/{n}[/{name}]: one
// attachment of a message, as a download. The name in the URL is for
// the reader's browser only; the number says which attachment.
func (s *Server) attachment(w http.ResponseWriter, r *http.Request, cn, rest string) {
	num, _, _ := strings.Cut(rest, "/")
	n, err := strconv.Atoi(num)
	if err != nil || n < 0 || strconv.Itoa(n) != num {
		s.fail(w, r, http.StatusNotFound, "There is nothing at this address.")
		return
	}
	// A large attachment is served from a file that its readers share
	// (see spoolThreshold).
	sp, first, release := s.spools.join("attachment/" + cn + "/" + num)
	defer release()
	if !first && sp.wait(r.Context()) && (sp.f != nil || sp.err != nil) {
		if s.attachmentFailed(w, r, sp.err) || attachmentHeader(w, r, sp.digest, n, sp.info.(mailview.Attachment)) {
			return
		}
		sp.serve(s.stream(w), r)
		return
	}
	m, _, ok := s.lookup(w, r, cn)
	if first && (!ok || len(m.Raw) <= spoolThreshold) {
		sp.skip()
	}
	if !ok {
		return
	}
	if first && len(m.Raw) > spoolThreshold {
		if notModified(w, r, m.Digest, "a"+strconv.Itoa(n)) {
			w.Header().Set("Content-Security-Policy", rawCSP)
			sp.skip()
			return
		}
		view := s.opts.View
		err := s.spools.make(r.Context(), sp, m.Digest, func(_ context.Context, w io.Writer) (any, error) {
			return mailview.WriteAttachment(m.Raw, n, view, w)
		})
		m = store.Stored{} // the readers share the file
		if s.attachmentFailed(w, r, err) || attachmentHeader(w, r, sp.digest, n, sp.info.(mailview.Attachment)) {
			return
		}
		sp.serve(s.stream(w), r)
		return
	}
	if notModified(w, r, m.Digest, "a"+strconv.Itoa(n)) {
		w.Header().Set("Content-Security-Policy", rawCSP)
		return
	}
	a, data, err := mailview.AttachmentData(m.Raw, n, s.opts.View)
	if s.attachmentFailed(w, r, err) || attachmentHeader(w, r, m.Digest, n, a) {
		return
	}
	w.Header().Set("Content-Length", strconv.Itoa(len(data)))
	w.WriteHeader(http.StatusOK)
	if r.Method != http.MethodHead {
		w.Write(data)
	}
}

// attachmentFailed answers for an error of taking out an attachment, and
// says whether there was one.
func (s *Server) attachmentFailed(w http.ResponseWriter, r *http.Request, err error) bool {
	switch {
	case err == nil:
		return false
	case errors.Is(err, mailview.ErrNoAttachment):
		s.fail(w, r, http.StatusNotFound, "This message has no such attachment.")
	case errors.Is(err, mailview.ErrAttachmentTooLarge):
		s.fail(w, r, http.StatusForbidden, "This attachment is larger than the archive serves on its own; it is in the raw message.")
	case r.Context().Err() != nil:
		s.fail(w, r, http.StatusServiceUnavailable, "cancelled")
	default:
		s.log.Error("cannot take out an attachment", "path", r.URL.EscapedPath(), "err", err)
		s.fail(w, r, http.StatusInternalServerError, "The archive could not read that attachment.")
	}
	return true
}

// attachmentHeader sets the header fields of attachment n, a, of the
// message of digest d, and answers 304 (true) when the reader has it.
func attachmentHeader(w http.ResponseWriter, r *http.Request, d store.Digest, n int, a mailview.Attachment) bool {
	h := w.Header()
	h.Set("Content-Security-Policy", rawCSP)
	if notModified(w, r, d, "a"+strconv.Itoa(n)) {
		return true
	}
	h.Set("Content-Type", safeType(a.Type))
	h.Set("Content-Disposition", mime.FormatMediaType("attachment", map[string]string{"filename": attachmentName(a, n)}))
	return false
}

// attachmentName is the file name an attachment is offered under: the
// sender's (mailview made it safe), or one made from its number and type.
func attachmentName(a mailview.Attachment, n int) string {
	if a.Name != "" {
		return a.Name
	}
	ext := ".bin"
	switch a.Type {
	case "message/rfc822", "message/global":
		ext = ".eml"
	case "text/plain":
		ext = ".txt"
	}
	return "attachment-" + strconv.Itoa(n) + ext
}

// inert are the media types an attachment is served as: types no browser
// runs or renders as a document (and the response says
// "Content-Disposition: attachment" and "nosniff" besides). Everything
// else, HTML and SVG and XML above all, is application/octet-stream.
var inert = map[string]bool{
	"text/plain": true, "text/x-diff": true, "text/x-patch": true, "text/csv": true,
	"application/pdf": true, "application/zip": true, "application/gzip": true,
	"application/x-gzip": true, "application/x-bzip2": true, "application/x-xz": true,
	"application/x-tar": true, "application/pgp-signature": true, "application/pgp-keys": true,
	"application/pkcs7-signature": true, "application/octet-stream": true,
	"image/png": true, "image/jpeg": true, "image/gif": true, "image/webp": true,
	"message/rfc822": true,
}

func safeType(t string) string {
	if t = strings.ToLower(t); inert[t] {
		return t
	}
	return "application/octet-stream"
}
