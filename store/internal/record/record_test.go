package record

import (
	"bytes"
	"errors"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

func TestMessageRoundTrip(t *testing.T) {
	added := time.Date(2026, 3, 4, 5, 6, 7, 890, time.UTC)
	tests := []struct {
		name string
		m    Message
	}{
		{"empty", Message{Added: added}},
		{"plain", Message{Digest: store.DigestOf([]byte("x")), Added: added, MessageID: "a@b", List: "l", Raw: []byte("x")}},
		{"8-bit and NUL", Message{Added: added, MessageID: "\xff\x00id", List: "li\xe9ste", Raw: []byte("\x00\xff\r\n")}},
		{"long fields", Message{Added: added, MessageID: string(bytes.Repeat([]byte("m"), 300)), Raw: bytes.Repeat([]byte("r"), 1<<16)}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b := AppendMessage(nil, tt.m)
			if len(b) != Size(tt.m) {
				t.Errorf("len(AppendMessage) = %d, Size = %d", len(b), Size(tt.m))
			}
			got, err := DecodeMessage(b)
			if err != nil {
				t.Fatalf("DecodeMessage = %v", err)
			}
			if got.Digest != tt.m.Digest || !got.Added.Equal(tt.m.Added) || got.MessageID != tt.m.MessageID || got.List != tt.m.List || !bytes.Equal(got.Raw, tt.m.Raw) {
				t.Errorf("DecodeMessage(AppendMessage(m)) = %+v, want %+v", got, tt.m)
			}
		})
	}
}

func TestDecodeMessageErrors(t *testing.T) {
	good := AppendMessage(nil, Message{MessageID: "id", List: "l", Raw: []byte("raw")})
	tests := []struct {
		name string
		b    []byte
	}{
		{"empty", nil},
		{"unknown version", append([]byte{2}, good[1:]...)},
		{"short header", good[:20]},
		{"Message-ID length past the end", append(append([]byte{}, good[:headerLen]...), 0x7f)},
		{"bad uvarint", append(append([]byte{}, good[:headerLen]...), 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if m, err := DecodeMessage(tt.b); !errors.Is(err, ErrCorrupt) {
				t.Errorf("DecodeMessage = %+v, %v; want %v", m, err, ErrCorrupt)
			}
		})
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

// FuzzDecodeMessage: decoding never panics, and what decodes re-encodes to
// the same bytes.
func FuzzDecodeMessage(f *testing.F) {
	f.Add(AppendMessage(nil, Message{MessageID: "id", List: "l", Raw: []byte("raw")}))
	f.Add([]byte{1})
	f.Fuzz(func(t *testing.T, b []byte) {
		m, err := DecodeMessage(b)
		if err != nil {
			return
		}
		if again := AppendMessage(nil, m); !bytes.Equal(again, b) {
			// A non-minimal uvarint decodes but re-encodes shorter.
			m2, err := DecodeMessage(again)
			if err != nil || m2.MessageID != m.MessageID || m2.List != m.List || !bytes.Equal(m2.Raw, m.Raw) || m2.Digest != m.Digest || !m2.Added.Equal(m.Added) {
				t.Fatalf("re-encoding %x gave %x, which decodes differently", b, again)
			}
		}
	})
}
