package catalog

import (
	"path/filepath"
	"testing"
)

// TestThreadCounts: a list's thread count, and Stats' totals, come from
// list_threads, which triggers keep as threads come, merge and move; a
// catalog made before it gets it when a writer opens it, and one opened
// read-only without it counts its threads as before.
func TestThreadCounts(t *testing.T) {
	a := newArchive(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.put(threadMail("r1", "one", "w"), "l")
	a.put(threadMail("r2", "two", "w"), "l")
	a.put(threadMail("r3", "three", "w"), "m")
	// A reply before its parent makes a thread of its own, merged into
	// the parent's when it comes (a thread dropped).
	a.put(threadMail("late", "Re: four", "w", "r4"), "l")
	mustSync(t, c, a.st)
	a.put(threadMail("r4", "four", "w"), "l")
	mustSync(t, c, a.st)
	stats := func(c *Catalog, messages, threads int) {
		t.Helper()
		if s, err := c.Stats(t.Context()); err != nil || s.Messages != messages || s.Threads != threads || s.Lists != 2 {
			t.Errorf("Stats() = %+v, %v; want %d messages in %d threads and 2 lists", s, err, messages, threads)
		}
	}
	total := func(c *Catalog, list string) int {
		t.Helper()
		_, n, err := c.Threads(t.Context(), list, 0, 10)
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	if l, m := total(c, "l"), total(c, "m"); l != 3 || m != 1 {
		t.Fatalf("threads of l and m: %d and %d, want 3 and 1", l, m)
	}
	stats(c, 5, 4)
	checkKeptCounts(t, c)
	// A thread whose list changes is counted in its new list.
	execSQL(t, c, `UPDATE threads SET list='m' WHERE id=(SELECT min(id) FROM threads WHERE list='l')`)
	checkKeptCounts(t, c)
	execSQL(t, c, `UPDATE threads SET list='l' WHERE id=(SELECT max(id) FROM threads WHERE list='m')`)
	checkKeptCounts(t, c)

	// A catalog of the same schema made before list_threads.
	for _, q := range []string{`DROP TRIGGER list_threads_new`, `DROP TRIGGER list_threads_dropped`, `DROP TRIGGER list_threads_moved`, `DROP TABLE list_threads`} {
		execSQL(t, c, q)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	ro, err := Open(t.Context(), path, Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	if ro.threadCounts {
		t.Error("a catalog without list_threads opened read-only: threadCounts set")
	}
	if l, m := total(ro, "l"), total(ro, "m"); l != 3 || m != 1 {
		t.Errorf("read-only, without list_threads: threads of l and m %d and %d, want 3 and 1", l, m)
	}
	stats(ro, 5, 4)
	ro.Close()
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var n int
	if err := c.r.QueryRow(`SELECT count(*) FROM sqlite_schema WHERE name LIKE 'list_threads%'`).Scan(&n); err != nil || n != 4 {
		t.Fatalf("after a writer opened it: %d of list_threads and its three triggers, %v; want 4", n, err)
	}
	checkKeptCounts(t, c)
	a.put(threadMail("r5", "five", "w"), "m")
	mustSync(t, c, a.st)
	if l, m := total(c, "l"), total(c, "m"); l != 3 || m != 2 {
		t.Errorf("after the migration and another thread: threads of l and m %d and %d, want 3 and 2", l, m)
	}
	stats(c, 6, 5)
	checkKeptCounts(t, c)
}
