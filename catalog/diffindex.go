package catalog

// What public-inbox's search index keeps of the patches in a message
// (lib/PublicInbox/SearchIdx.pm, index_diff and index_xapian, 1.9): the
// lines a diff removes (dfa:), adds (dfb:), keeps as context (dfctx:),
// the text of its hunk headers (dfhh:), the blob IDs of its index lines
// (dfpre:, dfpost:) and `git patch-id --stable` of the patch (patchid:).
// The other lines of the text stay the body's (nq:).

import (
	"crypto/sha1"
	"encoding/hex"
	"regexp"
	"strconv"
	"strings"
)

// diffText is the diff columns of the search index.
type diffText struct {
	removed, added, context, hunks strings.Builder
	pre, post                      strings.Builder
}

var (
	diffGitLine  = regexp.MustCompile(`^diff --git ("?[^/]+/.+) ("?[^/]+/.+)$`)
	diffOldLine  = regexp.MustCompile(`^diff -(.+) (\S+) (\S+)$`)
	diffFromPath = regexp.MustCompile(`^(---|\+\+\+) ("?[^/]+/.+)`)
	diffFromName = regexp.MustCompile(`^--- (\S+)`)
	diffToName   = regexp.MustCompile(`^\+\+\+ (\S+)`)
	diffIndex    = regexp.MustCompile(`^index ([a-f0-9]+)\.\.([a-f0-9]+)`)
	diffHunk     = regexp.MustCompile(`^@@ (?:\S+) (?:\S+) @@\s*(.*)$`)
	diffBase85   = regexp.MustCompile("^[a-zA-Z0-9!#$%&()*+\\-;<=>?@^_`{|}~]+$")
	diffIgnored  = regexp.MustCompile(`^(?:(?:dis)?similarity index|(?:old|new) mode|(?:deleted|new) file mode|(?:copy|rename) (?:from|to) |\\ No newline at end of file|Binary files .* differ)`)
)

// looksDiff reports a line starting "diff ", "--- " or "+++ ".
func looksDiff(text string) bool {
	for _, p := range []string{"diff ", "--- ", "+++ "} {
		if strings.HasPrefix(text, p) || strings.Contains(text, "\n"+p) {
			return true
		}
	}
	return false
}

// splitDiff separates the diff lines of a message's own text from the
// rest, as public-inbox's index_diff does: a text without a line
// starting "diff ", "--- " or "+++ " is all rest.
func splitDiff(text string) (rest string, d *diffText) {
	d = &diffText{}
	if !looksDiff(text) {
		return text, d
	}
	var nq strings.Builder
	keep := func(l string) { nq.WriteString(l); nq.WriteByte('\n') }
	add := func(b *strings.Builder, l string) { b.WriteString(l); b.WriteByte('\n') }
	inDiff := false
	lines := strings.Split(text, "\n")
	for i := 0; i < len(lines); i++ {
		l := lines[i]
		switch {
		case inDiff && strings.HasPrefix(l, "GIT binary patch"):
			keep(l)
			for i+1 < len(lines) && (strings.HasPrefix(lines[i+1], "literal ") || strings.HasPrefix(lines[i+1], "delta ")) {
				i++
				keep(lines[i])
				// The base85 data is no text to look for.
				for i+1 < len(lines) && (diffBase85.MatchString(lines[i+1]) || strings.TrimSpace(lines[i+1]) == "") {
					i++
				}
			}
		case inDiff && strings.HasPrefix(l, " "):
			add(&d.context, l[1:])
		case l == "-- ":
			inDiff = false // a signature
		case strings.HasPrefix(l, "diff --git ") && diffGitLine.MatchString(l):
			keep(l)
			inDiff = true
		case strings.HasPrefix(l, "diff -") && diffOldLine.MatchString(l):
			keep(l)
			m := diffOldLine.FindStringSubmatch(l)
			inDiff = strings.ContainsAny(m[1], "uU")
		case (strings.HasPrefix(l, "--- ") || strings.HasPrefix(l, "+++ ")) && diffFromPath.MatchString(l):
			inDiff = true // the path is the files column's
		case strings.HasPrefix(l, "--- ") && diffFromName.MatchString(l):
			keep(l)
			inDiff = true // a traditional diff's old name
		case inDiff && strings.HasPrefix(l, "+++ ") && diffToName.MatchString(l):
			// The new name of a traditional diff, or /dev/null.
		case inDiff && strings.HasPrefix(l, "+"):
			add(&d.added, l[1:])
		case inDiff && strings.HasPrefix(l, "-"):
			add(&d.removed, l[1:])
		case strings.HasPrefix(l, "index ") && diffIndex.MatchString(l):
			m := diffIndex.FindStringSubmatch(l)
			add(&d.pre, m[1])
			add(&d.post, m[2])
			inDiff = true
		case strings.HasPrefix(l, "@@ ") && diffHunk.MatchString(l):
			if m := diffHunk.FindStringSubmatch(l); strings.TrimSpace(m[1]) != "" {
				add(&d.hunks, m[1])
			}
		case ignorable(l) && diffIgnored.MatchString(l):
			keep(l)
		case l == "":
			// In a diff, an empty line may be context a mailer stripped.
		default:
			keep(l)
			inDiff = false
		}
	}
	return nq.String(), d
}

// ignorable reports a line that may be a diff header diffIgnored matches.
func ignorable(l string) bool {
	if len(l) < 2 {
		return false
	}
	switch l[:2] {
	case "di", "si", "ol", "ne", "de", "co", "re", "\\ ", "Bi":
		return true
	}
	return false
}

// patchID returns `git patch-id --stable` of the first patch in text
// (git's builtin/patch-id.c: each file's diff, whitespace removed, hashed
// with SHA-1 from its "diff " line on, line numbers of hunk headers left
// out; the stable ID is the sum of the files' hashes), or "" for none.
func patchID(text string) string {
	if !strings.Contains(text, "\ndiff ") && !strings.HasPrefix(text, "diff ") {
		return ""
	}
	var result [sha1.Size]byte
	h := sha1.New()
	flush := func() {
		var sum [sha1.Size]byte
		h.Sum(sum[:0])
		h.Reset()
		carry := 0
		for i := range result {
			carry += int(result[i]) + int(sum[i])
			result[i] = byte(carry)
			carry >>= 8
		}
	}
	patchLen := 0
	before, after := -1, -1
	binary := false
	var preID, postID string
lines:
	for line := range strings.Lines(text) {
		if strings.HasPrefix(line, `\ `) && len(line) > 12 {
			continue // "\ No newline at end of file"
		}
		if rest, ok := strings.CutPrefix(line, "commit "); ok && isObjectID(rest) {
			break
		}
		if rest, ok := strings.CutPrefix(line, "From "); ok && isObjectID(rest) {
			break
		}
		if patchLen == 0 && !strings.HasPrefix(line, "diff ") {
			continue // the commit message
		}
		if before == -1 {
			switch {
			case strings.HasPrefix(line, "GIT binary patch"), strings.HasPrefix(line, "Binary files"):
				binary = true
				before = 0
				h.Write([]byte(preID))
				h.Write([]byte(postID))
				flush()
				continue
			case strings.HasPrefix(line, "index "):
				if a, b, ok := strings.Cut(strings.TrimSuffix(line[len("index "):], "\n"), ".."); ok {
					b, _, _ = strings.Cut(b, " ")
					preID, postID = a, b
				}
				continue
			case strings.HasPrefix(line, "--- "):
				before, after = 1, 1
			case line == "" || !isAlpha(line[0]):
				break lines
			}
		}
		if binary {
			if strings.HasPrefix(line, "diff ") {
				binary = false
				before = -1
			}
			continue
		}
		if before == 0 && after == 0 {
			if strings.HasPrefix(line, "@@ -") {
				before, after = hunkHeader(line)
				continue
			}
			if !strings.HasPrefix(line, "diff ") {
				break
			}
			flush()
			before, after = -1, -1
		}
		if line[0] == '-' || line[0] == ' ' {
			before--
		}
		if line[0] == '+' || line[0] == ' ' {
			after--
		}
		b := []byte(line)
		n := 0
		for _, c := range b {
			if c != ' ' && c != '\t' && c != '\n' && c != '\r' && c != '\v' && c != '\f' {
				b[n] = c
				n++
			}
		}
		patchLen += n
		h.Write(b[:n])
	}
	if patchLen == 0 {
		return ""
	}
	flush()
	return hex.EncodeToString(result[:])
}

func isAlpha(c byte) bool { return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' }

// isObjectID reports a line starting with 40 hex digits.
func isObjectID(s string) bool {
	if len(s) < 40 {
		return false
	}
	_, err := hex.DecodeString(s[:40])
	return err == nil
}

// hunkHeader returns the old and new line counts of "@@ -a,b +c,d @@"
// as git's scan_hunk_header does (a count left out is 1).
func hunkHeader(line string) (before, after int) {
	q := line[4:]
	count := func(s string) (n int, rest string) {
		i := 0
		for i < len(s) && s[i] >= '0' && s[i] <= '9' {
			i++
		}
		if i < len(s) && s[i] == ',' {
			j := i + 1
			for j < len(s) && s[j] >= '0' && s[j] <= '9' {
				j++
			}
			n, _ = strconv.Atoi(s[i+1 : j])
			return n, s[j:]
		}
		return 1, s[i:]
	}
	before, q = count(q)
	if !strings.HasPrefix(q, " +") {
		return 0, 0
	}
	after, _ = count(q[2:])
	return before, after
}
