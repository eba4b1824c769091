package resolver

import (
	"bufio"
	"context"
	"fmt"
	"math/rand/v2"
	"net"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
	"github.com/chibrary/chibrary/imapserve"
	"github.com/chibrary/chibrary/internal/testkit/hostile"
)

// BenchmarkPagesBesidePartialFetches measures the latency of list and
// thread pages (rendered, no page cache) asked for at a steady pageRate
// while 4 IMAP clients of the same process fetch one byte
// (BODY.PEEK[]<0.1>) of one of three 51 MB messages after another,
// without pause: each such FETCH once read and decompressed the whole
// message (4 clients took pages to p99 685 ms). It reports the pages'
// latency and how many partial FETCHes were answered a second.
func BenchmarkPagesBesidePartialFetches(b *testing.B) {
	a, c, _ := corpusArchive(b)
	for i := range 3 {
		a.put(b, append([]byte("X-Copy: "+strconv.Itoa(i)+"\n"), hostile.BigAttachment(51<<20).Raw()...), "big")
	}
	if _, err := c.Sync(b.Context(), a.st, catalog.SyncOptions{}); err != nil {
		b.Fatal(err)
	}
	ctx, stop := context.WithCancel(context.Background())
	var servers sync.WaitGroup
	defer func() { stop(); servers.Wait() }()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	s := New(a.st, Options{Catalogs: keeper.Fixed(c)})
	s.cache, s.texts = nil, nil
	servers.Go(func() { s.Serve(ctx, ln) })
	base := "http://" + ln.Addr().String()
	iln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		b.Fatal(err)
	}
	is, err := imapserve.New(keeper.Fixed(c), a.st, imapserve.Options{SpoolDir: b.TempDir()})
	if err != nil {
		b.Fatal(err)
	}
	servers.Go(func() { is.Serve(ctx, imapserve.Listener{Listener: iln}) })

	threads, _, err := c.Threads(ctx, "linux-mips", 0, 1<<20)
	if err != nil {
		b.Fatal(err)
	}
	pages := (len(threads) + threadsPerPage - 1) / threadsPerPage
	page := func(r *rand.Rand) string {
		if r.IntN(2) == 0 {
			return "/l/linux-mips/?page=" + strconv.Itoa(1+r.IntN(pages))
		}
		return "/t/" + threads[r.IntN(len(threads))].Root.CallNumber + "/"
	}
	for _, fetching := range []bool{false, true} {
		name := "pages"
		if fetching {
			name += "/4-partial-fetches"
		}
		b.Run(name, func(b *testing.B) {
			var fetches atomic.Int64
			fctx, stopFetches := context.WithCancel(ctx)
			var wg sync.WaitGroup
			if fetching {
				for range 4 {
					wg.Go(func() {
						if err := partialFetches(fctx, iln.Addr().String(), &fetches); err != nil && fctx.Err() == nil {
							b.Error(err)
						}
					})
				}
			}
			lat, failed, elapsed := paceURLs(b, base, page, pageRate)
			stopFetches()
			wg.Wait()
			reportLatency(b, lat, failed, elapsed, true)
			if fetching {
				b.ReportMetric(float64(fetches.Load())/elapsed.Seconds(), "fetches/s")
			}
		})
	}
}

// partialFetches logs in to the IMAP server at addr and fetches the first
// byte of message 1, 2, 3, 1, ... of the mailbox big until ctx ends,
// counting them.
func partialFetches(ctx context.Context, addr string, n *atomic.Int64) error {
	conn, err := net.Dial("tcp", addr)
	if err != nil {
		return err
	}
	defer conn.Close()
	context.AfterFunc(ctx, func() { conn.Close() })
	br := bufio.NewReader(conn)
	answer := func(tag string) error {
		for {
			l, err := br.ReadString('\n')
			if err != nil {
				return err
			}
			if strings.HasPrefix(l, tag+" ") {
				if !strings.HasPrefix(l, tag+" OK") {
					return fmt.Errorf("%s", l)
				}
				return nil
			}
		}
	}
	if _, err := br.ReadString('\n'); err != nil {
		return err
	}
	fmt.Fprintf(conn, "a LOGIN r x\r\nb EXAMINE big\r\n")
	if err := answer("a"); err != nil {
		return err
	}
	if err := answer("b"); err != nil {
		return err
	}
	for i := 0; ctx.Err() == nil; i++ {
		tag := "f" + strconv.Itoa(i)
		fmt.Fprintf(conn, "%s FETCH %d BODY.PEEK[]<0.1>\r\n", tag, 1+i%3)
		if err := answer(tag); err != nil {
			return err
		}
		n.Add(1)
	}
	return nil
}
