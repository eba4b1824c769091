package pisource

import (
	"bytes"
	"context"
	"crypto/sha1"
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"hash"
	"io"
	"os"
	"path/filepath"

	"github.com/klauspost/compress/zlib"
)

// Reading a v2 epoch's history from its packs, in this process, where
// two "git log --raw" passes read it (what the commits add, and "-- d"
// for the removals): public-inbox v2 writes one commit per message, one
// parent each, whose tree holds one file, "m" (the message it adds) or
// "d" (the message it removes) (Documentation/public-inbox-v2-format.pod).
// The walk follows the parents from the epoch's head, as git resolves it
// (rev-parse, at Open), back to the commit an earlier run read (or to the
// root), reads each commit's tree, and gives the events git log gives,
// in its order: each commit's changes to "m" and "d" against its parent
// (none for a commit whose file is its parent's), oldest commit first,
// "d" before "m" within a commit.
//
// The commits and trees are read from the packs, or loose (-mda's
// fast-import leaves small batches loose). Anything else is read by git
// log, as before, for the whole epoch: a merge, a tree with any other
// entry or mode (a v1 repository's fan-out, a symbolic link, a
// directory), an object neither in a pack read here nor loose (an
// alternate's), a malformed object, or a repository whose history git
// rewrites as it reads it (info/grafts, replace refs, a shallow clone).
//
// The formats (git documents no commit or tree format of its own: these
// are the objects as "git cat-file" shows them, written by git's
// commit.c:commit_tree_extended and read by parse_commit_buffer; loose
// objects as in gitformat-loose(5)):
//
//	commit:  "tree " HEX "\n", then ("parent " HEX "\n")*, then the
//	         author, committer, other headers and the message, unread
//	         here
//	tree:    entries (tree.c, tree-walk.c:decode_tree_entry), each
//	         MODE (octal, no leading zero) " " NAME "\0" NAME-BYTES
//	         (hash-length raw bytes), sorted by name

// ErrBadObject: a commit or tree that is not as git writes it.
var ErrBadObject = errors.New("pisource: malformed git object")

// errOddHistory: not a history the walk reads; git log reads it.
var errOddHistory = errors.New("not a public-inbox v2 history (one parent a commit, \"m\" or \"d\" alone in each tree)")

// parseCommit reads the header of a commit object: its tree and its
// parents (hex, slices of data), for object names of hashLen bytes.
// Parents beyond the second are counted, not returned.
func parseCommit(data []byte, hashLen int) (tree []byte, parents [2][]byte, n int, err error) {
	hexLen := 2 * hashLen
	field := func(key string) ([]byte, bool) {
		if len(data) < len(key)+hexLen+1 || string(data[:len(key)]) != key || data[len(key)+hexLen] != '\n' {
			return nil, false
		}
		v := data[len(key) : len(key)+hexLen]
		if !isHex(v) {
			return nil, false
		}
		data = data[len(key)+hexLen+1:]
		return v, true
	}
	tree, ok := field("tree ")
	if !ok {
		return nil, parents, 0, fmt.Errorf("%w: a commit without its tree line", ErrBadObject)
	}
	for {
		p, ok := field("parent ")
		if !ok {
			break
		}
		if n < len(parents) {
			parents[n] = p
		}
		n++
	}
	// Whatever follows is git's to check (the author, the committer);
	// a "parent" line that is not one is not this reader's either.
	if bytes.HasPrefix(data, []byte("parent ")) {
		return nil, parents, 0, fmt.Errorf("%w: a malformed parent line", ErrBadObject)
	}
	return tree, parents, n, nil
}

// isHex: lower-case hex digits, as git writes object names.
func isHex(b []byte) bool {
	for _, c := range b {
		if !('0' <= c && c <= '9' || 'a' <= c && c <= 'f') {
			return false
		}
	}
	return true
}

// treeEntry is one entry of a tree object; its slices are the object's.
type treeEntry struct {
	mode []byte // octal, as written: "100644", "40000"
	name []byte
	oid  []byte // hashLen raw bytes
}

// maxTreeEntries bounds the entries parseTree reads: a v2 tree has one.
const maxTreeEntries = 1 << 16

// parseTree calls each for every entry of a tree object, in order, and
// checks the entries are as git writes them: a mode of octal digits
// without a leading zero, a name without "/" or NUL that is not "", "."
// or "..", hashLen bytes of name, names in git's order.
func parseTree(data []byte, hashLen int, each func(treeEntry) error) error {
	var prev treeEntry
	for n := 0; len(data) > 0; n++ {
		if n >= maxTreeEntries {
			return fmt.Errorf("%w: a tree of more than %d entries", ErrBadObject, maxTreeEntries)
		}
		sp := bytes.IndexByte(data, ' ')
		if sp < 1 || sp > 7 || data[0] == '0' {
			return fmt.Errorf("%w: a tree entry's mode", ErrBadObject)
		}
		for _, c := range data[:sp] {
			if c < '0' || c > '7' {
				return fmt.Errorf("%w: a tree entry's mode", ErrBadObject)
			}
		}
		nul := bytes.IndexByte(data[sp+1:], 0)
		if nul < 0 || sp+1+nul+1+hashLen > len(data) {
			return fmt.Errorf("%w: a tree entry cut short", ErrBadObject)
		}
		e := treeEntry{mode: data[:sp], name: data[sp+1 : sp+1+nul]}
		e.oid = data[sp+1+nul+1 : sp+1+nul+1+hashLen]
		if len(e.name) == 0 || bytes.IndexByte(e.name, '/') >= 0 || string(e.name) == "." || string(e.name) == ".." {
			return fmt.Errorf("%w: a tree entry's name %q", ErrBadObject, e.name)
		}
		if n > 0 && compareEntries(prev, e) >= 0 {
			return fmt.Errorf("%w: tree entries out of order (%q after %q)", ErrBadObject, e.name, prev.name)
		}
		if err := each(e); err != nil {
			return err
		}
		prev = e
		data = data[sp+1+nul+1+hashLen:]
	}
	return nil
}

// compareEntries orders tree entries as git does (tree.c:
// base_name_compare): by name, a directory's name as if it ended in "/".
func compareEntries(a, b treeEntry) int {
	key := func(e treeEntry, i int) int {
		if i < len(e.name) {
			return int(e.name[i])
		}
		if i == len(e.name) && string(e.mode) == "40000" {
			return '/'
		}
		return -1
	}
	for i := 0; ; i++ {
		ka, kb := key(a, i), key(b, i)
		if ka != kb || ka < 0 {
			return ka - kb
		}
	}
}

// appendTree writes entries as a tree object (for the tests' round
// trips).
func appendTree(b []byte, entries []treeEntry) []byte {
	for _, e := range entries {
		b = append(b, e.mode...)
		b = append(b, ' ')
		b = append(b, e.name...)
		b = append(b, 0)
		b = append(b, e.oid...)
	}
	return b
}

// v2Tree is what a v2 commit's tree holds: the blobs "m" and "d"
// (zero-length names when absent).
type v2Tree struct {
	m, d []byte
}

// Kinds of history records.
const (
	recAdded   = 'a'
	recRemoved = 'r'
)

// history is the events of an epoch, read by walk: records of a kind
// byte, the commit's name and the blob's (raw), newest first as walked;
// next reads them oldest first.
type history struct {
	hashLen int
	recs    []byte
	end     int // of the records not read yet
}

func (h *history) add(kind byte, commit, blob []byte) {
	h.recs = append(h.recs, kind)
	h.recs = append(h.recs, commit...)
	h.recs = append(h.recs, blob...)
}

func (h *history) recLen() int { return 1 + 2*h.hashLen }

// next returns the oldest event not read yet.
func (h *history) next() (event, bool) {
	if h.end < h.recLen() {
		return event{}, false
	}
	h.end -= h.recLen()
	rec := h.recs[h.end : h.end+h.recLen()]
	ev := event{commit: hex.EncodeToString(rec[1 : 1+h.hashLen])}
	blob := hex.EncodeToString(rec[1+h.hashLen:])
	if rec[0] == recAdded {
		ev.added = blob
	} else {
		ev.removed = blob
	}
	return ev, true
}

// removals calls f with the blob of each removal.
func (h *history) removals(f func(blob string)) {
	for at := 0; at+h.recLen() <= len(h.recs); at += h.recLen() {
		if h.recs[at] == recRemoved {
			f(hex.EncodeToString(h.recs[at+1+h.hashLen : at+h.recLen()]))
		}
	}
}

// rewritesHistory says why git would not read dir's history as its
// objects say (grafts, replace refs, a shallow clone), or "".
func rewritesHistory(dir string) string {
	for _, f := range []string{"info/grafts", "shallow"} {
		if _, err := os.Lstat(filepath.Join(dir, f)); err == nil {
			return f
		}
	}
	if des, err := os.ReadDir(filepath.Join(dir, "refs", "replace")); err == nil && len(des) > 0 {
		return "refs/replace"
	}
	if b, err := os.ReadFile(filepath.Join(dir, "packed-refs")); err == nil && bytes.Contains(b, []byte(" refs/replace/")) {
		return "refs/replace in packed-refs"
	}
	return ""
}

// walk reads the history of the epoch from tip (hex) back to stop (hex,
// not included; "" for the root) from ps, and returns its events (see
// above). errOddHistory, errNotHere, ErrBadPack, ErrBadDelta,
// ErrBadObject: git log reads it.
func (ps *packs) walk(ctx context.Context, tip, stop string) (*history, error) {
	hashLen := len(tip) / 2
	h := &history{hashLen: hashLen}
	cur, err := hex.DecodeString(tip)
	if err != nil {
		return nil, fmt.Errorf("%w: head %q", errOddHistory, tip)
	}
	stopName, err := hex.DecodeString(stop)
	if err != nil {
		return nil, fmt.Errorf("%w: %q", errOddHistory, stop)
	}
	// A history with more commits from the packs than they hold loops
	// (a pack that lies about its names; a loose object's name is
	// checked).
	limit, packed := 0, 0
	for _, p := range ps.files {
		limit += p.n
	}
	var child v2Tree
	var childName []byte
	parentName := make([]byte, hashLen)
	treeName := make([]byte, hashLen)
	for {
		if err := ctx.Err(); err != nil {
			return nil, err // a long history: stop when told
		}
		data, loose, err := ps.objectNamed(cur, objCommit, false)
		if err != nil {
			return nil, fmt.Errorf("commit %x: %w", cur, err)
		}
		if !loose {
			if packed++; packed > limit {
				return nil, fmt.Errorf("%w: a history longer than its packs' objects", errOddHistory)
			}
		}
		treeHex, parents, np, err := parseCommit(data, hashLen)
		if err != nil {
			return nil, fmt.Errorf("commit %x: %w", cur, err)
		}
		if np > 1 {
			return nil, fmt.Errorf("%w: commit %x is a merge", errOddHistory, cur)
		}
		hex.Decode(treeName, treeHex)
		t, err := ps.v2Tree(treeName)
		if err != nil {
			return nil, fmt.Errorf("commit %x: %w", cur, err)
		}
		if childName != nil {
			h.diff(childName, t, child)
		}
		if stop != "" && bytes.Equal(cur, stopName) {
			return h.ready(), nil
		}
		if np == 0 {
			if stop != "" {
				return nil, fmt.Errorf("%w: commit %s is not in the history", errOddHistory, stop)
			}
			h.diff(cur, v2Tree{}, t)
			return h.ready(), nil
		}
		child, childName = t, cur
		hex.Decode(parentName, parents[0])
		cur = bytes.Clone(parentName)
	}
}

func (h *history) ready() *history {
	h.end = len(h.recs)
	return h
}

// diff records what commit does to its parent's tree: git log's order
// within a commit is the paths' ("d", then "m"), reversed here as the
// records are.
func (h *history) diff(commit []byte, parent, t v2Tree) {
	if len(t.m) > 0 && !bytes.Equal(parent.m, t.m) && !isZeroName(t.m) {
		h.add(recAdded, commit, t.m)
	}
	if len(t.d) > 0 && !bytes.Equal(parent.d, t.d) && !isZeroName(t.d) {
		h.add(recRemoved, commit, t.d)
	}
}

func isZeroName(b []byte) bool {
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}

// objectNamed builds the object name (raw) from the packs and checks its
// type; it is kept in the cache if keep (a tree is the base of the next
// in public-inbox's packs, and of the one before once repacked; a commit
// is read once).
func (ps *packs) objectNamed(name []byte, typ int, keep bool) (data []byte, loose bool, err error) {
	var t int
	p, off, err := ps.find(name)
	if errors.Is(err, errNotHere) {
		// public-inbox-mda's fast-import leaves what it wrote loose
		// (fewer than fastimport.unpackLimit objects), until a gc.
		loose = true
		t, data, err = ps.loose(name)
	} else if err == nil {
		t, data, err = ps.object(p, off, keep)
	}
	if err != nil {
		return nil, loose, err
	}
	if t != typ {
		return nil, loose, fmt.Errorf("%w: object %x is of type %d, want %d", errOddHistory, name, t, typ)
	}
	return data, loose, nil
}

// v2Tree reads the tree name (raw): "m" or "d" or both, regular files,
// nothing else (errOddHistory).
func (ps *packs) v2Tree(name []byte) (v2Tree, error) {
	data, _, err := ps.objectNamed(name, objTree, true)
	if err != nil {
		return v2Tree{}, fmt.Errorf("tree %x: %w", name, err)
	}
	var t v2Tree
	err = parseTree(data, len(name), func(e treeEntry) error {
		if string(e.mode) != "100644" {
			return fmt.Errorf("%w: %q of mode %s", errOddHistory, e.name, e.mode)
		}
		switch string(e.name) {
		case "m":
			t.m = e.oid
		case "d":
			t.d = e.oid
		default:
			return fmt.Errorf("%w: a file %q", errOddHistory, e.name)
		}
		return nil
	})
	if err != nil {
		return v2Tree{}, fmt.Errorf("tree %x: %w", name, err)
	}
	return t, nil
}

// maxLooseObject bounds a commit or tree read loose: a v2 commit and
// tree are small (public-inbox's commit holds a subject line).
const maxLooseObject = 1 << 20

// loose reads the loose object name (raw): objects/XX/REST of the git
// directory, zlib-compressed "TYPE SIZE\0" and the object (git's
// object-file.c: unpack_loose_header, parse_loose_header). errNotHere
// if there is none (an alternate's, or missing: git says).
func (ps *packs) loose(name []byte) (int, []byte, error) {
	if ps.dir == "" || len(name) == 0 {
		return 0, nil, errNotHere
	}
	h := hex.EncodeToString(name)
	f, err := os.Open(filepath.Join(ps.dir, "objects", h[:2], h[2:]))
	if err != nil {
		return 0, nil, errNotHere
	}
	defer f.Close()
	// The compressed object is not larger than the object by much.
	b, err := io.ReadAll(io.LimitReader(f, maxLooseObject+1))
	if err != nil {
		return 0, nil, fmt.Errorf("loose object %s: %w", h, err)
	}
	typ, data, err := ps.inflateLoose(b, maxLooseObject)
	if err != nil {
		return 0, nil, fmt.Errorf("loose object %s: %w", h, err)
	}
	if !bytes.Equal(objectName(typ, data, len(name)), name) {
		return 0, nil, fmt.Errorf("loose object %s: %w: its bytes are not of its name", h, ErrBadLoose)
	}
	return typ, data, nil
}

// ErrBadLoose: a loose object that is not as git writes it.
var ErrBadLoose = errors.New("pisource: malformed loose object")

// inflateLoose inflates a loose object's file and reads its header: the
// object's type (objCommit, objTree, objBlob, objTag) and bytes, at most
// limit.
func (ps *packs) inflateLoose(file []byte, limit int64) (int, []byte, error) {
	ps.br.Reset(file)
	if ps.zr == nil {
		zr, err := zlib.NewReader(&ps.br)
		if err != nil {
			return 0, nil, fmt.Errorf("%w: %v", ErrBadLoose, err)
		}
		ps.zr = zr
	} else if err := ps.zr.(zlib.Resetter).Reset(&ps.br, nil); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrBadLoose, err)
	}
	// The header: "commit 123\0", at most a type and 20 digits.
	var hdr [32]byte
	n := 0
	for {
		if n == len(hdr) {
			return 0, nil, fmt.Errorf("%w: no header", ErrBadLoose)
		}
		if _, err := io.ReadFull(ps.zr, hdr[n:n+1]); err != nil {
			return 0, nil, fmt.Errorf("%w: header: %v", ErrBadLoose, err)
		}
		if hdr[n] == 0 {
			break
		}
		n++
	}
	typ, size, err := parseLooseHeader(hdr[:n])
	if err != nil {
		return 0, nil, err
	}
	if size > limit {
		return 0, nil, errNotHere
	}
	data := make([]byte, size)
	if _, err := io.ReadFull(ps.zr, data); err != nil {
		return 0, nil, fmt.Errorf("%w: %v", ErrBadLoose, err)
	}
	var one [1]byte
	if n, err := ps.zr.Read(one[:]); n != 0 || !errors.Is(err, io.EOF) {
		if err == nil || errors.Is(err, io.EOF) {
			err = errors.New("longer than its header says")
		}
		return 0, nil, fmt.Errorf("%w: %v", ErrBadLoose, err)
	}
	return typ, data, nil
}

// parseLooseHeader reads "TYPE SIZE" (without its NUL): a type git
// names, a size in decimal without a leading zero.
func parseLooseHeader(h []byte) (int, int64, error) {
	name, num, ok := bytes.Cut(h, []byte(" "))
	if !ok || len(num) == 0 || len(num) > 18 || num[0] == '0' && len(num) > 1 {
		return 0, 0, fmt.Errorf("%w: header %q", ErrBadLoose, h)
	}
	var size int64
	for _, c := range num {
		if c < '0' || c > '9' {
			return 0, 0, fmt.Errorf("%w: header %q", ErrBadLoose, h)
		}
		size = size*10 + int64(c-'0')
	}
	switch string(name) {
	case "commit":
		return objCommit, size, nil
	case "tree":
		return objTree, size, nil
	case "blob":
		return objBlob, size, nil
	case "tag":
		return objTag, size, nil
	}
	return 0, 0, fmt.Errorf("%w: header %q", ErrBadLoose, h)
}

// objectName is git's name of an object: the SHA-1 (or SHA-256, for
// names of 32 bytes) of "TYPE SIZE\0" and its bytes.
func objectName(typ int, data []byte, hashLen int) []byte {
	var h hash.Hash = sha1.New()
	if hashLen == sha256.Size {
		h = sha256.New()
	}
	fmt.Fprintf(h, "%s %d\x00", typeNames[typ], len(data))
	h.Write(data)
	return h.Sum(nil)
}

var typeNames = map[int]string{objCommit: "commit", objTree: "tree", objBlob: "blob", objTag: "tag"}
