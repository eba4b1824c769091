package e2e

import (
	"context"
	"fmt"
	"math/rand/v2"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
)

// poller reads the archive over HTTP while it is written: the stats, and
// the raw bytes of messages the manifests have reported so far.
type poller struct {
	r        *resolverServer
	stop     chan struct{}
	done     chan struct{}
	mu       sync.Mutex
	known    []string // call numbers reported stored
	requests int
	failures []string
	lastSeen int64
}

func startPoller(ctx context.Context, r *resolverServer) *poller {
	p := &poller{r: r, stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(p.done)
		rng := rand.New(rand.NewPCG(1, 2))
		for {
			select {
			case <-p.stop:
				return
			case <-ctx.Done():
				return
			default:
			}
			p.once(ctx, rng)
			time.Sleep(5 * time.Millisecond)
		}
	}()
	return p
}

func (p *poller) fail(format string, args ...any) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.failures = append(p.failures, fmt.Sprintf(format, args...))
}

func (p *poller) once(ctx context.Context, rng *rand.Rand) {
	n, err := p.r.stats(ctx)
	if err != nil {
		p.fail("stats: %v", err)
		return
	}
	p.mu.Lock()
	p.requests++
	if n < p.lastSeen {
		p.failures = append(p.failures, fmt.Sprintf("stats went back from %d to %d messages", p.lastSeen, n))
	}
	p.lastSeen = n
	var cn string
	if len(p.known) > 0 {
		cn = p.known[rng.IntN(len(p.known))]
	}
	p.mu.Unlock()
	if cn == "" {
		return
	}
	status, _, body, err := get(ctx, p.r.url+"/"+cn+"/raw")
	p.mu.Lock()
	p.requests++
	p.mu.Unlock()
	if err != nil || status != http.StatusOK || len(body) == 0 {
		p.fail("GET /%s/raw = %d, %d bytes, %v; want 200 and the message (the importer reported it stored)", cn, status, len(body), err)
	}
}

// learn adds call numbers reported stored.
func (p *poller) learn(m []manifestEntry) {
	p.mu.Lock()
	defer p.mu.Unlock()
	for _, e := range m {
		if e.CallNumber != "" {
			p.known = append(p.known, e.CallNumber)
		}
	}
}

func (p *poller) finish(t *testing.T) {
	t.Helper()
	close(p.stop)
	<-p.done
	for i, f := range p.failures {
		if i == 10 {
			t.Errorf("... %d resolver failures in all", len(p.failures))
			break
		}
		t.Errorf("resolver while writing: %s", f)
	}
	t.Logf("%d requests to the resolver while the archive was written", p.requests)
}

// TestEndToEnd is the scenario the design exists for: a coordinator; a
// watcher following a Dovecot mailbox into which mail is delivered the
// whole time; two importers loading two mbox files at once, the second
// file split between two processes (--partition 1/2 and 2/2); all sharing
// one data directory (the embedded bbolt store) and the coordinator's
// runs; a resolver serving throughout, polled over HTTP. At the end every
// message delivered or imported is stored exactly once under distinct
// call numbers, and resolves over HTTP to its bytes.
func TestEndToEnd(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	data := filepath.Join(dir, "archive")
	ctx := t.Context()

	coord := startCoordinator(t, filepath.Join(dir, "runs.db"), filepath.Join(dir, "token"), "127.0.0.1:0")
	dove := dovecottest.Start(t, dovecottest.Options{})
	watcher := startWatcher(t, dove, data, coord)
	// The watcher creates the archive; the resolver serves it from then
	// on (it never creates one).
	eventually(t, 60*time.Second, "the watcher to create the archive", func() bool {
		_, err := os.Stat(filepath.Join(data, "messages.db"))
		return err == nil
	})
	resolver := startResolver(t, data)
	poll := startPoller(ctx, resolver)

	msgs := mail(t, 0)
	half := len(msgs) / 2
	first := writeFile(t, dir, "first.mbox", mboxOf(t, msgs[:half]))
	second := writeFile(t, dir, "second.mbox", mboxOf(t, msgs[half:]))

	// Deliveries: new mail, and now and then a message the importers are
	// loading too (over IMAP with CRLF line ends: the same digest, so a
	// duplicate, whichever comes first).
	deliveries := deliver(ctx, dove, 60, 10*time.Millisecond, func(i int) []byte {
		if i%5 == 4 {
			return msgs[(i*997)%len(msgs)]
		}
		return watcherMessage("e2e", i)
	})

	type job struct {
		name, input, partition string
		count                  int
	}
	jobs := []job{
		{"first", first, "", half},
		{"second-1of2", second, "1/2", (len(msgs) - half + 1) / 2},
		{"second-2of2", second, "2/2", (len(msgs) - half) / 2},
	}
	procs := make([]*proc, len(jobs))
	manifests := make([]string, len(jobs))
	for i, j := range jobs {
		manifests[i] = filepath.Join(dir, j.name+".jsonl")
		args := []string{"--data", data, "--coordinator", coord.url, "--token-file", coord.tokenFile,
			"--manifest", manifests[i], "--log-format", "json", "--list", "e2e"}
		if j.partition != "" {
			args = append(args, "--partition", j.partition)
		}
		procs[i] = start(t, "importer "+j.name, procOptions{}, append(args, j.input)...)
	}
	for i, p := range procs {
		if code := p.wait(120 * time.Second); code != 0 {
			t.Fatalf("importer %s exited %d, want 0", jobs[i].name, code)
		}
		m := readManifest(t, manifests[i])
		checkManifest(t, jobs[i].name, m, jobs[i].count)
		poll.learn(m)
	}
	// Deliveries go on after the imports; give the poller time to read
	// what the importers reported, in the meantime.
	eventually(t, 60*time.Second, "the poller to read while the watcher archives", func() bool {
		poll.mu.Lock()
		defer poll.mu.Unlock()
		return poll.requests > 200
	})
	delivered := deliveries.finish(t)

	w := want{}
	wantAll(w, msgs, "corpus")
	imported := len(w)
	server := serverMail(t, dove)
	for d, where := range server {
		if _, ok := w[d]; !ok {
			w[d] = where
		}
	}
	t.Logf("%d messages imported (%d distinct), %d delivered over IMAP (%d distinct), %d distinct in all",
		len(msgs), imported, delivered, len(server), len(w))
	waitArchived(t, data, server, watcher, 90*time.Second)
	watcher.stop()
	poll.finish(t)

	st := openStore(t, data)
	numbers := verifyArchive(t, st, w)
	st.Close()
	if n, err := resolver.stats(ctx); err != nil || n != int64(len(w)) {
		t.Errorf("GET /api/v1/stats: %d messages, %v; want %d", n, err, len(w))
	}
	resolveAll(t, resolver, numbers)
	resolver.stop()
	coord.stop()

	// Each process numbered with its own runs.
	st = openStore(t, data)
	seen := map[uint32]string{}
	for i, j := range jobs {
		for r := range runsOf(t, st, readManifest(t, manifests[i])) {
			if other, ok := seen[r]; ok {
				t.Errorf("run %d used by importer %s and importer %s", r, other, j.name)
			}
			seen[r] = j.name
		}
	}
}
