package record

import (
	"bytes"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chibrary/chibrary/store"
)

// fuzzDict is the fixtures' dictionary, which the fixture records and
// the seed corpus name.
func fuzzDict(f *testing.F) *Dictionary {
	b, err := os.ReadFile(filepath.Join(fixtures, "v2.zdict"))
	if err != nil {
		f.Fatal(err)
	}
	d, err := NewDictionary(b)
	if err != nil {
		f.Fatal(err)
	}
	return d
}

// FuzzDecode: decoding any bytes never panics and never yields bytes
// other than the record's: what decodes has the digest the record
// carries, and re-encodes (compressed, and as version 1) to records that
// decode to the same message.
func FuzzDecode(f *testing.F) {
	d := fuzzDict(f)
	var c Codec
	recs, _ := filepath.Glob(filepath.Join(fixtures, "*.rec"))
	for _, p := range recs {
		b, err := os.ReadFile(p)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
	f.Add([]byte{1})
	f.Add([]byte{2, 2})
	dicts := func(id DictID) (*Dictionary, error) {
		if id != d.ID {
			return nil, ErrNoDictionary
		}
		return d, nil
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := c.Decode(b, dicts)
		if err != nil {
			return
		}
		if store.DigestOf(m.Raw) != m.Digest {
			t.Fatalf("Decode(%x) returned bytes whose digest is not the record's", b)
		}
		m.Raw = bytes.Clone(m.Raw)
		for _, dd := range []*Dictionary{nil, d} {
			again, err := c.Append(nil, m, dd)
			if err != nil {
				t.Fatalf("Append(decoded message) = %v", err)
			}
			if m2, err := c.Decode(again, dicts); err != nil || !same(m2, m) {
				t.Fatalf("re-encoded record decodes to %+v, %v; want %+v", m2, err, m)
			}
		}
		if m2, err := DecodeMessage(AppendMessage(nil, m)); err != nil || !same(m2, m) {
			t.Fatalf("version 1 record decodes to %+v, %v; want %+v", m2, err, m)
		}
	})
}

// FuzzRoundTrip: every message written reads back byte for byte, with
// and without the dictionary.
func FuzzRoundTrip(f *testing.F) {
	d := fuzzDict(f)
	var c Codec
	f.Add(mail(1, "body"), "id@example.org", "linux-mips")
	f.Add([]byte{}, "", "")
	f.Add([]byte("\r\n\x00\xff"), "\xff", "\x00")
	f.Fuzz(func(t *testing.T, raw []byte, id, list string) {
		m := Message{Digest: store.DigestOf(raw), Added: time.Unix(0, 42).UTC(), MessageID: id, List: list, Raw: raw}
		for _, dd := range []*Dictionary{nil, d} {
			for _, l := range []Level{Fastest, Fast, Strong} {
				b, err := c.AppendLevel(nil, m, dd, l)
				if err != nil {
					t.Fatalf("AppendLevel(level %d) = %v", l, err)
				}
				got, err := c.Decode(b, func(DictID) (*Dictionary, error) { return d, nil })
				if err != nil || !same(got, m) {
					t.Fatalf("Decode(AppendLevel(m, level %d)) = %+v, %v; want %+v", l, got, err, m)
				}
			}
		}
	})
}

// FuzzCheckDictionary: a dictionary as a store keeps it (StoredDict) is
// accepted under its ID only if it is that dictionary: damaged bytes,
// in either form, never yield a dictionary, nor a panic.
func FuzzCheckDictionary(f *testing.F) {
	d := fuzzDict(f)
	stored := StoredDict(d.Bytes)
	f.Add(stored)
	f.Add(d.Bytes[:200])
	f.Add(stored[:len(stored)/2])
	f.Add([]byte{0x28, 0xb5, 0x2f, 0xfd})
	f.Fuzz(func(t *testing.T, b []byte) {
		got, err := CheckDictionary(d.ID, b)
		if err != nil {
			return
		}
		if !bytes.Equal(got.Bytes, d.Bytes) {
			t.Fatalf("CheckDictionary(%d bytes) accepted %d bytes that are not dictionary %v", len(b), len(got.Bytes), d.ID)
		}
	})
}
