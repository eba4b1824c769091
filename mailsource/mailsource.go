// Package mailsource opens whatever the importer is given and yields its
// messages one at a time, with bounded memory:
//
//   - "-": standard input (Options.Stdin), read like a regular file;
//   - a regular file: gzip (magic 1f 8b, concatenated members read as one
//     stream) or bzip2 (magic "BZh") decided by content, not by name; then
//     one message (an .eml file) when it starts with a header field
//     ("Name:"), else an mbox (package mbox): "From " starts an mbox, and
//     anything else is read as an mbox too so that data that is neither is
//     reported (mbox.ErrLeadingData in Item.Err), never stored as a
//     message nor dropped silently. An empty input has no messages;
//   - a directory with cur/ or new/: a Maildir (https://cr.yp.to/proto/maildir.html).
//     The files of cur/ and new/ are read in the order of their names (a
//     Maildir name starts with the delivery time), merged across both;
//     tmp/ holds deliveries in progress and is skipped, and so are names
//     starting with a dot. A file moved from new/ to cur/ while reading
//     (as a mail reader does, adding ":2,flags") is followed there;
//   - any other directory: .eml files (name ending in .eml, any case),
//     found recursively and read in lexical order of their paths; names
//     starting with a dot (files and directories) are ignored, and other
//     files are skipped with a warning in the log.
//
// Messages are returned exactly as stored in the source, minus what the
// mbox format adds (see package mbox).
package mailsource

import (
	"bufio"
	"bytes"
	"compress/bzip2"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync/atomic"

	"github.com/chibrary/chibrary/mbox"
)

// Kinds of source, as Format reports them.
const (
	KindMaildir = "maildir"
	KindEMLDir  = "eml-dir"
	KindEML     = "eml"
)

// ErrTooLarge is returned in Item.Err for a message over MaxMessageSize;
// it is mbox.ErrTooLarge, so errors.Is works with either.
var ErrTooLarge = mbox.ErrTooLarge

// Options configure Open. The zero value reads any mbox variant (auto),
// with mbox.DefaultMaxMessageSize, no standard input and no logging.
type Options struct {
	// Format is the mbox variant of mbox inputs ("" is auto). Other
	// inputs ignore it.
	Format mbox.Format
	// MaxMessageSize is the largest message accepted, in bytes; 0 is
	// mbox.DefaultMaxMessageSize. Larger ones are reported in Item.Err.
	MaxMessageSize int64
	// Stdin is read for the path "-". nil reads nothing (no messages).
	Stdin io.Reader
	// Logger receives warnings (skipped files). nil discards them.
	Logger *slog.Logger
}

// Item is one message of a source.
type Item struct {
	// Raw is the message's bytes (nil when Err is set).
	Raw []byte
	// Where locates it: "file:line" in an mbox (the line of its From_
	// line), the file path in a Maildir or .eml directory or for one
	// .eml file, "stdin" for a single message on standard input.
	Where string
	// Err is set when the message could be delimited but not read (e.g.
	// mbox.ErrTooLarge): the importer counts it as failed and goes on.
	Err error
	// Separator is the mbox From_ line ("" for other sources).
	Separator string
	// Warnings say what was odd about the message, e.g. a truncated mbox.
	Warnings []string
}

// Source yields the messages of one input. It is not safe for concurrent
// use, except Progress, which may be called from any goroutine.
type Source struct {
	ctx  context.Context
	log  *slog.Logger
	max  int64
	name string // for Where: the path, or "stdin"
	kind string // KindMaildir, KindEMLDir, KindEML, or "" for mbox
	comp string // "gzip", "bzip2" or ""

	file    *os.File
	closers []io.Closer // decompressor and prefetcher, closed in reverse
	in      io.Reader   // decompressed input (mbox or single message)
	mr      *mbox.Reader
	single  bool // the single message was returned

	files []string // Maildir or .eml directory: paths to read
	sizes []int64
	next  int

	done  atomic.Int64
	total int64
}

// countingReader counts the bytes read through it, for Progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Open opens path (see the package documentation). ctx bounds the whole
// reading: Next fails with ctx's error once it is done.
func Open(ctx context.Context, path string, opts Options) (*Source, error) {
	s := &Source{ctx: ctx, log: opts.Logger, max: opts.MaxMessageSize, name: path}
	if s.log == nil {
		s.log = slog.New(slog.DiscardHandler)
	}
	if s.max <= 0 {
		s.max = mbox.DefaultMaxMessageSize
	}
	if _, err := mbox.ParseFormat(string(opts.Format)); err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	if path == "-" {
		s.name = "stdin"
		stdin := opts.Stdin
		if stdin == nil {
			stdin = bytes.NewReader(nil)
		}
		if err := s.openStream(countingReader{stdin, &s.done}, opts); err != nil {
			s.Close()
			return nil, fmt.Errorf("cannot open stdin: %w", err)
		}
		return s, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	if fi.IsDir() {
		if err := s.openDir(path); err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", path, err)
		}
		return s, nil
	}
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	s.file, s.total = f, fi.Size()
	if err := s.openStream(countingReader{f, &s.done}, opts); err != nil {
		s.Close()
		return nil, fmt.Errorf("cannot open %s: %w", path, err)
	}
	return s, nil
}

// openStream decompresses r by its magic number and decides between an
// mbox and a single message.
func (s *Source) openStream(r io.Reader, opts Options) error {
	br := bufio.NewReaderSize(r, 64<<10)
	magic, err := br.Peek(3)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot read: %w", err)
	}
	var in io.Reader = br
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br) // multistream: concatenated members are one stream
		if err != nil {
			return fmt.Errorf("cannot read gzip: %w", err)
		}
		s.comp, in = "gzip", zr
		s.closers = append(s.closers, zr)
	case string(magic) == "BZh":
		s.comp, in = "bzip2", bzip2.NewReader(br)
	}
	if s.comp != "" {
		if s.file != nil {
			// Decompress on another core while the mbox reader parses.
			// Not for stdin, where Close could wait forever on a blocked
			// read.
			pf := newPrefetcher(in, 256<<10, 4)
			s.closers = append(s.closers, pf)
			in = pf
		}
		in = bufio.NewReaderSize(in, 64<<10)
	}
	head, err := in.(*bufio.Reader).Peek(1000)
	if err != nil && !errors.Is(err, io.EOF) {
		return fmt.Errorf("cannot read %s: %w", s.comp, err)
	}
	s.in = in
	if !startsWithField(head) {
		s.mr = mbox.NewReader(in, mbox.Options{Name: s.name, Format: opts.Format, MaxMessageSize: s.max})
		return nil
	}
	s.kind = KindEML
	return nil
}

// openDir lists a Maildir or a directory of .eml files.
func (s *Source) openDir(dir string) error {
	var maildir bool
	for _, sub := range []string{"cur", "new"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			maildir = true
		}
	}
	if maildir {
		s.kind = KindMaildir
		// Maildir: cur/ and new/ hold delivered messages; tmp/ holds
		// deliveries in progress, which must not be read.
		type entry struct{ name, path string }
		var all []entry
		for _, sub := range []string{"cur", "new"} {
			des, err := os.ReadDir(filepath.Join(dir, sub))
			if errors.Is(err, fs.ErrNotExist) {
				continue
			}
			if err != nil {
				return fmt.Errorf("cannot list: %w", err)
			}
			for _, de := range des {
				if strings.HasPrefix(de.Name(), ".") || de.IsDir() {
					continue
				}
				all = append(all, entry{de.Name(), filepath.Join(dir, sub, de.Name())})
			}
		}
		slices.SortFunc(all, func(a, b entry) int {
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return strings.Compare(a.path, b.path)
		})
		for _, e := range all {
			s.addFile(e.path)
		}
		return nil
	}
	s.kind = KindEMLDir
	return filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
		if err != nil {
			return fmt.Errorf("cannot list: %w", err)
		}
		if path != dir && strings.HasPrefix(de.Name(), ".") {
			if de.IsDir() {
				return filepath.SkipDir
			}
			return nil
		}
		if de.IsDir() {
			return nil
		}
		if !strings.EqualFold(filepath.Ext(de.Name()), ".eml") {
			s.log.Warn("skipping a file that is not .eml", "path", path)
			return nil
		}
		s.addFile(path)
		return nil
	})
}

func (s *Source) addFile(path string) {
	var size int64
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			s.log.Warn("skipping a file that is not a regular file", "path", path)
			return
		}
		size = fi.Size()
	}
	s.files = append(s.files, path)
	s.sizes = append(s.sizes, size)
	s.total += size
}

// Format says what the source is: the mbox variant (with how it was
// picked and the compression, e.g. "mboxrd (gzip; auto: ...)"; the variant
// is known after the first Next), "maildir", "eml-dir" or "eml".
func (s *Source) Format() string {
	if s.mr == nil {
		if s.comp != "" {
			return s.kind + " (" + s.comp + ")"
		}
		return s.kind
	}
	var notes []string
	if s.comp != "" {
		notes = append(notes, s.comp)
	}
	if r := s.mr.FormatReason(); r != "" {
		notes = append(notes, r)
	}
	f := string(s.mr.Format())
	if len(notes) > 0 {
		f += " (" + strings.Join(notes, "; ") + ")"
	}
	return f
}

// Progress reports how far reading has come, in bytes: of the input file
// as stored (compressed bytes for .gz and .bz2, read ahead by a buffer),
// of standard input (total 0: unknown), or the summed sizes of the files
// of a Maildir or .eml directory (listed at Open). Safe to call from any
// goroutine.
func (s *Source) Progress() (done, total int64) {
	return s.done.Load(), s.total
}

// Next returns the next message, or io.EOF after the last one. An Item
// whose Err is set is a message that could not be read; reading goes on.
// Any returned error is fatal.
func (s *Source) Next() (Item, error) {
	if err := s.ctx.Err(); err != nil {
		return Item{}, err
	}
	switch {
	case s.mr != nil:
		m, err := s.mr.Next()
		if errors.Is(err, io.EOF) {
			return Item{}, io.EOF
		}
		var me *mbox.MessageError
		if errors.As(err, &me) {
			return Item{Where: fmt.Sprintf("%s:%d", me.Name, me.Line), Err: err}, nil
		}
		if err != nil {
			return Item{}, err
		}
		return Item{
			Raw:       m.Raw,
			Where:     fmt.Sprintf("%s:%d", s.name, m.Line),
			Separator: m.Separator,
			Warnings:  m.Warnings,
		}, nil
	case s.kind == KindEML:
		if s.single {
			return Item{}, io.EOF
		}
		s.single = true
		raw, err := readLimited(s.in, s.max)
		if errors.Is(err, ErrTooLarge) {
			return Item{Where: s.name, Err: fmt.Errorf("%s: %w", s.name, err)}, nil
		}
		if err != nil {
			return Item{}, fmt.Errorf("cannot read %s: %w", s.name, err)
		}
		return Item{Raw: raw, Where: s.name}, nil
	default:
		if s.next >= len(s.files) {
			return Item{}, io.EOF
		}
		path, size := s.files[s.next], s.sizes[s.next]
		s.next++
		defer s.done.Add(size)
		raw, err := s.readFile(path)
		if err != nil {
			return Item{Where: path, Err: err}, nil
		}
		return Item{Raw: raw, Where: path}, nil
	}
}

// readFile reads one message file of a directory source.
func (s *Source) readFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) && s.kind == KindMaildir && filepath.Base(filepath.Dir(path)) == "new" {
		// A mail reader moved it to cur/, adding ":2,flags" (Maildir spec).
		dir := filepath.Join(filepath.Dir(filepath.Dir(path)), "cur")
		if m, _ := filepath.Glob(filepath.Join(dir, globEscape(filepath.Base(path))+":2,*")); len(m) > 0 {
			f, err = os.Open(m[0])
		}
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read message: %w", err)
	}
	defer f.Close()
	raw, err := readLimited(f, s.max)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return raw, nil
}

// readLimited reads r to the end, or fails with ErrTooLarge past max bytes
// without reading further.
func readLimited(r io.Reader, max int64) ([]byte, error) {
	raw, err := io.ReadAll(io.LimitReader(r, max+1))
	if err != nil {
		return nil, fmt.Errorf("cannot read message: %w", err)
	}
	if int64(len(raw)) > max {
		return nil, fmt.Errorf("%w (limit %d bytes)", ErrTooLarge, max)
	}
	return raw, nil
}

// startsWithField reports whether b starts with a header field name and
// its colon (RFC 5322 section 2.2: printable US-ASCII except ':').
func startsWithField(b []byte) bool {
	for i, c := range b {
		switch {
		case c == ':':
			return i > 0
		case c < 33 || c > 126:
			return false
		}
	}
	return false
}

func globEscape(s string) string {
	r := strings.NewReplacer(`\`, `\\`, `*`, `\*`, `?`, `\?`, `[`, `\[`)
	return r.Replace(s)
}

// Close releases the input and stops the goroutine that decompresses
// ahead of Next (compressed inputs); it must be called. It does not close
// Options.Stdin.
func (s *Source) Close() error {
	var errs []error
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	s.closers = nil
	if s.file != nil {
		errs = append(errs, s.file.Close())
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot close %s: %w", s.name, err)
	}
	return nil
}
