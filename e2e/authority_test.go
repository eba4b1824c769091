package e2e

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/riakauthority"
	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/internal/riakconn"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
)

// The run authority in the Riak cluster: coordinators serving it, programs
// taking runs from it directly, a coordinator and a node killed, and an
// authority moved there from a runs.db under a live archive.

// startCoordinatorArgs starts coordinator serve with args and waits for
// its listening line.
func startCoordinatorArgs(t *testing.T, name, tokenFile string, args ...string) *coordinator {
	t.Helper()
	args = append([]string{"serve", "--listen", "127.0.0.1:0", "--token-file", tokenFile, "--log-format", "json"}, args...)
	p := start(t, name, procOptions{}, args...)
	line := p.waitLog(`"msg":"listening"`, 60*time.Second)
	var rec struct{ Addr, URL string }
	if err := json.Unmarshal([]byte(line), &rec); err != nil || rec.URL == "" {
		t.Fatalf("cannot read the listening line %q of %s: %v", line, name, err)
	}
	return &coordinator{proc: p, tokenFile: tokenFile, url: rec.URL, addr: rec.Addr}
}

// postRun asks a coordinator for a run.
func postRun(ctx context.Context, url, token, who string) (callnumber.Lease, error) {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "POST", url+"/v1/runs", strings.NewReader(fmt.Sprintf(`{"program":"e2e","host":%q}`, who)))
	if err != nil {
		return callnumber.Lease{}, err
	}
	req.Header.Set("Authorization", "Bearer "+token)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return callnumber.Lease{}, err
	}
	defer resp.Body.Close()
	var l callnumber.Lease
	if resp.StatusCode != http.StatusCreated {
		return l, fmt.Errorf("POST %s/v1/runs: %s", url, resp.Status)
	}
	return l, json.NewDecoder(resp.Body).Decode(&l)
}

// feedRuns returns the runs of the call numbers in st's change feed.
func feedRuns(t *testing.T, st store.Store) map[uint32]bool {
	t.Helper()
	b, err := st.Binding(t.Context())
	if err != nil {
		t.Fatalf("Binding() = %v", err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	runs := map[uint32]bool{}
	for n := range followAll(t, st) {
		f, err := codec.Decode(n)
		if err != nil {
			t.Fatalf("Decode(%v) = %v", n, err)
		}
		runs[f.Run] = true
	}
	return runs
}

// TestRiakAuthorityRace: three coordinators serve one authority in a
// cluster of three nodes while allocators ask them for runs, two more
// take runs from the cluster directly, and importers, through
// coordinators and directly, race on the same messages. Once 3,000 runs
// are out, one coordinator and one Riak node are killed with SIGKILL;
// the rest go on until 10,000 runs are allocated. Every run is issued
// once (the store accepts every lease, and the authority has the same
// record of it), and every message is stored once.
func TestRiakAuthorityRace(t *testing.T) {
	needPrograms(t)
	nodes := riaktest.Cluster(t, 3)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.PB)
	}
	dir := t.TempDir()
	archive := riakArchive()
	url := "riak://" + strings.Join(addrs, ",") + "/" + archive
	tokenFile := filepath.Join(dir, "token")

	coords := []*coordinator{startCoordinatorArgs(t, "coordinator a", tokenFile, "--authority", url)}
	for _, name := range []string{"coordinator b", "coordinator c"} {
		coords = append(coords, startCoordinatorArgs(t, name, tokenFile, "--authority", url))
	}
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	token := strings.TrimSpace(string(tok))

	msgs := mail(t, 2000)
	w := want{}
	wantAll(w, msgs, "input")
	half := len(msgs) / 2
	inputs := []string{
		writeFile(t, dir, "one.mbox", mboxOf(t, msgs[:half])),
		writeFile(t, dir, "two.mbox", mboxOf(t, msgs[half:])),
	}
	importer := func(name, input string, runFlags ...string) *proc {
		args := append([]string{"--store", url, "--log-format", "json", "--manifest", filepath.Join(dir, name+".jsonl")}, runFlags...)
		return start(t, "importer "+name, procOptions{}, append(args, input)...)
	}
	// Two importers race on the first half now: one through a
	// coordinator, one directly.
	imps := []*proc{
		importer("a", inputs[0], "--coordinator", coords[0].url, "--token-file", tokenFile),
		importer("b", inputs[0], "--authority", url),
	}

	const total, killAt = 10000, 3000
	var (
		mu     sync.Mutex
		leases = make(map[uint32]callnumber.Lease, total)
		got    atomic.Int64
		failed atomic.Int64
		dead   atomic.Bool // coordinator b was killed
	)
	ctx, stop := context.WithCancel(t.Context())
	defer stop()
	record := func(l callnumber.Lease, who string) {
		mu.Lock()
		defer mu.Unlock()
		if prev, ok := leases[l.Run]; ok {
			t.Errorf("run %d issued twice: to %s and to %s", l.Run, prev.Host, l.Host)
			return
		}
		leases[l.Run] = l
		if got.Add(1) >= total {
			stop()
		}
	}
	var wg sync.WaitGroup
	// Six allocators through the coordinators, two for each; those of b
	// go to the next coordinator once b is dead.
	for i := range 6 {
		wg.Go(func() {
			who := fmt.Sprintf("http-%d", i)
			c := i % 3
			for ctx.Err() == nil {
				if c == 1 && dead.Load() {
					c = 2
				}
				l, err := postRun(ctx, coords[c].url, token, who)
				if err != nil {
					if ctx.Err() == nil {
						failed.Add(1)
						if c != 1 {
							t.Logf("%s: %v", who, err)
						}
					}
					continue
				}
				record(l, who)
			}
		})
	}
	// Two allocators taking runs from the cluster directly.
	for i := range 2 {
		wg.Go(func() {
			who := fmt.Sprintf("direct-%d", i)
			a, err := riakauthority.Open(t.Context(), riakauthority.Options{Nodes: addrs, Archive: archive})
			if err != nil {
				t.Errorf("%s: %v", who, err)
				return
			}
			defer a.Close()
			for ctx.Err() == nil {
				l, err := a.Issue(ctx, authority.Holder{Program: "e2e", Host: who})
				if err != nil {
					if ctx.Err() != nil {
						continue
					}
					// The cluster may answer nothing for a while as the
					// killed node leaves and comes back: the rule tested is
					// that no run is issued twice, not that every request
					// is served.
					if !errors.Is(err, riakconn.ErrUnavailable) {
						t.Errorf("%s: %v", who, err)
						return
					}
					failed.Add(1)
					t.Logf("%s: %v", who, err)
					continue
				}
				record(l, who)
			}
		})
	}

	eventually(t, 10*time.Minute, fmt.Sprintf("%d runs allocated", killAt), func() bool { return got.Load() >= killAt || ctx.Err() != nil })
	victim := nodes[1]
	dead.Store(true)
	coords[1].kill()
	if err := victim.Kill(); err != nil {
		t.Fatal(err)
	}
	killedAt := time.Now()
	t.Logf("killed coordinator b and Riak node %s after %d runs", victim.PB, got.Load())
	// Two more importers race on the second half with the node down:
	// through the coordinator still up, and directly.
	imps = append(imps,
		importer("c", inputs[1], "--coordinator", coords[2].url, "--token-file", tokenFile),
		importer("d", inputs[1], "--authority", url),
	)
	time.Sleep(20 * time.Second)
	during := got.Load()
	if err := victim.Restart(); err != nil {
		t.Fatal(err)
	}
	t.Logf("node %s back after %v; %d runs allocated meanwhile", victim.PB, time.Since(killedAt).Round(time.Second), during-killAt)
	wg.Wait()
	t.Logf("%d runs allocated by the allocators; %d requests failed (most to the killed coordinator)", got.Load(), failed.Load())
	if got.Load() < total {
		t.Fatalf("%d runs allocated, want %d", got.Load(), total)
	}
	for _, p := range imps {
		if code := p.wait(10 * time.Minute); code != 0 {
			t.Errorf("%s exited %d:\n%s", p.name, code, tail(p.log(), 10))
		}
	}
	for _, c := range []*coordinator{coords[0], coords[2]} {
		if c.exited() {
			t.Errorf("%s exited (%v)", c.name, c.err)
		}
	}

	st := openRiak(t, addrs, archive)
	checkOnce(t, st, w)
	a, err := riakauthority.Open(t.Context(), riakauthority.Options{Nodes: addrs, Archive: archive})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	// The importers' runs: issued by the same authority, none of the
	// allocators', and the lease the store keeps is the authority's.
	for run := range feedRuns(t, st) {
		if _, ok := leases[run]; ok {
			t.Errorf("run %d, which an importer numbered messages with, was also issued to an allocator", run)
		}
		sl, err := st.Lease(t.Context(), run)
		al, aerr := a.Lease(t.Context(), run)
		if err != nil || aerr != nil || sl.Nonce != al.Nonce || sl.Authority != a.ID() {
			t.Errorf("run %d: the store's lease %+v (%v), the authority's %+v (%v): want the same", run, sl, err, al, aerr)
		}
	}
	// Every allocator's lease is the authority's record of that run, and
	// the store accepts it: a run issued twice would be refused there.
	var list []callnumber.Lease
	for _, l := range leases {
		list = append(list, l)
	}
	var bad atomic.Int64
	inParallel(len(list), func(i int) {
		l := list[i]
		al, err := a.Lease(t.Context(), l.Run)
		if err == nil && al.Nonce != l.Nonce {
			err = fmt.Errorf("the authority records nonce %s, the allocator was given %s", al.Nonce, l.Nonce)
		}
		if err == nil {
			err = st.RecordLease(t.Context(), l)
		}
		if err != nil && bad.Add(1) <= 10 {
			t.Errorf("run %d: %v", l.Run, err)
		}
	})
	if n := bad.Load(); n > 0 {
		t.Errorf("%d of %d leases refused", n, len(list))
	}
}

// TestMigrateLiveArchive moves the authority of an archive in Riak from
// its runs.db into the cluster, while the resolver serves the archive:
// a first migration is killed with SIGKILL and run again; afterwards the
// file refuses to issue (through a coordinator or a local program),
// importers through a coordinator of the moved authority and directly
// find every message already stored under its call number, and number
// new ones with runs above every run of the file.
func TestMigrateLiveArchive(t *testing.T) {
	needPrograms(t)
	addr := riaktest.Addr(t)
	dir := t.TempDir()
	db, tokenFile := filepath.Join(dir, "runs.db"), filepath.Join(dir, "token")
	coord := startCoordinator(t, db, tokenFile, "127.0.0.1:0")
	archive := riakArchive()
	url := "riak://" + addr + "/" + archive

	msgs := mail(t, 1500)
	w := want{}
	wantAll(w, msgs, "input")
	old, later, direct := msgs[:800], msgs[:1200], msgs[1200:]
	oldPath := writeFile(t, dir, "old.mbox", mboxOf(t, old))
	imp := start(t, "importer before", procOptions{}, "--store", url, "--coordinator", coord.url, "--token-file", tokenFile,
		"--manifest", filepath.Join(dir, "before.jsonl"), oldPath)
	if code := imp.wait(10 * time.Minute); code != 0 {
		t.Fatalf("importer before exited %d", code)
	}
	before := readManifest(t, filepath.Join(dir, "before.jsonl"))
	res := serveResolver(t, "--store", url)
	// Many leases, so that the first migration is killed while it copies.
	tok, err := os.ReadFile(tokenFile)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for range 250 {
				if _, err := postRun(t.Context(), coord.url, strings.TrimSpace(string(tok)), fmt.Sprint("filler-", i)); err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	coord.stop()
	file, err := authority.Open(t.Context(), db, authority.Options{ReadOnly: true})
	if err != nil {
		t.Fatal(err)
	}
	fileLeases, err := file.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	fileNext, _ := file.NextRun(t.Context())
	fileID := file.ID()
	file.Close()

	first := start(t, "coordinator migrate (killed)", procOptions{}, "migrate", "--db", db, "--to", url)
	time.Sleep(3 * time.Second)
	if !first.exited() {
		first.kill()
		t.Logf("killed the first migration after 3 s")
	} else {
		t.Logf("the first migration ended before it could be killed: %s", tail(first.log(), 2))
	}
	again := start(t, "coordinator migrate", procOptions{}, "migrate", "--db", db, "--to", url)
	if code := again.wait(5 * time.Minute); code != 0 {
		t.Fatalf("coordinator migrate exited %d:\n%s", code, again.log())
	}
	t.Logf("%s", strings.TrimSpace(again.log()))

	// The file refuses to issue, through a coordinator and locally.
	oldCoord := start(t, "coordinator on the old file", procOptions{}, "serve", "--db", db, "--listen", "127.0.0.1:0", "--token-file", tokenFile)
	if code := oldCoord.wait(time.Minute); code != 1 || !strings.Contains(oldCoord.log(), "moved to riak://") {
		t.Errorf("coordinator on the migrated file exited %d, want 1 saying where the authority went:\n%s", code, oldCoord.log())
	}
	local := start(t, "importer on the old file", procOptions{}, "--store", url, "--data", dir, oldPath)
	if code := local.wait(time.Minute); code != 1 || !strings.Contains(local.log(), "--authority riak://") {
		t.Errorf("importer with the migrated runs.db exited %d, want 1 saying to use --authority:\n%s", code, local.log())
	}

	newCoord := startCoordinatorArgs(t, "coordinator riak", tokenFile, "--authority", url)
	laterPath := writeFile(t, dir, "later.mbox", mboxOf(t, later))
	imp = start(t, "importer after", procOptions{}, "--store", url, "--coordinator", newCoord.url, "--token-file", tokenFile,
		"--manifest", filepath.Join(dir, "after.jsonl"), laterPath)
	if code := imp.wait(10 * time.Minute); code != 0 {
		t.Fatalf("importer after exited %d:\n%s", code, tail(imp.log(), 10))
	}
	directPath := writeFile(t, dir, "direct.mbox", mboxOf(t, direct))
	imp = start(t, "importer direct", procOptions{}, "--store", url, "--authority", url, directPath)
	if code := imp.wait(10 * time.Minute); code != 0 {
		t.Fatalf("importer direct exited %d:\n%s", code, tail(imp.log(), 10))
	}

	after := readManifest(t, filepath.Join(dir, "after.jsonl"))
	for i, e := range before {
		if i >= len(after) || after[i].CallNumber != e.CallNumber || after[i].Status != "duplicate" {
			t.Errorf("message %d: %s before the migration, %+v after: want a duplicate under the same number", i+1, e.CallNumber, after[min(i, len(after)-1)])
		}
	}
	st := openRiak(t, []string{addr}, archive)
	checkOnce(t, st, w)
	a, err := riakauthority.Open(t.Context(), riakauthority.Options{Nodes: []string{addr}, Archive: archive})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	if a.ID() != fileID {
		t.Errorf("the authority in Riak is %s, the file's was %s", a.ID(), fileID)
	}
	for _, l := range fileLeases {
		if got, err := a.Lease(t.Context(), l.Run); err != nil || got.Nonce != l.Nonce {
			t.Errorf("Lease(%d) in Riak = %s, %v; want the file's nonce %s", l.Run, got.Nonce, err, l.Nonce)
		}
	}
	fileRuns := map[uint32]bool{}
	for _, l := range fileLeases {
		fileRuns[l.Run] = true
	}
	for run := range feedRuns(t, st) {
		sl, err := st.Lease(t.Context(), run)
		al, aerr := a.Lease(t.Context(), run)
		if err != nil || aerr != nil || sl.Nonce != al.Nonce {
			t.Errorf("run %d: the store's lease %s (%v), the authority's %s (%v)", run, sl.Nonce, err, al.Nonce, aerr)
		}
		if !fileRuns[run] && uint64(run) < fileNext {
			t.Errorf("run %d, issued after the migration, is below the file's next run %d", run, fileNext)
		}
	}
	// The resolver served the archive throughout: a message of before and
	// one of after.
	for _, cn := range []string{before[0].CallNumber, after[len(after)-1].CallNumber} {
		status, _, body, err := get(t.Context(), res.url+"/"+cn+"/raw")
		if err != nil || status != http.StatusOK || len(bytes.TrimSpace(body)) == 0 {
			t.Errorf("GET /%s/raw = %d, %v", cn, status, err)
		}
	}
}
