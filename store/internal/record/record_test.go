package record

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// fixtures is where the frozen records of every version live (shared
// with the conformance suite).
const fixtures = "../../storetest/testdata/records"

// mail returns a message of a mailing list, distinct per i, with the
// header lines a dictionary learns.
func mail(i int, body string) []byte {
	return fmt.Appendf(nil, "Received: from mail.linux-mips.org ([127.0.0.1]:40%03d \"EHLO mail.linux-mips.org\")\n"+
		"\tby eddie.linux-mips.org with ESMTP id S23%05dAbc; Mon, 3 Nov 2008 10:%02d:00 +0000\n"+
		"From: Developer %d <dev%d@example.org>\nTo: linux-mips@linux-mips.org\n"+
		"Subject: [PATCH %d/9] MIPS: make the frobnicator %d work again\nMessage-ID: <2008%d.GA%d@example.org>\n"+
		"Sender: linux-mips-bounce@linux-mips.org\nErrors-to: linux-mips-bounce@linux-mips.org\nX-archive-position: %d\n"+
		"X-ecartis-version: Ecartis v1.0.0\nPrecedence: bulk\nX-list: linux-mips\n\n%s\n-- \nSigned-off-by: Developer %d <dev%d@example.org>\n",
		i%1000, i, i%60, i%17, i%17, i%9, i, i, i, i, body, i%17, i%17)
}

var (
	testDictOnce sync.Once
	testDict     *Dictionary
)

// dictionary returns a dictionary trained on mail.
func dictionary(t testing.TB) *Dictionary {
	t.Helper()
	testDictOnce.Do(func() {
		var samples [][]byte
		for i := range 300 {
			samples = append(samples, mail(i, strings.Repeat(fmt.Sprintf("line %d of a patch\n", i%13), 20+i%7)))
		}
		b, err := Train(context.Background(), samples)
		if err != nil {
			t.Fatalf("Train = %v", err)
		}
		if testDict, err = NewDictionary(b); err != nil {
			t.Fatalf("NewDictionary(trained) = %v", err)
		}
	})
	if testDict == nil {
		t.Fatal("no test dictionary")
	}
	return testDict
}

func same(a, b Message) bool {
	return a.Digest == b.Digest && a.Added.Equal(b.Added) && a.MessageID == b.MessageID && a.List == b.List && bytes.Equal(a.Raw, b.Raw)
}

func message(raw []byte, id, list string) Message {
	return Message{Digest: store.DigestOf(raw), Added: time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC), MessageID: id, List: list, Raw: raw}
}

func TestRoundTrip(t *testing.T) {
	var c Codec
	d := dictionary(t)
	big := bytes.Repeat([]byte("0123456789abcdefghij\r\n"), (LargeMessage+1000)/22)
	tests := []struct {
		name string
		m    Message
		dict *Dictionary
		// what Append writes
		version uint8
		comp    Compression
	}{
		{"empty", message(nil, "", ""), d, Version1, 0},
		{"tiny", message([]byte("x"), "a@b", "l"), d, Version1, 0},
		{"mail with dictionary", message(mail(5000, "hello"), "20085000.GA5000@example.org", "linux-mips"), d, Version2, ZstdDict},
		{"mail without dictionary", message(mail(5001, strings.Repeat("hello\n", 50)), "x", ""), nil, Version2, Zstd},
		{"8-bit and NUL", message(append(mail(7, "caf\xe9 \x00\xff"), bytes.Repeat([]byte("\x00\xff\r\n"), 100)...), "\xff\x00id", "li\xe9ste"), d, Version2, ZstdDict},
		{"large: no dictionary", message(big, "big@example.org", ""), d, Version2, Zstd},
		{"incompressible", message(noise(4000), "n", ""), d, Version1, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := c.Append([]byte("prefix"), tt.m, tt.dict)
			if err != nil {
				t.Fatalf("Append = %v", err)
			}
			if !bytes.HasPrefix(b, []byte("prefix")) {
				t.Fatalf("Append did not append to dst")
			}
			b = b[len("prefix"):]
			h, _, err := ParseHeader(b)
			if err != nil || h.Version != tt.version || h.Compression != tt.comp {
				t.Errorf("ParseHeader(Append) = version %d %v, %v; want version %d %v", h.Version, h.Compression, err, tt.version, tt.comp)
			}
			if tt.comp == ZstdDict && h.Dict != d.ID {
				t.Errorf("record names dictionary %v, want %v", h.Dict, d.ID)
			}
			got, err := c.Decode(b, func(id DictID) (*Dictionary, error) {
				if id != d.ID {
					return nil, fmt.Errorf("no %v", id)
				}
				return d, nil
			})
			if err != nil || !same(got, tt.m) {
				t.Errorf("Decode(Append(m)) = %q, %v; want %q", got.Raw, err, tt.m.Raw)
			}
			if tt.version == Version2 && len(tt.m.Raw) > 1000 && len(b) >= Size(tt.m)*7/10 {
				t.Errorf("record of %d bytes for a %d-byte message: barely compressed", len(b), len(tt.m.Raw))
			}
		})
	}
}

// noise returns n bytes that do not compress, different for each seed.
func noise(n int, seed ...uint64) []byte {
	b := make([]byte, n)
	x := uint64(0x9e3779b97f4a7c15)
	for _, s := range seed {
		x ^= s * 0xbf58476d1ce4e5b9
	}
	for i := range b {
		x ^= x << 13
		x ^= x >> 7
		x ^= x << 17
		b[i] = byte(x)
	}
	return b
}

// TestDictionaryHelps: the point of the dictionary, on messages it was
// not trained on.
func TestDictionaryHelps(t *testing.T) {
	var c Codec
	d := dictionary(t)
	var with, without int
	for i := 10000; i < 10100; i++ {
		m := message(mail(i, "a short reply"), "", "")
		a, err := c.Append(nil, m, d)
		if err != nil {
			t.Fatal(err)
		}
		b, err := c.Append(nil, m, nil)
		if err != nil {
			t.Fatal(err)
		}
		with, without = with+len(a), without+len(b)
	}
	if with*10 > without*6 {
		t.Errorf("100 messages: %d bytes with the dictionary, %d without; want at most 60%%", with, without)
	}
}

// The strong level (compactions) gives smaller records than the fast one,
// and the fast one than the fastest (S2), with a dictionary and without,
// and they all read back the same.
func TestLevels(t *testing.T) {
	var c Codec
	d := dictionary(t)
	for _, dict := range []*Dictionary{d, nil} {
		var size [Strong + 1]int
		for i := 20000; i < 20200; i++ {
			m := message(mail(i, strings.Repeat(fmt.Sprintf("a reply line %d, said again\n", i%31), 5+i%11)), "", "")
			for _, l := range []Level{Fastest, Fast, Strong} {
				b, err := c.AppendLevel(nil, m, dict, l)
				if err != nil {
					t.Fatal(err)
				}
				got, err := c.Decode(b, func(id DictID) (*Dictionary, error) { return d, nil })
				if err != nil || !same(got, m) {
					t.Fatalf("Decode(AppendLevel(level %d)) = %v; want the message back", l, err)
				}
				size[l] += len(b)
			}
		}
		if size[Strong] >= size[Fast] || size[Fast] >= size[Fastest] {
			t.Errorf("200 messages (dictionary %v): %d bytes strong, %d fast, %d fastest; want each smaller than the next", dict != nil, size[Strong], size[Fast], size[Fastest])
		}
	}
}

// A store keeps a dictionary compressed (StoredDict); CheckDictionary
// reads that form and the plain one (stored before dictionaries were
// compressed), and refuses damage in either.
func TestStoredDict(t *testing.T) {
	d := dictionary(t)
	stored := StoredDict(d.Bytes)
	if len(stored)*10 > len(d.Bytes)*7 {
		t.Errorf("StoredDict: %d bytes of a %d-byte dictionary; want at most 70%%", len(stored), len(d.Bytes))
	}
	for name, b := range map[string][]byte{"stored": stored, "plain": d.Bytes} {
		got, err := CheckDictionary(d.ID, bytes.Clone(b))
		if err != nil || got.ID != d.ID || !bytes.Equal(got.Bytes, d.Bytes) {
			t.Errorf("CheckDictionary(%s form) = %v, %v; want dictionary %v", name, got, err, d.ID)
		}
		damaged := bytes.Clone(b)
		damaged[len(damaged)/2] ^= 0x10
		if _, err := CheckDictionary(d.ID, damaged); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), d.ID.String()) {
			t.Errorf("CheckDictionary(damaged %s form) = %v; want %v naming %v", name, err, ErrCorrupt, d.ID)
		}
	}
	// Incompressible bytes are kept as they are.
	if b := noise(4000, 7); !bytes.Equal(StoredDict(b), b) {
		t.Errorf("StoredDict(noise) changed it; want it kept as it is")
	}
}

func TestLegacyAPI(t *testing.T) {
	m := message(mail(1, "body"), "id", "l")
	b := AppendMessage(nil, m)
	if len(b) != Size(m) || b[0] != Version1 {
		t.Errorf("AppendMessage: %d bytes, version %d; want Size %d, version 1", len(b), b[0], Size(m))
	}
	got, err := DecodeMessage(b)
	if err != nil || !same(got, m) {
		t.Errorf("DecodeMessage(AppendMessage(m)) = %+v, %v", got, err)
	}
	var c Codec
	z, err := c.Append(nil, m, nil)
	if err != nil {
		t.Fatal(err)
	}
	if got, err := DecodeMessage(z); err != nil || !same(got, m) {
		t.Errorf("DecodeMessage(zstd record) = %+v, %v", got, err)
	}
	zd, err := c.Append(nil, m, dictionary(t))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := DecodeMessage(zd); !errors.Is(err, ErrNoDictionary) || !strings.Contains(err.Error(), dictionary(t).ID.String()) {
		t.Errorf("DecodeMessage(record with dictionary) = %v; want %v naming %v", err, ErrNoDictionary, dictionary(t).ID)
	}
	// A record of raw bytes kept elsewhere (Riak's stub of a large
	// message): the digest of the bytes, none of them. DecodeMessage reads
	// it; Codec.Decode, which checks digests, refuses it.
	stub := AppendMessage(nil, Message{Digest: m.Digest, Added: m.Added, MessageID: m.MessageID, List: m.List})
	if got, err := DecodeMessage(stub); err != nil || got.Digest != m.Digest || len(got.Raw) != 0 {
		t.Errorf("DecodeMessage(stub) = %+v, %v; want the digest without bytes", got, err)
	}
	if _, err := c.Decode(stub, nil); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Codec.Decode(stub) = %v, want %v", err, ErrCorrupt)
	}
}

func TestDecodeErrors(t *testing.T) {
	var c Codec
	d := dictionary(t)
	m := message(mail(3, strings.Repeat("some body text\n", 30)), "id", "l")
	v1 := AppendMessage(nil, m)
	z, _ := c.Append(nil, m, nil)
	zd, _ := c.Append(nil, m, d)
	s2r, _ := c.AppendLevel(nil, m, nil, Fastest)
	s2d, _ := c.AppendLevel(nil, m, d, Fastest)
	if z[0] != Version2 || zd[1] != byte(ZstdDict) || s2r[1] != byte(S2) || s2d[1] != byte(S2Dict) {
		t.Fatalf("test records are not compressed: %x %x %x %x", z[:2], zd[:2], s2r[:2], s2d[:2])
	}
	// An S2 block that says it holds 2 GiB: refused before anything is
	// allocated for it.
	huge := append(bytes.Clone(s2r[:v2HeaderLen]), 0x80, 0x80, 0x80, 0x80, 0x08, 0)
	flip := func(b []byte, i int) []byte {
		b = bytes.Clone(b)
		b[i] ^= 0x20
		return b
	}
	set := func(b []byte, i int, v byte) []byte {
		b = bytes.Clone(b)
		b[i] = v
		return b
	}
	otherDigest := flip(v1, 5)
	tests := []struct {
		name string
		b    []byte
		want error
	}{
		{"empty", nil, ErrCorrupt},
		{"unknown version", set(v1, 0, 3), ErrCorrupt},
		{"short version 1 header", v1[:20], ErrCorrupt},
		{"short version 2 header", z[:30], ErrCorrupt},
		{"no dictionary ID", zd[:45], ErrCorrupt},
		{"unknown compression", set(z, 1, 9), ErrCorrupt},
		{"Message-ID length past the end", append(bytes.Clone(v1[:v1HeaderLen]), 0x7f), ErrCorrupt},
		{"bad uvarint", append(bytes.Clone(v1[:v1HeaderLen]), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff), ErrCorrupt},
		{"version 1: raw byte flipped", flip(v1, len(v1)-3), ErrCorrupt},
		{"version 1: digest flipped", otherDigest, ErrCorrupt},
		{"version 1: truncated", v1[:len(v1)-1], ErrCorrupt},
		{"zstd: frame byte flipped", flip(z, len(z)-5), ErrCorrupt},
		{"zstd: truncated", z[:len(z)-4], ErrCorrupt},
		{"zstd: digest flipped", flip(z, 10), ErrCorrupt},
		{"zstd: not a frame", append(bytes.Clone(z[:v2HeaderLen]), "not zstd at all"...), ErrCorrupt},
		{"dictionary: frame byte flipped", flip(zd, len(zd)-5), ErrCorrupt},
		{"dictionary: another dictionary named", flip(zd, v2HeaderLen), ErrNoDictionary},
		{"dictionary: decoded without it", set(zd, 1, byte(Zstd)), ErrCorrupt},
		{"s2: block byte flipped", flip(s2r, len(s2r)-5), ErrCorrupt},
		{"s2: truncated", s2r[:len(s2r)-4], ErrCorrupt},
		{"s2: digest flipped", flip(s2r, 10), ErrCorrupt},
		{"s2: not a block", append(bytes.Clone(s2r[:v2HeaderLen]), "not s2 at all"...), ErrCorrupt},
		{"s2: a block too large", huge, ErrCorrupt},
		{"s2 dictionary: block byte flipped", flip(s2d, len(s2d)-5), ErrCorrupt},
		{"s2 dictionary: another dictionary named", flip(s2d, v2HeaderLen), ErrNoDictionary},
		{"s2 dictionary: decoded without it", set(s2d, 1, byte(S2)), ErrCorrupt},
		{"s2 read as zstd", set(s2r, 1, byte(Zstd)), ErrCorrupt},
	}
	dicts := func(id DictID) (*Dictionary, error) {
		if id == d.ID {
			return d, nil
		}
		return nil, fmt.Errorf("%w: %v", ErrNoDictionary, id)
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := c.Decode(tt.b, dicts)
			if !errors.Is(err, tt.want) {
				t.Errorf("Decode = %q, %v; want %v", got.Raw, err, tt.want)
			}
		})
	}
}

// A large message's frame carries zstd's checksum, which Decode checks
// instead of the digest: damage anywhere in the frame is an error, though
// it decodes; DecodeDigest checks the digest all the same. A small
// message's frame carries none, and its digest is checked.
func TestLargeChecksum(t *testing.T) {
	var c Codec
	// Bytes that do not compress (the literals are stored as they are, so
	// that a byte flipped among them still decodes), then text that does.
	noise := make([]byte, LargeMessage)
	for i, x := 0, uint32(1); i < len(noise); i++ {
		x = x*1664525 + 1013904223
		noise[i] = byte(x >> 24)
	}
	raw := append(mail(1, strings.Repeat("the body of a large message\n", 4096)), noise...)
	m := message(raw, "large@example.org", "l")
	small := message(mail(2, "a short one\n"), "small@example.org", "l")
	for _, l := range []Level{Fastest, Fast, Strong} {
		rec, err := c.AppendLevel(nil, m, nil, l)
		if err != nil {
			t.Fatal(err)
		}
		h, frame, err := ParseHeader(rec)
		if err != nil || h.Compression != Zstd || !hasChecksum(frame) {
			t.Fatalf("level %v: the record of a large message: %v, compression %v, checksum %v; want zstd with a checksum", l, err, h.Compression, hasChecksum(frame))
		}
		if got, err := c.Decode(rec, nil); err != nil || !same(got, m) {
			t.Fatalf("level %v: Decode = %v; want the message", l, err)
		}
		// A byte of the noise, flipped: the frame still decodes.
		at := bytes.Index(rec, noise[1000:1016])
		if at < 0 {
			t.Fatalf("level %v: the noise is not stored as it is", l)
		}
		damaged := bytes.Clone(rec)
		damaged[at+8] ^= 1
		if _, err := c.Decode(damaged, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("level %v: Decode(a byte of the frame flipped) = %v, want %v", l, err, ErrCorrupt)
		}
		if _, err := c.DecodeDigest(damaged, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("level %v: DecodeDigest(a byte of the frame flipped) = %v, want %v", l, err, ErrCorrupt)
		}
		// Another digest in the header: the checksum vouches for the bytes,
		// and only DecodeDigest sees the record is not of this digest.
		other := bytes.Clone(rec)
		other[10] ^= 1
		if _, err := c.Decode(other, nil); err != nil {
			t.Errorf("level %v: Decode(the digest flipped) = %v, want the frame's checksum to vouch for the bytes", l, err)
		}
		if _, err := c.DecodeDigest(other, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("level %v: DecodeDigest(the digest flipped) = %v, want %v", l, err, ErrCorrupt)
		}

		srec, err := c.AppendLevel(nil, small, nil, l)
		if err != nil {
			t.Fatal(err)
		}
		if _, frame, _ := ParseHeader(srec); hasChecksum(frame) {
			t.Errorf("level %v: the record of a small message carries a checksum", l)
		}
		srec[10] ^= 1
		if _, err := c.Decode(srec, nil); !errors.Is(err, ErrCorrupt) {
			t.Errorf("level %v: Decode(a small record, the digest flipped) = %v, want %v", l, err, ErrCorrupt)
		}
	}
}

func TestDictionaries(t *testing.T) {
	d := dictionary(t)
	if d.ID != IDOf(d.Bytes) {
		t.Errorf("ID = %v, want IDOf(bytes) %v", d.ID, IDOf(d.Bytes))
	}
	if len(d.Bytes) > DictSize+1024 {
		t.Errorf("dictionary of %d bytes, want about %d at most", len(d.Bytes), DictSize)
	}
	if got, err := CheckDictionary(d.ID, bytes.Clone(d.Bytes)); err != nil || got.ID != d.ID {
		t.Errorf("CheckDictionary(own bytes) = %v, %v", got, err)
	}
	damaged := bytes.Clone(d.Bytes)
	damaged[len(damaged)/2] ^= 1
	if _, err := CheckDictionary(d.ID, damaged); !errors.Is(err, ErrCorrupt) || !strings.Contains(err.Error(), d.ID.String()) {
		t.Errorf("CheckDictionary(damaged) = %v; want %v naming %v", err, ErrCorrupt, d.ID)
	}
	for _, bad := range [][]byte{nil, []byte("not a dictionary at all, not at all"), d.Bytes[:40]} {
		if _, err := NewDictionary(bad); !errors.Is(err, ErrCorrupt) {
			t.Errorf("NewDictionary(%.10q) = %v, want %v", bad, err, ErrCorrupt)
		}
	}
	if s := d.ID.String(); len(s) != 16 {
		t.Errorf("DictID.String() = %q, want 16 hex digits", s)
	}
	if id, err := ParseDictID(d.ID.String()); err != nil || id != d.ID {
		t.Errorf("ParseDictID(String()) = %v, %v; want %v", id, err, d.ID)
	}
	for _, bad := range []string{"", "xyz", "00112233445566", "001122334455667788"} {
		if _, err := ParseDictID(bad); err == nil {
			t.Errorf("ParseDictID(%q) = nil error", bad)
		}
	}
	if _, err := Train(context.Background(), nil); err == nil {
		t.Errorf("Train(context.Background(), nil) = nil error")
	}
	if _, err := Train(context.Background(), [][]byte{noise(MaxSample + 1), noise(MaxSample + 2), []byte("short")}); err == nil {
		t.Errorf("Train(context.Background(), only messages too large or too small) = nil error")
	}
	if _, err := Train(context.Background(), [][]byte{noise(2000, 1), noise(2000, 2), noise(2000, 3)}); err == nil {
		t.Errorf("Train(context.Background(), noise) = nil error, want one: the samples share nothing")
	}
}

func TestTrainCancelled(t *testing.T) {
	var samples [][]byte
	for i := range 200 {
		samples = append(samples, mail(i, "body"))
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Train(ctx, samples); !errors.Is(err, context.Canceled) {
		t.Errorf("Train(cancelled) = %v, want %v", err, context.Canceled)
	}
}

// TestTrainDeterministic: the same samples give the same dictionary, so
// two writers that train on the same messages store one.
func TestTrainDeterministic(t *testing.T) {
	var samples [][]byte
	for i := range 200 {
		samples = append(samples, mail(i, strings.Repeat("a patch line\n", i%20)))
	}
	a, err := Train(context.Background(), samples)
	if err != nil {
		t.Fatal(err)
	}
	b, err := Train(context.Background(), samples)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a, b) {
		t.Errorf("Train twice on the same samples: %d and %d bytes, different (IDs %v, %v)", len(a), len(b), IDOf(a), IDOf(b))
	}
	// What it learnt is what the samples share: a line in every sample
	// is in the dictionary, a line in one sample only is not.
	if !bytes.Contains(a, []byte("Errors-to: linux-mips-bounce@linux-mips.org")) {
		t.Errorf("dictionary lacks a header line every sample has")
	}
	if bytes.Contains(a, []byte("S2300042Abc")) {
		t.Errorf("dictionary holds a string of one sample only")
	}
}

func TestCurrent(t *testing.T) {
	c := Current{ID: dictionary(t).ID, Messages: 1000, Samples: 500, Trained: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}
	got, err := UnmarshalCurrent(MarshalCurrent(c))
	if err != nil || got != c {
		t.Errorf("UnmarshalCurrent(MarshalCurrent(c)) = %+v, %v; want %+v", got, err, c)
	}
	for _, bad := range []string{"", "{}", `{"id":"zz"}`, `{"id":"0000000000000000"}`} {
		if _, err := UnmarshalCurrent([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("UnmarshalCurrent(%q) = %v, want %v", bad, err, ErrCorrupt)
		}
	}
}

// fixture is one entry of the fixtures' records.json.
type fixture struct {
	Record    string    `json:"record"`
	Raw       string    `json:"raw"`
	Dict      string    `json:"dict"`
	Version   uint8     `json:"version"`
	MessageID string    `json:"message_id"`
	List      string    `json:"list"`
	Added     time.Time `json:"added"`
}

// TestFixtures decodes the frozen records of every version ever written.
func TestFixtures(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(fixtures, "records.json"))
	if err != nil {
		t.Fatal(err)
	}
	var fx []fixture
	if err := json.Unmarshal(b, &fx); err != nil {
		t.Fatal(err)
	}
	versions := map[uint8]bool{}
	var c Codec
	for _, f := range fx {
		t.Run(f.Record, func(t *testing.T) {
			rec, err := os.ReadFile(filepath.Join(fixtures, f.Record))
			if err != nil {
				t.Fatal(err)
			}
			raw, err := os.ReadFile(filepath.Join(fixtures, f.Raw))
			if err != nil {
				t.Fatal(err)
			}
			var d *Dictionary
			if f.Dict != "" {
				db, err := os.ReadFile(filepath.Join(fixtures, f.Dict))
				if err != nil {
					t.Fatal(err)
				}
				if d, err = NewDictionary(db); err != nil {
					t.Fatal(err)
				}
			}
			h, _, err := ParseHeader(rec)
			if err != nil || h.Version != f.Version {
				t.Fatalf("ParseHeader = version %d, %v; want %d", h.Version, err, f.Version)
			}
			versions[h.Version] = true
			got, err := c.Decode(rec, func(id DictID) (*Dictionary, error) {
				if d == nil || id != d.ID {
					return nil, fmt.Errorf("%w: %v", ErrNoDictionary, id)
				}
				return d, nil
			})
			want := Message{Digest: store.DigestOf(raw), Added: f.Added, MessageID: f.MessageID, List: f.List, Raw: raw}
			if err != nil || !same(got, want) {
				t.Errorf("Decode(%s) = %+v, %v; want %+v", f.Record, got, err, want)
			}
		})
	}
	for _, v := range []uint8{Version1, Version2} {
		if !versions[v] {
			t.Errorf("no fixture of record version %d", v)
		}
	}
}

func TestLeaseAndBinding(t *testing.T) {
	var key shuffle.Key
	key[0] = 7
	l := callnumber.Lease{Run: 3, Authority: "ab", Scheme: shuffle.Mix, Key: key, Nonce: "n", IssuedAt: time.Unix(5, 0).UTC()}
	got, err := UnmarshalLease(MarshalLease(l))
	if err != nil || got.Key != (shuffle.Key{}) || got.Nonce != "n" || got.Run != 3 || !got.IssuedAt.Equal(l.IssuedAt) {
		t.Errorf("UnmarshalLease(MarshalLease) = %+v, %v; want the lease without its key", got, err)
	}
	b := store.Binding{Authority: "ab", Scheme: shuffle.Mix, Key: key}
	if gb, err := UnmarshalBinding(MarshalBinding(b)); err != nil || gb != b {
		t.Errorf("UnmarshalBinding(MarshalBinding(b)) = %v, %v; want %v", gb, err, b)
	}
	for _, bad := range []string{"", "{}", "[", `{"authority":"a","key":"zz"}`} {
		if _, err := UnmarshalBinding([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Errorf("UnmarshalBinding(%q) = %v, want %v", bad, err, ErrCorrupt)
		}
	}
}

// TestNewDictionaryRefuses: bytes that are not a whole zstd dictionary
// with this package's zstd ID are refused as corrupt, whichever part is
// wrong (the header is checked here, the tables by the decoder).
func TestNewDictionaryRefuses(t *testing.T) {
	good := dictionary(t).Bytes
	otherID := bytes.Clone(good)
	otherID[4]++
	badMagic := bytes.Clone(good)
	badMagic[0] ^= 0xff
	badTables := bytes.Clone(good)
	for i := 8; i < 40; i++ {
		badTables[i] = 0xff
	}
	for name, b := range map[string][]byte{
		"empty":              nil,
		"short":              good[:6],
		"header only":        good[:8],
		"truncated tables":   good[:60],
		"not a dictionary":   []byte(strings.Repeat("From: someone\n", 100)),
		"another zstd ID":    otherID,
		"magic damaged":      badMagic,
		"entropy tables bad": badTables,
	} {
		if d, err := NewDictionary(b); !errors.Is(err, ErrCorrupt) {
			t.Errorf("NewDictionary(%s) = %v, %v; want ErrCorrupt", name, d, err)
		}
	}
	if _, err := NewDictionary(good); err != nil {
		t.Errorf("NewDictionary(a trained dictionary) = %v", err)
	}
}
