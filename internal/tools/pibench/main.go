// Command pibench compares a message's page served by the resolver with
// the same message's page served by public-inbox (make bench, when
// public-inbox is installed: Debian's public-inbox package). Both archive
// the shared corpus: the resolver from `importer`, public-inbox from its
// own mbox import into a v2 inbox (index level basic: the message page
// reads no search index). Both serve on loopback, each in its own
// processes, and one client asks for three things of each of --messages
// random messages (with a Message-ID no other message of the corpus has),
// in a random order: the resolver's page of it, its raw bytes, and
// public-inbox's page of it; first the resolver's first request for the
// page (cold: not in its page cache), then all three again (the
// resolver's page cached; public-inbox keeps no pages). It prints the
// medians and their ratios: the resolver's page against its raw bytes as
// a client of its own process sees them, and public-inbox's page against
// the resolver's.
//
//	go run ./internal/tools/pibench --corpus ../shared/corpus/linux-mips-sample.mbox.gz --bin bin
package main

import (
	"bytes"
	"cmp"
	"compress/gzip"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

func main() {
	corpus := flag.String("corpus", "", "the shared corpus (linux-mips-sample.mbox.gz)")
	bin := flag.String("bin", "bin", "the directory of the programs (make build)")
	messages := flag.Int("messages", 500, "random messages whose pages are asked for")
	clients := flag.Int("clients", 1, "clients asking at once, each for its share of the messages")
	flag.Parse()
	if *corpus == "" {
		*corpus = testcorpus.Find()
	}
	if _, err := os.Stat(*corpus); *corpus == "" || err != nil {
		fmt.Println("pibench: no corpus (--corpus): skipped")
		return
	}
	for _, p := range []string{"public-inbox-init", "public-inbox-httpd", "perl"} {
		if _, err := exec.LookPath(p); err != nil {
			fmt.Printf("pibench: no %s (apt-get install public-inbox): skipped\n", p)
			return
		}
	}
	if *messages < 1 || *clients < 1 || *clients > *messages {
		fmt.Fprintln(os.Stderr, "pibench: --messages and --clients must be at least 1, and --clients at most --messages")
		os.Exit(2)
	}
	if err := run(*corpus, *bin, *messages, *clients); err != nil {
		fmt.Fprintln(os.Stderr, "pibench:", err)
		os.Exit(1)
	}
}

func run(corpus, bin string, n, clients int) error {
	tmp, err := os.MkdirTemp("", "pibench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	ids, err := uniqueIDs(corpus)
	if err != nil {
		return err
	}

	fmt.Println("== message page, resolver against public-inbox: importing the corpus into both")
	data := filepath.Join(tmp, "archive")
	if out, err := exec.Command(filepath.Join(bin, "importer"), "--data", data, "--list", "linux-mips", corpus).CombinedOutput(); err != nil {
		return fmt.Errorf("importer: %v\n%s", err, out)
	}
	ours, stopOurs, err := serveResolver(filepath.Join(bin, "resolver"), data)
	if err != nil {
		return err
	}
	defer stopOurs()
	theirs, stopTheirs, err := servePublicInbox(tmp, corpus)
	if err != nil {
		return err
	}
	defer stopTheirs()

	transport := http.DefaultTransport.(*http.Transport).Clone()
	transport.MaxIdleConnsPerHost = clients // a connection each, kept
	client := &http.Client{
		Transport:     transport,
		Timeout:       time.Minute,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	// The three pages of a message: the resolver's page and raw bytes,
	// public-inbox's page.
	const (
		page = iota
		raw
		theirPage
	)
	// Random messages, with the resolver's call number of each: /m/{id}
	// redirects to the page of the one message with it.
	r := rand.New(rand.NewPCG(1, 2))
	r.Shuffle(len(ids), func(i, j int) { ids[i], ids[j] = ids[j], ids[i] })
	var messages [][3]string
	for _, id := range ids {
		if len(messages) == n+10 {
			break
		}
		resp, err := client.Get(ours + "m/" + url.PathEscape(id))
		if err != nil {
			return err
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		loc := resp.Header.Get("Location")
		if resp.StatusCode/100 != 3 || !strings.HasPrefix(loc, "/") || strings.Count(loc, "/") != 1 {
			continue // not archived as one message (a page listing several)
		}
		messages = append(messages, [3]string{ours + loc[1:], ours + loc[1:] + "/raw", theirs + "mips/" + url.PathEscape(id) + "/"})
	}
	if len(messages) < n+10 {
		return fmt.Errorf("only %d messages with a Message-ID of their own, want %d", len(messages), n+10)
	}
	get := func(u string) (time.Duration, error) {
		start := time.Now()
		resp, err := client.Get(u)
		if err != nil {
			return 0, err
		}
		_, err = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if err == nil && resp.StatusCode != http.StatusOK {
			err = fmt.Errorf("GET %s: %s", u, resp.Status)
		}
		return time.Since(start), err
	}
	// Ten others first: public-inbox loads its modules on its first
	// requests.
	for _, m := range messages[n:] {
		for _, u := range m {
			if _, err := get(u); err != nil {
				return err
			}
		}
	}
	messages = messages[:n]
	// Each client asks for its share of the messages; every client's
	// first pass ends before any begins its second.
	var times [2][3][]time.Duration // by pass, then page, raw, theirPage
	for pass := range 2 {
		var mu sync.Mutex
		var firstErr error
		var wg sync.WaitGroup
		for c := range clients {
			r := rand.New(rand.NewPCG(uint64(pass), uint64(c)))
			wg.Go(func() {
				var mine [3][]time.Duration
				for i := c; i < len(messages); i += clients {
					for _, k := range r.Perm(3) {
						d, err := get(messages[i][k])
						if err != nil {
							mu.Lock()
							firstErr = cmp.Or(firstErr, err)
							mu.Unlock()
							return
						}
						mine[k] = append(mine[k], d)
					}
				}
				mu.Lock()
				for k := range mine {
					times[pass][k] = append(times[pass][k], mine[k]...)
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if firstErr != nil {
			return firstErr
		}
	}
	median := func(d []time.Duration) float64 {
		d = slices.Clone(d)
		slices.Sort(d)
		return float64(d[len(d)/2]) / float64(time.Microsecond)
	}
	fmt.Printf("%d messages, %d client(s), medians (µs):\n", n, clients)
	fmt.Printf("  %-30s %9s %9s %10s %13s %22s\n", "", "raw", "page", "page/raw", "public-inbox", "public-inbox/resolver")
	for pass, what := range []string{"first request (resolver cold)", "asked again (resolver cached)"} {
		p, rw, t := median(times[pass][page]), median(times[pass][raw]), median(times[pass][theirPage])
		fmt.Printf("  %-30s %9.0f %9.0f %10.1f %13.0f %22.1f\n", what, rw, p, p/rw, t, t/p)
	}
	return nil
}

// uniqueIDs returns the Message-IDs of the corpus that only one message
// has, in the order of the corpus.
func uniqueIDs(corpus string) ([]string, error) {
	f, err := os.Open(corpus)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	count := map[string]int{}
	var ids []string
	mr := mbox.NewReader(zr, mbox.Options{Name: corpus})
	for {
		m, err := mr.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		var me *mbox.MessageError
		if errors.As(err, &me) {
			continue
		}
		if err != nil {
			return nil, err
		}
		meta, _ := mailmsg.Parse(m.Raw)
		if id := meta.MessageID; id != "" {
			if count[id]++; count[id] == 1 {
				ids = append(ids, id)
			}
		}
	}
	return slices.DeleteFunc(ids, func(id string) bool { return count[id] > 1 }), nil
}

// serveResolver starts resolver serve on data and waits until its
// catalog holds every message.
func serveResolver(resolver, data string) (string, func(), error) {
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	cmd := exec.Command(resolver, "serve", "--data", data, "--listen", addr, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }
	base := "http://" + addr + "/"
	// The catalog has caught up when it counts the store's messages.
	caughtUp := func(body []byte) bool {
		var s struct {
			Messages int64
			Catalog  *struct{ Messages int64 }
		}
		return json.Unmarshal(body, &s) == nil && s.Catalog != nil && s.Messages > 0 && s.Catalog.Messages == s.Messages
	}
	if err := waitFor(base+"api/v1/stats", caughtUp); err != nil {
		stop()
		return "", nil, fmt.Errorf("resolver serve: %w", err)
	}
	return base, stop, nil
}

// servePublicInbox makes a v2 inbox of the corpus under dir and starts
// public-inbox-httpd on it.
func servePublicInbox(dir, corpus string) (string, func(), error) {
	env := append(os.Environ(), "PI_CONFIG="+filepath.Join(dir, "pi-config"), "HOME="+dir)
	command := func(name string, args ...string) *exec.Cmd {
		cmd := exec.Command(name, args...)
		cmd.Env = env
		return cmd
	}
	inbox := filepath.Join(dir, "mips")
	if out, err := command("public-inbox-init", "-V2", "-L", "basic", "mips", inbox, "http://127.0.0.1/mips", "linux-mips@example.org").CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("public-inbox-init: %v\n%s", err, out)
	}
	f, err := os.Open(corpus)
	if err != nil {
		return "", nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return "", nil, err
	}
	// public-inbox's own mbox import (PublicInbox::InboxWritable).
	imp := command("perl", "-MPublicInbox::Config", "-MPublicInbox::InboxWritable", "-e",
		`my $ibx = PublicInbox::Config->new->lookup_name("mips") or die "no inbox\n";
		PublicInbox::InboxWritable->new($ibx)->import_mbox(\*STDIN, "mboxrd");`)
	imp.Stdin = zr
	if out, err := imp.CombinedOutput(); err != nil {
		return "", nil, fmt.Errorf("public-inbox import: %v\n%s", err, out)
	}
	addr, err := freeAddr()
	if err != nil {
		return "", nil, err
	}
	// As many workers as CPUs, as the resolver uses them all.
	httpd := command("public-inbox-httpd", "-W", strconv.Itoa(runtime.NumCPU()), "-l", addr)
	httpd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} // it forks its workers
	var log bytes.Buffer
	httpd.Stdout, httpd.Stderr = &log, &log
	if err := httpd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() {
		syscall.Kill(-httpd.Process.Pid, syscall.SIGTERM)
		done := make(chan struct{})
		go func() { httpd.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(10 * time.Second):
			syscall.Kill(-httpd.Process.Pid, syscall.SIGKILL)
			<-done
		}
	}
	base := "http://" + addr + "/"
	if err := waitFor(base+"mips/", nil); err != nil {
		stop()
		return "", nil, fmt.Errorf("public-inbox-httpd: %w\n%s", err, log.String())
	}
	return base, stop, nil
}

// waitFor asks for u until it answers 200 with a body ok accepts (nil:
// any), for up to ten minutes.
func waitFor(u string, ok func([]byte) bool) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	for ctx.Err() == nil {
		if resp, err := http.Get(u); err == nil {
			body, _ := io.ReadAll(resp.Body)
			resp.Body.Close()
			if resp.StatusCode == http.StatusOK && (ok == nil || ok(body)) {
				return nil
			}
		}
		time.Sleep(100 * time.Millisecond)
	}
	return fmt.Errorf("%s did not answer as expected", u)
}

// freeAddr returns a loopback address nothing listens on now.
func freeAddr() (string, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", err
	}
	defer l.Close()
	return l.Addr().String(), nil
}
