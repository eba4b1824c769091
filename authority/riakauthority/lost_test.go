package riakauthority

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/internal/riakconn"
)

// unreachable makes the keys for which down says so answer as a
// consensus group that lost its majority does.
func unreachable(down func(key string) bool) func(string) error {
	return func(key string) error {
		if down(key) {
			return fmt.Errorf("%w: injected: the key's group cannot serve", riakconn.ErrUnavailable)
		}
		return nil
	}
}

// TestGroupsLost: with the next key, the metadata and half the runs'
// records unreachable (consensus groups stopped by a node lost), handles
// still open the authority from a copy of the metadata and issue runs,
// all distinct, each recorded; once the next key is back, it is moved past
// them.
func TestGroupsLost(t *testing.T) {
	opts := newArchive(t)
	a, _, err := OpenOrCreate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	for range 3 {
		if _, err := a.Issue(t.Context(), testHolder); err != nil {
			t.Fatal(err)
		}
	}
	var mu sync.Mutex
	lost := true
	down := func(key string) bool {
		mu.Lock()
		defer mu.Unlock()
		if !lost {
			return false
		}
		b, k, _ := strings.Cut(key, "/")
		if strings.HasSuffix(b, ".authority") {
			return k == keyNext || k == keyMeta
		}
		run, _ := strconv.Atoi(k)
		return run%2 == 0
	}
	a.fault = unreachable(down)
	o := opts
	o.fault = unreachable(down)
	b, err := Open(t.Context(), o)
	if err != nil {
		t.Fatalf("Open() with meta and next unreachable = %v, want it opened from a copy", err)
	}
	if b.ID() != a.ID() || b.Key() != a.Key() {
		t.Errorf("opened authority %s from a copy, want %s", b.ID(), a.ID())
	}
	seen := map[uint32]string{}
	var wg sync.WaitGroup
	for name, h := range map[string]*Authority{"a": a, "b": b} {
		for range 4 {
			wg.Go(func() {
				for range 5 {
					l, err := h.Issue(t.Context(), testHolder)
					if err != nil {
						t.Errorf("Issue() from %s with groups lost = %v", name, err)
						return
					}
					mu.Lock()
					if prev, ok := seen[l.Run]; ok {
						t.Errorf("run %d issued twice: to %s and %s", l.Run, prev, name)
					}
					seen[l.Run] = name
					mu.Unlock()
					if l.Run%2 == 0 {
						t.Errorf("run %d issued, whose record could not be written", l.Run)
					}
				}
			})
		}
	}
	wg.Wait()
	mu.Lock()
	lost = false
	mu.Unlock()
	c, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	for run, who := range seen {
		if _, err := c.Lease(t.Context(), run); err != nil {
			t.Errorf("Lease(%d), issued to %s, = %v", run, who, err)
		}
	}
	for _, h := range []*Authority{a, b} {
		if err := h.Close(); err != nil {
			t.Errorf("Close() = %v", err)
		}
	}
	next, err := c.NextRun(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for run := range seen {
		if uint64(run) >= next {
			t.Errorf("run %d issued, the next run is %d once the handles closed: want it past every run", run, next)
		}
	}
	if l, err := c.Issue(t.Context(), testHolder); err != nil || seen[l.Run] != "" {
		t.Errorf("Issue() once the groups are back = run %d, %v; want a new run", l.Run, err)
	}
}

// TestMetaLostWhileMigrating: an authority being moved has no copies of
// its metadata; while meta cannot be read, it cannot be opened.
func TestMetaLostWhileMigrating(t *testing.T) {
	opts := newArchive(t)
	src := boltAt(t, 2, 0)
	crash := errors.New("crash")
	if _, err := migrate(t.Context(), src, opts.URL(), opts, func(step string) error {
		if step == "copied" {
			return crash
		}
		return nil
	}); !errors.Is(err, crash) {
		t.Fatal(err)
	}
	o := opts
	o.fault = unreachable(func(key string) bool { return strings.HasSuffix(key, "/"+keyMeta) })
	if _, err := Open(t.Context(), o); !errors.Is(err, riakconn.ErrUnavailable) {
		t.Errorf("Open() of a half-moved authority with meta unreachable = %v, want ErrUnavailable", err)
	}
}
