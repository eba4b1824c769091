package resolver

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	bolt "go.etcd.io/bbolt"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailview"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

const wantCSP = "default-src 'none'; style-src 'self'; script-src 'self'; img-src 'none'; form-action 'self'; frame-ancestors 'none'; base-uri 'none'"

func TestRoutes(t *testing.T) {
	fa := newFixtureArchive(t)
	signed := fa.numbers["signed.eml"].String()
	tests := []struct {
		name        string
		path        string
		status      int
		contentType string
		has         []string
	}{
		{"index", "/", 200, "text/html; charset=utf-8", []string{`action="/go"`, "8 messages archived."}},
		{"page", "/" + signed, 200, "text/html; charset=utf-8", []string{"<title>A signed message</title>", "This text is signed and must be shown.", "signature.asc", `href="/` + signed + `/raw"`}},
		{"raw", "/" + signed + "/raw", 200, "message/rfc822", []string{"Subject: A signed message\n", "-----BEGIN PGP SIGNATURE-----"}},
		{"json", "/api/v1/messages/" + signed, 200, "application/json", []string{`"callnumber":"` + signed + `"`, `"message_id":"signed-1@example.com"`}},
		{"stats", "/api/v1/stats", 200, "application/json", []string{`{"messages":8}`}},
		{"healthz", "/healthz", 200, "text/plain; charset=utf-8", []string{"ok"}},
		{"stylesheet", "/static/style.css", 200, "text/css; charset=utf-8", []string{"div.text pre"}},
		{"keyboard shortcuts", "/static/keys.js", 200, "text/javascript; charset=utf-8", []string{"keydown"}},
		{"go", "/go?n=" + signed, 302, "", nil},
		{"go malformed", "/go?n=nope", 400, "text/html; charset=utf-8", []string{"is 4 characters long; a call number is 8 letters and digits"}},
		{"nothing there", "/" + signed + "/cooked", 404, "text/html; charset=utf-8", nil},
		{"deeper nothing", "/a/b/c/d/e", 404, "text/html; charset=utf-8", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, fa.srv.URL+tt.path)
			if r.status != tt.status {
				t.Fatalf("GET %s status = %d, want %d; body %q", tt.path, r.status, tt.status, r.body)
			}
			if got := r.header.Get("Content-Type"); tt.contentType != "" && got != tt.contentType {
				t.Errorf("GET %s Content-Type = %q, want %q", tt.path, got, tt.contentType)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.body, s) {
					t.Errorf("GET %s body does not contain %q:\n%s", tt.path, s, r.body)
				}
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("GET %s X-Content-Type-Options = %q, want nosniff", tt.path, got)
			}
			if got := r.header.Get("Referrer-Policy"); got != "no-referrer" {
				t.Errorf("GET %s Referrer-Policy = %q, want no-referrer", tt.path, got)
			}
			if got := r.header.Get("Content-Security-Policy"); !strings.HasPrefix(got, "default-src 'none'") {
				t.Errorf("GET %s Content-Security-Policy = %q, want default-src 'none'...", tt.path, got)
			}
			if strings.HasPrefix(tt.contentType, "text/html") {
				if err := unsafeHTML(r.body); err != nil {
					t.Errorf("GET %s: %v", tt.path, err)
				}
			}
		})
	}
}

func TestRawIsStoredBytes(t *testing.T) {
	fa := newFixtureArchive(t)
	for _, name := range fixtureFiles {
		t.Run(name, func(t *testing.T) {
			n := fa.numbers[name]
			r := get(t, fa.srv.URL+"/"+n.String()+"/raw")
			if r.status != 200 || r.body != string(readFixture(t, name)) {
				t.Fatalf("GET raw = %d %q, want 200 and the stored bytes", r.status, r.body)
			}
			if got, want := r.header.Get("Content-Disposition"), `inline; filename="`+n.String()+`.eml"`; got != want {
				t.Errorf("Content-Disposition = %q, want %q", got, want)
			}
			if got := r.header.Get("Content-Security-Policy"); !strings.Contains(got, "sandbox") || !strings.HasPrefix(got, "default-src 'none'") {
				t.Errorf("Content-Security-Policy = %q, want default-src 'none' and sandbox", got)
			}
			if got := r.header.Get("X-Content-Type-Options"); got != "nosniff" {
				t.Errorf("X-Content-Type-Options = %q, want nosniff", got)
			}
		})
	}
}

// otherNumber returns a call number whose fields are out of what the
// test authority issues: version v, run and seq as given, shuffled with the
// test key.
func otherNumber(t *testing.T, a *archive, version uint8, run uint32, seq uint16) string {
	t.Helper()
	v := uint64(version)<<(callnumber.RunBits+callnumber.SequenceBits) | uint64(run)<<callnumber.SequenceBits | uint64(seq)
	return a.codec.Number(v).String()
}

func TestMalformedAndUnknown(t *testing.T) {
	fa := newFixtureArchive(t)
	tests := []struct {
		name   string
		cn     string
		status int
		says   string
	}{
		{"too short", "abc", 400, "is 3 characters long; a call number is 8 letters and digits, like 3kTMd2xB"},
		{"too long", "abcdefghi", 400, "is 9 characters long"},
		{"bad character", "abcdefg-", 400, "at position 8; a call number is 8 letters and digits"},
		{"non-ASCII", url.PathEscape("abcdefgé"), 400, "is 8 characters long"},
		// 8 alphabet characters are a call number to a reader: one that
		// is not stored is no such message (a typo, most likely), 404.
		{"out of range", "zzzzzzzz", 404, "no such message"},
		{"just out of range", callnumber.Number(1 << callnumber.Bits).String(), 404, "no such message"},
		{"unknown version", otherNumber(t, fa.archive, 1, 1, 0), 404, "no such message"},
		{"run 0", otherNumber(t, fa.archive, 0, 0, 5), 404, "no such message"},
		{"unused sequence", fa.number(t, 1, 9999).String(), 404, "No message"},
		{"run never leased", fa.number(t, 77, 0).String(), 404, "No message"},
	}
	for _, tt := range tests {
		for _, route := range []string{"/%s", "/%s/raw", "/api/v1/messages/%s"} {
			path := strings.Replace(route, "%s", tt.cn, 1)
			t.Run(tt.name+" "+route, func(t *testing.T) {
				r := get(t, fa.srv.URL+path)
				if r.status != tt.status {
					t.Fatalf("GET %s status = %d, want %d; body %q", path, r.status, tt.status, r.body)
				}
				if !strings.Contains(r.body, tt.says) {
					t.Errorf("GET %s body = %q, want it to say %q", path, r.body, tt.says)
				}
				if r.header.Get("ETag") != "" || r.header.Get("Cache-Control") == immutable {
					t.Errorf("GET %s: error response has ETag %q, Cache-Control %q", path, r.header.Get("ETag"), r.header.Get("Cache-Control"))
				}
				if strings.HasPrefix(route, "/api/") {
					var e struct{ Error string }
					if err := json.Unmarshal([]byte(r.body), &e); err != nil || e.Error == "" {
						t.Errorf("GET %s body %q is not a JSON error: %v", path, r.body, err)
					}
				}
			})
		}
	}
}

func TestUnboundStore(t *testing.T) {
	st, err := boltstore.Open(t.Context(), filepath.Join(t.TempDir(), "messages.db"), boltstore.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	srv, _ := serve(t, st)
	tests := []struct {
		path   string
		status int
	}{
		{"/" + callnumber.Number(12345).String(), 404}, // any well-formed number: no codec to judge its fields
		{"/" + callnumber.Number(12345).String() + "/raw", 404},
		{"/api/v1/messages/" + callnumber.Number(1).String(), 404},
		{"/zzzzzzzz", 404},
		{"/zzzzzzz!", 400},
		{"/m/anything@example.com", 404},
		{"/healthz", 200},
	}
	for _, tt := range tests {
		if r := get(t, srv.URL+tt.path); r.status != tt.status {
			t.Errorf("GET %s status = %d, want %d", tt.path, r.status, tt.status)
		}
	}
	if r := get(t, srv.URL+"/api/v1/stats"); r.body != "{\"messages\":0}\n" {
		t.Errorf("stats = %q, want {\"messages\":0}", r.body)
	}
}

func TestConditional(t *testing.T) {
	fa := newFixtureArchive(t)
	n := fa.numbers["latin1.eml"].String()
	digest := store.DigestOf(readFixture(t, "latin1.eml")).String()
	for _, path := range []string{"/" + n, "/" + n + "/raw", "/api/v1/messages/" + n} {
		t.Run(path, func(t *testing.T) {
			r := get(t, fa.srv.URL+path)
			etag := r.header.Get("ETag")
			if r.status != 200 || !strings.HasPrefix(etag, `"`+digest) {
				t.Fatalf("GET %s = %d ETag %q, want 200 and an ETag from the digest %s", path, r.status, etag, digest)
			}
			if got := r.header.Get("Cache-Control"); got != "public, max-age=86400" {
				t.Errorf("Cache-Control = %q, want public, max-age=86400", got)
			}
			for _, inm := range []string{etag, "W/" + etag, `"other", ` + etag, "*"} {
				r := get(t, fa.srv.URL+path, "If-None-Match", inm)
				if r.status != http.StatusNotModified || r.body != "" {
					t.Errorf("GET %s If-None-Match %s = %d %q, want 304 and no body", path, inm, r.status, r.body)
				}
				if got := r.header.Get("ETag"); got != etag {
					t.Errorf("304 ETag = %q, want %q", got, etag)
				}
			}
			if r := get(t, fa.srv.URL+path, "If-None-Match", `"something-else"`); r.status != 200 {
				t.Errorf("GET %s with another ETag = %d, want 200", path, r.status)
			}
		})
	}
	t.Run("representations differ", func(t *testing.T) {
		tags := map[string]bool{}
		for _, path := range []string{"/" + n, "/" + n + "/raw", "/api/v1/messages/" + n} {
			tags[get(t, fa.srv.URL+path).header.Get("ETag")] = true
		}
		if len(tags) != 3 {
			t.Errorf("ETags %v: want three different ones", tags)
		}
	})
	t.Run("not cached", func(t *testing.T) {
		for _, path := range []string{"/api/v1/stats", "/m/latin1-1@example.de", "/m/shared@example.com", "/"} {
			r := get(t, fa.srv.URL+path)
			if r.header.Get("ETag") != "" || r.header.Get("Cache-Control") == immutable {
				t.Errorf("GET %s: ETag %q, Cache-Control %q; want neither", path, r.header.Get("ETag"), r.header.Get("Cache-Control"))
			}
		}
	})
}

func TestHostileMessages(t *testing.T) {
	fa := newFixtureArchive(t)
	tests := []struct {
		file    string
		visible []string // escaped text that must be on the page
	}{
		{"hostile.eml", []string{
			"Hostile body text stays visible.",
			`&lt;script&gt;document.title=&#39;pwned-to&#39;&lt;/script&gt;`,
			"Mallory  Set-Cookie: session=stolen",
			`href="https://example.org/ok"`,
		}},
		{"hostile-plain.eml", []string{
			"&lt;/title&gt;&lt;script&gt;document.title=&#39;pwned-plain&#39;&lt;/script&gt;",
			"&lt;a href=&#34;javascript:alert(1)&#34;&gt;x&lt;/a&gt;",
		}},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := get(t, fa.srv.URL+"/"+fa.numbers[tt.file].String())
			if r.status != 200 {
				t.Fatalf("status = %d, want 200", r.status)
			}
			if got := r.header.Get("Content-Security-Policy"); got != wantCSP {
				t.Errorf("Content-Security-Policy = %q, want %q", got, wantCSP)
			}
			if err := unsafeHTML(r.body); err != nil {
				t.Errorf("page is unsafe: %v\n%s", err, r.body)
			}
			// The pages' own script aside (unsafeHTML allows it alone).
			low := strings.ToLower(strings.ReplaceAll(r.body, keysTag, ""))
			// Markup in text is escaped (unsafeHTML checked every element
			// and attribute); no tag of these may appear unescaped.
			for _, s := range []string{"<script", `href="javascript:`, "<img", "<iframe", "<svg", "<style", "tracker.example"} {
				if strings.Contains(low, s) {
					t.Errorf("page contains %q:\n%s", s, r.body)
				}
			}
			for _, s := range tt.visible {
				if !strings.Contains(r.body, s) {
					t.Errorf("page does not contain %q:\n%s", s, r.body)
				}
			}
			// The JSON of the headers escapes markup too.
			j := get(t, fa.srv.URL+"/api/v1/messages/"+fa.numbers[tt.file].String())
			if strings.Contains(j.body, "<") || strings.Contains(j.body, ">") {
				t.Errorf("JSON contains raw < or >: %s", j.body)
			}
		})
	}
}

func TestRendering(t *testing.T) {
	fa := newFixtureArchive(t)
	tests := []struct {
		file   string
		has    []string
		hasNot []string
	}{
		{"signed.eml", []string{"This text is signed and must be shown.", "signature.asc", "application/pgp-signature"}, []string{"BEGIN PGP SIGNATURE"}},
		{"latin1.eml", []string{"Grüße aus Köln, ça va très bien.", "Jörg Müller", "Привет", "Žluťoučký kůň"}, []string{"=?iso-8859"}},
		{"alternative.eml", []string{
			"The plain alternative, café.", "pass txt.exe",
			`In reply to <a href="/` + fa.numbers["signed.eml"].String() + `">A signed message</a>`,
		}, []string{"HTML</b> alternative", "not-archived@example.com", "../"}},
		{"broken.eml", []string{"A broken header", "Body of the broken message &lt;b&gt;not bold&lt;/b&gt;."}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.file, func(t *testing.T) {
			r := get(t, fa.srv.URL+"/"+fa.numbers[tt.file].String())
			if r.status != 200 {
				t.Fatalf("status = %d, want 200", r.status)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.body, s) {
					t.Errorf("page does not contain %q:\n%s", s, r.body)
				}
			}
			for _, s := range tt.hasNot {
				if strings.Contains(r.body, s) {
					t.Errorf("page contains %q:\n%s", s, r.body)
				}
			}
		})
	}
}

func TestMessageJSON(t *testing.T) {
	fa := newFixtureArchive(t)
	n := fa.numbers["latin1.eml"]
	r := get(t, fa.srv.URL+"/api/v1/messages/"+n.String())
	var got messageJSON
	if err := json.Unmarshal([]byte(r.body), &got); err != nil {
		t.Fatalf("JSON %q: %v", r.body, err)
	}
	f, err := fa.codec.Decode(n)
	if err != nil {
		t.Fatal(err)
	}
	if got.CallNumber != n.String() || got.Run != f.Run || got.Sequence != f.Sequence || got.MessageID != "latin1-1@example.de" ||
		got.List != "test-list.example.org" || got.Subject != "Žluťoučký kůň and “quotes”" || got.Size != len(readFixture(t, "latin1.eml")) {
		t.Errorf("JSON = %+v, want call number %s, run %d, seq %d, the Message-ID, list, decoded subject and size", got, n, f.Run, f.Sequence)
	}
	var from string
	for _, h := range got.Headers {
		if h.Name == "From" {
			from = h.Value
		}
	}
	if from != "Jörg Müller <joerg@example.de>" {
		t.Errorf("From header = %q, want Jörg Müller <joerg@example.de>", from)
	}
}

func TestByMessageID(t *testing.T) {
	fa := newFixtureArchive(t)
	slash := fa.put(t, []byte("Subject: slash\nMessage-ID: <a/b?c#d%e@example.com>\n\nbody\n"), "")
	tests := []struct {
		name     string
		path     string
		status   int
		location string
		has      []string
	}{
		{"one", "/m/latin1-1@example.de", 302, "/" + fa.numbers["latin1.eml"].String(), nil},
		{"escaped", "/m/latin1-1%40example.de", 302, "/" + fa.numbers["latin1.eml"].String(), nil},
		{"with brackets", "/m/%3Clatin1-1@example.de%3E", 302, "/" + fa.numbers["latin1.eml"].String(), nil},
		{"slash and specials escaped", "/m/" + url.PathEscape("a/b?c#d%e@example.com"), 302, "/" + slash.String(), nil},
		{"several", "/m/shared@example.com", 200, "", []string{
			`href="/` + fa.numbers["dup-a.eml"].String() + `"`, `href="/` + fa.numbers["dup-b.eml"].String() + `"`,
			"First of two sharing an ID", "Second of two sharing an ID",
		}},
		{"none", "/m/nobody@example.com", 404, "", []string{"No message"}},
		{"empty", "/m/", 404, "", nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := get(t, fa.srv.URL+tt.path)
			if r.status != tt.status {
				t.Fatalf("GET %s status = %d, want %d; body %q", tt.path, r.status, tt.status, r.body)
			}
			if got := r.header.Get("Location"); got != tt.location {
				t.Errorf("GET %s Location = %q, want %q", tt.path, got, tt.location)
			}
			for _, s := range tt.has {
				if !strings.Contains(r.body, s) {
					t.Errorf("GET %s body does not contain %q:\n%s", tt.path, s, r.body)
				}
			}
		})
	}
}

func TestMetricsAndLogs(t *testing.T) {
	fa := newFixtureArchive(t)
	n := fa.numbers["signed.eml"].String()
	get(t, fa.srv.URL+"/"+n+"/raw")
	get(t, fa.srv.URL+"/zzzzzzzz")
	get(t, fa.srv.URL+"/m/shared@example.com")
	r := get(t, fa.srv.URL+"/metrics")
	for _, s := range []string{
		`chibrary_resolver_requests_total{code="200",route="GET /{callnumber}/raw"} 1`,
		`chibrary_resolver_requests_total{code="404",route="GET /{callnumber}"} 1`,
		`chibrary_resolver_requests_total{code="200",route="GET /m/{message-id}"} 1`,
		`chibrary_resolver_request_duration_seconds_bucket{route="GET /{callnumber}/raw",le="+Inf"} 1`,
	} {
		if !strings.Contains(r.body, s) {
			t.Errorf("metrics do not contain %q:\n%s", s, r.body)
		}
	}
	logs := fa.log.String()
	for _, s := range []string{"method=GET path=/" + n + "/raw status=200 bytes=", "path=/zzzzzzzz status=404"} {
		if !strings.Contains(logs, s) {
			t.Errorf("logs do not contain %q:\n%s", s, logs)
		}
	}
	if strings.Contains(logs, "PGP SIGNATURE") || strings.Contains(logs, "signed and must be shown") {
		t.Errorf("logs contain a message body:\n%s", logs)
	}
}

// TestLockedStore holds the bolt file's exclusive lock the way a writing
// process does, and checks that the resolver answers 503 with Retry-After
// rather than an error or a hang.
func TestLockedStore(t *testing.T) {
	a := newArchive(t, boltstore.Options{LockTimeout: 50 * time.Millisecond, Linger: -1})
	n := a.put(t, readFixture(t, "signed.eml"), "")
	srv, _ := serve(t, a.st)
	db, err := bolt.Open(a.path, 0o600, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatalf("bolt.Open = %v", err)
	}
	for _, path := range []string{"/" + n.String(), "/" + n.String() + "/raw", "/api/v1/messages/" + n.String(), "/api/v1/stats", "/m/signed-1@example.com"} {
		r := get(t, srv.URL+path)
		if r.status != http.StatusServiceUnavailable || r.header.Get("Retry-After") == "" {
			t.Errorf("GET %s while locked = %d Retry-After %q, want 503 with Retry-After", path, r.status, r.header.Get("Retry-After"))
		}
	}
	if err := db.Close(); err != nil {
		t.Fatal(err)
	}
	if r := get(t, srv.URL+"/"+n.String()+"/raw"); r.status != 200 {
		t.Errorf("GET raw after unlock = %d, want 200", r.status)
	}
}

func TestServeShutsDownGracefully(t *testing.T) {
	fa := newFixtureArchive(t)
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	s := New(fa.st, Options{})
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	base := "http://" + ln.Addr().String()
	if r := get(t, base+"/healthz"); r.status != 200 {
		t.Fatalf("healthz = %d, want 200", r.status)
	}
	cancel()
	if err := <-done; err != nil {
		t.Errorf("Serve after cancel = %v, want nil", err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Errorf("GET after shutdown succeeded, want a refused connection")
	}
}

func TestResolveAndInspect(t *testing.T) {
	fa := newFixtureArchive(t)
	n := fa.numbers["signed.eml"]
	in, err := Inspect(t.Context(), fa.st, n.String())
	if err != nil {
		t.Fatalf("Inspect = %v", err)
	}
	f, _ := fa.codec.Decode(n)
	if in.CallNumber != n || in.Run != f.Run || in.Sequence != f.Sequence || in.Lease.Nonce != "n1" || in.Lease.Program != "resolver-test" || in.MessageID != "signed-1@example.com" {
		t.Errorf("Inspect = %+v, want number %s run %d seq %d and the lease of run 1", in, n, f.Run, f.Sequence)
	}
	if in.Lease.Key != ([32]byte{}) {
		t.Errorf("Inspect shows the authority's key")
	}
	errTests := []struct {
		in   string
		want error
	}{
		{"short", ErrMalformed},
		{"short", callnumber.ErrLength},
		{"zzzzzzzz", callnumber.ErrRange},
		{"abcdefg_", callnumber.ErrCharacter},
		{fa.number(t, 1, 5000).String(), store.ErrNotFound},
	}
	for _, tt := range errTests {
		if _, err := Inspect(t.Context(), fa.st, tt.in); !errors.Is(err, tt.want) {
			t.Errorf("Inspect(%q) = %v, want %v", tt.in, err, tt.want)
		}
	}
}

// FuzzPage renders the message page of arbitrary bytes, as the template
// it replaced would (checkPage), and checks that nothing executable or
// remote comes out.
func FuzzPage(f *testing.F) {
	for _, name := range fixtureFiles {
		f.Add(readFixture(f, name))
	}
	f.Fuzz(func(t *testing.T, raw []byte) {
		v := mailview.Parse(raw, mailview.Options{MaxTextBytes: 1 << 16})
		page := checkPage(t, pageData{CallNumber: "00000001", Title: v.Subject, View: v})
		if err := unsafeHTML(page); err != nil {
			t.Fatalf("page of %q is unsafe: %v", raw, err)
		}
	})
}

func TestVersion(t *testing.T) {
	fa := newFixtureArchive(t)
	r := get(t, fa.srv.URL+"/api/v1/version")
	var v struct{ Program, Version, Go string }
	if err := json.Unmarshal([]byte(r.body), &v); r.status != 200 || err != nil || v.Program != "resolver" || v.Version == "" || !strings.HasPrefix(v.Go, "go") {
		t.Errorf("GET /api/v1/version = %d %s (%v), want the resolver's build as JSON", r.status, r.body, err)
	}
}

// TestHealthzInterruptedCompaction: while a compaction that stopped
// half-way waits to be run again, /healthz says the store cannot be read
// and message pages answer 503, not 200 and 500.
func TestHealthzInterruptedCompaction(t *testing.T) {
	fa := newFixtureArchive(t)
	signed := fa.numbers["signed.eml"].String()
	if r := get(t, fa.srv.URL+"/healthz"); r.status != 200 {
		t.Fatalf("healthz before = %d, want 200", r.status)
	}
	// What a compaction killed between retiring the file and moving its
	// copy into place leaves: the file marked retired (boltstore's
	// layout), and no copy.
	db, err := bolt.Open(fa.path, 0o644, &bolt.Options{Timeout: 10 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	err = db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket([]byte("meta")).Put([]byte("format"), []byte("chibrary-messages/retired"))
	})
	db.Close()
	if err != nil {
		t.Fatal(err)
	}
	for _, path := range []string{"/healthz", "/" + signed, "/" + signed + "/raw", "/api/v1/messages/" + signed} {
		if r := get(t, fa.srv.URL+path); r.status != http.StatusServiceUnavailable {
			t.Errorf("GET %s with the compaction stopped half-way = %d, want 503", path, r.status)
		}
	}
	if logs := fa.log.String(); !strings.Contains(logs, "resolver compact") || !strings.Contains(logs, "health check failed") {
		t.Errorf("the log does not say the health check failed and what repairs it:\n%s", logs)
	}
}

// consensusStore is a store whose consensus groups (Riak's) serve or not
// as the test says.
type consensusStore struct {
	store.Store
	err atomic.Pointer[error]
}

func (c *consensusStore) Consensus(context.Context) error {
	if p := c.err.Load(); p != nil {
		return *p
	}
	return nil
}

// TestHealthzConsensus: while some of a store's consensus groups cannot
// serve (Riak after node faults), /healthz answers 200 (messages can be
// read) with a second line saying that imports and new runs wait and
// why, in the store's words (which name the command that shows the
// groups), and the log says so once; once they serve again, "ok" alone,
// and the log says so.
func TestHealthzConsensus(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	a.put(t, []byte("Message-ID: <h@example.org>\nSubject: h\n\nbody\n"), "l")
	cs := &consensusStore{Store: a.st}
	srv, logs := serveWith(t, cs, Options{})
	if r := get(t, srv.URL+"/healthz"); r.status != 200 || r.body != "ok\n" {
		t.Fatalf("healthz with every group serving = %d %q, want 200 ok", r.status, r.body)
	}
	why := fmt.Errorf("%w: 4 of 64 reads of the consistent type's ring were not answered (riak admin ensemble-status shows the groups)", store.ErrUnavailable)
	cs.err.Store(&why)
	for range 2 {
		r := get(t, srv.URL+"/healthz")
		if r.status != 200 || !strings.HasPrefix(r.body, "ok\nclaims unavailable, imports and new runs wait: ") || !strings.Contains(r.body, "riak admin ensemble-status") {
			t.Errorf("healthz with groups that cannot serve = %d %q, want 200, ok and a line saying claims wait, naming ensemble-status", r.status, r.body)
		}
	}
	if n := strings.Count(logs.String(), "imports and new runs wait"); n != 1 {
		t.Errorf("the log says %d times that imports wait, want once:\n%s", n, logs.String())
	}
	cs.err.Store(nil)
	if r := get(t, srv.URL+"/healthz"); r.status != 200 || r.body != "ok\n" {
		t.Errorf("healthz once the groups serve again = %d %q, want 200 ok", r.status, r.body)
	}
	if !strings.Contains(logs.String(), "health check passes again") {
		t.Errorf("the log does not say the health check passes again:\n%s", logs.String())
	}
}
