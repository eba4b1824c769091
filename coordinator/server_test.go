package coordinator

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"net/http"
	"net/http/httptest"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
)

// testToken is a token as strong as CheckToken wants (128 bits in hex).
const testToken = "5f1c0a7e9b3d4286e0c1a9f7b2d5e843"

type testServer struct {
	a   *authority.Authority
	srv *Server
	ts  *httptest.Server
	db  string
}

// startServer serves a new authority on a loopback port.
func startServer(t testing.TB, opts authority.Options) *testServer {
	t.Helper()
	db := filepath.Join(t.TempDir(), "runs.db")
	a, _, err := authority.OpenOrCreate(context.Background(), db, opts)
	if err != nil {
		t.Fatal(err)
	}
	srv, err := NewServer(a, ServerOptions{Token: testToken})
	if err != nil {
		t.Fatal(err)
	}
	ts := httptest.NewServer(srv)
	t.Cleanup(func() {
		ts.Close()
		a.Close()
	})
	return &testServer{a: a, srv: srv, ts: ts, db: db}
}

type request struct {
	method, path string
	auth         string // the Authorization header; "-" for none
	body         string
	chunked      bool // send the body without a Content-Length
}

func (s *testServer) do(t testing.TB, r request) (*http.Response, []byte) {
	t.Helper()
	var body io.Reader
	if r.body != "" {
		body = strings.NewReader(r.body)
		if r.chunked {
			body = io.MultiReader(body) // hides the length from net/http
		}
	}
	req, err := http.NewRequest(r.method, s.ts.URL+r.path, body)
	if err != nil {
		t.Fatal(err)
	}
	switch r.auth {
	case "":
		req.Header.Set("Authorization", "Bearer "+testToken)
	case "-":
	default:
		req.Header.Set("Authorization", r.auth)
	}
	resp, err := s.ts.Client().Do(req)
	if err != nil {
		t.Fatalf("%s %s: %v", r.method, r.path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp, b
}

func TestIssueAndRead(t *testing.T) {
	s := startServer(t, authority.Options{Scheme: shuffle.Mix})
	resp, body := s.do(t, request{method: "POST", path: "/v1/runs",
		body: `{"program":"importer","host":"h1","pid":123,"note":"list foo"}`})
	if resp.StatusCode != http.StatusCreated {
		t.Fatalf("POST /v1/runs = %d %s, want 201", resp.StatusCode, body)
	}
	if got := resp.Header.Get("Location"); got != "/v1/runs/1" {
		t.Errorf("Location = %q, want /v1/runs/1", got)
	}
	// The contract's field names, read as a plain map.
	var raw map[string]any
	if err := json.Unmarshal(body, &raw); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"run", "version", "authority", "scheme", "key", "nonce", "issued_at"} {
		if _, ok := raw[k]; !ok {
			t.Errorf("response %s lacks %q", body, k)
		}
	}
	var lease callnumber.Lease
	if err := json.Unmarshal(body, &lease); err != nil {
		t.Fatal(err)
	}
	if lease.Run != 1 || lease.Authority != s.a.ID() || lease.Scheme != shuffle.Mix || lease.Key != s.a.Key() ||
		lease.Program != "importer" || lease.Host != "h1" || lease.PID != 123 || lease.Note != "list foo" {
		t.Errorf("lease = %+v, want run 1 of %s/mix to importer@h1:123", lease, s.a.ID())
	}
	if err := lease.Validate(); err != nil {
		t.Errorf("lease.Validate() = %v", err)
	}

	resp, body = s.do(t, request{method: "GET", path: "/v1/runs/1"})
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("GET /v1/runs/1 = %d %s, want 200", resp.StatusCode, body)
	}
	var got callnumber.Lease
	if err := json.Unmarshal(body, &got); err != nil {
		t.Fatal(err)
	}
	if got.Nonce != lease.Nonce || !got.IssuedAt.Equal(lease.IssuedAt) || got.Program != "importer" {
		t.Errorf("GET /v1/runs/1 = %+v, want %+v", got, lease)
	}
}

func TestStatuses(t *testing.T) {
	s := startServer(t, authority.Options{})
	pad := func(n int) string { // a valid body of exactly n bytes
		const head, tail = `{"note":"`, `"}`
		return head + strings.Repeat("x", n-len(head)-len(tail)) + tail
	}
	for _, tc := range []struct {
		name string
		req  request
		code int
		kind string
	}{
		{"issue", request{method: "POST", path: "/v1/runs", body: `{"program":"t"}`}, 201, ""},
		{"issue, lower-case scheme", request{method: "POST", path: "/v1/runs", body: `{}`, auth: "bearer " + testToken}, 201, ""},
		{"issue, body of exactly 64 KiB", request{method: "POST", path: "/v1/runs", body: pad(MaxBody)}, 201, ""},
		{"no token", request{method: "POST", path: "/v1/runs", body: `{}`, auth: "-"}, 401, KindUnauthorized},
		{"wrong token", request{method: "POST", path: "/v1/runs", body: `{}`, auth: "Bearer nope"}, 401, KindUnauthorized},
		{"token with a suffix", request{method: "POST", path: "/v1/runs", body: `{}`, auth: "Bearer " + testToken + "x"}, 401, KindUnauthorized},
		{"basic auth", request{method: "POST", path: "/v1/runs", body: `{}`, auth: "Basic " + testToken}, 401, KindUnauthorized},
		{"bare token", request{method: "POST", path: "/v1/runs", body: `{}`, auth: testToken}, 401, KindUnauthorized},
		{"read without token", request{method: "GET", path: "/v1/runs/1", auth: "-"}, 401, KindUnauthorized},
		{"backup without token", request{method: "GET", path: "/v1/backup", auth: "-"}, 401, KindUnauthorized},
		{"malformed JSON", request{method: "POST", path: "/v1/runs", body: `{"program":`}, 400, KindBadRequest},
		{"unknown field", request{method: "POST", path: "/v1/runs", body: `{"program":"t","run":7}`}, 400, KindBadRequest},
		{"wrong type", request{method: "POST", path: "/v1/runs", body: `{"pid":"123"}`}, 400, KindBadRequest},
		{"fractional pid", request{method: "POST", path: "/v1/runs", body: `{"pid":1.5}`}, 400, KindBadRequest},
		{"negative pid", request{method: "POST", path: "/v1/runs", body: `{"pid":-1}`}, 400, KindBadRequest},
		{"array", request{method: "POST", path: "/v1/runs", body: `[{}]`}, 400, KindBadRequest},
		{"null", request{method: "POST", path: "/v1/runs", body: `null`}, 400, KindBadRequest},
		{"empty body", request{method: "POST", path: "/v1/runs"}, 400, KindBadRequest},
		{"two objects", request{method: "POST", path: "/v1/runs", body: `{}{}`}, 400, KindBadRequest},
		{"body of 64 KiB + 1", request{method: "POST", path: "/v1/runs", body: pad(MaxBody + 1)}, 413, KindTooLarge},
		{"chunked body of 64 KiB + 1", request{method: "POST", path: "/v1/runs", body: pad(MaxBody + 1), chunked: true}, 413, KindTooLarge},
		{"unknown run", request{method: "GET", path: "/v1/runs/999"}, 404, KindNotFound},
		{"run 0", request{method: "GET", path: "/v1/runs/0"}, 400, KindBadRequest},
		{"run 2^30", request{method: "GET", path: "/v1/runs/1073741824"}, 400, KindBadRequest},
		{"run not a number", request{method: "GET", path: "/v1/runs/abc"}, 400, KindBadRequest},
		{"run negative", request{method: "GET", path: "/v1/runs/-1"}, 400, KindBadRequest},
		{"GET /v1/runs", request{method: "GET", path: "/v1/runs"}, 405, ""},
		{"PUT /v1/runs", request{method: "PUT", path: "/v1/runs", body: `{}`}, 405, ""},
		{"DELETE /v1/runs/1", request{method: "DELETE", path: "/v1/runs/1"}, 405, ""},
		{"POST /healthz", request{method: "POST", path: "/healthz"}, 405, ""},
		{"unknown path", request{method: "GET", path: "/v2/runs"}, 404, ""},
		{"healthz without token", request{method: "GET", path: "/healthz", auth: "-"}, 200, ""},
		{"metrics without token", request{method: "GET", path: "/metrics", auth: "-"}, 200, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			resp, body := s.do(t, tc.req)
			if resp.StatusCode != tc.code {
				t.Fatalf("%s %s = %d %s, want %d", tc.req.method, tc.req.path, resp.StatusCode, body, tc.code)
			}
			if tc.code == 401 && !strings.HasPrefix(resp.Header.Get("WWW-Authenticate"), "Bearer") {
				t.Errorf("401 without a Bearer challenge: %q", resp.Header.Get("WWW-Authenticate"))
			}
			if tc.kind == "" {
				return
			}
			var e ErrorBody
			if err := json.Unmarshal(body, &e); err != nil || e.Kind != tc.kind || e.Error == "" {
				t.Errorf("body = %s, want an error of kind %q", body, tc.kind)
			}
		})
	}
	// Every issued lease above is in the database; nothing else is.
	next, err := s.a.NextRun(context.Background())
	if err != nil || next != 4 {
		t.Errorf("NextRun() = %d, %v, want 4 (three issued)", next, err)
	}
}

func TestExhaustedHTTP(t *testing.T) {
	s := startServer(t, authority.Options{})
	if err := s.a.Bump(context.Background(), callnumber.MaxRun); err != nil {
		t.Fatal(err)
	}
	for _, want := range []int{201, 409, 409} {
		resp, body := s.do(t, request{method: "POST", path: "/v1/runs", body: `{}`})
		if resp.StatusCode != want {
			t.Fatalf("POST /v1/runs = %d %s, want %d", resp.StatusCode, body, want)
		}
		if want == 409 && !bytes.Contains(body, []byte("exhausted")) {
			t.Errorf("409 body %s does not say the run space is exhausted", body)
		}
	}
}

func TestHealthz(t *testing.T) {
	s := startServer(t, authority.Options{})
	if resp, body := s.do(t, request{method: "GET", path: "/healthz"}); resp.StatusCode != 200 {
		t.Errorf("GET /healthz = %d %s, want 200", resp.StatusCode, body)
	}
	s.a.Close()
	if resp, body := s.do(t, request{method: "GET", path: "/healthz"}); resp.StatusCode != 503 {
		t.Errorf("GET /healthz on a closed database = %d %s, want 503", resp.StatusCode, body)
	}
	if resp, body := s.do(t, request{method: "POST", path: "/v1/runs", body: "{}"}); resp.StatusCode != 503 {
		t.Errorf("POST /v1/runs on a closed database = %d %s, want 503", resp.StatusCode, body)
	}
}

func TestMetrics(t *testing.T) {
	s := startServer(t, authority.Options{})
	for range 3 {
		s.do(t, request{method: "POST", path: "/v1/runs", body: `{}`})
	}
	s.do(t, request{method: "POST", path: "/v1/runs", body: `{}`, auth: "-"})
	s.do(t, request{method: "POST", path: "/v1/runs", body: `{`})
	s.do(t, request{method: "GET", path: "/v1/runs/77"})
	s.do(t, request{method: "GET", path: "/v1/runs"})
	_, body := s.do(t, request{method: "GET", path: "/metrics"})
	for _, want := range []string{
		"chibrary_coordinator_leases_issued_total 3\n",
		`chibrary_coordinator_errors_total{kind="unauthorized"} 1` + "\n",
		`chibrary_coordinator_errors_total{kind="bad_request"} 1` + "\n",
		`chibrary_coordinator_errors_total{kind="not_found"} 1` + "\n",
		`chibrary_coordinator_errors_total{kind="method_not_allowed"} 1` + "\n",
		`chibrary_coordinator_requests_total{code="201",route="POST /v1/runs"} 3` + "\n",
		`chibrary_coordinator_requests_total{code="405",route="unmatched"} 1` + "\n",
		`chibrary_coordinator_request_duration_seconds_count{route="POST /v1/runs"} 5` + "\n",
		"go_goroutines ",
	} {
		if !bytes.Contains(body, []byte(want)) {
			t.Errorf("/metrics lacks %q", want)
		}
	}
}

// GET /api/v1/version says which build serves, without a token.
func TestVersion(t *testing.T) {
	s := startServer(t, authority.Options{})
	resp, body := s.do(t, request{method: "GET", path: "/api/v1/version", auth: "-"})
	var v struct{ Program, Version, Go string }
	if err := json.Unmarshal(body, &v); resp.StatusCode != 200 || err != nil || v.Program != "coordinator" || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("GET /api/v1/version = %d %s (%v), want the coordinator's build as JSON", resp.StatusCode, body, err)
	}
}

func TestNewServerWithoutToken(t *testing.T) {
	if _, err := NewServer(nil, ServerOptions{}); err == nil {
		t.Errorf("NewServer without a token = nil error, want one")
	}
}

func FuzzDecodeIssue(f *testing.F) {
	for _, s := range []string{`{}`, `{"program":"importer","host":"h1","pid":123,"note":"x"}`,
		`{"pid":-1}`, `{"x":1}`, `[]`, `null`, `{}{}`, `{"note":"\u00e9"}`, ``} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		req, err := decodeIssue(body)
		if err != nil {
			return
		}
		if req.PID < 0 {
			t.Fatalf("decodeIssue(%q) accepted pid %d", body, req.PID)
		}
		// What is accepted re-encodes to something accepted, the same.
		b, err := json.Marshal(req)
		if err != nil {
			t.Fatal(err)
		}
		again, err := decodeIssue(b)
		if err != nil || again != req {
			t.Fatalf("decodeIssue(%s) = %+v, %v after decodeIssue(%q) = %+v", b, again, err, body, req)
		}
	})
}
