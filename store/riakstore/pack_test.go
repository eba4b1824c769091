package riakstore

import (
	"bytes"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

// Tests of the encodings and decisions that need no Riak node.

func obj(v []byte) *riak.Object { return &riak.Object{Value: v} }

// entryOf returns a pack entry of raw, its record uncompressed (a large
// one's stub without raw).
func entryOf(seq uint16, raw string, added time.Time, large bool) packEntry {
	rec := record.Message{Digest: store.DigestOf([]byte(raw)), Added: added, MessageID: "id" + raw, Raw: []byte(raw)}
	if large {
		rec.Raw = nil
	}
	return packEntry{seq: seq, large: large, rec: record.AppendMessage(nil, rec)}
}

// zstdEntryOf returns the entry of raw compressed (without a dictionary).
func zstdEntryOf(t *testing.T, seq uint16, raw string, added time.Time) packEntry {
	t.Helper()
	var c record.Codec
	rec, err := c.Append(nil, record.Message{Digest: store.DigestOf([]byte(raw)), Added: added, MessageID: "id" + raw, Raw: []byte(raw)}, nil)
	if err != nil || rec[0] != record.Version2 {
		t.Fatalf("Append(%.20q) = version %d, %v; want a compressed record", raw, rec[0], err)
	}
	return packEntry{seq: seq, rec: rec}
}

// testDecode decodes records that need no dictionary.
func testDecode(rec []byte) (record.Message, error) {
	var c record.Codec
	return c.Decode(rec, nil)
}

// removedOf returns the entry of raw's removal at seq.
func removedOf(t *testing.T, seq uint16, raw string, when time.Time) packEntry {
	t.Helper()
	r := store.Removal{Digest: store.DigestOf([]byte(raw)), MessageIDSum: store.MessageIDSum("id" + raw), Removed: when.Truncate(time.Second), Reason: "spam"}
	return packEntry{seq: seq, removed: true, rec: record.MarshalRemoval(r)}
}

func packOf(entries ...packEntry) *riak.Object {
	m := make(map[uint16]packEntry)
	terms := make(map[string]bool)
	for _, e := range entries {
		m[e.seq] = e
		if r, err := record.DecodeMessage(e.rec); err == nil && r.MessageID != "" {
			terms[msgIDKey(r.MessageID)] = true
		}
	}
	return packObject(m, terms)
}

func TestPackRoundTrip(t *testing.T) {
	added := time.Date(2026, 1, 2, 3, 4, 5, 6, time.UTC)
	entries := []packEntry{
		entryOf(16, "", added, false),
		entryOf(17, "a\x00\xff\r\n", added, false),
		entryOf(20, "large one", added, true),
		zstdEntryOf(t, 21, strings.Repeat("compressed line\n", 100), added),
		entryOf(31, strings.Repeat("x", 70000), added, false),
		removedOf(t, 32, "gone", added),
	}
	b := encodePack(entries)
	if b[0] != packVersion {
		t.Fatalf("encodePack: version %d, want %d", b[0], packVersion)
	}
	got, err := decodePack(b)
	if err != nil {
		t.Fatalf("decodePack(encodePack) = %v", err)
	}
	if len(got) != len(entries) {
		t.Fatalf("decodePack returned %d entries, want %d", len(got), len(entries))
	}
	for i, e := range entries {
		g := got[i]
		if g.seq != e.seq || g.large != e.large || g.removed != e.removed || !bytes.Equal(g.rec, e.rec) {
			t.Errorf("entry %d = %d %v %v %d bytes, want %d %v %v %d bytes", i, g.seq, g.large, g.removed, len(g.rec), e.seq, e.large, e.removed, len(e.rec))
		}
	}
	// Every cut-short value is refused, never read as fewer entries.
	for n := range len(b) {
		if n > 200 && n < len(b)-200 && n%97 != 0 {
			continue
		}
		if _, err := decodePack(b[:n]); !errors.Is(err, record.ErrCorrupt) {
			t.Fatalf("decodePack(first %d of %d bytes) = %v, want %v", n, len(b), err, record.ErrCorrupt)
		}
	}
	for _, tt := range []struct {
		name string
		v    []byte
	}{
		{"trailing byte", append(bytes.Clone(b), 0)},
		{"version 3", append([]byte{3}, b[1:]...)},
		{"version 0", append([]byte{0}, b[1:]...)},
		{"version 1 without its compression byte", []byte{packVersion1}},
		{"version 1, compression 7", []byte{packVersion1, 7, 0}},
		{"entry kind 3", []byte{packVersion, 1, 0, 1, 3, 1, 0}},
	} {
		if _, err := decodePack(tt.v); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("decodePack(%s) = %v, want %v", tt.name, err, record.ErrCorrupt)
		}
	}
	// A large message's object: the version, then its record.
	rec := entries[3].rec
	v := encodeLarge(rec)
	if back, err := decodeLarge(v); err != nil || !bytes.Equal(back, rec) || v[0] != packVersion {
		t.Errorf("decodeLarge(encodeLarge) = %d bytes, %v; want the record back", len(back), err)
	}
	if _, err := decodeLarge([]byte{9, 1}); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("decodeLarge(version 9) = %v, want %v", err, record.ErrCorrupt)
	}
}

func TestPackIndex(t *testing.T) {
	added := time.Now()
	a, b := entryOf(0, "a", added, false), entryOf(1, "b", added, false)
	c := entryOf(2, "c", added, true)
	terms := map[string]bool{"ida": true, msgIDKey(strings.Repeat("m", 600)): true}
	o := packObject(map[uint16]packEntry{0: a, 1: b, 2: c}, terms)
	got := slices.Sorted(slices.Values(o.Indexes[indexMsgID]))
	want := slices.Sorted(maps.Keys(terms))
	if !slices.Equal(got, want) {
		t.Errorf("pack index %q = %q, want %q", indexMsgID, got, want)
	}
	p, err := mergePack([]*riak.Object{o}, testDecode)
	if err != nil || !maps.Equal(p.terms, terms) || len(p.entries) != 3 {
		t.Errorf("mergePack(packObject) = %d entries, terms %v, %v; want 3 and %v", len(p.entries), p.terms, err, terms)
	}
}

func TestMergePack(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	text := strings.Repeat("a line of the message, the same every time\n", 20)
	tests := []struct {
		name    string
		values  []*riak.Object
		want    map[uint16]string // seq -> raw
		added   time.Time         // of seq 1, when listed
		wantErr error
	}{
		{"none", nil, map[uint16]string{}, time.Time{}, nil},
		{"one", []*riak.Object{packOf(entryOf(1, "a", t1, false))}, map[uint16]string{1: "a"}, t1, nil},
		{"siblings of two batches unite", []*riak.Object{packOf(entryOf(1, "a", t1, false)), packOf(entryOf(2, "b", t1, false))}, map[uint16]string{1: "a", 2: "b"}, t1, nil},
		{"same message twice, earliest time kept", []*riak.Object{packOf(entryOf(1, "a", t2, false)), packOf(entryOf(1, "a", t1, false), entryOf(3, "c", t1, false))}, map[uint16]string{1: "a", 3: "c"}, t1, nil},
		{"same message compressed and not", []*riak.Object{packOf(entryOf(1, text, t2, false)), packOf(zstdEntryOf(t, 1, text, t1))}, map[uint16]string{1: text}, t1, nil},
		{"same message compressed, then not", []*riak.Object{packOf(zstdEntryOf(t, 1, text, t1)), packOf(entryOf(1, text, t2, false))}, map[uint16]string{1: text}, t1, nil},
		{"two messages under one number", []*riak.Object{packOf(entryOf(1, "a", t1, false)), packOf(entryOf(1, "b", t1, false))}, nil, time.Time{}, errConflict},
		{"one digest, other bytes (CRLF)", []*riak.Object{packOf(entryOf(1, "a\n", t1, false)), packOf(entryOf(1, "a\r\n", t1, false))}, nil, time.Time{}, errConflict},
		{"two large messages under one number", []*riak.Object{packOf(entryOf(1, "a", t1, true)), packOf(entryOf(1, "b", t1, true))}, nil, time.Time{}, errConflict},
		{"corrupt", []*riak.Object{obj([]byte{1, 9})}, nil, time.Time{}, record.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergePack(tt.values, testDecode)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("mergePack = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("mergePack = %v", err)
			}
			raws := make(map[uint16]string)
			for seq, e := range got.entries {
				m, err := testDecode(e.rec)
				if err != nil {
					t.Fatalf("entry %d: %v", seq, err)
				}
				raws[seq] = string(m.Raw)
			}
			if !maps.Equal(raws, tt.want) {
				t.Fatalf("mergePack = %v, want %v", raws, tt.want)
			}
			if e, ok := got.entries[1]; ok {
				if h, _, err := record.ParseHeader(e.rec); err != nil || !h.Added.Equal(tt.added) {
					t.Errorf("mergePack seq 1 added %v, %v; want %v", h.Added, err, tt.added)
				}
			}
		})
	}
}

// TestMergePackRemoval: a removal entry wins over its message's entry
// in whatever order the siblings come, the other messages of both
// siblings are kept, and the pack says what is left of the message.
func TestMergePackRemoval(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	gone := removedOf(t, 1, "a", t1)
	before := packOf(entryOf(1, "a", t1, false), entryOf(2, "b", t1, false))                                        // a Put's, from a read before the removal
	after := packObject(map[uint16]packEntry{1: gone, 2: entryOf(2, "b", t1, false)}, map[string]bool{"idb": true}) // the removal's
	beside := packOf(entryOf(1, "a", t1, false), entryOf(3, "c", t1, false))                                        // a Put's, with a new message
	otherRemoval := removedOf(t, 1, "a", t1.Add(time.Second))
	long := strings.Repeat("x", maxInlineID+1)
	tests := []struct {
		name           string
		values         []*riak.Object
		want           map[uint16]string // seq -> raw, or "removed"
		stale, suspect bool
	}{
		{"removed", []*riak.Object{after}, map[uint16]string{1: "removed", 2: "b"}, false, false},
		{"removal first", []*riak.Object{after, before}, map[uint16]string{1: "removed", 2: "b"}, true, true},
		{"removal last", []*riak.Object{before, after}, map[uint16]string{1: "removed", 2: "b"}, true, true},
		{"a Put beside the removal", []*riak.Object{beside, after}, map[uint16]string{1: "removed", 2: "b", 3: "c"}, true, true},
		{"a large message's stub", []*riak.Object{packOf(entryOf(1, "a", t1, true)), after}, map[uint16]string{1: "removed", 2: "b"}, true, true},
		{"a removed message's term", []*riak.Object{packObject(map[uint16]packEntry{1: gone}, map[string]bool{"ida": true})}, map[uint16]string{1: "removed"}, false, true},
		{"another message's term", []*riak.Object{packObject(map[uint16]packEntry{1: gone}, map[string]bool{"idb": true, msgIDKey("\xffa"): true})}, map[uint16]string{1: "removed"}, false, false},
		{"a removed message's hashed term", []*riak.Object{packObject(map[uint16]packEntry{1: removedOf(t, 1, long, t1)}, map[string]bool{msgIDKey("id" + long): true})}, map[uint16]string{1: "removed"}, false, true},
		{"two removal records", []*riak.Object{packObject(map[uint16]packEntry{1: otherRemoval}, nil), packObject(map[uint16]packEntry{1: gone}, nil)}, map[uint16]string{1: "removed"}, false, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := mergePack(tt.values, testDecode)
			if err != nil {
				t.Fatalf("mergePack = %v", err)
			}
			raws := make(map[uint16]string)
			for seq, e := range got.entries {
				if e.removed {
					raws[seq] = "removed"
					continue
				}
				m, err := record.DecodeMessage(e.rec)
				if err != nil {
					t.Fatalf("entry %d: %v", seq, err)
				}
				raws[seq] = string(m.Raw)
				if e.large {
					raws[seq] = "a"
				}
			}
			if !maps.Equal(raws, tt.want) {
				t.Errorf("mergePack = %v, want %v", raws, tt.want)
			}
			if got.stale != tt.stale || got.suspect != tt.suspect {
				t.Errorf("mergePack: stale %v, suspect %v; want %v, %v", got.stale, got.suspect, tt.stale, tt.suspect)
			}
		})
	}
	// Of two removal records, the same one is kept in either order.
	a, _ := mergePack([]*riak.Object{packObject(map[uint16]packEntry{1: otherRemoval}, nil), packObject(map[uint16]packEntry{1: gone}, nil)}, testDecode)
	b, _ := mergePack([]*riak.Object{packObject(map[uint16]packEntry{1: gone}, nil), packObject(map[uint16]packEntry{1: otherRemoval}, nil)}, testDecode)
	if !bytes.Equal(a.entries[1].rec, b.entries[1].rec) {
		t.Errorf("mergePack of two removal records keeps %s or %s by their order", a.entries[1].rec, b.entries[1].rec)
	}
}

func TestPackKey(t *testing.T) {
	tests := []struct {
		f    callnumber.Fields
		want string
	}{
		{callnumber.Fields{Run: 1, Sequence: 0}, "0.1.0"},
		{callnumber.Fields{Run: 1, Sequence: 15}, "0.1.0"},
		{callnumber.Fields{Run: 1, Sequence: 16}, "0.1.1"},
		{callnumber.Fields{Run: callnumber.MaxRun, Sequence: callnumber.MaxSequence}, "0.1073741823.1023"},
	}
	for _, tt := range tests {
		k := packKey(tt.f)
		if k != tt.want {
			t.Errorf("packKey(%v) = %q, want %q", tt.f, k, tt.want)
		}
		v, run, p, err := parsePackKey(k)
		if err != nil || v != tt.f.Version || run != tt.f.Run || p != tt.f.Sequence>>packShift {
			t.Errorf("parsePackKey(%q) = %d, %d, %d, %v; want %v", k, v, run, p, err, tt.f)
		}
	}
	for _, bad := range []string{"", "1.2", "0.1.1024", "0.x.1", "0.1.2.3", "256.1.1", "0.4294967296.0"} {
		if _, _, _, err := parsePackKey(bad); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("parsePackKey(%q) = %v, want %v", bad, err, record.ErrCorrupt)
		}
	}
}

func TestEntryRoundTrip(t *testing.T) {
	e := &entry{time: time.UnixMilli(1_790_000_000_123).UTC(), writer: [8]byte{1, 2, 3}, nonce: [8]byte{9}}
	for i := range 1000 {
		e.items = append(e.items, item{digest: store.DigestOf([]byte{byte(i), byte(i >> 8)}), number: callnumber.Number(i*7919 + 1)})
	}
	b := appendEntry(nil, e)
	got, err := decodeEntry(b)
	if err != nil {
		t.Fatalf("decodeEntry(appendEntry) = %v", err)
	}
	if !got.time.Equal(e.time) || got.writer != e.writer || got.nonce != e.nonce || !slices.Equal(got.items, e.items) {
		t.Errorf("decodeEntry(appendEntry(e)) differs from e")
	}
	for _, n := range []int{0, 1, 24, 25, len(b) - 1} {
		if _, err := decodeEntry(b[:n]); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("decodeEntry(first %d of %d bytes) = %v, want %v", n, len(b), err, record.ErrCorrupt)
		}
	}
	bad := appendEntry(nil, &entry{items: []item{{number: 1 << callnumber.Bits}}})
	if _, err := decodeEntry(bad); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("decodeEntry(number beyond 47 bits) = %v, want %v", err, record.ErrCorrupt)
	}

	// A removal entry.
	r := &entry{time: e.time, writer: e.writer, nonce: [8]byte{7}, removal: 123456789}
	b = appendEntry(nil, r)
	if b[0] != removalVersion {
		t.Errorf("appendEntry(removal) is of version %d, want %d", b[0], removalVersion)
	}
	got, err = decodeEntry(b)
	if err != nil || !got.time.Equal(r.time) || got.writer != r.writer || got.nonce != r.nonce || got.removal != r.removal || len(got.items) != 0 || got.size() != 1 {
		t.Errorf("decodeEntry(appendEntry(removal)) = %+v, %v; want %+v", got, err, r)
	}
	for _, v := range [][]byte{b[:len(b)-1], append(bytes.Clone(b), 0), appendEntry(nil, &entry{removal: 1 << callnumber.Bits})} {
		if _, err := decodeEntry(v); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("decodeEntry(%d bytes, a bad removal) = %v, want %v", len(v), err, record.ErrCorrupt)
		}
	}

	// A move entry.
	mv := &entry{time: e.time, writer: e.writer, nonce: [8]byte{9}, move: store.Move{Number: 987654321, List: "linux-mips", Moved: time.Unix(1700000000, 123).UTC()}}
	b = appendEntry(nil, mv)
	if b[0] != moveVersion {
		t.Errorf("appendEntry(move) is of version %d, want %d", b[0], moveVersion)
	}
	got, err = decodeEntry(b)
	if err != nil || !got.time.Equal(mv.time) || got.nonce != mv.nonce || got.move.Number != mv.move.Number || got.move.List != mv.move.List || !got.move.Moved.Equal(mv.move.Moved) || len(got.items) != 0 || got.size() != 1 {
		t.Errorf("decodeEntry(appendEntry(move)) = %+v, %v; want %+v", got, err, mv)
	}
	for _, v := range [][]byte{b[:41], append(bytes.Clone(b[:len(b)-1]), '/'), appendEntry(nil, &entry{move: store.Move{Number: 1 << callnumber.Bits, List: "x"}})} {
		if _, err := decodeEntry(v); !errors.Is(err, record.ErrCorrupt) {
			t.Errorf("decodeEntry(%d bytes, a bad move) = %v, want %v", len(v), err, record.ErrCorrupt)
		}
	}
}

func TestCursor(t *testing.T) {
	const tg = "0badc0de"
	tests := []struct {
		c    cursor
		want store.Cursor
	}{
		{cursor{slot: 1}, ""},
		{cursor{slot: 2}, "L0badc0de:2.0"},
		{cursor{slot: 1, idx: 3}, "L0badc0de:1.3"},
		{cursor{slot: 7, idx: 1, pending: []pendingSlot{{3, []int{0}}, {7, []int{0}}}}, "L0badc0de:7.1~3.AQ~7.AQ"},
		{cursor{slot: 9, pending: []pendingSlot{{4, []int{1, 8, 999}}}}, ""},
	}
	for i, tt := range tests {
		got := tt.c.format(tg)
		if tt.want != "" && got != tt.want {
			t.Errorf("test %d: format = %q, want %q", i, got, tt.want)
		}
		back, err := parseCursor(got, tg)
		if err != nil {
			t.Fatalf("parseCursor(%q) = %v", got, err)
		}
		if back.slot != tt.c.slot || back.idx != tt.c.idx || len(back.pending) != len(tt.c.pending) {
			t.Fatalf("parseCursor(%q) = %+v, want %+v", got, back, tt.c)
		}
		for j, p := range tt.c.pending {
			if back.pending[j].slot != p.slot || !slices.Equal(back.pending[j].items, p.items) {
				t.Errorf("parseCursor(%q) pending %d = %+v, want %+v", got, j, back.pending[j], p)
			}
		}
	}
	for _, bad := range []store.Cursor{
		"garbage", "s5", "L0badc0de:", "L0badc0de:1", "L0badc0de:0.0", "L0badc0de:01.0",
		"L0badc0de:1.0", // the start is ""
		"Lffffffff:2.0", // another archive's
		"L0badc0de:2.0~", "L0badc0de:2.0~1.", "L0badc0de:2.0~1.AA", "L0badc0de:2.0~3.AQ",
		"L0badc0de:2.0~2.AQ", "L0badc0de:5.0~2.AQ~1.AQ", "L0badc0de:5.0~2.AQ~2.AQ", "L0badc0de:5.0~2.AQ=",
		"L0badc0de:18446744073709551616.0", "L0badc0de:2.2147483648",
	} {
		if c, err := parseCursor(bad, tg); !errors.Is(err, store.ErrBadCursor) {
			t.Errorf("parseCursor(%q) = %+v, %v; want %v", bad, c, err, store.ErrBadCursor)
		}
	}
	if tag("a") == tag("b") || len(tag("a")) != 8 {
		t.Errorf("tag(a) = %q, tag(b) = %q: want 8 hex digits, distinct", tag("a"), tag("b"))
	}
}

func FuzzParseCursor(f *testing.F) {
	for _, s := range []string{"", "L0badc0de:2.0", "L0badc0de:7.1~3.AQ~7.AQ", "L0badc0de:9.0~4._w"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		c, err := parseCursor(store.Cursor(s), "0badc0de")
		if err != nil {
			if !errors.Is(err, store.ErrBadCursor) {
				t.Fatalf("parseCursor(%q) = %v, want %v", s, err, store.ErrBadCursor)
			}
			return
		}
		if got := c.format("0badc0de"); got != store.Cursor(s) {
			t.Fatalf("parseCursor(%q) then format = %q: not the same cursor", s, got)
		}
	})
}

func TestResolveDigest(t *testing.T) {
	tests := []struct {
		name    string
		values  []*riak.Object
		want    []string
		wantErr bool
	}{
		{"not found", nil, nil, false},
		{"tombstone", []*riak.Object{{IsTombstone: true}}, nil, false},
		{"one", []*riak.Object{obj([]byte("3kTMd2xB"))}, []string{"3kTMd2xB"}, false},
		{"siblings: lowest first, whatever the order, once each", []*riak.Object{obj([]byte("Zzzzzzzz")), obj([]byte("3kTMd2xB")), obj([]byte("9aaaaaaa")), obj([]byte("3kTMd2xB"))}, []string{"3kTMd2xB", "9aaaaaaa", "Zzzzzzzz"}, false},
		{"corrupt", []*riak.Object{obj([]byte("not a number"))}, nil, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns, err := resolveDigest(tt.values)
			var got []string
			for _, n := range ns {
				got = append(got, n.String())
			}
			if (err != nil) != tt.wantErr || !slices.Equal(got, tt.want) {
				t.Errorf("resolveDigest = %v, %v; want %v, error %v", got, err, tt.want, tt.wantErr)
			}
		})
	}
}

func TestMsgIDKey(t *testing.T) {
	long := strings.Repeat("x", maxInlineID+1)
	tests := []struct {
		name, id string
		inline   bool
	}{
		{"short", "a@example.org", true},
		{"at limit", long[:maxInlineID], true},
		{"over limit", long, false},
		{"starts with 0xff", "\xffx@example.org", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			k := msgIDKey(tt.id)
			if got := k == tt.id; got != tt.inline {
				t.Errorf("msgIDKey(%.20q) inline = %v, want %v", tt.id, got, tt.inline)
			}
			if !tt.inline && (len(k) != 33 || k[0] != 0xff) {
				t.Errorf("msgIDKey(%.20q) = %d bytes starting %#x, want 0xff + SHA-256", tt.id, len(k), k[0])
			}
		})
	}
	if msgIDKey(long) == msgIDKey(long+"y") {
		t.Errorf("msgIDKey gives two long Message-IDs one key")
	}
}

func TestSortNumbers(t *testing.T) {
	a := storetest.NewAuthority(t, shuffle.Mix)
	want := []callnumber.Number{a.Number(t, 1, 0), a.Number(t, 1, 1), a.Number(t, 1, 900), a.Number(t, 2, 0)}
	got := []callnumber.Number{want[3], want[1], want[0], want[2]}
	sortNumbers(a.Codec, got)
	if !slices.Equal(got, want) {
		t.Fatalf("sortNumbers = %v, want %v", got, want)
	}
}

func TestCheckType(t *testing.T) {
	ok := func(p riak.FetchBucketPropsResponse) *riak.FetchBucketPropsResponse { return &p }
	tests := []struct {
		name string
		role typeRole
		p    *riak.FetchBucketPropsResponse
		want string // "" or a word the reason must contain
	}{
		{"kv fine", roleKV, ok(riak.FetchBucketPropsResponse{AllowMult: true, NVal: 3}), ""},
		{"kv without siblings", roleKV, ok(riak.FetchBucketPropsResponse{NVal: 3}), "allow_mult is false"},
		{"kv last write wins", roleKV, ok(riak.FetchBucketPropsResponse{AllowMult: true, LastWriteWins: true}), "last_write_wins is true"},
		{"kv a set type", roleKV, ok(riak.FetchBucketPropsResponse{AllowMult: true, DataType: "set"}), "set data types"},
		{"kv consistent", roleKV, ok(riak.FetchBucketPropsResponse{AllowMult: true, Consistent: true}), "consistent"},
		{"counters fine", roleCounters, ok(riak.FetchBucketPropsResponse{AllowMult: true, DataType: "counter"}), ""},
		{"counters plain", roleCounters, ok(riak.FetchBucketPropsResponse{AllowMult: true}), "datatype is none"},
		{"claims fine", roleClaims, ok(riak.FetchBucketPropsResponse{Consistent: true, AllowMult: true}), ""},
		{"claims not consistent", roleClaims, ok(riak.FetchBucketPropsResponse{AllowMult: true}), "consistent is false"},
		{"no answer", roleClaims, nil, "no properties"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := checkType("some_type", tt.role, tt.p)
			if (got == "") != (tt.want == "") || !strings.Contains(got, tt.want) {
				t.Errorf("checkType = %q, want it to say %q", got, tt.want)
			}
			if got != "" && !strings.Contains(got, "some_type") {
				t.Errorf("checkType = %q, does not name the bucket type", got)
			}
		})
	}
	hint := createHint("chibrary_kv", roleKV)
	for _, want := range []string{`riak eval 'riak_kv_console:bucket_type_create(["chibrary_kv", "{\"props\":{\"allow_mult\":true,\"last_write_wins\":false}}"]).'`, `riak_core_bucket_type:activate(<<"chibrary_kv">>)`, `riak-admin bucket-type create chibrary_kv '{"props":{"allow_mult":true,"last_write_wins":false}}'`} {
		if !strings.Contains(hint, want) {
			t.Errorf("createHint = %s\nwant it to contain %s", hint, want)
		}
	}
}

func TestValidArchive(t *testing.T) {
	for _, good := range []string{"chibrary", "a", "linux-mips_2", strings.Repeat("a", 64)} {
		if err := ValidArchive(good); err != nil {
			t.Errorf("ValidArchive(%q) = %v", good, err)
		}
	}
	for _, bad := range []string{"", "A", "a.b", "a/b", "a b", "é", strings.Repeat("a", 65)} {
		if err := ValidArchive(bad); !errors.Is(err, ErrArchiveName) {
			t.Errorf("ValidArchive(%q) = %v, want %v", bad, err, ErrArchiveName)
		}
	}
}
