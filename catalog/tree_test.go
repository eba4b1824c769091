package catalog

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"
)

// TestReplyBeforeParent imports a chain newest first, following the store
// after every message: the replies form a thread that says its parent is
// missing until the parent arrives, and then hang under it.
func TestReplyBeforeParent(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	raws := readMbox(t, fixture("reply-before-parent.mbox"))
	steps := []struct {
		label string
		want  string // the thread of c@ once this message is in
	}{
		{"c", lines("c (missing b)")},
		{"b", lines("b (missing a)", "  c")},
		{"d", lines("b (missing a)", "  c")},
		{"a", lines("a", "  b", "    c")},
	}
	for i, step := range steps {
		a.put(raws[i], "")
		if n := mustSync(t, c, a.st); n != 1 {
			t.Fatalf("after %s: Sync indexed %d messages, want 1", step.label, n)
		}
		if got := shape(t, threadOf(t, c, a.cn("c"))); got != step.want {
			t.Errorf("after %s, the thread of c:\n%s\nwant:\n%s", step.label, got, step.want)
		}
	}
	th := threadOf(t, c, a.cn("b"))
	if th.Subject != "widgets" || th.Messages != 3 || th.List != "widgets.example.org" {
		t.Errorf("thread = %q, %d messages, list %q; want \"widgets\", 3, \"widgets.example.org\"", th.Subject, th.Messages, th.List)
	}
	if got := shape(t, threadOf(t, c, a.cn("d"))); got != lines("d") {
		t.Errorf("thread of d = %q, want it alone", got)
	}
	// The list page: the thread started by a, active last on Jan 3; then d.
	sum, total, err := c.Threads(t.Context(), "widgets.example.org", 0, 10)
	if err != nil || total != 2 || len(sum) != 2 {
		t.Fatalf("Threads = %d of %d, %v; want 2 of 2", len(sum), total, err)
	}
	if sum[0].Root.CallNumber != a.cn("a") || sum[0].Messages != 3 || !sum[0].Last.Equal(time.Date(2001, 1, 3, 10, 0, 0, 0, time.UTC)) || sum[0].Root.FromName != "Alice" {
		t.Errorf("first thread = root %s by %q, %d messages, last %v; want root %s by Alice, 3, 2001-01-03 10:00", sum[0].Root.CallNumber, sum[0].Root.FromName, sum[0].Messages, sum[0].Last, a.cn("a"))
	}
	if sum[1].Root.CallNumber != a.cn("d") {
		t.Errorf("second thread root = %s, want d (%s)", sum[1].Root.CallNumber, a.cn("d"))
	}
}

func TestMissingParent(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("missing-parent.mbox"), "lost")
	mustSync(t, c, a.st)
	tests := []struct{ label, want string }{
		// Two answers to one missing message: a placeholder holds them.
		{"p1", lines("[gone]", "  p1 (missing gone)", "  p2 (missing gone)")},
		// In-Reply-To only, once plain and once with text around the ID.
		{"q", lines("[elsewhere]", "  q (missing elsewhere)", "  r (missing elsewhere)")},
	}
	for _, tt := range tests {
		if got := shape(t, threadOf(t, c, a.cn(tt.label))); got != tt.want {
			t.Errorf("thread of %s:\n%s\nwant:\n%s", tt.label, got, tt.want)
		}
	}
}

// TestTreeShapes pins buildTree on cases that need no store.
func TestTreeShapes(t *testing.T) {
	msgs := []*Message{
		{MessageID: "q@x", Date: day(3), id: 1},
		{MessageID: "r@x", Date: day(4), id: 2},
	}
	got := shapeOf(t, buildTree(msgs, [][]string{{"elsewhere@x"}, {"elsewhere@x"}}, nil))
	if want := lines("[elsewhere]", "  q (missing elsewhere)", "  r (missing elsewhere)"); got != want {
		t.Errorf("two answers to one missing message:\n%s\nwant:\n%s", got, want)
	}
	// A missing message between two archived ones: no placeholder for a
	// single reply; the reply says what is missing.
	msgs = []*Message{{MessageID: "a@x", Date: day(1), id: 1}, {MessageID: "c@x", Date: day(3), id: 3}}
	got = shapeOf(t, buildTree(msgs, [][]string{nil, {"a@x", "b@x"}}, nil))
	if want := lines("a", "  c (missing b)"); got != want {
		t.Errorf("a gap in a chain:\n%s\nwant:\n%s", got, want)
	}
	// A chain 3,000 deep, and a message without Message-ID replying.
	msgs = nil
	var refs [][]string
	var chain []string
	for i := range 3000 {
		msgs = append(msgs, &Message{MessageID: fmt.Sprintf("m%d@x", i), Date: day(1).Add(time.Duration(i) * time.Minute), id: int64(i)})
		refs = append(refs, slices.Clone(chain))
		chain = append(chain, fmt.Sprintf("m%d@x", i))
	}
	msgs = append(msgs, &Message{Date: day(9), id: 5000})
	refs = append(refs, []string{"m2999@x"})
	nodes := buildTree(msgs, refs, nil)
	if len(nodes) != 3001 || nodes[3000].Depth != 3000 || nodes[3000].Message.id != 5000 {
		t.Errorf("deep chain: %d nodes, last at depth %d; want 3001, 3000", len(nodes), nodes[len(nodes)-1].Depth)
	}
}

func TestReferenceLoop(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("loop.mbox"), "")
	mustSync(t, c, a.st)
	th := threadOf(t, c, a.cn("la"))
	got := shape(t, th)
	if len(th.Nodes) != 3 {
		t.Fatalf("thread of a loop:\n%s\nwant the 3 messages once each", got)
	}
	// a names b, b names a: the later link would close the loop and is
	// not made; c's own references put it under a.
	if want := lines("lb", "  la", "    lc"); got != want {
		t.Errorf("thread of a loop:\n%s\nwant:\n%s", got, want)
	}
}

func TestSharedMessageID(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("shared-message-id.mbox"), "")
	mustSync(t, c, a.st)
	same := a.byID["same"]
	if len(same) != 2 {
		t.Fatalf("%d messages stored with Message-ID same@, want 2", len(same))
	}
	th := threadOf(t, c, same[1])
	// The reply hangs under the first message with the ID; the second
	// stands in the same thread, beside the reply.
	if got, want := shape(t, th), lines("same", "  same", "  reply-to-same"); got != want {
		t.Errorf("thread:\n%s\nwant:\n%s", got, want)
	}
	if th.Nodes[0].Message.CallNumber != same[0] {
		t.Errorf("root = %s, want the first message with the ID (%s)", th.Nodes[0].Message.CallNumber, same[0])
	}
}

func TestSubjectGrouping(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("pipermail.mbox"), "linux-mips")
	mustSync(t, c, a.st)
	tests := []struct{ label, want string }{
		{"pm1", lines("pm1", "  pm2", "  pm3")},
		{"pm5", lines("pm5")}, // same subject, neither a reply: two threads
		{"pm6", lines("pm6")},
		// The original dated after its reply: one thread, in date order
		// (so that its tree and the list page agree on who started it).
		{"pm7", lines("pm7", "  pm8")},
		{"pm4", lines("pm4")}, // months later
	}
	for _, tt := range tests {
		if got := shape(t, threadOf(t, c, a.cn(tt.label))); got != tt.want {
			t.Errorf("thread of %s:\n%s\nwant:\n%s", tt.label, got, tt.want)
		}
	}
	_, total, err := c.Threads(t.Context(), "linux-mips", 0, 100)
	if err != nil || total != 5 {
		t.Errorf("Threads(linux-mips) total = %d, %v; want 5", total, err)
	}
}

func TestBaseSubject(t *testing.T) {
	tests := []struct {
		in    string
		base  string
		reply bool
	}{
		{"build failure", "build failure", false},
		{"Re: build failure", "build failure", true},
		{"RE: Re: re:build  failure ", "build failure", true},
		{"[Linux-mips] Re: [PATCH] Build failure", "build failure", true},
		{"Re[2]: x", "x", true},
		{"Re^3: x", "x", true},
		{"Re(4): x", "x", true},
		{"AW: SV: Antw: x", "x", true},
		{"Fwd: x", "x", false},
		{"Fw: Re: x", "x", true},
		{"Regarding: x", "regarding: x", false},
		{"Re:", "", true},
		{"", "", false},
		{"[unclosed x", "[unclosed x", false},
		{"Réponse: été", "réponse: été", false},
		{"Re: IP27: BUG() in mm/vmscan.c [was: Random hard locks]", "ip27: bug() in mm/vmscan.c", true},
		{"a new idea (was: Re: the old one)", "a new idea", false},
		{"a new idea (Was an old one)", "a new idea", false},
		{"(was: only this)", "(was: only this)", false},
		{"what it was: a bug", "what it was: a bug", false},
	}
	for _, tt := range tests {
		base, reply := BaseSubject(tt.in)
		if base != tt.base || reply != tt.reply {
			t.Errorf("BaseSubject(%q) = %q, %v; want %q, %v", tt.in, base, reply, tt.base, tt.reply)
		}
	}
}

func TestDates(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	before := time.Now().Add(-time.Second)
	a.load(fixture("dates.mbox"), "")
	mustSync(t, c, a.st)
	tests := []struct {
		label  string
		date   time.Time // zero: when archived
		source DateSource
	}{
		{"d1", time.Date(2001, 1, 1, 9, 0, 0, 0, time.UTC), DateHeader},
		{"d2", time.Date(2001, 1, 2, 10, 0, 0, 0, time.UTC), DateReceived},
		{"d3", time.Date(2001, 1, 3, 10, 0, 0, 0, time.UTC), DateReceived},
		{"d4", time.Time{}, DateArchived},
		{"d5", time.Time{}, DateArchived},
		{"d6", time.Date(2000, 1, 3, 17, 0, 0, 0, time.UTC), DateHeader},
	}
	for _, tt := range tests {
		m, err := c.Message(t.Context(), a.cn(tt.label))
		if err != nil {
			t.Fatal(err)
		}
		okDate := m.Date.Equal(tt.date)
		if tt.date.IsZero() {
			okDate = !m.Date.Before(before.Truncate(time.Second)) && m.Date.Before(time.Now().Add(time.Second))
		}
		if !okDate || m.DateSource != tt.source {
			t.Errorf("%s: date %v from %v, want %v from %v", tt.label, m.Date, m.DateSource, tt.date, tt.source)
		}
	}
	months, err := c.Months(t.Context(), Unlisted)
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, m := range months {
		got = append(got, fmt.Sprintf("%d-%02d:%d", m.Year, m.Month, m.Messages))
	}
	now := time.Now().UTC()
	want := []string{fmt.Sprintf("%d-%02d:2", now.Year(), now.Month()), "2001-01:3", "2000-01:1"}
	if !slices.Equal(got, want) {
		t.Errorf("Months(unlisted) = %v, want %v", got, want)
	}
}

func TestLists(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	a.load(fixture("reply-before-parent.mbox"), "")   // List-Id widgets.example.org
	a.load(fixture("missing-parent.mbox"), "")        // no List-Id
	a.load(fixture("loop.mbox"), "Fetchmail Friends") // --list wins
	mustSync(t, c, a.st)
	lists, err := c.Lists(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, l := range lists {
		got = append(got, fmt.Sprintf("%s:%d", l.Name, l.Messages))
	}
	if want := []string{"fetchmail-friends:3", "unlisted:4", "widgets.example.org:4"}; !slices.Equal(got, want) {
		t.Errorf("Lists = %v, want %v", got, want)
	}
	l, err := c.List(t.Context(), "widgets.example.org")
	if err != nil || !l.First.Equal(time.Date(2001, 1, 1, 10, 0, 0, 0, time.UTC)) || !l.Last.Equal(time.Date(2001, 1, 3, 10, 0, 0, 0, time.UTC)) {
		t.Errorf("List(widgets) = %+v, %v; want first 2001-01-01 10:00, last 2001-01-03 10:00", l, err)
	}
	if _, err := c.List(t.Context(), "nope"); !errors.Is(err, ErrNotFound) {
		t.Errorf("List(nope) = %v, want %v", err, ErrNotFound)
	}
}

func TestListName(t *testing.T) {
	tests := []struct{ in, want string }{
		{"linux-mips", "linux-mips"},
		{"Linux MIPS", "linux-mips"},
		{"  fetchmail.friends ", "fetchmail.friends"},
		{"-._x_.-", "x"},
		{"ünï", "n"},
		{"a/b?c#d", "a-b-c-d"},
		{string(make([]byte, 100)), ""},
	}
	for _, tt := range tests {
		if got := ListName(tt.in); got != tt.want {
			t.Errorf("ListName(%q) = %q, want %q", tt.in, got, tt.want)
		}
		if got := ListName(tt.in); got != "" && !ValidListName(got) {
			t.Errorf("ValidListName(ListName(%q) = %q) = false", tt.in, got)
		}
	}
	if ValidListName("Linux") || ValidListName("") || ValidListName("a b") {
		t.Errorf("ValidListName accepts names ListName would change")
	}
}

func day(d int) time.Time { return time.Date(2001, 1, d, 0, 0, 0, 0, time.UTC) }

func shapeOf(t *testing.T, nodes []Node) string {
	return shape(t, &Thread{Nodes: nodes})
}

// TestSubjectKeyCollisions: when every base subject has the same
// textKey, a reply by subject alone still finds its thread among the
// newer threads of other subjects that the lookup reads and passes over.
func TestSubjectKeyCollisions(t *testing.T) {
	key := textKey
	defer func() { textKey = key }()
	textKey = func(string) int64 { return 0 }
	a := newArchive(t)
	c := openCatalog(t)
	first := a.put(threadMail("first", "the first subject", "firstword"), "l")
	for i := range 3 * maxSubjectThreads {
		a.put(threadMail(fmt.Sprintf("other%02d", i), fmt.Sprintf("another subject %d", i), "otherword"), "l")
	}
	// No References: a reply its subject alone places.
	reply := a.put(threadMail("reply", "Re: the first subject", "replyword"), "l")
	mustSync(t, c, a.st)
	m, err := c.Message(t.Context(), reply)
	if err != nil {
		t.Fatal(err)
	}
	if th := threadOf(t, c, reply); th.Nodes[0].Message == nil || th.Nodes[0].Message.CallNumber != first || m.Joined != JoinedBySubject {
		t.Errorf("the reply joined %s, %v; want the thread of %s, by subject", shape(t, th), m.Joined, first)
	}
}

// TestReferencesAsTheyWere: a thread is read with each message's
// references whole and in order, whatever characters a Message-ID holds
// (spaces, a fold inside the brackets, quotes, commas, non-ASCII): they
// travel joined in one column.
func TestReferencesAsTheyWere(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	ids := []string{`root "x, y"@example.org`, "mid dle@example.org", "caf\u00e9\tbar@example.org"}
	mail := func(id, date string, parents ...string) []byte {
		h := "From: someone@example.org\nSubject: odd ids\nMessage-ID: <" + id + ">\nDate: Mon, 3 Nov 2008 10:00:" + date + " +0000\n"
		if len(parents) > 0 {
			h += "References: <" + strings.Join(parents, ">\n <") + ">\n"
		}
		return []byte(h + "\nText.\n")
	}
	// The last reply's References folds inside its second Message-ID.
	last := bytes.Replace(mail("leaf@example.org", "03", ids...), []byte("mid dle"), []byte("mid\n dle"), 1)
	a.put(mail(ids[0], "00"), "l")
	a.put(mail(ids[1], "01", ids[0]), "l")
	a.put(mail(ids[2], "02", ids[0], ids[1]), "l")
	cn := a.put(last, "l")
	mustSync(t, c, a.st)
	th, err := c.Thread(t.Context(), cn)
	if err != nil {
		t.Fatal(err)
	}
	want := "root \"x, y\"\n  mid dle\n    caf\u00e9bar\n      leaf\n"
	if got := shape(t, th); got != want {
		t.Errorf("thread:\n%s\nwant:\n%s", got, want)
	}
}

// TestBogusReferences: Message-IDs that cannot be a message's ("<1>",
// written by git send-email users asked for a Message-ID to answer) are
// not read: unrelated patches naming them stay apart, and a message
// naming one beside a real ID answers the real one.
func TestBogusReferences(t *testing.T) {
	tests := []struct {
		name            string
		refs, inReplyTo []string
		want            []string
	}{
		{"only bogus", []string{"1"}, []string{"1"}, nil},
		{"bogus, then real In-Reply-To", []string{"2"}, []string{"p1@example.org"}, []string{"p1@example.org"}},
		{"bogus among real", []string{"a@example.org", "1", "b@example.org"}, nil, []string{"a@example.org", "b@example.org"}},
		{"an @ without a side", []string{"@example.org", "patch@"}, nil, nil},
		{"short but real", []string{"a@b"}, nil, []string{"a@b"}},
		// Pipermail's text archives write Message-IDs as addresses.
		{"pipermail's", []string{"4B4E2F0A.6070204 at example.com"}, []string{"4B4E2F0A.6070204 at example.com"}, []string{"4B4E2F0A.6070204 at example.com"}},
		{"an old mailer's In-Reply-To", nil, []string{"alice at example.org"}, []string{"alice at example.org"}},
	}
	for _, tt := range tests {
		if got := references(tt.refs, tt.inReplyTo, "own@example.org"); !slices.Equal(got, tt.want) {
			t.Errorf("%s: references(%q, %q) = %q, want %q", tt.name, tt.refs, tt.inReplyTo, got, tt.want)
		}
	}

	a := newArchive(t)
	c := openCatalog(t)
	patch := func(id, subject, ref string, minute int) string {
		return a.put([]byte(fmt.Sprintf("From: P <p@example.org>\nSubject: %s\nMessage-ID: <%s@example.org>\nIn-Reply-To: <%s>\nReferences: <%s>\nDate: Mon, 3 Nov 2008 10:%02d:00 +0000\n\npatch\n", subject, id, ref, ref, minute)), "l")
	}
	// Pipermail's "left at right" Message-IDs still thread, whatever
	// the subjects say.
	q := a.put([]byte("From: alice at example.org (Alice)\nSubject: a question\nMessage-ID: <q1 at example.org>\nDate: Mon, 3 Nov 2008 09:00:00 +0000\n\nwhy?\n"), "l")
	ans := a.put([]byte("From: bob at example.org (Bob)\nSubject: something else\nMessage-ID: <a1 at example.org>\nIn-Reply-To: <q1 at example.org>\nReferences: <q1 at example.org>\nDate: Mon, 3 Nov 2008 09:30:00 +0000\n\nbecause\n"), "l")
	first := patch("x1", "[PATCH] net: fix a leak", "1", 1)
	second := patch("y1", "[PATCH] mm: another fix", "1", 2)
	third := patch("z1", "[PATCH 1/2] fs: yet another", "2", 3)
	mustSync(t, c, a.st)
	if th := threadOf(t, c, ans); len(th.Nodes) != 2 || th.Nodes[0].Message == nil || th.Nodes[0].Message.CallNumber != q {
		t.Errorf("thread of a pipermail answer:\n%swant it under its question", shape(t, th))
	}
	for _, cn := range []string{first, second, third} {
		if th := threadOf(t, c, cn); len(th.Nodes) != 1 {
			t.Errorf("thread of %s:\n%swant the patch alone", cn, shape(t, th))
		}
	}
}

// TestSeriesWithoutReferences: the patches of a series that name no
// message (a pipermail archive, a broken git send-email) join the thread
// of the cover letter their sender sent just before, under it; another
// sender's, another version's and a late one do not.
func TestSeriesWithoutReferences(t *testing.T) {
	a := newArchive(t)
	c := openCatalog(t)
	put := func(from, subject string, at time.Duration) string {
		date := time.Date(2014, 3, 3, 10, 0, 0, 0, time.UTC).Add(at).Format(time.RFC1123Z)
		return a.put([]byte(fmt.Sprintf("From: %s\nSubject: %s\nMessage-ID: <%d.%s>\nDate: %s\n\npatch\n", from, subject, at, strings.ReplaceAll(from, " ", ""), date)), "l")
	}
	const dev = "dev@example.org"
	cover := put(dev, "[PATCH v2 00/18] MIPS: Alchemy board updates", 0)
	first := put(dev, "[PATCH v2 01/18] MIPS: Alchemy: one", 10*time.Second)
	second := put(dev, "[PATCH v2 2/18] MIPS: Alchemy: two", 20*time.Second)
	other := put("someone@example.org", "[PATCH v2 03/18] MIPS: Alchemy: three", 30*time.Second)
	v1 := put(dev, "[PATCH 04/18] MIPS: Alchemy: four", 40*time.Second)
	late := put(dev, "[PATCH v2 05/18] MIPS: Alchemy: five", 48*time.Hour)
	mustSync(t, c, a.st)
	th := threadOf(t, c, cover)
	var got []string
	for _, n := range th.Nodes {
		got = append(got, fmt.Sprintf("%d %s", n.Depth, n.Message.CallNumber))
	}
	if want := []string{"0 " + cover, "1 " + first, "1 " + second}; !slices.Equal(got, want) {
		t.Errorf("the cover letter's thread = %v, want %v", got, want)
	}
	if m, err := c.Message(t.Context(), first); err != nil || m.Joined != JoinedSeries {
		t.Errorf("Message(first patch).Joined = %v, %v; want %v", m.Joined, err, JoinedSeries)
	}
	for _, cn := range []string{other, v1, late} {
		if th := threadOf(t, c, cn); len(th.Nodes) != 1 {
			t.Errorf("thread of %s:\n%swant it alone", cn, shape(t, th))
		}
	}
}

// TestPatchSentAgain: a patch sent again ("[PATCH v17] x" after "[PATCH
// v16] x"), even from another address, is not joined to the earlier by
// the same-subject rule: it is a new version, not an answer.
func TestPatchSentAgain(t *testing.T) {
	for _, tt := range []struct{ in, tag string }{
		{"[PATCH v2 03/18] MIPS: x", "patch v2"},
		{"[Linux-mips] [RFC PATCH 0/4] x", "rfc patch"},
		{"[PATCH] x", "patch"},
		{"[RFC v3 32/45] mips: x", "rfc v3"},
		{"[Linux-mips] help", ""},
	} {
		if got, _ := patchTag(tt.in); got != tt.tag {
			t.Errorf("patchTag(%q) = %q, want %q", tt.in, got, tt.tag)
		}
	}
	a := newArchive(t)
	c := openCatalog(t)
	v16 := a.put([]byte("From: A <a@example.org>\nSubject: [PATCH v16 12/12] Documentation: path-lookup: include new flags\nMessage-ID: <v16@example.org>\nDate: Mon, 4 Nov 2019 10:00:00 +0000\n\npatch\n"), "l")
	v17 := a.put([]byte("From: A <a@work.example>\nSubject: [PATCH v17 13/13] Documentation: path-lookup: include new flags\nMessage-ID: <v17@example.org>\nDate: Sun, 17 Nov 2019 01:28:58 +0000\n\npatch\n"), "l")
	same := a.put([]byte("From: B <b@example.org>\nSubject: [PATCH v16 12/12] Documentation: path-lookup: include new flags\nMessage-ID: <again@example.org>\nDate: Mon, 4 Nov 2019 12:00:00 +0000\n\nthe same patch, tested\n"), "l")
	mustSync(t, c, a.st)
	if th := threadOf(t, c, v17); len(th.Nodes) != 1 {
		t.Errorf("thread of v17:\n%swant it alone", shape(t, th))
	}
	// The same tag from someone else still joins, as before.
	if th := threadOf(t, c, same); len(th.Nodes) != 2 || th.Nodes[0].Message.CallNumber != v16 {
		t.Errorf("thread of the same patch from another sender:\n%swant it under v16", shape(t, th))
	}
}
