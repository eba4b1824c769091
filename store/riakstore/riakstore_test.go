package riakstore

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }

// testArchive returns a new archive name: every test has its own, so no
// test needs a wiped node.
func testArchive() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}

// testOptions are the options of a new archive on the test node.
func testOptions(t testing.TB) Options {
	return Options{Nodes: strings.Split(riaktest.Addr(t), ","), Archive: testArchive()}
}

// tamper is a Riak store the conformance suite can reach beneath.
type tamper struct{ *Store }

var _ storetest.Tamperer = tamper{}

// Record returns the record of n: its pack entry's, or a large message's
// object's.
func (t tamper) Record(ctx context.Context, n callnumber.Number) ([]byte, error) {
	key, seq, p, _, err := t.packOf(ctx, n)
	if err != nil {
		return nil, err
	}
	e, ok := p.entries[seq]
	if !ok || e.removed {
		return nil, fmt.Errorf("%w: no message entry %d in pack %s", store.ErrNotFound, seq, key)
	}
	if !e.large {
		return e.rec, nil
	}
	lf, err := t.fetch(ctx, t.b.types.KV, t.b.large, n.String(), all)
	if err != nil || !lf.found() {
		return nil, fmt.Errorf("large message %v: found %v, %w", n, lf.found(), err)
	}
	return decodeLarge(lf.values[0].Value)
}

// SetRecord replaces the record of n (an inline message's) in its pack.
func (t tamper) SetRecord(ctx context.Context, n callnumber.Number, v []byte) error {
	key, seq, p, vclock, err := t.packOf(ctx, n)
	if err != nil {
		return err
	}
	e, ok := p.entries[seq]
	if !ok || e.large || e.removed {
		return fmt.Errorf("pack %s: no inline entry %d", key, seq)
	}
	e.rec = bytes.Clone(v)
	p.entries[seq] = e
	_, _, err = t.putPack(ctx, key, p.entries, p.terms, vclock)
	return err
}

// packOf reads the pack of n, from every replica, without decoding its
// records, and returns its key and n's sequence number.
func (t tamper) packOf(ctx context.Context, n callnumber.Number) (key string, seq uint16, p pack, vclock []byte, err error) {
	bd, err := t.binding(ctx)
	if err != nil || bd == nil {
		return "", 0, pack{}, nil, fmt.Errorf("unbound: %w", err)
	}
	f, err := bd.codec.Decode(n)
	if err != nil {
		return "", 0, pack{}, nil, err
	}
	key = packKey(f)
	got, err := t.fetch(ctx, t.b.types.KV, t.b.packs, key, all)
	if err != nil || !got.found() {
		return "", 0, pack{}, nil, fmt.Errorf("pack %s: found %v, %w", key, got.found(), err)
	}
	p, err = mergePack(got.values, func([]byte) (record.Message, error) {
		return record.Message{}, errors.New("pack with siblings")
	})
	return key, f.Sequence, p, got.vclock, err
}

// SaveDict stores b as dictionary id, replacing what is there, unchecked.
func (t tamper) SaveDict(ctx context.Context, id record.DictID, b []byte) error {
	f, err := t.fetch(ctx, t.b.types.KV, t.b.dicts, id.String(), all)
	if err != nil {
		return err
	}
	return t.put(ctx, t.b.types.KV, t.b.dicts, id.String(), &riak.Object{ContentType: "application/octet-stream", Value: bytes.Clone(b)}, f.vclock)
}

func (t tamper) Compression() store.Compression { return compression(t.opts.Compression) }

// TestConformance runs the store suite against a real Riak node, each
// subtest in its own archive.
func TestConformance(t *testing.T) {
	riaktest.Addr(t)
	for _, tt := range []struct {
		name string
		c    store.Compression
	}{
		{"default", store.Compression{}},
		{"uncompressed", store.Compression{Off: true}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				opts := testOptions(t)
				opts.Compression = tt.c
				return func(ctx context.Context) (store.Store, error) {
					s, err := Open(ctx, opts)
					if err != nil {
						return nil, err
					}
					return tamper{s}, nil
				}
			})
		})
	}
}

func TestOpenNoNodes(t *testing.T) {
	if s, err := Open(t.Context(), Options{}); err == nil {
		s.Close()
		t.Errorf("Open(no nodes) = nil error, want one")
	}
}
