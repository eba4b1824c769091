package resolver

import (
	"context"
	"github.com/chibrary/chibrary/catalog/keeper"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
)

func newTestLogger(w *syncbuf.Buffer) *slog.Logger {
	return slog.New(slog.NewTextHandler(w, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// Neither a catalog being built (503 with Retry-After) nor a reader who
// went away before the answer is a server error: nothing of them is
// logged at ERROR.
func TestNoErrorLogsForExpectedFailures(t *testing.T) {
	ca := newCatalogArchive(t)
	var logs syncbuf.Buffer
	s := New(ca.st, Options{Catalogs: keeper.Fixed(ca.cat), Logger: newTestLogger(&logs)})

	gone, cancel := context.WithCancel(context.Background())
	cancel()
	for _, path := range []string{"/search?q=message", "/l/demo/", "/t/" + ca.cn(t, "t1.1") + "/", "/" + ca.cn(t, "t1.1"), "/api/v1/search?q=%22a+b%22"} {
		w := httptest.NewRecorder()
		s.ServeHTTP(w, httptest.NewRequest("GET", path, nil).WithContext(gone))
	}
	// A catalog that started empty, being built.
	s = New(ca.st, Options{Catalogs: statusOf{keeper.Fixed(openTestCatalog(t)), keeper.Status{Building: &keeper.Progress{Total: 1}}}, Logger: newTestLogger(&logs)})
	w := httptest.NewRecorder()
	s.ServeHTTP(w, httptest.NewRequest("GET", "/l/demo/", nil))
	if w.Code != http.StatusServiceUnavailable {
		t.Fatalf("GET /l/demo/ while building = %d, want 503", w.Code)
	}
	if l := logs.String(); strings.Contains(l, "level=ERROR") {
		t.Errorf("logs have ERROR lines:\n%s", l)
	}
}
