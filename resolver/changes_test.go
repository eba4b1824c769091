package resolver

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/chibrary/chibrary/changes"
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
