package catalog

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
)

// snapshot is everything a reader can see of a catalog, in a form to
// compare: each message's list, date, sender, subject and the shape of
// its thread.
func snapshot(t testing.TB, c *Catalog, cns []string) []string {
	t.Helper()
	var out []string
	for _, cn := range cns {
		m, err := c.Message(t.Context(), cn)
		if err != nil {
			t.Fatalf("Message(%s) = %v", cn, err)
		}
		th := threadOf(t, c, cn)
		var tree strings.Builder
		for _, n := range th.Nodes {
			tree.WriteString(strings.Repeat(" ", n.Depth))
			if n.Message != nil {
				tree.WriteString(n.Message.CallNumber)
			} else {
				tree.WriteString("[" + n.MessageID + "]")
			}
			tree.WriteString(n.MissingParent + ";")
		}
		out = append(out, strings.Join([]string{cn, m.List, m.Date.String(), m.DateSource.String(), m.FromName, m.FromAddr, m.Subject, m.MessageID, tree.String()}, "|"))
	}
	lists, err := c.Lists(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range lists {
		sum, total, err := c.Threads(t.Context(), l.Name, 0, 1000)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, l.Name+" threads:"+strings.Repeat("x", total))
		for _, s := range sum {
			out = append(out, l.Name+" "+s.Root.CallNumber+" "+s.Last.String())
		}
	}
	return out
}

// TestFollowEqualsRebuild: a catalog that followed the store message by
// message and one rebuilt at once show the same threads.
func TestFollowEqualsRebuild(t *testing.T) {
	a := newArchive(t)
	followed := openCatalog(t)
	var cns []string
	for _, f := range []string{"reply-before-parent.mbox", "missing-parent.mbox", "loop.mbox", "shared-message-id.mbox", "pipermail.mbox"} {
		for _, raw := range readMbox(t, fixture(f)) {
			cns = append(cns, a.put(raw, ""))
			mustSync(t, followed, a.st)
		}
	}
	path := filepath.Join(t.TempDir(), "rebuilt.db")
	n, err := Rebuild(t.Context(), path, a.st, SyncOptions{PageSize: 3}, Options{})
	if err != nil || n != len(cns) {
		t.Fatalf("Rebuild = %d, %v; want %d", n, err, len(cns))
	}
	rebuilt, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer rebuilt.Close()
	if got, want := snapshot(t, rebuilt, cns), snapshot(t, followed, cns); !slices.Equal(got, want) {
		t.Errorf("rebuilt catalog differs from the followed one:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(want, "\n"))
	}
}

// TestFollow runs the follower as the resolver does and stores messages
// meanwhile: each is in the catalog within two seconds.
func TestFollow(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Follow(ctx, a.st, FollowOptions{Interval: 100 * time.Millisecond}) }()
	for _, raw := range readMbox(t, fixture("reply-before-parent.mbox")) {
		cn := a.put(raw, "")
		stored := time.Now()
		for {
			if _, err := c.Message(t.Context(), cn); err == nil {
				break
			} else if !errors.Is(err, ErrNotFound) {
				t.Fatal(err)
			}
			if time.Since(stored) > 2*time.Second {
				t.Fatalf("message %s not in the catalog 2 s after it was stored", cn)
			}
			time.Sleep(10 * time.Millisecond)
		}
	}
	if s := c.Status(); !s.Following || s.Err != "" || s.Synced.IsZero() {
		t.Errorf("Status() = %+v, want following, synced, no error", s)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Follow = %v after cancel, want nil", err)
	}
	if c.Status().Following {
		t.Errorf("Status().Following after Follow returned")
	}
}

// TestFollowMerges: a catalog the follower builds from the start has its
// search index in one segment once it has caught up, as a rebuild's.
func TestFollowMerges(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("pipermail.mbox"), "")
	c := openCatalog(t)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	// In pages of 2: a segment of the search index each.
	go func() {
		done <- c.Follow(ctx, a.st, FollowOptions{Interval: 10 * time.Millisecond, SyncOptions: SyncOptions{PageSize: 2}})
	}()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(10 * time.Second)
	for {
		var indexed, segments int
		err := c.r.QueryRowContext(t.Context(), `SELECT (SELECT count(*) FROM messages), (SELECT count(DISTINCT segid) FROM fts_idx)`).Scan(&indexed, &segments)
		if err != nil {
			t.Fatal(err)
		}
		if indexed == len(cns) && segments == 1 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("after 10 s: %d of %d messages indexed, the search index in %d segments; want all, in 1", indexed, len(cns), segments)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// TestOtherStore: a catalog built from one archive refuses another's
// store, and Follow gives up on it rather than mixing them.
func TestOtherStore(t *testing.T) {
	a, b := newArchive(t), newArchive(t)
	a.load(fixture("loop.mbox"), "")
	b.load(fixture("loop.mbox"), "")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	if _, err := c.Sync(t.Context(), b.st, SyncOptions{}); !errors.Is(err, ErrOtherStore) {
		t.Errorf("Sync(another archive's store) = %v, want %v", err, ErrOtherStore)
	}
	if err := c.Follow(t.Context(), b.st, FollowOptions{}); !errors.Is(err, ErrOtherStore) {
		t.Errorf("Follow(another archive's store) = %v, want %v", err, ErrOtherStore)
	}
}

// TestEmptyStore: an archive nothing was written to yet is an empty
// catalog, not an error.
func TestEmptyStore(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	if n := mustSync(t, c, a.st); n != 0 {
		t.Errorf("Sync(empty) = %d", n)
	}
	lists, err := c.Lists(t.Context())
	if err != nil || len(lists) != 0 {
		t.Errorf("Lists() = %v, %v; want none", lists, err)
	}
}

// badCursorStore answers ErrBadCursor for any cursor but the start, as a
// store restored from a backup may.
type badCursorStore struct{ store.Store }

func (s badCursorStore) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	if after != "" {
		return store.ChangePage{}, store.ErrBadCursor
	}
	return s.Store.Changes(ctx, after, max)
}

// TestBadCursor: a cursor the store no longer knows makes the follower
// read the feed again from the start, which adds nothing twice.
func TestBadCursor(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("loop.mbox"), "")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	more := a.load(fixture("shared-message-id.mbox"), "")
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	go c.Follow(ctx, badCursorStore{a.st}, FollowOptions{Interval: 10 * time.Millisecond})
	for {
		if _, err := c.Message(ctx, more[len(more)-1]); err == nil {
			break
		}
		if ctx.Err() != nil {
			t.Fatal("the follower did not recover from a bad cursor")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	s, err := c.Stats(t.Context())
	if err != nil || s.Messages != len(cns)+len(more) {
		t.Errorf("Stats() = %+v, %v; want %d messages", s, err, len(cns)+len(more))
	}
}

func TestLocking(t *testing.T) {
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if !c.Writable() {
		t.Errorf("Writable() = false for the first writer")
	}
	if c2, err := Open(t.Context(), path, Options{}); !errors.Is(err, ErrLocked) {
		if c2 != nil {
			c2.Close()
		}
		t.Errorf("second writable Open = %v, want %v", err, ErrLocked)
	}
	r, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("read-only Open beside the writer = %v", err)
	}
	if r.Writable() {
		t.Errorf("Writable() = true for a read-only catalog")
	}
	a := newArchive(t)
	if _, err := r.Sync(t.Context(), a.st, SyncOptions{}); !errors.Is(err, ErrReadOnly) {
		t.Errorf("Sync on a read-only catalog = %v, want %v", err, ErrReadOnly)
	}
	if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{}, Options{}); !errors.Is(err, ErrLocked) {
		t.Errorf("Rebuild while a writer holds the catalog = %v, want %v", err, ErrLocked)
	}
	r.Close()
	c.Close()
	if _, err := Open(t.Context(), filepath.Join(t.TempDir(), "none.db"), Options{ReadOnly: true}); !errors.Is(err, ErrNoCatalog) {
		t.Errorf("read-only Open of a missing catalog = %v, want %v", err, ErrNoCatalog)
	}
}

// TestSchemaChange: a catalog of another schema version is refused by a
// reader and rebuilt by the writer.
func TestSchemaChange(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("loop.mbox"), "")
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	c.Close()
	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := db.Exec(`UPDATE meta SET value='0' WHERE key='schema'`); err != nil {
		t.Fatal(err)
	}
	db.Close()
	if r, err := Open(t.Context(), path, Options{ReadOnly: true}); !errors.Is(err, ErrSchema) {
		if r != nil {
			r.Close()
		}
		t.Errorf("read-only Open of an old schema = %v, want %v", err, ErrSchema)
	}
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatalf("writable Open of an old schema = %v", err)
	}
	defer c.Close()
	if _, err := c.Message(t.Context(), cns[0]); !errors.Is(err, ErrNotFound) {
		t.Errorf("Message after a schema rebuild = %v, want %v (emptied)", err, ErrNotFound)
	}
	if n := mustSync(t, c, a.st); n != len(cns) {
		t.Errorf("Sync after the rebuild = %d, want %d", n, len(cns))
	}
}

// TestRebuildReplaces: Rebuild replaces a catalog only when the new one is
// complete, and leaves no temporary files.
func TestRebuildReplaces(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("pipermail.mbox"), "")
	dir := t.TempDir()
	path := filepath.Join(dir, "catalog.db")
	if err := os.WriteFile(path, []byte("not a catalog"), 0o644); err != nil {
		t.Fatal(err)
	}
	// In pages of 2: a segment of the search index each.
	n, err := Rebuild(t.Context(), path, a.st, SyncOptions{PageSize: 2}, Options{})
	if err != nil || n != len(cns) {
		t.Fatalf("Rebuild = %d, %v; want %d", n, err, len(cns))
	}
	entries, _ := os.ReadDir(dir)
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	if want := []string{"catalog.db", "catalog.db.lock"}; !slices.Equal(names, want) {
		t.Errorf("files after Rebuild = %v, want %v", names, want)
	}
	c, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if s, err := c.Stats(t.Context()); err != nil || s.Messages != len(cns) {
		t.Errorf("Stats() = %+v, %v; want %d messages", s, err, len(cns))
	}
	// The search index is merged into one segment.
	var segments int
	if err := c.r.QueryRowContext(t.Context(), `SELECT count(DISTINCT segid) FROM fts_idx`).Scan(&segments); err != nil || segments != 1 {
		t.Errorf("the rebuilt search index has %d segments, %v; want 1", segments, err)
	}
	// Built without FTS5's merges as it goes, it merges again as it is
	// followed.
	var automerge int
	if err := c.r.QueryRowContext(t.Context(), `SELECT v FROM fts_config WHERE k = 'automerge'`).Scan(&automerge); err != nil || automerge != ftsAutomerge {
		t.Errorf("the rebuilt search index's automerge = %d, %v; want %d", automerge, err, ftsAutomerge)
	}
	// The pages of the segments merged away are given back: none is free.
	var free, vacuum int
	if err := c.r.QueryRowContext(t.Context(), `PRAGMA freelist_count`).Scan(&free); err != nil || free != 0 {
		t.Errorf("the rebuilt catalog has %d free pages, %v; want 0", free, err)
	}
	if err := c.r.QueryRowContext(t.Context(), `PRAGMA auto_vacuum`).Scan(&vacuum); err != nil || vacuum != 2 {
		t.Errorf("the rebuilt catalog's auto_vacuum = %d, %v; want 2 (incremental)", vacuum, err)
	}
	// A store that fails half way leaves the old catalog in place.
	if _, err := Rebuild(t.Context(), path, failingStore{a.st}, SyncOptions{PageSize: 2}, Options{}); err == nil {
		t.Errorf("Rebuild over a failing store = nil error")
	}
	if s, err := c.Stats(t.Context()); err != nil || s.Messages != len(cns) {
		t.Errorf("after a failed Rebuild: Stats() = %+v, %v; want the old %d messages", s, err, len(cns))
	}
}

// failingStore fails its change feed after the first page.
type failingStore struct{ store.Store }

func (s failingStore) Changes(ctx context.Context, after store.Cursor, max int) (store.ChangePage, error) {
	if after != "" {
		return store.ChangePage{}, errors.New("disk on fire")
	}
	return s.Store.Changes(ctx, after, max)
}

func TestQueries(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("pipermail.mbox"), "linux-mips")
	mustSync(t, c, a.st)
	ctx := t.Context()

	months, err := c.Months(ctx, "linux-mips")
	if err != nil || len(months) != 3 || months[0].Month != time.April || months[2].Month != time.January || months[2].Messages != 5 {
		t.Errorf("Months = %+v, %v; want April (1), February (2), January (5)", months, err)
	}
	jan, err := c.MonthThreads(ctx, "linux-mips", 2001, time.January)
	if err != nil || len(jan) != 3 {
		t.Fatalf("MonthThreads(2001-01) = %d threads, %v; want 3", len(jan), err)
	}
	if jan[0].Root.CallNumber != a.cn("pm1") || jan[0].InMonth != 3 || jan[0].Messages != 3 {
		t.Errorf("first thread of January = %s, %d in month of %d; want pm1, 3 of 3", jan[0].Root.CallNumber, jan[0].InMonth, jan[0].Messages)
	}
	cns, err := c.MonthMessages(ctx, "linux-mips", 2001, time.January)
	if want := []string{a.cn("pm1"), a.cn("pm2"), a.cn("pm5"), a.cn("pm6"), a.cn("pm3")}; err != nil || !slices.Equal(cns, want) {
		t.Errorf("MonthMessages(2001-01) = %v, %v; want %v (by date)", cns, err, want)
	}
	if cns, err := c.MonthMessages(ctx, "linux-mips", 2001, time.March); err != nil || len(cns) != 0 {
		t.Errorf("MonthMessages(2001-03) = %v, %v; want none", cns, err)
	}
	recent, err := c.Recent(ctx, "linux-mips", 2)
	if err != nil || len(recent) != 2 || recent[0].CallNumber != a.cn("pm4") || recent[1].CallNumber != a.cn("pm8") {
		t.Errorf("Recent(2) = %v, %v; want pm4, pm8", recent, err)
	}
	p, err := c.Place(ctx, a.cn("pm2"))
	if err != nil || p.Prev == nil || p.Next == nil || p.Prev.CallNumber != a.cn("pm1") || p.Next.CallNumber != a.cn("pm5") {
		t.Errorf("Place(pm2) neighbours = %+v, %v; want pm1, pm5", p, err)
	}
	if p, err := c.Place(ctx, a.cn("pm1")); err != nil || p.Prev != nil {
		t.Errorf("Place(first).Prev = %+v, %v; want none", p, err)
	}
	page, total, err := c.Threads(ctx, "linux-mips", 1, 2)
	if err != nil || total != 5 || len(page) != 2 {
		t.Errorf("Threads(offset 1, limit 2) = %d of %d, %v; want 2 of 5", len(page), total, err)
	}
	if _, err := c.Thread(ctx, "00000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Thread(unknown) = %v, want %v", err, ErrNotFound)
	}
	if _, err := c.Message(ctx, "00000000"); !errors.Is(err, ErrNotFound) {
		t.Errorf("Message(unknown) = %v, want %v", err, ErrNotFound)
	}
	for _, tt := range []struct {
		in     string
		y      int
		m      time.Month
		wantOK bool
	}{{"2001-01", 2001, 1, true}, {"1999-12", 1999, 12, true}, {"2001-13", 0, 0, false}, {"2001-1", 0, 0, false}, {"01-2001", 0, 0, false}, {"", 0, 0, false}} {
		y, m, ok := ParseMonth(tt.in)
		if y != tt.y || m != tt.m || ok != tt.wantOK {
			t.Errorf("ParseMonth(%q) = %d, %v, %v; want %d, %v, %v", tt.in, y, m, ok, tt.y, tt.m, tt.wantOK)
		}
	}
}

// TestSeenTwice: a page the feed repeats adds nothing twice.
func TestSeenTwice(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("loop.mbox"), "")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	page, err := a.st.Changes(t.Context(), "", 100)
	if err != nil {
		t.Fatal(err)
	}
	c.wmu.Lock()
	docs := parseAll(page.Messages, 2, mailview.Options{}, false)
	n, err := c.apply(t.Context(), docs, nil, nil, page.Next, a.auth.ID)
	c.wmu.Unlock()
	if err != nil || n != 0 {
		t.Errorf("apply(a page seen before) = %d, %v; want 0", n, err)
	}
	if s, _ := c.Stats(t.Context()); s.Messages != 3 || s.Threads != 1 {
		t.Errorf("Stats() = %+v, want 3 messages in 1 thread", s)
	}
}

// TestThreadPages: a list's threads read a page at a time are the same,
// in the same order, as read at once.
func TestThreadPages(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	for _, f := range []string{"pipermail.mbox", "reply-before-parent.mbox", "missing-parent.mbox", "loop.mbox", "dates.mbox"} {
		a.load(fixture(f), "all")
	}
	mustSync(t, c, a.st)
	all, total, err := c.Threads(t.Context(), "all", 0, 1000)
	if err != nil || total != len(all) || total < 10 {
		t.Fatalf("Threads = %d of %d, %v", len(all), total, err)
	}
	var paged []string
	for off := 0; off < total; off += 3 {
		page, n, err := c.Threads(t.Context(), "all", off, 3)
		if err != nil || n != total {
			t.Fatalf("Threads(offset %d) = %d of %d, %v", off, len(page), n, err)
		}
		for _, th := range page {
			paged = append(paged, th.Root.CallNumber)
		}
	}
	var whole []string
	for _, th := range all {
		whole = append(whole, th.Root.CallNumber)
	}
	if !slices.Equal(paged, whole) {
		t.Errorf("threads by pages of 3 = %v, want %v", paged, whole)
	}
}

// TestThreadPagesDeep: a list of more threads than a page index's stride
// reads the same page by page, for pages that cross the index's
// stretches, as at once; and a page read after the list changed shows
// the change (the index is read anew). Pages near the start are read by
// OFFSET, further ones from the index: both, and the page between, with
// directThreads anywhere.
func TestThreadPagesDeep(t *testing.T) {
	for _, direct := range []int{0, 2*pageStride + 3, directThreads} {
		t.Run(fmt.Sprint(direct), func(t *testing.T) {
			old := directThreads
			directThreads = direct
			defer func() { directThreads = old }()
			testThreadPagesDeep(t)
		})
	}
}

func testThreadPagesDeep(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	start := time.Date(2019, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 3*pageStride + 17 {
		// Some share a date: the thread's ID breaks the tie.
		date := start.Add(time.Duration(i/3) * time.Hour)
		a.put(fmt.Appendf(nil, "From: p%d@example.org\nSubject: topic %d\nDate: %s\nMessage-ID: <deep%d@example.org>\n\nbody\n", i, i, date.Format(time.RFC1123Z), i), "deep")
	}
	mustSync(t, c, a.st)
	read := func() []string {
		all, total, err := c.Threads(t.Context(), "deep", 0, 1000)
		if err != nil || total != len(all) {
			t.Fatalf("Threads = %d of %d, %v", len(all), total, err)
		}
		var whole []string
		for _, th := range all {
			whole = append(whole, th.Root.CallNumber)
		}
		for _, size := range []int{pageStride, 7, 1} {
			var paged []string
			for off := 0; off < total; off += size {
				page, n, err := c.Threads(t.Context(), "deep", off, size)
				if err != nil || n != total {
					t.Fatalf("Threads(offset %d, %d) = %d of %d, %v", off, size, len(page), n, err)
				}
				for _, th := range page {
					paged = append(paged, th.Root.CallNumber)
				}
			}
			if !slices.Equal(paged, whole) {
				t.Errorf("threads by pages of %d = %d threads, differing from the %d read at once", size, len(paged), len(whole))
			}
		}
		if page, n, err := c.Threads(t.Context(), "deep", total, 10); err != nil || len(page) != 0 || n != total {
			t.Errorf("Threads(past the end) = %d of %d, %v; want none of %d", len(page), n, err, total)
		}
		return whole
	}
	before := read()
	if len(before) != 3*pageStride+17 {
		t.Fatalf("%d threads, want %d", len(before), 3*pageStride+17)
	}
	newest := a.put([]byte("From: late@example.org\nSubject: a new topic\nDate: Mon, 1 Jul 2024 10:00:00 +0000\nMessage-ID: <late@example.org>\n\nbody\n"), "deep")
	mustSync(t, c, a.st)
	after := read()
	if len(after) != len(before)+1 || after[0] != newest || !slices.Equal(after[1:], before) {
		t.Errorf("after a new thread: %d threads, first %s; want %d, first %s, then those before", len(after), after[0], len(before)+1, newest)
	}
}

// TestGeneration: the generation changes when messages are indexed, not
// otherwise, and a reader sees the writer's.
func TestGeneration(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	ctx := t.Context()
	g0, err := c.Generation(ctx)
	if err != nil {
		t.Fatal(err)
	}
	a.load(fixture("pipermail.mbox"), "x")
	mustSync(t, c, a.st)
	g1, _ := c.Generation(ctx)
	mustSync(t, c, a.st)
	g2, _ := c.Generation(ctx)
	if g1 == g0 || g2 != g1 {
		t.Errorf("generations %q, %q after indexing, %q after nothing new; want a change, then none", g0, g1, g2)
	}
	ro, err := Open(ctx, c.Path(), Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	a.load(fixture("loop.mbox"), "x")
	mustSync(t, c, a.st)
	g3, _ := c.Generation(ctx)
	if g, err := ro.Generation(ctx); err != nil || g != g3 || g3 == g2 {
		t.Errorf("a reader's generation = %q, %v; the writer's %q (before %q)", g, err, g3, g2)
	}
}

// TestGenerationWhileWriting: the writer's catalog answers Generation from
// memory; readers asking while it indexes never keep a generation its
// file no longer holds, whichever way they interleave with the commits.
func TestGenerationWhileWriting(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	ctx := t.Context()
	stored := func() string {
		t.Helper()
		v, err := meta(ctx, c.r, "cursor")
		if err != nil {
			t.Fatal(err)
		}
		return v
	}
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				select {
				case <-stop:
					return
				default:
				}
				if _, err := c.Generation(ctx); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	seen := map[string]bool{}
	for i, f := range []string{"pipermail.mbox", "loop.mbox", "dates.mbox"} {
		a.load(fixture(f), fmt.Sprint("l", i))
		mustSync(t, c, a.st)
		g, err := c.Generation(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if want := stored(); g != want {
			t.Errorf("after indexing %s: Generation = %q, the file holds %q", f, g, want)
		}
		seen[g] = true
	}
	if err := c.resetCursor(ctx); err != nil {
		t.Fatal(err)
	}
	if g, _ := c.Generation(ctx); g != "" || stored() != "" {
		t.Errorf("after the cursor was reset: Generation = %q, the file holds %q", g, stored())
	}
	close(stop)
	wg.Wait()
	if len(seen) != 3 {
		t.Errorf("%d generations for 3 loads", len(seen))
	}
}

// TestImmutable reads a catalog as one on a read-only medium is read.
// (cmd/resolver tests it on a real read-only mount.)
func TestImmutable(t *testing.T) {
	a := newArchive(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.load(fixture("pipermail.mbox"), "x")
	mustSync(t, c, a.st)
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(t.Context(), path, Options{ReadOnly: true, Immutable: true})
	if err != nil {
		t.Fatal(err)
	}
	defer ro.Close()
	if l, err := ro.List(t.Context(), "x"); err != nil || l.Messages != 8 {
		t.Errorf("List of an immutable catalog = %+v, %v; want 8 messages", l, err)
	}
	// A prefix search makes its words table in the temp schema, which
	// a read-only file does not hold.
	q, err := ParseQuery("buil*")
	if err != nil {
		t.Fatal(err)
	}
	if res, err := ro.Search(t.Context(), q, SearchOptions{Limit: 10}); err != nil || res.Total == 0 {
		t.Errorf("Search(buil*) of an immutable catalog = %d, %v; want some", res.Total, err)
	}
}

// TestConcurrentFirstThreads: many first Thread reads at once on a catalog
// just opened, each a read transaction holding one of the pool's
// connections, all end. Each used to prepare its statements on the pool
// and wait for a second connection: with every connection held by a
// transaction doing the same, forever (a resolver's first pages under load).
func TestConcurrentFirstThreads(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("dates.mbox"), "list")
	path := filepath.Join(t.TempDir(), "catalog.db")
	w, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, w, a.st)
	w.Close()
	for round := range 5 {
		c, err := Open(t.Context(), path, Options{ReadOnly: true})
		if err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
		var wg sync.WaitGroup
		errs := make(chan error, 64)
		for i := range 64 {
			wg.Go(func() {
				if _, err := c.Thread(ctx, cns[i%len(cns)]); err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		cancel()
		close(errs)
		for err := range errs {
			t.Fatalf("round %d: Thread = %v (the pool deadlocked?)", round, err)
		}
		if err := c.Close(); err != nil {
			t.Fatal(err)
		}
	}
}

// TestPlace: a message's place, read in one transaction, is what Thread,
// List and Copies say on their own, and its neighbours those of its list
// in (date, id) order, for every message: of
// threads in several shapes, of two lists sharing Message-IDs, with
// dates that tie, before and after a removal.
func TestPlace(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	var cns []string
	for _, f := range []string{"pipermail.mbox", "dates.mbox", "loop.mbox", "missing-parent.mbox", "reply-before-parent.mbox", "shared-message-id.mbox"} {
		cns = append(cns, a.load(fixture(f), "linux-mips")...)
	}
	// The same messages, their bytes changed, in a second list: copies.
	for _, raw := range readMbox(t, fixture("pipermail.mbox"))[:4] {
		cns = append(cns, a.put(append([]byte("X-Copy: other\n"), raw...), "other"))
	}
	// Messages of the same second, the same thread and list.
	for _, id := range []string{"tie1", "tie2", "tie3"} {
		raw := bytes.Replace(threadMail(id, "a tie", id+"word"), []byte(fmt.Sprintf("10:00:%02d", len(id))), []byte("10:00:00"), 1)
		cns = append(cns, a.put(raw, "ties"))
	}
	mustSync(t, c, a.st)
	check := func(when string) {
		t.Helper()
		for _, cn := range cns {
			p, err := c.Place(t.Context(), cn)
			if errors.Is(err, ErrNotFound) {
				continue // removed
			}
			if err != nil {
				t.Fatalf("%s: Place(%s) = %v", when, cn, err)
			}
			th, err := c.Thread(t.Context(), cn)
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(p.Thread, th) {
				t.Errorf("%s: Place(%s).Thread = %s, Thread = %s", when, cn, shape(t, p.Thread), shape(t, th))
			}
			m, err := c.Message(t.Context(), cn)
			if err != nil {
				t.Fatal(err)
			}
			order := listOrder(t, c, m.List)
			i := slices.Index(order, cn)
			prev, next := "", ""
			if i > 0 {
				prev = order[i-1]
			}
			if i+1 < len(order) {
				next = order[i+1]
			}
			if cnOf(p.Prev) != prev || cnOf(p.Next) != next {
				t.Errorf("%s: Place(%s) neighbours = %s, %s; want %s, %s", when, cn, cnOf(p.Prev), cnOf(p.Next), prev, next)
			}
			if p.Prev != nil && !reflect.DeepEqual(*p.Prev, mustMessage(t, c, prev)) {
				t.Errorf("%s: Place(%s).Prev = %+v, not the message %s", when, cn, p.Prev, prev)
			}
			l, err := c.List(t.Context(), m.List)
			if err != nil || p.ListAddress != l.Address {
				t.Errorf("%s: Place(%s).ListAddress = %q; List = %+v, %v", when, cn, p.ListAddress, l, err)
			}
			all, err := c.Copies(t.Context(), m.MessageID)
			if err != nil {
				t.Fatal(err)
			}
			var copies []Message
			for _, x := range all {
				if x.List != m.List {
					copies = append(copies, x)
				}
			}
			if len(p.Copies) != len(copies) || len(copies) > 0 && !reflect.DeepEqual(p.Copies, copies) {
				t.Errorf("%s: Place(%s).Copies = %v; want %v", when, cn, p.Copies, copies)
			}
		}
	}
	check("before")
	// Some message has copies, some message a neighbour on either side.
	copied := 0
	for _, cn := range cns {
		if p, _ := c.Place(t.Context(), cn); p != nil && len(p.Copies) > 0 {
			copied++
		}
	}
	if copied != 8 {
		t.Errorf("%d messages have copies in another list; want 8", copied)
	}
	n, err := callnumber.Parse(cns[1])
	if err != nil {
		t.Fatal(err)
	}
	if _, err := a.st.Remove(t.Context(), n, "a test"); err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	check("after a removal")
}

// listOrder returns the call numbers of a list's messages by date, then
// by the order the catalog indexed them.
func listOrder(t testing.TB, c *Catalog, list string) []string {
	t.Helper()
	rows, err := c.r.QueryContext(t.Context(), `SELECT cn FROM messages WHERE list=? ORDER BY date, id`, list)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var cn string
		if err := rows.Scan(&cn); err != nil {
			t.Fatal(err)
		}
		out = append(out, cn)
	}
	return out
}

// cnOf is m's call number, "" for none.
func cnOf(m *Message) string {
	if m == nil {
		return ""
	}
	return m.CallNumber
}

func mustMessage(t testing.TB, c *Catalog, cn string) Message {
	t.Helper()
	m, err := c.Message(t.Context(), cn)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// TestClosedCatalog: a catalog's methods fail once it is closed, as its
// pools' do, rather than panic; a second Close does nothing.
func TestClosedCatalog(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("pipermail.mbox"), "x")
	c := openCatalog(t)
	ctx := t.Context()
	mustSync(t, c, a.st)
	cn := ""
	for _, ids := range a.byID {
		cn = ids[0]
		break
	}
	if _, err := c.Place(ctx, cn); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("a second Close = %v", err)
	}
	if _, err := c.Place(ctx, cn); err == nil {
		t.Error("Place on a closed catalog succeeded")
	}
	if _, err := c.Generation(ctx); err == nil {
		t.Error("Generation on a closed catalog succeeded")
	}
	if _, err := c.Lists(ctx); err == nil {
		t.Error("Lists on a closed catalog succeeded")
	}
	if _, err := c.Sync(ctx, a.st, SyncOptions{}); err == nil {
		t.Error("Sync on a closed catalog succeeded")
	}
}

// TestLabelListIndexAdded: a catalog of this schema made before
// messages_label_list gets it when the writer opens it; a rebuild makes
// it with the other late indexes.
func TestLabelListIndexAdded(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("pipermail.mbox"), "x")
	path := filepath.Join(t.TempDir(), "catalog.db")
	has := func(c *Catalog) bool {
		t.Helper()
		var n int
		if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM sqlite_schema WHERE type = 'index' AND name = 'messages_label_list'`).Scan(&n); err != nil {
			t.Fatal(err)
		}
		return n == 1
	}
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	if !has(c) {
		t.Fatal("a new catalog has no messages_label_list")
	}
	if _, err := c.w.ExecContext(t.Context(), `DROP INDEX messages_label_list`); err != nil {
		t.Fatal(err)
	}
	c.Close()
	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	q, err := ParseQuery("kernel list:x")
	if err != nil {
		t.Fatal(err)
	}
	// Read without it, as a reader of an older catalog does.
	if res, err := ro.Search(t.Context(), q, SearchOptions{Limit: 10}); err != nil || res.Total == 0 {
		t.Errorf("Search without messages_label_list = %d, %v; want some", res.Total, err)
	}
	ro.Close()
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	if !has(c) {
		t.Error("the writer did not add messages_label_list to a catalog without it")
	}
	nc, _, err := c.RebuildFrom(t.Context(), a.st, SyncOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if !has(nc) {
		t.Error("a rebuilt catalog has no messages_label_list")
	}
}

// TestPageIndexKeys: the first page of a list and the first deep page
// asked in a generation read no keys (a count, then OFFSET); the second
// deep page reads them, and a change of the catalog lets them go.
func TestPageIndexKeys(t *testing.T) {
	old := directThreads
	directThreads = pageStride
	defer func() { directThreads = old }()
	a := newArchive(t)
	c := openCatalog(t)
	for i := range 3 * pageStride {
		a.put(fmt.Appendf(nil, "From: p%d@example.org\nSubject: topic %d\nDate: Mon, 1 Jan 2024 10:%02d:%02d +0000\nMessage-ID: <k%d@example.org>\n\nbody\n", i, i, i/60, i%60, i), "l")
	}
	mustSync(t, c, a.st)
	keyed := func() bool {
		c.pagesMu.Lock()
		defer c.pagesMu.Unlock()
		return c.pages["l"] != nil && c.pages["l"].keyed
	}
	for i, step := range []struct {
		offset int
		keyed  bool
	}{{0, false}, {0, false}, {2 * pageStride, false}, {pageStride, true}, {0, true}} {
		page, total, err := c.Threads(t.Context(), "l", step.offset, 10)
		if err != nil || total != 3*pageStride || len(page) != 10 {
			t.Fatalf("step %d: Threads(%d) = %d of %d, %v", i, step.offset, len(page), total, err)
		}
		if keyed() != step.keyed {
			t.Errorf("step %d: Threads(%d): the index keyed %v, want %v", i, step.offset, keyed(), step.keyed)
		}
	}
	a.put([]byte("From: late@example.org\nSubject: new\nDate: Tue, 2 Jan 2024 10:00:00 +0000\nMessage-ID: <late@example.org>\n\nbody\n"), "l")
	mustSync(t, c, a.st)
	if _, total, err := c.Threads(t.Context(), "l", 2*pageStride, 10); err != nil || total != 3*pageStride+1 || keyed() {
		t.Errorf("after a change: a deep page = total %d, %v, keyed %v; want %d, not keyed", total, err, keyed(), 3*pageStride+1)
	}
}
