package catalog

// Moves (store.Store.Move). A moved message leaves its thread, list and
// month and joins the new list as indexing would have put it there
// (threads never span lists). Its row's list is updated in place, so that
// the triggers of numbers.go renumber it (IMAP clients of the old mailbox
// see an expunge) and its words stay in the search index (same rowid).
// A move of a message not indexed yet (a Riak feed may hand out a message
// late) waits in the moved table until the message comes (index.go).

import (
	"database/sql"
	"errors"
	"fmt"

	"github.com/chibrary/chibrary/store"
)

// move applies one move within the page's transaction.
func (ix *indexer) move(m store.Move) error {
	cn := m.Number.String()
	list := ListName(m.List)
	if list == "" {
		return fmt.Errorf("a move of %s to %q, which is no list name", cn, m.List)
	}
	var (
		id, date, arrived, thread int64
		old, msgid, subject       string
		fromName, fromAddr        string
	)
	err := ix.tx.QueryRowContext(ix.ctx, `SELECT id, list, date, arrived, thread, msgid, subject, from_name, from_addr FROM messages WHERE cn=?`, cn).
		Scan(&id, &old, &date, &arrived, &thread, &msgid, &subject, &fromName, &fromAddr)
	if errors.Is(err, sql.ErrNoRows) {
		if _, err := ix.tx.ExecContext(ix.ctx, `INSERT INTO moved (cn, list) VALUES (?, ?) ON CONFLICT (cn) DO UPDATE SET list=excluded.list`, cn, list); err != nil {
			return err
		}
		ix.moved = true
		return nil
	}
	if err != nil {
		return err
	}
	if old == list {
		return nil
	}
	// Out of its old list: its thread, list and month.
	if err := ix.leave(id, old, date, thread); err != nil {
		return err
	}
	// Into the new: a thread found as indexing would find it.
	base, reply := BaseSubject(subject)
	d := &doc{cn: cn, list: list, date: unix(date), arrived: unix(arrived), msgid: msgid, base: base, reply: reply, fromName: fromName, fromAddr: fromAddr}
	rows, err := ix.tx.QueryContext(ix.ctx, `SELECT msgid FROM refs WHERE msg=? ORDER BY pos`, id)
	if err != nil {
		return err
	}
	for rows.Next() {
		var r string
		if err := rows.Scan(&r); err != nil {
			rows.Close()
			return err
		}
		d.refs = append(d.refs, r)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return err
	}
	threads, how, quotes, err := ix.connected(d)
	if err != nil {
		return err
	}
	var into int64
	if len(threads) == 0 {
		res, err := ix.newThread.ExecContext(ix.ctx, list, date, date)
		if err != nil {
			return err
		}
		if into, err = res.LastInsertId(); err != nil {
			return err
		}
	} else if into, err = ix.merge(threads); err != nil {
		return err
	}
	// The triggers renumber it (numbers.go).
	if _, err := ix.tx.ExecContext(ix.ctx, `UPDATE messages SET list=?, thread=?, joined=?, quotes=? WHERE id=?`, list, into, int(how), quotes, id); err != nil {
		return err
	}
	if _, err := ix.addToThread.ExecContext(ix.ctx, date, id, textKey(base), reply, into, arrived); err != nil {
		return err
	}
	if _, err := ix.list.ExecContext(ix.ctx, list, date); err != nil {
		return err
	}
	_, err = ix.month.ExecContext(ix.ctx, list, monthOf(date))
	return err
}

// leave takes message id (of list, date and thread) out of its thread,
// list and month counts, before it moves or is removed.
func (ix *indexer) leave(id int64, list string, date, thread int64) error {
	stmts := []struct {
		q    string
		args []any
	}{
		{`UPDATE months SET messages=messages-1 WHERE list=? AND month=?`, []any{list, monthOf(date)}},
		{`DELETE FROM months WHERE list=? AND month=? AND messages<=0`, []any{list, monthOf(date)}},
		{`UPDATE lists SET messages=messages-1,
			first=coalesce((SELECT min(date) FROM messages WHERE list=?1 AND id!=?2), first),
			last=coalesce((SELECT max(date) FROM messages WHERE list=?1 AND id!=?2), last) WHERE name=?1`, []any{list, id}},
		{`DELETE FROM lists WHERE name=? AND messages<=0`, []any{list}},
	}
	for _, s := range stmts {
		if _, err := ix.tx.ExecContext(ix.ctx, s.q, s.args...); err != nil {
			return err
		}
	}
	// The thread: gone with its last message, or counted again without
	// it, its root the earliest message left.
	var left int
	if err := ix.tx.QueryRowContext(ix.ctx, `SELECT count(*) FROM messages WHERE thread=? AND id!=?`, thread, id).Scan(&left); err != nil {
		return err
	}
	if left == 0 {
		_, err := ix.dropThread.ExecContext(ix.ctx, thread)
		return err
	}
	if _, err := ix.tx.ExecContext(ix.ctx, `UPDATE messages SET thread=0 WHERE id=?`, id); err != nil {
		return err
	}
	if _, err := ix.recount.ExecContext(ix.ctx, thread); err != nil {
		return err
	}
	return ix.takeRoot(thread)
}
