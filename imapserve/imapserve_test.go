package imapserve

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-sasl"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/mailwire"
)

// smallArchive has list "a" of n messages (one with CRLF line ends) and
// list "b" of one.
func smallArchive(t *testing.T, n int) (*archivetest.Archive, []string) {
	t.Helper()
	a := archivetest.New(t)
	var raws [][]byte
	for i := 1; i <= n; i++ {
		raws = append(raws, mail(i, fmt.Sprintf("message %d", i)))
	}
	raws[1] = bytes.ReplaceAll(raws[1], []byte("\n"), []byte("\r\n"))
	cns := a.Put("a", raws...)
	a.Put("b", mail(1000, "the other list"))
	a.Sync()
	return a, cns
}

func TestLoginListStatus(t *testing.T) {
	a, _ := smallArchive(t, 3)
	addr := serve(t, a, Options{})

	c := dial(t, addr)
	if err := c.Authenticate(sasl.NewAnonymousClient("reader@example.org")); err != nil {
		t.Fatalf("AUTHENTICATE ANONYMOUS = %v", err)
	}
	boxes, err := c.List("", "*", nil).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, b := range boxes {
		names = append(names, b.Mailbox)
		if b.Delim != Delim {
			t.Errorf("mailbox %s has delimiter %q, want %q", b.Mailbox, b.Delim, Delim)
		}
	}
	if !slices.Equal(names, []string{"a", "b"}) {
		t.Errorf("LIST \"\" * = %v, want [a b]", names)
	}
	if boxes, _ := c.List("", "%b", nil).Collect(); len(boxes) != 1 || boxes[0].Mailbox != "b" {
		t.Errorf("LIST \"\" %%b = %v, want b", boxes)
	}
	st, err := c.Status("a", &imap.StatusOptions{NumMessages: true, UIDNext: true, UIDValidity: true, NumUnseen: true}).Wait()
	if err != nil {
		t.Fatal(err)
	}
	b, _ := a.Catalog.Mailbox(t.Context(), "a")
	if *st.NumMessages != 3 || st.UIDNext != 4 || st.UIDValidity != b.Validity || *st.NumUnseen != 3 {
		t.Errorf("STATUS a = %d messages, UIDNEXT %d, UIDVALIDITY %d; want 3, 4, %d", *st.NumMessages, st.UIDNext, st.UIDValidity, b.Validity)
	}
	if _, err := c.Status("nosuch", &imap.StatusOptions{NumMessages: true}).Wait(); err == nil {
		t.Error("STATUS nosuch succeeded")
	}

	// LOGIN takes any name and password, and PLAIN too.
	if err := dial(t, addr).Login("anyone", "anything").Wait(); err != nil {
		t.Errorf("LOGIN = %v", err)
	}
	if err := dial(t, addr).Authenticate(sasl.NewPlainClient("", "anyone", "secret")); err != nil {
		t.Errorf("AUTHENTICATE PLAIN = %v", err)
	}
}

func TestFetch(t *testing.T) {
	a, cns := smallArchive(t, 5)
	addr := serve(t, a, Options{})
	c := login(t, addr)
	sel, err := c.Select("a", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	if sel.NumMessages != 5 || sel.UIDNext != 6 || sel.UIDValidity == 0 {
		t.Fatalf("SELECT a = %+v", sel)
	}
	whole := &imap.FetchItemBodySection{Peek: true}
	header := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, Peek: true}
	text := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierText, Peek: true}
	part := &imap.FetchItemBodySection{Peek: true, Partial: &imap.SectionPartial{Offset: 6, Size: 10}}
	fields := &imap.FetchItemBodySection{Specifier: imap.PartSpecifierHeader, HeaderFields: []string{"Subject"}, Peek: true}
	msgs, err := c.Fetch(imap.SeqSetNum(1, 2, 3, 4, 5), &imap.FetchOptions{
		UID: true, Flags: true, InternalDate: true, RFC822Size: true, Envelope: true,
		BodyStructure: &imap.FetchItemBodyStructure{Extended: true},
		BodySection:   []*imap.FetchItemBodySection{whole, header, text, part, fields},
	}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	if len(msgs) != 5 {
		t.Fatalf("FETCH 1:5 = %d messages, want 5", len(msgs))
	}
	for i, m := range msgs {
		raw := a.Get(cns[i])
		wire := mailwire.AppendCRLF(nil, raw)
		body := mailwire.BodyStart(wire)
		if m.SeqNum != uint32(i+1) || m.UID != imap.UID(i+1) {
			t.Errorf("message %d: seq %d, UID %d", i+1, m.SeqNum, m.UID)
		}
		if got := m.FindBodySection(whole); !bytes.Equal(got, wire) {
			t.Errorf("message %d: BODY[] = %q, want %q", i+1, got, wire)
		}
		if m.RFC822Size != int64(len(wire)) {
			t.Errorf("message %d: RFC822.SIZE %d, want %d", i+1, m.RFC822Size, len(wire))
		}
		if got := m.FindBodySection(header); !bytes.Equal(got, wire[:body]) {
			t.Errorf("message %d: BODY[HEADER] = %q", i+1, got)
		}
		if got := m.FindBodySection(text); !bytes.Equal(got, wire[body:]) {
			t.Errorf("message %d: BODY[TEXT] = %q", i+1, got)
		}
		if got := m.FindBodySection(part); !bytes.Equal(got, wire[6:16]) {
			t.Errorf("message %d: BODY[]<6.10> = %q, want %q", i+1, got, wire[6:16])
		}
		if got, want := string(m.FindBodySection(fields)), fmt.Sprintf("Subject: message %d\r\n\r\n", i+1); got != want {
			t.Errorf("message %d: BODY[HEADER.FIELDS (Subject)] = %q, want %q", i+1, got, want)
		}
		if m.Envelope == nil || m.Envelope.Subject != fmt.Sprintf("message %d", i+1) || len(m.Envelope.From) != 1 || m.Envelope.From[0].Host != "example.org" ||
			m.Envelope.MessageID != fmt.Sprintf("m%d@example.org", i+1) {
			t.Errorf("message %d: ENVELOPE %+v", i+1, m.Envelope)
		}
		if bs, ok := m.BodyStructure.(*imap.BodyStructureSinglePart); !ok || bs.Type != "text" || bs.Size != uint32(len(wire)-body) {
			t.Errorf("message %d: BODYSTRUCTURE %+v", i+1, m.BodyStructure)
		}
		if want := time.Date(2006, 1, 2, 15, 4, i+1, 0, time.UTC); !m.InternalDate.Equal(want) {
			t.Errorf("message %d: INTERNALDATE %v, want %v", i+1, m.InternalDate, want)
		}
		if len(m.Flags) != 0 {
			t.Errorf("message %d: FLAGS %v, want none", i+1, m.Flags)
		}
	}

	// A range in reverse is the same range; numbers of no message are
	// left out. (A range past the end holds the last message, which
	// go-imap's client drops as not asked for: TestSpans.)
	for _, tt := range []struct {
		set  imap.UIDSet
		want []imap.UID
	}{
		{imap.UIDSetNum(9), nil},
		{uidRange(4, 2), []imap.UID{2, 3, 4}},
		{uidRange(1, 0), []imap.UID{1, 2, 3, 4, 5}},
		{append(uidRange(2, 3), uidRange(3, 4)...), []imap.UID{2, 3, 4}},
	} {
		msgs, err := c.Fetch(tt.set, &imap.FetchOptions{UID: true}).Collect()
		if err != nil {
			t.Fatal(err)
		}
		var got []imap.UID
		for _, m := range msgs {
			got = append(got, m.UID)
		}
		if !slices.Equal(got, tt.want) {
			t.Errorf("UID FETCH %v = %v, want %v", tt.set, got, tt.want)
		}
	}
}

func uidRange(lo, hi imap.UID) imap.UIDSet {
	var s imap.UIDSet
	s.AddRange(lo, hi)
	return s
}

func TestReadOnly(t *testing.T) {
	a, _ := smallArchive(t, 2)
	addr := serve(t, a, Options{})
	c := login(t, addr)
	if _, err := c.Select("nosuch", nil).Wait(); err == nil {
		t.Error("SELECT nosuch succeeded")
	}
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	no := func(what string, err error) {
		t.Helper()
		var ie *imap.Error
		if !errors.As(err, &ie) || ie.Type != imap.StatusResponseTypeNo {
			t.Errorf("%s = %v, want NO", what, err)
		}
	}
	_, err := c.Store(imap.SeqSetNum(1), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagDeleted}}, nil).Collect()
	no("STORE +FLAGS \\Deleted", err)
	_, err = c.Copy(imap.SeqSetNum(1), "b").Wait()
	no("COPY", err)
	_, err = c.Move(imap.SeqSetNum(1), "b").Wait()
	no("MOVE", err)
	no("CREATE", c.Create("new", nil).Wait())
	no("DELETE", c.Delete("a").Wait())
	no("RENAME", c.Rename("a", "z", nil).Wait())
	no("UNSUBSCRIBE", c.Unsubscribe("a").Wait())
	ac := c.Append("a", 5, nil)
	ac.Write([]byte("x\r\n\r\n"))
	ac.Close()
	_, err = ac.Wait()
	no("APPEND", err)
	if err := c.Subscribe("a").Wait(); err != nil {
		t.Errorf("SUBSCRIBE = %v, want OK", err)
	}
	if _, err := c.Expunge().Collect(); err != nil {
		t.Errorf("EXPUNGE = %v, want OK (nothing to expunge)", err)
	}
	// Nothing changed.
	if sel, err := c.Select("a", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil || sel.NumMessages != 2 || len(sel.PermanentFlags) != 0 {
		t.Errorf("EXAMINE a = %+v, %v; want 2 messages, no permanent flags", sel, err)
	}
	if sel, _ := c.Select("b", nil).Wait(); sel == nil || sel.NumMessages != 1 {
		t.Errorf("SELECT b = %+v, want 1 message", sel)
	}
}

// TestSessionFlags: flags other than \Deleted are kept for the session:
// STORE, FETCH without PEEK, SEARCH see them; another session does not.
func TestSessionFlags(t *testing.T) {
	a, _ := smallArchive(t, 3)
	addr := serve(t, a, Options{})
	c := login(t, addr)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Store(imap.UIDSetNum(2), &imap.StoreFlags{Op: imap.StoreFlagsAdd, Flags: []imap.Flag{imap.FlagFlagged, imap.FlagSeen}}, nil).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].UID != 2 || !slices.Equal(msgs[0].Flags, []imap.Flag{imap.FlagFlagged, imap.FlagSeen}) {
		t.Fatalf("UID STORE 2 +FLAGS = %+v, %v", msgs, err)
	}
	if _, err := c.Store(imap.SeqSetNum(2), &imap.StoreFlags{Op: imap.StoreFlagsDel, Silent: true, Flags: []imap.Flag{imap.FlagFlagged}}, nil).Collect(); err != nil {
		t.Fatal(err)
	}
	// BODY[] without PEEK sets \Seen.
	msgs, err = c.Fetch(imap.SeqSetNum(3), &imap.FetchOptions{BodySection: []*imap.FetchItemBodySection{{}}}).Collect()
	if err != nil || len(msgs) != 1 || !slices.Equal(msgs[0].Flags, []imap.Flag{imap.FlagSeen}) {
		t.Fatalf("FETCH 3 BODY[] = %+v, %v; want FLAGS (\\Seen)", msgs, err)
	}
	data, err := c.UIDSearch(&imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	if err != nil || !slices.Equal(data.AllUIDs(), []imap.UID{2, 3}) {
		t.Errorf("UID SEARCH SEEN = %v, %v; want [2 3]", data.AllUIDs(), err)
	}
	data, err = c.UIDSearch(&imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, nil).Wait()
	if err != nil || !slices.Equal(data.AllUIDs(), []imap.UID{1}) {
		t.Errorf("UID SEARCH UNSEEN = %v, %v; want [1]", data.AllUIDs(), err)
	}
	other := login(t, addr)
	if _, err := other.Select("a", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err = other.Fetch(imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{Flags: true, BodySection: []*imap.FetchItemBodySection{{}}}).Collect()
	if err != nil || len(msgs) != 3 {
		t.Fatalf("FETCH in another session = %v", err)
	}
	for _, m := range msgs {
		if len(m.Flags) != 0 {
			t.Errorf("another session (EXAMINE) sees flags %v on %d", m.Flags, m.SeqNum)
		}
	}
}

func TestSearch(t *testing.T) {
	a := archivetest.New(t)
	a.Put("a",
		[]byte("From: Alice <alice@example.org>\nTo: team@example.org\nSubject: Zebra crossing\nDate: Tue, 3 Jan 2006 10:00:00 +0000\nMessage-ID: <1@x>\n\nNothing to see.\n"),
		[]byte("From: Bob <bob@example.org>\nTo: other@example.net\nSubject: =?utf-8?q?caf=C3=A9?=\nDate: Thu, 5 Jan 2006 10:00:00 +0000\nMessage-ID: <2@x>\n\nThe zebras are running.\n"),
		[]byte("From: Carol <carol@example.org>\nTo: team@example.org\nSubject: Re: Zebra crossing\nDate: Sat, 7 Jan 2006 10:00:00 +0000\nMessage-ID: <3@x>\n\n"+strings.Repeat("long text ", 200)+"\n"),
	)
	a.Put("b", []byte("From: Alice <alice@example.org>\nSubject: zebra elsewhere\nMessage-ID: <4@x>\n\nzebra\n"))
	a.Sync()
	addr := serve(t, a, Options{})
	c := login(t, addr)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	day := func(d int) time.Time { return time.Date(2006, 1, d, 0, 0, 0, 0, time.UTC) }
	for _, tt := range []struct {
		name string
		c    imap.SearchCriteria
		want []imap.UID
	}{
		{"all", imap.SearchCriteria{}, []imap.UID{1, 2, 3}},
		{"subject", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "zebra"}}}, []imap.UID{1, 3}},
		{"subject decoded", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "CAFÉ"}}}, []imap.UID{2}},
		{"from", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "bob@"}}}, []imap.UID{2}},
		{"to (read from the store)", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "To", Value: "TEAM@"}}}, []imap.UID{1, 3}},
		{"header present", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: ""}}}, []imap.UID{1, 2, 3}},
		{"message-id", imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Message-ID", Value: "<2@x>"}}}, []imap.UID{2}},
		{"text word", imap.SearchCriteria{Text: []string{"zebra"}}, []imap.UID{1, 2, 3}},
		{"text prefix", imap.SearchCriteria{Text: []string{"runn"}}, []imap.UID{2}},
		{"body", imap.SearchCriteria{Body: []string{"zebras"}}, []imap.UID{2}},
		{"body not subject", imap.SearchCriteria{Body: []string{"crossing"}}, nil},
		{"since", imap.SearchCriteria{Since: day(5)}, []imap.UID{2, 3}},
		{"before", imap.SearchCriteria{Before: day(5)}, []imap.UID{1}},
		{"on", imap.SearchCriteria{Since: day(5), Before: day(6)}, []imap.UID{2}},
		{"larger", imap.SearchCriteria{Larger: 1000}, []imap.UID{3}},
		{"smaller", imap.SearchCriteria{Smaller: 1000}, []imap.UID{1, 2}},
		{"unseen", imap.SearchCriteria{NotFlag: []imap.Flag{imap.FlagSeen}}, []imap.UID{1, 2, 3}},
		{"seen", imap.SearchCriteria{Flag: []imap.Flag{imap.FlagSeen}}, nil},
		{"not", imap.SearchCriteria{Not: []imap.SearchCriteria{{Header: []imap.SearchCriteriaHeaderField{{Key: "From", Value: "alice"}}}}}, []imap.UID{2, 3}},
		{"or", imap.SearchCriteria{Or: [][2]imap.SearchCriteria{{{Larger: 1000}, {Body: []string{"zebras"}}}}}, []imap.UID{2, 3}},
		{"uid", imap.SearchCriteria{UID: []imap.UIDSet{uidRange(2, 0)}}, []imap.UID{2, 3}},
		{"uid and subject", imap.SearchCriteria{UID: []imap.UIDSet{uidRange(2, 9)}, Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "zebra"}}}, []imap.UID{3}},
		{"seq", imap.SearchCriteria{SeqNum: []imap.SeqSet{imap.SeqSetNum(1, 3)}}, []imap.UID{1, 3}},
	} {
		data, err := c.UIDSearch(&tt.c, nil).Wait()
		if err != nil {
			t.Errorf("%s: UID SEARCH = %v", tt.name, err)
			continue
		}
		if got := data.AllUIDs(); !slices.Equal(got, tt.want) {
			t.Errorf("%s: UID SEARCH = %v, want %v", tt.name, got, tt.want)
		}
	}
	data, err := c.Search(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "zebra"}}}, nil).Wait()
	if err != nil || !slices.Equal(data.AllSeqNums(), []uint32{1, 3}) {
		t.Errorf("SEARCH SUBJECT zebra = %v, %v; want [1 3]", data.AllSeqNums(), err)
	}
	// ESEARCH's MIN, MAX and COUNT.
	data, err = c.UIDSearch(&imap.SearchCriteria{Text: []string{"zebra"}}, &imap.SearchOptions{ReturnMin: true, ReturnMax: true, ReturnCount: true}).Wait()
	if err != nil || data.Min != 1 || data.Max != 3 || data.Count != 3 {
		t.Errorf("UID SEARCH RETURN (MIN MAX COUNT) TEXT zebra = %+v, %v", data, err)
	}
}

// TestSearchWords: a TEXT string is searched when the index reads a word
// in it (catalog.HasWord), as a Roman numeral, which has no letter or
// decimal digit; one without is turned away with NO.
func TestSearchWords(t *testing.T) {
	a := archivetest.New(t)
	a.Put("a",
		[]byte("From: Alice <alice@example.org>\nSubject: Chapter XII\nDate: Tue, 3 Jan 2006 10:00:00 +0000\nMessage-ID: <1@x>\n\nChapter \u216b, of the end.\n"),
		[]byte("From: Bob <bob@example.org>\nSubject: other\nDate: Thu, 5 Jan 2006 10:00:00 +0000\nMessage-ID: <2@x>\n\nNothing of the kind.\n"),
	)
	a.Sync()
	c := login(t, serve(t, a, Options{}))
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	data, err := c.UIDSearch(&imap.SearchCriteria{Text: []string{"\u217b"}}, nil).Wait()
	if got := data.AllUIDs(); err != nil || !slices.Equal(got, []imap.UID{1}) {
		t.Errorf("UID SEARCH TEXT \u217b = %v, %v; want [1]", got, err)
	}
	// U+E000 joins the pairs of common words in the index: "of\ue000the"
	// is no pair a reader can find.
	data, err = c.UIDSearch(&imap.SearchCriteria{Text: []string{"of\ue000the"}}, nil).Wait()
	if got := data.AllUIDs(); err != nil || len(got) != 0 {
		t.Errorf("UID SEARCH TEXT of\\ue000the = %v, %v; want none", got, err)
	}
	if _, err := c.UIDSearch(&imap.SearchCriteria{Text: []string{"\u2014"}}, nil).Wait(); err == nil {
		t.Errorf("UID SEARCH TEXT \u2014 (an em dash, no word) succeeded; want NO")
	}
}

// TestSearchTimeout: a search that reads every message from the store
// gives up at Options.SearchTimeout with NO [LIMIT].
func TestSearchTimeout(t *testing.T) {
	a, _ := smallArchive(t, 300)
	addr := serve(t, a, Options{SearchTimeout: time.Nanosecond})
	c := login(t, addr)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		t.Fatal(err)
	}
	_, err := c.Search(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "To", Value: "nobody"}}}, nil).Wait()
	var ie *imap.Error
	if !errors.As(err, &ie) || ie.Code != imap.ResponseCodeLimit {
		t.Errorf("a search past its time = %v, want NO [LIMIT]", err)
	}
	// The index answers without reading the store.
	if _, err := c.Search(&imap.SearchCriteria{Header: []imap.SearchCriteriaHeaderField{{Key: "Subject", Value: "nobody"}}}, nil).Wait(); err != nil {
		t.Errorf("SEARCH SUBJECT = %v", err)
	}
}

// TestIdle: a message stored and indexed while a client idles is
// announced (EXISTS) with a UID above UIDNEXT; one removed from the
// catalog is expunged; one moved to another list is expunged here and
// comes with a new UID there.
func TestIdle(t *testing.T) {
	a, cns := smallArchive(t, 3)
	addr := serve(t, a, Options{})
	c := login(t, addr)
	sel, err := c.Select("a", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	idle, err := c.Idle()
	if err != nil {
		t.Fatal(err)
	}
	a.Put("a", mail(50, "new while idling"))
	a.Sync()
	c.await(t, "a new message", false, func(exists, _ []uint32) bool { return slices.Contains(exists, 4) })

	// Removal: the catalog row deleted, as a removal deletes it.
	removeRow(t, a, cns[1])
	c.await(t, "a removed message", false, func(_, expunged []uint32) bool { return slices.Equal(expunged, []uint32{2}) })
	if err := idle.Close(); err != nil {
		t.Fatal(err)
	}
	if err := idle.Wait(); err != nil {
		t.Fatal(err)
	}
	msgs, err := c.Fetch(imap.SeqSetNum(1, 2, 3), &imap.FetchOptions{UID: true}).Collect()
	if err != nil {
		t.Fatal(err)
	}
	var uids []imap.UID
	for _, m := range msgs {
		uids = append(uids, m.UID)
	}
	if !slices.Equal(uids, []imap.UID{1, 3, sel.UIDNext}) {
		t.Errorf("UIDs after a message came and one left = %v, want [1 3 %d]", uids, sel.UIDNext)
	}

	// Move to b, seen by a client of b.
	cb := login(t, addr)
	selB, err := cb.Select("b", nil).Wait()
	if err != nil {
		t.Fatal(err)
	}
	moveRow(t, a, cns[0], "b")
	c.await(t, "a moved message", true, func(_, expunged []uint32) bool { return slices.Equal(expunged, []uint32{2, 1}) })
	cb.await(t, "a message moved in", true, func(exists, _ []uint32) bool { return slices.Contains(exists, 2) })
	msgs, err = cb.Fetch(imap.SeqSetNum(2), &imap.FetchOptions{UID: true, Envelope: true}).Collect()
	if err != nil || len(msgs) != 1 || msgs[0].UID != selB.UIDNext || msgs[0].Envelope.MessageID != "m1@example.org" {
		t.Errorf("the moved message in b = %+v, %v; want UID %d", msgs, err, selB.UIDNext)
	}
}

// removeRow removes a message from the archive, as resolver remove
// does; the catalog's follower (the test's Sync) takes it out.
func removeRow(t *testing.T, a *archivetest.Archive, cn string) {
	t.Helper()
	a.Remove(cn)
	a.Sync()
}

func moveRow(t *testing.T, a *archivetest.Archive, cn, list string) {
	t.Helper()
	execCatalog(t, a, `UPDATE messages SET list = ? WHERE cn = ?`, list, cn)
}

// TestUIDsStable: a message keeps its UID and the mailbox its
// UIDVALIDITY across a restart and a reindex (catalog.Rebuild); a
// catalog deleted and built again gets another UIDVALIDITY.
func TestUIDsStable(t *testing.T) {
	a, _ := smallArchive(t, 6)
	// UIDs that the feed's order alone would not give, as after
	// removals and moves.
	removed := a.Put("a", mail(100, "removed"))[0]
	a.Sync()
	removeRow(t, a, removed)
	a.Put("a", mail(101, "after the removed one"))
	a.Sync()
	execCatalog(t, a, `UPDATE meta SET value = '777' WHERE key = 'uidvalidity'`)
	execCatalog(t, a, `UPDATE mailboxes SET validity = 777`)
	snapshot := func(what string) (uint32, map[imap.UID]string) {
		t.Helper()
		addr, stop := start(t, a, Options{})
		defer stop()
		c := login(t, addr)
		sel, err := c.Select("a", nil).Wait()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, Envelope: true}).Collect()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		ids := map[imap.UID]string{}
		for _, m := range msgs {
			ids[m.UID] = m.Envelope.MessageID
		}
		c.Logout().Wait()
		return sel.UIDValidity, ids
	}
	validity, want := snapshot("first")
	if validity != 777 || len(want) != 7 || want[8] != "m101@example.org" {
		t.Fatalf("UIDVALIDITY %d, messages %v; want 777, 7 messages, m101 as UID 8", validity, want)
	}
	same := func(what string) {
		t.Helper()
		v, got := snapshot(what)
		if v != validity || fmt.Sprint(got) != fmt.Sprint(want) {
			t.Errorf("%s: UIDVALIDITY %d, UIDs %v; want %d, %v", what, v, got, validity, want)
		}
	}
	// Restart: the catalog closed and opened again.
	a.Catalog.Close()
	a.Catalog = a.OpenCatalog()
	same("after a restart")
	// Reindex.
	a.Catalog.Close()
	if _, err := catalog.Rebuild(t.Context(), a.CatalogPath(), a.Store, catalog.SyncOptions{}, catalog.Options{}); err != nil {
		t.Fatal(err)
	}
	a.Catalog = a.OpenCatalog()
	same("after a reindex") // the removed message stays out
	// Deleted.
	a.Catalog.Close()
	for _, suffix := range []string{"", "-wal", "-shm"} {
		os.Remove(a.CatalogPath() + suffix)
	}
	a.Catalog = a.OpenCatalog()
	a.Sync()
	if v, _ := snapshot("after the catalog was deleted"); v == validity {
		t.Errorf("a catalog built anew kept UIDVALIDITY %d", v)
	}
}

// TestHostile: what a hostile client sends is bounded.
func TestHostile(t *testing.T) {
	a, _ := smallArchive(t, 2)
	addr := serve(t, a, Options{})
	raw := func() (net.Conn, *bufio.Reader) {
		conn, err := net.Dial("tcp", addr)
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { conn.Close() })
		conn.SetDeadline(time.Now().Add(10 * time.Second))
		br := bufio.NewReader(conn)
		if g, _ := br.ReadString('\n'); !strings.HasPrefix(g, "* OK") {
			t.Fatalf("greeting %q", g)
		}
		return conn, br
	}
	// A command line past the limit ends the connection.
	conn, br := raw()
	fmt.Fprintf(conn, "a1 LOGIN %s x\r\n", strings.Repeat("u", 200<<10))
	if _, err := io.ReadAll(br); err != nil && !errors.Is(err, io.EOF) && !isReset(err) {
		t.Errorf("after a huge command: %v", err)
	}
	// A literal too big for a command is refused before it is read.
	conn, br = raw()
	// (imapserver answers once the line ends.)
	fmt.Fprintf(conn, "a1 LOGIN {100000000}\r\n\r\n")
	if line, _ := br.ReadString('\n'); !strings.Contains(line, "NO") && !strings.Contains(line, "BAD") {
		t.Errorf("a 100 MB literal: %q, want NO or BAD", line)
	}
	// An unknown command before login ends the connection.
	conn, br = raw()
	fmt.Fprintf(conn, "GET / HTTP/1.1\r\n")
	rest, _ := io.ReadAll(br)
	if !strings.Contains(string(rest), "BYE") {
		t.Errorf("an HTTP request: %q, want BYE", rest)
	}
	// Connections beyond the limit are refused with BYE.
	addr = serve(t, a, Options{Limits: netserve.Options{MaxConnsPerIP: 2}})
	raw()
	raw()
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	conn.SetDeadline(time.Now().Add(10 * time.Second))
	if g, _ := bufio.NewReader(conn).ReadString('\n'); !strings.HasPrefix(g, "* BYE") {
		t.Errorf("a connection over the limit: %q, want * BYE", g)
	}
}

func isReset(err error) bool {
	return strings.Contains(err.Error(), "connection reset")
}

func TestSpans(t *testing.T) {
	v := &view{uids: []uint32{2, 3, 5, 8, 13}}
	seq := func(rs ...imap.SeqRange) imap.SeqSet { return imap.SeqSet(rs) }
	uid := func(rs ...imap.UIDRange) imap.UIDSet { return imap.UIDSet(rs) }
	for _, tt := range []struct {
		name string
		set  imap.NumSet
		want []span
	}{
		{"all", seq(imap.SeqRange{Start: 1, Stop: 0}), []span{{1, 5}}},
		{"star", seq(imap.SeqRange{}), []span{{5, 5}}},
		{"past the end", seq(imap.SeqRange{Start: 9, Stop: 12}), nil},
		{"star:past the end", seq(imap.SeqRange{Start: 9, Stop: 0}), []span{{5, 5}}},
		{"reversed", seq(imap.SeqRange{Start: 4, Stop: 2}), []span{{2, 4}}},
		{"overlapping and touching", seq(imap.SeqRange{Start: 4, Stop: 5}, imap.SeqRange{Start: 1, Stop: 2}, imap.SeqRange{Start: 2, Stop: 3}), []span{{1, 5}}},
		{"apart", seq(imap.SeqRange{Start: 5, Stop: 5}, imap.SeqRange{Start: 1, Stop: 1}), []span{{1, 1}, {5, 5}}},
		{"uids", uid(imap.UIDRange{Start: 3, Stop: 8}), []span{{2, 4}}},
		{"uids between", uid(imap.UIDRange{Start: 6, Stop: 7}), nil},
		{"uid star", uid(imap.UIDRange{}), []span{{5, 5}}},
		{"uids past the end, star", uid(imap.UIDRange{Start: 20, Stop: 0}), []span{{5, 5}}},
		{"uids reversed", uid(imap.UIDRange{Start: 9, Stop: 1}), []span{{1, 4}}},
	} {
		if got := v.spans(tt.set); !slices.Equal(got, tt.want) {
			t.Errorf("%s: spans(%v) = %v, want %v", tt.name, tt.set, got, tt.want)
		}
	}
	if got := (&view{}).spans(seq(imap.SeqRange{Start: 1, Stop: 0})); got != nil {
		t.Errorf("spans of an empty mailbox = %v", got)
	}
	if got := intersect([]span{{1, 4}, {6, 9}}, []span{{3, 7}}); !slices.Equal(got, []span{{3, 4}, {6, 7}}) {
		t.Errorf("intersect = %v", got)
	}
}
