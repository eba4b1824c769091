package riakstore

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

// Values of pack format version 1, which archives written before
// compressed records hold, frozen in testdata/ (written by the version 1
// encoder, which is gone): every later reader must read them as they are.
//
//	pack-v1.bin        pack 0.R.1, DEFLATE: sequences 16 to 20, 19 a large
//	                   message's stub
//	large-v1.bin       the large message of sequence 19, DEFLATE
//	pack-v1-plain.bin  pack 0.R.2, stored as is (compression 0): sequence
//	                   32, bytes that do not deflate

// v1Added is when the version 1 fixtures say their messages were added.
var v1Added = time.Date(2025, 11, 3, 10, 20, 30, 123456789, time.UTC)

// v1Message is a message of the version 1 fixtures.
type v1Message struct {
	seq       uint16
	messageID string
	list      string
	raw       []byte
}

func (m v1Message) record() record.Message {
	return record.Message{Digest: store.DigestOf(m.raw), Added: v1Added, MessageID: m.messageID, List: m.list, Raw: m.raw}
}

// v1Messages are the messages of pack-v1.bin (with large-v1.bin) and of
// pack-v1-plain.bin.
func v1Messages() (packed, plain []v1Message) {
	big := []byte("From: Big <big@example.org>\nSubject: a patch with a large attachment\nMessage-ID: <big@example.org>\n\n")
	for i := 0; len(big) <= largeMessage; i++ {
		big = append(big, []byte("+\tline of the attachment, number "+string(rune('0'+i%10))+"\n")...)
	}
	noise := make([]byte, 300)
	x := uint32(2463534242)
	for i := range noise {
		x ^= x << 13
		x ^= x >> 17
		x ^= x << 5
		noise[i] = byte(x)
	}
	packed = []v1Message{
		{16, "one@example.org", "linux-mips", []byte("From: One <one@example.org>\nTo: linux-mips@linux-mips.org\nSubject: [PATCH] MIPS: one\nMessage-ID: <one@example.org>\n\nThe first message.\n")},
		{17, "two@example.org", "linux-mips", []byte("From: Two <two@example.org>\r\nSubject: Re: [PATCH] MIPS: one\r\nMessage-ID: <two@example.org>\r\nIn-Reply-To: <one@example.org>\r\n\r\nCRLF line ends.\r\n")},
		{18, "", "", []byte("From: nobody\nSubject: no Message-ID, no list\n\n>From quoted, kept as is\n")},
		{19, "big@example.org", "linux-mips", big},
		{20, "eight@example.org", "linux-mips", bytes.Join([][]byte{[]byte("From: =?ISO-8859-1?Q?J=F6rg?= <j@example.org>\nSubject: 8-bit \xe4\xf6\xfc\nMessage-ID: <eight@example.org>\n\n"), []byte("Gr\xfc\xdfe\n")}, nil)},
	}
	plain = []v1Message{{32, "noise@example.org", "", append([]byte("Subject: noise\n\n"), noise...)}}
	return packed, plain
}

func readFixture(t *testing.T, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("testdata", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestVersion1Values: the frozen version 1 values decode to their
// messages, field for field.
func TestVersion1Values(t *testing.T) {
	packed, plain := v1Messages()
	for _, tt := range []struct {
		file string
		msgs []v1Message
	}{{"pack-v1.bin", packed}, {"pack-v1-plain.bin", plain}} {
		t.Run(tt.file, func(t *testing.T) {
			v := readFixture(t, tt.file)
			if v[0] != packVersion1 {
				t.Fatalf("%s: version %d, want 1", tt.file, v[0])
			}
			p, err := mergePack([]*riak.Object{obj(v)}, testDecode)
			if err != nil {
				t.Fatalf("mergePack(%s) = %v", tt.file, err)
			}
			if len(p.entries) != len(tt.msgs) {
				t.Fatalf("%s: %d entries, want %d", tt.file, len(p.entries), len(tt.msgs))
			}
			for _, m := range tt.msgs {
				e, ok := p.entries[m.seq]
				if !ok {
					t.Fatalf("%s: no entry %d", tt.file, m.seq)
				}
				want := m.record()
				rec := e.rec
				if e.large != (len(m.raw) > largeMessage) {
					t.Errorf("%s entry %d: large %v, want %v", tt.file, m.seq, e.large, !e.large)
				}
				if e.large {
					stub, err := record.DecodeMessage(rec)
					if err != nil || stub.Digest != want.Digest || len(stub.Raw) != 0 || !stub.Added.Equal(v1Added) {
						t.Errorf("%s entry %d: stub %v %d bytes %v, %v", tt.file, m.seq, stub.Digest, len(stub.Raw), stub.Added, err)
					}
					if rec, err = decodeLarge(readFixture(t, "large-v1.bin")); err != nil {
						t.Fatalf("decodeLarge(large-v1.bin) = %v", err)
					}
				}
				got, err := testDecode(rec)
				if err != nil || !bytes.Equal(got.Raw, want.Raw) || got.Digest != want.Digest || got.MessageID != want.MessageID || got.List != want.List || !got.Added.Equal(v1Added) {
					t.Errorf("%s entry %d = %q %q %q %v, %v; want %q %q %q %v", tt.file, m.seq, got.Raw, got.MessageID, got.List, got.Added, err, want.Raw, want.MessageID, want.List, v1Added)
				}
			}
		})
	}
}

// TestReadsVersion1: an archive whose packs and large message objects are
// of version 1 reads as it is, through every way of reading; a Put next
// to them (into the same pack) keeps them readable.
func TestReadsVersion1(t *testing.T) {
	ctx := t.Context()
	s := open(t, testOptions(t))
	a := storetest.NewAuthority(t, shuffle.Mix)
	recordLease(t, s, a, 1)
	packed, plain := v1Messages()
	fx := append(append([]v1Message(nil), packed...), plain...)
	var msgs []store.Message
	for _, m := range fx {
		msgs = append(msgs, storetest.Message(a.Number(t, 1, int(m.seq)), m.raw, m.messageID, m.list))
	}
	if _, err := s.Put(ctx, msgs); err != nil {
		t.Fatal(err)
	}
	// Replace what the Put wrote by the frozen version 1 values.
	plant := func(bucket, key string, v []byte, ids []string) {
		t.Helper()
		f, err := s.fetch(ctx, s.b.types.KV, bucket, key, all)
		if err != nil || !f.found() {
			t.Fatalf("fetch %s/%s = %v, %v", bucket, key, f.found(), err)
		}
		o := &riak.Object{ContentType: "application/octet-stream", Value: v}
		for _, id := range ids {
			if id != "" {
				o.AddToIndex(indexMsgID, msgIDKey(id))
			}
		}
		if err := s.put(ctx, s.b.types.KV, bucket, key, o, f.vclock); err != nil {
			t.Fatal(err)
		}
	}
	idsOf := func(ms []v1Message) (ids []string) {
		for _, m := range ms {
			ids = append(ids, m.messageID)
		}
		return ids
	}
	plant(s.b.packs, packKey(callnumber.Fields{Run: 1, Sequence: 16}), readFixture(t, "pack-v1.bin"), idsOf(packed))
	plant(s.b.packs, packKey(callnumber.Fields{Run: 1, Sequence: 32}), readFixture(t, "pack-v1-plain.bin"), idsOf(plain))
	plant(s.b.large, a.Number(t, 1, 19).String(), readFixture(t, "large-v1.bin"), nil)

	check := func(t *testing.T) {
		for i, m := range msgs {
			got, err := s.Get(ctx, m.Number)
			if err != nil || !bytes.Equal(got.Raw, m.Raw) || got.MessageID != m.MessageID || got.List != m.List || fx[i].raw != nil && !got.Added.Equal(v1Added) {
				t.Errorf("Get(%v, sequence %d) = %d bytes %q %q %v, %v; want %d bytes %q %q %v", m.Number, fx[i].seq, len(got.Raw), got.MessageID, got.List, got.Added, err, len(m.Raw), m.MessageID, m.List, v1Added)
			}
			if m.MessageID != "" {
				if ns, err := s.ByMessageID(ctx, m.MessageID); err != nil || !slices.Contains(ns, m.Number) {
					t.Errorf("ByMessageID(%q) = %v, %v; want %v", m.MessageID, ns, err, m.Number)
				}
			}
			if n, err := s.ByDigest(ctx, m.Digest); err != nil || n != m.Number {
				t.Errorf("ByDigest(sequence %d) = %v, %v; want %v", fx[i].seq, n, err, m.Number)
			}
		}
		seen := storetest.Feed(t, s, 7)
		for _, m := range msgs {
			if got, ok := seen[m.Number]; !ok || !bytes.Equal(got.Raw, m.Raw) {
				t.Errorf("Changes: %v %v, %d bytes; want its %d bytes", m.Number, ok, len(got.Raw), len(m.Raw))
			}
		}
		res, err := s.Put(ctx, msgs)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if r != (store.Result{Number: msgs[i].Number, Duplicate: true}) {
				t.Errorf("Put(sequence %d again) = %v, want a duplicate of itself", fx[i].seq, r)
			}
		}
	}
	t.Run("as they are", check)
	// A new message in the version 1 pack: the pack is written anew
	// (version 2), its old records as they were.
	extra := storetest.Message(a.Number(t, 1, 21), []byte("From: new@example.org\nSubject: beside the old ones\n\n.\n"), "new@example.org", "")
	if _, err := s.Put(ctx, []store.Message{extra}); err != nil {
		t.Fatal(err)
	}
	f, err := s.fetch(ctx, s.b.types.KV, s.b.packs, packKey(callnumber.Fields{Run: 1, Sequence: 16}), all)
	if err != nil || len(f.values) != 1 || f.values[0].Value[0] != packVersion {
		t.Fatalf("the pack after a Put: %d values, %v; want one of version %d", len(f.values), err, packVersion)
	}
	msgs, fx = append(msgs, extra), append(fx, v1Message{seq: 21})
	t.Run("beside a new one", check)
}
