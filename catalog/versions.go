package catalog

// Versions: the versions of a patch or a series (v1, v2, ... v7).
//
// Kernel-style lists see a series posted again and again, each time with
// a version in its tag ("[PATCH v3 2/7] MIPS: fix the TLB flush"); b4
// finds the other versions by searching on the client, where the archive
// can know them. A version of a patch is a message from the same sender,
// in the same list, whose subject without its tags (BaseSubject) is the
// same and whose tag says another version, within versionWindow: a
// cover letter ("0/7") links to the other versions' cover letters, each
// patch to the same patch of the other versions. A series whose patches
// were renamed between versions links only the patches that kept their
// subject.
//
// A series sent with b4 carries its change-id (changeid.go) in its cover
// letter, or its lone patch: messages of the same list with the same
// change-id are versions of each other, whatever their subjects and
// dates, and two with different change-ids never are, whatever their
// subjects (a version without a change-id still links by the rule
// above).

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/chibrary/chibrary/patch"
)

const versionsSchema = `
-- The patches (not replies): versionKey of the subject's BaseSubject,
-- and the version its tag says (1 without one).
CREATE TABLE versions (
	key     INTEGER NOT NULL,
	msg     INTEGER NOT NULL,  -- messages.id
	version INTEGER NOT NULL,
	change  TEXT    NOT NULL,  -- b4's change-id (ChangeID), or ''
	added   INTEGER NOT NULL,  -- the lines its diff adds
	deleted INTEGER NOT NULL,  -- and removes
	paths   BLOB,              -- pathKeys of the files it touches; NULL for no diff
	PRIMARY KEY (key, msg)
) WITHOUT ROWID;
CREATE INDEX versions_msg ON versions (msg);
CREATE INDEX versions_change ON versions (change) WHERE change != '';

CREATE TRIGGER versions_removed AFTER DELETE ON messages BEGIN
	DELETE FROM versions WHERE msg = OLD.id;
END;
`

// Bounds of the versions of a patch.
const (
	// versionWindow is how far apart two versions of a patch may be:
	// series are reposted within weeks or months; two years apart, the
	// same subject from the same sender is another patch.
	versionWindow = 2 * 365 * 24 * time.Hour
	// maxVersionRows bounds the rows one Versions call reads.
	maxVersionRows = 64
	// MaxVersion is the highest version a tag may say: "v2024" is a year.
	MaxVersion = 99
)

// versionRE reads the version in a patch's tag: "v2", "V10".
var versionRE = regexp.MustCompile(`(?i)(?:^|[^a-z0-9])v(\d{1,2})(?:[^a-z0-9]|$)`)

// patchVersion returns the version a patch's subject says ("[PATCH v3
// 2/7] ..." is 3, "[PATCH] ..." and "[RFC PATCH 1/2]" are 1), and false
// for a subject that is not a patch (no tag with "patch" in it).
func patchVersion(subject string) (int, bool) {
	tag, ok := patchTag(subject)
	if !ok || !strings.Contains(tag, "patch") {
		return 0, false
	}
	m := versionRE.FindStringSubmatch(tag)
	if m == nil {
		return 1, true
	}
	v, _ := strconv.Atoi(m[1])
	if v == 0 || v > MaxVersion {
		return 1, true // "v0" and years are not versions
	}
	return v, true
}

// versionKey is what the versions table holds of a patch's base subject.
func versionKey(base string) int64 { return textKey("versions\x00" + base) }

// mayHaveVersions says whether a message of this subject can have
// versions: it is a patch, not a reply, with a subject beyond its tags.
// Versions reads the catalog only then.
func mayHaveVersions(subject string) bool {
	_, ok := versionOf(subject)
	return ok
}

// versionOf returns the version of a patch's subject, and false for a
// subject the versions table holds nothing of.
func versionOf(subject string) (int, bool) {
	base, reply := BaseSubject(subject)
	if reply || base == "" {
		return 0, false
	}
	return patchVersion(subject)
}

// indexVersion records d, message id, in the versions table if it is a
// patch: not a reply, with a subject beyond its tags.
func (ix *indexer) indexVersion(d *doc, id int64) error {
	v, ok := versionOf(d.subject)
	if !ok {
		return nil
	}
	_, err := ix.addVersion.ExecContext(ix.ctx, versionKey(d.base), id, v, d.changeID, d.stat.added, d.stat.deleted, d.stat.paths)
	return err
}

// Version is another version of a patch (Versions).
type Version struct {
	CallNumber string
	Version    int
	Subject    string
	Date       time.Time
	// Stat is what the version changes (VersionStat); nil when the
	// archive has no diff of it.
	Stat *Diffstat
}

// Diffstat is what a patch, or the patches of a series, change: git's
// "3 files changed, 10 insertions(+), 4 deletions(-)".
type Diffstat struct {
	// Patches is how many patches were summed: 1 for a patch; for a
	// cover letter, the patches of its series the archive has.
	Patches int `json:"patches"`
	// Files is how many files they touch (a file two patches touch
	// counts once), Added and Deleted the lines they add and remove.
	Files   int `json:"files"`
	Added   int `json:"insertions"`
	Deleted int `json:"deletions"`
}

// patchStat is what the versions table keeps of a patch's diff.
type patchStat struct {
	added, deleted int
	paths          []byte // pathKeys, 8 bytes each, sorted; nil for no diff
}

// statOf returns the patchStat of a diff.
func statOf(d patch.Diff) patchStat {
	st := patchStat{paths: []byte{}}
	var keys []uint64
	for _, f := range d.Files {
		st.added += f.Added
		st.deleted += f.Deleted
		keys = append(keys, pathKey(f.Path))
	}
	slices.Sort(keys)
	for _, k := range slices.Compact(keys) {
		st.paths = binary.BigEndian.AppendUint64(st.paths, k)
	}
	return st
}

// pathKey is what the versions table keeps of a path: enough to count
// the files of a series once each.
func pathKey(p string) uint64 { return uint64(textKey("path\x00" + p)) }

// Bounds of a diffstat.
const (
	// maxSeriesMessages bounds the messages of a cover letter's thread
	// read for its series' patches: its patches come first, by date.
	maxSeriesMessages = 1000
)

// Versions returns the other versions of patch m, a message of a Place or
// a Thread (see the top of this file), the lowest version first, the first
// posting of each; the patch's own version (0 and none for a message that
// is not a patch); and, when it has other versions, what it changes
// itself, as VersionStat says (nil when the archive has no diff of it):
// a patch's comes with the row Versions reads, a cover letter's series is
// read then.
func (c *Catalog) Versions(ctx context.Context, m *Message) (int, []Version, *Diffstat, error) {
	if !mayHaveVersions(m.Subject) {
		return 0, nil, nil, nil // every other page saves the statements
	}
	ctx, err := bounded(ctx)
	if err != nil {
		return 0, nil, nil, err
	}
	what := "the versions of " + m.CallNumber
	date, window := m.Date.Unix(), int64(versionWindow/time.Second)
	// One statement for the patch's own row (its version and change-id)
	// and the versions of its subject around it.
	rows, err := c.query(ctx, `WITH me AS (SELECT key, version FROM versions WHERE msg = ?)
		SELECT `+versionColumns+` FROM me CROSS JOIN versions v CROSS JOIN messages m ON m.id = v.msg
		WHERE v.key = me.key AND m.list = ? AND m.date BETWEEN ? AND ? AND (v.version != me.version OR m.id = ?) ORDER BY v.version, m.date, m.id LIMIT ?`,
		m.id, m.List, date-window, date+window, m.id, maxVersionRows+1)
	if err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	near, err := scanVersions(rows)
	if err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	self := slices.IndexFunc(near, func(r versionRow) bool { return r.id == m.id })
	if self < 0 {
		// Not a patch; or more than maxVersionRows versions came before
		// it, which its own row then finds.
		return c.versionsOf(ctx, m.CallNumber, m.List)
	}
	me := near[self]
	near = slices.Delete(near, self, self+1)
	return c.versionsNear(ctx, what, m.List, me, near[:min(len(near), maxVersionRows)])
}

// versionColumns are the columns scanVersions reads.
const versionColumns = `m.id, m.cn, v.version, m.subject, m.date, v.change, m.from_addr, m.from_name, v.added, v.deleted, v.paths`

// versionRow is a row of the versions table with its message's fields.
type versionRow struct {
	id                  int64
	cn, subject, change string
	version             int
	date                int64
	addr, name          string
	added, deleted      int
	paths               []byte
}

// scanVersions reads rows of versionColumns and closes them.
func scanVersions(rows *sql.Rows) ([]versionRow, error) {
	defer rows.Close()
	var out []versionRow
	for rows.Next() {
		var r versionRow
		if err := rows.Scan(&r.id, &r.cn, &r.version, &r.subject, &r.date, &r.change, &r.addr, &r.name, &r.added, &r.deleted, &r.paths); err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// versionsOf is Versions of the message under call number cn, in list,
// from its own row of the versions table first.
func (c *Catalog) versionsOf(ctx context.Context, cn, list string) (int, []Version, *Diffstat, error) {
	what := "the versions of " + cn
	rows, err := c.query(ctx, `SELECT `+versionColumns+`, v.key FROM messages m JOIN versions v ON v.msg = m.id WHERE m.cn = ?`, cn)
	if err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	var me versionRow
	var key int64
	found := false
	for rows.Next() {
		if err := rows.Scan(&me.id, &me.cn, &me.version, &me.subject, &me.date, &me.change, &me.addr, &me.name, &me.added, &me.deleted, &me.paths, &key); err != nil {
			rows.Close()
			return 0, nil, nil, c.readErr(what, err)
		}
		found = true
	}
	if err := errors.Join(rows.Err(), rows.Close()); err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	if !found {
		return 0, nil, nil, nil
	}
	window := int64(versionWindow / time.Second)
	rows, err = c.query(ctx, `SELECT `+versionColumns+` FROM versions v CROSS JOIN messages m ON m.id = v.msg
		WHERE v.key = ? AND v.version != ? AND m.list = ? AND m.date BETWEEN ? AND ? ORDER BY v.version, m.date, m.id LIMIT ?`,
		key, me.version, list, me.date-window, me.date+window, maxVersionRows)
	if err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	near, err := scanVersions(rows)
	if err != nil {
		return 0, nil, nil, c.readErr(what, err)
	}
	return c.versionsNear(ctx, what, list, me, near)
}

// versionsNear is Versions of the patch of row me in list, given the rows
// of the versions table under its key near it, other than its version's.
func (c *Catalog) versionsNear(ctx context.Context, what, list string, me versionRow, near []versionRow) (int, []Version, *Diffstat, error) {
	var found []Version
	seen := map[string]bool{}
	// A patch's diffstat comes with its row; a cover letter's is its
	// series' (VersionStat), read once the versions are known.
	add := func(r versionRow) {
		if seen[r.cn] {
			return
		}
		seen[r.cn] = true
		found = append(found, Version{CallNumber: r.cn, Version: r.version, Subject: r.subject,
			Date: time.Unix(r.date, 0).UTC(), Stat: diffstatOf(r.subject, r.added, r.deleted, r.paths)})
	}
	if me.change != "" {
		rows, err := c.query(ctx, `SELECT `+versionColumns+` FROM versions v CROSS JOIN messages m ON m.id = v.msg
			WHERE v.change = ? AND v.version != ? AND m.list = ? ORDER BY v.version, m.date, m.id LIMIT ?`,
			me.change, me.version, list, maxVersionRows)
		if err != nil {
			return 0, nil, nil, c.readErr(what, err)
		}
		same, err := scanVersions(rows)
		if err != nil {
			return 0, nil, nil, c.readErr(what, err)
		}
		for _, r := range same {
			add(r)
		}
	}
	base, _ := BaseSubject(me.subject)
	for _, r := range near {
		// The key is a hash: the text decides. Two change-ids that
		// differ are two series.
		if b, _ := BaseSubject(r.subject); b == base && sameSender(me.addr, me.name, r.addr, r.name) && (me.change == "" || r.change == "" || r.change == me.change) {
			add(r)
		}
	}
	slices.SortStableFunc(found, func(a, b Version) int {
		if a.Version != b.Version {
			return a.Version - b.Version
		}
		return a.Date.Compare(b.Date)
	})
	// A version posted again (RESEND): its first posting.
	found = slices.CompactFunc(found, func(a, b Version) bool { return a.Version == b.Version })
	for i := range found {
		if !CoverLetter(found[i].Subject) {
			continue
		}
		var err error
		if found[i].Stat, err = c.VersionStat(ctx, found[i].CallNumber); err != nil {
			return 0, nil, nil, err
		}
	}
	if len(found) == 0 {
		return me.version, found, nil, nil
	}
	if !CoverLetter(me.subject) {
		return me.version, found, diffstatOf(me.subject, me.added, me.deleted, me.paths), nil
	}
	own, err := c.VersionStat(ctx, me.cn)
	if err != nil {
		return 0, nil, nil, err
	}
	return me.version, found, own, nil
}

// diffstatOf is the diffstat of a patch that is not a cover letter, from
// its row of the versions table; nil for a cover letter (its series'
// is VersionStat's) or no diff.
func diffstatOf(subject string, added, deleted int, paths []byte) *Diffstat {
	if paths == nil || CoverLetter(subject) {
		return nil
	}
	return &Diffstat{Patches: 1, Files: len(paths) / 8, Added: added, Deleted: deleted}
}

// VersionStat returns what the patch under call number cn changes; of a
// cover letter ("[PATCH v2 0/3]"), what the patches of its series change
// together: the patches of its thread ("[PATCH v2 1/3]" ... "3/3", the
// same tag and count, from its sender, the first of each number), among
// the first maxSeriesMessages messages of the thread. nil for a message
// the versions table does not hold, or whose diff the archive lacks.
func (c *Catalog) VersionStat(ctx context.Context, cn string) (*Diffstat, error) {
	var (
		thread           int64
		subj, addr, name string
		added, deleted   int
		paths            []byte
	)
	err := c.queryRow(ctx, `SELECT m.thread, m.subject, m.from_addr, m.from_name, v.added, v.deleted, v.paths FROM messages m JOIN versions v ON v.msg = m.id WHERE m.cn = ?`, cn).
		Scan(&thread, &subj, &addr, &name, &added, &deleted, &paths)
	if errors.Is(err, sql.ErrNoRows) {
		return nil, nil
	}
	if err != nil {
		return nil, c.readErr("the diffstat of "+cn, err)
	}
	if !CoverLetter(subj) {
		return diffstatOf(subj, added, deleted, paths), nil
	}
	tag, _, of, _ := seriesPart(subj)
	rows, err := c.query(ctx, `SELECT m.subject, m.from_addr, m.from_name, v.added, v.deleted, v.paths
		FROM (SELECT id, subject, from_addr, from_name FROM messages WHERE thread = ? ORDER BY date, id LIMIT ?) m JOIN versions v ON v.msg = m.id`,
		thread, maxSeriesMessages)
	if err != nil {
		return nil, c.readErr("the diffstat of "+cn, err)
	}
	defer rows.Close()
	var st Diffstat
	parts := map[int]bool{}
	files := map[string]bool{}
	for rows.Next() {
		var s, a, nm string
		var ad, de int
		var ps []byte
		if err := rows.Scan(&s, &a, &nm, &ad, &de, &ps); err != nil {
			return nil, c.readErr("the diffstat of "+cn, err)
		}
		ptag, pn, pof, ok := seriesPart(s)
		if !ok || pn == 0 || pof != of || ptag != tag || parts[pn] || ps == nil || !sameSender(addr, name, a, nm) {
			continue
		}
		parts[pn] = true
		st.Patches++
		st.Added += ad
		st.Deleted += de
		for k := range slices.Chunk(ps, 8) {
			files[string(k)] = true
		}
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the diffstat of "+cn, err)
	}
	if st.Patches == 0 {
		return nil, nil
	}
	st.Files = len(files)
	return &st, nil
}

// sameSender reports whether two senders are one: the same address, or
// the same name (of two words or more: "Ralf" alone could be two people).
func sameSender(addr1, name1, addr2, name2 string) bool {
	if addr1 != "" && strings.EqualFold(addr1, addr2) {
		return true
	}
	n1, n2 := strings.Fields(strings.ToLower(name1)), strings.Fields(strings.ToLower(name2))
	return len(n1) >= 2 && slices.Equal(n1, n2)
}
