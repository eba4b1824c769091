package changes

import (
	"bytes"
	"errors"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

// answer is what sample wrote.
type answer struct {
	auth    *storetest.Authority
	bytes   []byte
	msgs    []store.Stored
	removal store.Removal
	move    store.Move
	leases  map[uint32]callnumber.Lease
}

// sample writes an answer of two runs, three messages and a removal.
func sample(t testing.TB) answer {
	a := storetest.NewAuthority(t, shuffle.Mix)
	leases := map[uint32]callnumber.Lease{}
	var b bytes.Buffer
	fw, err := NewWriter(&b, a.Binding())
	if err != nil {
		t.Fatal(err)
	}
	added := time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)
	var msgs []store.Stored
	for i, raw := range [][]byte{storetest.Mail("a@x", "a"), []byte("no newline at the end"), {}} {
		run := uint32(1 + i/2)
		m := store.Stored{Number: a.Number(t, run, i), Raw: raw, Digest: store.DigestOf(raw), MessageID: "id", List: "l", Added: added}
		if i%2 == 0 {
			leases[run] = a.Lease(run)
			if err := fw.Lease(leases[run]); err != nil {
				t.Fatal(err)
			}
		}
		if err := fw.Message(m); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, m)
	}
	mv := store.Move{Number: msgs[1].Number, List: "other-list", Moved: added.Add(time.Minute)}
	if err := fw.Move(mv); err != nil {
		t.Fatal(err)
	}
	r := store.Removal{Number: msgs[0].Number, Digest: msgs[0].Digest, MessageIDSum: store.MessageIDSum("a@x"), Content: store.ContentOf(msgs[0].Raw, "a@x"), Removed: added.Add(time.Hour), Reason: "spam"}
	if err := fw.Removal(r); err != nil {
		t.Fatal(err)
	}
	if err := fw.End("s42", true); err != nil {
		t.Fatal(err)
	}
	return answer{a, b.Bytes(), msgs, r, mv, leases}
}

func TestRoundTrip(t *testing.T) {
	ans := sample(t)
	a, msgs, removal := ans.auth, ans.msgs, ans.removal
	fr, err := NewReader(bytes.NewReader(ans.bytes), Options{})
	if err != nil {
		t.Fatal(err)
	}
	if fr.Binding() != a.Binding() {
		t.Errorf("Binding() = %+v, want %+v", fr.Binding(), a.Binding())
	}
	var got []Record
	for {
		rec, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		got = append(got, rec)
	}
	var kinds []string
	for _, r := range got {
		kinds = append(kinds, r.Kind)
	}
	if k := strings.Join(kinds, " "); k != "lease message message lease message move removal end" {
		t.Fatalf("records %q, want lease, message, message, lease, message, move, removal, end", k)
	}
	var gotMsgs []store.Stored
	for _, r := range got {
		switch r.Kind {
		case KindMessage:
			gotMsgs = append(gotMsgs, r.Message)
		case KindLease:
			want := ans.leases[r.Lease.Run]
			if r.Lease.Nonce != want.Nonce || r.Lease.Authority != want.Authority || !r.Lease.IssuedAt.Equal(want.IssuedAt) || r.Lease.Program != want.Program {
				t.Errorf("lease = %+v, want %+v", r.Lease, want)
			}
		case KindRemoval:
			if r.Removal.Number != removal.Number || r.Removal.Digest != removal.Digest || r.Removal.MessageIDSum != removal.MessageIDSum || r.Removal.Content != removal.Content || removal.Content == (store.Digest{}) || !r.Removal.Removed.Equal(removal.Removed) || r.Removal.Reason != removal.Reason {
				t.Errorf("removal = %+v, want %+v", r.Removal, removal)
			}
		case KindMove:
			if r.Move.Number != ans.move.Number || r.Move.List != ans.move.List || !r.Move.Moved.Equal(ans.move.Moved) {
				t.Errorf("move = %+v, want %+v", r.Move, ans.move)
			}
		case KindEnd:
			if r.Next != "s42" || !r.More {
				t.Errorf("end = %+v, want s42, more", r)
			}
		}
	}
	for i, m := range gotMsgs {
		w := msgs[i]
		if m.Number != w.Number || !bytes.Equal(m.Raw, w.Raw) || m.Digest != w.Digest || m.MessageID != w.MessageID || m.List != w.List || !m.Added.Equal(w.Added) {
			t.Errorf("message %d = %+v, want %+v", i, m, w)
		}
	}
}

// TestReaderRefuses: every damage a hostile or broken origin can do is an
// error that says what, never a record with other bytes.
func TestReaderRefuses(t *testing.T) {
	ans := sample(t)
	s := string(ans.bytes)
	second := ans.msgs[1]
	tests := []struct {
		name   string
		answer string
		want   error
		says   string
	}{
		{"cut in the middle of a message", s[:strings.Index(s, "no newline")+5], ErrTruncated, "inside message"},
		{"cut before the end record", s[:strings.LastIndex(s, `{"type":"end"`)], ErrTruncated, "after 8 records"},
		{"cut inside a line", s[:strings.LastIndex(s, `{"type":"end"`)+10], ErrTruncated, "inside record 9"},
		{"other bytes than the digest", strings.Replace(s, "no newline at the end", "no newline at the END", 1), ErrFormat, "digest"},
		{"a size that lies", strings.Replace(s, `"size":21`, `"size":20`, 1), ErrFormat, "not followed by a line feed"},
		{"a message too large", strings.Replace(s, `"size":21`, `"size":99999999999`, 1), ErrFormat, "more than"},
		{"a number of another authority", strings.Replace(s, second.Number.String(), "00000000", 1), ErrFormat, ""},
		{"a message before its run's lease", s[:strings.Index(s, `{"type":"lease"`)] + s[strings.Index(s, `{"type":"message"`):], ErrFormat, "no lease before it"},
		{"not a feed", "<html>hello</html>\n", ErrFormat, ""},
		{"another version", strings.Replace(s, `"version":1`, `"version":2`, 1), ErrFormat, "version 2"},
		{"an unknown record", strings.Replace(s, `{"type":"end"`, `{"type":"nonsense"`, 1), ErrFormat, "unknown kind"},
		{"a line too long", strings.Replace(s, `"list":"l"`, `"list":"`+strings.Repeat("l", MaxHeader)+`"`, 1), ErrFormat, "a line of more than"},
		{"a removal without a date", strings.Replace(s, `"removed_at":"2024-01-02T04:04:05Z"`, `"x":1`, 1), ErrFormat, "without its date"},
		{"a move without a date", strings.Replace(s, `"moved_at":"2024-01-02T03:05:05Z"`, `"x":1`, 1), ErrFormat, "without its date"},
		{"a move to a list no URL holds", strings.Replace(s, `"list":"other-list"`, `"list":"../etc"`, 1), ErrFormat, "list"},
		{"a removal reason of two lines", strings.Replace(s, `"reason":"spam"`, `"reason":"sp\nam"`, 1), ErrFormat, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			fr, err := NewReader(strings.NewReader(tt.answer), Options{})
			for err == nil {
				_, err = fr.Next()
			}
			if errors.Is(err, io.EOF) || !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Errorf("reading it: %v, want %v saying %q", err, tt.want, tt.says)
			}
		})
	}
}

// FuzzReader: whatever an origin sends, the reader returns records whose
// bytes match their digest and numbers that decode, or an error.
func FuzzReader(f *testing.F) {
	ans := sample(f)
	f.Add(ans.bytes)
	f.Add(ans.bytes[:len(ans.bytes)/2])
	f.Add([]byte(`{"type":"feed","version":1,"authority":"x","scheme":"mix","key":"` + strings.Repeat("00", 32) + "\"}\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr, err := NewReader(bytes.NewReader(b), Options{MaxMessage: 1 << 20})
		if err != nil {
			return
		}
		codec, err := fr.Binding().Codec()
		if err != nil {
			t.Fatalf("a reader with a binding whose codec fails: %v", err)
		}
		for range 1000 {
			rec, err := fr.Next()
			if err != nil {
				return
			}
			switch rec.Kind {
			case KindMessage:
				if store.DigestOf(rec.Message.Raw) != rec.Message.Digest {
					t.Fatalf("a message whose bytes are not its digest")
				}
				if _, err := codec.Decode(rec.Message.Number); err != nil {
					t.Fatalf("a message whose number does not decode: %v", err)
				}
			case KindMove:
				if store.CheckList(rec.Move.List) != nil || rec.Move.Moved.IsZero() {
					t.Fatalf("a move to %q at %v", rec.Move.List, rec.Move.Moved)
				}
			case KindLease:
				if rec.Lease.Run == 0 || rec.Lease.Run > callnumber.MaxRun {
					t.Fatalf("a lease of run %d", rec.Lease.Run)
				}
			}
		}
	})
}

// TestReasonDirectionMarks: an origin's removal whose reason holds marks
// that set the direction of text (recorded before CheckReason refused
// them) is read without them: the removal holds, the marks do not.
func TestReasonDirectionMarks(t *testing.T) {
	s := strings.Replace(string(sample(t).bytes), `"reason":"spam"`, `"reason":"sp\u202eam"`, 1)
	fr, err := NewReader(strings.NewReader(s), Options{})
	if err != nil {
		t.Fatal(err)
	}
	found := false
	for {
		rec, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("reading a removal whose reason has U+202E: %v", err)
		}
		if rec.Kind == KindRemoval {
			found = true
			if rec.Removal.Reason != "spam" {
				t.Errorf("reason %q, want spam", rec.Removal.Reason)
			}
		}
	}
	if !found {
		t.Error("no removal read")
	}
}
