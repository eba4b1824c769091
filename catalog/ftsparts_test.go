package catalog

import (
	"database/sql"
	"encoding/hex"
	"fmt"
	"math"
	"path/filepath"
	"reflect"
	"slices"
	"testing"
)

// TestSQLiteVarint: each length of SQLite's varint, read back, and the
// records FTS5 wrote read and written again byte for byte.
func TestSQLiteVarint(t *testing.T) {
	for _, tc := range []struct {
		v uint64
		n int
	}{
		{0, 1}, {127, 1}, {128, 2}, {16383, 2}, {16384, 3}, {1<<56 - 1, 8}, {1 << 56, 9}, {math.MaxUint64, 9},
	} {
		b := appendSQLiteVarint(nil, tc.v)
		if len(b) != tc.n {
			t.Errorf("appendSQLiteVarint(%d) = %x, want %d bytes", tc.v, b, tc.n)
		}
		if v, n := sqliteVarint(b); v != tc.v || n != len(b) {
			t.Errorf("sqliteVarint(%x) = %d, %d; want %d, %d", b, v, n, tc.v, len(b))
		}
		if _, n := sqliteVarint(b[:len(b)-1]); n != 0 {
			t.Errorf("sqliteVarint(%x), cut short, read %d bytes", b[:len(b)-1], n)
		}
	}
	// Written by FTS5 (SQLite 3.54.1): three segments of one level, each
	// of one page, with origins (contentless_delete).
	rec, _ := hex.DecodeString("00000002ff0000010103000003010101010100000302010102020000030301010303000003")
	s, err := decodeFTSStructure(rec)
	if err != nil {
		t.Fatal(err)
	}
	want := &ftsStructure{cookie: 2, v2: true, levels: []ftsLevel{{segments: []ftsSegment{
		{id: 1, first: 1, last: 1, origin1: 1, origin2: 1, nn: 3},
		{id: 2, first: 1, last: 1, origin1: 2, origin2: 2, nn: 3},
		{id: 3, first: 1, last: 1, origin1: 3, origin2: 3, nn: 3},
	}}}}
	if !reflect.DeepEqual(s, want) {
		t.Errorf("decodeFTSStructure(%x) = %+v, want %+v", rec, s, want)
	}
	if b := s.encode(); !slices.Equal(b, rec) {
		t.Errorf("encode() = %x, want %x", b, rec)
	}
}

// fillFTS fills searchSchema's tables of a new file at path with rows for
// labels, in transactions of batch rows.
func fillTestFTS(t testing.TB, path string, labels []int64, batch int) {
	t.Helper()
	db, err := openFTSPart(t.Context(), path, true)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for at := 0; at < len(labels); at += batch {
		tx, err := db.Begin()
		if err != nil {
			t.Fatal(err)
		}
		for _, l := range labels[at:min(at+batch, len(labels))] {
			if _, err := tx.Exec(`INSERT INTO fts (rowid, body, subject, pairs) VALUES (?, ?, ?, ?)`, l, ftsTestBody(l), fmt.Sprintf("subject %d", l%7), ""); err != nil {
				t.Fatal(err)
			}
			if _, err := tx.Exec(`INSERT INTO fts_addr (rowid, to_addr, list_id) VALUES (?, ?, ?)`, l, fmt.Sprintf("u%d@example.org", l%5), "list"); err != nil {
				t.Fatal(err)
			}
		}
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
}

func ftsTestBody(l int64) string {
	return fmt.Sprintf("word%d common %s tail%d", l%13, []string{"alpha", "beta", "gamma"}[l%3], l)
}

// ftsAnswers returns what a few searches of the index at path answer,
// and runs FTS5's integrity-check on both tables.
func ftsAnswers(t testing.TB, path string) map[string][]int64 {
	t.Helper()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	for _, tab := range ftsTables {
		if _, err := db.Exec(fmt.Sprintf(`INSERT INTO %[1]s (%[1]s, rank) VALUES ('integrity-check', 0)`, tab)); err != nil {
			t.Errorf("integrity-check of %s at %s: %v", tab, filepath.Base(path), err)
		}
	}
	got := map[string][]int64{}
	for _, q := range []string{
		`SELECT rowid FROM fts WHERE fts MATCH 'common'`,
		`SELECT rowid FROM fts WHERE fts MATCH 'word3 beta'`,
		`SELECT rowid FROM fts WHERE fts MATCH '"common gamma"' ORDER BY rowid DESC`,
		`SELECT rowid FROM fts WHERE fts MATCH 'subject:"subject 4"' ORDER BY rank`,
		`SELECT rowid FROM fts WHERE fts MATCH 'tail1*'`,
		`SELECT rowid FROM fts_addr WHERE fts_addr MATCH 'u2'`,
		`SELECT count(*) FROM fts_docsize`,
	} {
		rows, err := db.Query(q)
		if err != nil {
			t.Fatalf("%s: %v", q, err)
		}
		for rows.Next() {
			var id int64
			if err := rows.Scan(&id); err != nil {
				t.Fatal(err)
			}
			got[q] = append(got[q], id)
		}
		rows.Close()
	}
	return got
}

// TestJoinFTS: an index filled in two parts and joined answers as one
// filled whole, passes FTS5's integrity-check, and takes deletions in
// either part's rows and new rows after.
func TestJoinFTS(t *testing.T) {
	for _, tc := range []struct {
		name         string
		first, batch int
	}{
		{"halves", 600, 100},
		{"empty first", 0, 100},
		{"empty second", 1200, 100},
		{"many segments", 600, 7}, // crisis merges at 64 segments a level
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var labels []int64
			for i := range 1200 {
				labels = append(labels, labelBase+int64(i)*labelGap)
			}
			whole := filepath.Join(dir, "whole.db")
			fillTestFTS(t, whole, labels, tc.batch)
			// As a rebuild: the newer in the catalog, the older in the part.
			tmp := filepath.Join(dir, "joined.db")
			fillTestFTS(t, tmp, labels[tc.first:], tc.batch)
			fillTestFTS(t, tmp+ftsPartSuffix, labels[:tc.first], tc.batch)
			if err := joinFTSPart(t.Context(), tmp); err != nil {
				t.Fatal(err)
			}
			want, got := ftsAnswers(t, whole), ftsAnswers(t, tmp)
			if !reflect.DeepEqual(got, want) {
				t.Errorf("the joined index answers\n%v\nwant\n%v", got, want)
			}
			db, err := sql.Open("sqlite", tmp)
			if err != nil {
				t.Fatal(err)
			}
			defer db.Close()
			var segs int
			if err := db.QueryRow(`SELECT count(DISTINCT segid) FROM fts_idx`).Scan(&segs); err != nil || segs > 1 {
				t.Errorf("the joined index has %d segments (%v), want one: it is merged", segs, err)
			}
			var automerge int
			if err := db.QueryRow(`SELECT v FROM fts_config WHERE k = 'automerge'`).Scan(&automerge); err != nil || automerge != ftsAutomerge {
				t.Errorf("automerge = %d, %v; want %d", automerge, err, ftsAutomerge)
			}
			// A row of each part deleted, one added.
			for _, l := range []int64{labels[0], labels[len(labels)-1]} {
				if _, err := db.Exec(`DELETE FROM fts WHERE rowid = ?`, l); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := db.Exec(`INSERT INTO fts (rowid, body) VALUES (?, 'common')`, labels[len(labels)-1]+1); err != nil {
				t.Fatal(err)
			}
			if _, err := db.Exec(`INSERT INTO fts (fts, rank) VALUES ('integrity-check', 0)`); err != nil {
				t.Errorf("integrity-check after deletions: %v", err)
			}
			var n int
			if err := db.QueryRow(`SELECT count(*) FROM fts WHERE fts MATCH 'common'`).Scan(&n); err != nil || n != len(labels)-1 {
				t.Errorf("'common' after two deletions and an insertion: %d rows, %v; want %d", n, err, len(labels)-1)
			}
		})
	}
}

// FuzzFTSStructure: a structure record decodeFTSStructure reads is
// written back as it reads it, and an averages record summed with
// itself doubles each of its numbers.
func FuzzFTSStructure(f *testing.F) {
	for _, h := range []string{
		"00000002ff0000010103000003010101010100000302010102020000030301010303000003",
		"0000000000000000",
		"00000001020301000101010203000203820103",
	} {
		b, _ := hex.DecodeString(h)
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		if s, err := decodeFTSStructure(b); err == nil {
			e := s.encode()
			s2, err := decodeFTSStructure(e)
			if err != nil {
				t.Fatalf("decodeFTSStructure(encode(%+v)) = %v", s, err)
			}
			if !reflect.DeepEqual(s, s2) {
				t.Fatalf("decodeFTSStructure(encode(%+v)) = %+v", s, s2)
			}
			if j, moves, _, err := s.join(s); err == nil {
				n := 0
				for _, l := range s.levels {
					n += len(l.segments)
				}
				if len(moves) != n {
					t.Fatalf("join of %d segments moved %d", n, len(moves))
				}
				if _, err := decodeFTSStructure(j.encode()); err != nil {
					t.Fatalf("the join of %+v does not decode: %v", s, err)
				}
			}
		}
		sum, err := sumFTSAverages(b, b)
		if err != nil {
			return
		}
		for a := b; len(a) > 0; {
			v, n := sqliteVarint(a)
			w, m := sqliteVarint(sum)
			if n == 0 || m == 0 || w != 2*v {
				t.Fatalf("sumFTSAverages(%x, itself) = %x: %d where %d", b, sum, w, v)
			}
			a, sum = a[n:], sum[m:]
		}
	})
}
