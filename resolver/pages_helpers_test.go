package resolver

import (
	"context"
	"errors"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/syncbuf"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// catalogArchive is a bolt store with the thread fixtures, the demo mbox
// and the web fixtures in it, a catalog of it, and a server over both.
type catalogArchive struct {
	*archive
	cat *catalog.Catalog
	srv *httptest.Server
	log *syncbuf.Buffer
	// byLabel maps the local part of a Message-ID to the call numbers
	// stored with it.
	byLabel map[string][]string
	// raws maps a call number to the bytes stored under it.
	raws map[string][]byte
}

// The fixtures of a catalogArchive: mbox files (with the list they are
// archived for; "" lets List-Id or "unlisted" decide) and single messages.
var (
	catalogMboxes = []struct{ file, list string }{
		{"../fixtures/mbox/demo.mbox", "demo"},
		{"../fixtures/threads/reply-before-parent.mbox", ""},
		{"../fixtures/threads/missing-parent.mbox", "lost"},
		{"../fixtures/threads/pipermail.mbox", "pipermail"},
		{"../fixtures/threads/shared-message-id.mbox", "shared"},
		{"../fixtures/threads/loop.mbox", "loop"},
		{"../fixtures/threads/dates.mbox", "dates"},
		// Reading real lists (issue 22): threads split by pipermail, a
		// list that rewrites From, a patch series, a message sent to two
		// lists, dates a Received header contradicts.
		{"../fixtures/lists/pipermail-split.mbox", "fetchmail"},
		{"../fixtures/lists/dmarc.mbox", ""},
		{"../fixtures/lists/patch-series.mbox", ""},
		{"../fixtures/lists/cross-posted.mbox", ""},
		{"../fixtures/lists/arrival.mbox", "oss"},
	}
	catalogWeb = []string{"hostile.eml", "hostile-plain.eml", "dmarc.eml", "attachments.eml", "alternative.eml", "signed.eml", "latin1.eml", "broken.eml"}
)

func newCatalogArchive(t testing.TB) *catalogArchive {
	t.Helper()
	ca := &catalogArchive{archive: newArchive(t, boltstore.Options{}), byLabel: map[string][]string{}, raws: map[string][]byte{}}
	for _, mb := range catalogMboxes {
		for _, raw := range readMboxFile(t, mb.file) {
			ca.add(t, raw, mb.list)
		}
	}
	for _, name := range catalogWeb {
		ca.add(t, readFixture(t, name), "hostile")
	}
	ca.cat = openTestCatalog(t)
	ca.sync(t)
	ca.srv, ca.log = serveWith(t, ca.st, Options{Catalogs: keeper.Fixed(ca.cat)})
	return ca
}

func (ca *catalogArchive) add(t testing.TB, raw []byte, list string) string {
	t.Helper()
	cn := ca.put(t, raw, list).String()
	meta, _ := mailmsg.Parse(raw)
	label, _, _ := strings.Cut(meta.MessageID, "@")
	ca.byLabel[label] = append(ca.byLabel[label], cn)
	ca.raws[cn] = raw
	return cn
}

// cn returns the one call number of the message with the Message-ID
// label@...
func (ca *catalogArchive) cn(t testing.TB, label string) string {
	t.Helper()
	cns := ca.byLabel[label]
	if len(cns) != 1 {
		t.Fatalf("%d messages with Message-ID %s@..., want 1", len(cns), label)
	}
	return cns[0]
}

func (ca *catalogArchive) sync(t testing.TB) {
	t.Helper()
	if _, err := ca.cat.Sync(t.Context(), ca.st, catalog.SyncOptions{}); err != nil {
		t.Fatalf("Sync = %v", err)
	}
}

func openTestCatalog(t testing.TB) *catalog.Catalog {
	t.Helper()
	// Slow under the race detector on a loaded machine: the deadline of a
	// search is tested where it is the subject (TestSearchCost).
	c, err := catalog.Open(context.Background(), filepath.Join(t.TempDir(), "catalog.db"), catalog.Options{SearchTimeout: time.Minute})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	return c
}

// serveWith runs a Server with opts (and a test logger) over st.
func serveWith(t testing.TB, st store.Store, opts Options) (*httptest.Server, *syncbuf.Buffer) {
	t.Helper()
	var logs syncbuf.Buffer
	opts.Logger = newTestLogger(&logs)
	srv := httptest.NewServer(New(st, opts))
	t.Cleanup(srv.Close)
	return srv, &logs
}

func readMboxFile(t testing.TB, path string) [][]byte {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	return readMbox(t, f, path, mbox.FormatAuto)
}

func readMbox(t testing.TB, r io.Reader, name string, format mbox.Format) [][]byte {
	t.Helper()
	mr := mbox.NewReader(r, mbox.Options{Name: name, Format: format})
	var out [][]byte
	for {
		m, err := mr.Next()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		out = append(out, m.Raw)
	}
}

// statusOf is a keeper that says it is in status: a rebuild or a build
// caught in the middle.
type statusOf struct {
	*keeper.Keeper
	status keeper.Status
}

func (s statusOf) Status() keeper.Status { return s.status }
