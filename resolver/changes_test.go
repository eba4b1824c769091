package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/url"
	"sync"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/chibrary/chibrary/changes"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// TestPacer: a change feed answer rests after a burst of work only while
// readers are busy, flushing what it wrote first, and a rest ends with the
// request.
func TestPacer(t *testing.T) {
	var rd readers
	flushes := 0
	flush := func() error { flushes++; return nil }
	p := pacer{readers: &rd, rested: prometheus.NewCounter(prometheus.CounterOpts{Name: "rested"})}

	// No reader: no rest, whatever the work.
	p.worked = time.Now().Add(-time.Second)
	if err := p.step(t.Context(), flush); err != nil || flushes != 0 {
		t.Fatalf("with no reader: step = %v after %d flushes, want no rest", err, flushes)
	}
	// A burst shorter than feedBurst goes on, readers or not.
	done := rd.enter()
	p.worked = time.Now()
	if err := p.step(t.Context(), flush); err != nil || flushes != 0 {
		t.Fatalf("within a burst: step = %v after %d flushes, want no rest", err, flushes)
	}
	// A reader in flight: the answer flushes and rests nine times its work.
	p.worked = time.Now().Add(-3 * time.Millisecond)
	start := time.Now()
	if err := p.step(t.Context(), flush); err != nil || flushes != 1 {
		t.Fatalf("with a reader: step = %v after %d flushes, want one flush and a rest", err, flushes)
	}
	if rest := time.Since(start); rest < feedRest*3*time.Millisecond {
		t.Errorf("with a reader: rested %v, want at least %v", rest, feedRest*3*time.Millisecond)
	}
	if got, want := counterValue(t, p.rested), (feedRest * 3 * time.Millisecond).Seconds(); got < want {
		t.Errorf("the metric says %.3f s rested, want at least %.3f", got, want)
	}
	// A reader that has just left still counts (feedQuiet), and a request
	// that ends stops the rest.
	done()
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	p.worked = time.Now().Add(-100 * time.Millisecond)
	if err := p.step(ctx, flush); !errors.Is(err, context.Canceled) {
		t.Errorf("a rest of a cancelled request: step = %v, want context.Canceled", err)
	}
	// A flush that fails is the answer's end.
	p.worked = time.Now().Add(-10 * time.Millisecond)
	rd.last.Store(time.Now().UnixNano())
	broken := errors.New("connection reset")
	if err := p.step(t.Context(), func() error { return broken }); !errors.Is(err, broken) {
		t.Errorf("a failed flush: step = %v, want it", err)
	}
	// Quiet for longer than feedQuiet: no rest.
	rd.last.Store(time.Now().Add(-2 * feedQuiet).UnixNano())
	p.worked = time.Now().Add(-time.Second)
	before := flushes
	if err := p.step(t.Context(), flush); err != nil || flushes != before {
		t.Errorf("after feedQuiet without readers: step = %v after %d flushes, want no rest", err, flushes)
	}
}

// TestFeedGivesWayToReaders: pages count as readers, and the change feed,
// health checks and metrics scrapes do not; a whole answer written while a reader is in flight rests (the
// metric says so) and holds every message.
func TestFeedGivesWayToReaders(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	const n = 300
	filler := bytes.Repeat([]byte("The quick brown fox jumps over the lazy dog, message after message.\n"), 300)
	var first string
	for i := range n {
		cn := a.put(t, fmt.Appendf(nil, "Message-ID: <pace%d@example.org>\nSubject: pace %d\n\n%d\n%s", i, i, i, filler), "pace")
		if i == 0 {
			first = cn.String()
		}
	}
	s := New(a.st, Options{SpoolDir: t.TempDir()})
	get := func(path string) *httptest.ResponseRecorder {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path, nil))
		return w
	}
	if w := get("/api/v1/changes?after=&limit=1"); w.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/changes = %d", w.Code)
	}
	if s.readers.busy(time.Now()) {
		t.Fatal("the change feed counts as a reader")
	}
	for _, path := range []string{"/healthz", "/metrics"} {
		if w := get(path); w.Code != http.StatusOK {
			t.Fatalf("GET %s = %d", path, w.Code)
		}
		if s.readers.busy(time.Now()) {
			t.Fatalf("GET %s counts as a reader", path)
		}
	}
	if w := get("/" + first); w.Code != http.StatusOK {
		t.Fatalf("GET /%s = %d", first, w.Code)
	}
	if !s.readers.busy(time.Now()) {
		t.Fatal("a message page does not count as a reader")
	}

	done := s.readers.enter() // a reader in flight throughout
	defer done()
	w := get("/api/v1/changes?after=&limit=10000")
	if w.Code != http.StatusOK {
		t.Fatalf("GET /api/v1/changes = %d: %s", w.Code, w.Body)
	}
	if rested := counterValue(t, s.feedRested); rested == 0 {
		t.Error("the answer written while a reader was in flight never rested")
	}
	fr, err := changes.NewReader(w.Body, changes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	messages := 0
	for {
		rec, err := fr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			t.Fatalf("after %d messages: %v", messages, err)
		}
		if rec.Kind == changes.KindMessage {
			messages++
		}
		if rec.Kind == changes.KindEnd {
			if rec.More {
				t.Error("the answer says more follows")
			}
			break
		}
	}
	if messages != n {
		t.Errorf("the answer holds %d messages, want %d", messages, n)
	}
}

func counterValue(t *testing.T, c prometheus.Counter) float64 {
	t.Helper()
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		t.Fatal(err)
	}
	return m.GetCounter().GetValue()
}

// feedRequest is a GET of the change feed from addr, with token if not "".
func feedRequest(ctx context.Context, query, addr, token string) *http.Request {
	r := httptest.NewRequestWithContext(ctx, "GET", "/api/v1/changes?"+query, nil)
	r.RemoteAddr = addr + ":40000"
	if token != "" {
		r.Header.Set("Authorization", "Bearer "+token)
	}
	return r
}

// endCursor reads an answer through and returns its end record's cursor.
func endCursor(t *testing.T, body io.Reader) (store.Cursor, int) {
	t.Helper()
	fr, err := changes.NewReader(body, changes.Options{})
	if err != nil {
		t.Fatal(err)
	}
	messages := 0
	for {
		rec, err := fr.Next()
		if err != nil {
			t.Fatalf("after %d messages: %v", messages, err)
		}
		switch rec.Kind {
		case changes.KindMessage:
			messages++
		case changes.KindEnd:
			return rec.Next, messages
		}
	}
}

// TestFeedPollersDoNotLockOutMirrors: anonymous long polls of the change
// feed, as many as there are slots, shut out neither a token holder nor
// another anonymous mirror (a waiting poll holds no slot); token holders
// keep slots of their own when the anonymous ones are all taken; one
// address cannot take more than DefaultChangesPerAddress.
func TestFeedPollersDoNotLockOutMirrors(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	a.put(t, []byte("Message-ID: <poll@example.org>\nSubject: poll\n\nbody\n"), "poll")
	for _, tc := range []struct {
		name  string
		opts  Options
		token string // the token-holding mirror's, "" for an anonymous one
	}{
		{"public feed, anonymous mirror", Options{}, ""},
		{"public feed with a token, token-holding mirror", Options{ChangesToken: "s3cret", ChangesPublic: true}, "s3cret"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tc.opts.SpoolDir = t.TempDir()
			s := New(a.st, tc.opts)
			w := httptest.NewRecorder()
			s.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.1", ""))
			if w.Code != http.StatusOK {
				t.Fatalf("anonymous GET /api/v1/changes = %d: %s", w.Code, w.Body)
			}
			end, _ := endCursor(t, w.Body)

			// DefaultChangesClients pollers from as many addresses wait
			// at the end of the feed.
			ctx, cancel := context.WithCancel(t.Context())
			var pollers sync.WaitGroup
			defer pollers.Wait()
			defer cancel()
			codes := make([]int, DefaultChangesClients)
			for i := range DefaultChangesClients {
				pollers.Go(func() {
					w := httptest.NewRecorder()
					s.ServeHTTP(w, feedRequest(ctx, "wait=60&after="+url.QueryEscape(string(end)), fmt.Sprintf("203.0.113.%d", i+1), ""))
					codes[i] = w.Code
				})
			}
			for deadline := time.Now().Add(10 * time.Second); ; time.Sleep(10 * time.Millisecond) {
				s.feedGate.mu.Lock()
				n := s.feedGate.total
				s.feedGate.mu.Unlock()
				if n == DefaultChangesClients {
					break
				}
				if time.Now().After(deadline) {
					t.Fatalf("%d pollers in flight after 10 s, want %d", n, DefaultChangesClients)
				}
			}
			time.Sleep(2 * changesPoll) // each has polled the store's feed again

			// The mirror reads the feed from the start, several times.
			for range 5 {
				w := httptest.NewRecorder()
				s.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.7", tc.token))
				if w.Code != http.StatusOK {
					t.Fatalf("with %d pollers waiting, the mirror's GET /api/v1/changes = %d: %s", DefaultChangesClients, w.Code, w.Body)
				}
				if _, n := endCursor(t, w.Body); n != 1 {
					t.Fatalf("the mirror's answer holds %d messages, want 1", n)
				}
			}
			cancel()
			pollers.Wait()
			for i, code := range codes {
				if code != http.StatusOK {
					t.Errorf("poller %d: %d, want 200 (an empty answer when its request ends)", i+1, code)
				}
			}
		})
	}

	t.Run("token holders have slots apart", func(t *testing.T) {
		s := New(a.st, Options{ChangesToken: "s3cret", ChangesPublic: true, SpoolDir: t.TempDir()})
		for range DefaultChangesClients { // every anonymous answer being written
			s.feedGate.anonymous <- struct{}{}
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.2", ""))
		if w.Code != http.StatusServiceUnavailable {
			t.Errorf("anonymous, every anonymous slot taken: %d, want 503", w.Code)
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.2", "s3cret"))
		if w.Code != http.StatusOK {
			t.Errorf("token holder, every anonymous slot taken: %d, want 200: %s", w.Code, w.Body)
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.2", "wrong"))
		if w.Code != http.StatusUnauthorized {
			t.Errorf("a wrong token on a public feed: %d, want 401", w.Code)
		}
		private := New(a.st, Options{ChangesToken: "s3cret", SpoolDir: t.TempDir()})
		w = httptest.NewRecorder()
		private.ServeHTTP(w, feedRequest(t.Context(), "after=", "198.51.100.2", ""))
		if w.Code != http.StatusUnauthorized {
			t.Errorf("anonymous on a private feed: %d, want 401", w.Code)
		}
	})

	t.Run("per address", func(t *testing.T) {
		s := New(a.st, Options{SpoolDir: t.TempDir()})
		var leave []func()
		for range DefaultChangesPerAddress {
			l, err := s.feedGate.enter("203.0.113.50")
			if err != nil {
				t.Fatal(err)
			}
			leave = append(leave, l)
		}
		w := httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "203.0.113.50", ""))
		if w.Code != http.StatusTooManyRequests || w.Header().Get("Retry-After") == "" {
			t.Errorf("a third request from one address: %d (Retry-After %q), want 429 with Retry-After", w.Code, w.Header().Get("Retry-After"))
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "203.0.113.51", ""))
		if w.Code != http.StatusOK {
			t.Errorf("another address meanwhile: %d, want 200", w.Code)
		}
		for _, l := range leave {
			l()
		}
		w = httptest.NewRecorder()
		s.ServeHTTP(w, feedRequest(t.Context(), "after=", "203.0.113.50", ""))
		if w.Code != http.StatusOK {
			t.Errorf("once the first two are done: %d, want 200", w.Code)
		}
	})
}
