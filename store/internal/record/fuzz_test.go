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
			b, err := c.Append(nil, m, dd)
			if err != nil {
				t.Fatalf("Append = %v", err)
			}
			got, err := c.Decode(b, func(DictID) (*Dictionary, error) { return d, nil })
			if err != nil || !same(got, m) {
				t.Fatalf("Decode(Append(m)) = %+v, %v; want %+v", got, err, m)
			}
		}
	})
}
