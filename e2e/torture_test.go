package e2e

// The crash-and-race harness (make torture). Each round, a schedule drawn
// from a seeded generator starts importers (new messages and messages
// imported before), the watcher on a Dovecot inbox that mail keeps
// arriving in, in-place compactions (sometimes two at once), catalog
// rebuilds and a resolver, shrinks the archive's disk to full for a while
// and SIGKILLs any of them at a random moment. After every round a
// verifier, with everything stopped, reads the store's whole change feed
// and checks: every message the programs acknowledged (a manifest line,
// a message the watcher moved out of the inbox) is stored byte for byte
// under its call number; no message is stored twice; the feed, the
// digest index and the count agree; and, once a resolver has followed
// the store, the catalog holds exactly the store's messages.
//
// The schedule (what runs, when, what is killed) is a function of the
// seed; the outcome of a race is not (the processes run on a real,
// shared machine). A failure prints the seed and the round, and the same
// seed replays the same schedule.

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/internal/testkit/dovecottest"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/riakstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// Environment of make torture.
const (
	tortureSeedEnv   = "CHIBRARY_TORTURE_SEED"   // the schedule's seed (default: from the clock, logged)
	tortureRoundsEnv = "CHIBRARY_TORTURE_ROUNDS" // rounds (default 3; make torture's long run: 40)
)

func tortureSettings(t *testing.T) (seed uint64, rounds int) {
	t.Helper()
	seed = uint64(time.Now().UnixNano() % 1e9)
	rounds = 3
	if v := os.Getenv(tortureSeedEnv); v != "" {
		n, err := strconv.ParseUint(v, 10, 64)
		if err != nil {
			t.Fatalf("%s=%q: %v", tortureSeedEnv, v, err)
		}
		seed = n
	}
	if v := os.Getenv(tortureRoundsEnv); v != "" {
		n, err := strconv.Atoi(v)
		if err != nil || n < 1 {
			t.Fatalf("%s=%q: want a number of rounds", tortureRoundsEnv, v)
		}
		rounds = n
	}
	return seed, rounds
}

// TestTorture runs the harness on the embedded bbolt store, in a data
// directory on a tmpfs (where the test can mount one) that it fills.
func TestTorture(t *testing.T) {
	needPrograms(t)
	seed, rounds := tortureSettings(t)
	t.Logf("torture on bbolt: seed %d, %d rounds (%s=%d %s=%d make torture replays this schedule)", seed, rounds, tortureSeedEnv, seed, tortureRoundsEnv, rounds)
	tt := newTorture(t, seed)
	tt.disk = mountTmpfs(t)
	dir := t.TempDir()
	if tt.disk != nil {
		dir = tt.disk.dir
	} else {
		t.Log("no tmpfs could be mounted: the rounds have no disk-full faults")
	}
	tt.data = filepath.Join(dir, "archive")
	tt.storeFlags = []string{"--data", tt.data}
	tt.storeURL = "bolt:" + filepath.Join(tt.data, "messages.db")
	tt.catalogPath = filepath.Join(tt.data, "catalog.db")
	tt.run(rounds)
}

// TestTortureRiak runs the harness on a Riak node: importers, the watcher,
// catalog rebuilds and the resolver, killed at random (a Riak store is
// never compacted, and its disk is the node's).
func TestTortureRiak(t *testing.T) {
	needPrograms(t)
	seed, rounds := tortureSettings(t)
	addr := riaktest.Addr(t)
	t.Logf("torture on Riak %s: seed %d, %d rounds (%s=%d %s=%d make torture replays this schedule)", addr, seed, rounds, tortureSeedEnv, seed, tortureRoundsEnv, rounds)
	tt := newTorture(t, seed)
	tt.riak = true
	tt.data = filepath.Join(t.TempDir(), "archive") // the local authority's runs.db
	tt.storeURL = "riak://" + addr + "/" + riakArchive()
	tt.catalogPath = filepath.Join(t.TempDir(), "catalog.db")
	tt.storeFlags = []string{"--store", tt.storeURL, "--data", tt.data}
	tt.run(rounds)
}

// torture is the state of one harness run.
type torture struct {
	t    *testing.T
	rng  *rand.Rand
	seed uint64
	dove *dovecottest.Server
	disk *tmpfsDisk // nil: no disk-full faults
	riak bool

	data, storeURL, catalogPath string
	storeFlags                  []string

	msgs  [][]byte // the corpus, as the importers store them
	fresh int      // message(0) to message(fresh-1) were given to an importer
	// acked: call number -> digest of every message a program
	// acknowledged; fresh: those of the round being verified.
	acked, freshAcks map[string]store.Digest
	// delivered: digests of the messages appended to the inbox.
	delivered map[store.Digest]bool
	watched   int // messages delivered so far, for their names

	stats map[string]int // what happened, for the log
	// uncounted bounds how far below the feed a Riak store's count may
	// be: a writer killed between storing a batch and counting it leaves
	// the count short by that batch for good (docs/riak.md).
	uncounted int
}

func newTorture(t *testing.T, seed uint64) *torture {
	msgs := mail(t, 0)
	imported := make([][]byte, len(msgs))
	for i, m := range msgs {
		imported[i] = asImported(m)
	}
	dove := dovecottest.Start(t, dovecottest.Options{})
	if err := dove.CreateMailbox(t.Context(), "Archived"); err != nil {
		t.Fatal(err)
	}
	return &torture{
		t: t, seed: seed, rng: rand.New(rand.NewPCG(seed, 0x70a7)), dove: dove, msgs: imported,
		acked: map[string]store.Digest{}, freshAcks: map[string]store.Digest{}, delivered: map[store.Digest]bool{}, stats: map[string]int{},
	}
}

func (tt *torture) run(rounds int) {
	t := tt.t
	for r := 1; r <= rounds; r++ {
		tt.round(r)
		if t.Failed() {
			t.Fatalf("round %d failed: replay with %s=%d %s=%d", r, tortureSeedEnv, tt.seed, tortureRoundsEnv, r)
		}
	}
	tt.drain()
	if t.Failed() {
		t.Fatalf("the last check failed: replay with %s=%d", tortureSeedEnv, tt.seed)
	}
	t.Logf("torture done: %v", tt.stats)
}

// A job is one program the schedule runs in a round.
type job struct {
	name  string
	args  []string
	at    time.Duration // after the round's start
	kill  time.Duration // when to SIGKILL it (0: never)
	stop  bool          // SIGTERM at the round's end (servers)
	ok1   []string      // reasons that make exit status 1 expected
	p     *proc
	after func(j *job) // what to learn from it once it ended (manifests)
}

// message returns the i-th message of the run: the corpus's, and past its
// end the corpus again, each message with a header that makes it new.
func (tt *torture) message(i int) []byte {
	m := tt.msgs[i%len(tt.msgs)]
	if i < len(tt.msgs) {
		return m
	}
	return append(fmt.Appendf(nil, "X-Torture-Copy: %d\n", i/len(tt.msgs)), m...)
}

// round draws a schedule, runs it and verifies the archive.
func (tt *torture) round(r int) {
	t, rng := tt.t, tt.rng
	dir := t.TempDir()
	length := time.Duration(4+rng.IntN(5)) * time.Second
	diskFull := tt.disk != nil && rng.IntN(4) == 0
	full := []string{"no space left on device", "database or disk is full"} // the kernel's words, SQLite's
	var jobs []*job

	// Importers: new messages, and some given to an importer before.
	for i := range 1 + rng.IntN(3) {
		var in [][]byte
		for range 100 + rng.IntN(700) {
			in = append(in, tt.message(tt.fresh))
			tt.fresh++
		}
		if old := tt.fresh - len(in); old > 0 && rng.IntN(2) == 0 {
			from := rng.IntN(old)
			for k := from; k < min(from+200, old); k++ {
				in = append(in, tt.message(k))
			}
		}
		input := writeFile(t, dir, fmt.Sprintf("input-%d.mbox", i), mboxOf(t, in))
		manifest := filepath.Join(dir, fmt.Sprintf("manifest-%d.jsonl", i))
		j := &job{name: fmt.Sprintf("importer %d.%d", r, i), at: time.Duration(rng.Int64N(int64(length / 2))),
			args: append(slices.Clone(tt.storeFlags), "--manifest", manifest, "--log-format", "json", input),
			ok1:  full}
		j.after = func(j *job) { tt.learnManifest(j, manifest, in) }
		jobs = append(jobs, j)
	}
	// The watcher, while mail arrives.
	watching := rng.IntN(3) > 0
	if watching {
		pw := writeFile(t, dir, "imap-password", []byte(tt.dove.Password+"\n"))
		jobs = append(jobs, &job{name: fmt.Sprintf("watcher %d", r), stop: true,
			args: append(slices.Clone(tt.storeFlags), "--imap", fmt.Sprintf("imap://%s@%s/INBOX", tt.dove.User, tt.dove.Addr),
				"--password-file", pw, "--after", "move:Archived", "--log-format", "json")})
	}
	// A resolver serving and following the store into the catalog.
	serving := rng.IntN(4) > 0
	if serving {
		jobs = append(jobs, &job{name: fmt.Sprintf("resolver serve %d", r), stop: true,
			args: append(append([]string{"serve"}, tt.catalogFlags()...), "--listen", "127.0.0.1:0", "--log-format", "json"),
			// Before the first import there is no archive to serve.
			ok1: []string{"no archive in"}})
	}
	// Maintenance: compactions (bolt), a rebuild of the catalog.
	if !tt.riak {
		for i := range rng.IntN(3) {
			jobs = append(jobs, &job{name: fmt.Sprintf("resolver compact %d.%d", r, i), at: time.Duration(rng.Int64N(int64(length))),
				args: append(append([]string{"compact"}, tt.storeFlags...), "--log-format", "json"),
				// Before the first import there is no store to compact.
				ok1: append([]string{"a compaction or removal of this store is running", "no archive in"}, full...)})
		}
	}
	if rng.IntN(3) == 0 {
		jobs = append(jobs, &job{name: fmt.Sprintf("resolver reindex %d", r), at: time.Duration(rng.Int64N(int64(length))),
			args: append(append([]string{"reindex"}, tt.catalogFlags()...), "--log-format", "json"),
			ok1:  append([]string{"another process writes this catalog", "no archive in"}, full...)})
	}
	// Kills.
	for _, j := range jobs {
		if rng.IntN(5) < 2 {
			j.kill = j.at + time.Duration(rng.Int64N(int64(length)))
		}
	}
	var fullAt, fullFor time.Duration
	if diskFull {
		fullAt, fullFor = time.Duration(rng.Int64N(int64(length))), time.Duration(1+rng.IntN(3))*time.Second
	}
	var deliveries int
	if watching || rng.IntN(2) == 0 {
		deliveries = 10 + rng.IntN(60)
	}
	t.Logf("round %d: %s, %d deliveries%s", r, describeJobs(jobs), deliveries, map[bool]string{true: fmt.Sprintf(", disk full at %v for %v", fullAt, fullFor)}[diskFull])

	// Run it.
	start := time.Now()
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	deliverDone := make(chan struct{})
	go func() {
		defer close(deliverDone)
		for i := range deliveries {
			if ctx.Err() != nil {
				return
			}
			raw := watcherMessage(fmt.Sprintf("torture-%d", tt.seed), tt.watched+i)
			if _, err := tt.dove.Append(ctx, "INBOX", raw); err == nil {
				tt.delivered[store.DigestOf(raw)] = true
			}
			time.Sleep(length / time.Duration(deliveries+1))
		}
	}()
	events := tt.events(jobs, fullAt, fullFor, diskFull)
	for _, ev := range events {
		if d := ev.at - time.Since(start); d > 0 {
			time.Sleep(d)
		}
		ev.do()
	}
	if d := length - time.Since(start); d > 0 {
		time.Sleep(d)
	}
	<-deliverDone
	tt.watched += deliveries
	if diskFull && fullAt+fullFor > length {
		tt.disk.grow(t) // the round ends with room
	}
	for _, j := range jobs {
		if j.p != nil && j.stop && !j.p.exited() {
			j.p.cmd.Process.Signal(syscall.SIGTERM)
		}
	}
	for _, j := range jobs {
		tt.ended(j)
	}
	tt.verify(r)
}

type event struct {
	at time.Duration
	do func()
}

// events orders the round's starts, kills and disk changes.
func (tt *torture) events(jobs []*job, fullAt, fullFor time.Duration, diskFull bool) []event {
	var evs []event
	for _, j := range jobs {
		evs = append(evs, event{j.at, func() {
			j.p = start(tt.t, j.name, procOptions{}, j.args...)
			tt.stats["started"]++
		}})
		if j.kill > 0 {
			evs = append(evs, event{j.kill, func() {
				if j.p != nil && !j.p.exited() {
					j.p.cmd.Process.Signal(syscall.SIGKILL)
					tt.stats["killed"]++
					if strings.HasPrefix(j.name, "importer") || strings.HasPrefix(j.name, "watcher") {
						tt.uncounted += ingest.DefaultBatchMessages
					}
				}
			}})
		}
	}
	if diskFull {
		evs = append(evs, event{fullAt, func() { tt.disk.fill(tt.t); tt.stats["disk full"]++ }})
		evs = append(evs, event{fullAt + fullFor, func() { tt.disk.grow(tt.t) }})
	}
	slices.SortStableFunc(evs, func(a, b event) int { return int(a.at - b.at) })
	return evs
}

func describeJobs(jobs []*job) string {
	var parts []string
	for _, j := range jobs {
		s := fmt.Sprintf("%s at %v", j.name, j.at.Round(time.Millisecond))
		if j.kill > 0 {
			s += fmt.Sprintf(" killed at %v", j.kill.Round(time.Millisecond))
		}
		parts = append(parts, s)
	}
	return strings.Join(parts, "; ")
}

// ended waits for a job's program to end and checks how it ended: 0, a
// SIGKILL of the schedule's, or 1 for a reason the schedule expects. A
// panic, a bad-usage exit or an unexpected failure fails the round.
func (tt *torture) ended(j *job) {
	t := tt.t
	if j.p == nil {
		return
	}
	code := j.p.wait(5 * time.Minute)
	log := j.p.log()
	switch {
	case strings.Contains(log, "panic:") || strings.Contains(log, "fatal error:"):
		t.Errorf("%s crashed (exit %d):\n%s", j.name, code, tail(log, 40))
	case code == 0:
	case code == 128+int(syscall.SIGKILL) && j.kill > 0:
	case code == 1 && anyIn(log, j.ok1):
		tt.stats["refused or full"]++
	default:
		t.Errorf("%s exited %d, want 0%s:\n%s", j.name, code, map[bool]string{true: " or its SIGKILL"}[j.kill > 0], tail(log, 40))
	}
	if j.after != nil {
		j.after(j)
	}
}

func anyIn(s string, subs []string) bool {
	for _, sub := range subs {
		if strings.Contains(s, sub) {
			return true
		}
	}
	return false
}

// learnManifest records what an importer acknowledged: each manifest line
// says imported or duplicate with a call number (or failed, on a full
// disk), in input order.
func (tt *torture) learnManifest(j *job, manifest string, in [][]byte) {
	t := tt.t
	m := readManifest(t, manifest)
	if len(m) > len(in) {
		t.Errorf("%s: manifest of %d lines for %d messages", j.name, len(m), len(in))
		return
	}
	for i, e := range m {
		switch e.Status {
		case "imported", "duplicate":
			d := store.DigestOf(in[i])
			if old, ok := tt.acked[e.CallNumber]; ok && old != d {
				t.Errorf("%s: manifest line %d acknowledges %s for other bytes than an earlier acknowledgement", j.name, i+1, e.CallNumber)
			}
			tt.acked[e.CallNumber] = d
			tt.freshAcks[e.CallNumber] = d
			tt.stats[e.Status]++
		case "failed":
			if e.Error == "" {
				t.Errorf("%s: manifest line %d failed without a reason", j.name, i+1)
			}
			tt.stats["failed"]++
		default:
			t.Errorf("%s: manifest line %d: status %q", j.name, i+1, e.Status)
		}
	}
}

// catalogFlags are the store flags of a command that uses the catalog.
func (tt *torture) catalogFlags() []string {
	return append(slices.Clone(tt.storeFlags), "--catalog", tt.catalogPath)
}

// verify checks the archive with every program stopped.
func (tt *torture) verify(r int) {
	t := tt.t
	ctx := t.Context()
	// A compaction killed between retiring the file and moving its copy
	// into place leaves a store every program refuses, naming the
	// command that repairs it: run it.
	if !tt.riak {
		path := filepath.Join(tt.data, "messages.db")
		if _, err := os.Stat(path); errors.Is(err, os.ErrNotExist) {
			if len(tt.acked) > 0 {
				t.Fatalf("round %d: no store, %d messages were acknowledged", r, len(tt.acked))
			}
			return
		}
		st, err := boltstore.Open(ctx, path, boltstore.Options{})
		switch {
		case errors.Is(err, boltstore.ErrInterrupted):
			tt.stats["interrupted compaction finished"]++
			p := start(t, fmt.Sprintf("resolver compact (repair) %d", r), procOptions{}, append(append([]string{"compact"}, tt.storeFlags...), "--log-format", "json")...)
			if code := p.wait(5 * time.Minute); code != 0 {
				t.Fatalf("round %d: resolver compact on the interrupted compaction exited %d:\n%s", r, code, tail(p.log(), 30))
			}
		case err != nil:
			t.Fatalf("round %d: cannot open the store: %v", r, err)
		default:
			st.Close()
		}
	}
	st, err := tt.openStore(ctx)
	if err != nil {
		t.Fatalf("round %d: cannot open the store: %v", r, err)
	}
	defer st.Close()
	b, err := st.Binding(ctx)
	if errors.Is(err, store.ErrUnbound) {
		if len(tt.acked) > 0 {
			t.Fatalf("round %d: the store is empty, %d messages were acknowledged", r, len(tt.acked))
		}
		return
	}
	if err != nil {
		t.Fatal(err)
	}
	codec, err := b.Codec()
	if err != nil {
		t.Fatal(err)
	}
	// What is checked by a request per message: all of it on bbolt; on
	// Riak, where a request is a round trip, what this round
	// acknowledged and a sample of the rest.
	sample := rand.New(rand.NewPCG(tt.seed, uint64(r)))
	check := func(fresh bool) bool { return !tt.riak || fresh || sample.IntN(20) == 0 }
	defer clear(tt.freshAcks)
	// The whole feed: each message once, its bytes its digest, the one
	// its digest names.
	feed := map[callnumber.Number]store.Digest{}
	byDigest := map[store.Digest]callnumber.Number{}
	for n, m := range storetest.Feed(t, st, 500) {
		if d := store.DigestOf(m.Raw); d != m.Digest {
			t.Errorf("round %d: the feed's %v has bytes of digest %v, recorded %v", r, n, d, m.Digest)
		}
		if other, ok := byDigest[m.Digest]; ok && other != n {
			t.Errorf("round %d: one message stored twice, as %v and %v", r, other, n)
		}
		feed[n], byDigest[m.Digest] = m.Digest, n
		if !check(false) {
			continue
		}
		if got, err := st.ByDigest(ctx, m.Digest); err != nil || got != n {
			t.Errorf("round %d: ByDigest of %v's digest = %v, %v", r, n, got, err)
		}
	}
	count, err := st.Count(ctx)
	switch short := int64(len(feed)) - count; {
	case err != nil:
		t.Errorf("round %d: Count() = %v", r, err)
	case tt.riak && short > 0 && short <= int64(tt.uncounted):
		t.Logf("round %d: Count() = %d, the feed has %d messages: short by what writers killed before counting stored", r, count, len(feed))
		tt.stats["count short"]++
	case short != 0:
		t.Errorf("round %d: Count() = %d; the feed has %d messages", r, count, len(feed))
	}
	// Everything acknowledged, byte for byte.
	lost := 0
	for cn, d := range tt.acked {
		n, _, err := codec.Parse(cn)
		if err != nil {
			t.Fatalf("round %d: acknowledged call number %q: %v", r, cn, err)
		}
		if feed[n] != d {
			t.Errorf("round %d: acknowledged %s is not in the change feed with its digest", r, cn)
			continue
		}
		if _, fresh := tt.freshAcks[cn]; !check(fresh) {
			continue
		}
		m, err := st.Get(ctx, n)
		switch {
		case err != nil:
			if lost++; lost <= 10 {
				t.Errorf("round %d: acknowledged %s is lost: %v", r, cn, err)
			}
		case m.Digest != d || store.DigestOf(m.Raw) != d:
			t.Errorf("round %d: acknowledged %s has other bytes", r, cn)
		}
	}
	// What the watcher moved out of the inbox, it had stored.
	moved, err := tt.dove.Messages(ctx, "Archived")
	if err != nil {
		t.Fatalf("round %d: cannot read the Archived folder: %v", r, err)
	}
	for _, m := range moved {
		if _, ok := byDigest[store.DigestOf(m.Raw)]; !ok {
			t.Errorf("round %d: the watcher moved UID %d out of the inbox, and the store does not have it", r, m.UID)
		}
	}
	t.Logf("round %d: %d messages stored, %d acknowledged by importers, %d moved by the watcher", r, len(feed), len(tt.acked), len(moved))
	tt.checkCatalog(r, feed)
}

// checkCatalog runs a resolver until its catalog holds as many messages
// as the store, and checks that those are the store's.
func (tt *torture) checkCatalog(r int, feed map[callnumber.Number]store.Digest) {
	t := tt.t
	res := serveResolver(t, append(tt.catalogFlags(), "--log-format", "json")...)
	eventually(t, 2*time.Minute, fmt.Sprintf("round %d: the catalog to hold the store's %d messages", r, len(feed)), func() bool {
		status, _, body, err := get(t.Context(), res.url+"/api/v1/stats")
		if err != nil || status != 200 {
			return false
		}
		return bytes.Contains(body, fmt.Appendf(nil, `"catalog":{"messages":%d,`, len(feed)))
	})
	c, err := catalog.Open(t.Context(), tt.catalogPath, catalog.Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("round %d: cannot open the catalog: %v", r, err)
	}
	missing := 0
	for n := range feed {
		if _, err := c.Message(t.Context(), n.String()); err != nil {
			if missing++; missing <= 10 {
				t.Errorf("round %d: the catalog lacks %v: %v", r, n, err)
			}
		}
	}
	c.Close()
	res.stop()
}

// drain runs the watcher until the inbox is empty and checks that every
// message delivered is archived.
func (tt *torture) drain() {
	t := tt.t
	if len(tt.delivered) == 0 {
		return
	}
	pw := writeFile(t, t.TempDir(), "imap-password", []byte(tt.dove.Password+"\n"))
	w := start(t, "watcher (drain)", procOptions{}, append(slices.Clone(tt.storeFlags), "--imap", fmt.Sprintf("imap://%s@%s/INBOX", tt.dove.User, tt.dove.Addr),
		"--password-file", pw, "--after", "move:Archived", "--log-format", "json")...)
	// Connected first: an inbox the watchers before emptied already would
	// have it stopped before it set up its handling of SIGTERM.
	eventually(t, 2*time.Minute, "the watcher to empty the inbox", func() bool {
		if w.exited() {
			t.Fatalf("the watcher exited: %v\n%s", w.err, tail(w.log(), 30))
		}
		if !strings.Contains(w.log(), `"msg":"connected"`) {
			return false
		}
		left, err := tt.dove.Messages(t.Context(), "INBOX")
		return err == nil && len(left) == 0
	})
	w.stop()
	st, err := tt.openStore(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	for d := range tt.delivered {
		if _, err := st.ByDigest(t.Context(), d); err != nil {
			t.Errorf("a message delivered to the inbox (digest %v) is not archived: %v", d, err)
		}
	}
}

// openStore opens the archive's store from the test process, beside the
// programs.
func (tt *torture) openStore(ctx context.Context) (store.Store, error) {
	if !tt.riak {
		return boltstore.Open(ctx, strings.TrimPrefix(tt.storeURL, "bolt:"), boltstore.Options{})
	}
	rest := strings.TrimPrefix(tt.storeURL, "riak://")
	nodes, archive, _ := strings.Cut(rest, "/")
	return riakstore.Open(ctx, riakstore.Options{Nodes: strings.Split(nodes, ","), Archive: archive})
}

// tmpfsDisk is the archive's disk: a tmpfs the harness fills.
type tmpfsDisk struct{ dir string }

const tmpfsRoom = 1 << 30

// mountTmpfs mounts a tmpfs (as root), or returns nil.
func mountTmpfs(t *testing.T) *tmpfsDisk {
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", fmt.Sprintf("size=%d", tmpfsRoom), "tmpfs", dir).CombinedOutput(); err != nil {
		t.Logf("cannot mount a tmpfs: %v: %s", err, bytes.TrimSpace(out))
		return nil
	}
	t.Cleanup(func() {
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v\n%s", dir, err, out)
		}
	})
	return &tmpfsDisk{dir: dir}
}

// fill shrinks the disk to what it holds and a little more.
func (d *tmpfsDisk) fill(t *testing.T) {
	var fs syscall.Statfs_t
	if err := syscall.Statfs(d.dir, &fs); err != nil {
		t.Fatal(err)
	}
	used := int64(fs.Blocks-fs.Bfree) * fs.Bsize
	d.remount(t, used+256<<10)
}

func (d *tmpfsDisk) grow(t *testing.T) { d.remount(t, tmpfsRoom) }

func (d *tmpfsDisk) remount(t *testing.T, size int64) {
	if out, err := exec.Command("mount", "-o", fmt.Sprintf("remount,size=%d", size), d.dir).CombinedOutput(); err != nil {
		t.Logf("cannot resize the tmpfs to %d bytes: %v: %s", size, err, bytes.TrimSpace(out))
	}
}
