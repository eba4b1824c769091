package catalog

import (
	"cmp"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"
)

// MaxThreadMessages bounds the messages of one thread that Thread loads:
// the oldest are kept, and Thread.Truncated says so.
const MaxThreadMessages = 5000

// List is a mailing list of the archive.
type List struct {
	Name     string    `json:"name"`
	Messages int       `json:"messages"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// Address is the list's posting address, as its messages' List-Post
	// (or a From the list rewrote) last named it; "" when none did.
	Address string `json:"address,omitempty"`
	// Description is what the list says it is, as its messages' List-Id
	// last said (ListDescription); Subscribe is where to join it, as
	// their List-Subscribe last said (ListSubscribe). "" when none did.
	Description string `json:"description,omitempty"`
	Subscribe   string `json:"subscribe,omitempty"`
}

// Message is what the catalog knows of a message.
type Message struct {
	CallNumber  string     `json:"callnumber"`
	List        string     `json:"list"`
	Date        time.Time  `json:"date"`
	DateSource  DateSource `json:"date_source"`
	FromName    string     `json:"from_name"`
	FromAddr    string     `json:"from_addr"`
	Subject     string     `json:"subject"`
	MessageID   string     `json:"message_id,omitempty"`
	Size        int64      `json:"size"`
	Attachments int        `json:"attachments"`
	Archived    time.Time  `json:"archived"`
	// Arrived is when the list had it (Arrival): what "newest" means.
	Arrived time.Time `json:"arrived"`
	// Via is the list's address when the list rewrote the From (RealSender).
	Via string `json:"via,omitempty"`
	// Joined says how it joined its thread.
	Joined JoinedBy `json:"joined"`

	id     int64
	thread int64
	quotes int64 // messages.id it quotes, joined by subject
}

// ThreadID identifies the message's thread, for grouping messages by it.
func (m *Message) ThreadID() int64 { return m.thread }

// From returns the sender's name, else the address.
func (m *Message) From() string {
	if m.FromName != "" {
		return m.FromName
	}
	return m.FromAddr
}

// ThreadSummary is a thread as a list or month page shows it.
type ThreadSummary struct {
	// Root is the thread's first message: its subject and who started it.
	Root Message `json:"root"`
	// Messages is the number of messages of the thread.
	Messages int `json:"messages"`
	// First is the date of its earliest message; Last when its last
	// message arrived (Arrival), which orders a list's threads.
	First time.Time `json:"first"`
	Last  time.Time `json:"last"`
	// InMonth is, on a month page, how many of them are of that month.
	InMonth int `json:"in_month,omitempty"`
}

// Month is a month of a list that has messages.
type Month struct {
	Year     int        `json:"year"`
	Month    time.Month `json:"month"`
	Messages int        `json:"messages"`
}

// Thread is a whole thread, as a tree.
type Thread struct {
	List     string    `json:"list"`
	Subject  string    `json:"subject"`
	Messages int       `json:"messages"`
	First    time.Time `json:"first"`
	Last     time.Time `json:"last"`
	// Nodes are in reading order: depth first, replies oldest first.
	Nodes []Node `json:"nodes"`
	// Truncated: only the oldest MaxThreadMessages messages are in Nodes.
	Truncated bool `json:"truncated,omitempty"`
}

// Index returns the node index of the message with call number cn, or -1.
func (t *Thread) Index(cn string) int {
	for i, n := range t.Nodes {
		if n.Message != nil && n.Message.CallNumber == cn {
			return i
		}
	}
	return -1
}

// Prev and Next return the message before and after node i, or nil.
func (t *Thread) Prev(i int) *Message {
	for j := i - 1; j >= 0; j-- {
		if t.Nodes[j].Message != nil {
			return t.Nodes[j].Message
		}
	}
	return nil
}

func (t *Thread) Next(i int) *Message {
	for j := i + 1; j < len(t.Nodes); j++ {
		if t.Nodes[j].Message != nil {
			return t.Nodes[j].Message
		}
	}
	return nil
}

const messageColumns = `m.id, m.thread, m.cn, m.list, m.date, m.date_source, m.from_name, m.from_addr, m.subject, m.msgid, m.size, m.attachments, m.added, m.arrived, m.via, m.joined, m.quotes`

type scanner interface{ Scan(...any) error }

func scanMessage(s scanner, extra ...any) (Message, error) {
	return newMessageScan(extra...).scan(s)
}

// messageScan reads rows of messageColumns, then extra columns, into one
// set of destinations made once for all the rows of a statement: a
// thread's rows would otherwise pay a score of allocations each.
type messageScan struct {
	m                    Message
	date, added, arrived int64
	dest                 []any
}

func newMessageScan(extra ...any) *messageScan {
	ms := &messageScan{}
	m := &ms.m
	ms.dest = append([]any{&m.id, &m.thread, &m.CallNumber, &m.List, &ms.date, &m.DateSource, &m.FromName, &m.FromAddr, &m.Subject, &m.MessageID, &m.Size, &m.Attachments, &ms.added,
		&ms.arrived, &m.Via, &m.Joined, &m.quotes}, extra...)
	return ms
}

// scan reads the next row of s; every column is written at each row, so
// nothing of the row before remains.
func (ms *messageScan) scan(s scanner) (Message, error) {
	if err := s.Scan(ms.dest...); err != nil {
		return Message{}, err
	}
	m := ms.m
	m.Date, m.Archived, m.Arrived = unix(ms.date), unix(ms.added), unix(ms.arrived)
	return m, nil
}

func unix(s int64) time.Time { return time.Unix(s, 0).UTC() }

// prepared returns the reading statement of q, prepared once.
func (c *Catalog) prepared(ctx context.Context, q string) (*sql.Stmt, error) {
	if s, ok := c.stmts.Load(q); ok {
		return s.(*sql.Stmt), nil
	}
	c.closeMu.RLock()
	defer c.closeMu.RUnlock()
	if c.closed {
		return nil, errors.New("catalog: closed")
	}
	s, err := c.r.PrepareContext(ctx, q)
	if err != nil {
		return nil, err
	}
	if old, loaded := c.stmts.LoadOrStore(q, s); loaded {
		s.Close()
		return old.(*sql.Stmt), nil
	}
	return s, nil
}

// queryRow is c.r.QueryRowContext through a prepared statement.
func (c *Catalog) queryRow(ctx context.Context, q string, args ...any) *sql.Row {
	s, err := c.prepared(ctx, q)
	if err != nil {
		return c.r.QueryRowContext(ctx, q, args...) // fails as the prepare did
	}
	return s.QueryRowContext(ctx, args...)
}

// preparedReads reads c.r through prepared statements.
type preparedReads struct{ c *Catalog }

func (p preparedReads) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	return p.c.queryRow(ctx, q, args...)
}

// query is c.r.QueryContext through a prepared statement.
func (c *Catalog) query(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	s, err := c.prepared(ctx, q)
	if err != nil {
		return nil, err
	}
	return s.QueryContext(ctx, args...)
}

func (c *Catalog) readErr(what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return fmt.Errorf("%w: %s", ErrNotFound, what)
	}
	return fmt.Errorf("cannot read %s from the catalog: %w", what, markDamaged(err))
}

// Lists returns the archive's lists, by name.
func (c *Catalog) Lists(ctx context.Context) ([]List, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT name, messages, first, last, address, description, subscribe FROM lists ORDER BY name`)
	if err != nil {
		return nil, c.readErr("the lists", err)
	}
	defer rows.Close()
	out := []List{}
	for rows.Next() {
		var l List
		var first, last int64
		if err := rows.Scan(&l.Name, &l.Messages, &first, &last, &l.Address, &l.Description, &l.Subscribe); err != nil {
			return nil, c.readErr("the lists", err)
		}
		l.First, l.Last = unix(first), unix(last)
		out = append(out, l)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the lists", err)
	}
	return out, nil
}

// List returns one list, or ErrNotFound.
func (c *Catalog) List(ctx context.Context, name string) (List, error) {
	var l List
	var first, last int64
	err := c.queryRow(ctx, `SELECT name, messages, first, last, address, description, subscribe FROM lists WHERE name=?`, name).Scan(&l.Name, &l.Messages, &first, &last, &l.Address, &l.Description, &l.Subscribe)
	if err != nil {
		return List{}, c.readErr("list "+name, err)
	}
	l.First, l.Last = unix(first), unix(last)
	return l, nil
}

// Threads returns a page of a list's threads, the most recently active
// first, and how many threads the list has.
func (c *Catalog) Threads(ctx context.Context, list string, offset, limit int) ([]ThreadSummary, int, error) {
	idx, err := c.pageIndex(ctx, list, offset >= directThreads)
	if err != nil {
		return nil, 0, c.readErr("the threads of "+list, err)
	}
	if offset < 0 || offset >= idx.total || limit <= 0 {
		return []ThreadSummary{}, idx.total, nil
	}
	// The page's threads are found on threads_list_last alone, then
	// joined: with the join inside, SQLite would read the root message of
	// every thread skipped. Near the start, by OFFSET; further, from its
	// stretch's key (pageIndex).
	page, args := `SELECT id FROM threads WHERE list=? ORDER BY last DESC, id DESC LIMIT ? OFFSET ?`, []any{list, limit, offset}
	if idx.keyed && offset >= directThreads {
		k := idx.keys[offset/pageStride]
		page = `SELECT id FROM threads WHERE list=? AND (last, id) <= (?, ?) ORDER BY last DESC, id DESC LIMIT ? OFFSET ?`
		args = []any{list, k.last, k.id, limit, offset % pageStride}
	}
	rows, err := c.r.QueryContext(ctx, `SELECT `+messageColumns+`, t.messages, t.first, t.last
		FROM (`+page+`) p
		JOIN threads t ON t.id=p.id JOIN messages m ON m.id=t.root
		ORDER BY t.last DESC, t.id DESC`, args...)
	if err != nil {
		return nil, 0, c.readErr("the threads of "+list, err)
	}
	out, err := scanSummaries(rows, false)
	if err != nil {
		return nil, 0, c.readErr("the threads of "+list, err)
	}
	return out, idx.total, nil
}

// pageStride is the number of threads between two keys of a pageIndex.
const pageStride = 50

// directThreads: a page that starts within a list's first directThreads
// threads is read by OFFSET, which walks threads_list_last's entries
// before it (about 1 ms for 30,000 at a million messages), rather than
// from a page index, whose keys cost a read of every thread of the list
// into Go (28-49 ms for the 64,643 of a list at a million) each time the
// catalog changes, as it does every few seconds on a live archive. The
// list's first 200 pages need no keys; only the count. A page further
// is read by OFFSET too the first time it is asked in a generation, and
// from keys read then from the second on (pageIndex): one deep page
// after a change does not pay for the keys, a reader paging deep does
// once.
var directThreads = 10000

// threadKey is where a thread sorts in a list, newest first.
type threadKey struct{ last, id int64 }

// pageIndex is how many threads a list has, as of generation gen, and,
// when keyed, where each stretch of pageStride threads starts, newest
// first: a page deep in the list is then a range of the index, where
// OFFSET would walk every thread before it.
type pageIndex struct {
	gen   string
	total int
	keyed bool
	keys  []threadKey // keys[i]: of the thread at offset i*pageStride
	// deep counts the pages past directThreads asked of an index not
	// keyed.
	deep int
}

// pageIndex returns list's page index, read anew when the catalog
// changed; for a deep page (past directThreads), keyed from the second
// deep page asked in the same generation on.
func (c *Catalog) pageIndex(ctx context.Context, list string, deep bool) (*pageIndex, error) {
	gen, err := c.Generation(ctx)
	if err != nil {
		return nil, err
	}
	c.pagesMu.Lock()
	defer c.pagesMu.Unlock()
	keyed := false
	if idx := c.pages[list]; idx != nil && idx.gen == gen {
		if idx.keyed || !deep {
			return idx, nil
		}
		if idx.deep++; idx.deep < 2 {
			return idx, nil
		}
		keyed = true
	}
	// One read transaction: the count or keys and their generation agree.
	tx, err := c.r.BeginTx(ctx, &sql.TxOptions{ReadOnly: true})
	if err != nil {
		return nil, err
	}
	defer tx.Rollback()
	idx := &pageIndex{keyed: keyed}
	if idx.gen, err = meta(ctx, tx, "cursor"); err != nil {
		return nil, err
	}
	if !keyed {
		if idx.total, err = c.countThreads(ctx, tx, list); err != nil {
			return nil, err
		}
		if deep {
			idx.deep = 1
		}
		c.keepPageIndex(list, idx)
		return idx, nil
	}
	rows, err := tx.QueryContext(ctx, `SELECT last, id FROM threads WHERE list=? ORDER BY last DESC, id DESC`, list)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	for rows.Next() {
		var k threadKey
		if err := rows.Scan(&k.last, &k.id); err != nil {
			return nil, err
		}
		if idx.total%pageStride == 0 {
			idx.keys = append(idx.keys, k)
		}
		idx.total++
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	c.keepPageIndex(list, idx)
	return idx, nil
}

// keepPageIndex keeps idx as list's page index. The caller holds pagesMu.
func (c *Catalog) keepPageIndex(list string, idx *pageIndex) {
	if c.pages == nil || len(c.pages) > maxPageIndexes {
		c.pages = map[string]*pageIndex{}
	}
	c.pages[list] = idx
}

// maxPageIndexes bounds the lists whose page index is kept.
const maxPageIndexes = 1000

func scanSummaries(rows *sql.Rows, inMonth bool) ([]ThreadSummary, error) {
	defer rows.Close()
	out := []ThreadSummary{}
	for rows.Next() {
		var t ThreadSummary
		var first, last int64
		extra := []any{&t.Messages, &first, &last}
		if inMonth {
			extra = append(extra, &t.InMonth)
		}
		m, err := scanMessage(rows, extra...)
		if err != nil {
			return nil, err
		}
		t.Root, t.First, t.Last = m, unix(first), unix(last)
		out = append(out, t)
	}
	return out, rows.Err()
}

// Months returns the months of a list that have messages, newest first.
func (c *Catalog) Months(ctx context.Context, list string) ([]Month, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT month, messages FROM months WHERE list=? ORDER BY month DESC`, list)
	if err != nil {
		return nil, c.readErr("the months of "+list, err)
	}
	defer rows.Close()
	out := []Month{}
	for rows.Next() {
		var ym, n int
		if err := rows.Scan(&ym, &n); err != nil {
			return nil, c.readErr("the months of "+list, err)
		}
		out = append(out, Month{Year: ym / 100, Month: time.Month(ym % 100), Messages: n})
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the months of "+list, err)
	}
	return out, nil
}

// monthRange returns the Unix seconds of a month's start and the next's.
func monthRange(year int, month time.Month) (int64, int64) {
	start := time.Date(year, month, 1, 0, 0, 0, 0, time.UTC)
	return start.Unix(), start.AddDate(0, 1, 0).Unix()
}

// MonthThreads returns the threads with messages in a month of a list, in
// the order their first message of that month came.
func (c *Catalog) MonthThreads(ctx context.Context, list string, year int, month time.Month) ([]ThreadSummary, error) {
	from, to := monthRange(year, month)
	rows, err := c.r.QueryContext(ctx, `WITH mt AS (
			SELECT thread, count(*) AS n, min(date) AS start FROM messages
			WHERE list=? AND date>=? AND date<? GROUP BY thread)
		SELECT `+messageColumns+`, t.messages, t.first, t.last, mt.n
		FROM mt JOIN threads t ON t.id=mt.thread JOIN messages m ON m.id=t.root
		ORDER BY mt.start, t.id`, list, from, to)
	if err != nil {
		return nil, c.readErr(fmt.Sprintf("the threads of %s in %d-%02d", list, year, month), err)
	}
	out, err := scanSummaries(rows, true)
	if err != nil {
		return nil, c.readErr(fmt.Sprintf("the threads of %s in %d-%02d", list, year, month), err)
	}
	return out, nil
}

// MonthMessages returns the call numbers of a list's month, oldest first.
func (c *Catalog) MonthMessages(ctx context.Context, list string, year int, month time.Month) ([]string, error) {
	from, to := monthRange(year, month)
	return c.callNumbers(ctx, fmt.Sprintf("the messages of %s in %d-%02d", list, year, month),
		`SELECT cn FROM messages WHERE list=? AND date>=? AND date<? ORDER BY date, id`, list, from, to)
}

func (c *Catalog) callNumbers(ctx context.Context, what, query string, args ...any) ([]string, error) {
	rows, err := c.r.QueryContext(ctx, query, args...)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	defer rows.Close()
	out := []string{}
	for rows.Next() {
		var cn string
		if err := rows.Scan(&cn); err != nil {
			return nil, c.readErr(what, err)
		}
		out = append(out, cn)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	return out, nil
}

// Recent returns a list's newest messages by arrival (Arrival), newest
// first: a message with a Date header years ahead does not lead.
func (c *Catalog) Recent(ctx context.Context, list string, limit int) ([]Message, error) {
	rows, err := c.r.QueryContext(ctx, `SELECT `+messageColumns+` FROM messages m WHERE list=? ORDER BY arrived DESC, id DESC LIMIT ?`, list, limit)
	if err != nil {
		return nil, c.readErr("the recent messages of "+list, err)
	}
	defer rows.Close()
	out := []Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, c.readErr("the recent messages of "+list, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr("the recent messages of "+list, err)
	}
	return out, nil
}

// Message returns the message with call number cn, or ErrNotFound.
func (c *Catalog) Message(ctx context.Context, cn string) (Message, error) {
	m, err := scanMessage(c.queryRow(ctx, `SELECT `+messageColumns+` FROM messages m WHERE cn=?`, cn))
	if err != nil {
		return Message{}, c.readErr("message "+cn, err)
	}
	return m, nil
}

// maxCopies bounds the messages Copies returns.
const maxCopies = 50

// Copies returns the messages with Message-ID msgid, by list, at most
// maxCopies: a message sent to several lists is archived through each.
func (c *Catalog) Copies(ctx context.Context, msgid string) ([]Message, error) {
	return c.copies(ctx, msgid, "")
}

// copies reads the messages with Message-ID msgid, in tx if not nil, and
// the condition and (its arguments) if any.
func (c *Catalog) copies(ctx context.Context, msgid, and string, args ...any) ([]Message, error) {
	what := "the messages <" + msgid + ">"
	if msgid == "" {
		return []Message{}, nil
	}
	rows, err := c.query(ctx, `SELECT `+messageColumns+` FROM messages m WHERE msgid_key=? AND msgid=? `+and+` ORDER BY list, id LIMIT ?`, append(append([]any{textKey(msgid), msgid}, args...), maxCopies)...)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	defer rows.Close()
	out := []Message{}
	for rows.Next() {
		m, err := scanMessage(rows)
		if err != nil {
			return nil, c.readErr(what, err)
		}
		out = append(out, m)
	}
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	return out, nil
}

// Thread returns the thread of the message cn, or ErrNotFound.
func (c *Catalog) Thread(ctx context.Context, cn string) (*Thread, error) {
	p, err := c.read(ctx, cn, false)
	if err != nil {
		return nil, err
	}
	return p.Thread, nil
}

// Place is a message's thread and what is around it in its list: what
// its page shows besides the message.
type Place struct {
	Thread *Thread
	// Prev and Next are the messages of its list just before and after
	// it, by date (then by the order the catalog indexed them), or nil.
	Prev, Next *Message
	// ListAddress is the list's posting address (List.Address).
	ListAddress string
	// Copies are the messages with its Message-ID in other lists, by
	// list (as Copies, at most maxCopies).
	Copies []Message
}

// Place returns the place of the message cn, or ErrNotFound: Thread,
// its neighbours, List and Copies together, read in one statement; then,
// only when the archive has removals, one for each Message-ID the thread
// names and does not hold (at most maxRemovedLookups), and one for the
// copies when the message has any.
func (c *Catalog) Place(ctx context.Context, cn string) (*Place, error) {
	return c.read(ctx, cn, true)
}

// read reads the thread of message cn, and its place when place is set.
func (c *Catalog) read(ctx context.Context, cn string, place bool) (*Place, error) {
	what := "the thread of " + cn
	ctx, err := bounded(ctx)
	if err != nil {
		return nil, err
	}
	// One statement, so one snapshot of the catalog while the follower
	// writes, without the cost of a transaction: the thread's messages
	// with their references, the message itself with its thread's
	// header, and for a place its list's previous and next messages.
	q := threadStatement
	if place {
		q = placeStatement
	}
	rows, err := c.query(ctx, q, cn, MaxThreadMessages)
	if err != nil {
		return nil, c.readErr(what, err)
	}
	t := &Thread{}
	p := &Place{Thread: t}
	var self *Message
	var first, last int64
	var removals, copies bool
	type inThread struct {
		m    Message
		refs []string
	}
	var thread []inThread
	var kind int
	var rs string
	var h struct {
		messages, first, last, removals, copies int64
		list, subject, address                  string
	}
	ms := newMessageScan(&kind, orZero[string]{&rs}, orZero[string]{&h.list}, orZero[int64]{&h.messages}, orZero[int64]{&h.first}, orZero[int64]{&h.last},
		orZero[string]{&h.subject}, orZero[int64]{&h.removals}, orZero[string]{&h.address}, orZero[int64]{&h.copies})
	for rows.Next() {
		m, err := ms.scan(rows)
		if err != nil {
			rows.Close()
			return nil, c.readErr(what, err)
		}
		switch kind {
		case rowInThread:
			var refs []string
			if rs != "" {
				refs = strings.Split(rs, refSeparator)
			}
			thread = append(thread, inThread{m, refs})
		case rowSelf:
			self = &m
			first, last = h.first, h.last
			t.List, t.Messages, t.Subject = h.list, int(h.messages), h.subject
			removals, copies = h.removals != 0, h.copies != 0
			p.ListAddress = h.address
		case rowPrev:
			p.Prev = &m
		case rowNext:
			p.Next = &m
		}
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, c.readErr(what, err)
	}
	if self == nil {
		return nil, c.readErr(what, sql.ErrNoRows)
	}
	t.First, t.Last = unix(first), unix(last)
	t.Truncated = t.Messages > MaxThreadMessages
	// SQLite promises no order for the rows of a compound statement:
	// the thread's are put back in date order (as they are, in practice,
	// which the sort finds in one pass).
	slices.SortFunc(thread, func(a, b inThread) int {
		return cmp.Or(a.m.Date.Compare(b.m.Date), cmp.Compare(a.m.id, b.m.id))
	})
	msgs, refs := make([]*Message, len(thread)), make([][]string, len(thread))
	for i := range thread {
		msgs[i], refs[i] = &thread[i].m, thread[i].refs
	}
	// What follows reads after the statement: a removal or a copy made
	// in between shows, as it would on the next reading.
	removed := map[string]*Removed{}
	if removals {
		if removed, err = c.removedIn(ctx, msgs, refs); err != nil {
			return nil, c.readErr(what, err)
		}
	}
	keep := make(map[string]time.Time, len(removed))
	for id, r := range removed {
		keep[id] = r.written
	}
	t.Nodes = buildTree(msgs, refs, keep)
	for i := range t.Nodes {
		n := &t.Nodes[i]
		if n.Message == nil {
			n.Removed = removed[n.MessageID]
		} else if n.MissingParent != "" {
			n.Removed = removed[n.MissingParent]
		}
	}
	if copies {
		if p.Copies, err = c.copies(ctx, self.MessageID, `AND list<>?`, self.List); err != nil {
			return nil, err
		}
	}
	return p, nil
}

// bounded returns ctx without its cancellation, or ctx's error if it has
// ended, for the statements of a message page, whose cost is bounded
// (MaxThreadMessages, maxRemovedLookups, maxCopies, maxVersionRows): under
// a context that can end, the driver and database/sql each start a
// goroutine for every statement run, to interrupt it, and wake it at its
// end, which costs a statement of a millisecond more than interrupting it
// could save (performance.md, a message's page beside its raw bytes).
func bounded(ctx context.Context) (context.Context, error) {
	if err := ctx.Err(); err != nil {
		return nil, err
	}
	return context.WithoutCancel(ctx), nil
}

// The kinds of row of threadStatement and placeStatement.
const (
	rowInThread = iota
	rowSelf
	rowPrev
	rowNext
)

// refSeparator joins a message's references in one column (char(10) in
// the statements): a Message-ID as the catalog keeps it has no control
// characters (mailmsg strips them).
const refSeparator = "\n"

// threadStatement and placeStatement read the thread of the message
// their first argument names, at most their second argument's messages
// of it, as rows of four kinds (a column after Message's): the thread's
// messages with their references in the next column (rowInThread); the
// message itself (rowSelf) with its thread's header in the columns after
// that; and for a place the list's messages before and after it (rowPrev,
// rowNext). The other kinds have NULL in the columns that are not theirs.
var threadStatement, placeStatement = readStatement(false), readStatement(true)

func readStatement(place bool) string {
	const none = `NULL, NULL, NULL, NULL, NULL, NULL, NULL, NULL`
	// The header: the list, the thread's messages, its first and last
	// dates, the root's subject, whether the catalog holds removals, the
	// list's address and whether the message has copies in other lists.
	header := `t.list, t.messages, t.first, t.last, r.subject, EXISTS (SELECT 1 FROM removed), `
	neighbours := ""
	if place {
		header += `coalesce((SELECT address FROM lists WHERE name=m.list), ''),
			m.msgid<>'' AND EXISTS (SELECT 1 FROM messages c WHERE c.msgid_key=m.msgid_key AND c.list<>m.list AND c.msgid=m.msgid)`
		// Row values: with "date<? OR date=? AND id<?" SQLite scans the
		// whole list in the index rather than seek to the date.
		neighbours = fmt.Sprintf(`
		UNION ALL SELECT %[1]s, %[2]d, NULL, %[4]s FROM messages m
			WHERE m.id=(SELECT p.id FROM messages p, me WHERE p.list=me.list AND (p.date, p.id) < (me.date, me.id) ORDER BY p.date DESC, p.id DESC LIMIT 1)
		UNION ALL SELECT %[1]s, %[3]d, NULL, %[4]s FROM messages m
			WHERE m.id=(SELECT n.id FROM messages n, me WHERE n.list=me.list AND (n.date, n.id) > (me.date, me.id) ORDER BY n.date, n.id LIMIT 1)`,
			messageColumns, rowPrev, rowNext, none)
	} else {
		header += `'', 0`
	}
	return fmt.Sprintf(`WITH me AS (SELECT id, thread, list, date FROM messages WHERE cn=?)
		SELECT %[1]s, %[2]d, (SELECT group_concat(msgid, char(10) ORDER BY pos) FROM refs WHERE msg=m.id), %[4]s
			FROM (SELECT * FROM messages WHERE thread=(SELECT thread FROM me) ORDER BY date, id LIMIT ?) m
		UNION ALL SELECT %[1]s, %[3]d, NULL, %[5]s
			FROM me JOIN messages m ON m.id=me.id JOIN threads t ON t.id=m.thread JOIN messages r ON r.id=t.root%[6]s`,
		messageColumns, rowInThread, rowSelf, none, header, neighbours)
}

// orZero scans a NULL as T's zero value.
type orZero[T any] struct{ p *T }

func (n orZero[T]) Scan(v any) error {
	var x sql.Null[T]
	if err := x.Scan(v); err != nil {
		return err
	}
	*n.p = x.V
	return nil
}

// removedIn returns the removals of the messages a thread's messages name
// and the thread does not hold, by Message-ID.
func (c *Catalog) removedIn(ctx context.Context, msgs []*Message, refs [][]string) (map[string]*Removed, error) {
	own := make(map[string]bool, len(msgs))
	for _, m := range msgs {
		own[m.MessageID] = true
	}
	var ids []string
	seen := map[string]bool{}
	for _, r := range refs {
		for _, id := range r {
			if !own[id] && !seen[id] && len(ids) < maxRemovedLookups {
				seen[id] = true
				ids = append(ids, id)
			}
		}
	}
	return removedByMessageID(func(q string, args ...any) *sql.Row { return c.queryRow(ctx, q, args...) }, ids)
}

// maxRemovedLookups bounds the Message-IDs of one thread looked up among
// the removals: a hostile thread may name thousands.
const maxRemovedLookups = 200

// Stats are the catalog's totals.
type Stats struct {
	Messages int    `json:"messages"`
	Threads  int    `json:"threads"`
	Lists    int    `json:"lists"`
	Status   Status `json:"follower"`
}

// Stats returns the catalog's totals, summed from the counts each list
// keeps: counting the rows read every entry of an index of each table
// (at a million messages 19 ms, 149 ms cold, for each monitoring poll).
func (c *Catalog) Stats(ctx context.Context) (Stats, error) {
	var s Stats
	threads := `(SELECT coalesce(sum(threads), 0) FROM list_threads)`
	if !c.threadCounts {
		threads = `(SELECT count(*) FROM threads)` // a catalog made before list_threads, read-only
	}
	err := c.r.QueryRowContext(ctx, `SELECT (SELECT coalesce(sum(messages), 0) FROM lists), `+threads+`, (SELECT count(*) FROM lists)`).
		Scan(&s.Messages, &s.Threads, &s.Lists)
	if err != nil {
		return Stats{}, c.readErr("the totals", err)
	}
	s.Status = c.Status()
	return s, nil
}

// ParseMonth reads "yyyy-mm" as in month URLs.
func ParseMonth(s string) (int, time.Month, bool) {
	y, m, ok := strings.Cut(s, "-")
	if !ok || len(y) != 4 || len(m) != 2 {
		return 0, 0, false
	}
	t, err := time.Parse("2006-01", s)
	if err != nil {
		return 0, 0, false
	}
	return t.Year(), t.Month(), true
}

// Generation returns a token that changes whenever what the catalog holds
// may have changed, for caches: the feed cursor, saved in the transaction
// of every change, so that a reader sees another process's writes too.
// The writer's own catalog answers from memory until its next commit of
// the cursor: every page asks, and a query costs a page of a message as
// much as a tenth of its rendering.
func (c *Catalog) Generation(ctx context.Context) (string, error) {
	seq := c.genSeq.Load()
	if g := c.gen.Load(); c.writable.Load() && g != nil && g.seq == seq {
		return g.v, nil
	}
	// Prepared: every page a cache may answer asks for it.
	v, err := meta(ctx, preparedReads{c}, "cursor")
	if err != nil {
		return "", fmt.Errorf("cannot read the catalog's generation: %w", err)
	}
	// Kept only if no commit began since seq was read: a commit then may
	// have come before or after the read.
	if c.writable.Load() && c.genSeq.Load() == seq {
		c.gen.Store(&generation{seq: seq, v: v})
	}
	return v, nil
}
