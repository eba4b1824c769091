package pisource

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"strings"
)

// The output of
//
//	git log --format='commit %H' --raw --root --no-abbrev --no-renames
//
// (git-log(1), "RAW OUTPUT FORMAT"): a line "commit OID" per commit, then,
// after a blank line, one line per changed file:
//
//	:100644 100644 OLD NEW M<TAB>PATH
//
// with OLD (or NEW) all zeros for an added (deleted) file. public-inbox's
// paths are plain ASCII ("m", "d", "ab/cdef..."), never quoted, so a
// quoted path (one starting with '"') is simply not one of them.

// change is one line of --raw output.
type change struct {
	status   byte   // 'A', 'M', 'D', ... (git's letters)
	old, new string // object names, hex; all zeros for none
	path     string
}

// ErrBadLog: git's output is not what --raw promises.
var ErrBadLog = errors.New("pisource: unexpected git log output")

// parseChange reads one --raw line (without its newline).
func parseChange(line string) (change, error) {
	bad := func() (change, error) { return change{}, fmt.Errorf("%w: %q", ErrBadLog, line) }
	meta, path, ok := strings.Cut(line, "\t")
	if !ok || !strings.HasPrefix(meta, ":") {
		return bad()
	}
	f := strings.Fields(meta[1:])
	// Two modes, two object names, the status (a letter, with a score
	// for copies and renames: R100).
	if len(f) != 5 || len(f[4]) == 0 || !isOID(f[2]) || !isOID(f[3]) {
		return bad()
	}
	return change{status: f[4][0], old: f[2], new: f[3], path: path}, nil
}

// isOID: 40 (SHA-1) or 64 (SHA-256) lower-case hex digits.
func isOID(s string) bool {
	if len(s) != 40 && len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

func isZero(oid string) bool { return strings.Trim(oid, "0") == "" }

// isV1Path: public-inbox v1 keeps a message at the SHA-1 of its first
// Message-ID, split 2/38 (PublicInbox::MID::mid2path).
func isV1Path(p string) bool {
	return len(p) == 41 && p[2] == '/' && isOID(p[:2]+p[3:])
}

// event is what a commit does to the inbox: a message added, or one
// removed (by its blob).
type event struct {
	commit  string
	added   string // blob of a message the commit adds
	removed string // blob of a message the commit removes
}

// eventsOf says what a change of commit does, per public-inbox's layouts
// (Documentation/public-inbox-v2-format.pod, -v1-format.pod;
// PublicInbox::Import add and remove):
//
//   - v2: each commit's tree holds one file: "m", the message it adds, or
//     "d", the message it removes (the same bytes, so the same blob);
//   - v1: the tree holds every message at its 2/38 path; adding one adds
//     the path, removing one deletes it (the old blob is the message).
//
// A modified v1 path (a rewritten history) removes the old blob and adds
// the new one.
func eventsOf(commit string, c change, emit func(event)) {
	switch {
	case c.path == "m":
		if (c.status == 'A' || c.status == 'M') && !isZero(c.new) {
			emit(event{commit: commit, added: c.new})
		}
	case c.path == "d":
		if (c.status == 'A' || c.status == 'M') && !isZero(c.new) {
			emit(event{commit: commit, removed: c.new})
		}
	case isV1Path(c.path):
		if (c.status == 'D' || c.status == 'M') && !isZero(c.old) {
			emit(event{commit: commit, removed: c.old})
		}
		if (c.status == 'A' || c.status == 'M') && !isZero(c.new) {
			emit(event{commit: commit, added: c.new})
		}
	}
}

// maxLine bounds one line of git's output: a path of public-inbox's is
// short, and anything longer is not one of them.
const maxLine = 64 << 10

// readLog reads git log's output (see above) and calls emit for what each
// commit does, in the order of the output. A line too long to be one of
// public-inbox's is skipped.
func readLog(r io.Reader, emit func(event)) error {
	br := bufio.NewReaderSize(r, maxLine)
	var commit string
	for {
		line, err := br.ReadSlice('\n')
		long := false
		for errors.Is(err, bufio.ErrBufferFull) {
			long = true
			_, err = br.ReadSlice('\n')
		}
		if err != nil && !errors.Is(err, io.EOF) {
			return err
		}
		if len(line) == 0 && err != nil {
			return nil
		}
		s := strings.TrimSuffix(string(line), "\n")
		switch {
		case long || s == "":
		case strings.HasPrefix(s, "commit "):
			commit = strings.TrimPrefix(s, "commit ")
			if !isOID(commit) {
				return fmt.Errorf("%w: %q", ErrBadLog, s)
			}
		case s[0] == ':':
			if commit == "" {
				return fmt.Errorf("%w: a change before any commit", ErrBadLog)
			}
			c, perr := parseChange(s)
			if perr != nil {
				return perr
			}
			eventsOf(commit, c, emit)
		default:
			return fmt.Errorf("%w: %q", ErrBadLog, s)
		}
		if err != nil {
			return nil
		}
	}
}
