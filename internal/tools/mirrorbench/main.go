// Command mirrorbench measures a mirror (make bench): an origin the size
// of the whole linux-mips list (the shared corpus 16 times, 84,096
// messages), served by the resolver on loopback, mirrored whole by
// `mirror --once` while the origin serves nobody else (wall time,
// messages per second, the mirror's peak RSS), the origin's page latency
// (p50/p99 of message, thread and list pages with 8 clients) alone and
// while a mirror catches up (and how far the mirror got meanwhile, the
// feed giving way to readers), and how soon a message stored at the
// origin is served by a following mirror.
//
//	go run ./internal/tools/mirrorbench --corpus ../shared/corpus/linux-mips-sample.mbox.gz --bin bin
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/store/boltstore"
)

func main() {
	corpus := flag.String("corpus", "", "the shared corpus (linux-mips-sample.mbox.gz)")
	bin := flag.String("bin", "bin", "the directory of the programs (make build)")
	copies := flag.Int("copies", testcorpus.ScaledCopies, "copies of the corpus in the origin")
	flag.Parse()
	if *corpus == "" {
		*corpus = testcorpus.Find()
	}
	if _, err := os.Stat(*corpus); *corpus == "" || err != nil {
		fmt.Println("mirrorbench: no corpus (--corpus): skipped")
		return
	}
	if err := run(*corpus, *bin, *copies); err != nil {
		fmt.Fprintln(os.Stderr, "mirrorbench:", err)
		os.Exit(1)
	}
}

func run(corpus, bin string, copies int) error {
	tmp, err := os.MkdirTemp("", "mirrorbench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(tmp)
	prog := func(name string) string { return filepath.Join(bin, name) }

	// The origin.
	in := filepath.Join(tmp, "in.mbox")
	f, err := os.Create(in)
	if err != nil {
		return err
	}
	if err := testcorpus.WriteScaled(f, corpus, copies); err != nil {
		return err
	}
	f.Close()
	origin := filepath.Join(tmp, "origin")
	fmt.Printf("== mirror: building an origin of %d copies of the corpus\n", copies)
	if out, err := exec.Command(prog("importer"), "--data", origin, "--list", "linux-mips", in).CombinedOutput(); err != nil {
		return fmt.Errorf("importer: %v\n%s", err, lastLines(string(out), 5))
	}
	os.Remove(in)
	ro, stopOrigin, err := serve(prog("resolver"), origin)
	if err != nil {
		return err
	}
	defer stopOrigin()
	total, err := waitCatalog(ro, 10*time.Minute)
	if err != nil {
		return err
	}
	urls, err := pageURLs(ro, 300)
	if err != nil {
		return err
	}

	// The whole archive into a mirror, the origin serving nobody else.
	mirrorDir := filepath.Join(tmp, "mirror")
	cmd := exec.Command(prog("mirror"), "--from", ro, "--data", mirrorDir, "--once")
	var out strings.Builder
	cmd.Stderr = &out
	start := time.Now()
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("mirror --once: %v\n%s", err, lastLines(out.String(), 5))
	}
	elapsed := time.Since(start)
	ru := cmd.ProcessState.SysUsage().(*syscall.Rusage)
	size := dirBytes(filepath.Join(origin, "messages.packs"))
	fmt.Printf("mirror --once of %d messages: %.1f s (%.0f msg/s), peak RSS %d MB (origin's packs %d MB on disk)\n",
		total, elapsed.Seconds(), float64(total)/elapsed.Seconds(), ru.Maxrss>>10, size>>20)
	fmt.Printf("  %s", lastLines(out.String(), 1))

	// Pages alone, then while a mirror catches up, then while one at the
	// lowest priority does, three times over (the machine is shared: a
	// ratio is the median of three). The feed gives way to readers, so
	// each mirror is stopped after as long (and resumes in the next
	// round), its progress meanwhile reported.
	const busy = 10 * time.Second
	var ratios [2][]float64
	copied := [2]int64{}
	for round := range 3 {
		alone := pages(ro, urls, 8, busy, nil)
		fmt.Printf("round %d: origin pages, 8 clients: alone p50 %.1f ms p99 %.1f ms (%d requests)\n", round+1, alone.p(50), alone.p(99), len(alone))
		for i, nice := range []bool{false, true} {
			dir := filepath.Join(tmp, fmt.Sprintf("mirror-busy-%v", nice))
			args := []string{prog("mirror"), "--from", ro, "--data", dir, "--once"}
			what := "a mirror"
			if nice {
				// A mirror on a machine of its own leaves the origin's
				// cores to it, as one at the lowest priority does here.
				args = append([]string{"nice", "-n", "19"}, args...)
				what = "a mirror at nice 19"
			}
			cmd := exec.Command(args[0], args[1:]...)
			var out strings.Builder
			cmd.Stderr = &out
			if err := cmd.Start(); err != nil {
				return err
			}
			done := make(chan struct{})
			go func() { cmd.Wait(); close(done) }()
			l := pages(ro, urls, 8, busy, done)
			cmd.Process.Signal(syscall.SIGTERM)
			<-done
			got, err := countMessages(filepath.Join(dir, "messages.db"))
			if err != nil {
				return fmt.Errorf("the mirror stopped: %v\n%s", err, lastLines(out.String(), 5))
			}
			fmt.Printf("round %d: while serving %s: p50 %.1f ms p99 %.1f ms (%d requests): p99 ratio %.2f; the mirror copied %d messages meanwhile (%.0f msg/s)\n",
				round+1, what, l.p(50), l.p(99), len(l), l.p(99)/alone.p(99), got-copied[i], float64(got-copied[i])/busy.Seconds())
			copied[i] = got
			ratios[i] = append(ratios[i], l.p(99)/alone.p(99))
		}
	}
	for i := range ratios {
		slices.Sort(ratios[i])
	}
	fmt.Printf("origin page p99 while serving a mirror / alone, median of 3: %.2f; with the mirror at nice 19: %.2f\n", ratios[0][1], ratios[1][1])

	// A following mirror: how soon a message stored at the origin is
	// served by the mirror's resolver.
	follow := exec.Command(prog("mirror"), "--from", ro, "--data", mirrorDir, "--log-format", "json")
	if err := follow.Start(); err != nil {
		return err
	}
	defer func() { follow.Process.Signal(syscall.SIGTERM); follow.Wait() }()
	rm, stopMirror, err := serve(prog("resolver"), mirrorDir)
	if err != nil {
		return err
	}
	defer stopMirror()
	var lags []time.Duration
	for i := range 7 {
		msg := fmt.Sprintf("From: bench@example.org\nSubject: lag %d\nMessage-ID: <lag-%d-%d@mirrorbench>\n\nA message to follow.\n", i, i, time.Now().UnixNano())
		imp := exec.Command(prog("importer"), "--data", origin, "--manifest", "/dev/stdout", "-")
		imp.Stdin = strings.NewReader(msg)
		b, err := imp.Output()
		if err != nil {
			return fmt.Errorf("importer: %v", err)
		}
		stored := time.Now()
		var e struct{ CallNumber string }
		if err := json.Unmarshal(b, &e); err != nil {
			return fmt.Errorf("manifest %q: %v", b, err)
		}
		for {
			if resp, err := http.Get(rm + e.CallNumber + "/raw"); err == nil {
				resp.Body.Close()
				if resp.StatusCode == 200 {
					break
				}
			}
			if time.Since(stored) > time.Minute {
				return fmt.Errorf("message %s not on the mirror a minute after the origin stored it", e.CallNumber)
			}
			time.Sleep(10 * time.Millisecond)
		}
		lags = append(lags, time.Since(stored))
		time.Sleep(time.Duration(rand.IntN(1000)) * time.Millisecond)
	}
	slices.Sort(lags)
	fmt.Printf("a message stored at the origin is served by a following mirror: median %v, max %v (%d messages)\n",
		lags[len(lags)/2].Round(time.Millisecond), lags[len(lags)-1].Round(time.Millisecond), len(lags))
	return nil
}

// serve starts resolver serve on data and waits until it answers.
func serve(resolver, data string) (string, func(), error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return "", nil, err
	}
	addr := l.Addr().String()
	l.Close()
	cmd := exec.Command(resolver, "serve", "--data", data, "--listen", addr, "--log-level", "error")
	if err := cmd.Start(); err != nil {
		return "", nil, err
	}
	stop := func() { cmd.Process.Signal(syscall.SIGTERM); cmd.Wait() }
	url := "http://" + addr + "/"
	for start := time.Now(); time.Since(start) < time.Minute; time.Sleep(50 * time.Millisecond) {
		if resp, err := http.Get(url + "healthz"); err == nil {
			resp.Body.Close()
			if resp.StatusCode == 200 {
				return url, stop, nil
			}
		}
	}
	stop()
	return "", nil, errors.New("the resolver did not answer")
}

// waitCatalog waits until the resolver's catalog holds its store's
// messages, and returns their number.
func waitCatalog(url string, within time.Duration) (int64, error) {
	for start := time.Now(); time.Since(start) < within; time.Sleep(time.Second) {
		resp, err := http.Get(url + "api/v1/stats")
		if err != nil {
			continue
		}
		var s struct {
			Messages int64
			Catalog  *struct{ Messages int64 }
		}
		err = json.NewDecoder(resp.Body).Decode(&s)
		resp.Body.Close()
		if err == nil && s.Catalog != nil && s.Catalog.Messages == s.Messages && s.Messages > 0 {
			return s.Messages, nil
		}
	}
	return 0, errors.New("the catalog did not catch up")
}

// pageURLs picks message, thread and list pages of the origin.
func pageURLs(base string, n int) ([]string, error) {
	resp, err := http.Get(base + "api/v1/lists/linux-mips")
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	var l struct {
		Threads []struct {
			Root struct{ CallNumber string }
		}
	}
	if err := json.NewDecoder(resp.Body).Decode(&l); err != nil {
		return nil, err
	}
	urls := []string{base + "l/linux-mips/"}
	for _, t := range l.Threads {
		urls = append(urls, base+t.Root.CallNumber, base+"t/"+t.Root.CallNumber+"/")
		if len(urls) >= n {
			break
		}
	}
	return urls, nil
}

type latencies []time.Duration

func (l latencies) p(q int) float64 {
	if len(l) == 0 {
		return 0
	}
	s := slices.Clone(l)
	slices.Sort(s)
	return float64(s[min(len(s)-1, len(s)*q/100)].Microseconds()) / 1000
}

// pages requests urls with clients clients for d, or until stop is
// closed, and returns the latencies.
func pages(base string, urls []string, clients int, d time.Duration, stop chan struct{}) latencies {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	if d > 0 {
		ctx, cancel = context.WithTimeout(ctx, d)
		defer cancel()
	}
	var mu sync.Mutex
	var out latencies
	var wg sync.WaitGroup
	for c := range clients {
		wg.Go(func() {
			for i := c; ; i++ {
				select {
				case <-ctx.Done():
					return
				case <-stop:
					return
				default:
				}
				start := time.Now()
				resp, err := http.Get(urls[i%len(urls)])
				if err != nil {
					continue
				}
				io.Copy(io.Discard, resp.Body)
				resp.Body.Close()
				mu.Lock()
				out = append(out, time.Since(start))
				mu.Unlock()
			}
		})
	}
	wg.Wait()
	return out
}

func dirBytes(dir string) int64 {
	var n int64
	filepath.WalkDir(dir, func(_ string, d os.DirEntry, err error) error {
		if err == nil && !d.IsDir() {
			if fi, err := d.Info(); err == nil {
				n += fi.Size()
			}
		}
		return nil
	})
	return n
}

func lastLines(s string, n int) string {
	sc := bufio.NewScanner(strings.NewReader(s))
	var lines []string
	for sc.Scan() {
		lines = append(lines, sc.Text())
	}
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n") + "\n"
}

// countMessages opens the bbolt store at path and counts its messages.
func countMessages(path string) (int64, error) {
	st, err := boltstore.Open(context.Background(), path, boltstore.Options{})
	if err != nil {
		return 0, err
	}
	defer st.Close()
	return st.Count(context.Background())
}
