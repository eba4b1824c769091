package riakstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"net"
	"os"
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

// TestConformance runs the store suite against a real Riak node, each
// subtest under its own bucket prefix.
func TestConformance(t *testing.T) {
	addr := os.Getenv("CHIBRARY_TEST_RIAK")
	if addr == "" {
		t.Skip("CHIBRARY_TEST_RIAK not set: set it to a Riak node's protocol buffers address (host:8087) with the bucket types of the riakstore package doc created, to run the conformance suite against Riak")
	}
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		b := make([]byte, 8)
		rand.Read(b)
		opts := Options{Nodes: strings.Split(addr, ","), Prefix: "chibrary-test-" + hex.EncodeToString(b)}
		return func(ctx context.Context) (store.Store, error) { return Open(ctx, opts) }
	})
}

func TestOpenNoNodes(t *testing.T) {
	if s, err := Open(t.Context(), Options{}); err == nil {
		s.Close()
		t.Errorf("Open(no nodes) = nil error, want one")
	}
}

func obj(v []byte) *riak.Object { return &riak.Object{Value: v} }

func msgRecord(raw string, added time.Time) []byte {
	return record.AppendMessage(nil, record.Message{Digest: store.DigestOf([]byte(raw)), Added: added, MessageID: "id", Raw: []byte(raw)})
}

func TestResolveMessage(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	t2 := t1.Add(time.Hour)
	tests := []struct {
		name      string
		values    []*riak.Object
		wantOK    bool
		wantRaw   string
		wantAdded time.Time
		wantErr   error
	}{
		{"not found", nil, false, "", time.Time{}, nil},
		{"tombstone only", []*riak.Object{{IsTombstone: true}}, false, "", time.Time{}, nil},
		{"one", []*riak.Object{obj(msgRecord("a", t1))}, true, "a", t1, nil},
		{"same bytes twice, earliest time kept", []*riak.Object{obj(msgRecord("a", t2)), obj(msgRecord("a", t1))}, true, "a", t1, nil},
		{"tombstone and a value", []*riak.Object{{IsTombstone: true}, obj(msgRecord("a", t1))}, true, "a", t1, nil},
		{"different bytes", []*riak.Object{obj(msgRecord("a", t1)), obj(msgRecord("b", t1))}, true, "", time.Time{}, errConflict},
		{"corrupt", []*riak.Object{obj([]byte{9, 9})}, false, "", time.Time{}, record.ErrCorrupt},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m, ok, err := resolveMessage(tt.values)
			if tt.wantErr != nil {
				if !errors.Is(err, tt.wantErr) {
					t.Fatalf("resolveMessage = %v, want %v", err, tt.wantErr)
				}
				return
			}
			if err != nil || ok != tt.wantOK || string(m.Raw) != tt.wantRaw || !m.Added.Equal(tt.wantAdded) {
				t.Errorf("resolveMessage = %q %v, %v, %v; want %q %v, %v", m.Raw, m.Added, ok, err, tt.wantRaw, tt.wantAdded, tt.wantOK)
			}
		})
	}
}

func TestResolveDigest(t *testing.T) {
	tests := []struct {
		name    string
		values  []*riak.Object
		want    string
		wantOK  bool
		wantErr bool
	}{
		{"not found", nil, "", false, false},
		{"one", []*riak.Object{obj([]byte("3kTMd2xB"))}, "3kTMd2xB", true, false},
		{"race: lowest wins, whatever the order", []*riak.Object{obj([]byte("Zzzzzzzz")), obj([]byte("3kTMd2xB")), obj([]byte("9aaaaaaa"))}, "3kTMd2xB", true, false},
		{"corrupt", []*riak.Object{obj([]byte("not a number"))}, "", false, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, ok, err := resolveDigest(tt.values)
			if (err != nil) != tt.wantErr || ok != tt.wantOK || (ok && n.String() != tt.want) {
				t.Errorf("resolveDigest = %v, %v, %v; want %s, %v, error %v", n, ok, err, tt.want, tt.wantOK, tt.wantErr)
			}
		})
	}
}

func TestResolveBindingAndLease(t *testing.T) {
	a := storetest.NewAuthority(t, shuffle.Bits)
	b := storetest.NewAuthority(t, shuffle.Bits)
	bind := func(x *storetest.Authority) *riak.Object { return obj(record.MarshalBinding(x.Binding())) }
	if got, err := resolveBinding([]*riak.Object{bind(a), bind(a)}); err != nil || got == nil || *got != a.Binding() {
		t.Errorf("resolveBinding(same twice) = %v, %v; want %v", got, err, a.Binding())
	}
	if got, err := resolveBinding(nil); err != nil || got != nil {
		t.Errorf("resolveBinding(none) = %v, %v; want nil, nil", got, err)
	}
	if _, err := resolveBinding([]*riak.Object{bind(a), bind(b)}); !errors.Is(err, store.ErrForeignAuthority) {
		t.Errorf("resolveBinding(two authorities) = %v, want %v", err, store.ErrForeignAuthority)
	}

	l1 := a.Lease(5)
	l2 := a.Lease(5)
	lease := func(l callnumber.Lease) *riak.Object { return obj(record.MarshalLease(l)) }
	if got, err := resolveLease([]*riak.Object{lease(l1), lease(l1)}); err != nil || got == nil || got.Nonce != l1.Nonce {
		t.Errorf("resolveLease(same twice) = %v, %v; want nonce %s", got, err, l1.Nonce)
	}
	if _, err := resolveLease([]*riak.Object{lease(l1), lease(l2)}); !errors.Is(err, store.ErrRunReused) {
		t.Errorf("resolveLease(two nonces) = %v, want %v", err, store.ErrRunReused)
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

func TestIsMatchFound(t *testing.T) {
	match := riak.RiakError{Errcode: 0, Errmsg: "match_found"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"match_found", match, true},
		{"wrapped by the cluster after retries", riak.ClientError{Errmsg: riak.ErrClusterNoNodesAvailable, InnerError: match}, true},
		{"other riak error", riak.RiakError{Errmsg: "timeout"}, false},
		{"other error", errors.New("match_found lookalike"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := isMatchFound(tt.err); got != tt.want {
				t.Errorf("isMatchFound(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestSortNumbers(t *testing.T) {
	a := storetest.NewAuthority(t, shuffle.Mix)
	want := []callnumber.Number{a.Number(t, 1, 0), a.Number(t, 1, 1), a.Number(t, 1, 900), a.Number(t, 2, 0)}
	got := []callnumber.Number{want[3], want[1], want[0], want[2]}
	sortNumbers(a.Codec, got)
	for i := range want {
		if got[i] != want[i] {
			t.Fatalf("sortNumbers = %v, want %v", got, want)
		}
	}
	members := [][]byte{[]byte(want[0].String()), []byte(want[1].String())}
	if ns, err := decodeSet(members); err != nil || len(ns) != 2 || ns[0] != want[0] {
		t.Errorf("decodeSet = %v, %v; want %v", ns, err, want[:2])
	}
	if _, err := decodeSet([][]byte{[]byte("bad")}); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("decodeSet(bad) = %v, want %v", err, record.ErrCorrupt)
	}
}

func TestClassify(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"nil", nil, false},
		{"no node answered", riak.ClientError{Errmsg: "no nodes available", InnerError: netErr}, true},
		{"network error", netErr, true},
		{"riak timeout", riak.RiakError{Errmsg: "timeout"}, true},
		{"overloaded vnode", riak.ClientError{Errmsg: "no nodes available", InnerError: riak.RiakError{Errmsg: "overload"}}, true},
		{"match_found after retries", riak.ClientError{Errmsg: "no nodes available", InnerError: riak.RiakError{Errmsg: "match_found"}}, false},
		{"missing bucket type", riak.RiakError{Errmsg: "Error no bucket type `chibrary_kv`"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := classify(tt.err)
			if errors.Is(got, store.ErrUnavailable) != tt.unavailable {
				t.Errorf("classify(%v) = %v, want unavailable %v", tt.err, got, tt.unavailable)
			}
			if tt.err != nil && !tt.unavailable && got != tt.err {
				t.Errorf("classify(%v) = %v, want it unchanged", tt.err, got)
			}
		})
	}
}
