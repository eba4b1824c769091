package resolver

import (
	"bytes"
	"compress/gzip"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/store/boltstore"
)

// The tests of slow, stalled and resumed downloads serve on loopback
// with small socket buffers, so that a reader who stops reading stops
// the server's writes after a few hundred KiB, not the megabytes that
// loopback's buffers hold.
const smallBuffers = 64 << 10

func setBuffer(opt int) func(_, _ string, c syscall.RawConn) error {
	return func(_, _ string, c syscall.RawConn) error {
		var serr error
		err := c.Control(func(fd uintptr) {
			serr = syscall.SetsockoptInt(int(fd), syscall.SOL_SOCKET, opt, smallBuffers)
		})
		return errors.Join(err, serr)
	}
}

// smallClient is a client whose connections have small receive buffers.
func smallClient() *http.Client {
	d := &net.Dialer{Control: setBuffer(syscall.SO_RCVBUF)}
	return &http.Client{Transport: &http.Transport{DialContext: d.DialContext, DisableCompression: true}}
}

// requestLog keeps, per path, when the resolver finished answering it
// (its access log line).
type requestLog struct {
	mu   sync.Mutex
	ends map[string][]time.Time
}

func (l *requestLog) Enabled(context.Context, slog.Level) bool { return true }
func (l *requestLog) WithAttrs([]slog.Attr) slog.Handler       { return l }
func (l *requestLog) WithGroup(string) slog.Handler            { return l }
func (l *requestLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message != "request" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "path" {
			l.mu.Lock()
			l.ends[a.Value.String()] = append(l.ends[a.Value.String()], r.Time)
			l.mu.Unlock()
			return false
		}
		return true
	})
	return nil
}

// ended returns when the answers to path ended, so far.
func (l *requestLog) ended(path string) []time.Time {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]time.Time(nil), l.ends[path]...)
}

// serveSmall serves s's archive with Serve (its timeouts) on a loopback
// listener with small send buffers, until the test ends, and returns
// its address.
func serveSmall(t testing.TB, s *Server) string {
	t.Helper()
	lc := net.ListenConfig{Control: setBuffer(syscall.SO_SNDBUF)}
	ln, err := lc.Listen(context.Background(), "tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Error(err)
		}
	})
	return "http://" + ln.Addr().String()
}

// noiseMessage is a message of about size bytes of base64 of random
// bytes, which gzip cannot shrink much, dated in February 2024.
func noiseMessage(i, size int) []byte {
	var b bytes.Buffer
	fmt.Fprintf(&b, "From: N%d <n%d@example.org>\nSubject: noise %d\nDate: %s\nMessage-ID: <noise%d@example.org>\n\n",
		i, i, i, time.Date(2024, 2, 1+i%28, 12, 0, 0, 0, time.UTC).Format(time.RFC1123Z), i)
	rng := rand.New(rand.NewChaCha8([32]byte{byte(i)}))
	line := make([]byte, 57)
	for b.Len() < size {
		for j := range line {
			line[j] = byte(rng.Uint32())
		}
		b.WriteString(base64.StdEncoding.EncodeToString(line))
		b.WriteByte('\n')
	}
	return b.Bytes()
}

// noiseMonth is an archive whose list "noise" has, in February 2024, a
// few small messages and one of about big bytes, and its catalog.
type noiseMonth struct {
	a     *archive
	c     *catalog.Catalog
	raws  [][]byte // in the month's order (by date)
	bigCN string   // the call number of the big one
}

const noisePath = "/l/noise/2024-02.mbox.gz"

func newNoiseMonth(t testing.TB, big int) *noiseMonth {
	t.Helper()
	nm := &noiseMonth{a: newArchive(t, boltstore.Options{}), c: openTestCatalog(t)}
	for i, size := range []int{2 << 10, big, 3 << 10} {
		raw := noiseMessage(i, size)
		cn := nm.a.put(t, raw, "noise")
		nm.raws = append(nm.raws, raw)
		if size == big {
			nm.bigCN = cn.String()
		}
	}
	nm.sync(t)
	return nm
}

func (nm *noiseMonth) sync(t testing.TB) {
	t.Helper()
	if _, err := nm.c.Sync(context.Background(), nm.a.st, catalog.SyncOptions{}); err != nil {
		t.Fatal(err)
	}
}

// server serves the month with a write timeout of limit for ordinary
// answers and idle for large bodies; log records when answers end.
func (nm *noiseMonth) server(t testing.TB, limit, idle time.Duration) (base string, log *requestLog) {
	log = &requestLog{ends: map[string][]time.Time{}}
	s := New(nm.a.st, Options{
		Catalogs: keeper.Fixed(nm.c), SpoolDir: t.TempDir(), Logger: slog.New(log),
		WriteTimeout: limit, WriteIdleTimeout: idle, ShutdownTimeout: time.Second,
	})
	return serveSmall(t, s), log
}

// readSlowly reads resp's body 32 KiB at a time, every 20 ms, stopping
// for pause once it has read stopAt bytes; it returns the body (as far as
// it came), and when the pause began.
func readSlowly(resp *http.Response, stopAt int, pause time.Duration) ([]byte, time.Time, error) {
	defer resp.Body.Close()
	var body bytes.Buffer
	var paused time.Time
	for {
		_, err := io.CopyN(&body, resp.Body, 32<<10)
		if err == io.EOF {
			return body.Bytes(), paused, nil
		}
		if err != nil {
			return body.Bytes(), paused, err
		}
		if paused.IsZero() && body.Len() >= stopAt && pause > 0 {
			paused = time.Now()
			time.Sleep(pause)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// gunzipMessages reads an mbox.gz download back into its messages.
func gunzipMessages(t *testing.T, body []byte) [][]byte {
	t.Helper()
	zr, err := gzip.NewReader(bytes.NewReader(body))
	if err != nil {
		t.Fatalf("the download is not gzip: %v", err)
	}
	plain, err := io.ReadAll(zr)
	if err != nil {
		t.Fatalf("the download is not whole: %v", err)
	}
	return readMbox(t, bytes.NewReader(plain), noisePath, mbox.FormatMboxrd)
}

// TestSlowDownloads: with a write timeout of 300 ms, a month's mbox.gz,
// the raw message of its 2 MiB message (and public-inbox's /raw of it)
// and a 2 MiB attachment, read slowly for several
// times as long, are downloaded whole: the write deadline of a large
// body moves as its reader reads.
func TestSlowDownloads(t *testing.T) {
	const limit = 300 * time.Millisecond
	nm := newNoiseMonth(t, 2<<20)
	const attSize = 2 << 20
	att := nm.a.put(t, hostile.BigAttachment(attSize).Raw(), "other").String()
	base, _ := nm.server(t, limit, 2*time.Second)
	client := smallClient()
	piRaw := "/noise/noise1@example.org/raw" // public-inbox's, as mboxrd
	for _, path := range []string{noisePath, "/" + nm.bigCN + "/raw", "/" + att + "/attachments/0/big.bin", piRaw} {
		resp, err := client.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now() // the file is written: its first byte comes
		body, _, err := readSlowly(resp, 0, 0)
		took := time.Since(start)
		if resp.StatusCode != http.StatusOK || err != nil {
			t.Fatalf("GET %s read slowly = %d, %d bytes, %v; want 200 and the whole", path, resp.StatusCode, len(body), err)
		}
		if took < 3*limit {
			t.Errorf("GET %s read slowly took %v, under 3 times the write timeout: the test shows nothing", path, took)
		}
		t.Logf("GET %s read slowly: %d bytes in %v (write timeout %v)", path, len(body), took, limit)
		if path == piRaw {
			compareMessages(t, path+" read slowly", readMbox(t, bytes.NewReader(body), path, mbox.FormatMboxrd), nm.raws[1:2])
			continue
		}
		if strings.HasSuffix(path, "/big.bin") {
			for i, c := range body {
				if c != hostile.AttachmentByte(int64(i)) {
					t.Errorf("GET %s read slowly: byte %d is %d, want %d", path, i, c, hostile.AttachmentByte(int64(i)))
					break
				}
			}
			if len(body) != attSize {
				t.Errorf("GET %s read slowly: %d bytes, want %d", path, len(body), attSize)
			}
			continue
		}
		if strings.HasSuffix(path, "/raw") {
			if !bytes.Equal(body, nm.raws[1]) {
				t.Errorf("GET %s read slowly: %d bytes, not the %d stored", path, len(body), len(nm.raws[1]))
			}
			continue
		}
		compareMessages(t, path+" read slowly", gunzipMessages(t, body), nm.raws)
	}
}

// TestStalledDownload: a reader who stops reading an mbox.gz is cut off
// once a write has waited the idle time (1 s) for it, not at once (the
// write timeout of 300 ms has long passed), and well before it comes
// back 4 s later.
func TestStalledDownload(t *testing.T) {
	const idle = time.Second
	nm := newNoiseMonth(t, 2<<20)
	base, log := nm.server(t, 300*time.Millisecond, idle)
	resp, err := smallClient().Get(base + noisePath)
	if err != nil {
		t.Fatal(err)
	}
	size, _ := strconv.Atoi(resp.Header.Get("Content-Length"))
	body, paused, err := readSlowly(resp, 256<<10, 4*time.Second)
	if err == nil || len(body) >= size {
		t.Fatalf("a reader who stopped for 4 s got %d bytes of %d, %v; want it cut off", len(body), size, err)
	}
	ends := log.ended(noisePath)
	if len(ends) != 1 {
		t.Fatalf("answers to %s logged: %d, want 1", noisePath, len(ends))
	}
	cut := ends[0].Sub(paused)
	t.Logf("a reader who stopped after %d bytes was cut off %v later (idle write timeout %v)", len(body), cut, idle)
	// The last write began about when the reader stopped (a little
	// before, when the server woke first to what the reader's last read
	// made room for; after, when it had buffers to fill), and waited
	// idle for it.
	if cut < idle*3/4 || cut > 3*time.Second {
		t.Errorf("a reader who stopped was cut off %v after it stopped, want about %v (between %v and 3 s)", cut, idle, idle*3/4)
	}
}

// TestMboxRange: an mbox.gz download answers ranges; one cut off and
// resumed with Range and If-Range, after its spool is gone (written
// again), equals the whole; once the month has changed, If-Range with
// the old ETag gets the new file whole.
func TestMboxRange(t *testing.T) {
	nm := newNoiseMonth(t, 1<<20)
	base, _ := nm.server(t, 5*time.Second, 5*time.Second)
	// A reader who reads nothing yet keeps the file spooled for the
	// ranges below: one file written, not one for each.
	holder, err := http.Get(base + noisePath)
	if err != nil {
		t.Fatal(err)
	}
	whole := get(t, base+noisePath)
	etag := whole.header.Get("ETag")
	if whole.status != http.StatusOK || etag == "" || whole.header.Get("Accept-Ranges") != "bytes" {
		t.Fatalf("GET %s = %d, ETag %q, Accept-Ranges %q; want 200, an ETag, bytes", noisePath, whole.status, etag, whole.header.Get("Accept-Ranges"))
	}
	compareMessages(t, noisePath, gunzipMessages(t, []byte(whole.body)), nm.raws)
	if again := get(t, base+noisePath); again.header.Get("ETag") != etag || again.body != whole.body {
		t.Errorf("GET %s again: ETag %q, same bytes %v; want %q and the same bytes", noisePath, again.header.Get("ETag"), again.body == whole.body, etag)
	}

	for _, tt := range []struct {
		rng    string
		status int
		want   string
	}{
		{"bytes=100-199", http.StatusPartialContent, whole.body[100:200]},
		{"bytes=500000-", http.StatusPartialContent, whole.body[500000:]},
		{"bytes=-10", http.StatusPartialContent, whole.body[len(whole.body)-10:]},
		{"bytes=" + strconv.Itoa(len(whole.body)) + "-", http.StatusRequestedRangeNotSatisfiable, ""},
	} {
		r := get(t, base+noisePath, "Range", tt.rng)
		if r.status != tt.status || (tt.status == http.StatusPartialContent && r.body != tt.want) {
			t.Errorf("GET %s, Range %s = %d, %d bytes (the right ones: %v); want %d, %d bytes", noisePath, tt.rng, r.status, len(r.body), r.body == tt.want, tt.status, len(tt.want))
		}
	}

	if b, err := io.ReadAll(holder.Body); err != nil || string(b) != whole.body {
		t.Errorf("GET %s, read last: %d bytes, %v; want the same bytes as the others", noisePath, len(b), err)
	}
	holder.Body.Close()

	// Cut off after 300 KiB, resumed where it stopped: the file is
	// written again, the same.
	resp, err := http.Get(base + noisePath)
	if err != nil {
		t.Fatal(err)
	}
	first := make([]byte, 300<<10)
	_, err = io.ReadFull(resp.Body, first)
	resp.Body.Close()
	if err != nil {
		t.Fatal(err)
	}
	rest := get(t, base+noisePath, "Range", "bytes="+strconv.Itoa(len(first))+"-", "If-Range", etag)
	if rest.status != http.StatusPartialContent || string(first)+rest.body != whole.body {
		t.Errorf("GET %s resumed at %d = %d, %d bytes; want 206 and the rest of the file (%d bytes)", noisePath, len(first), rest.status, len(rest.body), len(whole.body)-len(first))
	}
	// Every route of a download answers ranges: a thread's, a search's.
	for _, path := range []string{"/t/" + nm.bigCN + ".mbox.gz", "/search?q=noise&x=m"} {
		all := get(t, base+path)
		part := get(t, base+path, "Range", "bytes=10-19", "If-Range", all.header.Get("ETag"))
		if all.status != http.StatusOK || len(all.body) < 20 || part.status != http.StatusPartialContent || part.body != all.body[10:20] {
			t.Errorf("GET %s, then bytes 10-19 = %d (%d bytes), %d %q; want 200, then 206 and its bytes 10-19", path, all.status, len(all.body), part.status, part.body)
		}
	}
	if head := head(t, base+noisePath); head.StatusCode != http.StatusOK || head.ContentLength != int64(len(whole.body)) {
		t.Errorf("HEAD %s = %d, Content-Length %d; want 200, %d", noisePath, head.StatusCode, head.ContentLength, len(whole.body))
	}

	// The month changes: a resumption with the old ETag gets the new
	// file whole, never the old one's start and the new one's end.
	nm.a.put(t, noiseMessage(9, 4<<10), "noise")
	nm.sync(t)
	changed := get(t, base+noisePath, "Range", "bytes="+strconv.Itoa(len(first))+"-", "If-Range", etag)
	if changed.status != http.StatusOK || changed.header.Get("ETag") == etag || len(gunzipMessages(t, []byte(changed.body))) != len(nm.raws)+1 {
		t.Errorf("GET %s resumed with the ETag of before a change = %d, ETag %q; want 200, another ETag and the whole new month", noisePath, changed.status, changed.header.Get("ETag"))
	}
}

func head(t testing.TB, url string) *http.Response {
	t.Helper()
	resp, err := http.Head(url)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp
}

// TestStalledReadersShareDownload: 8 readers of a month with a 3 MiB
// message, stalled after its first bytes, share one spooled file, and
// the heap holds no copy of the message for each (nor for all: it
// grows by less than the message).
func TestStalledReadersShareDownload(t *testing.T) {
	const big, readers = 3 << 20, 8
	nm := newNoiseMonth(t, big)
	spoolDir := t.TempDir()
	s := New(nm.a.st, Options{Catalogs: keeper.Fixed(nm.c), SpoolDir: spoolDir, ShutdownTimeout: time.Second})
	base := serveSmall(t, s)
	client := smallClient()
	before := liveHeap()
	release := make(chan struct{})
	started := make(chan struct{}, readers)
	var wg sync.WaitGroup
	for range readers {
		wg.Go(func() {
			defer func() { started <- struct{}{} }()
			resp, err := client.Get(base + noisePath)
			if err != nil {
				t.Error(err)
				return
			}
			defer resp.Body.Close()
			if _, err := io.CopyN(io.Discard, resp.Body, 64<<10); err != nil {
				t.Error(err)
				return
			}
			started <- struct{}{}
			<-release
		})
	}
	for range readers {
		<-started
	}
	grown := int64(liveHeap()) - int64(before)
	files := spooled(t, spoolDir)
	close(release)
	wg.Wait()
	t.Logf("%d stalled readers of a month with a %d MiB message: heap grown by %d KiB, %d spooled file(s)", readers, big>>20, grown>>10, files)
	if files != 1 {
		t.Errorf("%d stalled readers of one download hold %d spooled files, want 1", readers, files)
	}
	if grown > big {
		t.Errorf("%d stalled readers of a month with a %d MiB message: the heap grew by %d MiB, want under %d MiB", readers, big>>20, grown>>20, big>>20)
	}
}

// spooled counts the files this process holds open in dir (deleted
// ones included: spools have no name); it skips the test where
// /proc/self/fd cannot say.
func spooled(t testing.TB, dir string) int {
	t.Helper()
	fds, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("cannot count open files: %v", err)
	}
	n := 0
	for _, fd := range fds {
		target, err := os.Readlink(filepath.Join("/proc/self/fd", fd.Name()))
		if err == nil && strings.HasPrefix(target, dir+string(filepath.Separator)) {
			n++
		}
	}
	return n
}
