package imapserve

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"sync"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapserver"
	"github.com/emersion/go-message/textproto"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
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
	needRaw := opts.Envelope || opts.BodyStructure != nil || len(opts.BodySection) > 0 ||
		len(opts.BinarySection) > 0 || len(opts.BinarySectionSize) > 0
	defer func() {
		if cap(ss.buf) > keepBuf {
			ss.buf = nil
		}
	}()
	err := ss.eachEntry(v, v.spans(numSet), func(es []catalog.Entry, seqs []uint32) error {
		var raws *reader
		if needRaw {
			raws = ss.read(es)
			defer raws.stop()
		}
		for i := range es {
			var raw []byte
			if raws != nil {
				var err error
				if raw, err = raws.next(); errors.Is(err, store.ErrNotFound) {
					// In the catalog, not in the store: a catalog ahead
					// of a store restored from an older backup.
					ss.s.log.Warn("a message of the catalog is not in the store", "callnumber", es[i].CallNumber)
					continue
				} else if err != nil {
					return err
				}
			}
			if err := ss.fetchOne(w, v, seqs[i], &es[i], raw, opts); err != nil {
				return err
			}
		}
		return nil
	})
	return ss.count("FETCH", ss.storeErr("fetch messages", err))
}

// eachEntry calls fn with the catalog rows of the messages of spans, a
// chunk at a time, and their sequence numbers; messages no longer in the
// catalog (not yet expunged from the view) are left out.
func (ss *session) eachEntry(v *view, spans []span, fn func(es []catalog.Entry, seqs []uint32) error) error {
	for _, sp := range spans {
		for lo := sp.lo; lo <= sp.hi; {
			hi := min(sp.hi, lo+chunk-1)
			uids := v.uids[lo-1 : hi]
			es, err := ss.s.cat.Entries(ss.ctx, v.list, uids[0], uids[len(uids)-1], len(uids), false)
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

// fetchOne writes the FETCH response of one message.
func (ss *session) fetchOne(w *imapserver.FetchWriter, v *view, seq uint32, e *catalog.Entry, raw []byte, opts *imap.FetchOptions) (err error) {
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
	if raw != nil {
		ss.buf = mailwire.AppendCRLF(ss.buf[:0], raw)
		wire := ss.buf
		body := mailwire.BodyStart(wire)
		if opts.Envelope {
			h, _ := textproto.ReadHeader(bufio.NewReader(bytes.NewReader(wire[:body])))
			rw.WriteEnvelope(imapserver.ExtractEnvelope(h))
		}
		if opts.BodyStructure != nil {
			rw.WriteBodyStructure(imapserver.ExtractBodyStructure(bytes.NewReader(wire)))
		}
		for _, sec := range opts.BodySection {
			b := section(wire, body, sec)
			wc := rw.WriteBodySection(sec, int64(len(b)))
			_, err := wc.Write(b)
			if cerr := wc.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		for _, sec := range opts.BinarySection {
			b := imapserver.ExtractBinarySection(bytes.NewReader(wire), sec)
			wc := rw.WriteBinarySection(sec, int64(len(b)))
			_, err := wc.Write(b)
			if cerr := wc.Close(); err == nil {
				err = cerr
			}
			if err != nil {
				return err
			}
		}
		for _, sec := range opts.BinarySectionSize {
			rw.WriteBinarySectionSize(sec, imapserver.ExtractBinarySectionSize(bytes.NewReader(wire), sec))
		}
	}
	ss.s.m.messages.Inc()
	return nil
}

// section returns a BODY[...] section of the message wire, whose body
// starts at body: the whole message, its header and its text are cut
// from it as they are (RFC 3501 section 6.4.5: HEADER is the header with
// the blank line after it); anything else is go-imap's to find.
func section(wire []byte, body int, sec *imap.FetchItemBodySection) []byte {
	if len(sec.Part) == 0 && len(sec.HeaderFields) == 0 && len(sec.HeaderFieldsNot) == 0 {
		b := wire
		switch sec.Specifier {
		case imap.PartSpecifierHeader:
			b = wire[:body]
		case imap.PartSpecifierText:
			b = wire[body:]
		}
		return partial(b, sec.Partial)
	}
	if len(sec.Part) == 0 && sec.Specifier == imap.PartSpecifierHeader {
		wire = wire[:body] // HEADER.FIELDS: the header is enough
	}
	return imapserver.ExtractBodySection(bytes.NewReader(wire), sec)
}

// partial cuts a <offset.size> partial from b (RFC 3501 section 6.4.5).
func partial(b []byte, p *imap.SectionPartial) []byte {
	if p == nil {
		return b
	}
	if p.Offset >= int64(len(b)) || p.Offset < 0 {
		return nil
	}
	end := int64(len(b))
	if p.Size >= 0 && p.Offset+p.Size < end {
		end = p.Offset + p.Size
	}
	return b[p.Offset:end]
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

// next returns the next message, or the error reading it.
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
