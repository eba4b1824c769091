// Package pisource reads the messages of a public-inbox repository in the
// order its history added them, leaving out those its history removed
// later:
//
//   - a v2 inbox, a directory with git/0.git, git/1.git, ... (its
//     "epochs", read in numeric order; all.git and the indexes are not
//     read);
//   - one v2 epoch, or a v1 repository: a bare git directory (HEAD,
//     objects/, refs/).
//
// It reads a v2 epoch's history, what each commit adds and removes, from
// the epoch's packs itself (walk.go), and git's "git log --raw" where
// that history is not one it reads (a v1 repository, merges, loose
// objects, ...); and it builds the messages from the packs too (pack.go:
// each inflated once, where git cat-file inflates most of public-inbox's
// twice), asking "git cat-file --batch" for what is not in a pack it
// reads (loose objects, alternates). Memory stays bounded by the set of
// removed messages, the list of an epoch's events (about 41 bytes a
// commit, as git log --reverse held in git's process), the objects kept
// to build the next ones (8 MiB) and one message.
//
// A Reader given a state directory remembers, per epoch, the last commit
// it read (Checkpoint, called once every message it returned is stored),
// and reads only the commits after it next time, as long as that commit
// is still in the epoch's history (public-inbox-purge rewrites history:
// the epoch is then read again).
package pisource

import (
	"bufio"
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chibrary/chibrary/mbox"
)

// Kinds of repository, as Detect and Format say them.
const (
	KindInbox = "public-inbox v2" // a directory of epochs
	KindEpoch = "public-inbox v2 epoch"
	KindV1    = "public-inbox v1"
	kindRepo  = "git" // a bare repository, v1 or v2 epoch: known once opened
)

// ErrNoGit: the git binary, which reads the repositories, is not there.
var ErrNoGit = errors.New("pisource: git not found (public-inbox repositories are read with git)")

// Detect says whether path is a public-inbox repository: a directory with
// git/0.git in it (a v2 inbox), or a bare git repository (HEAD, objects/
// and refs/).
func Detect(path string) bool {
	if isDir(filepath.Join(path, "git", "0.git")) {
		return true
	}
	return isBare(path)
}

func isBare(path string) bool {
	fi, err := os.Stat(filepath.Join(path, "HEAD"))
	return err == nil && fi.Mode().IsRegular() && isDir(filepath.Join(path, "objects")) && isDir(filepath.Join(path, "refs"))
}

func isDir(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && fi.IsDir()
}

// Options configure Open; zero values are defaults.
type Options struct {
	// Git is the git binary ("": "git" on $PATH).
	Git string
	// MaxMessageSize: a larger message is an Item with mbox.ErrTooLarge
	// (0: mbox.DefaultMaxMessageSize).
	MaxMessageSize int64
	// StateDir, if set, is where the Reader remembers how far it read
	// each epoch (one small JSON file per repository).
	StateDir string
	Logger   *slog.Logger // nil discards
}

// Message is one message of the repository.
type Message struct {
	Raw   []byte // nil when Err is set; read only (the Reader may build the next message from it)
	Where string // "EPOCH@COMMIT"
	Err   error  // the message could not be read (too large, missing)
}

// epoch is one git repository of the source.
type epoch struct {
	dir   string // the git directory
	name  string // for Where and the state: "git/0.git", or the path
	tip   string // the commit HEAD names; "" for an empty repository
	v2    bool
	from  string // the commit read up to by an earlier run, if any
	prior int64  // messages read up to from
	read  int64  // messages read after from in this run
	done  bool   // read to tip in this run
	// hist is the epoch's events, walked in reading the removals,
	// until its stream takes them.
	hist *history
	// gitLog: the walk cannot read the epoch's history: git log does.
	gitLog bool
}

// Reader reads one repository. Only Progress is safe for concurrent use.
type Reader struct {
	ctx    context.Context
	cancel context.CancelFunc
	opts   Options
	log    *slog.Logger
	path   string
	kind   string
	epochs []*epoch
	// removals counts, per blob, the removals still ahead in the
	// commits this run reads: an add of a blob with a removal ahead is
	// not a message (public-inbox's remove takes out every copy).
	removals map[string]int
	// addedRead marks the blobs of removals that this run saw added.
	addedRead map[string]bool
	skipped   int64  // messages read by earlier runs, skipped
	state     string // the state file, "" for none
	// noPacks: every message from git cat-file, every history from
	// git log (tests of that path)
	noPacks bool
	// noWalk: every history from git log (tests of that path)
	noWalk       bool
	removalsRead bool // into removed, by the first Next
	// fresh are the blobs removed, without an add before in this run,
	// by commits after an earlier run's (blob to "EPOCH@COMMIT").
	fresh map[string]string

	cur *stream // the epoch being read
	idx int     // of cur in epochs
	// bytes of messages read
	done atomic.Int64
}

// stream is the reading of one epoch: its history (walked, or git log's)
// lists the messages, read from the epoch's packs, or by git cat-file
// (started when first needed).
type stream struct {
	e       *epoch
	hist    *history // the walked history; nil: git log's, on pending
	ctx     context.Context
	packs   *packs
	cat     *exec.Cmd
	catIn   *bufio.Writer
	catInC  io.Closer
	catOut  *bufio.Reader
	pending chan event // the messages to read, in order
	wg      sync.WaitGroup
	feedErr error // of the feeding goroutine, once pending is closed
	stop    context.CancelFunc
	stderr  *stderrBuf
}

// Open opens the repository at path (see Detect); ctx bounds the reading.
// The first Next reads the removals of the commits to read first, in
// every epoch (walking its history, or with "git log -- d").
func Open(ctx context.Context, path string, opts Options) (*Reader, error) {
	if opts.Git == "" {
		opts.Git = "git"
	}
	if _, err := exec.LookPath(opts.Git); err != nil {
		return nil, fmt.Errorf("cannot read %s: %w", path, ErrNoGit)
	}
	if opts.MaxMessageSize <= 0 {
		opts.MaxMessageSize = mbox.DefaultMaxMessageSize
	}
	r := &Reader{opts: opts, log: opts.Logger, path: path, removals: map[string]int{}, addedRead: map[string]bool{}, fresh: map[string]string{}}
	if r.log == nil {
		r.log = slog.New(slog.DiscardHandler)
	}
	r.ctx, r.cancel = context.WithCancel(ctx)
	if err := r.open(); err != nil {
		r.cancel()
		return nil, fmt.Errorf("cannot read %s: %w", path, err)
	}
	return r, nil
}

func (r *Reader) open() error {
	if isDir(filepath.Join(r.path, "git", "0.git")) {
		r.kind = KindInbox
		des, err := os.ReadDir(filepath.Join(r.path, "git"))
		if err != nil {
			return err
		}
		type numbered struct {
			n    int
			name string
		}
		var ns []numbered
		for _, de := range des {
			num, ok := strings.CutSuffix(de.Name(), ".git")
			n, err := strconv.Atoi(num)
			if !ok || err != nil || n < 0 || strconv.Itoa(n) != num {
				continue
			}
			ns = append(ns, numbered{n, de.Name()})
		}
		slices.SortFunc(ns, func(a, b numbered) int { return a.n - b.n })
		for _, n := range ns {
			r.epochs = append(r.epochs, &epoch{dir: filepath.Join(r.path, "git", n.name), name: "git/" + n.name, v2: true})
		}
	} else {
		r.kind = kindRepo
		r.epochs = []*epoch{{dir: r.path, name: filepath.Base(filepath.Clean(r.path))}}
	}
	for _, e := range r.epochs {
		tip, err := r.git(e.dir, "rev-parse", "--verify", "-q", "HEAD^{commit}")
		if err != nil {
			var ee *exec.ExitError
			if errors.As(err, &ee) && ee.ExitCode() == 1 {
				continue // no commit yet: a new epoch
			}
			return fmt.Errorf("%s: %w", e.name, err)
		}
		e.tip = strings.TrimSpace(tip)
		if r.kind == kindRepo {
			names, err := r.git(e.dir, "ls-tree", "--name-only", e.tip)
			if err != nil {
				return fmt.Errorf("%s: %w", e.name, err)
			}
			e.v2 = true
			for _, n := range strings.Fields(names) {
				if n != "m" && n != "d" {
					e.v2 = false
				}
			}
			r.kind = KindV1
			if e.v2 {
				r.kind = KindEpoch
			}
		}
	}
	if err := r.loadState(); err != nil {
		return err
	}
	return nil
}

// readAllRemovals reads the removals of every epoch, once, before the
// first message.
func (r *Reader) readAllRemovals() error {
	if r.removalsRead {
		return nil
	}
	first := true
	for _, e := range r.epochs {
		if e.tip == "" || e.tip == e.from {
			continue
		}
		h, err := r.walk(e, nil)
		if err != nil {
			return err
		}
		if h != nil {
			h.removals(func(blob string) { r.removals[blob]++ })
			if first {
				e.hist = h // read first: its stream takes it
			}
		} else if err := r.readRemovals(e); err != nil {
			return fmt.Errorf("cannot read %s: %w", e.dir, err)
		}
		first = false
	}
	r.removalsRead = true
	return nil
}

// walk reads the history of e from its packs (ps, or e's opened for it),
// or returns nil when git log must read it (logged, once an epoch); an
// error only when r's context ended.
func (r *Reader) walk(e *epoch, ps *packs) (*history, error) {
	if !e.v2 || r.noWalk || r.noPacks || e.gitLog {
		return nil, nil
	}
	var err error
	var h *history
	if why := rewritesHistory(e.dir); why != "" {
		err = fmt.Errorf("%w: git rewrites it (%s)", errOddHistory, why)
	} else {
		if ps == nil {
			// A pack it cannot open leaves objects out: the walk
			// says so if it needs them.
			ps, _ = openPacks(e.dir, len(e.tip)/2, r.opts.MaxMessageSize, cacheBytes)
			defer ps.close()
		}
		h, err = ps.walk(r.ctx, e.tip, e.from)
		if cerr := r.ctx.Err(); cerr != nil {
			return nil, cerr
		}
		ps.cache.clear() // the commits' and trees' objects: not the messages' bases
	}
	if err != nil {
		r.log.Info("reading the epoch's history with git log", "epoch", e.name, "why", err)
		e.gitLog = true
		return nil, nil
	}
	return h, nil
}

// git runs a short git command in dir and returns its output.
func (r *Reader) git(dir string, args ...string) (string, error) {
	cmd := exec.CommandContext(r.ctx, r.opts.Git, append([]string{"--git-dir=" + dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		if msg := strings.TrimSpace(stderr.String()); msg != "" {
			return "", fmt.Errorf("git %s: %w: %s", args[0], err, firstLine(msg))
		}
		return "", fmt.Errorf("git %s: %w", args[0], err)
	}
	return string(out), nil
}

func firstLine(s string) string {
	l, _, _ := strings.Cut(s, "\n")
	return l
}

// logArgs are git log's arguments for the output readLog reads.
// (--root: the first commit's message too, whatever log.showRoot says).
var logArgs = []string{"log", "--format=commit %H", "--raw", "--root", "--no-abbrev", "--no-renames", "--no-color"}

// readRemovals counts the removals in the commits of e this run reads
// (the ones after an earlier run's, or all): a removal before them
// removes a message added before them too, read by that earlier run.
func (r *Reader) readRemovals(e *epoch) error {
	args := slices.Clone(logArgs)
	if !e.v2 {
		// v1 removes by deleting the path; public-inbox never changes a
		// path in place, but a rewritten history may.
		args = append(args, "--diff-filter=DM")
	}
	rng := e.tip
	if e.from != "" {
		rng = e.from + ".." + e.tip
	}
	args = append(args, rng, "--")
	if e.v2 {
		args = append(args, "d")
	}
	return r.runLog(e.dir, args, func(ev event) {
		if ev.removed != "" {
			r.removals[ev.removed]++
		}
	})
}

// warnFresh warns of the messages removed since an earlier run imported
// them: they stay in the archive.
func (r *Reader) warnFresh() {
	for blob, where := range r.fresh {
		r.log.Warn("public-inbox removed a message that an earlier import read; it stays in the archive until resolver remove takes it out",
			"removed_by", where, "blob", blob)
	}
	clear(r.fresh)
}

// runLog runs git log with args in dir and hands its events to emit.
func (r *Reader) runLog(dir string, args []string, emit func(event)) error {
	return r.runLogCtx(r.ctx, dir, args, emit)
}

// Kind says what the repository is: KindInbox, KindEpoch or KindV1.
func (r *Reader) Kind() string { return r.kind }

// Format describes the source for the log.
func (r *Reader) Format() string {
	if r.kind == KindInbox {
		return fmt.Sprintf("%s (%d epochs)", r.kind, len(r.epochs))
	}
	return r.kind
}

// Unread says whether some epoch has commits that no earlier run read
// (known at Open, without reading them).
func (r *Reader) Unread() bool {
	for _, e := range r.epochs {
		if e.tip != "" && e.tip != e.from {
			return true
		}
	}
	return false
}

// Skipped is how many messages earlier runs read and this one skips.
func (r *Reader) Skipped() int64 { return r.skipped }

// Progress reports the bytes of the messages read so far; the total is
// not known (0).
func (r *Reader) Progress() (done, total int64) { return r.done.Load(), 0 }

// Next returns the next message, or io.EOF after the last one. Any
// returned error is fatal.
func (r *Reader) Next() (Message, error) {
	if !r.Unread() {
		return Message{}, io.EOF // nothing new: no need for the removals
	}
	if err := r.readAllRemovals(); err != nil {
		return Message{}, err
	}
	for {
		if err := r.ctx.Err(); err != nil {
			return Message{}, err
		}
		if r.cur == nil {
			if r.idx >= len(r.epochs) {
				r.warnFresh()
				return Message{}, io.EOF
			}
			e := r.epochs[r.idx]
			if e.tip == "" || e.tip == e.from {
				e.done = true
				r.idx++
				continue
			}
			s, err := r.start(e)
			if err != nil {
				return Message{}, fmt.Errorf("cannot read %s: %w", e.dir, err)
			}
			r.cur = s
		}
		m, err := r.cur.next(r)
		if errors.Is(err, io.EOF) {
			err = r.cur.close()
			if err != nil {
				return Message{}, fmt.Errorf("cannot read %s: %w", r.cur.e.dir, err)
			}
			r.cur.e.done = true
			r.cur = nil
			r.idx++
			continue
		}
		if err != nil {
			return Message{}, fmt.Errorf("cannot read %s: %w", r.cur.e.dir, err)
		}
		if m.Raw == nil && m.Err == nil {
			continue // an empty blob: a message public-inbox-purge emptied
		}
		r.cur.e.read++
		return m, nil
	}
}

// ahead is how many messages git log lists ahead of the reader.
const ahead = 256

// cacheBytes bounds the objects the reader keeps to build the next from
// (see packs). public-inbox's importer (git fast-import) stores each
// message as a delta on the one before, in chains of up to 50; git
// repack leaves most messages whole. 8 MiB holds a chain of 50 messages
// of 160 KB.
const cacheBytes = 8 << 20

// deltaBaseCache is git cat-file's cache of delta bases, for the
// messages read through it: git's default, 96 MiB, fills memory touched
// for the first time with bases never read again.
const deltaBaseCache = "core.deltaBaseCacheLimit=8m"

// start starts reading e: git log lists what its commits add, in order,
// and the reader builds each message from e's packs (or asks git
// cat-file, for what is not in them).
func (r *Reader) start(e *epoch) (*stream, error) {
	ctx, stop := context.WithCancel(r.ctx)
	s := &stream{e: e, pending: make(chan event, ahead), stop: stop, stderr: new(stderrBuf), ctx: ctx}
	rng := e.tip
	if e.from != "" {
		rng = e.from + ".." + e.tip
	}
	s.packs = &packs{}
	if !r.noPacks {
		ps, err := openPacks(e.dir, len(e.tip)/2, r.opts.MaxMessageSize, cacheBytes)
		if err != nil {
			r.log.Warn("some packs of the epoch are read by git cat-file instead", "epoch", e.name, "err", err)
		}
		s.packs = ps
	}
	if e.hist == nil {
		h, err := r.walk(e, s.packs)
		if err != nil {
			s.packs.close()
			stop()
			return nil, err
		}
		e.hist = h
	}
	if e.hist != nil {
		s.hist, e.hist = e.hist, nil
		s.pending = make(chan event)
		close(s.pending) // for close
		return s, nil
	}
	args := append(slices.Clone(logArgs), "--reverse", rng)
	s.wg.Go(func() {
		defer close(s.pending)
		s.feedErr = r.runLogCtx(ctx, e.dir, args, func(ev event) {
			if ctx.Err() != nil || !r.admit(e, ev) {
				return
			}
			select {
			case s.pending <- ev:
			case <-ctx.Done():
			}
		})
		if s.feedErr == nil {
			s.feedErr = ctx.Err()
		}
	})
	return s, nil
}

// admit keeps count of the removals ahead as ev of e is read, and says
// whether ev is a message to read: an add whose blob no later commit
// removes.
func (r *Reader) admit(e *epoch, ev event) bool {
	if ev.removed != "" {
		if r.removals[ev.removed] > 0 {
			r.removals[ev.removed]--
		}
		if !r.addedRead[ev.removed] && r.skipped > 0 {
			r.fresh[ev.removed] = e.name + "@" + ev.commit
		}
		return false
	}
	if n, ok := r.removals[ev.added]; ok {
		r.addedRead[ev.added] = true
		if n > 0 {
			return false // removed later
		}
	}
	return true
}

// catFile starts git cat-file --batch, for the messages not in a pack
// the reader reads (loose objects, alternates).
func (s *stream) catFile(r *Reader) error {
	s.cat = exec.CommandContext(s.ctx, r.opts.Git, "--git-dir="+s.e.dir, "-c", deltaBaseCache, "cat-file", "--batch")
	s.cat.Stderr = s.stderr
	s.cat.WaitDelay = 5 * time.Second // a child of git holding its stderr
	catIn, err := s.cat.StdinPipe()
	if err != nil {
		return err
	}
	catOut, err := s.cat.StdoutPipe()
	if err != nil {
		return err
	}
	if err := s.cat.Start(); err != nil {
		s.cat = nil
		return err
	}
	growPipe(catOut)
	s.catIn = bufio.NewWriter(catIn)
	s.catInC = catIn
	s.catOut = bufio.NewReaderSize(catOut, 256<<10)
	return nil
}

// runLogCtx is runLog under ctx.
func (r *Reader) runLogCtx(ctx context.Context, dir string, args []string, emit func(event)) error {
	cmd := exec.CommandContext(ctx, r.opts.Git, append([]string{"--git-dir=" + dir}, args...)...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		return err
	}
	if err := cmd.Start(); err != nil {
		return err
	}
	perr := readLog(out, emit)
	if perr != nil {
		io.Copy(io.Discard, out)
	}
	werr := cmd.Wait()
	if perr != nil {
		return perr
	}
	if werr != nil {
		if ctx.Err() != nil {
			return ctx.Err()
		}
		return fmt.Errorf("git log: %w: %s", werr, firstLine(strings.TrimSpace(stderr.String())))
	}
	return nil
}

// next reads the next message; a Message without Raw and Err is an
// empty blob.
func (s *stream) next(r *Reader) (Message, error) {
	ev, err := s.event(r)
	if err != nil {
		return Message{}, err
	}
	where := s.e.name + "@" + ev.commit
	raw, err := s.packs.blob(ev.added)
	switch {
	case err == nil:
		r.done.Add(int64(len(raw)))
		if len(raw) == 0 {
			return Message{}, nil
		}
		return Message{Raw: raw, Where: where}, nil
	case errors.Is(err, errNotHere):
		return s.fromGit(r, ev, where)
	default:
		// What git makes of it decides: it reads what it wrote.
		r.log.Warn("cannot read a message from its pack, asking git cat-file", "where", where, "blob", ev.added, "err", err)
		return s.fromGit(r, ev, where)
	}
}

// event is the next message's event, from the walked history or git
// log's; io.EOF after the last.
func (s *stream) event(r *Reader) (event, error) {
	if s.hist != nil {
		for {
			ev, ok := s.hist.next()
			if !ok {
				return event{}, io.EOF
			}
			if r.admit(s.e, ev) {
				return ev, nil
			}
		}
	}
	ev, ok := <-s.pending
	if !ok {
		s.wg.Wait()
		if s.feedErr != nil {
			return event{}, s.feedErr
		}
		return event{}, io.EOF
	}
	return ev, nil
}

// fromGit asks git cat-file for the message of ev.
func (s *stream) fromGit(r *Reader, ev event, where string) (Message, error) {
	if s.cat == nil {
		if err := s.catFile(r); err != nil {
			return Message{}, fmt.Errorf("git cat-file: %w", err)
		}
	}
	if _, err := s.catIn.WriteString(ev.added + "\n"); err != nil {
		return Message{}, fmt.Errorf("git cat-file: %w%s", err, s.tail())
	}
	if err := s.catIn.Flush(); err != nil {
		return Message{}, fmt.Errorf("git cat-file: %w%s", err, s.tail())
	}
	hdr, err := s.catOut.ReadString('\n')
	if errors.Is(err, io.EOF) {
		err = io.ErrUnexpectedEOF // not the end of the messages
	}
	if err != nil {
		return Message{}, fmt.Errorf("git cat-file: %w%s", err, s.tail())
	}
	f := strings.Fields(hdr)
	if len(f) == 2 && f[1] == "missing" {
		return Message{Where: where, Err: fmt.Errorf("%s: blob %s of the message is missing from the repository (a partial clone?)", where, ev.added)}, nil
	}
	if len(f) != 3 || f[0] != ev.added || f[1] != "blob" {
		return Message{}, fmt.Errorf("git cat-file: unexpected %q for %s", strings.TrimSpace(hdr), ev.added)
	}
	size, err := strconv.ParseInt(f[2], 10, 64)
	if err != nil || size < 0 {
		return Message{}, fmt.Errorf("git cat-file: unexpected %q", strings.TrimSpace(hdr))
	}
	r.done.Add(size)
	if size > r.opts.MaxMessageSize {
		if _, err := io.CopyN(io.Discard, s.catOut, size+1); err != nil {
			return Message{}, fmt.Errorf("git cat-file: %w", err)
		}
		return Message{Where: where, Err: fmt.Errorf("%s: %w (limit %d bytes)", where, mbox.ErrTooLarge, r.opts.MaxMessageSize)}, nil
	}
	raw := make([]byte, size+1) // and cat-file's newline
	if _, err := io.ReadFull(s.catOut, raw); err != nil {
		return Message{}, fmt.Errorf("git cat-file: %w%s", err, s.tail())
	}
	if raw[size] != '\n' {
		return Message{}, fmt.Errorf("git cat-file: no newline after blob %s", ev.added)
	}
	if size == 0 {
		return Message{}, nil
	}
	return Message{Raw: raw[:size:size], Where: where}, nil
}

func (s *stream) tail() string {
	if msg := strings.TrimSpace(s.stderr.String()); msg != "" {
		return ": " + firstLine(msg)
	}
	return ""
}

// stderrBuf keeps the start of what a running git writes to its standard
// error, for the error that its output breaks: read while git runs, so
// locked; bounded, as only its first line is shown.
type stderrBuf struct {
	mu  sync.Mutex
	buf []byte
}

const maxStderr = 4 << 10

func (b *stderrBuf) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.buf = append(b.buf, p[:min(len(p), maxStderr-len(b.buf))]...)
	return len(p), nil
}

func (b *stderrBuf) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return string(b.buf)
}

// close stops the stream's processes and waits for them.
func (s *stream) close() error {
	s.stop()
	for range s.pending {
	}
	s.wg.Wait()
	s.packs.close()
	if s.cat == nil {
		if s.feedErr != nil && !errors.Is(s.feedErr, context.Canceled) {
			return s.feedErr
		}
		return nil
	}
	s.catInC.Close()
	err := s.cat.Wait()
	if s.feedErr != nil && !errors.Is(s.feedErr, context.Canceled) {
		return s.feedErr
	}
	// Killed by stop (exec returns the context's error then), or exited
	// on its own: what it wrote was read or is not wanted.
	var ee *exec.ExitError
	if err != nil && !errors.As(err, &ee) && !errors.Is(err, context.Canceled) {
		return err
	}
	return nil
}

// Close stops reading; it must be called.
func (r *Reader) Close() error {
	r.cancel()
	var err error
	if r.cur != nil {
		err = r.cur.close()
		r.cur = nil
	}
	if errors.Is(err, context.Canceled) {
		err = nil
	}
	return err
}

// state is what a state file keeps, per epoch.
type state struct {
	Path   string       `json:"path"`
	Epochs []epochState `json:"epochs"`
}

type epochState struct {
	Name     string `json:"name"`
	Commit   string `json:"commit"`
	Messages int64  `json:"messages"`
}

// loadState reads the state file and sets each epoch's from when its
// commit is still in the epoch's history.
func (r *Reader) loadState() error {
	if r.opts.StateDir == "" {
		return nil
	}
	abs, err := filepath.Abs(r.path)
	if err != nil {
		return err
	}
	abs = filepath.Clean(abs)
	sum := sha256.Sum256([]byte(abs))
	r.state = filepath.Join(r.opts.StateDir, "public-inbox-"+hex.EncodeToString(sum[:8])+".json")
	b, err := os.ReadFile(r.state)
	if errors.Is(err, os.ErrNotExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read how far it was read before: %w", err)
	}
	var st state
	if err := json.Unmarshal(b, &st); err != nil || st.Path != abs {
		r.log.Warn("ignoring a state file that is not this repository's, reading all of it", "state", r.state)
		return nil
	}
	for _, es := range st.Epochs {
		for _, e := range r.epochs {
			if e.name != es.Name || e.tip == "" || !isOID(es.Commit) {
				continue
			}
			if es.Commit != e.tip {
				if _, err := r.git(e.dir, "merge-base", "--is-ancestor", es.Commit, e.tip); err != nil {
					r.log.Warn("the epoch's history was rewritten since it was last read (public-inbox-purge?): reading it again, what is stored already comes again as duplicates",
						"epoch", e.name, "last_read", es.Commit)
					continue
				}
			}
			e.from, e.prior = es.Commit, es.Messages
		}
	}
	// Epochs follow one another in time: once one has commits to read
	// (a purge rewrote it), every later one is read whole, so that its
	// removals before the commit an earlier run read are seen.
	stale := false
	for _, e := range r.epochs {
		if stale {
			e.from, e.prior = "", 0
		}
		r.skipped += e.prior
		if e.tip != "" && e.tip != e.from {
			stale = true
		}
	}
	return nil
}

// Checkpoint records that every message Next returned is stored: the
// epochs read to their end are skipped up to here by the next Open with
// the same StateDir. Without a StateDir it does nothing.
func (r *Reader) Checkpoint() error {
	if r.state == "" {
		return nil
	}
	abs, _ := filepath.Abs(r.path)
	st := state{Path: filepath.Clean(abs)}
	for _, e := range r.epochs {
		switch {
		case e.done && e.tip != "":
			st.Epochs = append(st.Epochs, epochState{Name: e.name, Commit: e.tip, Messages: e.prior + e.read})
		case e.from != "":
			st.Epochs = append(st.Epochs, epochState{Name: e.name, Commit: e.from, Messages: e.prior})
		}
	}
	b, err := json.MarshalIndent(st, "", "  ")
	if err != nil {
		return err
	}
	if err := os.MkdirAll(r.opts.StateDir, 0o755); err != nil {
		return fmt.Errorf("cannot record how far %s was read: %w", r.path, err)
	}
	tmp, err := os.CreateTemp(r.opts.StateDir, ".public-inbox-*")
	if err != nil {
		return fmt.Errorf("cannot record how far %s was read: %w", r.path, err)
	}
	_, err = tmp.Write(append(b, '\n'))
	if err == nil {
		err = tmp.Sync()
	}
	if cerr := tmp.Close(); err == nil {
		err = cerr
	}
	if err == nil {
		err = os.Rename(tmp.Name(), r.state)
	}
	if err != nil {
		os.Remove(tmp.Name())
		return fmt.Errorf("cannot record how far %s was read: %w", r.path, err)
	}
	return nil
}
