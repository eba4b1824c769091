package imapserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"sync"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-message/textproto"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/spool"
	"github.com/chibrary/chibrary/mailwire"
	"github.com/chibrary/chibrary/store"
)

const (
	chunk    = 256     // catalog rows FETCH and SEARCH read at a time
	prefetch = 4       // messages FETCH reads from the store ahead
	keepBuf  = 1 << 20 // bounds the buffer a session keeps between messages
)

// Fetch sends what the client asked of each message in numSet, a chunk of
// catalog rows at a time, reading messages from the store only if needed.
func (ss *session) Fetch(w *imapserver.FetchWriter, numSet imap.NumSet, opts *imap.FetchOptions) error {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	v := ss.mbox
	if v == nil {
		return nil
	}
	done, err := ss.holdView(v)
	if err != nil {
		return err
	}
	defer done()
	needRaw := opts.Envelope || opts.BodyStructure != nil || len(opts.BodySection) > 0 ||
		len(opts.BinarySection) > 0 || len(opts.BinarySectionSize) > 0
	defer func() {
		if cap(ss.buf) > keepBuf {
			ss.buf = nil
		}
	}()
	err = ss.eachEntry(v, v.spans(numSet), func(es []catalog.Entry, seqs []uint32) error {
		var raws *reader
		if needRaw {
			raws = ss.read(es)
			defer raws.stop()
		}
		for i := range es {
			var msg *wire
			if raws != nil {
				raw, err := raws.next()
				if err == nil && raw == nil {
					msg, err = ss.spooled(&es[i])
				} else if err == nil {
					ss.buf = mailwire.AppendCRLF(ss.buf[:0], raw)
					msg = &wire{mem: ss.buf, size: int64(len(ss.buf)), body: int64(mailwire.BodyStart(ss.buf))}
				}
				if errors.Is(err, store.ErrRemoved) {
					// Removed since the catalog was read: its EXPUNGE
					// follows.
					continue
				} else if errors.Is(err, store.ErrNotFound) {
					// In the catalog, not in the store: a catalog ahead
					// of a store restored from an older backup.
					ss.s.log.Warn("a message of the catalog is not in the store", "callnumber", es[i].CallNumber)
					continue
				} else if err != nil {
					return err
				}
			}
			err := ss.fetchOne(w, v, seqs[i], &es[i], msg, opts)
			msg.release()
			if err != nil {
				return err
			}
		}
		return nil
	})
	return ss.count("FETCH", ss.storeErr("fetch messages", err))
}

// spoolThreshold is the largest message (its wire form) a session holds
// in memory while it sends it. A larger one is sent from a spool file
// that every session sending it shares (package spool): a client that
// reads slowly, or not at all, then holds a file's place, not the
// message, and one that reads a large message in pieces has the store
// read it once, not once a piece.
const spoolThreshold = 1 << 20

// wire is a message in its wire form (CRLF line ends), in memory or in a
// spool file.
type wire struct {
	mem        []byte      // the whole message, if in memory
	spool      *spool.Body // else its file
	size, body int64       // its length, where its body starts
	releaseFn  func()
	key        string // the spool's key, for the spools of its parts
}

func (m *wire) release() {
	if m != nil && m.spool != nil {
		m.releaseFn()
	}
}

// section returns n bytes of the message from off.
func (m *wire) section(off, n int64) io.Reader {
	if m.spool != nil {
		return m.spool.Section(off, n)
	}
	return bytes.NewReader(m.mem[off : off+n])
}

// spooled returns the wire form of a large message from the server's
// spools, written there from the store if no session has it.
func (ss *session) spooled(e *catalog.Entry) (*wire, error) {
	key := "imap/" + e.CallNumber
	b, err := ss.s.spools.Get(ss.ctx, key, func(w io.Writer) (any, error) {
		n, err := callnumber.Parse(e.CallNumber)
		if err != nil {
			return nil, err
		}
		m, err := ss.s.st.Get(ss.ctx, n)
		if err != nil {
			return nil, err
		}
		msg := mailwire.AppendCRLF(nil, m.Raw)
		_, err = w.Write(msg)
		return int64(mailwire.BodyStart(msg)), err
	})
	if err != nil {
		return nil, err
	}
	return &wire{spool: b, size: b.Size(), body: b.Info().(int64), key: key, releaseFn: func() { ss.s.spools.Release(b) }}, nil
}

// eachEntry calls fn with the catalog rows of the messages of spans, a
// chunk at a time, and their sequence numbers; messages no longer in the
// catalog (not yet expunged from the view) are left out.
func (ss *session) eachEntry(v *view, spans []span, fn func(es []catalog.Entry, seqs []uint32) error) error {
	for _, sp := range spans {
		for lo := sp.lo; lo <= sp.hi; {
			hi := min(sp.hi, lo+chunk-1)
			uids := v.uids[lo-1 : hi]
			es, err := ss.cat.Entries(ss.ctx, v.list, uids[0], uids[len(uids)-1], len(uids), false)
			if err != nil {
				return err
			}
			// Both in order: keep the rows of the view's UIDs.
			seqs := make([]uint32, 0, len(es))
			kept := es[:0]
			for i, k := 0, 0; i < len(uids) && k < len(es); {
				switch {
				case es[k].Num < uids[i]:
					k++
				case es[k].Num > uids[i]:
					i++
				default:
					kept = append(kept, es[k])
					seqs = append(seqs, lo+uint32(i))
					i++
					k++
				}
			}
			if err := fn(kept, seqs); err != nil {
				return err
			}
			if hi == sp.hi {
				break
			}
			lo = hi + 1
		}
	}
	return nil
}

// fetchOne writes the FETCH response of one message; msg is nil when no
// item needs the message itself.
func (ss *session) fetchOne(w *imapserver.FetchWriter, v *view, seq uint32, e *catalog.Entry, msg *wire, opts *imap.FetchOptions) (err error) {
	rw := w.CreateMessage(seq)
	// The response writer holds the connection's encoder until it is
	// closed, whatever went wrong before: one left open after a write
	// error (a client gone mid-FETCH) kept every later response, the
	// connection's end and its place in the listener waiting forever.
	defer func() {
		if cerr := rw.Close(); err == nil {
			err = cerr
		}
	}()
	if opts.UID {
		rw.WriteUID(imap.UID(e.Num))
	}
	// A body fetched without PEEK is \Seen from now on, in this session
	// (RFC 3501 section 6.4.5), and the client told so.
	seen := false
	if !v.readOnly && !v.hasFlag(e.Num, imap.FlagSeen) {
		for _, sec := range opts.BodySection {
			seen = seen || !sec.Peek
		}
		for _, sec := range opts.BinarySection {
			seen = seen || !sec.Peek
		}
		if seen {
			v.setFlags(e.Num, imap.StoreFlagsAdd, []imap.Flag{imap.FlagSeen})
		}
	}
	if opts.Flags || seen {
		rw.WriteFlags(v.flagsOf(e.Num))
	}
	if opts.InternalDate {
		rw.WriteInternalDate(e.Date)
	}
	if opts.RFC822Size {
		rw.WriteRFC822Size(e.WireSize)
	}
	if msg != nil {
		if opts.Envelope {
			h, _ := textproto.ReadHeader(bufio.NewReader(msg.section(0, msg.body)))
			rw.WriteEnvelope(imapserver.ExtractEnvelope(h))
		}
		if opts.BodyStructure != nil {
			rw.WriteBodyStructure(imapserver.ExtractBodyStructure(msg.section(0, msg.size)))
		}
		for _, sec := range opts.BodySection {
			r, n, release, err := ss.bodySection(msg, sec)
			if err != nil {
				return err
			}
			err = writeLiteral(rw.WriteBodySection(sec, n), r)
			release()
			if err != nil {
				return err
			}
		}
		for _, sec := range opts.BinarySection {
			r, n, release, err := ss.extracted(msg, binaryKey(sec), sec.Partial, func(r io.Reader) []byte {
				whole := *sec
				whole.Partial = nil
				return imapserver.ExtractBinarySection(r, &whole)
			})
			if err != nil {
				return err
			}
			err = writeLiteral(rw.WriteBinarySection(sec, n), r)
			release()
			if err != nil {
				return err
			}
		}
		for _, sec := range opts.BinarySectionSize {
			rw.WriteBinarySectionSize(sec, imapserver.ExtractBinarySectionSize(msg.section(0, msg.size), sec))
		}
	}
	ss.s.m.messages.Inc()
	return nil
}

// writeLiteral copies r to a literal's writer and closes it.
func writeLiteral(wc io.WriteCloser, r io.Reader) error {
	_, err := io.Copy(wc, r)
	if cerr := wc.Close(); err == nil {
		err = cerr
	}
	return err
}

// bodySection returns a BODY[...] section of msg and its length: the
// whole message, its header and its text are cut from it as they are
// (RFC 3501 section 6.4.5: HEADER is the header with the blank line after
// it); anything else is go-imap's to find.
func (ss *session) bodySection(msg *wire, sec *imap.FetchItemBodySection) (io.Reader, int64, func(), error) {
	if len(sec.Part) == 0 && len(sec.HeaderFields) == 0 && len(sec.HeaderFieldsNot) == 0 {
		off, n := int64(0), msg.size
		switch sec.Specifier {
		case imap.PartSpecifierHeader:
			n = msg.body
		case imap.PartSpecifierText:
			off, n = msg.body, msg.size-msg.body
		}
		off, n = partial(off, n, sec.Partial)
		return msg.section(off, n), n, func() {}, nil
	}
	if len(sec.Part) == 0 && sec.Specifier == imap.PartSpecifierHeader {
		// HEADER.FIELDS: the header is enough.
		b := imapserver.ExtractBodySection(msg.section(0, msg.body), sec)
		return bytes.NewReader(b), int64(len(b)), func() {}, nil
	}
	return ss.extracted(msg, bodyKey(sec), sec.Partial, func(r io.Reader) []byte {
		whole := *sec
		whole.Partial = nil
		return imapserver.ExtractBodySection(r, &whole)
	})
}

// extracted returns the partial p of what extract takes out of msg (a
// part, decoded or not). Of a message in a spool file it is spooled too,
// under key, so that a slow reader of a large part holds a file, not
// the part.
func (ss *session) extracted(msg *wire, key string, p *imap.SectionPartial, extract func(io.Reader) []byte) (io.Reader, int64, func(), error) {
	if msg.spool == nil {
		b := extract(msg.section(0, msg.size))
		off, n := partial(0, int64(len(b)), p)
		return bytes.NewReader(b[off : off+n]), n, func() {}, nil
	}
	b, err := ss.s.spools.Get(ss.ctx, msg.key+"/"+key, func(w io.Writer) (any, error) {
		_, err := w.Write(extract(msg.section(0, msg.size)))
		return nil, err
	})
	if err != nil {
		return nil, 0, nil, err
	}
	off, n := partial(0, b.Size(), p)
	return b.Section(off, n), n, func() { ss.s.spools.Release(b) }, nil
}

// bodyKey and binaryKey name a section whole (without its partial).
func bodyKey(sec *imap.FetchItemBodySection) string {
	return fmt.Sprintf("body%v.%s.%q.%q", sec.Part, sec.Specifier, sec.HeaderFields, sec.HeaderFieldsNot)
}

func binaryKey(sec *imap.FetchItemBinarySection) string {
	return fmt.Sprintf("binary%v", sec.Part)
}

// partial cuts a <offset.size> partial from the n bytes at off (RFC 3501
// section 6.4.5): what is left of them from offset on, at most size.
func partial(off, n int64, p *imap.SectionPartial) (int64, int64) {
	if p == nil {
		return off, n
	}
	if p.Offset >= n || p.Offset < 0 {
		return off + n, 0
	}
	rest := n - p.Offset
	if p.Size >= 0 && p.Size < rest {
		rest = p.Size
	}
	return off + p.Offset, rest
}

// reader reads the messages of catalog rows from the store in order, up
// to prefetch of them ahead of the one asked for.
type reader struct {
	results []chan fetched
	i       int
	cancel  context.CancelFunc
	free    chan struct{}
	wg      sync.WaitGroup
}

type fetched struct {
	raw []byte
	err error
}

func (ss *session) read(es []catalog.Entry) *reader {
	ctx, cancel := context.WithCancel(ss.ctx)
	r := &reader{results: make([]chan fetched, len(es)), cancel: cancel, free: make(chan struct{}, prefetch)}
	for i := range es {
		r.results[i] = make(chan fetched, 1)
	}
	r.wg.Go(func() {
		for i := range es {
			select {
			case r.free <- struct{}{}:
			case <-ctx.Done():
				return
			}
			if es[i].WireSize > ss.s.spoolAbove {
				// Sent from a spool file (spooled), not held here.
				r.results[i] <- fetched{}
				continue
			}
			r.wg.Go(func() {
				n, err := callnumber.Parse(es[i].CallNumber)
				var m store.Stored
				if err == nil {
					m, err = ss.s.st.Get(ctx, n)
				}
				r.results[i] <- fetched{m.Raw, err}
			})
		}
	})
	return r
}

// next returns the next message, or the error reading it; nil and no
// error for a message too large to be read ahead (spoolThreshold).
func (r *reader) next() ([]byte, error) {
	f := <-r.results[r.i]
	r.i++
	<-r.free
	return f.raw, f.err
}

// stop ends the reads not asked for, and waits for those under way.
func (r *reader) stop() {
	r.cancel()
	r.wg.Wait()
}
