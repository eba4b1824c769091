// Package scalecorpus makes an archive of many lists out of the shared
// sample (testcorpus): Messages messages spread over Lists mbox files, one
// per list, for benchmarks of what grows with an archive's size.
//
// The sample's messages are read once into memory (its size, not the
// output's, bounds the memory), then written copy after copy, message by
// message, each copy k made distinct:
//
//   - every Message-ID token of Message-ID, In-Reply-To and References
//     becomes <k.ID>, so that a copy's threads hold among themselves and
//     no two copies share a Message-ID;
//   - its dates (Date and the From_ line) move back by an offset of its
//     own, up to MaxShift, so that the months of many copies spread
//     over years rather than pile up;
//   - each thread (messages that share a root: the first References
//     token, else In-Reply-To, else the Message-ID) goes to one list
//     chosen by hashing the root, and a share of threads (CrossPost) to
//     two lists or, with three lists or more, one in five of them to
//     three: each list's copy of a cross-post carries that list's headers
//     as a real one does (a Received line of its server, List-Id,
//     List-Post, List-Subscribe, List-Unsubscribe, Sender, and a subject
//     tag on lists that use one), and the sample's own list headers are
//     dropped.
//
// Messages are interleaved copy by copy for each sample message, so each
// list's mbox runs roughly in date order, as a list's archive does. The
// same Options give the same bytes.
package scalecorpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"context"
	"encoding/binary"
	"encoding/json"
	"errors"
	"fmt"
	"hash/fnv"
	"io"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

// Defaults of Options' zero values.
const (
	DefaultLists     = 11
	DefaultCrossPost = 0.07
	DefaultMaxShift  = 3 * 365 * 24 * time.Hour
)

// ManifestName is the file Generate writes beside the mboxes: the
// Options and Result as JSON, so that a benchmark can reuse a directory
// generated with the same options.
const ManifestName = "scalecorpus.json"

// Options say what Generate writes. Corpus, Dir and Messages are required.
type Options struct {
	Corpus    string        // the sample: an mbox, plain or .gz
	Dir       string        // created if missing; NAME.mbox per list
	Messages  int           // distinct messages; cross-posts add copies beside them
	Lists     int           // 0 is DefaultLists
	CrossPost float64       // share of threads sent to 2-3 lists; 0 is DefaultCrossPost, <0 none
	MaxShift  time.Duration // the most a copy's dates move back; 0 is DefaultMaxShift
	Seed      uint64        // the same seed, the same bytes
	Gzip      bool          // NAME.mbox.gz (gzip's fastest level) instead of NAME.mbox
}

// A List is one generated list's mbox.
type List struct {
	Name     string `json:"name"`
	Path     string `json:"path"`
	Messages int    `json:"messages"` // in its mbox, cross-posts included
	Bytes    int64  `json:"bytes"`    // of its mbox, before any gzip
}

// Result is what Generate wrote.
type Result struct {
	Options     Options `json:"options"`
	Lists       []List  `json:"lists"`
	Messages    int     `json:"messages"`     // distinct messages (Options.Messages)
	Written     int     `json:"written"`      // in all mboxes: Messages and the cross-posts' extra copies
	CrossPosted int     `json:"cross_posted"` // messages written to more than one list
	Bytes       int64   `json:"bytes"`        // of all mboxes, before any gzip
}

// Errors of Generate's options.
var (
	ErrNoMessages = errors.New("scalecorpus: the number of messages must be at least 1")
	ErrLists      = errors.New("scalecorpus: the number of lists must be between 1 and 1000")
	ErrCrossPost  = errors.New("scalecorpus: the cross-posted share must be below 1")
	ErrEmpty      = errors.New("scalecorpus: the sample holds no message")
)

// knownLists name the first lists after real kernel lists, each with the
// server it is on and whether that server tags subjects.
var knownLists = []struct{ name, server string }{
	{"linux-kernel", "vger.example.org"},
	{"netdev", "vger.example.org"},
	{"linux-arm-kernel", "lists.infradead.example.org"},
	{"linux-mips", "vger.example.org"},
	{"linux-usb", "vger.example.org"},
	{"linux-fsdevel", "vger.example.org"},
	{"linux-mm", "kvack.example.org"},
	{"dri-devel", "lists.freedesktop.example.org"},
	{"linux-scsi", "vger.example.org"},
	{"linux-nvme", "lists.infradead.example.org"},
	{"linux-pci", "vger.example.org"},
	{"linux-block", "vger.example.org"},
	{"linux-wireless", "vger.example.org"},
	{"linux-input", "vger.example.org"},
	{"linux-riscv", "lists.infradead.example.org"},
	{"intel-gfx", "lists.freedesktop.example.org"},
}

// listName is list i's name and server; Mailman's servers tag subjects.
func listName(i int) (name, server string, tag bool) {
	if i < len(knownLists) {
		l := knownLists[i]
		return l.name, l.server, !strings.HasPrefix(l.server, "vger.")
	}
	return fmt.Sprintf("list-%d", i), "lists.example.org", i%3 == 0
}

// Generate writes the lists' mboxes into opts.Dir, and ManifestName.
func Generate(ctx context.Context, opts Options) (Result, error) {
	if opts.Messages < 1 {
		return Result{}, ErrNoMessages
	}
	if opts.Lists == 0 {
		opts.Lists = DefaultLists
	}
	if opts.Lists < 1 || opts.Lists > 1000 {
		return Result{}, fmt.Errorf("%w, not %d", ErrLists, opts.Lists)
	}
	if opts.CrossPost == 0 {
		opts.CrossPost = DefaultCrossPost
	}
	if opts.CrossPost >= 1 {
		return Result{}, fmt.Errorf("%w, not %g", ErrCrossPost, opts.CrossPost)
	}
	if opts.MaxShift == 0 {
		opts.MaxShift = DefaultMaxShift
	}
	if opts.MaxShift < 0 {
		opts.MaxShift = 0
	}
	sample, err := readSample(opts.Corpus)
	if err != nil {
		return Result{}, err
	}
	if len(sample) == 0 {
		return Result{}, fmt.Errorf("%w: %s", ErrEmpty, opts.Corpus)
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return Result{}, fmt.Errorf("cannot make %s: %w", opts.Dir, err)
	}
	res := Result{Options: opts, Messages: opts.Messages}
	outs := make([]*listOut, opts.Lists)
	defer func() {
		for _, o := range outs {
			if o != nil {
				o.f.Close()
			}
		}
	}()
	for i := range outs {
		name, server, tag := listName(i)
		path := filepath.Join(opts.Dir, name+".mbox")
		if opts.Gzip {
			path += ".gz"
		}
		o, err := newListOut(path, opts.Gzip)
		if err != nil {
			return Result{}, err
		}
		o.list = listHeaders{name: name, server: server, tag: tag}
		outs[i] = o
	}

	n := len(sample)
	copies := (opts.Messages + n - 1) / n
	last := opts.Messages - (copies-1)*n // messages of the last copy, spread evenly over the sample
	shifts := make([]time.Duration, copies)
	for k := range shifts {
		if opts.MaxShift > 0 {
			shifts[k] = -time.Duration(hash(opts.Seed, "shift", uint64(k)) % uint64(opts.MaxShift))
		}
	}
	var buf []byte
	var targets []int
	for i, t := range sample {
		for k := range copies {
			if k == copies-1 && (i+1)*last/n == i*last/n {
				continue // not among the last copy's messages
			}
			if k&63 == 0 {
				if err := ctx.Err(); err != nil {
					return Result{}, err
				}
			}
			targets = pickLists(targets[:0], opts, t.root, uint64(k))
			if len(targets) > 1 {
				res.CrossPosted++
			}
			g := uint64(i)*uint64(copies) + uint64(k) // the message's own number, for its Received id
			for _, l := range targets {
				o := outs[l]
				var sep string
				buf, sep = t.render(buf[:0], uint64(k), g, shifts[k], o.list)
				if err := o.mw.WriteMessage(sep, buf); err != nil {
					return Result{}, fmt.Errorf("cannot write %s: %w", o.path, err)
				}
				o.messages++
				res.Written++
			}
		}
	}
	for _, o := range outs {
		if err := o.close(); err != nil {
			return Result{}, err
		}
		res.Lists = append(res.Lists, List{Name: o.list.name, Path: o.path, Messages: o.messages, Bytes: o.count.n})
		res.Bytes += o.count.n
	}
	j, err := json.MarshalIndent(res, "", "  ")
	if err != nil {
		return Result{}, err
	}
	if err := os.WriteFile(filepath.Join(opts.Dir, ManifestName), append(j, '\n'), 0o644); err != nil {
		return Result{}, fmt.Errorf("cannot write the manifest: %w", err)
	}
	return res, nil
}

// ReadManifest reads the Result a Generate into dir wrote.
func ReadManifest(dir string) (Result, error) {
	b, err := os.ReadFile(filepath.Join(dir, ManifestName))
	if err != nil {
		return Result{}, err
	}
	var r Result
	if err := json.Unmarshal(b, &r); err != nil {
		return Result{}, fmt.Errorf("cannot read %s: %w", filepath.Join(dir, ManifestName), err)
	}
	return r, nil
}

// pickLists appends the lists a message of the thread root goes to in
// copy k: its home list, and for a cross-posted thread one or two more.
func pickLists(dst []int, opts Options, root string, k uint64) []int {
	h := hash(opts.Seed, root, k)
	home := int(h % uint64(opts.Lists))
	dst = append(dst, home)
	if opts.Lists < 2 || opts.CrossPost <= 0 {
		return dst
	}
	x := hash(opts.Seed^0x9e3779b97f4a7c15, root, k)
	if float64(x>>11)/(1<<53) >= opts.CrossPost {
		return dst
	}
	extra := 1
	if opts.Lists >= 3 && (x>>3)%5 == 0 {
		extra = 2
	}
	// Distinct other lists: home+1+a and, for a third, one after it.
	a := int((h >> 32) % uint64(opts.Lists-1))
	dst = append(dst, (home+1+a)%opts.Lists)
	if extra == 2 {
		b := int((h >> 16) % uint64(opts.Lists-2))
		third := (home + 1 + (a+1+b)%(opts.Lists-1)) % opts.Lists
		dst = append(dst, third)
	}
	return dst
}

// hash is FNV-1a of the seed, s and k: the generator's only randomness.
func hash(seed uint64, s string, k uint64) uint64 {
	h := fnv.New64a()
	var b [8]byte
	binary.LittleEndian.PutUint64(b[:], seed)
	h.Write(b[:])
	h.Write([]byte(s))
	binary.LittleEndian.PutUint64(b[:], k)
	h.Write(b[:])
	// FNV's low bits mix poorly for short inputs: finish as splitmix64.
	z := h.Sum64()
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9
	z = (z ^ (z >> 27)) * 0x94d049bb133111eb
	return z ^ (z >> 31)
}

// readSample parses every message of the sample into a template.
func readSample(path string) ([]*template, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, fmt.Errorf("cannot open the sample: %w", err)
	}
	defer f.Close()
	var r io.Reader = bufio.NewReaderSize(f, 1<<20)
	if strings.HasSuffix(path, ".gz") {
		zr, err := gzip.NewReader(r)
		if err != nil {
			return nil, fmt.Errorf("cannot read %s: %w", path, err)
		}
		r = zr
	}
	rd := mbox.NewReader(r, mbox.Options{Name: path})
	var out []*template
	for {
		m, err := rd.Next()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		var me *mbox.MessageError
		if errors.As(err, &me) {
			continue // a message the reader skips, as the importer would
		}
		if err != nil {
			return nil, err
		}
		out = append(out, parseTemplate(m.Separator, m.Raw))
	}
}

// countWriter counts what goes through it.
type countWriter struct {
	w io.Writer
	n int64
}

func (c *countWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.n += int64(n)
	return n, err
}

// listOut is one list's mbox being written.
type listOut struct {
	path     string
	f        *os.File
	zw       *gzip.Writer
	count    *countWriter
	mw       *mbox.Writer
	list     listHeaders
	messages int
}

func newListOut(path string, gz bool) (*listOut, error) {
	f, err := os.Create(path)
	if err != nil {
		return nil, fmt.Errorf("cannot create %s: %w", path, err)
	}
	o := &listOut{path: path, f: f}
	var w io.Writer = f
	if gz {
		o.zw, _ = gzip.NewWriterLevel(f, gzip.BestSpeed)
		w = o.zw
	}
	o.count = &countWriter{w: w}
	o.mw = mbox.NewWriter(o.count)
	return o, nil
}

func (o *listOut) close() error {
	err := o.mw.Flush()
	if o.zw != nil {
		err = errors.Join(err, o.zw.Close())
	}
	err = errors.Join(err, o.f.Close())
	o.f = nil
	if err != nil {
		return fmt.Errorf("cannot write %s: %w", o.path, err)
	}
	return nil
}

// listHeaders is what a list's server adds to what it distributes.
type listHeaders struct {
	name, server string
	tag          bool // "[name] " before the subject
}

// keep reports whether a sample's header field stays: the sample's own
// list's fields go, as its server added them.
func keep(name []byte) bool {
	n := strings.ToLower(string(name))
	if strings.HasPrefix(n, "list-") || strings.HasPrefix(n, "x-mailman-") {
		return false
	}
	switch n {
	case "x-list-id", "x-list", "x-mailing-list", "mailing-list", "errors-to", "sender", "x-beenthere", "delivered-to":
		return false
	}
	return true
}

// appendDate writes t as RFC 5322 section 3.3 does.
func appendDate(b []byte, t time.Time) []byte {
	return t.AppendFormat(b, "Mon, 02 Jan 2006 15:04:05 -0700")
}

// sampleDate is the date a message without a Date the generator can
// read is given: the sample's start, moved as its copy's are.
var sampleDate = time.Date(1996, 1, 1, 0, 0, 0, 0, time.UTC)

// mailmsgParse is mailmsg.Parse, the importer's own reading of a
// header's threading fields and date.
func mailmsgParse(raw []byte) (id string, refs, inReplyTo []string, date time.Time, ok bool) {
	m, _ := mailmsg.Parse(raw)
	t, err := m.Time()
	return m.MessageID, m.References, m.InReplyTo, t, err == nil && t.Year() > 1970 && t.Year() < 2100
}

// bytesEqualFold is bytes.EqualFold against a lower-case ASCII name.
func bytesEqualFold(b []byte, name string) bool {
	return len(b) == len(name) && bytes.EqualFold(b, []byte(name))
}
