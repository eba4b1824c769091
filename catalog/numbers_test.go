package catalog

import (
	"os"
	"path/filepath"
	"slices"
	"testing"

	"github.com/chibrary/chibrary/mailwire"
)

// numbersOf returns the call numbers of a list's messages by number.
func numbersOf(t testing.TB, c *Catalog, list string) map[uint32]string {
	t.Helper()
	es, err := c.Entries(t.Context(), list, 1, 1<<32-1, 1<<20, false)
	if err != nil {
		t.Fatalf("Entries(%s) = %v", list, err)
	}
	out := map[uint32]string{}
	for _, e := range es {
		out[e.Num] = e.CallNumber
	}
	return out
}

func mailbox(t testing.TB, c *Catalog, list string) Mailbox {
	t.Helper()
	b, err := c.Mailbox(t.Context(), list)
	if err != nil {
		t.Fatalf("Mailbox(%s) = %v", list, err)
	}
	return b
}

// execSQL runs q on c's writer, as the lowest-level hook: lists.messages
// is then not checked when the test ends (checkKeptCounts), as q
// writes messages' rows without it.
func execSQL(t testing.TB, c *Catalog, q string, args ...any) {
	t.Helper()
	rawWritten.Store(c, true)
	if _, err := c.w.ExecContext(t.Context(), q, args...); err != nil {
		t.Fatalf("%s: %v", q, err)
	}
}

func TestNumbersGiven(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("dates.mbox"), "a")
	other := a.load(fixture("loop.mbox"), "b")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	got := numbersOf(t, c, "a")
	for i, cn := range cns {
		if got[uint32(i+1)] != cn {
			t.Errorf("number %d of a is %q, want %q (the order the feed gave)", i+1, got[uint32(i+1)], cn)
		}
	}
	b := mailbox(t, c, "a")
	if b.Validity == 0 || b.Next != uint32(len(cns)+1) || b.Messages != len(cns) || b.Low != 1 || b.High != uint32(len(cns)) {
		t.Errorf("Mailbox(a) = %+v, want a validity, next %d, %d messages, 1-%d", b, len(cns)+1, len(cns), len(cns))
	}
	if bb := mailbox(t, c, "b"); bb.Validity != b.Validity || bb.Messages != len(other) || bb.Low != 1 {
		t.Errorf("Mailbox(b) = %+v, want validity %d, %d messages from 1", bb, b.Validity, len(other))
	}
	nums, err := c.Numbers(t.Context(), "a", 1)
	if err != nil || len(nums) != len(cns) || nums[0] != 1 || nums[len(nums)-1] != uint32(len(cns)) {
		t.Errorf("Numbers(a) = %v, %v", nums, err)
	}
	// What an entry says of a message is what the store holds.
	es, err := c.Entries(t.Context(), "a", 2, 3, 10, true)
	if err != nil || len(es) != 2 {
		t.Fatalf("Entries(a, 2, 3) = %d entries, %v", len(es), err)
	}
	for _, e := range es {
		n, _, err := a.auth.Codec.Parse(e.CallNumber)
		if err != nil {
			t.Fatal(err)
		}
		m, err := a.st.Get(t.Context(), n)
		if err != nil {
			t.Fatal(err)
		}
		size, lines := mailwire.Size(m.Raw)
		if e.Size != int64(len(m.Raw)) || e.WireSize != size || e.Lines != lines || e.List != "a" {
			t.Errorf("entry %d: size %d, wire %d, lines %d, list %q; want %d, %d, %d, a", e.Num, e.Size, e.WireSize, e.Lines, e.List, len(m.Raw), size, lines)
		}
	}
	if _, err := c.Mailbox(t.Context(), "nosuch"); err == nil {
		t.Error("Mailbox(nosuch) found a mailbox")
	}
}

// TestNumbersKept: the numbers and UIDVALIDITY of a list survive a
// restart, a rebuild (resolver reindex) and a schema change; only a
// catalog deleted gets a new UIDVALIDITY.
func TestNumbersKept(t *testing.T) {
	a := newArchive(t)
	a.load(fixture("dates.mbox"), "a")
	a.load(fixture("pipermail.mbox"), "b")
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	// A history the feed alone would not give: numbers that are not
	// 1..n, as after removals and moves, and a UIDVALIDITY that a new
	// catalog made in this second would not have.
	execSQL(t, c, `UPDATE numbers SET num = num * 10 + 7`)
	execSQL(t, c, `UPDATE mailboxes SET next = next * 10 + 100, validity = 12345`)
	execSQL(t, c, `UPDATE meta SET value = '12345' WHERE key = 'uidvalidity'`)
	wantA, wantB := numbersOf(t, c, "a"), numbersOf(t, c, "b")
	nextA := mailbox(t, c, "a").Next
	check := func(what string, c *Catalog) {
		t.Helper()
		if got := numbersOf(t, c, "a"); !mapsEqual(got, wantA) {
			t.Errorf("%s: the numbers of a are %v, want %v", what, got, wantA)
		}
		if got := numbersOf(t, c, "b"); !mapsEqual(got, wantB) {
			t.Errorf("%s: the numbers of b are %v, want %v", what, got, wantB)
		}
		if b := mailbox(t, c, "a"); b.Validity != 12345 || b.Next < nextA {
			t.Errorf("%s: Mailbox(a) = %+v, want validity 12345, next at least %d", what, b, nextA)
		}
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}

	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	check("reopened", c)
	c.Close()

	// A message stored after the catalog was last synced is numbered
	// above every number given, in a rebuild as in a follower.
	late := a.put([]byte("Message-ID: <late@x>\nSubject: late\n\nlate\n"), "a")
	if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{PageSize: 3}, Options{}); err != nil {
		t.Fatal(err)
	}
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	got := numbersOf(t, c, "a")
	if got[nextA] != late {
		t.Errorf("after a rebuild, the late message is numbered %v; want %d (the old next)", got, nextA)
	}
	delete(got, nextA)
	if !mapsEqual(got, wantA) {
		t.Errorf("rebuilt: the numbers of a are %v, want %v", got, wantA)
	}
	wantA[nextA] = late
	nextA++
	check("rebuilt", c)
	var carried int
	if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM carried`).Scan(&carried); err != nil || carried != 0 {
		t.Errorf("%d numbers carried over are left unused (%v), want 0", carried, err)
	}

	// A catalog of another schema (as after an upgrade) is rebuilt by
	// its writer, keeping the numbers.
	execSQL(t, c, `UPDATE meta SET value = '3' WHERE key = 'schema'`)
	c.Close()
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if n := mustSync(t, c, a.st); n != len(wantA)+len(wantB) {
		t.Errorf("the new schema's catalog indexed %d messages, want %d", n, len(wantA)+len(wantB))
	}
	check("after a schema change", c)
	c.Close()
	if _, err := os.Stat(path + ".old"); !os.IsNotExist(err) {
		t.Errorf("the out-of-date catalog is left behind: %v", err)
	}

	// Deleted: nothing to keep, a new UIDVALIDITY.
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(path + suffix)
	}
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSync(t, c, a.st)
	if b := mailbox(t, c, "a"); b.Validity == 12345 || b.Validity == 0 {
		t.Errorf("a new catalog has UIDVALIDITY %d, want another than 12345", b.Validity)
	}
}

func mapsEqual(a, b map[uint32]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if b[k] != v {
			return false
		}
	}
	return true
}

// TestNumbersRemovedAndMoved: a message that leaves a list's rows (a
// removal deletes it, a move changes its list) loses its number there,
// which the gone log records; a message that comes into a list gets a
// number above every number the list gave, never its old one.
func TestNumbersRemovedAndMoved(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("dates.mbox"), "a")
	a.load(fixture("loop.mbox"), "b")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	ctx := t.Context()
	_, last, err := c.NumbersState(ctx)
	if err != nil || last != 0 {
		t.Fatalf("NumbersState = %d, %v; want nothing gone", last, err)
	}
	state := func() string {
		s, _, err := c.NumbersState(ctx)
		if err != nil {
			t.Fatal(err)
		}
		return s
	}
	s0 := state()
	before := mailbox(t, c, "a")

	// Removal: the lowest-level hook, the row deleted.
	execSQL(t, c, `DELETE FROM messages WHERE cn = ?`, cns[1])
	if s := state(); s == s0 {
		t.Error("NumbersState did not change when a message was removed")
	}
	gone, err := c.GoneSince(ctx, 0, 10)
	if err != nil || len(gone) != 1 || gone[0].List != "a" || gone[0].Num != 2 {
		t.Fatalf("GoneSince(0) = %+v, %v; want a's number 2", gone, err)
	}
	b := mailbox(t, c, "a")
	if b.Messages != before.Messages-1 || b.Next != before.Next {
		t.Errorf("after a removal Mailbox(a) = %+v, want %d messages, next %d", b, before.Messages-1, before.Next)
	}
	if _, ok := numbersOf(t, c, "a")[2]; ok {
		t.Error("the removed message still has its number")
	}
	var wire int
	c.r.QueryRowContext(ctx, `SELECT count(*) FROM wire w WHERE NOT EXISTS (SELECT 1 FROM messages m WHERE m.id = w.msg)`).Scan(&wire)
	if wire != 0 {
		t.Errorf("%d wire rows of removed messages are left", wire)
	}

	// Move: to b, where it is numbered after b's last.
	nextB := mailbox(t, c, "b").Next
	execSQL(t, c, `UPDATE messages SET list = 'b' WHERE cn = ?`, cns[0])
	if got := numbersOf(t, c, "b")[nextB]; got != cns[0] {
		t.Errorf("the moved message is not b's number %d: %q", nextB, got)
	}
	gone, _ = c.GoneSince(ctx, gone[0].Seq, 10)
	if len(gone) != 1 || gone[0].List != "a" || gone[0].Num != 1 {
		t.Errorf("GoneSince after the move = %+v, want a's number 1", gone)
	}
	// And back: a new number in a, above every one a gave.
	execSQL(t, c, `UPDATE messages SET list = 'a' WHERE cn = ?`, cns[0])
	if got := numbersOf(t, c, "a")[before.Next]; got != cns[0] {
		t.Errorf("the message moved back is not a's number %d: %v", before.Next, numbersOf(t, c, "a"))
	}
	if b := mailbox(t, c, "b"); b.Next != nextB+1 || b.High != nextB-1 {
		t.Errorf("Mailbox(b) after the message left = %+v, want next %d, highest %d", b, nextB+1, nextB-1)
	}
	// A list emptied keeps its mailbox, and its next number.
	execSQL(t, c, `DELETE FROM messages WHERE list = 'b'`)
	if b := mailbox(t, c, "b"); b.Messages != 0 || b.Next != nextB+1 || b.Low != 0 || b.High != 0 {
		t.Errorf("Mailbox(b) emptied = %+v, want 0 messages, next %d", b, nextB+1)
	}
}

// TestNumbersCarriedMove: a rebuilt catalog where a message comes into a
// list by a move (as a move applied after its message is indexed would)
// gives it back the number it had there.
func TestNumbersCarriedMove(t *testing.T) {
	a := newArchive(t)
	cns := a.load(fixture("dates.mbox"), "a")
	a.load(fixture("loop.mbox"), "b")
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	mustSync(t, c, a.st)
	execSQL(t, c, `UPDATE messages SET list = 'b' WHERE cn = ?`, cns[2])
	want := numbersOf(t, c, "b")
	c.Close()
	if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{}, Options{}); err != nil {
		t.Fatal(err)
	}
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The store still says list a: this branch's moves live in the
	// catalog only.
	execSQL(t, c, `UPDATE messages SET list = 'b' WHERE cn = ?`, cns[2])
	if got := numbersOf(t, c, "b"); !mapsEqual(got, want) {
		t.Errorf("numbers of b = %v, want %v", got, want)
	}
}

// TestSearchNumbers: a search of one list's words answers its numbers.
func TestSearchNumbers(t *testing.T) {
	a := newArchive(t)
	a.put([]byte("Message-ID: <1@x>\nSubject: zebra crossing\n\nhello\n"), "a")
	a.put([]byte("Message-ID: <2@x>\nSubject: other\n\nzebra in the text\n"), "a")
	a.put([]byte("Message-ID: <3@x>\nSubject: zebra\n\nnot this list\n"), "b")
	a.put([]byte("Message-ID: <4@x>\nSubject: nothing\n\nnothing\n"), "a")
	c := openCatalog(t)
	mustSync(t, c, a.st)
	q, err := ParseQuery("zebra")
	if err != nil {
		t.Fatal(err)
	}
	got, err := c.SearchNumbers(t.Context(), "a", q)
	if err != nil || !slices.Equal(got, []uint32{1, 2}) {
		t.Errorf("SearchNumbers(a, zebra) = %v, %v; want [1 2]", got, err)
	}
	es, err := c.EntriesByMessageID(t.Context(), "3@x")
	if err != nil || len(es) != 1 || es[0].List != "b" || es[0].Num != 1 {
		t.Errorf("EntriesByMessageID(3@x) = %+v, %v", es, err)
	}
	ids, more, err := c.ArchivedSince(t.Context(), []string{"a"}, es[0].Archived.Add(-1), 2)
	if err != nil || len(ids) != 2 || !more || ids[0] != "1@x" {
		t.Errorf("ArchivedSince(a) = %v, %v, %v; want 1@x, 2@x and more", ids, more, err)
	}
}
