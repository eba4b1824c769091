// Package piexport writes an archive's lists as public-inbox v2 inboxes
// (public-inbox-v2-format(5)), one inbox per list, and brings them up to
// date when run again.
//
// What public-inbox writes, the export writes (PublicInbox::V2Writable
// and Import): each message is one commit adding the blob m (the stored
// bytes) alone at the root of the tree, its author the sender and the
// message's Date, its committer the list and when the message was
// received; epochs git/0.git, git/1.git, ... of about 1 GB each, borrowed
// by all.git; a removal is a commit that takes m away and writes the
// removed message as d (public-inbox-learn rm), which public-inbox-index
// reads as "unindex this". A message without a Message-ID, or whose
// Message-IDs another message of the inbox has already, gets one made as
// public-inbox makes it, added to its header: public-inbox-index skips a
// blob without a Message-ID, and indexes a second under a taken one not
// at all.
//
// Which messages a list has, and in what order, is the catalog's: its
// list numbers (the IMAP UIDs), which grow as messages come in and are
// never given twice. A list's state (stateFile) holds the numbers
// exported; each commit names its call number and list number in its
// message, so that a run cut short anywhere (after git moved the branch,
// before the state said so) is completed from git itself by the next.
package piexport

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/lockfile"
	"github.com/chibrary/chibrary/store"
)

// DefaultEpochSize is how many bytes of messages an epoch takes before
// the next one starts: public-inbox's (1 GB of packed git divided by its
// packing factor of 0.4, V2Writable.pm).
const DefaultEpochSize = int64(1<<30) * 10 / 4

// DefaultBatch is how many messages one git fast-import writes before the
// state is brought up to date.
const DefaultBatch = 2000

// batchBytes bounds the message bytes of one fast-import.
const batchBytes = 64 << 20

// Sentinel errors.
var (
	// ErrLocked: another export writes into the same directory.
	ErrLocked = errors.New("piexport: another export is writing into this directory")
	// ErrRenumbered: the catalog's numbers of a list are not those the
	// export was made with (the catalog was lost and made anew).
	ErrRenumbered = errors.New("piexport: the catalog numbers this list anew")
	// ErrForeign: an epoch holds commits the export did not write.
	ErrForeign = errors.New("piexport: the inbox holds commits the export did not write")
)

// Options configure Export. The zero value of each field is documented.
type Options struct {
	// Out is the directory of the inboxes, OUT/{list}/ (required).
	Out string
	// Lists, when not empty, are the only lists exported.
	Lists []string
	// EpochSize is the message bytes of an epoch; 0: DefaultEpochSize.
	EpochSize int64
	// Batch is the messages one fast-import writes; 0: DefaultBatch.
	Batch int
	// Git is the git binary; "": "git" on $PATH.
	Git string
	// Logger; nil: none.
	Logger *slog.Logger
	// Now is the clock of removal commits; nil: time.Now.
	Now func() time.Time

	// afterImport, in tests, runs once git fast-import has moved a
	// branch and before the state says so: an error stops the export
	// there, as a kill would.
	afterImport func() error
}

// ListResult is what one run did to one list's inbox.
type ListResult struct {
	List    string
	Dir     string
	Added   int // messages written
	Removed int // removals written
	// Recovered are commits of a run cut short, taken into the state.
	Recovered int
	// Skipped are messages the catalog lists and the store no longer
	// has (removed since), not written.
	Skipped int
	Epochs  int // epochs the inbox has
}

// Export writes or brings up to date OUT/{list}/ for every list of the
// catalog (or Options.Lists), reading the messages from st. The catalog
// must be current (catalog.Sync, or a resolver that follows the store).
func Export(ctx context.Context, st store.Store, cat *catalog.Catalog, opts Options) ([]ListResult, error) {
	if opts.Out == "" {
		return nil, errors.New("piexport: no output directory")
	}
	if opts.EpochSize <= 0 {
		opts.EpochSize = DefaultEpochSize
	}
	if opts.Batch <= 0 {
		opts.Batch = DefaultBatch
	}
	if opts.Git == "" {
		opts.Git = "git"
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Now == nil {
		opts.Now = time.Now
	}
	if err := os.MkdirAll(opts.Out, 0o755); err != nil {
		return nil, fmt.Errorf("cannot make %s: %w", opts.Out, err)
	}
	lock, err := lockfile.Take(filepath.Join(opts.Out, ".chibrary-export.lock"), "an export")
	if he := (*lockfile.HeldError)(nil); errors.As(err, &he) {
		return nil, fmt.Errorf("%w: %v; wait for it to finish", ErrLocked, err)
	}
	if err != nil {
		return nil, err
	}
	defer lock.Release()

	boxes, err := cat.Mailboxes(ctx)
	if err != nil {
		return nil, err
	}
	want := map[string]bool{}
	for _, l := range opts.Lists {
		want[l] = true
	}
	x := &exporter{opts: opts, st: st, cat: cat, log: opts.Logger}
	var out []ListResult
	for _, b := range boxes {
		if len(want) > 0 && !want[b.List] {
			continue
		}
		delete(want, b.List)
		r, err := x.list(ctx, b)
		if err != nil {
			return out, fmt.Errorf("cannot export list %s: %w", b.List, err)
		}
		out = append(out, r)
	}
	for l := range want {
		return out, fmt.Errorf("cannot export list %s: %w: the archive has no such list", l, catalog.ErrNotFound)
	}
	return out, nil
}

type exporter struct {
	opts Options
	st   store.Store
	cat  *catalog.Catalog
	log  *slog.Logger
}

// listRun is the export of one list: its inbox, state, and the batch
// being written.
type listRun struct {
	x     *exporter
	dir   string
	list  string
	ident string // the committer: the list and its address
	db    *bolt.DB
	m     meta
	res   ListResult

	fi      *fastImport
	pending []pendingOp
	pbytes  int64
	// pmids are the Message-IDs the batch takes (true) or frees (false),
	// not yet in the state.
	pmids map[string]bool
	// precs are the records a recovery has read and not yet written.
	precs map[uint32]record
}

type pendingOp struct {
	num    uint32
	rec    record
	remove bool
	size   int64
}

func (x *exporter) list(ctx context.Context, b catalog.Mailbox) (ListResult, error) {
	name := b.List
	if name != filepath.Base(name) || name == "." || name == ".." || name == "" {
		return ListResult{}, fmt.Errorf("not a list name for a directory: %q", name)
	}
	dir := filepath.Join(x.opts.Out, name)
	addr := ""
	if l, err := x.cat.List(ctx, name); err == nil {
		addr = l.Address
	}
	desc := "public inbox for " + addr
	if addr == "" {
		desc = "the " + name + " list"
	}
	if err := x.initInbox(dir, desc); err != nil {
		return ListResult{}, fmt.Errorf("cannot make inbox %s: %w", dir, err)
	}
	db, err := openState(filepath.Join(dir, stateFile))
	if err != nil {
		return ListResult{}, err
	}
	defer db.Close()
	r := &listRun{x: x, dir: dir, list: name, ident: sanitizeIdent(name) + " <" + sanitizeEmail(addr) + ">", db: db, res: ListResult{List: name, Dir: dir}}
	defer func() {
		// A batch stopped by an error: git leaves the branch as it was.
		if r.fi != nil {
			r.fi.abort()
		}
	}()
	if err := db.View(func(tx *bolt.Tx) error { r.m = readMeta(tx); return nil }); err != nil {
		return r.res, err
	}
	if err := r.recover(ctx); err != nil {
		return r.res, err
	}
	switch {
	case r.m.Validity == 0:
		r.m.Validity = b.Validity
	case r.m.Validity != b.Validity:
		return r.res, fmt.Errorf("%w: %s was exported from a catalog of UIDVALIDITY %d, and the catalog now has %d: export into a new directory", ErrRenumbered, dir, r.m.Validity, b.Validity)
	}
	if _, err := os.Stat(filepath.Join(epochDir(dir, r.m.Epoch), "config")); err != nil {
		if err := x.initEpoch(dir, r.m.Epoch); err != nil {
			return r.res, fmt.Errorf("cannot make epoch %d of %s: %w", r.m.Epoch, dir, err)
		}
	}
	if err := r.removals(ctx); err != nil {
		return r.res, err
	}
	if err := r.additions(ctx); err != nil {
		return r.res, err
	}
	if err := r.flush(ctx); err != nil {
		return r.res, err
	}
	// As public-inbox leaves epochs: packed now and then (git gc --auto
	// does nothing until there are many packs).
	if r.res.Added+r.res.Removed > 0 {
		if _, err := x.git(ctx, epochDir(dir, r.m.Epoch), "gc", "--auto", "--quiet"); err != nil {
			x.log.Warn("git gc --auto failed; the inbox is complete all the same", "dir", dir, "err", err)
		}
	}
	r.res.Epochs = r.m.Epoch + 1
	return r.res, nil
}

// removals writes a removal for each exported message that is no longer
// in the list: removed from the archive, or moved to another list. The
// state's numbers and the catalog's are both in order: one walk.
func (r *listRun) removals(ctx context.Context) error {
	nums, err := r.x.cat.Numbers(ctx, r.list, 1)
	if err != nil && !errors.Is(err, catalog.ErrNotFound) {
		return err
	}
	var gone []uint32
	err = r.db.View(func(tx *bolt.Tx) error {
		c := tx.Bucket(numsBucket).Cursor()
		i := 0
		for k, _ := c.First(); k != nil; k, _ = c.Next() {
			n := uint32(k[0])<<24 | uint32(k[1])<<16 | uint32(k[2])<<8 | uint32(k[3])
			for i < len(nums) && nums[i] < n {
				i++
			}
			if i == len(nums) || nums[i] != n {
				gone = append(gone, n)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	for _, n := range gone {
		var rec record
		err := r.db.View(func(tx *bolt.Tx) error {
			var err error
			rec, err = decodeRecord(tx.Bucket(numsBucket).Get(numKey(n)))
			return err
		})
		if err != nil {
			return err
		}
		// The removed message goes in d, as public-inbox-learn rm
		// writes it: from the epoch that holds its blob.
		data, err := r.x.git(ctx, epochDir(r.dir, rec.Epoch), "cat-file", "blob", rec.Blob)
		if err != nil {
			return fmt.Errorf("cannot read the blob of %s to record its removal: %w", rec.CallNumber, err)
		}
		now := r.x.opts.Now()
		ts := gitTime{Unix: max(now.Unix(), 0), Zone: "+0000"}
		msg := "rm\n\n" + trailers(rec.CallNumber, n)
		if err := r.write(ctx, "d", data, r.ident+" "+ts.String(), r.ident+" "+ts.String(), msg, pendingOp{num: n, rec: rec, remove: true}); err != nil {
			return err
		}
		r.res.Removed++
		r.x.log.Info("removal recorded", "list", r.list, "callnumber", rec.CallNumber)
	}
	return nil
}

// additions writes the list's messages numbered after the last one
// exported, in order.
func (r *listRun) additions(ctx context.Context) error {
	const page = 500
	from := r.m.Last + 1
	for from != 0 {
		es, err := r.x.cat.Entries(ctx, r.list, from, math.MaxUint32, page, false)
		if err != nil {
			return err
		}
		if len(es) == 0 {
			return nil
		}
		for _, e := range es {
			if err := r.add(ctx, e); err != nil {
				return err
			}
			from = e.Num + 1
		}
		if len(es) < page {
			return nil
		}
	}
	return nil
}

func (r *listRun) add(ctx context.Context, e catalog.Entry) error {
	n, err := callnumber.Parse(e.CallNumber)
	if err != nil {
		return fmt.Errorf("the catalog names %q: %w", e.CallNumber, err)
	}
	m, err := r.x.st.Get(ctx, n)
	if errors.Is(err, store.ErrRemoved) || errors.Is(err, store.ErrNotFound) {
		// Removed since the catalog listed it: never in the inbox, so
		// nothing to record. Its number is passed over for good.
		r.res.Skipped++
		r.m.Last = max(r.m.Last, e.Num)
		return nil
	}
	if err != nil {
		return err
	}
	raw := m.Raw
	h := parseHeader(raw)
	mid, fresh, err := r.choose(mids(h), e.Num)
	if err != nil {
		return err
	}
	at := authorTime(h, m.Added)
	if fresh {
		mid = newMID(raw, e.CallNumber, at)
		raw = appendMID(raw, mid)
	}
	author := sanitizeIdent(authorName(e.FromName, e.FromAddr)) + " <" + sanitizeEmail(e.FromAddr) + "> " + at.String()
	committer := r.ident + " " + committerTime(h, m.Added).String()
	subject := sanitizeSubject(e.Subject)
	msg := subject + "\n\n" + trailers(e.CallNumber, e.Num)
	rec := record{CallNumber: e.CallNumber, Blob: blobID(raw), MID: mid}
	if err := r.write(ctx, "m", raw, author, committer, msg, pendingOp{num: e.Num, rec: rec, size: int64(len(raw))}); err != nil {
		return err
	}
	r.res.Added++
	return nil
}

// choose picks the Message-ID public-inbox indexes a message under, as
// V2Writable's v2_num_for (and public-inbox-index) pick it: its first if
// free, else the last free one of the others; fresh when all are taken
// (or it has none), and one must be made.
//
// A Message-ID the state gives to num itself is free for it: a recovery
// cut short and run again meets the messages it took in already.
func (r *listRun) choose(ids []string, num uint32) (mid string, fresh bool, err error) {
	taken := func(id string) bool {
		if t, ok := r.pmids[id]; ok {
			return t
		}
		var v []byte
		err := r.db.View(func(tx *bolt.Tx) error {
			if b := tx.Bucket(midsBucket).Get([]byte(id)); b != nil {
				v = append([]byte(nil), b...)
			}
			return nil
		})
		return err != nil || v != nil && string(v) != string(numKey(num))
	}
	if len(ids) == 0 {
		return "", true, nil
	}
	if !taken(ids[0]) {
		return ids[0], false, nil
	}
	for i := len(ids) - 1; i >= 1; i-- {
		if !taken(ids[i]) {
			return ids[i], false, nil
		}
	}
	return "", true, nil
}

// write adds one commit to the batch, starting a new epoch first when the
// newest is full, and writes the batch when it is large enough.
func (r *listRun) write(ctx context.Context, path string, data []byte, author, committer, msg string, op pendingOp) error {
	if !op.remove && r.m.Bytes >= r.x.opts.EpochSize {
		if err := r.flush(ctx); err != nil {
			return err
		}
		r.m.Epoch++
		r.m.Bytes = 0
		if err := r.x.initEpoch(r.dir, r.m.Epoch); err != nil {
			return fmt.Errorf("cannot make epoch %d of %s: %w", r.m.Epoch, r.dir, err)
		}
		if err := r.save(nil); err != nil {
			return err
		}
		r.x.log.Info("new epoch", "list", r.list, "epoch", r.m.Epoch)
	}
	if r.fi == nil {
		fi, err := r.x.startImport(ctx, epochDir(r.dir, r.m.Epoch), r.m.Heads[r.m.Epoch])
		if err != nil {
			return err
		}
		r.fi = fi
		r.pmids = map[string]bool{}
	}
	r.fi.commit(path, data, "", author, committer, msg)
	op.rec.Epoch = r.m.Epoch
	r.pending = append(r.pending, op)
	r.pmids[op.rec.MID] = !op.remove
	if !op.remove {
		r.m.Bytes += op.size
	}
	r.pbytes += int64(len(data))
	if len(r.pending) >= r.x.opts.Batch || r.pbytes >= batchBytes {
		return r.flush(ctx)
	}
	return nil
}

// flush ends the fast-import of the batch, then writes the state: the
// messages of the batch, the highest number and the epoch's new head.
func (r *listRun) flush(ctx context.Context) error {
	if r.fi == nil {
		return r.save(nil)
	}
	fi := r.fi
	r.fi = nil
	if err := fi.finish(); err != nil {
		return err
	}
	h, err := r.x.head(ctx, epochDir(r.dir, r.m.Epoch))
	if err != nil {
		return err
	}
	if r.x.opts.afterImport != nil {
		if err := r.x.opts.afterImport(); err != nil {
			return err
		}
	}
	r.m.Heads[r.m.Epoch] = h
	ops := r.pending
	r.pending, r.pbytes, r.pmids = nil, 0, nil
	return r.save(ops)
}

// saveRecords writes ops alone, not the meta (recover, on its way).
func (r *listRun) saveRecords(ops []pendingOp) error {
	return r.db.Update(func(tx *bolt.Tx) error {
		var m meta
		return applyOps(tx, ops, &m)
	})
}

// save writes ops and the meta in one transaction.
func (r *listRun) save(ops []pendingOp) error {
	return r.db.Update(func(tx *bolt.Tx) error {
		if err := applyOps(tx, ops, &r.m); err != nil {
			return err
		}
		return writeMeta(tx, r.m)
	})
}

func applyOps(tx *bolt.Tx, ops []pendingOp, m *meta) error {
	nums, mids := tx.Bucket(numsBucket), tx.Bucket(midsBucket)
	for _, op := range ops {
		if op.remove {
			if err := nums.Delete(numKey(op.num)); err != nil {
				return err
			}
			if v := mids.Get([]byte(op.rec.MID)); len(v) == 4 && string(v) == string(numKey(op.num)) {
				if err := mids.Delete([]byte(op.rec.MID)); err != nil {
					return err
				}
			}
			continue
		}
		if err := nums.Put(numKey(op.num), op.rec.encode()); err != nil {
			return err
		}
		if err := mids.Put([]byte(op.rec.MID), numKey(op.num)); err != nil {
			return err
		}
		m.Last = max(m.Last, op.num)
	}
	return nil
}

// trailers name a commit's message in its commit message, for a run
// that completes one cut short (recover).
func trailers(cn string, num uint32) string {
	return "Call-Number: " + cn + "\nList-Number: " + strconv.FormatUint(uint64(num), 10)
}

// authorName is the author's name as public-inbox takes it (Address.pm,
// names): the display name, else the address's local part.
func authorName(name, addr string) string {
	if strings.TrimSpace(name) != "" {
		return name
	}
	local, _, _ := strings.Cut(addr, "@")
	return local
}

// sanitizeIdent makes a name git fast-import takes: without '<', '>'
// (as public-inbox strips them) and line breaks or NULs.
func sanitizeIdent(s string) string {
	s = strings.Map(func(r rune) rune {
		switch r {
		case '<', '>':
			return -1
		case '\n', '\r', '\t', 0:
			return ' '
		}
		return r
	}, s)
	return strings.TrimSpace(s)
}

func sanitizeEmail(s string) string { return strings.ReplaceAll(sanitizeIdent(s), " ", "") }

// sanitizeSubject is the first line of a commit message as public-inbox
// writes it: the subject, or "(no subject)".
func sanitizeSubject(s string) string {
	s = strings.Map(func(r rune) rune {
		if r == '\n' || r == '\r' || r == '\t' || r == 0 {
			return ' '
		}
		return r
	}, s)
	if strings.TrimSpace(s) == "" {
		return "(no subject)"
	}
	return s
}
