package resolver

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/htmlcheck"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// testKey is the fixed shuffle key of the test authority, so that call
// numbers are the same on every run.
var testKey = func() (k shuffle.Key) {
	for i := range k {
		k[i] = byte(i*7 + 3)
	}
	return k
}()

var testIssued = time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC)

// testLease returns the lease of a run of the test authority.
func testLease(run uint32) callnumber.Lease {
	return callnumber.Lease{
		Run: run, Version: callnumber.CurrentVersion, Authority: "test", Scheme: shuffle.Bits, Key: testKey,
		Nonce: fmt.Sprintf("n%d", run), Program: "resolver-test", Host: "test-host", PID: 4242, Note: "fixture run",
		IssuedAt: testIssued,
	}
}

// archive is a real bbolt store with the test authority's run 1 recorded.
type archive struct {
	path  string
	st    *boltstore.Store
	codec *callnumber.Codec
	seq   uint16
}

func newArchive(t testing.TB, opts boltstore.Options) *archive {
	t.Helper()
	path := filepath.Join(t.TempDir(), "messages.db")
	st, err := boltstore.Open(context.Background(), path, opts)
	if err != nil {
		t.Fatalf("boltstore.Open = %v", err)
	}
	t.Cleanup(func() { st.Close() })
	if err := st.RecordLease(context.Background(), testLease(1)); err != nil {
		t.Fatalf("RecordLease = %v", err)
	}
	codec, err := callnumber.NewCodec(shuffle.Bits, testKey)
	if err != nil {
		t.Fatal(err)
	}
	return &archive{path: path, st: st, codec: codec}
}

// number returns the call number of run 1 and seq.
func (a *archive) number(t testing.TB, run uint32, seq uint16) callnumber.Number {
	t.Helper()
	n, err := a.codec.Encode(callnumber.Fields{Run: run, Sequence: seq})
	if err != nil {
		t.Fatal(err)
	}
	return n
}

// message makes the store.Message of raw under the next number of run 1.
func (a *archive) message(t testing.TB, raw []byte, list string) store.Message {
	t.Helper()
	n := a.number(t, 1, a.seq)
	a.seq++
	meta, _ := mailmsg.Parse(raw)
	return store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: meta.MessageID, List: list}
}

// put stores raw and returns its call number.
func (a *archive) put(t testing.TB, raw []byte, list string) callnumber.Number {
	t.Helper()
	m := a.message(t, raw, list)
	res, err := a.st.Put(context.Background(), []store.Message{m})
	if err != nil {
		t.Fatalf("Put = %v", err)
	}
	if res[0].Duplicate {
		t.Fatalf("Put: message %s is a duplicate", m.MessageID)
	}
	return m.Number
}

func readFixture(t testing.TB, name string) []byte {
	t.Helper()
	b, err := os.ReadFile(filepath.Join("..", "fixtures", "web", name))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// fixtureArchive stores every fixture and serves them over loopback HTTP.
type fixtureArchive struct {
	*archive
	srv     *httptest.Server
	numbers map[string]callnumber.Number // by fixture file name
	log     *syncbuf.Buffer
}

var fixtureFiles = []string{"hostile.eml", "hostile-plain.eml", "signed.eml", "latin1.eml", "alternative.eml", "broken.eml", "dup-a.eml", "dup-b.eml"}

func newFixtureArchive(t testing.TB) *fixtureArchive {
	t.Helper()
	fa := &fixtureArchive{archive: newArchive(t, boltstore.Options{}), numbers: map[string]callnumber.Number{}}
	for _, name := range fixtureFiles {
		fa.numbers[name] = fa.put(t, readFixture(t, name), "test-list.example.org")
	}
	fa.srv, fa.log = serve(t, fa.st)
	return fa
}

// serve runs a Server over st on loopback, logging into the returned
// builder.
func serve(t testing.TB, st store.Store) (*httptest.Server, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	h := New(st, Options{Logger: newTestLogger(&logs)})
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv, &logs
}

// noRedirect is a client that reports redirects instead of following them.
var noRedirect = &http.Client{
	CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	Timeout:       time.Minute,
}

type response struct {
	status int
	header http.Header
	body   string
}

func get(t testing.TB, url string, header ...string) response {
	t.Helper()
	req, err := http.NewRequest(http.MethodGet, url, nil)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; i+1 < len(header); i += 2 {
		req.Header.Set(header[i], header[i+1])
	}
	resp, err := noRedirect.Do(req)
	if err != nil {
		t.Fatalf("GET %s: %v", url, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatalf("GET %s: reading body: %v", url, err)
	}
	return response{status: resp.StatusCode, header: resp.Header, body: string(b)}
}

// unsafeHTML checks a page of the resolver's: its stylesheet, its search
// form and links within the archive are allowed, nothing executable or
// remote.
// keysTag is the pages' one script element (templates/base.html).
const keysTag = `<script src="/static/keys.js" defer></script>`

func unsafeHTML(s string) error {
	return htmlcheck.Check(s, htmlcheck.Options{Stylesheet: "/static/style.css", Script: "/static/keys.js", Chart: true, FormAction: "/go", ArchiveLinks: true})
}
