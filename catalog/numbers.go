package catalog

// Numbers: the IMAP UIDs and NNTP article numbers of a list's messages.
//
// A message gets its list's next number when it comes into the list, so
// numbers only grow and are never given twice in a list (RFC 9051 section
// 2.3.1.1, RFC 3977 section 6.1.1). The store's feed order cannot serve:
// the Riak feed can surface a message after later ones, and a moved
// message needs a new number. Triggers renumber rows other writers change
// (removals, moves) and log numbers that leave a list in gone (IMAP
// EXPUNGE); inserts are numbered by the indexer, since a trigger's
// savepoint would make FTS5 write a segment per message.
//
// Numbers must outlive the catalog file, since an IMAP client that sees
// UIDs change under the same UIDVALIDITY shows the wrong messages: a
// rebuild carries them over (carry). Only a catalog lost altogether gets a
// new UIDVALIDITY, its creation time (RFC 9051 section 2.3.1.1).

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

const numbersSchema = `
-- A list as a mailbox: its UIDVALIDITY, the number its next message
-- gets (never decreases) and how many messages it has.
CREATE TABLE mailboxes (
	list     TEXT PRIMARY KEY,
	validity INTEGER NOT NULL,
	next     INTEGER NOT NULL,
	messages INTEGER NOT NULL
) WITHOUT ROWID;

-- The number of each message in its list.
CREATE TABLE numbers (
	list TEXT    NOT NULL,
	num  INTEGER NOT NULL,
	msg  INTEGER NOT NULL,  -- messages.id
	PRIMARY KEY (list, num)
) WITHOUT ROWID;
CREATE INDEX numbers_msg ON numbers (msg);

-- A message as IMAP and NNTP send it (package mailwire): its size with
-- CRLF line ends and the lines of its body.
CREATE TABLE wire (
	msg   INTEGER PRIMARY KEY,
	size  INTEGER NOT NULL,
	lines INTEGER NOT NULL
);

-- Numbers that left their list, in order: what IMAP clients are told
-- was expunged.
CREATE TABLE gone (
	seq  INTEGER PRIMARY KEY AUTOINCREMENT,
	list TEXT    NOT NULL,
	num  INTEGER NOT NULL
);

-- Numbers carried over from the catalog this one was rebuilt from, until
-- their message is indexed into that list again.
CREATE TABLE carried (
	cn   TEXT    NOT NULL,
	list TEXT    NOT NULL,
	num  INTEGER NOT NULL,
	PRIMARY KEY (cn, list)
) WITHOUT ROWID;

CREATE TRIGGER number_moved AFTER UPDATE OF list ON messages WHEN NEW.list IS NOT OLD.list BEGIN
	DELETE FROM numbers WHERE msg = OLD.id;` + numberMessage + `END;

CREATE TRIGGER number_removed AFTER DELETE ON messages BEGIN
	DELETE FROM numbers WHERE msg = OLD.id;
	DELETE FROM wire WHERE msg = OLD.id;
END;

CREATE TRIGGER numbers_out AFTER DELETE ON numbers BEGIN
	UPDATE mailboxes SET messages = messages - 1 WHERE list = OLD.list;
	INSERT INTO gone (list, num) VALUES (OLD.list, OLD.num);
END;
`

// numberMessage numbers the message NEW in a trigger as number does: its
// carried number if that is free, else the list's next.
const numberMessage = `
	INSERT OR IGNORE INTO mailboxes (list, validity, next, messages)
		VALUES (NEW.list, (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'uidvalidity'), 1, 0);
	INSERT INTO numbers (list, num, msg) VALUES (NEW.list, coalesce(
		(SELECT c.num FROM carried c WHERE c.cn = NEW.cn AND c.list = NEW.list
			AND NOT EXISTS (SELECT 1 FROM numbers n WHERE n.list = c.list AND n.num = c.num)),
		(SELECT next FROM mailboxes WHERE list = NEW.list)), NEW.id);
	UPDATE mailboxes SET messages = messages + 1,
		next = max(next, (SELECT num FROM numbers WHERE msg = NEW.id) + 1) WHERE list = NEW.list;
	DELETE FROM carried WHERE cn = NEW.cn AND list = NEW.list;
`

// The indexer's statements that number a message (number).
const (
	takeNextSQL   = `SELECT next FROM mailboxes WHERE list = ?`
	hasCarriedSQL = `SELECT EXISTS (SELECT 1 FROM carried)`
	newMailboxSQL = `INSERT INTO mailboxes (list, validity, next, messages)
		VALUES (?, (SELECT CAST(value AS INTEGER) FROM meta WHERE key = 'uidvalidity'), 1, 0) ON CONFLICT (list) DO NOTHING`
	numberForSQL = `SELECT coalesce(
		(SELECT c.num FROM carried c WHERE c.cn = ?1 AND c.list = ?2
			AND NOT EXISTS (SELECT 1 FROM numbers n WHERE n.list = c.list AND n.num = c.num)),
		(SELECT next FROM mailboxes WHERE list = ?2)), (SELECT next FROM mailboxes WHERE list = ?2)`
	addNumberSQL   = `INSERT INTO numbers (list, num, msg) VALUES (?, ?, ?)`
	countNumberSQL = `UPDATE mailboxes SET messages = messages + 1, next = max(next, ?2 + 1) WHERE list = ?1`
	dropCarriedSQL = `DELETE FROM carried WHERE cn = ? AND list = ?`
)

// number gives the message just inserted (messages.id id) its number in
// its list. Without carried numbers none of its statements opens a
// savepoint (an UPDATE ... RETURNING would; see the top of this file).
func (ix *indexer) number(d *doc, id int64) error {
	if !ix.carried {
		var num int64
		err := ix.takeNext.QueryRowContext(ix.ctx, d.list).Scan(&num)
		if errors.Is(err, sql.ErrNoRows) { // a new list
			if _, err := ix.newMailbox.ExecContext(ix.ctx, d.list); err != nil {
				return err
			}
			err = ix.takeNext.QueryRowContext(ix.ctx, d.list).Scan(&num)
		}
		if err != nil {
			return err
		}
		if _, err := ix.addNumber.ExecContext(ix.ctx, d.list, num, id); err != nil {
			return err
		}
		_, err = ix.countNumber.ExecContext(ix.ctx, d.list, num)
		return err
	}
	if _, err := ix.newMailbox.ExecContext(ix.ctx, d.list); err != nil {
		return err
	}
	var num, next int64
	if err := ix.numberFor.QueryRowContext(ix.ctx, d.cn, d.list).Scan(&num, &next); err != nil {
		return err
	}
	if _, err := ix.addNumber.ExecContext(ix.ctx, d.list, num, id); err != nil {
		return err
	}
	if _, err := ix.countNumber.ExecContext(ix.ctx, d.list, num); err != nil {
		return err
	}
	if num < next { // a carried number
		if _, err := ix.dropCarried.ExecContext(ix.ctx, d.cn, d.list); err != nil {
			return err
		}
	}
	return nil
}

// initNumbers records a new catalog's UIDVALIDITY, in create's transaction.
func initNumbers(ctx context.Context, tx *sql.Tx) error {
	return setMeta(ctx, tx, "uidvalidity", strconv.FormatInt(newValidity(), 10))
}

// newValidity is the UIDVALIDITY of a catalog created now: the time in
// seconds (32 bits until 2106), and never 0, which is not valid.
func newValidity() int64 {
	return max(1, time.Now().Unix()&0xffffffff)
}

// hasNumbers reports whether db has the tables numbers are carried from.
func hasNumbers(ctx context.Context, db *sql.DB) (bool, error) {
	var n int
	err := db.QueryRowContext(ctx, `SELECT count(*) FROM sqlite_schema WHERE type='table' AND name IN ('mailboxes', 'numbers', 'carried', 'meta', 'messages')`).Scan(&n)
	if err != nil {
		return false, fmt.Errorf("cannot read catalog: %w", err)
	}
	return n == 5, nil
}

// Carried says what a rebuild kept of the old catalog's numbers.
type Carried struct {
	// Validity is the UIDVALIDITY kept; 0 when there was nothing to keep.
	Validity uint32
	// Lists and Numbers count the mailboxes and numbers kept.
	Lists, Numbers int
}

// carry seeds the new catalog nc with the numbers of the catalog file at
// old; a missing file, or one without numbers, carries nothing.
func carry(ctx context.Context, nc *Catalog, old string) (Carried, error) {
	if _, err := os.Stat(old); errors.Is(err, os.ErrNotExist) {
		return Carried{}, nil
	}
	odb, err := openDB(old, true, 1)
	if err != nil {
		return Carried{}, fmt.Errorf("cannot open %s: %w", old, err)
	}
	defer odb.Close()
	if ok, err := hasNumbers(ctx, odb); err != nil || !ok {
		return Carried{}, err
	}
	var res Carried
	v, err := meta(ctx, odb, "uidvalidity")
	if err != nil {
		return Carried{}, err
	}
	validity, err := strconv.ParseUint(v, 10, 32)
	if err != nil || validity == 0 {
		return Carried{}, fmt.Errorf("cannot read the UIDVALIDITY of %s: %q", old, v)
	}
	res.Validity = uint32(validity)
	// One read transaction, so that what is carried is one state of old.
	otx, err := odb.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return Carried{}, err
	}
	defer otx.Rollback()
	tx, err := nc.w.BeginTx(ctx, nil)
	if err != nil {
		return Carried{}, err
	}
	defer tx.Rollback()
	if err := setMeta(ctx, tx, "uidvalidity", v); err != nil {
		return Carried{}, err
	}
	copyRows := func(from, to string) (int, error) {
		rows, err := otx.QueryContext(ctx, from)
		if err != nil {
			return 0, err
		}
		defer rows.Close()
		ins, err := tx.PrepareContext(ctx, to)
		if err != nil {
			return 0, err
		}
		defer ins.Close()
		n := 0
		vals := []any{new(any), new(any), new(any)}
		for rows.Next() {
			if err := rows.Scan(vals...); err != nil {
				return n, err
			}
			res, err := ins.ExecContext(ctx, *vals[0].(*any), *vals[1].(*any), *vals[2].(*any))
			if err != nil {
				return n, err
			}
			if k, _ := res.RowsAffected(); k > 0 {
				n++
			}
		}
		return n, rows.Err()
	}
	if res.Lists, err = copyRows(`SELECT list, validity, next FROM mailboxes`,
		`INSERT INTO mailboxes (list, validity, next, messages) VALUES (?, ?, ?, 0)`); err != nil {
		return Carried{}, fmt.Errorf("cannot carry the mailboxes over: %w", err)
	}
	// The numbers of the messages first; then those the old catalog had
	// carried and not used yet (a message it had not indexed again).
	if res.Numbers, err = copyRows(`SELECT m.cn, n.list, n.num FROM numbers n JOIN messages m ON m.id = n.msg`,
		`INSERT OR IGNORE INTO carried (cn, list, num) VALUES (?, ?, ?)`); err != nil {
		return Carried{}, fmt.Errorf("cannot carry the numbers over: %w", err)
	}
	n, err := copyRows(`SELECT cn, list, num FROM carried`, `INSERT OR IGNORE INTO carried (cn, list, num) VALUES (?, ?, ?)`)
	if err != nil {
		return Carried{}, fmt.Errorf("cannot carry the numbers over: %w", err)
	}
	res.Numbers += n
	if err := tx.Commit(); err != nil {
		return Carried{}, err
	}
	return res, nil
}

// Mailbox is a list as IMAP and NNTP number it.
type Mailbox struct {
	List string
	// Validity is its UIDVALIDITY.
	Validity uint32
	// Next is the number its next message will get (IMAP's UIDNEXT).
	Next uint32
	// Messages is how many messages it has.
	Messages int
	// Low and High are its lowest and highest numbers, 0 when it is empty.
	Low, High uint32
}

const mailboxColumns = `b.list, b.validity, b.next, b.messages,
	coalesce((SELECT min(num) FROM numbers WHERE list = b.list), 0),
	coalesce((SELECT max(num) FROM numbers WHERE list = b.list), 0)`

func scanMailbox(s scanner) (Mailbox, error) {
	var b Mailbox
	err := s.Scan(&b.List, &b.Validity, &b.Next, &b.Messages, &b.Low, &b.High)
	return b, err
}

// Mailboxes returns every list as a mailbox, by name, empty ones
// included (a list whose messages were all removed or moved).
func (c *Catalog) Mailboxes(ctx context.Context) ([]Mailbox, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT `+mailboxColumns+` FROM mailboxes b ORDER BY b.list`)
	if err != nil {
		return nil, c.readErr("the mailboxes", err)
	}
	defer rows.Close()
	out := []Mailbox{}
	for rows.Next() {
		b, err := scanMailbox(rows)
		if err != nil {
			return nil, c.readErr("the mailboxes", err)
		}
		out = append(out, b)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the mailboxes", err)
	}
	return out, nil
}

// Mailbox returns the mailbox of a list, or ErrNotFound.
func (c *Catalog) Mailbox(ctx context.Context, list string) (Mailbox, error) {
	b, err := scanMailbox(c.r.QueryRowContext(ctx, `SELECT `+mailboxColumns+` FROM mailboxes b WHERE b.list = ?`, list))
	if err != nil {
		return Mailbox{}, c.readErr("mailbox "+list, err)
	}
	return b, nil
}

// Numbers returns the numbers of a list's messages from from on, in order.
func (c *Catalog) Numbers(ctx context.Context, list string, from uint32) ([]uint32, error) {
	return c.nums(ctx, "the numbers of "+list, `SELECT num FROM numbers WHERE list = ? AND num >= ? ORDER BY num`, list, from)
}

// Neighbour returns the number of list's message after n (or, with
// before, before n), and false when there is none.
func (c *Catalog) Neighbour(ctx context.Context, list string, n uint32, before bool) (uint32, bool, error) {
	q := `SELECT min(num) FROM numbers WHERE list = ? AND num > ?`
	if before {
		q = `SELECT max(num) FROM numbers WHERE list = ? AND num < ?`
	}
	var num sql.NullInt64
	if err := c.r.QueryRowContext(ctx, q, list, n).Scan(&num); err != nil {
		return 0, false, c.readErr("the numbers of "+list, err)
	}
	return uint32(num.Int64), num.Valid, nil
}

func (c *Catalog) nums(ctx context.Context, what, query string, args ...any) ([]uint32, error) {
	rows, err := c.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	defer rows.Close()
	out := []uint32{}
	for rows.Next() {
		var n uint32
		if err := rows.Scan(&n); err != nil {
			return nil, c.readErr(what, err)
		}
		out = append(out, n)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	return out, nil
}

// Entry is a numbered message: what IMAP's FETCH and NNTP's OVER say of
// it without reading it.
type Entry struct {
	Num        uint32
	CallNumber string
	List       string
	Date       time.Time
	FromName   string
	FromAddr   string
	Subject    string
	MessageID  string
	// References are the Message-IDs it names, parent last, if asked for.
	References []string
	// Size is the stored size; WireSize the size with CRLF line ends,
	// as sent; Lines the lines of its body.
	Size, WireSize int64
	Lines          int
	Archived       time.Time
}

// From returns the sender as "Name <address>", or the address alone.
func (e *Entry) From() string {
	if e.FromName == "" {
		return e.FromAddr
	}
	if e.FromAddr == "" {
		return e.FromName
	}
	return e.FromName + " <" + e.FromAddr + ">"
}

const entryColumns = `n.num, m.cn, m.list, m.date, m.from_name, m.from_addr, m.subject, m.msgid, m.size, w.size, w.lines, m.added`

// refsColumn is the Message-IDs a message names, space-separated, in order.
const refsColumn = `, (SELECT group_concat(msgid, ' ') FROM (SELECT msgid FROM refs WHERE msg = m.id ORDER BY pos))`

func scanEntry(s scanner, refs bool) (Entry, error) {
	var e Entry
	var date, added int64
	var r sql.NullString
	dest := []any{&e.Num, &e.CallNumber, &e.List, &date, &e.FromName, &e.FromAddr, &e.Subject, &e.MessageID, &e.Size, &e.WireSize, &e.Lines, &added}
	if refs {
		dest = append(dest, &r)
	}
	if err := s.Scan(dest...); err != nil {
		return Entry{}, err
	}
	e.Date, e.Archived = unix(date), unix(added)
	if r.String != "" {
		e.References = strings.Fields(r.String)
	}
	return e, nil
}

// Entries returns up to limit messages of a list numbered from..to, in
// order; with refs, their References. Callers read a long range in pieces,
// so that no read transaction stays open while they send what they read.
func (c *Catalog) Entries(ctx context.Context, list string, from, to uint32, limit int, refs bool) ([]Entry, error) {
	what := fmt.Sprintf("messages %d-%d of %s", from, to, list)
	q := `SELECT ` + entryColumns
	if refs {
		q += refsColumn
	}
	q += ` FROM numbers n JOIN messages m ON m.id = n.msg JOIN wire w ON w.msg = n.msg
		WHERE n.list = ? AND n.num BETWEEN ? AND ? ORDER BY n.num LIMIT ?`
	rows, err := c.r.QueryContext(ctx, q, list, from, to, limit)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows, refs)
		if err != nil {
			return nil, c.readErr(what, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	return out, nil
}

// EntriesByMessageID returns the numbered messages with Message-ID id.
func (c *Catalog) EntriesByMessageID(ctx context.Context, id string) ([]Entry, error) {
	what := "message <" + id + ">"
	rows, err := c.r.QueryContext(ctx, `SELECT `+entryColumns+refsColumn+`
		FROM messages m JOIN numbers n ON n.msg = m.id JOIN wire w ON w.msg = m.id
		WHERE m.msgid_key = ? AND m.msgid = ? ORDER BY m.id LIMIT 100`, textKey(id), id)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	defer rows.Close()
	var out []Entry
	for rows.Next() {
		e, err := scanEntry(rows, true)
		if err != nil {
			return nil, c.readErr(what, err)
		}
		out = append(out, e)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	return out, nil
}

// ArchivedSince returns the Message-IDs of the lists' messages archived
// since since (NNTP's NEWNEWS), up to limit, and whether there were more.
func (c *Catalog) ArchivedSince(ctx context.Context, lists []string, since time.Time, limit int) ([]string, bool, error) {
	if len(lists) == 0 {
		return nil, false, nil
	}
	q := `SELECT msgid FROM messages WHERE msgid != '' AND added >= ? AND list IN (` +
		strings.TrimSuffix(strings.Repeat("?,", len(lists)), ",") + `) ORDER BY added, id LIMIT ?`
	args := []any{since.Unix()}
	for _, l := range lists {
		args = append(args, l)
	}
	args = append(args, limit+1)
	rows, err := c.r.QueryContext(ctx, q, args...)
	if err != nil {
		return nil, false, c.readErr("new messages", err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			return nil, false, c.readErr("new messages", err)
		}
		out = append(out, id)
	}
	if err := rows.Err(); err != nil {
		return nil, false, c.readErr("new messages", err)
	}
	if len(out) > limit {
		return out[:limit], true, nil
	}
	return out, false, nil
}

// SearchNumbers returns the numbers of the messages of list that match
// q's words (its list and date filters are not used), in order.
func (c *Catalog) SearchNumbers(ctx context.Context, list string, q *Query) ([]uint32, error) {
	m := q.match()
	if m == "" {
		return nil, fmt.Errorf("%w: no word to look for", ErrQuery)
	}
	// The index's matches drive (CROSS JOIN), as Search's do.
	return c.nums(ctx, "a search of "+list, `SELECT n.num FROM fts CROSS JOIN messages m ON m.label = fts.rowid JOIN numbers n ON n.msg = m.id
		WHERE fts MATCH ? AND n.list = ? ORDER BY n.num`, m, list)
}

// Gone is a number that left its list.
type Gone struct {
	Seq  int64
	List string
	Num  uint32
}

// NumbersState is a token that changes whenever a number is given or
// leaves, and the last gone number's sequence: cheap for pollers.
func (c *Catalog) NumbersState(ctx context.Context) (state string, lastGone int64, err error) {
	var next int64
	err = c.r.QueryRowContext(ctx, `SELECT (SELECT total(next) FROM mailboxes), (SELECT coalesce(max(seq), 0) FROM gone)`).Scan(&next, &lastGone)
	if err != nil {
		return "", 0, c.readErr("the state of the numbers", err)
	}
	return fmt.Sprintf("%d.%d", next, lastGone), lastGone, nil
}

// GoneSince returns up to limit numbers that left their lists after seq after.
func (c *Catalog) GoneSince(ctx context.Context, after int64, limit int) ([]Gone, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT seq, list, num FROM gone WHERE seq > ? ORDER BY seq LIMIT ?`, after, limit)
	if err != nil {
		return nil, c.readErr("the gone numbers", err)
	}
	defer rows.Close()
	var out []Gone
	for rows.Next() {
		var g Gone
		if err := rows.Scan(&g.Seq, &g.List, &g.Num); err != nil {
			return nil, c.readErr("the gone numbers", err)
		}
		out = append(out, g)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the gone numbers", err)
	}
	return out, nil
}
