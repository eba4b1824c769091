package catalog

// The search index's rowids: labels.
//
// FTS5 keeps, for each word, the rowids of the rows that have it, each as
// its difference from the one before (a varint), and walks them in rowid
// order. So the rowids are chosen
//
//   - in date order, then in the order the catalog indexed messages of the
//     same date (messages.date, messages.id): "newest first" is the
//     index's own order, a page costs the same however many rows match,
//     and a date range is a rowid range;
//   - close together: a word's differences then take a byte or two each.
//     A rowid of the date in its high bits (as before schema 7) made every
//     difference at least the seconds between the two messages times
//     2^30, several bytes each, a large share of the index
//     (docs/performance.md measures it).
//
// A message's label is messages.label. A rebuild gives the messages labels
// labelGap apart in date order (placeText). A message indexed later (the
// store followed) takes a free label between those of the messages just
// before and after it by date: appended to the end as live mail is, or in
// a gap (label). When its neighbours leave no gap (many messages older
// than the newest arriving in an order a gap cannot absorb: a Maildir
// imported in random order, say), it gets a late label, lateBase | date <<
// lateIDBits | id, still in date order among the late ones, as large as
// rowids were before; a search reads both runs of labels and merges them
// (Search), and `resolver reindex` makes them dense again.

import (
	"bufio"
	"context"
	"database/sql"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"

	"github.com/klauspost/compress/s2"
)

const (
	// labelGap is the distance between the labels of neighbours a rebuild
	// or an append gives: room for late mail between them.
	labelGap = 16
	// labelBase is the first label, with room before it for messages
	// older than every one indexed.
	labelBase = 1 << 40
	// labelLead is how far before the oldest message's label one older
	// than all goes: room for an older archive imported after a newer
	// one (up to labelLead/labelGap messages in date order), and for 2^16
	// messages imported newest first.
	labelLead = 1 << 24
	// lateBase is the first late label: late labels have bit 62 set.
	lateBase = 1 << 62
	// lateIDBits of a late label are its message's id (the low bits).
	lateIDBits = 28
	lateIDMask = 1<<lateIDBits - 1
	// lateDateMax is the last date, in Unix seconds, a late label holds;
	// later ones are held as that.
	lateDateMax = 1<<(62-lateIDBits) - 1
)

// lateBaseSQL is lateBase as SQL text: the partial index messages_date
// is used only by queries that say its condition as it is written
// (TestLateBaseSQL checks the two agree).
const lateBaseSQL = "4611686018427387904"

// lateLabel returns the late label of a message of that date and id.
func lateLabel(date, id int64) int64 {
	return lateBase | min(max(date, 0), lateDateMax)<<lateIDBits | id&lateIDMask
}

// ErrTooMany: a catalog holds at most 2^28 messages with late labels
// (their ids must fit the label).
var ErrTooMany = errors.New("catalog: too many messages for the search index's late labels: rebuild the catalog (resolver reindex)")

// labelSQL are the statements that find a new message's neighbours among
// the labelled messages (not the late ones): the last of its date or
// before, the first after.
const (
	labelBeforeSQL = `SELECT label, date FROM messages WHERE date <= ? AND label < ` + lateBaseSQL + ` ORDER BY date DESC, id DESC LIMIT 1`
	labelAfterSQL  = `SELECT label FROM messages WHERE date > ? AND label < ` + lateBaseSQL + ` ORDER BY date, id LIMIT 1`
)

// label returns the label a new message of that date takes, or false if
// its neighbours leave no room (it then takes a late label).
func (ix *indexer) label(date int64) (int64, bool, error) {
	var pred, predDate, succ int64
	hasPred, hasSucc := true, true
	if err := ix.labelBefore.QueryRowContext(ix.ctx, date).Scan(&pred, &predDate); errors.Is(err, sql.ErrNoRows) {
		hasPred = false
	} else if err != nil {
		return 0, false, err
	}
	if err := ix.labelAfter.QueryRowContext(ix.ctx, date).Scan(&succ); errors.Is(err, sql.ErrNoRows) {
		hasSucc = false
	} else if err != nil {
		return 0, false, err
	}
	l, ok := between(hasPred, hasSucc, pred, predDate, succ, date)
	return l, ok, nil
}

// between chooses the label of a message of that date between pred (the
// label of the last message of its date or before, of date predDate) and
// succ (of the first after), either missing.
func between(hasPred, hasSucc bool, pred, predDate, succ, date int64) (int64, bool) {
	switch {
	case !hasPred && !hasSucc:
		return labelBase, true
	case !hasSucc:
		return pred + labelGap, pred < lateBase-2*labelGap
	case !hasPred:
		if succ > labelLead {
			return succ - labelLead, true
		}
		return succ / 2, succ >= 2
	}
	gap := succ - pred
	switch {
	case gap < 2:
		return 0, false
	case predDate == date:
		// Messages of one date follow each other in the order indexed:
		// each next one right after the last.
		return pred + 1, true
	case gap > 2*labelGap:
		// In a long run of late mail (an older archive imported after a
		// newer one), each after the one before.
		return pred + labelGap, true
	}
	return pred + gap/2, true
}

// textSpool holds, while a rebuild indexes the store, the text each
// message gives the search index, until every message is in and the
// labels can follow the dates (placeText): the store's order need not be
// the dates'. It is a file beside the new catalog, S2-compressed.
type textSpool struct {
	f       *os.File
	w       *bufio.Writer
	size    int64
	at      []spoolEntry // by messages.id
	buf     []byte
	spooled int64
}

// standIn returns the label of the next message spooled until placeText
// gives it its own: negative, and as long as a label.
func (s *textSpool) standIn() int64 {
	s.spooled++
	return -(labelBase + s.spooled)
}

type spoolEntry struct {
	off int64
	n   int32
}

func newTextSpool(path string) (*textSpool, error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o600)
	if err != nil {
		return nil, fmt.Errorf("cannot create the rebuild's spool of text: %w", err)
	}
	return &textSpool{f: f, w: bufio.NewWriterSize(f, 1<<20)}, nil
}

// ftsColumns are what a message gives the fts table, in ftsInsertSQL's
// order, then the fts_addr table, in ftsAddrInsertSQL's.
func ftsColumns(d *doc) [ftsCols]string {
	return [ftsCols]string{d.subject, strings.TrimSpace(d.fromName + " " + d.fromAddr + " " + d.via), d.body, d.quoted, d.files,
		d.dfa, d.dfb, d.dfctx, d.dfhh, d.names, d.dfpre, d.dfpost, d.patchID,
		d.to, d.cc, d.listID}
}

// ftsCols is how many columns ftsColumns has, ftsMainCols of them fts's.
const (
	ftsCols     = 16
	ftsMainCols = 13
)

// insertText adds a message's text to the search index under its label,
// and pairs, the pairs of common words of its fts columns (pairsText).
func insertText(ctx context.Context, main, addr *sql.Stmt, label int64, cols [ftsCols]string, pairs string) error {
	args := make([]any, 0, ftsMainCols+2)
	args = append(args, label)
	for _, c := range cols[:ftsMainCols] {
		args = append(args, c)
	}
	args = append(args, pairs)
	if _, err := main.ExecContext(ctx, args...); err != nil {
		return err
	}
	_, err := addr.ExecContext(ctx, label, cols[ftsMainCols], cols[ftsMainCols+1], cols[ftsMainCols+2])
	return err
}

// spoolBlock is what the spool keeps of d: its ftsColumns, each its
// length (a uvarint) then its bytes, S2-compressed. The workers that
// parse the messages make it (parseAll), not the writer.
func spoolBlock(d *doc) []byte {
	var n int
	cols := ftsColumns(d)
	for _, col := range cols {
		n += binary.MaxVarintLen64 + len(col)
	}
	b := make([]byte, 0, n)
	for _, col := range cols {
		b = binary.AppendUvarint(b, uint64(len(col)))
		b = append(b, col...)
	}
	return s2.Encode(nil, b)
}

// put spools the search text of message id, d's spoolBlock.
func (s *textSpool) put(id int64, d *doc) error {
	if id <= 0 || id > 1<<40 {
		return fmt.Errorf("cannot spool the text of message %d: no such id", id)
	}
	block := d.spooled
	if block == nil {
		block = spoolBlock(d)
	}
	if int64(len(block)) > 1<<31-1 {
		return fmt.Errorf("cannot spool the text of message %d: %d bytes", id, len(block))
	}
	for int64(len(s.at)) <= id {
		s.at = append(s.at, spoolEntry{off: -1})
	}
	s.at[id] = spoolEntry{off: s.size, n: int32(len(block))}
	if _, err := s.w.Write(block); err != nil {
		return fmt.Errorf("cannot spool the text of message %d: %w", id, err)
	}
	s.size += int64(len(block))
	return nil
}

// get returns the columns spooled for message id.
func (s *textSpool) get(id int64) ([ftsCols]string, error) {
	var cols [ftsCols]string
	if id <= 0 || id >= int64(len(s.at)) || s.at[id].off < 0 {
		return cols, fmt.Errorf("the text of message %d was not spooled", id)
	}
	e := s.at[id]
	block := make([]byte, e.n)
	if _, err := s.f.ReadAt(block, e.off); err != nil {
		return cols, fmt.Errorf("cannot read the spooled text of message %d: %w", id, err)
	}
	b, err := s2.Decode(s.buf[:0], block)
	if err != nil {
		return cols, fmt.Errorf("cannot read the spooled text of message %d: %w", id, err)
	}
	s.buf = b
	for i := range cols {
		n, k := binary.Uvarint(b)
		if k <= 0 || n > uint64(len(b)-k) {
			return cols, fmt.Errorf("cannot read the spooled text of message %d: %w", id, io.ErrUnexpectedEOF)
		}
		cols[i], b = string(b[k:k+int(n)]), b[k+int(n):]
	}
	return cols, nil
}

func (s *textSpool) close() error {
	return s.f.Close()
}

// placeBatch is how many messages placeText gives the search index per
// transaction. A rebuild writes without a journal (bulk): a commit costs
// FTS5 a segment, and no memory waits on it.
const placeBatch = 20000

// placeQueue is how many messages' text placeText reads ahead.
const placeQueue = 64

// spooledText is a message's text read back from the spool, with its
// pairs of common words.
type spooledText struct {
	cols  [ftsCols]string
	pairs string
	err   error
}

// placeText gives every message a rebuild indexed its label, in date
// order, and its text in the search index, from the spool. Called with
// wmu held, after the rebuild's Sync. The text is read back and its
// pairs of common words found on another goroutine, a few messages
// ahead, while this one writes: the writer is the rebuild's bottleneck.
func (c *Catalog) placeText(ctx context.Context, s *textSpool) error {
	if err := s.w.Flush(); err != nil {
		return fmt.Errorf("cannot spool the search index's text: %w", err)
	}
	var ids []int64
	rows, err := c.w.QueryContext(ctx, placeOrderSQL)
	if err != nil {
		return fmt.Errorf("cannot order the messages by date: %w", err)
	}
	for rows.Next() {
		var id int64
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return fmt.Errorf("cannot order the messages by date: %w", err)
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return fmt.Errorf("cannot order the messages by date: %w", err)
	}

	var wg sync.WaitGroup
	defer wg.Wait() // runs last: after cancel, the reader stops at its next send
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	texts := make(chan spooledText, placeQueue)
	wg.Go(func() {
		defer close(texts)
		for _, id := range ids {
			cols, err := s.get(id)
			t := spooledText{cols: cols, err: err}
			if err == nil {
				t.pairs = pairsText(cols[:ftsMainCols])
			}
			select {
			case texts <- t:
			case <-ctx.Done():
				return
			}
			if err != nil {
				return
			}
		}
	})

	// A rebuild spools every message: the labels start afresh, labelGap
	// apart in placeOrderSQL's order.
	for at := 0; at < len(ids); at += placeBatch {
		if err := ctx.Err(); err != nil {
			return err
		}
		if err := c.placeBatch(ctx, texts, ids[at:min(len(ids), at+placeBatch)], labelBase+int64(at)*labelGap); err != nil {
			return err
		}
	}
	if _, err := c.w.ExecContext(ctx, setLabelsSQL, labelBase, labelGap); err != nil {
		return fmt.Errorf("cannot label the messages: %w", err)
	}
	return nil
}

// placeOrderSQL is the order of a rebuild's labels, and setLabelsSQL
// gives them (?1 + ?2 * the place in that order), both of the messages
// whose text waits in the spool.
const (
	placeOrderSQL = `SELECT id FROM messages WHERE label < 0 ORDER BY date, id`
	setLabelsSQL  = `UPDATE messages SET label = ?1 + ?2 * o.n
		FROM (SELECT id, row_number() OVER (ORDER BY date, id) - 1 AS n FROM messages WHERE label < 0) AS o
		WHERE messages.id = o.id`
)

// placeBatch gives the search index the texts of ids, which texts sends
// in that order, under labels from next, labelGap apart.
func (c *Catalog) placeBatch(ctx context.Context, texts <-chan spooledText, ids []int64, next int64) error {
	tx, err := c.w.BeginTx(ctx, nil)
	if err != nil {
		return fmt.Errorf("cannot fill the search index: %w", err)
	}
	defer tx.Rollback()
	insert, err := tx.PrepareContext(ctx, ftsInsertSQL)
	if err != nil {
		return fmt.Errorf("cannot fill the search index: %w", err)
	}
	insertAddr, err := tx.PrepareContext(ctx, ftsAddrInsertSQL)
	if err != nil {
		return fmt.Errorf("cannot fill the search index: %w", err)
	}
	// The statements run under a context that cannot end: with one that
	// can, the driver starts a goroutine per statement to watch it.
	// Cancellation is checked between messages.
	wctx := context.WithoutCancel(ctx)
	for i, id := range ids {
		var t spooledText
		select {
		case t = <-texts:
		case <-ctx.Done():
			return ctx.Err()
		}
		if t.err != nil {
			return t.err
		}
		if err := insertText(wctx, insert, insertAddr, next+int64(i)*labelGap, t.cols, t.pairs); err != nil {
			return fmt.Errorf("cannot index the text of message %d: %w", id, err)
		}
	}
	if err := tx.Commit(); err != nil {
		return fmt.Errorf("cannot fill the search index: %w", err)
	}
	return nil
}

// ftsInsertSQL adds a message's text to the search index under its label.
const (
	ftsInsertSQL = `INSERT INTO fts (rowid, subject, sender, body, quoted, files, dfa, dfb, dfctx, dfhh, names, dfpre, dfpost, patchid, pairs)
		VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`
	ftsAddrInsertSQL = `INSERT INTO fts_addr (rowid, to_addr, cc_addr, list_id) VALUES (?, ?, ?, ?)`
)
