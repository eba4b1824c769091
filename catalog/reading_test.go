package catalog

import (
	"fmt"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailview"
)

func listFixture(name string) string { return filepath.Join("..", "fixtures", "lists", name) }

// TestSplitThreads: a pipermail-era list without threading headers, whose
// replies often lost their "Re:" (fixtures/lists/pipermail-split.mbox).
func TestSplitThreads(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("pipermail-split.mbox"), "fetchmail")
	// The same question on another list: never joined across lists.
	other := a.put([]byte("From: zed@example.org\nSubject: IDLE support broken?\nDate: Fri, 2 Jul 2004 12:00:00 +0000\nMessage-ID: <x1@example.org>\n\n> Since upgrading to 6.2.5 the IDLE support seems broken with my Courier server.\n"), "other")
	mustSync(t, c, a.st)
	tests := []struct{ label, want string }{
		// s2 quotes s1; s3 is someone else's answer without "Re:"; s4
		// quotes s2 (and is under it); s11 has a broken In-Reply-To and
		// "Re:".
		{"s1", lines("s1", "  s2", "    s4", "  s3", "  s11")},
		{"s5", lines("s5")}, // the same sender again: two threads
		{"s6", lines("s6")},
		{"s7", lines("s7")}, // "help" from two people: two questions
		{"s8", lines("s8", "  s9")},
		{"s10", lines("s10")}, // months later
	}
	for _, tt := range tests {
		if got := shape(t, threadOf(t, c, a.cn(tt.label))); got != tt.want {
			t.Errorf("thread of %s:\n%s\nwant:\n%s", tt.label, got, tt.want)
		}
	}
	if got := shape(t, threadOf(t, c, other)); got != lines("x1") {
		t.Errorf("the other list's message is in:\n%s\nwant its own thread", got)
	}
	joined := map[string]JoinedBy{"s1": JoinedByID, "s2": JoinedQuoting, "s3": JoinedSameSubject, "s4": JoinedQuoting,
		"s5": JoinedByID, "s9": JoinedBySubject, "s11": JoinedBySubject}
	for label, want := range joined {
		m, err := c.Message(t.Context(), a.cn(label))
		if err != nil || m.Joined != want {
			t.Errorf("Message(%s).Joined = %v, %v; want %v", label, m.Joined, err, want)
		}
	}
	_, total, err := c.Threads(t.Context(), "fetchmail", 0, 100)
	if err != nil || total != 6 {
		t.Errorf("Threads(fetchmail) total = %d, %v; want 6", total, err)
	}
}

// TestRealSender: a list that rewrites From for DMARC
// (fixtures/lists/dmarc.mbox): the writer is shown and found, the list's
// address kept as Via and learnt as the list's.
func TestRealSender(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("dmarc.mbox"), "")
	mustSync(t, c, a.st)
	tests := []struct{ label, name, addr, via string }{
		{"dm1", "Stefan Metzmacher", "metze@samba.org", "samba-technical@lists.samba.org"}, // X-Original-From
		{"dm2", "Jeremy Allison", "jra@samba.org", "samba-technical@lists.samba.org"},      // Reply-To
		{"dm3", "Ralph Boehme", "slow@samba.org", "samba-technical@lists.samba.org"},       // 'quoted' via, X-Original-Sender
		{"dm4", "Volker Lendecke", "", "samba-technical@lists.samba.org"},                  // Reply-To is the list
		{"dm5", "Andrew Bartlett", "abartlet@samba.org", ""},                               // not rewritten
		{"dm6", "Maria Via Rossi", "maria@example.org", ""},                                // a name
	}
	for _, tt := range tests {
		m, err := c.Message(t.Context(), a.cn(tt.label))
		if err != nil || m.FromName != tt.name || m.FromAddr != tt.addr || m.Via != tt.via {
			t.Errorf("Message(%s) from %q <%s> via %q, %v; want %q <%s> via %q", tt.label, m.FromName, m.FromAddr, m.Via, err, tt.name, tt.addr, tt.via)
		}
	}
	for q, want := range map[string][]string{
		"from:metze":                           {"dm1"},
		"from:metze@samba.org":                 {"dm1"},
		`from:"Jeremy Allison"`:                {"dm2"},
		"from:slow@samba.org":                  {"dm3"},
		"from:lendecke":                        {"dm4"},
		"from:samba-technical@lists.samba.org": {"dm4", "dm3", "dm2", "dm1"},
		"from:via":                             {"dm6"},
	} {
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatal(err)
		}
		res, err := c.Search(t.Context(), pq, SearchOptions{Limit: 10})
		if got := labels(res.Messages); err != nil || !slices.Equal(got, want) {
			t.Errorf("Search(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
	l, err := c.List(t.Context(), "samba-technical.lists.samba.org")
	if err != nil || l.Address != "samba-technical@lists.samba.org" {
		t.Errorf("List = %+v, %v; want the address of its List-Post", l, err)
	}
}

func TestRealSenderParse(t *testing.T) {
	f := func(kv ...string) []mailview.Field {
		var out []mailview.Field
		for i := 0; i+1 < len(kv); i += 2 {
			out = append(out, mailview.Field{Name: kv[i], Value: kv[i+1]})
		}
		return out
	}
	tests := []struct {
		name string
		h    []mailview.Field
		want Sender
	}{
		{"plain", f("From", "Ann <ann@example.org>"), Sender{Name: "Ann", Addr: "ann@example.org"}},
		{"X-Original-From without a name", f("From", "Ann via L <l@lists.example>", "x-original-from", "ann@example.org"), Sender{Name: "Ann", Addr: "ann@example.org", Via: "l@lists.example"}},
		{"X-Original-From, the same address", f("From", "Ann <ann@example.org>", "X-Original-From", "Ann <ann@example.org>"), Sender{Name: "Ann", Addr: "ann@example.org"}},
		{"Reply-To of two", f("From", "Ann via L <l@lists.example>", "Reply-To", "a@x.org, b@x.org"), Sender{Name: "Ann", Via: "l@lists.example"}},
		{"via another list than the address", f("From", "Ann via Other <l@lists.example>", "Reply-To", "a@x.org"), Sender{Name: "Ann via Other", Addr: "l@lists.example"}},
		{"via alone", f("From", "via l <l@lists.example>"), Sender{Name: "via l", Addr: "l@lists.example"}},
		{"no From", f("Subject", "x"), Sender{}},
	}
	for _, tt := range tests {
		if got := RealSender(tt.h); got != tt.want {
			t.Errorf("%s: RealSender = %+v, want %+v", tt.name, got, tt.want)
		}
	}
}

// FuzzRealSender: any header gives a sender; a Via is the From's address.
func FuzzRealSender(f *testing.F) {
	f.Add("Stefan Metzmacher via samba-technical <samba-technical@lists.samba.org>", "Stefan Metzmacher <metze@samba.org>", "", "metze@samba.org")
	f.Add("'Ralph' via g <g@googlegroups.com>", "", "slow@samba.org", "")
	f.Add("x via  <a@b>", "<>", "", "a@b, c@d")
	f.Fuzz(func(t *testing.T, from, xof, xos, replyTo string) {
		s := RealSender([]mailview.Field{{Name: "From", Value: from}, {Name: "X-Original-From", Value: xof}, {Name: "X-Original-Sender", Value: xos}, {Name: "Reply-To", Value: replyTo}})
		if s.Via != "" {
			if _, addr := sender(from); s.Via != addr {
				t.Fatalf("Via %q is not the From's address %q", s.Via, addr)
			}
		}
	})
}

// TestCaseFoldOffsets: names and List-Post values whose lower case is
// longer or shorter than they are (bytes that are not UTF-8, "İ", "K")
// neither crash the parsers nor shift what they cut out.
func TestCaseFoldOffsets(t *testing.T) {
	if got := RealSender([]mailview.Field{{Name: "From", Value: "\x8c viA <l@lists.example>"}}); got.Via != "" {
		t.Errorf("a name of one bad byte and \"viA\": %+v, want no Via", got)
	}
	if got := RealSender([]mailview.Field{{Name: "From", Value: "İİİİ Ann via L <l@lists.example>"}}); got.Name != "İİİİ Ann" || got.Via != "l@lists.example" {
		t.Errorf("RealSender after İ = %+v, want İİİİ Ann via l@lists.example", got)
	}
	for v, want := range map[string]string{
		"İİİİ <MAILTO:list@example.org>":         "list@example.org",
		"\x8c\x8c\x8c <mailto:list@example.org>": "list@example.org",
		"KKKK <mailto:l@example.org>":            "l@example.org", // the Kelvin sign lower-cases to one byte
	} {
		if got := ListPost([]mailview.Field{{Name: "List-Post", Value: v}}); got != want {
			t.Errorf("ListPost(%q) = %q, want %q", v, got, want)
		}
	}
}

// FuzzListPost: any List-Post value gives an address or nothing, never a
// crash.
func FuzzListPost(f *testing.F) {
	f.Add("<mailto:linux-mips@vger.kernel.org>")
	f.Add("NO")
	f.Add("İ <MAILTO:a@b?subject=x>")
	f.Fuzz(func(t *testing.T, v string) {
		if got := ListPost([]mailview.Field{{Name: "List-Post", Value: v}}); got != "" && !strings.Contains(got, "@") {
			t.Fatalf("ListPost(%q) = %q, not an address", v, got)
		}
	})
}

// TestDfn: the files a patch series touches (fixtures/lists/patch-series.mbox)
// are found by path or by their last components; quoted diffs are not
// the replier's patch.
func TestDfn(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("patch-series.mbox"), "")
	mustSync(t, c, a.st)
	for q, want := range map[string][]string{
		"dfn:arch/mips/kernel/setup.c": {"series-3"},
		"dfn:kernel/setup.c":           {"series-3"},
		"dfn:setup.c":                  {"series-3"},
		"dfn:c-r4k.c":                  {"series-1"},
		"dfn:mm/c-r4k.c":               {"series-1"},
		"dfn:Kconfig":                  {"series-2"},
		"dfn:cache.rst":                {"series-3"},
		"dfn:mips":                     {}, // a directory is not a file
		"dfn:ips/Kconfig":              {}, // components, not characters
		"dfn:kernel/setup":             {}, // a path's end, not its middle
		"dfn:Kconfig OR dfn:setup.c":   {"series-3", "series-2"},
		"dfn:setup.c cache":            {"series-3"},
		"flush -dfn:c-r4k.c":           {"review-1", "series-2", "series-0"}, // not the patch itself
	} {
		pq, err := ParseQuery(q)
		if err != nil {
			t.Fatalf("ParseQuery(%q) = %v", q, err)
		}
		res, err := c.Search(t.Context(), pq, SearchOptions{Limit: 10})
		if got := labels(res.Messages); err != nil || !slices.Equal(got, want) {
			t.Errorf("Search(%q) = %v, %v; want %v", q, got, err, want)
		}
	}
}

// TestArrival: a Date wrong by years (or 1979) is not shown when a
// Received header says otherwise; "newest" is by arrival
// (fixtures/lists/arrival.mbox).
func TestArrival(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("arrival.mbox"), "l")
	mustSync(t, c, a.st)
	day := func(d int) time.Time { return time.Date(2000, 7, d, 10, 0, 0, 0, time.UTC) }
	tests := []struct {
		label   string
		date    time.Time
		source  DateSource
		arrived time.Time
	}{
		{"ar1", day(6), DateReceived, day(6)},
		{"ar2", day(7), DateReceived, day(7)},
		{"ar3", day(8), DateHeader, day(8).Add(5 * time.Minute)},
		{"ar4", day(9), DateHeader, day(9)},
	}
	for _, tt := range tests {
		m, err := c.Message(t.Context(), a.cn(tt.label))
		if err != nil || !m.Date.Equal(tt.date) || m.DateSource != tt.source || !m.Arrived.Equal(tt.arrived) {
			t.Errorf("Message(%s) = date %v (%v), arrived %v, %v; want %v (%v), %v", tt.label, m.Date, m.DateSource, m.Arrived, err, tt.date, tt.source, tt.arrived)
		}
	}
	recent, err := c.Recent(t.Context(), "l", 10)
	if got := labels(recent); err != nil || !slices.Equal(got, []string{"ar4", "ar3", "ar2", "ar1"}) {
		t.Errorf("Recent = %v, %v; want by arrival", got, err)
	}
	l, err := c.List(t.Context(), "l")
	if err != nil || !l.First.Equal(day(6)) {
		t.Errorf("List = %+v, %v; want it to start on 2000-07-06", l, err)
	}
	if ms, err := c.Months(t.Context(), "l"); err != nil || len(ms) != 1 || ms[0].Year != 2000 {
		t.Errorf("Months = %+v, %v; want July 2000 alone", ms, err)
	}
}

// TestCrossPosted: one message delivered to two lists is a copy in each,
// threaded in each with that list's replies (fixtures/lists/cross-posted.mbox).
func TestCrossPosted(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("cross-posted.mbox"), "")
	mustSync(t, c, a.st)
	copies := a.byID["cross-1"]
	if len(copies) != 2 {
		t.Fatalf("%d copies stored, want 2", len(copies))
	}
	for i, want := range []struct{ list, shape string }{
		{"linux-mips.linux-mips.example", lines("cross-1", "  cross-2")},
		{"linux-kernel.kernel.example", lines("cross-1", "  cross-3")},
	} {
		th := threadOf(t, c, copies[i])
		if th.List != want.list || shape(t, th) != want.shape {
			t.Errorf("copy %d: thread in %s:\n%swant in %s:\n%s", i, th.List, shape(t, th), want.list, want.shape)
		}
	}
}

// TestMove: a message imported under the wrong list is moved in the
// store; the catalog follows (lists, months, threads, IMAP numbers), and
// a rebuilt catalog has it where it was moved.
func TestMove(t *testing.T) {
	a := newArchive(t)
	path := filepath.Join(t.TempDir(), "catalog.db")
	c, err := Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	a.load(listFixture("patch-series.mbox"), "")
	wrong := a.load(listFixture("arrival.mbox"), "linux-mips.vger.kernel.org")
	mustSync(t, c, a.st)
	before, err := c.Mailbox(t.Context(), "linux-mips.vger.kernel.org")
	if err != nil || before.Messages != 9 {
		t.Fatalf("Mailbox before = %+v, %v", before, err)
	}
	for _, cn := range wrong {
		n, err := parseCN(a, cn)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := a.st.Move(t.Context(), n, "oss"); err != nil {
			t.Fatal(err)
		}
	}
	mustSync(t, c, a.st)
	check := func(t *testing.T, c *Catalog) {
		t.Helper()
		for _, cn := range wrong {
			if m, err := c.Message(t.Context(), cn); err != nil || m.List != "oss" {
				t.Errorf("Message(%s).List = %q, %v; want oss", cn, m.List, err)
			}
			if th := threadOf(t, c, cn); th.List != "oss" {
				t.Errorf("thread of %s in %s, want oss", cn, th.List)
			}
		}
		lists, err := c.Lists(t.Context())
		if err != nil || len(lists) != 2 || lists[0].Name != "linux-mips.vger.kernel.org" || lists[0].Messages != 5 || lists[1].Name != "oss" || lists[1].Messages != 4 {
			t.Errorf("Lists = %+v, %v; want linux-mips 5, oss 4", lists, err)
		}
		if ms, err := c.Months(t.Context(), "linux-mips.vger.kernel.org"); err != nil || len(ms) != 1 || ms[0].Year != 2024 {
			t.Errorf("Months(linux-mips) = %+v, %v; want January 2024 alone", ms, err)
		}
		if _, total, err := c.Threads(t.Context(), "oss", 0, 10); err != nil || total != 4 {
			t.Errorf("Threads(oss) = %d, %v; want 4", total, err)
		}
		mb, err := c.Mailbox(t.Context(), "oss")
		if err != nil || mb.Messages != 4 {
			t.Errorf("Mailbox(oss) = %+v, %v; want 4 messages", mb, err)
		}
		old, err := c.Mailbox(t.Context(), "linux-mips.vger.kernel.org")
		if err != nil || old.Messages != 5 || old.Validity != before.Validity {
			t.Errorf("Mailbox(linux-mips) = %+v, %v; want 5 messages, the same UIDVALIDITY", old, err)
		}
	}
	t.Run("followed", func(t *testing.T) { check(t, c) })
	gone, err := c.GoneSince(t.Context(), 0, 100)
	if err != nil || len(gone) != 4 {
		t.Errorf("GoneSince = %+v, %v; want the 4 moved messages' old numbers", gone, err)
	}
	c.Close()
	if _, err := Rebuild(t.Context(), path, a.st, SyncOptions{}, Options{}); err != nil {
		t.Fatal(err)
	}
	c, err = Open(t.Context(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	t.Run("rebuilt", func(t *testing.T) { check(t, c) })
}

func parseCN(a *archive, cn string) (callnumber.Number, error) {
	n, _, err := a.auth.Codec.Parse(cn)
	return n, err
}

// TestSubjectThreadingBounded: a message looks at the newest
// maxSubjectThreads threads of its subject only, however many there are.
func TestSubjectThreadingBounded(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	var first string
	for i := range 3 * maxSubjectThreads {
		raw := fmt.Sprintf("From: same@example.org\nSubject: the same long subject\nDate: Mon, 1 Jan 2001 %02d:00:00 +0000\nMessage-ID: <b%d@example.org>\n\nthe line of message number %d that someone quotes\n", i%24, i, i)
		cn := a.put([]byte(raw), "l")
		if i == 0 {
			first = cn
		}
	}
	q := a.put([]byte("From: other@example.org\nSubject: the same long subject\nDate: Mon, 1 Jan 2001 23:30:00 +0000\nMessage-ID: <q@example.org>\n\n> the line of message number 0 that someone quotes\n"), "l")
	mustSync(t, c, a.st)
	th := threadOf(t, c, q)
	if th.Index(first) >= 0 {
		t.Errorf("a message joined the thread of the oldest of %d threads of its subject", 3*maxSubjectThreads)
	}
	if m, err := c.Message(t.Context(), q); err != nil || m.Joined != JoinedSameSubject {
		t.Errorf("Message(q).Joined = %v, %v; want the newest thread, by subject", m.Joined, err)
	}
}

// TestRedelivered: a message whose Date agrees with a Received hop below
// a much later topmost one was written when it says, and a list server
// sent it out again later: its month is its Date's. A Date that agrees
// only with a hop the next one contradicts is a wrong clock
// (fixtures/lists/redelivered.mbox).
func TestRedelivered(t *testing.T) {
	archived := time.Date(2025, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(s string) time.Time {
		d, err := time.Parse(time.RFC3339, s)
		if err != nil {
			t.Fatal(err)
		}
		return d
	}
	tests := []struct {
		name     string
		date     string
		received []string
		want     time.Time
		source   DateSource
		arrived  time.Time
	}{
		{"re-sent two years later", "Sun, 9 Oct 2022 18:02:05 +0200",
			[]string{"Tue, 16 Apr 2024 08:00:00 +0000", "Sun, 9 Oct 2022 18:02:11 +0200", "Sun, 9 Oct 2022 18:02:09 +0200"},
			at("2022-10-09T16:02:05Z"), DateHeader, at("2022-10-09T16:02:11Z")},
		{"re-sent, only the first hop agrees", "Sun, 9 Oct 2022 18:02:05 +0200",
			[]string{"Tue, 16 Apr 2024 08:00:00 +0000", "Tue, 16 Apr 2024 07:59:00 +0000", "bogus", "Sun, 9 Oct 2022 18:02:09 +0200"},
			at("2022-10-09T16:02:05Z"), DateHeader, at("2022-10-09T16:02:09Z")},
		{"a clock ahead, stamped by the sender's own server", "Sun, 6 Jul 2003 10:00:00 +0000",
			[]string{"Thu, 6 Jul 2000 10:00:00 +0000", "Sun, 6 Jul 2003 10:00:05 +0000"},
			at("2000-07-06T10:00:00Z"), DateReceived, at("2000-07-06T10:00:00Z")},
		{"a clock behind, no hop agrees", "Mon, 1 Jan 1979 00:00:00 +0000",
			[]string{"Fri, 7 Jul 2000 10:00:00 +0000", "Fri, 7 Jul 2000 09:59:00 +0000"},
			at("2000-07-07T10:00:00Z"), DateReceived, at("2000-07-07T10:00:00Z")},
		{"Date and topmost agree", "Sat, 8 Jul 2000 10:00:00 +0000",
			[]string{"Sat, 8 Jul 2000 10:05:00 +0000"},
			at("2000-07-08T10:00:00Z"), DateHeader, at("2000-07-08T10:05:00Z")},
		{"no Received", "Sun, 9 Jul 2000 10:00:00 +0000", nil,
			at("2000-07-09T10:00:00Z"), DateHeader, at("2000-07-09T10:00:00Z")},
	}
	for _, tt := range tests {
		got, source, arrived := Arrival(tt.date, tt.received, archived)
		if !got.Equal(tt.want) || source != tt.source || !arrived.Equal(tt.arrived) {
			t.Errorf("%s: Arrival(%q, %q) = %v (%v), arrived %v; want %v (%v), %v", tt.name, tt.date, tt.received, got, source, arrived, tt.want, tt.source, tt.arrived)
		}
	}

	a := newArchive(t)
	c := openCatalog(t)
	a.load(listFixture("redelivered.mbox"), "l")
	mustSync(t, c, a.st)
	ms, err := c.Months(t.Context(), "l")
	var got []string
	for _, m := range ms {
		got = append(got, fmt.Sprintf("%04d-%02d", m.Year, m.Month))
	}
	slices.Sort(got)
	if want := []string{"2000-07", "2022-10"}; err != nil || !slices.Equal(got, want) {
		t.Errorf("Months(l) = %v, %v; want %v", got, err, want)
	}
}
