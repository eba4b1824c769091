package catalog

// Removals (store.Store.Remove). A removed message leaves the catalog: its
// row, references, words and share of the counts go, and a row of the
// removed table, under the SHA-256 of its Message-ID, says when and why,
// so that a reply's thread shows where the message was. A rebuild never
// sees the removed message and records the same row from the removal.
//
// What was removed is scrubbed from the file: secure_delete zeroes freed
// pages, and after a page of removals the search index is merged (freeing
// the old segments that hold the removed words) and the WAL truncated.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"time"

	"github.com/chibrary/chibrary/store"
)

// Removed is a removed message's place, as a thread shows it.
type Removed struct {
	Date   time.Time `json:"removed_at"`
	Reason string    `json:"reason,omitempty"`
	// written is the removed message's date, zero when the catalog never
	// had it: where its placeholder sorts among its siblings.
	written time.Time
}

// remove applies one removal within the page's transaction.
func (ix *indexer) remove(r store.Removal) error {
	cn := r.Number.String()
	var sum any // NULL without a Message-ID
	if r.MessageIDSum != ([sha256.Size]byte{}) {
		sum = r.MessageIDSum[:]
	}
	var (
		id, date, thread int64
		label            int64 // negative: in a rebuild's spool, not in fts
		list             string
	)
	err := ix.tx.QueryRowContext(ix.ctx, `SELECT id, date, thread, list, label FROM messages WHERE cn=?`, cn).Scan(&id, &date, &thread, &list, &label)
	found := err == nil
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		return err
	}
	// The message's date, when the catalog has it, keeps its
	// placeholder's place in its thread.
	var written any
	if found {
		written = date
	}
	if _, err := ix.tx.ExecContext(ix.ctx, `INSERT INTO removed (cn, msgid_sum, removed, reason, date) VALUES (?, ?, ?, ?, ?) ON CONFLICT (cn) DO NOTHING`,
		cn, sum, r.Removed.Unix(), r.Reason, written); err != nil {
		return err
	}
	if !found {
		return nil // never indexed, or removed already
	}
	stmts := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM fts WHERE rowid=?`, []any{label}},
		{`DELETE FROM fts_addr WHERE rowid=?`, []any{label}},
		{`DELETE FROM refs WHERE msg=?`, []any{id}},
		{`DELETE FROM messages WHERE id=?`, []any{id}},
		{`UPDATE months SET messages=messages-1 WHERE list=? AND month=?`, []any{list, monthOf(date)}},
		{`DELETE FROM months WHERE list=? AND month=? AND messages<=0`, []any{list, monthOf(date)}},
		{`UPDATE lists SET messages=messages-1,
			first=coalesce((SELECT min(date) FROM messages WHERE list=?1), first),
			last=coalesce((SELECT max(date) FROM messages WHERE list=?1), last) WHERE name=?1`, []any{list}},
		{`DELETE FROM lists WHERE name=? AND messages<=0`, []any{list}},
	}
	for _, s := range stmts {
		if _, err := ix.tx.ExecContext(ix.ctx, s.q, s.args...); err != nil {
			return fmt.Errorf("cannot remove message %s: %w", cn, err)
		}
	}
	// The thread: gone with its last message, or counted again, its
	// root the earliest message left.
	var left int
	if err := ix.tx.QueryRowContext(ix.ctx, `SELECT count(*) FROM messages WHERE thread=?`, thread).Scan(&left); err != nil {
		return err
	}
	if left == 0 {
		_, err := ix.dropThread.ExecContext(ix.ctx, thread)
		return err
	}
	if _, err := ix.recount.ExecContext(ix.ctx, thread); err != nil {
		return err
	}
	return ix.takeRoot(thread)
}

// monthOf returns the months key of a date in Unix seconds.
func monthOf(date int64) int {
	y, m, _ := time.Unix(date, 0).UTC().Date()
	return y*100 + int(m)
}

// scrub merges the search index and truncates the WAL after a page with
// removals (see the top of this file). Called with wmu held.
func (c *Catalog) scrub(ctx context.Context) error {
	for _, t := range []string{"fts", "fts_addr"} {
		if _, err := c.w.ExecContext(ctx, `INSERT INTO `+t+`(`+t+`) VALUES('optimize')`); err != nil {
			return fmt.Errorf("cannot merge the search index after a removal: %w", err)
		}
	}
	if _, err := c.w.ExecContext(ctx, `PRAGMA incremental_vacuum`); err != nil {
		return fmt.Errorf("cannot give back the pages of the search index after a removal: %w", err)
	}
	if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("cannot checkpoint the catalog after a removal: %w", err)
	}
	return nil
}

// removedByMessageID returns the removals recorded for the given
// Message-IDs, by Message-ID. (Catalog.read asks only when the archive
// has removals at all.)
func removedByMessageID(queryRow func(string, ...any) *sql.Row, ids []string) (map[string]*Removed, error) {
	out := map[string]*Removed{}
	for _, id := range ids {
		sum := sha256.Sum256([]byte(id))
		var date int64
		var reason string
		var written sql.NullInt64
		err := queryRow(`SELECT removed, reason, date FROM removed WHERE msgid_sum=? ORDER BY removed LIMIT 1`, sum[:]).Scan(&date, &reason, &written)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		r := &Removed{Date: unix(date), Reason: reason}
		if written.Valid {
			r.written = unix(written.Int64)
		}
		out[id] = r
	}
	return out, nil
}

// carryRemoved copies into the new catalog nc the removals the catalog
// file at old recorded, with the dates of the removed messages, which the
// store does not keep: a rebuild's thread keeps a removed message's place.
// A catalog of another schema is passed over (its removals come from the
// store, without their dates).
func carryRemoved(ctx context.Context, nc *Catalog, old string) (int, error) {
	if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
		return 0, nil
	}
	odb, err := openDB(old, true, 1)
	if err != nil {
		return 0, fmt.Errorf("cannot open %s: %w", old, err)
	}
	defer odb.Close()
	if v, err := nc.version(ctx, odb); err != nil || v != SchemaVersion {
		return 0, err
	}
	rows, err := odb.QueryContext(ctx, `SELECT cn, msgid_sum, removed, reason, date FROM removed`)
	if err != nil {
		return 0, err
	}
	defer rows.Close()
	tx, err := nc.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, err
	}
	defer tx.Rollback()
	n := 0
	for rows.Next() {
		var cn, reason string
		var sum []byte
		var removed int64
		var date sql.NullInt64
		if err := rows.Scan(&cn, &sum, &removed, &reason, &date); err != nil {
			return 0, err
		}
		if _, err := tx.ExecContext(ctx, `INSERT INTO removed (cn, msgid_sum, removed, reason, date) VALUES (?, ?, ?, ?, ?) ON CONFLICT (cn) DO NOTHING`,
			cn, sum, removed, reason, date); err != nil {
			return 0, err
		}
		n++
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	return n, tx.Commit()
}
