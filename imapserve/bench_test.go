package imapserve

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/emersion/go-imap/v2"
	"github.com/emersion/go-imap/v2/imapclient"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/internal/netserve"
	"github.com/chibrary/chibrary/internal/spool"
	"github.com/chibrary/chibrary/internal/testkit/archivetest"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
	"github.com/chibrary/chibrary/internal/testkit/metrictest"
)

// BenchmarkFetchHeaders1000 is a mail client filling its message list
// from a mailbox of 1,000 real messages: one FETCH 1:* of each message's
// UID, size, date, envelope and header. The target: at most 1 s an
// operation.
func BenchmarkFetchHeaders1000(b *testing.B) {
	a := archivetest.New(b)
	a.PutCorpus("linux-mips", 1000)
	a.Sync()
	addr := serve(b, a, Options{})
	c := login(b, addr)
	if _, err := c.Select("linux-mips", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
		b.Fatal(err)
	}
	opts := &imap.FetchOptions{UID: true, Flags: true, RFC822Size: true, InternalDate: true, Envelope: true,
		BodySection: []*imap.FetchItemBodySection{{Specifier: imap.PartSpecifierHeader, Peek: true}}}
	b.ResetTimer()
	for b.Loop() {
		msgs, err := c.Fetch(imap.SeqSet{{Start: 1, Stop: 0}}, opts).Collect()
		if err != nil || len(msgs) != 1000 {
			b.Fatalf("FETCH 1:* = %d messages, %v", len(msgs), err)
		}
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/1000-headers")
}

// BenchmarkFullSyncScaled is a client downloading a whole list the size
// of the linux-mips list (84,096 messages, archivetest.Scaled) with one
// UID FETCH 1:* (UID RFC822.SIZE BODY.PEEK[]), from `resolver serve
// --imap` run as a process of its own, whose memory is read from /proc
// as it serves: peak anonymous memory (the heap and stacks) and peak
// file-backed memory (the store's bbolt file, mapped: pages the kernel
// takes back when it needs them). The targets: at least 5,000 msg/s, and
// less than 200 MB. Runs only with CHIBRARY_BENCH_SCALED=1 (Linux).
func BenchmarkFullSyncScaled(b *testing.B) {
	a := archivetest.Scaled(b)
	want, err := a.Catalog.Mailbox(b.Context(), "linux-mips")
	if err != nil {
		b.Fatal(err)
	}
	a.Close()
	bin := buildResolver(b)
	addr := freeAddr(b)
	srv := exec.Command(bin, "serve", "--data", a.Dir, "--listen", "127.0.0.1:0", "--imap", addr, "--log-level", "warn")
	srv.Stderr = os.Stderr
	if err := srv.Start(); err != nil {
		b.Fatal(err)
	}
	defer func() {
		srv.Process.Signal(os.Interrupt)
		srv.Wait()
	}()
	mem := watchMemory(srv.Process.Pid)
	c := dialRetry(b, addr)
	if err := c.Login("bench", "x").Wait(); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	var msgs, bytes int64
	for b.Loop() {
		if _, err := c.Select("linux-mips", &imap.SelectOptions{ReadOnly: true}).Wait(); err != nil {
			b.Fatal(err)
		}
		cmd := c.Fetch(imap.UIDSet{{Start: 1, Stop: 0}}, &imap.FetchOptions{UID: true, RFC822Size: true, BodySection: []*imap.FetchItemBodySection{{Peek: true}}})
		n := 0
		for {
			m := cmd.Next()
			if m == nil {
				break
			}
			for {
				item := m.Next()
				if item == nil {
					break
				}
				if body, ok := item.(imapclient.FetchItemDataBodySection); ok {
					k, err := io.Copy(io.Discard, body.Literal)
					if err != nil {
						b.Fatal(err)
					}
					bytes += k
				}
			}
			n++
		}
		if err := cmd.Close(); err != nil {
			b.Fatal(err)
		}
		if n != want.Messages {
			b.Fatalf("fetched %d messages, want %d", n, want.Messages)
		}
		msgs += int64(n)
	}
	b.StopTimer()
	anon, file := mem.stop()
	s := b.Elapsed().Seconds()
	b.ReportMetric(float64(msgs)/s, "msg/s")
	b.ReportMetric(float64(bytes)/s/1e6, "MB/s")
	b.ReportMetric(float64(anon)/1e6, "server-peak-anon-MB")
	b.ReportMetric(float64(file)/1e6, "server-peak-file-MB")
}

// BenchmarkIdleLatency is the time from the store's answer to a Put to
// an idling client's EXISTS, through the catalog's follower (its default
// interval) and the server's poll (its default interval): the promise is
// 2 s.
func BenchmarkIdleLatency(b *testing.B) {
	a := archivetest.New(b)
	a.Put("a", mail(0, "first"))
	a.Sync()
	ctx, cancel := context.WithCancel(b.Context())
	var wg sync.WaitGroup
	wg.Go(func() { a.Catalog.Follow(ctx, a.Store, catalog.FollowOptions{}) })
	defer func() {
		cancel()
		wg.Wait()
	}()
	addr := serve(b, a, Options{PollInterval: DefaultPollInterval})
	c := login(b, addr)
	if _, err := c.Select("a", nil).Wait(); err != nil {
		b.Fatal(err)
	}
	idle, err := c.Idle()
	if err != nil {
		b.Fatal(err)
	}
	defer idle.Close()
	var worst time.Duration
	b.ResetTimer()
	i := 1
	for b.Loop() {
		a.Put("a", mail(i, "new"))
		start := time.Now()
		i++
		c.await(b, "a new message", false, func(exists, _ []uint32) bool { return len(exists) > 0 && exists[len(exists)-1] == uint32(i) })
		worst = max(worst, time.Since(start))
	}
	b.ReportMetric(float64(b.Elapsed().Milliseconds())/float64(b.N), "ms/message")
	b.ReportMetric(float64(worst.Milliseconds()), "worst-ms")
}

// buildResolver builds cmd/resolver into a temporary directory.
func buildResolver(b *testing.B) string {
	b.Helper()
	bin := filepath.Join(b.TempDir(), "resolver")
	cmd := exec.Command("go", "build", "-o", bin, "../cmd/resolver")
	if out, err := cmd.CombinedOutput(); err != nil {
		b.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

func freeAddr(b *testing.B) string {
	b.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().String()
}

// dialRetry logs in to addr once the server listens.
func dialRetry(b *testing.B, addr string) *client {
	b.Helper()
	for i := 0; ; i++ {
		if conn, err := net.Dial("tcp", addr); err == nil {
			conn.Close()
			return dial(b, addr)
		}
		if i == 2400 {
			b.Fatalf("%s does not listen", addr)
		}
		time.Sleep(25 * time.Millisecond)
	}
}

// memWatch samples a process's resident memory.
type memWatch struct {
	stopc      chan struct{}
	done       chan struct{}
	anon, file int64
}

func watchMemory(pid int) *memWatch {
	w := &memWatch{stopc: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(w.done)
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			anon, file := rss(pid)
			w.anon, w.file = max(w.anon, anon), max(w.file, file)
			select {
			case <-w.stopc:
				return
			case <-t.C:
			}
		}
	}()
	return w
}

func (w *memWatch) stop() (anon, file int64) {
	close(w.stopc)
	<-w.done
	return w.anon, w.file
}

// rss reads RssAnon and RssFile of a process, in bytes.
func rss(pid int) (anon, file int64) {
	f, err := os.Open(fmt.Sprintf("/proc/%d/status", pid))
	if err != nil {
		return 0, 0
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		k, v, ok := strings.Cut(sc.Text(), ":")
		if !ok {
			continue
		}
		kb, _ := strconv.ParseInt(strings.TrimSuffix(strings.TrimSpace(v), " kB"), 10, 64)
		switch k {
		case "RssAnon":
			anon = kb << 10
		case "RssFile":
			file = kb << 10
		}
	}
	return anon, file
}

// BenchmarkStalledReaders has 32 clients FETCH a 51 MB message, read its
// first 64 KiB and then nothing for 2 s, and reports the process's
// resident memory before and at its peak (over 500 MiB fails it);
// "in-memory" is the server as it was before large messages were
// spooled, for comparison.
func BenchmarkStalledReaders(b *testing.B) {
	a := archivetest.New(b)
	a.Put("a", hostile.BigAttachment(51<<20).Raw())
	a.Sync()
	for _, mode := range []struct {
		name  string
		above int64
	}{{"spooled", spoolThreshold}, {"in-memory", 1 << 40}} {
		b.Run(mode.name, func(b *testing.B) {
			addr := serve(b, a, Options{SpoolDir: b.TempDir(), Limits: netserve.Options{MaxConnsPerIP: 64}}, func(s *Server) { s.spoolAbove = mode.above })
			var before, peak int64
			for range b.N {
				before, peak = metrictest.StalledReaders(b, addr, 32, "a1 LOGIN r x\r\na2 EXAMINE a\r\na3 FETCH 1 BODY.PEEK[]\r\n", 64<<10, 2*time.Second)
			}
			b.ReportMetric(float64(before)/(1<<20), "rss-before-MiB")
			b.ReportMetric(float64(peak)/(1<<20), "rss-peak-MiB")
			if mode.name == "spooled" && peak > 500<<20 {
				b.Errorf("32 stalled readers of a 51 MB message: peak RSS %d MiB, want under 500 (issue 38)", peak>>20)
			}
		})
	}
}

// BenchmarkPartialFetch is one client fetching the first byte
// (BODY.PEEK[]<0.1>) of one of three 51 MB messages after another, and
// reports the server's CPU time per FETCH (the process's, user and
// system): "spooled" as served, from the spool files that linger after
// their last reader; "spool-cold" with none lingering, so that each FETCH
// reads the message from the store into a file again (the cost of a
// client cycling through more large messages than linger); "in-memory"
// as before large messages were spooled, each FETCH reading and
// decompressing the whole message into memory.
func BenchmarkPartialFetch(b *testing.B) {
	a := archivetest.New(b)
	for i := range 3 {
		a.Put("a", append([]byte("X-Copy: "+strconv.Itoa(i)+"\n"), hostile.BigAttachment(51<<20).Raw()...))
	}
	a.Sync()
	for _, mode := range []struct {
		name  string
		tweak func(*Server)
	}{
		{"spooled", func(*Server) {}},
		{"spool-cold", func(s *Server) { s.spools = spool.New(spool.Options{Dir: b.TempDir(), Linger: -1}) }},
		{"in-memory", func(s *Server) { s.spoolAbove = 1 << 40 }},
	} {
		b.Run(mode.name, func(b *testing.B) {
			addr := serve(b, a, Options{SpoolDir: b.TempDir()}, mode.tweak)
			conn, err := net.Dial("tcp", addr)
			if err != nil {
				b.Fatal(err)
			}
			defer conn.Close()
			br := bufio.NewReader(conn)
			answer := func(tag string) {
				for {
					l, err := br.ReadString('\n')
					if err != nil {
						b.Fatal(err)
					}
					if strings.HasPrefix(l, tag+" ") {
						if !strings.HasPrefix(l, tag+" OK") {
							b.Fatal(l)
						}
						return
					}
				}
			}
			br.ReadString('\n')
			fmt.Fprintf(conn, "a LOGIN r x\r\nb EXAMINE a\r\n")
			answer("a")
			answer("b")
			// One round first: the spool files are written (the cost of a
			// first reader, which "spool-cold" pays every time).
			for i := range 3 {
				fmt.Fprintf(conn, "w%d FETCH %d BODY.PEEK[]<0.1>\r\n", i, 1+i)
				answer(fmt.Sprintf("w%d", i))
			}
			b.ResetTimer()
			cpu0 := cpuTime()
			for i := range b.N {
				tag := "f" + strconv.Itoa(i)
				fmt.Fprintf(conn, "%s FETCH %d BODY.PEEK[]<0.1>\r\n", tag, 1+i%3)
				answer(tag)
			}
			cpu := cpuTime() - cpu0
			b.ReportMetric(float64(cpu.Microseconds())/1000/float64(b.N), "cpu-ms/fetch")
		})
	}
}

// cpuTime returns the CPU time this process has used, user and system.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
