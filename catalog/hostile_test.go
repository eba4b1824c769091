package catalog

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// A message naming 100,000 Message-IDs: the catalog keeps the last
// MaxReferences of them, and its thread's tree is built in a number of
// steps linear in its size however many it names.
func TestManyReferences(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	m := hostile.ManyReferences(hostile.ManyReferencesCount)
	cn := a.put(m.Raw(), "hostile")
	mustSync(t, c, a.st)
	var n int
	if err := c.r.QueryRowContext(t.Context(), `SELECT count(*) FROM refs`).Scan(&n); err != nil {
		t.Fatal(err)
	}
	if n != MaxReferences {
		t.Errorf("the catalog keeps %d references of the message, want the last %d", n, MaxReferences)
	}
	// The header is longer than mailview reads (MaxHeaderBytes): the
	// parent is the last reference read.
	th := threadOf(t, c, cn)
	if len(th.Nodes) != 1 || !strings.HasPrefix(th.Nodes[0].MissingParent, "ref-") {
		t.Errorf("thread:\n%s\nwant the message alone, its parent missing", shape(t, th))
	}
}

// buildTree takes a number of steps linear in what it is given, however
// it is given it: one message naming a chain of 100,000 IDs (each link's
// loop check used to walk the chain above it), or many messages whose
// checks each walk a deep chain.
func TestTreeLinear(t *testing.T) {
	var chain []string
	for i := range 100_000 {
		chain = append(chain, fmt.Sprintf("r%d@x", i))
	}
	b := newTreeBuilder()
	nodes := b.build([]*Message{{MessageID: "m@x", Date: day(1), id: 1}}, [][]string{chain}, nil)
	if len(nodes) != 1 || nodes[0].MissingParent != "r99999@x" {
		t.Errorf("one message under a chain of placeholders: %d nodes, want 1 missing its parent", len(nodes))
	}
	if limit := 8 * len(chain); b.steps > limit {
		t.Errorf("a chain of %d IDs took %d steps, want at most %d", len(chain), b.steps, limit)
	}

	// A chain of 2,000 placeholders named by one message, then 2,000
	// messages, each dated before a reply that names it (so that it has
	// a child when its turn comes), whose parent is the chain's end: each
	// check walks the whole chain unless bounded.
	var msgs []*Message
	var refs [][]string
	msgs = append(msgs, &Message{MessageID: "top@x", Date: day(1), id: 1})
	refs = append(refs, chain[:2000])
	for i := range 2000 {
		id := int64(2 + 2*i)
		msgs = append(msgs,
			&Message{MessageID: fmt.Sprintf("reply%d@x", i), Date: day(2).Add(time.Duration(i) * time.Minute), id: id},
			&Message{MessageID: fmt.Sprintf("p%d@x", i), Date: day(2).Add(time.Duration(i)*time.Minute + time.Second), id: id + 1})
		refs = append(refs, []string{fmt.Sprintf("p%d@x", i)}, []string{chain[1999]})
	}
	b = newTreeBuilder()
	nodes = b.build(msgs, refs, nil)
	if len(nodes) != len(msgs)+1 {
		t.Errorf("%d nodes, want the %d messages and one placeholder", len(nodes), len(msgs))
	}
	if limit := 8 * (len(msgs) + 2000); b.steps > limit {
		t.Errorf("%d messages under a chain of 2,000 took %d steps, want at most %d", len(msgs), b.steps, limit)
	}
}

// threadIDs returns the thread of each message with the given
// Message-ID labels.
func threadIDs(t *testing.T, c *Catalog, a *archive, labels ...string) []int64 {
	t.Helper()
	var out []int64
	for _, l := range labels {
		var id int64
		if err := c.r.QueryRowContext(t.Context(), `SELECT thread FROM messages WHERE cn=?`, a.cn(l)).Scan(&id); err != nil {
			t.Fatal(err)
		}
		out = append(out, id)
	}
	return out
}

// One message whose References name every Message-ID of a list merges
// no thread: it goes under its parent, in its parent's thread.
func TestNamesAllMergesNothing(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	threads := hostile.Threads(40, 2)
	var ids []string
	for _, m := range threads {
		a.put(m.Raw(), "list")
		ids = append(ids, m.MessageID)
	}
	mustSync(t, c, a.st)
	a.put(hostile.NamesAll(ids, 1000).Raw(), "list")
	mustSync(t, c, a.st)
	_, total, err := c.Threads(t.Context(), "list", 0, 100)
	if err != nil || total != 40 {
		t.Errorf("Threads = %d, %v; want the 40 threads there were", total, err)
	}
	if got, want := shape(t, threadOf(t, c, a.cn("names-all"))), lines("thread-39-0", "  thread-39-1", "    thread-39-2", "      names-all"); got != want {
		t.Errorf("thread of names-all:\n%s\nwant:\n%s", got, want)
	}
}

// The merging rule: a message joins the thread of its parent (or of the
// nearest ancestor the list has) and the threads of its replies stored
// before it; it merges them when at most one of them is established
// (has two messages or more), and otherwise joins its parent's thread
// only.
func TestMergeRule(t *testing.T) {
	msg := func(id, parent string, refs ...string) []byte {
		h := "Message-ID: <" + id + "@x>\nSubject: s\nDate: Mon, 1 Jan 2001 10:00:00 +0000\n"
		if len(refs) > 0 {
			h += "In-Reply-To: <" + parent + "@x>\nReferences:"
			for _, r := range refs {
				h += " <" + r + "@x>"
			}
			h += "\n"
		}
		return []byte(h + "\nbody\n")
	}
	tests := []struct {
		name   string
		before [][]byte
		late   []byte
		same   [][]string // labels whose messages share a thread, group by group
	}{
		{
			name:   "a late parent joins its reply and its own parent",
			before: [][]byte{msg("a", ""), msg("b", "a", "a"), msg("d", "c", "c")},
			late:   msg("c", "b", "a", "b"),
			same:   [][]string{{"a", "b", "c", "d"}},
		},
		{
			name:   "a late parent of an established thread joins its own parent's only",
			before: [][]byte{msg("a", ""), msg("b", "a", "a"), msg("d", "c", "c"), msg("e", "d", "c", "d")},
			late:   msg("c", "b", "a", "b"),
			same:   [][]string{{"a", "b", "c"}, {"d", "e"}},
		},
		{
			name:   "the nearest ancestor the list has, past missing ones",
			before: [][]byte{msg("a", ""), msg("b", "a", "a")},
			late:   msg("z", "y", "a", "b", "x", "y"),
			same:   [][]string{{"a", "b", "z"}},
		},
		{
			name:   "older references join nothing",
			before: [][]byte{msg("a", ""), msg("b", "a", "a"), msg("p", ""), msg("q", "p", "p")},
			late:   msg("z", "b", "p", "q", "a", "b"),
			same:   [][]string{{"a", "b", "z"}, {"p", "q"}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a := newArchive(t)
			c := openCatalog(t)
			for _, raw := range tt.before {
				a.put(raw, "l")
			}
			mustSync(t, c, a.st)
			a.put(tt.late, "l")
			mustSync(t, c, a.st)
			var seen []int64
			for _, group := range tt.same {
				ids := threadIDs(t, c, a, group...)
				for _, id := range ids {
					if id != ids[0] {
						t.Errorf("%v are in threads %v, want one", group, ids)
						break
					}
				}
				if slices.Contains(seen, ids[0]) {
					t.Errorf("%v share a thread with another group", group)
				}
				seen = append(seen, ids[0])
			}
		})
	}
}

// A search reads at most MaxQueryWords words, a phrase's each counted:
// a phrase of 499 one-letter words is refused, saying why.
func TestQueryWordsBounded(t *testing.T) {
	for _, q := range []string{hostile.LongPhrase(hostile.LongPhraseWords), hostile.LongPhrase(MaxQueryWords + 1), "cache " + hostile.LongPhrase(MaxQueryWords)} {
		if _, err := ParseQuery(q); !errors.Is(err, ErrQuery) || !strings.Contains(err.Error(), fmt.Sprintf("more than %d words", MaxQueryWords)) {
			t.Errorf("ParseQuery(%.30q...) = %v, want an ErrQuery saying more than %d words", q, err, MaxQueryWords)
		}
	}
	if q, err := ParseQuery(hostile.LongPhrase(MaxQueryWords)); err != nil || len(q.Terms) != 1 {
		t.Errorf("ParseQuery(a phrase of %d words) = %v, %v; want one term", MaxQueryWords, q, err)
	}
}

// A search that outlasts Options.SearchTimeout is stopped (SQLite is
// interrupted) and answered with ErrSearchCost.
func TestSearchTimeout(t *testing.T) {
	a, _ := searchFixture(t)
	c, err := Open(t.Context(), filepath.Join(t.TempDir(), "catalog.db"), Options{SearchTimeout: time.Nanosecond})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mustSync(t, c, a.st)
	q, err := ParseQuery("cache")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.Search(t.Context(), q, SearchOptions{Limit: 20}); !errors.Is(err, ErrSearchCost) {
		t.Errorf("Search with a timeout of 1 ns = %v, want ErrSearchCost", err)
	}
}

// Searches run on connections of their own: while every one of them is
// taken, pages read the catalog as ever, and a search waits for its turn
// (here: until its reader gives up).
func TestSearchesCannotStarvePages(t *testing.T) {
	a, c := searchFixture(t)
	var held []*sql.Conn
	for range SearchConns() {
		conn, err := c.s.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		held = append(held, conn)
	}
	defer func() {
		for _, conn := range held {
			conn.Close()
		}
	}()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	for range 3 * 2 * runtime.GOMAXPROCS(0) {
		if _, err := c.Lists(ctx); err != nil {
			t.Fatalf("Lists while every search connection is taken = %v", err)
		}
		if _, err := c.Thread(ctx, a.cn("s1")); err != nil {
			t.Fatalf("Thread while every search connection is taken = %v", err)
		}
	}
	q, _ := ParseQuery("cache")
	short, cancel2 := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel2()
	if _, err := c.Search(short, q, SearchOptions{Limit: 20}); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Search while every search connection is taken = %v, want it to wait until its context ends", err)
	}
}

// BenchmarkHostileThreads measures, beside an ordinary reply, what the
// messages of package hostile that name many Message-IDs cost the
// catalog: indexing one (into a list of 200 threads of 5), and reading
// its thread (Thread: the tree built), in CPU time.
func BenchmarkHostileThreads(b *testing.B) {
	threads := hostile.Threads(200, 4)
	var ids []string
	for _, m := range threads {
		ids = append(ids, m.MessageID)
	}
	for _, m := range []hostile.Message{
		hostile.Ordinary("ordinary", "thread-0-4@hostile.test", 2000),
		hostile.ManyReferences(hostile.ManyReferencesCount),
		hostile.NamesAll(ids, 2001),
	} {
		raw := m.Raw()
		b.Run(m.Name+"/index", func(b *testing.B) {
			var cpu time.Duration
			for range b.N {
				b.StopTimer()
				a := newArchive(b)
				c := openCatalog(b)
				a.putAll(threads, "l")
				mustSync(b, c, a.st)
				a.put(raw, "l")
				b.StartTimer()
				cpu0 := cpuTime()
				mustSync(b, c, a.st)
				cpu += cpuTime() - cpu0
			}
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
		b.Run(m.Name+"/thread", func(b *testing.B) {
			a := newArchive(b)
			c := openCatalog(b)
			a.putAll(threads, "l")
			cn := a.put(raw, "l")
			mustSync(b, c, a.st)
			cpu0 := cpuTime()
			b.ResetTimer()
			for range b.N {
				if _, err := c.Thread(b.Context(), cn); err != nil {
					b.Fatal(err)
				}
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/1000/float64(b.N), "cpu-ms/op")
		})
	}
}

// putAll stores msgs in one batch, as put does one.
func (a *archive) putAll(msgs []hostile.Message, list string) {
	a.t.Helper()
	var batch []store.Message
	for _, m := range msgs {
		raw := m.Raw()
		meta, _ := mailmsg.Parse(raw)
		batch = append(batch, storetest.Message(a.auth.Number(a.t, a.run, a.seq), raw, meta.MessageID, list))
		a.seq++
	}
	if _, err := a.st.Put(a.t.Context(), batch); err != nil {
		a.t.Fatalf("Put = %v", err)
	}
}
