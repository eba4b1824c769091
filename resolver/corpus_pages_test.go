package resolver

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"fmt"
	"io"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// corpusArchive stores the shared corpus (corpusLimit messages) in list
// linux-mips and builds its catalog. It skips when the corpus is absent.
func corpusArchive(t testing.TB) (*archive, *catalog.Catalog, map[string][]byte) {
	t.Helper()
	msgs := readCorpus(t, corpusLimit)
	a := newArchive(t, boltstore.Options{})
	raws := map[string][]byte{}
	for start := 0; start < len(msgs); start += 500 {
		var batch []store.Message
		for _, raw := range msgs[start:min(start+500, len(msgs))] {
			batch = append(batch, a.message(t, raw, "linux-mips"))
		}
		res, err := a.st.Put(t.Context(), batch)
		if err != nil {
			t.Fatal(err)
		}
		for i, r := range res {
			if !r.Duplicate {
				raws[r.Number.String()] = batch[i].Raw
			}
		}
	}
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	return a, c, raws
}

// TestCorpusPages serves real mail: every month page and its JSON, every
// list page, a sample of threads and messages, all safe HTML; and a
// month's download gives back its messages byte for byte.
func TestCorpusPages(t *testing.T) {
	a, c, raws := corpusArchive(t)
	srv, logs := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	ctx := t.Context()
	check := func(path string, status int) response {
		t.Helper()
		r := get(t, srv.URL+path)
		if r.status != status {
			t.Fatalf("GET %s = %d, want %d: %s", path, r.status, status, r.body)
		}
		if strings.HasPrefix(r.header.Get("Content-Type"), "text/html") {
			if err := unsafeHTML(r.body); err != nil {
				t.Fatalf("GET %s: %v", path, err)
			}
		} else if !json.Valid([]byte(r.body)) && strings.HasPrefix(path, "/api/") {
			t.Fatalf("GET %s: invalid JSON", path)
		}
		return r
	}
	if r := check("/", 200); !strings.Contains(r.body, `href="/l/linux-mips/"`) {
		t.Fatalf("the index does not list linux-mips")
	}
	l, err := c.List(ctx, "linux-mips")
	if err != nil {
		t.Fatal(err)
	}
	pages := 0
	for page := 1; ; page++ {
		r := check(fmt.Sprintf("/l/linux-mips/?page=%d", page), 200)
		check(fmt.Sprintf("/api/v1/lists/linux-mips?page=%d", page), 200)
		pages++
		if !strings.Contains(r.body, `rel="next"`) {
			break
		}
	}
	months, err := c.Months(ctx, "linux-mips")
	if err != nil {
		t.Fatal(err)
	}
	for _, m := range months {
		ym := fmt.Sprintf("%04d-%02d", m.Year, m.Month)
		check("/l/linux-mips/"+ym+"/", 200)
		check("/api/v1/lists/linux-mips/"+ym, 200)
	}
	threads, total, err := c.Threads(ctx, "linux-mips", 0, 1<<20)
	if err != nil {
		t.Fatal(err)
	}
	step := max(1, len(threads)/150)
	checked := 0
	for i := 0; i < len(threads); i += step {
		cn := threads[i].Root.CallNumber
		check("/t/"+cn+"/", 200)
		check("/api/v1/threads/"+cn, 200)
		r := check("/"+cn, 200)
		if !strings.Contains(r.body, `<nav class="thread"`) {
			t.Errorf("the page of %s has no thread navigation", cn)
		}
		checked++
	}
	n := 0
	for cn := range raws {
		if n++; n > 300 {
			break
		}
		check("/"+cn, 200)
	}
	check("/l/linux-mips/atom.xml", 200)
	// A search that matches every message counts the first
	// countedResults, says there are more, and pages to the end.
	if l.Messages <= countedResults {
		t.Fatalf("%d messages: too few to search past the count", l.Messages)
	}
	if r := check("/search?q=list:linux-mips", 200); !strings.Contains(r.body, fmt.Sprintf("More than %d messages found, page 1 of more than %d.", countedResults, countedResults/resultsPerPage)) ||
		!strings.Contains(r.body, `rel="next"`) {
		t.Errorf("the first page of a search matching %d messages:\n%s", l.Messages, r.body)
	}
	if r := check("/api/v1/search?q=list:linux-mips", 200); !strings.Contains(r.body, fmt.Sprintf(`"total":%d,"more":true,"more_pages":true,`, countedResults)) {
		t.Errorf("the JSON of a search matching %d messages: %s", l.Messages, r.body)
	}
	last := min(maxResultPages, (l.Messages+resultsPerPage-1)/resultsPerPage)
	wantLead := fmt.Sprintf("%d messages found, page %d of %d.", l.Messages, last, last)
	if last == maxResultPages {
		wantLead = fmt.Sprintf("More than %d messages found, page %d of %d.", last*resultsPerPage, last, last)
	}
	if r := check(fmt.Sprintf("/search?q=list:linux-mips&page=%d", last), 200); !strings.Contains(r.body, wantLead) || strings.Contains(r.body, `rel="next"`) {
		t.Errorf("the last page of a search matching %d messages, want %q:\n%s", l.Messages, wantLead, r.body)
	}
	check(fmt.Sprintf("/search?q=list:linux-mips&page=%d", last+1), 404)
	// The busiest month, downloaded and read back.
	busiest := months[0]
	for _, m := range months {
		if m.Messages > busiest.Messages {
			busiest = m
		}
	}
	ym := fmt.Sprintf("%04d-%02d", busiest.Year, busiest.Month)
	r := get(t, srv.URL+"/l/linux-mips/"+ym+".mbox.gz")
	zr, err := gzip.NewReader(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatal(err)
	}
	got := readMbox(t, bytes.NewReader(plain), ym, mbox.FormatAuto)
	cns, err := c.MonthMessages(ctx, "linux-mips", busiest.Year, busiest.Month)
	if err != nil {
		t.Fatal(err)
	}
	want := make([][]byte, len(cns))
	for i, cn := range cns {
		want[i] = raws[cn]
	}
	compareMessages(t, "the download of "+ym, got, want)
	if strings.Contains(logs.String(), "level=ERROR") {
		t.Errorf("errors logged:\n%s", logs.String())
	}
	t.Logf("%d messages, %d threads, %d list pages, %d months, %d threads and their first messages checked; %s has %d messages", l.Messages, total, pages, len(months), checked, ym, len(got))
}
