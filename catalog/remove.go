package catalog

// Removals (store.Store.Remove). A message removed from the store leaves the
// catalog: its row, its references, its words in the search index and
// its share of its thread's, list's and month's counts go, and a row of
// the removed table says when and why, under the SHA-256 of its
// Message-ID, so that the thread of a reply shows "a message removed on
// DATE" where the message was. A catalog rebuilt from the store's feed
// never sees the removed message (the feed leaves it out) and records the
// same row from the removal alone.
//
// What was removed is scrubbed from the file: the writer runs with
// secure_delete (freed pages are zeroed), the search index is merged
// after a page of removals (its old segments, where the removed words
// still are, freed), and the WAL is checkpointed and truncated.

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/chibrary/chibrary/store"
)

// Removed is a removed message's place, as a thread shows it.
type Removed struct {
	Date   time.Time `json:"removed_at"`
	Reason string    `json:"reason,omitempty"`
}

// remove applies one removal within the page's transaction.
func (ix *indexer) remove(r store.Removal) error {
	cn := r.Number.String()
	var sum any // NULL without a Message-ID
	if r.MessageIDSum != ([sha256.Size]byte{}) {
		sum = r.MessageIDSum[:]
	}
	if _, err := ix.tx.ExecContext(ix.ctx, `INSERT INTO removed (cn, msgid_sum, removed, reason) VALUES (?, ?, ?, ?) ON CONFLICT (cn) DO NOTHING`,
		cn, sum, r.Removed.Unix(), r.Reason); err != nil {
		return err
	}
	var (
		id, date, thread int64
		list             string
	)
	err := ix.tx.QueryRowContext(ix.ctx, `SELECT id, date, thread, list FROM messages WHERE cn=?`, cn).Scan(&id, &date, &thread, &list)
	if errors.Is(err, sql.ErrNoRows) {
		return nil // never indexed, or removed already
	}
	if err != nil {
		return err
	}
	stmts := []struct {
		q    string
		args []any
	}{
		{`DELETE FROM fts WHERE rowid=?`, []any{ftsRowid(date, id)}},
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
	_, err = ix.tx.ExecContext(ix.ctx, `UPDATE threads SET
		base = (SELECT base FROM messages WHERE id=threads.root),
		root_reply = (SELECT reply FROM messages WHERE id=threads.root)
		WHERE id=?`, thread)
	return err
}

// monthOf returns the months key of a date in Unix seconds.
func monthOf(date int64) int {
	y, m, _ := time.Unix(date, 0).UTC().Date()
	return y*100 + int(m)
}

// scrub frees what removals left of the removed messages in the file:
// the search index's old segments (merged) and the WAL (checkpointed and
// truncated). Called with wmu held, after a page with removals.
func (c *Catalog) scrub(ctx context.Context) error {
	if _, err := c.w.ExecContext(ctx, `INSERT INTO fts(fts) VALUES('optimize')`); err != nil {
		return fmt.Errorf("cannot merge the search index after a removal: %w", err)
	}
	if _, err := c.w.ExecContext(ctx, `PRAGMA wal_checkpoint(TRUNCATE)`); err != nil {
		return fmt.Errorf("cannot checkpoint the catalog after a removal: %w", err)
	}
	return nil
}

// removedByMessageID returns the removals recorded for the given
// Message-IDs, by Message-ID.
func removedByMessageID(ctx context.Context, q interface {
	QueryRowContext(context.Context, string, ...any) *sql.Row
}, ids []string) (map[string]*Removed, error) {
	out := map[string]*Removed{}
	for _, id := range ids {
		sum := sha256.Sum256([]byte(id))
		var date int64
		var reason string
		err := q.QueryRowContext(ctx, `SELECT removed, reason FROM removed WHERE msgid_sum=? ORDER BY removed LIMIT 1`, sum[:]).Scan(&date, &reason)
		if errors.Is(err, sql.ErrNoRows) {
			continue
		}
		if err != nil {
			return nil, err
		}
		out[id] = &Removed{Date: unix(date), Reason: reason}
	}
	return out, nil
}
