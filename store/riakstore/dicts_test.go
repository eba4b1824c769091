package riakstore

import (
	"bytes"
	"errors"
	"fmt"
	"slices"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestLatestCurrent(t *testing.T) {
	t1 := time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
	cur := func(id byte, at time.Time) *riak.Object {
		return obj(record.MarshalCurrent(record.Current{ID: record.DictID{id}, Messages: 1000, Trained: at}))
	}
	tests := []struct {
		name   string
		values []*riak.Object
		want   byte // ID's first byte; 0: none
		err    bool
	}{
		{"none", nil, 0, false},
		{"one", []*riak.Object{cur(1, t1)}, 1, false},
		{"the latest wins", []*riak.Object{cur(1, t1.Add(time.Second)), cur(2, t1), cur(3, t1.Add(-time.Hour))}, 1, false},
		{"a tie: the greater ID, whatever the order", []*riak.Object{cur(2, t1), cur(5, t1), cur(4, t1)}, 5, false},
		{"damaged", []*riak.Object{cur(1, t1), obj([]byte("{"))}, 0, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c, ok, err := latestCurrent(tt.values)
			if (err != nil) != tt.err || ok != (tt.want != 0) || ok && c.ID[0] != tt.want {
				t.Errorf("latestCurrent = %v, %v, %v; want ID %d, error %v", c.ID, ok, err, tt.want, tt.err)
			}
		})
	}
}

// TestDictionaries: the Riak side of compress.Dictionaries.
func TestDictionaries(t *testing.T) {
	ctx := t.Context()
	s := open(t, testOptions(t))
	d := riakDicts{s}
	b := []byte("a dictionary's bytes")
	id := record.IDOf(b)
	if _, err := d.LoadDict(ctx, id); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("LoadDict(missing) = %v, want %v", err, store.ErrNotFound)
	}
	if _, ok, err := d.CurrentDict(ctx); ok || err != nil {
		t.Errorf("CurrentDict(none) = %v, %v; want none", ok, err)
	}
	c := record.Current{ID: id, Messages: 1000, Samples: 10, Trained: time.Now().UTC().Truncate(time.Millisecond)}
	if err := d.SetCurrentDict(ctx, c); !errors.Is(err, store.ErrNotFound) {
		t.Errorf("SetCurrentDict(unsaved) = %v, want %v", err, store.ErrNotFound)
	}
	for range 2 { // the second time: there already, the same
		if err := d.SaveDict(ctx, id, b); err != nil {
			t.Fatalf("SaveDict = %v", err)
		}
	}
	if got, err := d.LoadDict(ctx, id); err != nil || !bytes.Equal(got, b) {
		t.Errorf("LoadDict = %q, %v; want %q", got, err, b)
	}
	if err := d.SaveDict(ctx, id, []byte("other bytes")); !errors.Is(err, record.ErrCorrupt) {
		t.Errorf("SaveDict(other bytes under the ID) = %v, want %v", err, record.ErrCorrupt)
	}
	if err := d.SetCurrentDict(ctx, c); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := d.CurrentDict(ctx); err != nil || !ok || got != c {
		t.Errorf("CurrentDict = %+v, %v, %v; want %+v", got, ok, err, c)
	}
	// Two writers making their dictionaries current at once: the one
	// trained last wins.
	b2 := []byte("another dictionary")
	if err := d.SaveDict(ctx, record.IDOf(b2), b2); err != nil {
		t.Fatal(err)
	}
	later := record.Current{ID: record.IDOf(b2), Messages: 1000, Trained: c.Trained.Add(time.Second)}
	if err := s.put(ctx, s.b.types.KV, s.b.dicts, currentDictKey, obj(record.MarshalCurrent(later)), nil); err != nil {
		t.Fatal(err)
	}
	if got, ok, err := d.CurrentDict(ctx); err != nil || !ok || got.ID != later.ID {
		t.Errorf("CurrentDict(siblings) = %v, %v, %v; want %v", got.ID, ok, err, later.ID)
	}
	// A sibling beside a dictionary (two writers saving it at once) is
	// no harm; the bytes that match the ID are read.
	if err := s.put(ctx, s.b.types.KV, s.b.dicts, id.String(), obj([]byte("damaged")), nil); err != nil {
		t.Fatal(err)
	}
	if got, err := d.LoadDict(ctx, id); err != nil || !bytes.Equal(got, b) {
		t.Errorf("LoadDict(beside a damaged sibling) = %q, %v; want %q", got, err, b)
	}
}

// TestSample: the newest messages first, those over record.MaxSample
// left out, at most n of them and about maxBytes.
func TestSample(t *testing.T) {
	ctx := t.Context()
	o := testOptions(t)
	o.Compression.TrainAt = -1
	s := open(t, o)
	d := riakDicts{s}
	if got, err := d.Sample(ctx, 10, 1<<20); err != nil || len(got) != 0 {
		t.Errorf("Sample(empty archive) = %d, %v; want none", len(got), err)
	}
	a := storetest.NewAuthority(t, shuffle.Mix)
	recordLease(t, s, a, 1)
	var msgs []store.Message
	for b := range 3 {
		var batch []store.Message
		for i := range 300 {
			n := b*300 + i
			raw := storetest.Mail(fmt.Sprintf("s%d@example.org", n), fmt.Sprint("sample ", n))
			if n == 899 || n == 897 {
				raw = append(raw, bytes.Repeat([]byte("too large to learn from\n"), record.MaxSample/20)...)
			}
			batch = append(batch, storetest.Message(a.Number(t, 1, n), raw, "", ""))
		}
		if _, err := s.Put(ctx, batch); err != nil {
			t.Fatal(err)
		}
		msgs = append(msgs, batch...)
	}
	var want [][]byte
	for i := len(msgs) - 1; i >= 0; i-- {
		if len(msgs[i].Raw) <= record.MaxSample {
			want = append(want, msgs[i].Raw)
		}
	}
	got, err := d.Sample(ctx, 500, 1<<30)
	if err != nil || !slices.EqualFunc(got, want[:500], bytes.Equal) {
		t.Errorf("Sample(500) = %d messages, %v; want the newest 500, newest first, without the large ones", len(got), err)
	}
	size := int64(0)
	for _, m := range want[:10] {
		size += int64(len(m))
	}
	got, err = d.Sample(ctx, 500, size-1)
	if err != nil || !slices.EqualFunc(got, want[:10], bytes.Equal) {
		t.Errorf("Sample(%d bytes) = %d messages, %v; want the newest 10", size-1, len(got), err)
	}
}
