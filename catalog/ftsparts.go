package catalog

// A rebuild's search index, filled on two connections at once.
//
// Filling FTS5 (reading every word, writing its segments) is most of a
// rebuild's work after the messages are indexed, and one SQLite
// connection does it on one CPU. A rebuild gives its labels in date
// order, known only once every message is indexed (labels.go), and FTS5
// takes a transaction's rows in rowid order (a smaller rowid flushes a
// segment), so the index cannot be filled while the messages are
// indexed. Instead placeText splits the labels in two runs: the older
// half goes into an index of its own, in a file beside the new catalog
// (catalog.db.rebuild.fts), filled on a connection of its own, while the
// catalog's connection labels the messages, makes lateIndexes and fills
// the newer half into its own index. The file is removed whether the
// rebuild succeeds or fails, and by the next rebuild when a killed one
// left it.
//
// The part is then joined to the catalog's index by a new connection
// (placeFTS): its segments appended to the catalog's levels under
// segment ids of their own, as a segment's pages are keyed by its id,
// their origins after the catalog's (contentless_delete finds a deleted
// row's segment by its origin), the averages summed (joinFTS); FTS5's
// 'optimize' then merges them all, as it merged one index's segments
// before. The new connection reads the joined structure afresh, where
// the catalog's keeps the one it wrote, and runs no FTS5 statement after.
//
// The records are FTS5's own (ext/fts5/fts5_index.c in SQLite's sources:
// "the structure record", "the averages record"). TestJoinFTS checks
// that a joined index answers as one filled whole, passes FTS5's
// integrity-check, and takes deletions and new rows.

import (
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"net/url"
	"os"
)

// ftsTables are the FTS5 tables of searchSchema.
var ftsTables = []string{"fts", "fts_addr"}

// ftsPartSuffix names the file of the part of a rebuild's search index
// filled beside the new catalog.
const ftsPartSuffix = ".fts"

// openFTSPart creates a file at path with searchSchema's tables only,
// to fill as a rebuild fills its catalog: no journal, no sync, an
// exclusive lock, FTS5's merges as bulk sets them.
func openFTSPart(ctx context.Context, path string, schema bool) (*sql.DB, error) {
	q := url.Values{}
	q.Add("_pragma", "journal_mode(OFF)")
	q.Add("_pragma", "synchronous(OFF)")
	q.Add("_pragma", "locking_mode(EXCLUSIVE)")
	db, err := openPool(path, q, 1)
	if err != nil {
		return nil, err
	}
	if schema {
		for _, s := range []string{
			searchSchema,
			`INSERT INTO fts(fts, rank) VALUES('automerge', 0)`,
			`INSERT INTO fts(fts, rank) VALUES('crisismerge', 64)`,
		} {
			if _, err := db.ExecContext(ctx, s); err != nil {
				db.Close()
				return nil, err
			}
		}
	}
	return db, nil
}

// removeFTSPart removes the file of the part of the search index of the
// rebuild at tmp.
func removeFTSPart(tmp string) error {
	var errs []error
	for _, j := range []string{"", "-journal"} {
		if err := os.Remove(tmp + ftsPartSuffix + j); err != nil && !errors.Is(err, os.ErrNotExist) {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// placeFTS joins the part of the search index at tmp.fts (closed) to the
// one c has filled at tmp, merges them, and sets automerge as a catalog
// has it. It writes on a connection of its own, which reads the joined
// structure afresh: c's connection lets the file go meanwhile
// (locking_mode=NORMAL, then a read), and takes it back after.
func (c *Catalog) placeFTS(ctx context.Context, tmp string) error {
	for _, q := range []string{`PRAGMA locking_mode=NORMAL`, `SELECT count(*) FROM meta`} {
		if _, err := c.w.ExecContext(ctx, q); err != nil {
			return err
		}
	}
	if err := joinFTSPart(ctx, tmp); err != nil {
		return err
	}
	_, err := c.w.ExecContext(ctx, `PRAGMA locking_mode=EXCLUSIVE`)
	return err
}

// joinFTSPart joins the search index at tmp.fts to tmp's, on a new
// connection.
func joinFTSPart(ctx context.Context, tmp string) error {
	db, err := openFTSPart(ctx, tmp, false)
	if err != nil {
		return err
	}
	defer db.Close()
	conn, err := db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	if _, err := conn.ExecContext(ctx, `ATTACH DATABASE ? AS part`, tmp+ftsPartSuffix); err != nil {
		return err
	}
	tx, err := conn.BeginTx(ctx, nil)
	if err != nil {
		return err
	}
	defer tx.Rollback()
	for _, t := range ftsTables {
		if err := joinFTS(ctx, tx, t, "part"); err != nil {
			return fmt.Errorf("cannot join the parts of %s: %w", t, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return err
	}
	if _, err := conn.ExecContext(ctx, `DETACH DATABASE part`); err != nil {
		return err
	}
	for _, s := range []string{
		`INSERT INTO fts(fts) VALUES('optimize')`,
		`INSERT INTO fts_addr(fts_addr) VALUES('optimize')`,
		fmt.Sprintf(`INSERT INTO fts(fts, rank) VALUES('automerge', %d)`, ftsAutomerge),
	} {
		if _, err := conn.ExecContext(ctx, s); err != nil {
			return fmt.Errorf("cannot merge the search index: %w", err)
		}
	}
	if err := conn.Close(); err != nil {
		return err
	}
	return db.Close()
}

// joinFTS appends the segments of FTS5 table t of the attached database
// part to those of main's, within tx: each under a segment id of its own,
// its rows' origins after main's (contentless_delete finds a deleted
// row's segment by its origin), the averages summed.
func joinFTS(ctx context.Context, tx *sql.Tx, t, part string) error {
	read := func(schema string, id int64) ([]byte, error) {
		var b []byte
		err := tx.QueryRowContext(ctx, fmt.Sprintf(`SELECT block FROM %s.%s_data WHERE id = ?`, schema, t), id).Scan(&b)
		return b, err
	}
	var recs [2][2][]byte // main, part; structure, averages
	for i, schema := range []string{"main", part} {
		for j, id := range []int64{ftsStructureRowid, ftsAveragesRowid} {
			b, err := read(schema, id)
			if err != nil {
				return fmt.Errorf("cannot read the %s record %d: %w", schema, id, err)
			}
			recs[i][j] = b
		}
	}
	a, err := decodeFTSStructure(recs[0][0])
	if err != nil {
		return err
	}
	b, err := decodeFTSStructure(recs[1][0])
	if err != nil {
		return err
	}
	joined, moves, offset, err := a.join(b)
	if err != nil {
		return err
	}
	avg, err := sumFTSAverages(recs[0][1], recs[1][1])
	if err != nil {
		return err
	}
	for _, m := range moves {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%[1]s_data (id, block)
			SELECT id + ?1, block FROM %[2]s.%[1]s_data WHERE id >= ?2 AND id < ?3`, t, part),
			(m.to-m.from)<<ftsSegidShift, m.from<<ftsSegidShift, (m.from+1)<<ftsSegidShift); err != nil {
			return err
		}
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%[1]s_idx (segid, term, pgno)
			SELECT ?1, term, pgno FROM %[2]s.%[1]s_idx WHERE segid = ?2`, t, part), m.to, m.from); err != nil {
			return err
		}
	}
	if _, err := tx.ExecContext(ctx, fmt.Sprintf(`INSERT INTO main.%[1]s_docsize (id, sz, origin)
		SELECT id, sz, origin + ? FROM %[2]s.%[1]s_docsize`, t, part), offset); err != nil {
		return err
	}
	for _, r := range []struct {
		id    int64
		block []byte
	}{{ftsStructureRowid, joined.encode()}, {ftsAveragesRowid, avg}} {
		if _, err := tx.ExecContext(ctx, fmt.Sprintf(`UPDATE main.%s_data SET block = ? WHERE id = ?`, t), r.block, r.id); err != nil {
			return err
		}
	}
	return nil
}

// FTS5's records and keys (fts5_index.c).
const (
	ftsAveragesRowid  = 1
	ftsStructureRowid = 10
	// A segment's pages are keyed segid << ftsSegidShift | dlidx << 36 |
	// height << 31 | page.
	ftsSegidShift = 37
	// ftsMaxSegment is FTS5_MAX_SEGMENT: the most segments, and the
	// largest segment id.
	ftsMaxSegment = 2000
)

// ftsStructureV2 follows the cookie of a structure record whose segments
// have origins (contentless_delete).
var ftsStructureV2 = [4]byte{0xff, 0x00, 0x00, 0x01}

var errFTSStructure = errors.New("catalog: malformed FTS5 structure record")

// ftsStructure is FTS5's structure record: the index's levels of segments.
type ftsStructure struct {
	cookie       uint32
	v2           bool
	writeCounter uint64
	levels       []ftsLevel
}

type ftsLevel struct {
	merge    uint64 // segments of the level being merged
	segments []ftsSegment
}

type ftsSegment struct {
	id, first, last            uint64
	origin1, origin2           uint64 // v2
	tombPages, tombEntries, nn uint64 // v2; nn: entries
}

// decodeFTSStructure reads a structure record:
//
//	cookie (4 bytes, big-endian) [0xff 0x00 0x00 0x01]
//	levels, segments, write counter
//	per level: segments merging, segments; per segment: id, first
//	page, last page [origin1, origin2, tombstone pages, tombstone
//	entries, entries]
//
// every number a SQLite varint.
func decodeFTSStructure(b []byte) (*ftsStructure, error) {
	if len(b) < 4 {
		return nil, fmt.Errorf("%w: %d bytes", errFTSStructure, len(b))
	}
	s := &ftsStructure{cookie: binary.BigEndian.Uint32(b)}
	b = b[4:]
	if len(b) >= 4 && [4]byte(b[:4]) == ftsStructureV2 {
		s.v2, b = true, b[4:]
	}
	var err error
	next := func() uint64 {
		if err != nil {
			return 0
		}
		v, n := sqliteVarint(b)
		if n == 0 {
			err = fmt.Errorf("%w: truncated", errFTSStructure)
			return 0
		}
		b = b[n:]
		return v
	}
	nLevel, nSegment := next(), next()
	s.writeCounter = next()
	if err != nil {
		return nil, err
	}
	if nLevel > ftsMaxSegment || nSegment > ftsMaxSegment {
		return nil, fmt.Errorf("%w: %d levels, %d segments", errFTSStructure, nLevel, nSegment)
	}
	seen := uint64(0)
	for range nLevel {
		l := ftsLevel{merge: next()}
		n := next()
		if err != nil {
			return nil, err
		}
		if n > nSegment-seen || l.merge > n {
			return nil, fmt.Errorf("%w: a level of %d segments, %d merging, of %d", errFTSStructure, n, l.merge, nSegment)
		}
		seen += n
		for range n {
			g := ftsSegment{id: next(), first: next(), last: next()}
			if s.v2 {
				g.origin1, g.origin2, g.tombPages, g.tombEntries, g.nn = next(), next(), next(), next(), next()
			}
			if err != nil {
				return nil, err
			}
			l.segments = append(l.segments, g)
		}
		s.levels = append(s.levels, l)
	}
	if seen != nSegment || len(b) != 0 {
		return nil, fmt.Errorf("%w: %d of %d segments, %d bytes after them", errFTSStructure, seen, nSegment, len(b))
	}
	return s, nil
}

// encode writes s as decodeFTSStructure reads it.
func (s *ftsStructure) encode() []byte {
	b := binary.BigEndian.AppendUint32(nil, s.cookie)
	if s.v2 {
		b = append(b, ftsStructureV2[:]...)
	}
	n := 0
	for _, l := range s.levels {
		n += len(l.segments)
	}
	b = appendSQLiteVarint(b, uint64(len(s.levels)))
	b = appendSQLiteVarint(b, uint64(n))
	b = appendSQLiteVarint(b, s.writeCounter)
	for _, l := range s.levels {
		b = appendSQLiteVarint(b, l.merge)
		b = appendSQLiteVarint(b, uint64(len(l.segments)))
		for _, g := range l.segments {
			for _, v := range []uint64{g.id, g.first, g.last} {
				b = appendSQLiteVarint(b, v)
			}
			if s.v2 {
				for _, v := range []uint64{g.origin1, g.origin2, g.tombPages, g.tombEntries, g.nn} {
					b = appendSQLiteVarint(b, v)
				}
			}
		}
	}
	return b
}

// segMove is a segment of the second index and its id in the joined one.
type segMove struct{ from, to int64 }

// join returns the structure of s's segments and then o's, level by level,
// o's under new ids (moves) and with their origins after s's (offset).
// Both must be at rest: no merge under way, no deleted rows.
func (s *ftsStructure) join(o *ftsStructure) (*ftsStructure, []segMove, uint64, error) {
	if s.v2 != o.v2 {
		return nil, nil, 0, fmt.Errorf("%w: of two versions", errFTSStructure)
	}
	var maxID, offset uint64
	n := 0
	for _, st := range []*ftsStructure{s, o} {
		for _, l := range st.levels {
			if l.merge != 0 {
				return nil, nil, 0, fmt.Errorf("cannot join FTS5 indexes in the middle of a merge")
			}
			for _, g := range l.segments {
				if g.tombPages != 0 || g.tombEntries != 0 {
					return nil, nil, 0, fmt.Errorf("cannot join FTS5 indexes with deleted rows")
				}
				n++
			}
		}
	}
	for _, l := range s.levels {
		for _, g := range l.segments {
			maxID, offset = max(maxID, g.id), max(offset, g.origin2)
		}
	}
	if n > ftsMaxSegment || maxID+uint64(n) > ftsMaxSegment {
		return nil, nil, 0, fmt.Errorf("cannot join FTS5 indexes of %d segments", n)
	}
	j := &ftsStructure{cookie: s.cookie, v2: s.v2, writeCounter: s.writeCounter + o.writeCounter}
	var moves []segMove
	for i := range max(len(s.levels), len(o.levels)) {
		var l ftsLevel
		if i < len(s.levels) {
			l.segments = append(l.segments, s.levels[i].segments...)
		}
		if i < len(o.levels) {
			for _, g := range o.levels[i].segments {
				maxID++
				moves = append(moves, segMove{from: int64(g.id), to: int64(maxID)})
				g.id = maxID
				if s.v2 {
					g.origin1 += offset
					g.origin2 += offset
				}
				l.segments = append(l.segments, g)
			}
		}
		j.levels = append(j.levels, l)
	}
	return j, moves, offset, nil
}

// sumFTSAverages adds two averages records: the rows, then the tokens of
// each column, SQLite varints; an empty table's is empty.
func sumFTSAverages(a, b []byte) ([]byte, error) {
	switch {
	case len(a) == 0:
		a, b = b, a
		fallthrough
	case len(b) == 0:
		for r := a; len(r) > 0; {
			_, n := sqliteVarint(r)
			if n == 0 {
				return nil, fmt.Errorf("catalog: malformed FTS5 averages record")
			}
			r = r[n:]
		}
		return a, nil
	}
	var out []byte
	for len(a) > 0 || len(b) > 0 {
		x, n := sqliteVarint(a)
		y, m := sqliteVarint(b)
		if n == 0 || m == 0 {
			return nil, fmt.Errorf("catalog: malformed FTS5 averages record")
		}
		a, b = a[n:], b[m:]
		out = appendSQLiteVarint(out, x+y)
	}
	return out, nil
}

// sqliteVarint reads SQLite's varint (btreeInt.h): big-endian groups of 7
// bits, each byte but the last with its high bit set, the ninth byte's 8
// bits all the value's. It returns the value and its length, 0 if b ends
// first.
func sqliteVarint(b []byte) (uint64, int) {
	var v uint64
	for i := 0; i < 9; i++ {
		if i >= len(b) {
			return 0, 0
		}
		if i == 8 {
			return v<<8 | uint64(b[i]), 9
		}
		v = v<<7 | uint64(b[i]&0x7f)
		if b[i]&0x80 == 0 {
			return v, i + 1
		}
	}
	return v, 9
}

// appendSQLiteVarint appends v as SQLite's varint.
func appendSQLiteVarint(b []byte, v uint64) []byte {
	if v>>56 != 0 {
		// Nine bytes: the first eight carry 7 bits each, the last 8.
		var buf [9]byte
		buf[8] = byte(v)
		v >>= 8
		for i := 7; i >= 0; i-- {
			buf[i] = byte(v&0x7f) | 0x80
			v >>= 7
		}
		return append(b, buf[:]...)
	}
	var buf [8]byte
	i := len(buf)
	last := true
	for {
		i--
		c := byte(v & 0x7f)
		if !last {
			c |= 0x80
		}
		buf[i] = c
		last = false
		v >>= 7
		if v == 0 {
			break
		}
	}
	return append(b, buf[i:]...)
}
