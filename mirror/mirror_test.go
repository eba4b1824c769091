package mirror_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// origin is an archive served by a real resolver on loopback.
type origin struct {
	st   *boltstore.Store
	auth *storetest.Authority
	srv  *httptest.Server
	msgs []store.Message
}

func newOrigin(t *testing.T, n int) *origin {
	t.Helper()
	st := openStore(t)
	o := &origin{st: st, auth: storetest.NewAuthority(t, shuffle.Mix)}
	for _, run := range []uint32{1, 2} {
		if err := st.RecordLease(t.Context(), o.auth.Lease(run)); err != nil {
			t.Fatal(err)
		}
	}
	o.add(t, n)
	o.srv = httptest.NewServer(resolver.New(st, resolver.Options{}))
	t.Cleanup(o.srv.Close)
	return o
}

// add stores n more messages, alternating between the two runs.
func (o *origin) add(t *testing.T, n int) []store.Message {
	t.Helper()
	var batch []store.Message
	for range n {
		i := len(o.msgs)
		raw := storetest.Mail(fmt.Sprintf("m%d@example.org", i), fmt.Sprintf("message %d %s", i, strings.Repeat("x", i%300)))
		m := storetest.Message(o.auth.Number(t, uint32(1+i%2), i/2), raw, fmt.Sprintf("m%d@example.org", i), "list")
		o.msgs = append(o.msgs, m)
		batch = append(batch, m)
	}
	if _, err := o.st.Put(t.Context(), batch); err != nil {
		t.Fatal(err)
	}
	return batch
}

func openStore(t *testing.T) *boltstore.Store {
	t.Helper()
	st, err := boltstore.Open(t.Context(), filepath.Join(t.TempDir(), "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

func newMirror(t *testing.T, from string, st store.Store, state string, mod func(*mirror.Options)) *mirror.Mirror {
	t.Helper()
	o := mirror.Options{From: from, Store: st, StatePath: state, Limit: 40, BatchMessages: 15, MinBackoff: time.Millisecond, MaxBackoff: 10 * time.Millisecond, Wait: time.Second}
	if mod != nil {
		mod(&o)
	}
	m, err := mirror.New(o)
	if err != nil {
		t.Fatal(err)
	}
	return m
}

// same checks that st holds exactly o's messages (less removed ones),
// byte for byte, under the same numbers, with the same leases and times.
func same(t *testing.T, o *origin, st store.Store, removed ...store.Message) {
	t.Helper()
	gone := map[callnumber]bool{}
	for _, m := range removed {
		gone[callnumber(m.Number.String())] = true
	}
	for _, m := range o.msgs {
		got, err := st.Get(t.Context(), m.Number)
		if gone[callnumber(m.Number.String())] {
			if !errors.Is(err, store.ErrRemoved) {
				t.Errorf("mirror's Get(%v) = %v, want removed", m.Number, err)
			}
			continue
		}
		want, _ := o.st.Get(t.Context(), m.Number)
		if err != nil || !bytes.Equal(got.Raw, m.Raw) || got.MessageID != m.MessageID || got.List != want.List || !got.Added.Equal(want.Added) {
			t.Fatalf("mirror's Get(%v) = %d bytes %q %q %v, %v; want the origin's", m.Number, len(got.Raw), got.MessageID, got.List, got.Added, err)
		}
	}
	for _, run := range []uint32{1, 2} {
		a, _ := o.st.Lease(t.Context(), run)
		b, err := st.Lease(t.Context(), run)
		if err != nil || a.Nonce != b.Nonce || a.Program != b.Program || !a.IssuedAt.Equal(b.IssuedAt) {
			t.Errorf("mirror's lease of run %d = %+v, %v; want %+v", run, b, err, a)
		}
	}
	if n, err := st.Count(t.Context()); err != nil || n != int64(len(o.msgs)-len(removed)) {
		t.Errorf("mirror's Count() = %d, %v; want %d", n, err, len(o.msgs)-len(removed))
	}
}

type callnumber string

// TestCatchUpAndFollow: a mirror catches up in small answers, then
// follows what the origin stores and removes; a mirror of the mirror gets
// the same.
func TestCatchUpAndFollow(t *testing.T) {
	o := newOrigin(t, 120)
	st := openStore(t)
	state := filepath.Join(t.TempDir(), "state.json")
	m := newMirror(t, o.srv.URL, st, state, nil)
	stats, err := m.CatchUp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Messages != 120 || stats.New != 120 {
		t.Errorf("CatchUp = %+v, want 120 messages, all new", stats)
	}
	same(t, o, st)
	if b, _ := st.Binding(t.Context()); b != o.auth.Binding() {
		t.Errorf("the mirror is bound to %+v, want the origin's authority", b)
	}

	// Following: what the origin stores and removes arrives.
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- m.Run(ctx) }()
	more := o.add(t, 7)
	removed := o.msgs[3]
	if _, err := o.st.Remove(t.Context(), removed.Number, "spam"); err != nil {
		t.Fatal(err)
	}
	moved := o.msgs[5]
	if _, err := o.st.Move(t.Context(), moved.Number, "elsewhere"); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(10 * time.Second)
	for {
		_, err1 := st.Get(t.Context(), more[len(more)-1].Number)
		_, err2 := st.Get(t.Context(), removed.Number)
		m3, err3 := st.Get(t.Context(), moved.Number)
		if err1 == nil && errors.Is(err2, store.ErrRemoved) && err3 == nil && m3.List == "elsewhere" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("10 s on, the mirror has the new message: %v; the removal: %v", err1, err2)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("Run = %v", err)
	}
	same(t, o, st, removed)
	var re *store.RemovedError
	if _, err := st.Get(t.Context(), removed.Number); !errors.As(err, &re) || re.Removal.Reason != "spam" {
		t.Errorf("the mirror's removal = %v, want the origin's reason", err)
	}

	// A mirror of the mirror, which never saw the removed message.
	srv := httptest.NewServer(resolver.New(st, resolver.Options{}))
	defer srv.Close()
	st2 := openStore(t)
	if _, err := newMirror(t, srv.URL, st2, filepath.Join(t.TempDir(), "s2.json"), nil).CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	same(t, o, st2, removed)
	if m, err := st2.Get(t.Context(), moved.Number); err != nil || m.List != "elsewhere" {
		t.Errorf("the mirror of the mirror has the moved message in %q (%v), want elsewhere", m.List, err)
	}
	if res, err := st2.Put(t.Context(), []store.Message{removed}); err != nil || !res[0].Removed {
		t.Errorf("the mirror of the mirror takes the removed message: %v, %v", res, err)
	}
}

// TestResume: a mirror stopped mid-way (its context cancelled between
// answers, as a kill would stop it) and started again from its state file
// ends with every message once.
func TestResume(t *testing.T) {
	o := newOrigin(t, 200)
	st := openStore(t)
	state := filepath.Join(t.TempDir(), "state.json")
	var answers atomic.Int32
	ctx, cancel := context.WithCancel(t.Context())
	m := newMirror(t, o.srv.URL, st, state, func(opts *mirror.Options) {
		opts.Progress = func(mirror.Stats) {
			if answers.Add(1) == 2 {
				cancel()
			}
		}
	})
	if _, err := m.CatchUp(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("CatchUp cancelled = %v", err)
	}
	saved, err := mirror.ReadState(state)
	if err != nil || saved.Cursor == "" {
		t.Fatalf("state after two answers: %+v, %v", saved, err)
	}
	stats, err := newMirror(t, o.srv.URL, st, state, nil).CatchUp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Messages > 200-80+40 {
		t.Errorf("the second run received %d messages: it did not start from the saved cursor", stats.Messages)
	}
	same(t, o, st)
}

// TestDefaultLimitKeepsCursor: with the default limit, a mirror stopped
// after some 1,200 messages has kept a cursor past the first 1,000, so a
// mirror stopped every few seconds (an origin busy with readers serves
// its feed slowly) still moves on.
func TestDefaultLimitKeepsCursor(t *testing.T) {
	o := newOrigin(t, 2500)
	st := openStore(t)
	state := filepath.Join(t.TempDir(), "state.json")
	ctx, cancel := context.WithCancel(t.Context())
	m := newMirror(t, o.srv.URL, st, state, func(opts *mirror.Options) {
		opts.Limit = 0
		opts.Progress = func(s mirror.Stats) {
			if s.Messages >= 1200 {
				cancel()
			}
		}
	})
	if _, err := m.CatchUp(ctx); !errors.Is(err, context.Canceled) {
		t.Fatalf("CatchUp cancelled = %v", err)
	}
	saved, err := mirror.ReadState(state)
	if err != nil || saved.Cursor == "" {
		t.Fatalf("state after 1,200 messages: %+v, %v (no answer ended)", saved, err)
	}
	stats, err := newMirror(t, o.srv.URL, st, state, func(opts *mirror.Options) { opts.Limit = 0 }).CatchUp(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if stats.Messages > 1500 {
		t.Errorf("the second run received %d messages: it did not start from the saved cursor", stats.Messages)
	}
	same(t, o, st)
}

// hostile serves a mirror what f makes of the origin's true answer.
func hostile(t *testing.T, o *origin, f func(answer []byte) []byte) string {
	t.Helper()
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec := httptest.NewRecorder()
		r.Header.Del("Accept-Encoding")
		o.srv.Config.Handler.ServeHTTP(rec, r)
		w.Header().Set("Content-Type", changes.ContentType)
		w.WriteHeader(rec.Code)
		w.Write(f(rec.Body.Bytes()))
	}))
	t.Cleanup(srv.Close)
	return srv.URL
}

// TestHostileOrigin: an origin that sends other bytes than their digest,
// a number the mirror holds with other bytes, a run leased again, or
// answers cut short, is refused with a clear error, and nothing wrong is
// stored.
func TestHostileOrigin(t *testing.T) {
	o := newOrigin(t, 30)
	victim := o.msgs[10]
	// held gives the mirror's store run 1 as the origin leased it, and
	// other bytes under the victim's number.
	held := func(t *testing.T, st store.Store) {
		l, err := o.st.Lease(t.Context(), 1)
		if err != nil {
			t.Fatal(err)
		}
		l.Key = o.auth.Key
		if err := st.RecordLease(t.Context(), l); err != nil {
			t.Fatal(err)
		}
		other := storetest.Message(victim.Number, []byte("Subject: not the origin's\n\nother bytes\n"), "", "")
		if _, err := st.Put(t.Context(), []store.Message{other}); err != nil {
			t.Fatal(err)
		}
	}
	// leasedAgain gives the mirror's store run 1 under another lease of
	// the same authority (an authority restored from an old backup).
	leasedAgain := func(t *testing.T, st store.Store) {
		if err := st.RecordLease(t.Context(), o.auth.Lease(1)); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name string
		f    func([]byte) []byte
		prep func(t *testing.T, st store.Store)
		want error
		says string
	}{
		{"bytes that are not their digest", func(b []byte) []byte {
			return bytes.Replace(b, []byte("message 10 "), []byte("MESSAGE 10 "), 1)
		}, nil, mirror.ErrOrigin, "digest"},
		{"a number held here with other bytes", nil, held, store.ErrNumberTaken, victim.Number.String()},
		{"a run leased here under another lease", nil, leasedAgain, store.ErrRunReused, "run 1"},
		{"answers always cut short", func(b []byte) []byte { return b[:len(b)*2/3] }, nil, changes.ErrTruncated, "cannot catch up"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			st := openStore(t)
			if tt.prep != nil {
				tt.prep(t, st)
			}
			from := o.srv.URL
			if tt.f != nil {
				from = hostile(t, o, tt.f)
			}
			state := filepath.Join(t.TempDir(), "s.json")
			m := newMirror(t, from, st, state, nil)
			_, err := m.CatchUp(t.Context())
			if !errors.Is(err, tt.want) || !strings.Contains(err.Error(), tt.says) {
				t.Fatalf("CatchUp = %v, want %v saying %q", err, tt.want, tt.says)
			}
			// Whatever is stored is the origin's, byte for byte (but
			// what the test put there itself).
			for _, msg := range o.msgs {
				got, err := st.Get(t.Context(), msg.Number)
				if err == nil && !bytes.Equal(got.Raw, msg.Raw) && !(tt.prep != nil && msg.Number == victim.Number) {
					t.Errorf("%v stored with other bytes than the origin's", msg.Number)
				}
			}
			if s, err := mirror.ReadState(state); err == nil && s.Cursor != "" {
				t.Errorf("a cursor was saved past a refused answer: %+v", s)
			}
		})
	}
}
