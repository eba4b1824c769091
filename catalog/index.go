package catalog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"hash/fnv"
	"slices"
	"time"

	"github.com/chibrary/chibrary/store"
)

// subjectWindow is how far apart in time a message without threading
// headers and a thread of the same subject may be for it to join.
const subjectWindow = 30 * 24 * time.Hour

// writeState is what the writer remembers between pages.
type writeState struct {
	authority string // of the store the catalog was built from, once known
	cursor    store.Cursor
}

// state reads the writer's state once. Called with wmu held.
func (c *Catalog) state(ctx context.Context) (*writeState, error) {
	if c.w == nil {
		return nil, ErrReadOnly
	}
	if c.st != nil {
		return c.st, nil
	}
	a, err := meta(ctx, c.w, "authority")
	if err != nil {
		return nil, err
	}
	cur, err := meta(ctx, c.w, "cursor")
	if err != nil {
		return nil, err
	}
	c.st = &writeState{authority: a, cursor: store.Cursor(cur)}
	return c.st, nil
}

// indexer holds the statements of one page's transaction.
type indexer struct {
	ctx context.Context
	tx  *sql.Tx

	exists, insertMsg, insertRef                 *sql.Stmt
	threadByMsgID, threadByRef, threadsBySubject *sql.Stmt
	seriesCovers                                 *sql.Stmt
	sketches, listAddress, movedTo, dropMoved    *sql.Stmt
	listInfo, poster                             *sql.Stmt
	newThread, addToThread, threadSize           *sql.Stmt
	moveMessages, dropThread, recount            *sql.Stmt
	list, month, fts, ftsAddr                    *sql.Stmt
	labelBefore, labelAfter, lateLabel           *sql.Stmt
	wire                                         *sql.Stmt
	newMailbox, numberFor, addNumber             *sql.Stmt
	countNumber, dropCarried, takeNext           *sql.Stmt
	addVersion                                   *sql.Stmt
	// carried: numbers carried over from an old catalog wait (numbers.go).
	carried bool
	// moved: moves wait for their messages (move.go).
	moved bool
	// spool, during a rebuild, takes the search text (labels.go).
	spool *textSpool
}

func (c *Catalog) newIndexer(ctx context.Context, tx *sql.Tx) (*indexer, error) {
	ix := &indexer{ctx: ctx, tx: tx, spool: c.spool}
	stmts := []struct {
		s   **sql.Stmt
		sql string
	}{
		{&ix.exists, `SELECT 1 FROM messages WHERE cn=?`},
		{&ix.insertMsg, `INSERT INTO messages (cn, list, date, date_source, from_name, from_addr, subject, reply, msgid, msgid_key, thread, size, attachments, added,
			arrived, via, joined, quotes, sketch, label)
			VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`},
		{&ix.insertRef, `INSERT INTO refs (msg, pos, msgid, key) VALUES (?, ?, ?, ?)`},
		{&ix.threadByMsgID, `SELECT thread FROM messages WHERE msgid_key=?1 AND list=?2 AND msgid=?3 LIMIT 1`},
		{&ix.threadByRef, `SELECT m.thread FROM refs r JOIN messages m ON m.id=r.msg WHERE r.key=?1 AND m.list=?2 AND r.msgid=?3 LIMIT 1`},
		{&ix.threadsBySubject, threadsBySubjectSQL},
		{&ix.seriesCovers, seriesCoversSQL},
		{&ix.sketches, sketchesSQL},
		{&ix.listAddress, `UPDATE lists SET address=? WHERE name=? AND address!=?`},
		{&ix.poster, `INSERT INTO posters (list, month, addr, name, messages) VALUES (?, ?, ?, ?, 1)
			ON CONFLICT (list, month, addr) DO UPDATE SET messages = messages + 1, name = excluded.name`},
		{&ix.listInfo, `UPDATE lists SET description = CASE WHEN ?1 != '' THEN ?1 ELSE description END, subscribe = CASE WHEN ?2 != '' THEN ?2 ELSE subscribe END
			WHERE name = ?3 AND (?1 != '' AND description != ?1 OR ?2 != '' AND subscribe != ?2)`},
		{&ix.movedTo, `SELECT list FROM moved WHERE cn=?`},
		{&ix.dropMoved, `DELETE FROM moved WHERE cn=?`},
		{&ix.threadSize, `SELECT messages FROM threads WHERE id=?`},
		{&ix.newThread, `INSERT INTO threads (list, root, base_key, root_reply, messages, first, last) VALUES (?, 0, 0, 0, 0, ?, ?)`},
		// SQLite evaluates every SET expression on the row as it was, so
		// first and messages here are the old values.
		{&ix.addToThread, `UPDATE threads SET
			messages = messages + 1,
			root = CASE WHEN messages = 0 OR ?1 < first THEN ?2 ELSE root END,
			base_key = CASE WHEN messages = 0 OR ?1 < first THEN ?3 ELSE base_key END,
			root_reply = CASE WHEN messages = 0 OR ?1 < first THEN ?4 ELSE root_reply END,
			first = CASE WHEN messages = 0 THEN ?1 ELSE min(first, ?1) END,
			last = CASE WHEN messages = 0 THEN ?6 ELSE max(last, ?6) END
			WHERE id = ?5`},
		{&ix.moveMessages, `UPDATE messages SET thread=? WHERE thread=?`},
		{&ix.dropThread, `DELETE FROM threads WHERE id=?`},
		{&ix.recount, `UPDATE threads SET
			messages = (SELECT count(*) FROM messages WHERE thread=?1),
			first = (SELECT min(date) FROM messages WHERE thread=?1),
			last = (SELECT max(arrived) FROM messages WHERE thread=?1),
			root = (SELECT id FROM messages WHERE thread=?1 ORDER BY date, id LIMIT 1)
			WHERE id=?1`},
		{&ix.list, `INSERT INTO lists (name, messages, first, last) VALUES (?1, 1, ?2, ?2)
			ON CONFLICT (name) DO UPDATE SET messages=messages+1, first=min(first, ?2), last=max(last, ?2)`},
		{&ix.month, `INSERT INTO months (list, month, messages) VALUES (?, ?, 1)
			ON CONFLICT (list, month) DO UPDATE SET messages=messages+1`},
		{&ix.fts, ftsInsertSQL},
		{&ix.ftsAddr, ftsAddrInsertSQL},
		{&ix.labelBefore, labelBeforeSQL},
		{&ix.labelAfter, labelAfterSQL},
		{&ix.lateLabel, `UPDATE messages SET label=? WHERE id=?`},
		{&ix.wire, `INSERT INTO wire (msg, size, lines) VALUES (?, ?, ?)`},
		{&ix.newMailbox, newMailboxSQL},
		{&ix.numberFor, numberForSQL},
		{&ix.addNumber, addNumberSQL},
		{&ix.countNumber, countNumberSQL},
		{&ix.dropCarried, dropCarriedSQL},
		{&ix.takeNext, takeNextSQL},
		{&ix.addVersion, `INSERT OR IGNORE INTO versions (key, msg, version, change, added, deleted, paths) VALUES (?, ?, ?, ?, ?, ?, ?)`},
	}
	for _, s := range stmts {
		st, err := tx.PrepareContext(ctx, s.sql)
		if err != nil {
			return nil, fmt.Errorf("cannot prepare %q: %w", s.sql, err)
		}
		*s.s = st
	}
	if err := tx.QueryRowContext(ctx, hasCarriedSQL).Scan(&ix.carried); err != nil {
		return nil, fmt.Errorf("cannot read the numbers carried over: %w", err)
	}
	if err := tx.QueryRowContext(ctx, `SELECT EXISTS (SELECT 1 FROM moved)`).Scan(&ix.moved); err != nil {
		return nil, fmt.Errorf("cannot read the moves: %w", err)
	}
	return ix, nil
}

// add indexes one message; it reports false for one already indexed.
func (ix *indexer) add(d *doc) (bool, error) {
	var one int
	switch err := ix.exists.QueryRowContext(ix.ctx, d.cn).Scan(&one); {
	case err == nil:
		return false, nil // seen twice: the feed allows it
	case !errors.Is(err, sql.ErrNoRows):
		return false, err
	}
	if ix.moved {
		// Moved before the feed handed it out (move.go).
		var list string
		switch err := ix.movedTo.QueryRowContext(ix.ctx, d.cn).Scan(&list); {
		case err == nil:
			d.list = list
			if _, err := ix.dropMoved.ExecContext(ix.ctx, d.cn); err != nil {
				return false, err
			}
		case !errors.Is(err, sql.ErrNoRows):
			return false, err
		}
	}
	threads, how, quotes, err := ix.connected(d)
	if err != nil {
		return false, err
	}
	date := d.date.Unix()
	var thread int64
	if len(threads) == 0 {
		res, err := ix.newThread.ExecContext(ix.ctx, d.list, date, date)
		if err != nil {
			return false, err
		}
		if thread, err = res.LastInsertId(); err != nil {
			return false, err
		}
	} else {
		if thread, err = ix.merge(threads); err != nil {
			return false, err
		}
	}
	var sk any // NULL without one
	if len(d.sketch) > 0 {
		sk = d.sketch
	}
	// The label (labels.go). In a rebuild, which spools the text, a
	// stand-in of the label's size, so that setting the label does not
	// grow the row; a late label once the id is known, -1 until then.
	var label int64
	placed := false
	if ix.spool != nil {
		label = ix.spool.standIn()
	} else if label, placed, err = ix.label(date); err != nil {
		return false, err
	} else if !placed {
		label = -1
	}
	res, err := ix.insertMsg.ExecContext(ix.ctx, d.cn, d.list, date, int(d.dateSource), d.fromName, d.fromAddr,
		d.subject, d.reply, d.msgid, textKey(d.msgid), thread, d.size, d.attachments, d.added.Unix(),
		d.arrived.Unix(), d.via, int(how), quotes, sk, label)
	if err != nil {
		return false, err
	}
	id, err := res.LastInsertId()
	if err != nil {
		return false, err
	}
	if ix.spool == nil && !placed {
		if id > lateIDMask {
			return false, ErrTooMany
		}
		label = lateLabel(date, id)
		if _, err := ix.lateLabel.ExecContext(ix.ctx, label, id); err != nil {
			return false, err
		}
	}
	if _, err := ix.wire.ExecContext(ix.ctx, id, d.wireSize, d.lines); err != nil {
		return false, err
	}
	if err := ix.number(d, id); err != nil {
		return false, err
	}
	for i, r := range d.refs {
		if _, err := ix.insertRef.ExecContext(ix.ctx, id, i, r, textKey(r)); err != nil {
			return false, err
		}
	}
	if err := ix.indexVersion(d, id); err != nil {
		return false, err
	}
	if _, err := ix.addToThread.ExecContext(ix.ctx, date, id, textKey(d.base), d.reply, thread, d.arrived.Unix()); err != nil {
		return false, err
	}
	if _, err := ix.list.ExecContext(ix.ctx, d.list, date); err != nil {
		return false, err
	}
	if addr := cmp.Or(d.listPost, d.via); addr != "" {
		if _, err := ix.listAddress.ExecContext(ix.ctx, addr, d.list, addr); err != nil {
			return false, err
		}
	}
	if d.listDescription != "" || d.listSubscribe != "" {
		if _, err := ix.listInfo.ExecContext(ix.ctx, d.listDescription, d.listSubscribe, d.list); err != nil {
			return false, err
		}
	}
	y, m, _ := d.date.Date()
	if _, err := ix.month.ExecContext(ix.ctx, d.list, y*100+int(m)); err != nil {
		return false, err
	}
	if _, err := ix.poster.ExecContext(ix.ctx, d.list, monthOf(date), posterKey(d.fromAddr, d.fromName), d.fromName); err != nil {
		return false, err
	}
	if ix.spool != nil {
		return true, ix.spool.put(id, d)
	}
	cols := ftsColumns(d)
	if err := insertText(ix.ctx, ix.fts, ix.ftsAddr, label, cols, pairsText(cols[:ftsMainCols])); err != nil {
		return false, err
	}
	return true, nil
}

// establishedThread is how many messages make a thread established: no
// message merges two established threads.
const establishedThread = 2

// connected returns the threads of d's list that d joins, without repeats,
// and how it joins them (the package doc's threading rules): those of its
// nearest ancestor the list knows and of its replies stored before it,
// merged only when at most one is established; failing those, a thread by
// subject (subject.go), quotes being the message it quotes.
func (ix *indexer) connected(d *doc) (threads []int64, how JoinedBy, quotes int64, err error) {
	var parent, replies []int64
	for i := len(d.refs) - 1; i >= 0 && len(parent) == 0; i-- {
		if parent, err = ix.threadsOf(d.refs[i], d.list); err != nil {
			return nil, 0, 0, err
		}
	}
	if d.msgid != "" {
		if replies, err = ix.threadsOf(d.msgid, d.list); err != nil {
			return nil, 0, 0, err
		}
	}
	threads = parent
	for _, t := range replies {
		if !slices.Contains(threads, t) {
			threads = append(slices.Clip(threads), t)
		}
	}
	if len(threads) > 1 {
		established := 0
		for _, t := range threads {
			n, _, err := ix.one(ix.threadSize, t)
			if err != nil {
				return nil, 0, 0, err
			}
			if n >= establishedThread {
				established++
			}
		}
		if established > 1 {
			if len(parent) > 0 {
				return parent[:1], JoinedByID, 0, nil
			}
			return replies[:1], JoinedByID, 0, nil
		}
	}
	if len(threads) == 0 && (len(d.refs) == 0 || d.reply) {
		t, how, quotes, err := ix.bySubject(d)
		if err != nil || t == 0 {
			return nil, JoinedByID, 0, err
		}
		return []int64{t}, how, quotes, nil
	}
	return threads, JoinedByID, 0, nil
}

// threadsOf returns the threads of id in list, the first first: that of an
// archived message with that Message-ID, and that of a message naming it.
func (ix *indexer) threadsOf(id, list string) ([]int64, error) {
	var out []int64
	for _, st := range []*sql.Stmt{ix.threadByMsgID, ix.threadByRef} {
		t, ok, err := ix.one(st, textKey(id), list, id)
		if err != nil {
			return nil, err
		}
		if ok && !slices.Contains(out, t) {
			out = append(out, t)
		}
	}
	return out, nil
}

func (ix *indexer) one(st *sql.Stmt, args ...any) (int64, bool, error) {
	var v int64
	err := st.QueryRowContext(ix.ctx, args...).Scan(&v)
	if errors.Is(err, sql.ErrNoRows) {
		return 0, false, nil
	}
	return v, err == nil, err
}

// merge folds the threads into the oldest (lowest ID) and returns it.
func (ix *indexer) merge(threads []int64) (int64, error) {
	into := slices.Min(threads)
	if len(threads) == 1 {
		return into, nil
	}
	for _, t := range threads {
		if t == into {
			continue
		}
		if _, err := ix.moveMessages.ExecContext(ix.ctx, into, t); err != nil {
			return 0, err
		}
		if _, err := ix.dropThread.ExecContext(ix.ctx, t); err != nil {
			return 0, err
		}
	}
	if _, err := ix.recount.ExecContext(ix.ctx, into); err != nil {
		return 0, err
	}
	return into, ix.takeRoot(into)
}

// takeRoot gives thread the subject of its root, which may have changed.
func (ix *indexer) takeRoot(thread int64) error {
	var subject string
	err := ix.tx.QueryRowContext(ix.ctx, `SELECT m.subject FROM threads t JOIN messages m ON m.id=t.root WHERE t.id=?`, thread).Scan(&subject)
	if err != nil {
		return err
	}
	base, reply := BaseSubject(subject)
	_, err = ix.tx.ExecContext(ix.ctx, `UPDATE threads SET base_key=?, root_reply=? WHERE id=?`, textKey(base), reply, thread)
	return err
}

// apply indexes a page of documents, applies its moves and removals and
// saves the cursor, in one transaction. Called with wmu held.
func (c *Catalog) apply(ctx context.Context, docs []doc, moves []store.Move, removals []store.Removal, next store.Cursor, authority string) (int, error) {
	st, err := c.state(ctx)
	if err != nil {
		return 0, err
	}
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return 0, fmt.Errorf("cannot index messages: %w", markDamaged(err))
	}
	defer tx.Rollback()
	// The statements run under a context that cannot end: with one that
	// can, the driver starts a goroutine per statement to watch it.
	// Cancellation is checked between messages.
	ix, err := c.newIndexer(context.WithoutCancel(ctx), tx)
	if err != nil {
		return 0, fmt.Errorf("cannot index messages: %w", markDamaged(err))
	}
	added := 0
	for i := range docs {
		if err := ctx.Err(); err != nil {
			return 0, err
		}
		ok, err := ix.add(&docs[i])
		if err != nil {
			return 0, fmt.Errorf("cannot index message %s: %w", docs[i].cn, markDamaged(err))
		}
		if ok {
			added++
		}
	}
	for _, m := range moves {
		if err := ix.move(m); err != nil {
			return 0, fmt.Errorf("cannot apply the move of %v to %s: %w", m.Number, m.List, markDamaged(err))
		}
	}
	for _, r := range removals {
		if err := ix.remove(r); err != nil {
			return 0, fmt.Errorf("cannot apply the removal of %v: %w", r.Number, err)
		}
	}
	if authority != st.authority {
		if err := setMeta(ctx, tx, "authority", authority); err != nil {
			return 0, err
		}
	}
	if next != st.cursor {
		if err := setMeta(ctx, tx, "cursor", string(next)); err != nil {
			return 0, err
		}
	}
	err = tx.Commit()
	c.genSeq.Add(1) // Generation
	if err != nil {
		return 0, fmt.Errorf("cannot index messages: %w", markDamaged(err))
	}
	st.authority, st.cursor = authority, next
	return added, nil
}

// textKey is what the catalog's indexes hold of a Message-ID or a base
// subject: 8 bytes where the text takes 40 or more, in indexes that hold
// one per message, reference or thread. Every lookup compares the text
// too, so two texts with the same key only cost a row read. It is written
// to disk: FNV-1a, never to change without a new SchemaVersion. (A
// variable for TestTextKeyCollisions.)
var textKey = func(s string) int64 {
	h := fnv.New64a()
	h.Write([]byte(s))
	return int64(h.Sum64())
}
