// Package patch reads the patches in mail (the unified diffs of git
// format-patch, diff -u and Subversion): each line's part in a diff, for
// colouring, and what each file gains and loses (a diffstat, and the files
// the catalog indexes). A hunk holds exactly the lines its counts say, so
// the "-- " line ending a git format-patch message is text, not a removed
// line. Mail is hostile: Scan reads at most Limits.MaxBytes and keeps at
// most Limits.MaxFiles files, in time linear in what it reads.
package patch

import (
	"strconv"
	"strings"
)

// Kind is a line's part in a diff.
type Kind uint8

const (
	// Text is a line outside any diff (the message, a commit log).
	Text Kind = iota
	// Header is a file header line: diff --git, index, ---, +++, mode...
	Header
	// Hunk is a hunk header, @@ ... @@.
	Hunk
	// Added, Deleted and Context are lines a hunk adds, removes and keeps.
	Added
	Deleted
	Context
)

// File is what a diff does to one file.
type File struct {
	// Path is its path after the change (before, if deleted), without a/, b/.
	Path string
	// OldPath is its path before a rename or copy, else "".
	OldPath string
	// Added and Deleted count its lines added and removed.
	Added, Deleted int
	// Binary says git wrote "Binary files ... differ" for it.
	Binary bool
}

// Limits bound Scan. The zero value means the defaults.
type Limits struct {
	// MaxBytes is how much text is read; 0 means DefaultMaxBytes.
	MaxBytes int
	// MaxFiles is how many files are kept; 0 means DefaultMaxFiles.
	MaxFiles int
}

// Defaults of Limits.
const (
	DefaultMaxBytes = 4 << 20
	DefaultMaxFiles = 1000
	// maxPath bounds a path kept.
	maxPath = 1024
)

// Diff is what Scan found.
type Diff struct {
	Files []File
	// Truncated: the text or files went past the limits (Text, or not kept).
	Truncated bool
}

// Paths returns the paths the diff touches, a rename's old path too, once.
func (d *Diff) Paths() []string {
	seen := map[string]bool{}
	var out []string
	for _, f := range d.Files {
		for _, p := range []string{f.Path, f.OldPath} {
			if p != "" && !seen[p] {
				seen[p] = true
				out = append(out, p)
			}
		}
	}
	return out
}

type state uint8

const (
	outside state = iota // text
	header               // in a file header, before its first hunk
	hunk                 // in a hunk
	between              // after a hunk: another hunk, a file, or text
)

// scanner reads a text line by line (Scan); make it with newScanner.
type scanner struct {
	lim      Limits
	read     int
	st       state
	old, new int  // lines left in the hunk; -1: no counts
	pending  bool // a "--- " line was seen, a "+++ " must follow
	diff     Diff
	cur      *File
	// pendingOld is the path of a "--- " line before its "+++ ".
	pendingOld string
	// lone says the line before the last was a "--- " line outside a
	// file header that no "+++ " line followed: text after all.
	lone bool
}

func newScanner(lim Limits) *scanner {
	if lim.MaxBytes <= 0 {
		lim.MaxBytes = DefaultMaxBytes
	}
	if lim.MaxFiles <= 0 {
		lim.MaxFiles = DefaultMaxFiles
	}
	return &scanner{lim: lim}
}

// Scan returns the kinds of the lines of text (split after each "\n") and
// the diff they make, up to Limits.MaxBytes (then Diff.Truncated).
func Scan(text string, lim Limits) ([]Kind, Diff) {
	s := newScanner(lim)
	var kinds []Kind
	for len(text) > 0 {
		if s.read >= s.lim.MaxBytes {
			s.diff.Truncated = true
			break
		}
		i := strings.IndexByte(text, '\n')
		line := text
		if i >= 0 {
			line = text[:i+1]
		}
		text = text[len(line):]
		kinds = append(kinds, s.line(line))
		if s.lone {
			s.lone = false
			kinds[len(kinds)-2] = Text
		}
	}
	return kinds, s.Diff()
}

// Diff returns what the lines read so far make.
func (s *scanner) Diff() Diff {
	d := s.diff
	d.Files = append([]File(nil), s.diff.Files...)
	return d
}

// line reads the next line (with or without its line end); it returns its kind.
func (s *scanner) line(line string) Kind {
	if s.read >= s.lim.MaxBytes {
		s.diff.Truncated = true
		return Text
	}
	s.read += len(line)
	l := strings.TrimRight(line, "\r\n")
	switch s.st {
	case hunk:
		if k, ok := s.inHunk(l); ok {
			return k
		}
		s.st = between
	}
	if s.pending {
		s.pending = false
		if strings.HasPrefix(l, "+++ ") {
			path := filePath(l[4:], "b/")
			if path == "" { // deleted: +++ /dev/null
				path = s.pendingOld
			}
			if s.cur == nil || s.st == outside || s.st == between {
				s.newFile(path, "")
			} else if s.cur.Path == "" || s.cur.Path != path && path != "" {
				s.cur.Path = path
			}
			s.st = header
			return Header
		}
		// A "--- " line that no "+++ " follows was text.
		s.lone = s.st != header
	}
	switch {
	case strings.HasPrefix(l, "diff --git "):
		s.newFile(gitPath(l[len("diff --git "):]), "")
		s.st = header
		return Header
	case strings.HasPrefix(l, "--- ") && s.st != hunk:
		s.pending = true
		s.pendingOld = filePath(l[4:], "a/")
		// Outside a file header, only if "+++ " follows (else it is Text).
		return Header
	case strings.HasPrefix(l, "@@ ") && (s.st == header || s.st == between) && s.cur != nil:
		s.old, s.new = hunkCounts(l)
		s.st = hunk
		return Hunk
	case s.st == header:
		switch {
		case strings.HasPrefix(l, "rename from "), strings.HasPrefix(l, "copy from "):
			if s.cur != nil {
				s.cur.OldPath = clip(l[strings.Index(l, " from ")+6:])
			}
		case strings.HasPrefix(l, "rename to "), strings.HasPrefix(l, "copy to "):
			if s.cur != nil {
				s.cur.Path = clip(l[strings.Index(l, " to ")+4:])
			}
		case strings.HasPrefix(l, "Binary files "):
			if s.cur != nil {
				s.cur.Binary = true
			}
		case isHeaderLine(l):
		default:
			s.st = outside
			return Text
		}
		return Header
	case strings.HasPrefix(l, "Index: "), strings.HasPrefix(l, "==========="):
		if s.st == outside || s.st == between {
			return Header
		}
	}
	if s.st == between {
		s.st = outside
	}
	return Text
}

// inHunk reads a line of a hunk; ok is false if the hunk ended before it.
func (s *scanner) inHunk(l string) (Kind, bool) {
	counted := s.old >= 0
	if counted && s.old <= 0 && s.new <= 0 {
		return 0, false
	}
	var k Kind
	switch {
	case strings.HasPrefix(l, "+"):
		if counted && s.new <= 0 {
			return 0, false
		}
		k = Added
		s.new--
		s.cur.Added++
	case strings.HasPrefix(l, "-"):
		if counted && s.old <= 0 {
			return 0, false
		}
		k = Deleted
		s.old--
		s.cur.Deleted++
	case strings.HasPrefix(l, " "), l == "" && counted:
		// An empty line is a context line whose space a mailer ate.
		if counted && (s.old <= 0 || s.new <= 0) {
			return 0, false
		}
		k = Context
		s.old--
		s.new--
	case strings.HasPrefix(l, `\`): // \ No newline at end of file
		return Context, true
	default:
		return 0, false
	}
	return k, true
}

func (s *scanner) newFile(path, old string) {
	if len(s.diff.Files) >= s.lim.MaxFiles {
		s.diff.Truncated = true
		s.cur = &File{} // counted, not kept
		return
	}
	s.diff.Files = append(s.diff.Files, File{Path: path, OldPath: old})
	s.cur = &s.diff.Files[len(s.diff.Files)-1]
}

// isHeaderLine reports the lines git writes between "diff --git" and a hunk.
func isHeaderLine(l string) bool {
	for _, p := range []string{"index ", "new file mode ", "deleted file mode ", "old mode ", "new mode ",
		"similarity index ", "dissimilarity index ", "GIT binary patch", "literal ", "delta "} {
		if strings.HasPrefix(l, p) {
			return true
		}
	}
	return false
}

// hunkCounts reads "@@ -a,b +c,d @@": b and d, the lines the hunk takes
// and gives (1 when omitted, as GNU diff writes it), or -1, -1.
func hunkCounts(l string) (old, new int) {
	rest := strings.TrimPrefix(l, "@@ ")
	end := strings.Index(rest, " @@")
	if end < 0 {
		return -1, -1
	}
	f := strings.Fields(rest[:end])
	if len(f) != 2 || !strings.HasPrefix(f[0], "-") || !strings.HasPrefix(f[1], "+") {
		return -1, -1
	}
	count := func(r string) int {
		_, c, ok := strings.Cut(r, ",")
		if !ok {
			if _, err := strconv.Atoi(r); err != nil {
				return -1
			}
			return 1
		}
		n, err := strconv.Atoi(c)
		if err != nil || n < 0 || n > 1<<30 {
			return -1
		}
		return n
	}
	old, new = count(f[0][1:]), count(f[1][1:])
	if old < 0 || new < 0 {
		return -1, -1
	}
	return old, new
}

// gitPath reads the new path of "a/X b/Y" (git quotes paths with
// unusual characters; such a path is kept as written).
func gitPath(s string) string {
	if i := strings.LastIndex(s, " b/"); i >= 0 {
		return clip(s[i+3:])
	}
	return filePath(s, "a/")
}

// filePath reads the path of a ---/+++ line: without a date after a tab,
// without the prefix git adds; "" for /dev/null.
func filePath(s, prefix string) string {
	if i := strings.IndexByte(s, '\t'); i >= 0 {
		s = s[:i]
	}
	s = strings.TrimSpace(s)
	if s == "/dev/null" {
		return ""
	}
	return clip(strings.TrimPrefix(s, prefix))
}

func clip(p string) string {
	if len(p) > maxPath {
		p = p[:maxPath]
	}
	return p
}
