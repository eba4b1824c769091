package e2e

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/http"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/riakstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// The programs on Riak: a node the test binary starts from the kit (or
// the one CHIBRARY_TEST_RIAK names), and a cluster of three for the test
// of a node lost.

// riakArchive returns a new archive name: every test has its own.
func riakArchive() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "e2e-" + hex.EncodeToString(b)
}

func openRiak(t *testing.T, nodes []string, archive string) *riakstore.Store {
	t.Helper()
	st, err := riakstore.Open(t.Context(), riakstore.Options{Nodes: nodes, Archive: archive})
	if err != nil {
		t.Fatalf("cannot open the Riak store: %v", err)
	}
	t.Cleanup(func() { st.Close() })
	return st
}

// followAll reads the store's whole change feed and returns, per call
// number, the message's digest, checking it against the message's bytes.
func followAll(t *testing.T, st store.Store) map[callnumber.Number]store.Digest {
	t.Helper()
	out := map[callnumber.Number]store.Digest{}
	for n, m := range storetest.Feed(t, st, 500) {
		if d := store.DigestOf(m.Raw); d != m.Digest {
			t.Errorf("the feed's %v has bytes of digest %v, recorded %v", n, d, m.Digest)
		}
		out[n] = m.Digest
	}
	return out
}

// checkOnce checks that the feed lists every wanted message under exactly
// one call number, the one the digest index names, and nothing else.
func checkOnce(t *testing.T, st store.Store, w want) {
	t.Helper()
	feed := followAll(t, st)
	numbers := map[store.Digest][]callnumber.Number{}
	for n, d := range feed {
		numbers[d] = append(numbers[d], n)
	}
	twice := 0
	for d, ns := range numbers {
		if _, ok := w[d]; !ok {
			t.Errorf("the feed lists %v, which no input holds", ns)
		}
		if len(ns) > 1 {
			if twice++; twice <= 10 {
				t.Errorf("message from %s is stored %d times: %v", w[d], len(ns), ns)
			}
		}
	}
	if twice > 0 {
		t.Errorf("%d messages stored more than once", twice)
	}
	if len(numbers) != len(w) {
		t.Errorf("the feed lists %d distinct messages, want %d", len(numbers), len(w))
	}
}

// TestRiakTwoImporters: two importers started together on one file,
// through one coordinator, into a fresh Riak archive: each message is
// stored once, both manifests give it the same call number, and exactly
// one of them says imported. Then a third run finds them all.
func TestRiakTwoImporters(t *testing.T) {
	needPrograms(t)
	addr := riaktest.Addr(t)
	dir := t.TempDir()
	coord := startCoordinator(t, filepath.Join(dir, "runs.db"), filepath.Join(dir, "token"), "127.0.0.1:0")
	archive := riakArchive()
	url := "riak://" + addr + "/" + archive

	msgs := mail(t, 0)
	w := want{}
	wantAll(w, msgs, "input.mbox")
	input := writeFile(t, dir, "input.mbox", mboxOf(t, msgs))

	var imps []*proc
	var manifests []string
	for _, name := range []string{"a", "b"} {
		m := filepath.Join(dir, name+".jsonl")
		manifests = append(manifests, m)
		imps = append(imps, start(t, "importer "+name, procOptions{}, "--store", url, "--coordinator", coord.url, "--token-file", coord.tokenFile,
			"--manifest", m, "--log-format", "json", input))
	}
	imported := 0
	for i, p := range imps {
		if code := p.wait(10 * time.Minute); code != 0 {
			t.Fatalf("%s exited %d, want 0:\n%s", p.name, code, tail(p.log(), 20))
		}
		n, d, f := summary(t, p.log())
		t.Logf("%s: imported %d, duplicates %d, failed %d", p.name, n, d, f)
		if f != 0 || n+d != len(msgs) {
			t.Errorf("%s: imported %d + duplicates %d + failed %d, want %d messages, none failed", p.name, n, d, f, len(msgs))
		}
		imported += n
		if strings.Contains(p.log(), "stored twice") {
			t.Errorf("%s logged that it stored messages twice", p.name)
		}
		checkManifest(t, p.name, readManifest(t, manifests[i]), len(msgs))
	}
	if imported != len(w) {
		t.Errorf("the importers imported %d messages between them, want each of the %d once", imported, len(w))
	}
	ma, mb := readManifest(t, manifests[0]), readManifest(t, manifests[1])
	for i := range min(len(ma), len(mb)) {
		if ma[i].CallNumber != mb[i].CallNumber {
			t.Errorf("message %d: importer a says %s (%s), b says %s (%s)", i+1, ma[i].CallNumber, ma[i].Status, mb[i].CallNumber, mb[i].Status)
		}
		if (ma[i].Status == "imported") == (mb[i].Status == "imported") {
			t.Errorf("message %d: importer a %s, b %s: want exactly one to have imported it", i+1, ma[i].Status, mb[i].Status)
		}
	}

	st := openRiak(t, []string{addr}, archive)
	verifyArchive(t, st, w)
	checkOnce(t, st, w)

	// A third run finds every message.
	c := start(t, "importer c", procOptions{}, "--store", url, "--coordinator", coord.url, "--token-file", coord.tokenFile, input)
	if code := c.wait(10 * time.Minute); code != 0 {
		t.Fatalf("importer c exited %d", code)
	}
	if n, d, _ := summary(t, c.log()); n != 0 || d != len(msgs) {
		t.Errorf("importer c: imported %d, duplicates %d; want 0 and %d", n, d, len(msgs))
	}
	checkOnce(t, st, w)

	// The resolver's catalog follows the archive's change feed: a list
	// imported while it runs is browsable within 2 seconds.
	addrHTTP := freeAddr(t)
	res := start(t, "resolver serve", procOptions{}, "serve", "--store", url, "--catalog", filepath.Join(dir, "catalog.db"), "--listen", addrHTTP, "--log-format", "json")
	eventually(t, 2*time.Minute, "the resolver's catalog to hold the archive", func() bool {
		if res.exited() {
			t.Fatalf("the resolver exited (%v)", res.err)
		}
		status, _, body, err := get(t.Context(), "http://"+addrHTTP+"/api/v1/lists")
		return err == nil && status == http.StatusOK && bytes.Contains(body, []byte(`"messages"`))
	})
	late := [][]byte{watcherMessage("late-riak", 1), watcherMessage("late-riak", 2), watcherMessage("late-riak", 3)}
	latePath := writeFile(t, dir, "late.mbox", mboxOf(t, late))
	d := start(t, "importer d", procOptions{}, "--store", url, "--coordinator", coord.url, "--token-file", coord.tokenFile, "--list", "late-list", latePath)
	if code := d.wait(2 * time.Minute); code != 0 {
		t.Fatalf("importer d exited %d", code)
	}
	stored := time.Now()
	eventually(t, 2*time.Second, "the late list in the resolver's catalog within 2 s of its import", func() bool {
		_, _, body, err := get(t.Context(), "http://"+addrHTTP+"/api/v1/lists")
		return err == nil && bytes.Contains(body, []byte(`"late-list"`))
	})
	t.Logf("the catalog listed the late list %v after its import returned", time.Since(stored).Round(10*time.Millisecond))
}

// TestRiakNodeLost imports into a cluster of three nodes, one of which is
// killed with SIGKILL during the import and started again later: every
// message an importer acknowledged is readable afterwards, none is stored
// twice, and the resolver, given all three nodes, answers throughout.
//
// The importer reads the mbox on its standard input, which the test feeds:
// the first part at once, the rest only once the node is killed, a slice a
// second, over the outage and beyond. So the kill falls in the middle of
// the import (the importer holds messages it has not acknowledged yet, and
// has not been given the rest), and every message of the rest that the
// importer acknowledges was stored after the kill.
func TestRiakNodeLost(t *testing.T) {
	needPrograms(t)
	nodes := riaktest.Cluster(t, 3)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.PB)
	}
	dir := t.TempDir()
	coord := startCoordinator(t, filepath.Join(dir, "runs.db"), filepath.Join(dir, "token"), "127.0.0.1:0")
	archive := riakArchive()
	url := "riak://" + strings.Join(addrs, ",") + "/" + archive

	msgs := mail(t, 0)
	w := want{}
	wantAll(w, msgs, "input.mbox")
	input := writeFile(t, dir, "input.mbox", mboxOf(t, msgs))
	manifest := filepath.Join(dir, "a.jsonl")
	imp := start(t, "importer", procOptions{Pipe: true}, "--store", url, "--coordinator", coord.url, "--token-file", coord.tokenFile,
		"--manifest", manifest, "--log-format", "json", "-")
	cut := len(msgs) / 3 // fed before the kill
	head := mboxOf(t, msgs[:cut])
	const slices = 30 // the rest, one a second
	var rest [][]byte
	for i := range slices {
		rest = append(rest, mboxOf(t, msgs[cut+i*(len(msgs)-cut)/slices:cut+(i+1)*(len(msgs)-cut)/slices]))
	}
	killed := make(chan struct{})
	fed := make(chan error, 1)
	go func() {
		fed <- func() error {
			defer imp.stdin.Close()
			if _, err := imp.stdin.Write(head); err != nil {
				return err
			}
			select {
			case <-killed:
			case <-t.Context().Done():
				return t.Context().Err()
			}
			for _, b := range rest {
				if _, err := imp.stdin.Write(b); err != nil {
					return err
				}
				time.Sleep(time.Second)
			}
			return nil
		}()
	}()
	// Once some messages are in, keep reading them through the resolver.
	first := waitManifest(t, imp, manifest, 500)
	res := serveResolver(t, "--store", url)
	ctx, stopReading := context.WithCancel(t.Context())
	var reads, failures atomic.Int64
	var failMu sync.Mutex
	var failed []string
	var readers sync.WaitGroup
	for r := range 2 {
		readers.Go(func() {
			for i := r; ctx.Err() == nil; i += 2 {
				e := first[i%len(first)]
				status, _, body, err := get(ctx, res.url+"/"+e.CallNumber+"/raw")
				if ctx.Err() != nil {
					return
				}
				reads.Add(1)
				if err != nil || status != http.StatusOK || len(body) == 0 {
					failures.Add(1)
					failMu.Lock()
					failed = append(failed, fmt.Sprintf("%s: %d %v", e.CallNumber, status, err))
					failMu.Unlock()
				}
			}
		})
	}

	victim := nodes[1]
	killedAt := time.Now()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	atKill := len(readManifest(t, manifest))
	close(killed)
	if imp.exited() {
		t.Fatalf("the importer had exited (%v) when the node was killed, with %d of %d messages acknowledged: want the kill in the middle of the import", imp.err, atKill, len(msgs))
	}
	if atKill >= cut {
		t.Fatalf("the importer had acknowledged all %d messages fed to it when the node was killed: want the kill in the middle of the import", atKill)
	}
	t.Logf("killed node %s with the importer running: %d messages acknowledged of %d fed (of %d)", victim.PB, atKill, cut, len(msgs))
	time.Sleep(20 * time.Second)
	during := len(readManifest(t, manifest))
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s back after %v; %d messages acknowledged while it was down", victim.PB, time.Since(killedAt).Round(time.Second), during-atKill)

	code := imp.wait(10 * time.Minute)
	stopReading()
	readers.Wait()
	if err := <-fed; err != nil && code == 0 {
		t.Errorf("feeding the importer its input: %v", err)
	}
	t.Logf("resolver: %d reads during the import, %d failed", reads.Load(), failures.Load())
	if failures.Load() > 0 {
		t.Errorf("the resolver failed %d of %d reads while a node was down, e.g. %v", failures.Load(), reads.Load(), failed[:min(len(failed), 5)])
		n := 0
		for l := range strings.Lines(res.log()) {
			if strings.Contains(l, `"level":"ERROR"`) || strings.Contains(l, `"level":"WARN"`) {
				if n++; n <= 20 {
					t.Logf("resolver: %s", l)
				}
			}
		}
	}
	if reads.Load() == 0 {
		t.Errorf("no read through the resolver happened while a node was down")
	}
	acked := readManifest(t, manifest)
	after := 0 // acknowledged, of the messages fed after the kill
	for _, e := range acked[min(cut, len(acked)):] {
		if e.Status == "imported" || e.Status == "duplicate" {
			after++
		}
	}
	t.Logf("the importer acknowledged %d of the %d messages fed to it after the kill", after, len(msgs)-cut)
	if after == 0 {
		t.Errorf("the importer acknowledged none of the %d messages fed to it after the node was killed: want the import to go on", len(msgs)-cut)
	}
	if code != 0 {
		// A request that could not be served for RetryFor ends the import:
		// what the manifest acknowledges must be there all the same, and a
		// second run completes it.
		t.Logf("the importer exited %d with a node lost: %s", code, tail(imp.log(), 1))
		again := start(t, "importer again", procOptions{}, "--store", url, "--coordinator", coord.url, "--token-file", coord.tokenFile, input)
		if code := again.wait(10 * time.Minute); code != 0 {
			t.Fatalf("the second import exited %d", code)
		}
	} else {
		checkManifest(t, "importer", acked, len(msgs))
	}

	st := openRiak(t, addrs, archive)
	if n, err := st.Count(t.Context()); err == nil {
		t.Logf("Count() = %d for %d messages (an estimate: an increment tried again after a lost reply counts twice)", n, len(w))
	}
	inParallel(len(acked), func(i int) {
		e := acked[i]
		if e.Status != "imported" && e.Status != "duplicate" {
			return
		}
		n, err := callnumber.Parse(e.CallNumber)
		if err != nil {
			t.Errorf("manifest entry %d: %v", i+1, err)
			return
		}
		m, err := st.Get(t.Context(), n)
		if err != nil {
			t.Errorf("message %d, acknowledged as %s, cannot be read: %v", i+1, n, err)
			return
		}
		if !bytes.Equal(m.Raw, asImported(msgs[i])) {
			t.Errorf("message %d (%s): stored bytes differ from the input", i+1, n)
		}
	})
	var digests []store.Digest
	for d := range w {
		digests = append(digests, d)
	}
	inParallel(len(digests), func(i int) {
		d := digests[i]
		n, err := st.ByDigest(t.Context(), d)
		if err != nil {
			t.Errorf("message from %s is not in the store: %v", w[d], err)
			return
		}
		if m, err := st.Get(t.Context(), n); err != nil || store.DigestOf(m.Raw) != d {
			t.Errorf("Get(%v) (message from %s) = %v; want its bytes", n, w[d], err)
		}
	})
	checkOnce(t, st, w)
}

// inParallel runs fn(i) for i in [0, n) on 8 goroutines.
func inParallel(n int, fn func(i int)) {
	next := make(chan int)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range next {
				fn(i)
			}
		})
	}
	for i := range n {
		next <- i
	}
	close(next)
	wg.Wait()
}
