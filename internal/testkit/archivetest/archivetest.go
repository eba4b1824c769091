// Package archivetest builds archives for the tests and benchmarks of
// the servers that read one (IMAP, NNTP): a bbolt store written as the
// importer writes it, under a test authority, and its catalog.
package archivetest

import (
	"bufio"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// Archive is a bolt store and its catalog in a directory: messages.db
// and catalog.db, as `resolver serve --data DIR` has them.
type Archive struct {
	Dir     string
	Store   *boltstore.Store
	Catalog *catalog.Catalog

	tb   testing.TB
	auth *storetest.Authority
	run  uint32
	seq  int
}

// New opens a new archive in a temporary directory, closed at the end of
// the test.
func New(tb testing.TB) *Archive {
	tb.Helper()
	return Open(tb, tb.TempDir())
}

// Open opens the archive in dir, creating what is missing, until the test
// ends.
func Open(tb testing.TB, dir string) *Archive {
	tb.Helper()
	a := openStore(tb, dir)
	a.Catalog = a.OpenCatalog()
	return a
}

func openStore(tb testing.TB, dir string) *Archive {
	tb.Helper()
	st, err := boltstore.Open(tb.Context(), filepath.Join(dir, "messages.db"), boltstore.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	a := &Archive{Dir: dir, Store: st, tb: tb}
	tb.Cleanup(func() { a.Close() })
	return a
}

// OpenCatalog opens the archive's catalog for writing.
func (a *Archive) OpenCatalog() *catalog.Catalog {
	a.tb.Helper()
	c, err := catalog.Open(a.tb.Context(), a.CatalogPath(), catalog.Options{})
	if err != nil {
		a.tb.Fatal(err)
	}
	return c
}

// CatalogPath is the catalog file's path.
func (a *Archive) CatalogPath() string { return filepath.Join(a.Dir, "catalog.db") }

// Close closes the catalog and the store.
func (a *Archive) Close() {
	if a.Catalog != nil {
		a.Catalog.Close()
		a.Catalog = nil
	}
	if a.Store != nil {
		a.Store.Close()
		a.Store = nil
	}
}

// Put stores raw messages in list, in one batch, and returns their call
// numbers (that of the one stored before, for a duplicate).
func (a *Archive) Put(list string, raws ...[]byte) []string {
	a.tb.Helper()
	var batch []store.Message
	for _, raw := range raws {
		if a.auth == nil || a.seq > callnumber.MaxSequence {
			a.newRun()
		}
		meta, _ := mailmsg.Parse(raw)
		batch = append(batch, storetest.Message(a.auth.Number(a.tb, a.run, a.seq), raw, meta.MessageID, list))
		a.seq++
	}
	res, err := a.Store.Put(a.tb.Context(), batch)
	if err != nil {
		a.tb.Fatalf("Put = %v", err)
	}
	out := make([]string, len(res))
	for i, r := range res {
		out[i] = r.Number.String()
	}
	return out
}

func (a *Archive) newRun() {
	if a.auth == nil {
		a.auth = storetest.NewAuthority(a.tb, shuffle.Mix)
	}
	a.run++
	a.seq = 0
	if err := a.Store.RecordLease(a.tb.Context(), a.auth.Lease(a.run)); err != nil {
		a.tb.Fatalf("RecordLease = %v", err)
	}
}

// PutMbox stores up to limit messages (0: all) of the mbox r (plain or
// gzip) in list, a thousand per batch, and returns their call numbers.
func (a *Archive) PutMbox(r io.Reader, list string, limit int) []string {
	a.tb.Helper()
	br := bufio.NewReader(r)
	r = br
	if magic, _ := br.Peek(2); len(magic) == 2 && magic[0] == 0x1f && magic[1] == 0x8b {
		zr, err := gzip.NewReader(br)
		if err != nil {
			a.tb.Fatal(err)
		}
		defer zr.Close()
		r = zr
	}
	mr := mbox.NewReader(r, mbox.Options{Name: "test mbox"})
	var out []string
	var raws [][]byte
	flush := func() {
		out = append(out, a.Put(list, raws...)...)
		raws = raws[:0]
	}
	for limit <= 0 || len(out)+len(raws) < limit {
		m, err := mr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			a.tb.Fatal(err)
		}
		raws = append(raws, m.Raw)
		if len(raws) == 1000 {
			flush()
		}
	}
	if len(raws) > 0 {
		flush()
	}
	return out
}

// PutCorpus stores up to limit messages of the shared corpus in list, or
// skips the test when the corpus is absent.
func (a *Archive) PutCorpus(list string, limit int) []string {
	a.tb.Helper()
	f, err := os.Open(testcorpus.Path(a.tb))
	if err != nil {
		a.tb.Fatal(err)
	}
	defer f.Close()
	return a.PutMbox(f, list, limit)
}

// Sync brings the catalog up to date with the store and returns how
// many messages it indexed.
func (a *Archive) Sync() int {
	a.tb.Helper()
	n, err := a.Catalog.Sync(a.tb.Context(), a.Store, catalog.SyncOptions{})
	if err != nil {
		a.tb.Fatalf("Sync = %v", err)
	}
	return n
}

// Remove removes a message from the store (as resolver remove does); a
// Sync then takes it out of the catalog.
func (a *Archive) Remove(cn string) {
	a.tb.Helper()
	n, err := callnumber.Parse(cn)
	if err != nil {
		a.tb.Fatal(err)
	}
	if _, err := a.Store.Remove(a.tb.Context(), n, "test"); err != nil {
		a.tb.Fatalf("Remove(%s) = %v", cn, err)
	}
}

// Get returns the stored bytes of a call number.
func (a *Archive) Get(cn string) []byte {
	a.tb.Helper()
	n, err := callnumber.Parse(cn)
	if err != nil {
		a.tb.Fatal(err)
	}
	m, err := a.Store.Get(a.tb.Context(), n)
	if err != nil {
		a.tb.Fatalf("Get(%s) = %v", cn, err)
	}
	return m.Raw
}

// Scaled returns the archive of the shared corpus written
// testcorpus.ScaledCopies times, reusing one built earlier in
// $CHIBRARY_BENCH_SCALED_DIR. It is slow to build, so it skips unless
// $CHIBRARY_BENCH_SCALED is set.
func Scaled(tb testing.TB) *Archive {
	tb.Helper()
	if os.Getenv("CHIBRARY_BENCH_SCALED") == "" {
		tb.Skip("set CHIBRARY_BENCH_SCALED=1 to build the 84k-message archive")
	}
	corpus := testcorpus.Path(tb)
	dir := os.Getenv("CHIBRARY_BENCH_SCALED_DIR")
	if dir == "" {
		dir = tb.TempDir()
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		tb.Fatal(err)
	}
	// The catalog is made last, complete (catalog.Rebuild renames it into
	// place): with it, the archive was built.
	_, err := os.Stat(filepath.Join(dir, "catalog.db"))
	if built := err == nil; built {
		return Open(tb, dir)
	}
	for _, name := range []string{"messages.db", "messages.packs"} {
		os.RemoveAll(filepath.Join(dir, name))
	}
	a := openStore(tb, dir)
	start := time.Now()
	pr, pw := io.Pipe()
	go func() { pw.CloseWithError(testcorpus.WriteScaled(pw, corpus, testcorpus.ScaledCopies)) }()
	n := len(a.PutMbox(pr, "linux-mips", 0))
	pr.Close()
	tb.Logf("stored %d messages in %v", n, time.Since(start).Round(time.Millisecond))
	// Built as resolver reindex builds it.
	start = time.Now()
	if _, err := catalog.Rebuild(tb.Context(), a.CatalogPath(), a.Store, catalog.SyncOptions{}, catalog.Options{}); err != nil {
		tb.Fatal(err)
	}
	tb.Logf("rebuilt the catalog in %v", time.Since(start).Round(time.Millisecond))
	a.Catalog = a.OpenCatalog()
	return a
}
