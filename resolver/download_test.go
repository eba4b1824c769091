package resolver

import (
	"bytes"
	"compress/gzip"
	"context"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/mailsource"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// roundTrip are messages whose bytes an mbox download must carry intact:
// body lines that look like From_ lines, quoted ones (mboxrd quotes
// them once more), CRLF line ends, 8-bit bytes, a trailing empty line.
var roundTrip = []string{
	"From: a@example.org\nSubject: from lines\nDate: Mon, 1 Jul 2024 10:00:00 +0000\nMessage-ID: <rt1@example.org>\n\nFrom the start of a line\n\nFrom someone@example.org Mon Jul  1 10:00:00 2024\n>From quoted once\n>>From quoted twice\n >From not at the start\n",
	"From: b@example.org\r\nSubject: crlf\r\nDate: Mon, 1 Jul 2024 11:00:00 +0000\r\nMessage-ID: <rt2@example.org>\r\n\r\nCRLF body\r\nFrom here\r\n",
	"From: c@example.org\nSubject: 8bit \xe9t\xe9\nDate: Mon, 1 Jul 2024 12:00:00 +0000\nMessage-ID: <rt3@example.org>\n\nK\xf6ln \xff\xfe\x00 binary-ish\n\n\n",
	"From: \"no address\"\nSubject: no usable sender\nDate: yesterday\nMessage-ID: <rt4@example.org>\n\nthe From_ line falls back to MAILER-DAEMON and the archiving time\n",
	"Subject: no header but this\n\nFrom\n",
}

// TestMboxRoundTrip downloads every month of every list, and a thread,
// and reads the files back as the importer reads them: each gives back
// exactly the bytes stored, in date order.
func TestMboxRoundTrip(t *testing.T) {
	ca := newCatalogArchive(t)
	for _, raw := range roundTrip {
		ca.add(t, []byte(raw), "roundtrip")
	}
	ca.sync(t)
	ctx := t.Context()
	lists, err := ca.cat.Lists(ctx)
	if err != nil {
		t.Fatal(err)
	}
	files := 0
	for _, l := range lists {
		months, err := ca.cat.Months(ctx, l.Name)
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range months {
			month := fmt.Sprintf("%04d-%02d", m.Year, m.Month)
			cns, err := ca.cat.MonthMessages(ctx, l.Name, m.Year, m.Month)
			if err != nil {
				t.Fatal(err)
			}
			checkDownload(t, ca, "/l/"+l.Name+"/"+month+".mbox.gz", l.Name+"-"+month+".mbox.gz", cns)
			files++
		}
	}
	if files < 10 {
		t.Fatalf("only %d month files checked", files)
	}
	th, err := ca.cat.Thread(ctx, ca.cn(t, "t1.4"))
	if err != nil {
		t.Fatal(err)
	}
	var cns []string
	for _, n := range th.Nodes {
		cns = append(cns, n.Message.CallNumber)
	}
	slices.SortStableFunc(cns, func(a, b string) int {
		ma, _ := ca.cat.Message(ctx, a)
		mb, _ := ca.cat.Message(ctx, b)
		return ma.Date.Compare(mb.Date)
	})
	checkDownload(t, ca, "/t/"+ca.cn(t, "t1.4")+".mbox.gz", "thread-"+ca.cn(t, "t1.4")+".mbox.gz", cns)
}

// checkDownload fetches path and checks that it holds the messages cns,
// in that order, byte for byte, read both with the mbox reader (mboxrd
// and auto-detected) and with the importer's source reader.
func checkDownload(t *testing.T, ca *catalogArchive, path, filename string, cns []string) {
	t.Helper()
	r := get(t, ca.srv.URL+path)
	if r.status != 200 {
		t.Fatalf("GET %s = %d %s", path, r.status, r.body)
	}
	_, params, err := mime.ParseMediaType(r.header.Get("Content-Disposition"))
	if err != nil || params["filename"] != filename || !strings.HasPrefix(r.header.Get("Content-Disposition"), "attachment") {
		t.Errorf("GET %s Content-Disposition = %q, want attachment; filename=%s", path, r.header.Get("Content-Disposition"), filename)
	}
	want := make([][]byte, len(cns))
	for i, cn := range cns {
		want[i] = ca.raws[cn]
	}
	zr, err := gzip.NewReader(strings.NewReader(r.body))
	if err != nil {
		t.Fatalf("GET %s: not gzip: %v", path, err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("GET %s: bad gzip: %v", path, err)
	}
	for _, format := range []mbox.Format{mbox.FormatMboxrd, mbox.FormatAuto} {
		got := readMbox(t, bytes.NewReader(plain), path, format)
		compareMessages(t, fmt.Sprintf("%s read as %s", path, format), got, want)
	}
	// As the importer reads a .mbox.gz file.
	file := filepath.Join(t.TempDir(), filename)
	if err := os.WriteFile(file, []byte(r.body), 0o644); err != nil {
		t.Fatal(err)
	}
	src, err := mailsource.Open(t.Context(), file, mailsource.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer src.Close()
	var got [][]byte
	for {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil || it.Err != nil {
			t.Fatalf("%s as the importer reads it: %v %v", path, err, it.Err)
		}
		got = append(got, it.Raw)
	}
	compareMessages(t, path+" read by mailsource", got, want)
}

func compareMessages(t *testing.T, what string, got, want [][]byte) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%s: %d messages, want %d", what, len(got), len(want))
		return
	}
	for i := range want {
		if !bytes.Equal(got[i], want[i]) {
			t.Errorf("%s: message %d = %q, want %q", what, i, got[i], want[i])
		}
	}
}

// TestMboxNoFinalNewline pins the one thing an mbox cannot carry: a
// message whose last line has no line end gets one.
func TestMboxNoFinalNewline(t *testing.T) {
	a := newArchive(t, boltstore.Options{})
	raw := "Subject: cut\nDate: Mon, 1 Jul 2024 10:00:00 +0000\n\nno line end"
	a.put(t, []byte(raw), "cut")
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	r := get(t, srv.URL+"/l/cut/2024-07.mbox.gz")
	zr, err := gzip.NewReader(strings.NewReader(r.body))
	if err != nil {
		t.Fatal(err)
	}
	got := readMbox(t, zr, "cut", mbox.FormatMboxrd)
	if len(got) != 1 || string(got[0]) != raw+"\n" {
		t.Errorf("read back %q, want the message with a line end added", got)
	}
}

// TestMonthMboxMemory streams a 64 MiB month and samples the live heap
// meanwhile: the download holds a message at a time, never the month.
func TestMonthMboxMemory(t *testing.T) {
	if testing.Short() {
		t.Skip("stores 64 MiB")
	}
	const msgSize, msgs = 256 << 10, 256
	a := newArchive(t, boltstore.Options{})
	putBigMonth(t, a, msgs, msgSize)
	c := openTestCatalog(t)
	if _, err := c.Sync(t.Context(), a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
	srv, _ := serveWith(t, a.st, Options{Catalogs: keeper.Fixed(c)})
	peak, n := downloadPeakHeap(t, srv.URL+"/l/big/2024-02.mbox.gz")
	t.Logf("month of %d MiB (%d MiB as mbox): peak heap growth while streaming it %.1f MiB", msgs*msgSize>>20, n>>20, float64(peak)/(1<<20))
	if n < msgs*msgSize {
		t.Fatalf("downloaded %d bytes, want at least %d", n, msgs*msgSize)
	}
	if peak > msgs*msgSize/4 {
		t.Errorf("the heap grew by %d MiB while streaming a %d MiB month: the month is held in memory", peak>>20, msgs*msgSize>>20)
	}
}

// putBigMonth stores msgs messages of about size bytes in list "big",
// February 2024, in batches, keeping none of them.
func putBigMonth(t testing.TB, a *archive, msgs, size int) {
	t.Helper()
	line := strings.Repeat("All work and no play makes a dull archive. ", 2) + "\n"
	for i := 0; i < msgs; {
		var batch []store.Message
		for ; i < msgs && len(batch) < 32; i++ {
			var b strings.Builder
			fmt.Fprintf(&b, "From: P%d <p%d@example.org>\nSubject: big %d\nDate: %s\nMessage-ID: <big%d@example.org>\n\n",
				i, i, i, time.Date(2024, 2, 1+i%28, i%24, 0, 0, 0, time.UTC).Format(time.RFC1123Z), i)
			for b.Len() < size {
				b.WriteString(line)
			}
			batch = append(batch, a.message(t, []byte(b.String()), "big"))
		}
		if _, err := a.st.Put(context.Background(), batch); err != nil {
			t.Fatal(err)
		}
	}
}

// downloadPeakHeap fetches url, reading the body as it comes, and returns
// the peak growth of the live heap over the baseline while it streamed,
// and the size of the mbox.
func downloadPeakHeap(t testing.TB, url string) (peak int64, n int) {
	t.Helper()
	// The heap sampled holds garbage not collected yet, as much as the
	// collector's pace lets pile up: on a machine loaded by other tests
	// (the race detector's, in CI) the default pace let a download's
	// garbage reach 23 MiB once, against 6-11 MiB otherwise. A collector
	// working harder keeps the sample close to what the download holds.
	defer debug.SetGCPercent(debug.SetGCPercent(20))
	runtime.GC()
	sample := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
	metrics.Read(sample)
	base := int64(sample[0].Value.Uint64())
	var top atomic.Int64
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		s := []metrics.Sample{{Name: "/memory/classes/heap/objects:bytes"}}
		for {
			select {
			case <-stop:
				return
			case <-time.After(time.Millisecond):
			}
			metrics.Read(s)
			if v := int64(s[0].Value.Uint64()); v > top.Load() {
				top.Store(v)
			}
		}
	})
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	zr, err := gzip.NewReader(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	m, err := io.Copy(io.Discard, zr)
	resp.Body.Close()
	close(stop)
	wg.Wait()
	if err != nil {
		t.Fatalf("reading %s: %v", url, err)
	}
	return top.Load() - base, int(m)
}
