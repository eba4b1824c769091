// Package mailsource opens whatever the importer is given and yields its
// messages one at a time, with bounded memory:
//
//   - "-": standard input (Options.Stdin), read like a regular file;
//   - a regular file, gzip or bzip2 by content, not name: one message (.eml)
//     when it starts with a header field, else an mbox, so that data that is
//     neither is reported (mbox.ErrLeadingData), never stored nor dropped;
//   - a directory with cur/ or new/: a Maildir, its files merged in name
//     (delivery time) order, tmp/ skipped, a file moved to cur/ while
//     reading followed there;
//   - a public-inbox repository (a v2 inbox, a directory with git/0.git;
//     one of its epochs or a v1 repository, a bare git directory): the
//     messages its history adds and does not remove later ([pisource]);
//   - any other directory: its mbox and .eml files, recursively, in the
//     order of [Less]; names starting with a dot are ignored, other files
//     skipped with a warning.
//
// A message is never returned in part: when the input fails inside one,
// that message is an Item whose Err wraps mbox.ErrIncomplete, and nothing
// after it in that file is read.
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

	"github.com/chibrary/chibrary/mailsource/pisource"
	"github.com/chibrary/chibrary/mbox"
)

// Kinds of source, as Format reports them.
const (
	KindMaildir = "maildir"
	KindEMLDir  = "eml-dir" // a folder of .eml files only
	KindFolder  = "folder"  // a folder with mbox files in it
	KindEML     = "eml"
)

// ErrTooLarge is mbox.ErrTooLarge, so errors.Is works with either.
var ErrTooLarge = mbox.ErrTooLarge

// Options configure Open; zero values are defaults.
type Options struct {
	Format         mbox.Format  // of mbox inputs; "" is auto
	MaxMessageSize int64        // 0 is mbox.DefaultMaxMessageSize
	Stdin          io.Reader    // for the path "-"; nil has no messages
	Logger         *slog.Logger // nil discards
	// StateDir, if set, is where public-inbox sources remember how far
	// they were read (Source.Checkpoint), so that the next import of the
	// same repository reads only the commits added since.
	StateDir string
}

type entry struct {
	path    string
	size    int64
	mailbox bool // an mbox file, else one message
}

// Item is one message of a source.
type Item struct {
	Raw   []byte // nil when Err is set
	Where string // "file:line" in an mbox, else the file path or "stdin"
	// Err is set when the message could be delimited but not read, e.g.
	// mbox.ErrTooLarge; reading goes on.
	Err       error
	Separator string // the mbox From_ line
	Warnings  []string
}

// Source yields the messages of one input. Only Progress is safe for
// concurrent use.
type Source struct {
	ctx    context.Context
	log    *slog.Logger
	max    int64
	format mbox.Format
	name   string // for Where: the path, or "stdin"
	kind   string // KindMaildir, KindEMLDir, KindFolder, KindEML, or "" for mbox
	comp   string // "gzip", "bzip2" or ""

	file    *os.File
	closers []io.Closer // decompressor and prefetcher, closed in reverse
	in      io.Reader   // decompressed input (mbox or single message)
	mr      *mbox.Reader
	single  bool // the single message was returned

	files     []entry // directory: the files to read
	next      int
	sub       *Source // folder: the mbox file being read
	subEnd    int64   // folder: done once sub is read
	mailboxes int     // folder: how many of files are mbox files

	done  *atomic.Int64 // bytes read; a folder's mbox files add to it
	total int64

	pi *pisource.Reader // a public-inbox repository
}

// countingReader counts for Progress.
type countingReader struct {
	r io.Reader
	n *atomic.Int64
}

func (c countingReader) Read(p []byte) (int, error) {
	n, err := c.r.Read(p)
	c.n.Add(int64(n))
	return n, err
}

// Open opens path; ctx bounds the whole reading.
func Open(ctx context.Context, path string, opts Options) (*Source, error) {
	s := &Source{ctx: ctx, log: opts.Logger, max: opts.MaxMessageSize, format: opts.Format, name: path, done: new(atomic.Int64)}
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
		if err := s.openStream(countingReader{stdin, s.done}); err != nil {
			s.Close()
			return nil, fmt.Errorf("cannot open stdin: %w", err)
		}
		return s, nil
	}
	fi, err := os.Stat(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open %s: %w", path, pathless(err))
	}
	if fi.IsDir() && pisource.Detect(path) {
		pi, err := pisource.Open(ctx, path, pisource.Options{MaxMessageSize: s.max, StateDir: opts.StateDir, Logger: s.log})
		if err != nil {
			return nil, err // it names the path
		}
		s.pi = pi
		return s, nil
	}
	if fi.IsDir() {
		if err := s.openDir(path); err != nil {
			return nil, fmt.Errorf("cannot open %s: %w", path, pathless(err))
		}
		return s, nil
	}
	s.total = fi.Size()
	if err := s.openFile(path); err != nil {
		return nil, err
	}
	return s, nil
}

// pathless drops the path an *fs.PathError repeats.
func pathless(err error) error {
	var pe *fs.PathError
	if errors.As(err, &pe) {
		return pe.Err
	}
	return err
}

func (s *Source) openFile(path string) error {
	f, err := os.Open(path)
	if err != nil {
		return fmt.Errorf("cannot open %s: %w", path, pathless(err))
	}
	s.file = f
	if err := s.openStream(countingReader{f, s.done}); err != nil {
		s.Close()
		return fmt.Errorf("cannot open %s: %w", path, err)
	}
	return nil
}

// openStream decompresses r by its magic number.
func (s *Source) openStream(r io.Reader) error {
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
		// Not closed: gzip.Reader.Close only repeats a read error, which
		// is reported with the message it broke.
		s.comp = "gzip"
		in = &decompressor{r: zr, name: s.comp}
	case string(magic) == "BZh":
		s.comp = "bzip2"
		in = &decompressor{r: bzip2.NewReader(br), name: s.comp}
	}
	if s.comp != "" {
		if s.file != nil {
			// Decompress on another core; not for stdin, where Close could
			// wait for ever on a blocked read.
			pf := newPrefetcher(in, 256<<10, 4)
			s.closers = append(s.closers, pf)
			in = pf
		}
		in = bufio.NewReaderSize(in, 64<<10)
	}
	// A read error here is sticky: the reading that follows reports it
	// with the message it breaks.
	head, _ := in.(*bufio.Reader).Peek(1000)
	s.in = in
	if !startsWithField(head) {
		s.mr = mbox.NewReader(in, mbox.Options{Name: s.name, Format: s.format, MaxMessageSize: s.max})
		return nil
	}
	s.kind = KindEML
	return nil
}

// decompressor names the errors of a gzip or bzip2 reader ("unexpected
// EOF"), and repeats its first error on every later read.
type decompressor struct {
	r    io.Reader
	name string
	err  error
}

func (d *decompressor) Read(p []byte) (int, error) {
	if d.err != nil {
		return 0, d.err
	}
	n, err := d.r.Read(p)
	switch {
	case err == nil, errors.Is(err, io.EOF):
	case errors.Is(err, io.ErrUnexpectedEOF):
		err = fmt.Errorf("%s data ends early (truncated file?): %w", d.name, err)
	default:
		err = fmt.Errorf("corrupt %s data: %w", d.name, err)
	}
	d.err = err
	return n, err
}

func (s *Source) openDir(dir string) error {
	var maildir bool
	for _, sub := range []string{"cur", "new"} {
		if fi, err := os.Stat(filepath.Join(dir, sub)); err == nil && fi.IsDir() {
			maildir = true
		}
	}
	if maildir {
		s.kind = KindMaildir
		// tmp/ holds deliveries in progress, which must not be read.
		type named struct{ name, path string }
		var all []named
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
				all = append(all, named{de.Name(), filepath.Join(dir, sub, de.Name())})
			}
		}
		slices.SortFunc(all, func(a, b named) int {
			if c := strings.Compare(a.name, b.name); c != 0 {
				return c
			}
			return strings.Compare(a.path, b.path)
		})
		for _, e := range all {
			s.addFile(e.path, false)
		}
		return nil
	}
	err := filepath.WalkDir(dir, func(path string, de fs.DirEntry, err error) error {
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
		if strings.EqualFold(filepath.Ext(de.Name()), ".eml") {
			s.addFile(path, false)
			return nil
		}
		if isMailbox(path) {
			s.addFile(path, true)
			return nil
		}
		s.log.Warn("skipping a file that is neither a mailbox (mbox, plain or compressed) nor an .eml message", "path", path)
		return nil
	})
	if err != nil {
		return err
	}
	slices.SortStableFunc(s.files, func(a, b entry) int { return Less(a.path, b.path) })
	s.kind = KindEMLDir
	if s.mailboxes > 0 {
		s.kind = KindFolder
	}
	return nil
}

// mailboxExts are the names of mbox files, before any .gz or .bz2.
var mailboxExts = []string{".mbox", ".mbx"}

// isMailbox tells an mbox file of a folder: named so, or starting with
// "From " (RFC 4155), compressed or not.
func isMailbox(path string) bool {
	name := strings.ToLower(filepath.Base(path))
	name = strings.TrimSuffix(strings.TrimSuffix(name, ".gz"), ".bz2")
	for _, ext := range mailboxExts {
		if strings.HasSuffix(name, ext) {
			return true
		}
	}
	f, err := os.Open(path)
	if err != nil {
		return false // reported as skipped; a named mailbox is reported when read
	}
	defer f.Close()
	br := bufio.NewReaderSize(f, 4<<10)
	var in io.Reader = br
	magic, _ := br.Peek(3)
	switch {
	case len(magic) >= 2 && magic[0] == 0x1f && magic[1] == 0x8b:
		zr, err := gzip.NewReader(br)
		if err != nil {
			return false
		}
		defer zr.Close()
		in = zr
	case string(magic) == "BZh":
		in = bzip2.NewReader(br)
	}
	head := make([]byte, 5)
	n, _ := io.ReadFull(in, head)
	return string(head[:n]) == "From "
}

// Less orders the paths of a folder's files for reading, comparing runs of
// digits as numbers and month names by their place in the year, so that
// 2001-February.txt.gz comes before 2001-March.txt.gz, list.mbox.9 before
// list.mbox.10.
func Less(a, b string) int {
	as := strings.Split(filepath.ToSlash(a), "/")
	bs := strings.Split(filepath.ToSlash(b), "/")
	for i := 0; i < len(as) && i < len(bs); i++ {
		if c := compareNames(as[i], bs[i]); c != 0 {
			return c
		}
	}
	if c := len(as) - len(bs); c != 0 {
		return c
	}
	return strings.Compare(a, b)
}

// compareNames compares two file names token by token (see Less).
func compareNames(a, b string) int {
	for a != "" && b != "" {
		ta, na, ra := nameToken(a)
		tb, nb, rb := nameToken(b)
		switch {
		case na >= 0 && nb >= 0:
			if na != nb {
				return cmpInt(na, nb)
			}
		case na >= 0:
			return -1 // numbers before text
		case nb >= 0:
			return 1
		default:
			if c := strings.Compare(ta, tb); c != 0 {
				return c
			}
		}
		a, b = ra, rb
	}
	if c := cmpInt(len(a), len(b)); c != 0 {
		return c
	}
	return 0
}

func cmpInt(a, b int) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

var months = []string{"january", "february", "march", "april", "may", "june",
	"july", "august", "september", "october", "november", "december"}

// nameToken splits the first token off s: a run of digits (value n), a
// run of letters (n is the month's number when it names one, else -1), or
// one other byte (n = -1).
func nameToken(s string) (tok string, n int, rest string) {
	isDigit := func(c byte) bool { return '0' <= c && c <= '9' }
	isLetter := func(c byte) bool { return 'a' <= c|0x20 && c|0x20 <= 'z' }
	i := 1
	switch {
	case isDigit(s[0]):
		for i < len(s) && isDigit(s[i]) {
			i++
		}
		n = 0
		for _, c := range []byte(strings.TrimLeft(s[:i], "0")) {
			if n > (1<<31)/10 {
				return s[:i], -1, s[i:] // too long for a number: text
			}
			n = n*10 + int(c-'0')
		}
		return s[:i], n, s[i:]
	case isLetter(s[0]):
		for i < len(s) && isLetter(s[i]) {
			i++
		}
		word := strings.ToLower(s[:i])
		for m, name := range months {
			if word == name || len(word) == 3 && word == name[:3] {
				return s[:i], m + 1, s[i:]
			}
		}
		return s[:i], -1, s[i:]
	}
	return s[:1], -1, s[1:]
}

func (s *Source) addFile(path string, mailbox bool) {
	var size int64
	if fi, err := os.Stat(path); err == nil {
		if !fi.Mode().IsRegular() {
			s.log.Warn("skipping a file that is not a regular file", "path", path)
			return
		}
		size = fi.Size()
	}
	s.files = append(s.files, entry{path: path, size: size, mailbox: mailbox})
	s.total += size
	if mailbox {
		s.mailboxes++
	}
}

// Format says what the source is, e.g. "mboxrd (gzip; auto: ...)" (known
// after the first Next) or KindMaildir.
func (s *Source) Format() string {
	if s.pi != nil {
		return s.pi.Format()
	}
	if s.kind == KindFolder {
		return fmt.Sprintf("%s (%d mbox files, %d .eml files)", s.kind, s.mailboxes, len(s.files)-s.mailboxes)
	}
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

// Progress reports how far reading has come, in bytes of the input as
// stored (compressed, read ahead); total is 0 when unknown (stdin).
func (s *Source) Progress() (done, total int64) {
	if s.pi != nil {
		return s.pi.Progress()
	}
	return s.done.Load(), s.total
}

// Next returns the next message, or io.EOF after the last one. Any
// returned error is fatal.
func (s *Source) Next() (Item, error) {
	if err := s.ctx.Err(); err != nil {
		return Item{}, err
	}
	switch {
	case s.pi != nil:
		m, err := s.pi.Next()
		if err != nil {
			return Item{}, err
		}
		return Item{Raw: m.Raw, Where: m.Where, Err: m.Err}, nil
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
		switch {
		case errors.Is(err, ErrTooLarge):
			return Item{Where: s.name, Err: fmt.Errorf("%s: %w", s.name, err)}, nil
		case err != nil:
			return Item{Where: s.name, Err: fmt.Errorf("%s: %w: %w", s.name, mbox.ErrIncomplete, err)}, nil
		}
		return Item{Raw: raw, Where: s.name}, nil
	}
	for {
		if s.sub != nil {
			it, err := s.sub.Next()
			if err == nil {
				return it, nil
			}
			s.closeSub()
			if !errors.Is(err, io.EOF) {
				if cerr := s.ctx.Err(); cerr != nil {
					return Item{}, cerr
				}
				return Item{Where: s.files[s.next-1].path, Err: err}, nil
			}
			continue
		}
		if s.next >= len(s.files) {
			return Item{}, io.EOF
		}
		e := s.files[s.next]
		s.next++
		if e.mailbox {
			sub := &Source{ctx: s.ctx, log: s.log, max: s.max, format: s.format, name: e.path, done: s.done}
			s.subEnd = s.done.Load() + e.size
			s.sub = sub
			if err := sub.openFile(e.path); err != nil {
				s.closeSub()
				return Item{Where: e.path, Err: err}, nil
			}
			continue
		}
		raw, err := s.readFile(e.path)
		s.done.Add(e.size)
		if err != nil {
			return Item{Where: e.path, Err: err}, nil
		}
		return Item{Raw: raw, Where: e.path}, nil
	}
}

// closeSub closes a folder's mbox file; all its bytes count as read.
func (s *Source) closeSub() {
	if err := s.sub.Close(); err != nil {
		s.log.Warn("cannot close a mailbox", "err", err)
	}
	s.sub = nil
	s.done.Store(max(s.done.Load(), s.subEnd))
}

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
		return nil, fmt.Errorf("cannot read message: %w", pathless(err))
	}
	defer f.Close()
	raw, err := readLimited(f, s.max)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return raw, nil
}

// readLimited fails with ErrTooLarge past max bytes without reading further.
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

// Checkpoint records that every message Next returned is stored, for a
// source that can skip them next time (a public-inbox repository opened
// with Options.StateDir); for the others it does nothing.
func (s *Source) Checkpoint() error {
	if s.pi != nil {
		return s.pi.Checkpoint()
	}
	return nil
}

// Probe says, when it can tell without reading a message (known), whether
// the source has messages, or had some that an earlier import's
// Checkpoint lets it skip: a public-inbox repository with commits.
func (s *Source) Probe() (has, known bool) {
	if s.pi != nil {
		return s.pi.Unread() || s.pi.Skipped() > 0, true
	}
	return false, false
}

// Skipped is how many messages an earlier import's Checkpoint lets this
// one skip.
func (s *Source) Skipped() int64 {
	if s.pi != nil {
		return s.pi.Skipped()
	}
	return 0
}

// Close must be called: it stops the goroutine that decompresses ahead.
// It does not close Options.Stdin.
func (s *Source) Close() error {
	var errs []error
	if s.pi != nil {
		errs = append(errs, s.pi.Close())
	}
	if s.sub != nil {
		errs = append(errs, s.sub.Close())
		s.sub = nil
	}
	for i := len(s.closers) - 1; i >= 0; i-- {
		errs = append(errs, s.closers[i].Close())
	}
	s.closers = nil
	if s.file != nil {
		errs = append(errs, s.file.Close())
		s.file = nil
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("cannot close %s: %w", s.name, err)
	}
	return nil
}
