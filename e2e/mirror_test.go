package e2e

import (
	"bytes"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/mirror"
)

// startMirror follows from into the data directory data.
func startMirror(t *testing.T, name, from, data string, more ...string) *proc {
	t.Helper()
	return start(t, name, procOptions{}, append([]string{"--from", from, "--data", data, "--log-format", "json", "--wait", "5s"}, more...)...)
}

// rawOf fetches a message's raw bytes from a resolver.
func rawOf(t *testing.T, r *resolverServer, cn string) (int, []byte) {
	t.Helper()
	status, _, body, err := get(t.Context(), r.url+"/"+cn+"/raw")
	if err != nil {
		t.Fatalf("GET %s/%s/raw: %v", r.url, cn, err)
	}
	return status, body
}

// identical checks that every call number answers the same bytes on
// every resolver.
func identical(t *testing.T, cns []string, rs ...*resolverServer) {
	t.Helper()
	var mu sync.Mutex
	failures := 0
	jobs := make(chan string)
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for cn := range jobs {
				status0, want := rawOf(t, rs[0], cn)
				for _, r := range rs[1:] {
					status, got := rawOf(t, r, cn)
					if status != status0 || !bytes.Equal(got, want) {
						mu.Lock()
						if failures++; failures <= 5 {
							t.Errorf("%s: %s answers %d (%d bytes), %s answers %d (%d bytes)", cn, rs[0].url, status0, len(want), r.url, status, len(got))
						}
						mu.Unlock()
					}
				}
			}
		})
	}
	for _, cn := range cns {
		jobs <- cn
	}
	close(jobs)
	wg.Wait()
}

// waitFor polls a resolver's raw answer for cn until it has status.
func waitFor(t *testing.T, r *resolverServer, cn string, status int, within time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	eventually(t, within, fmt.Sprintf("%s to answer %d for %s", r.url, status, cn), func() bool {
		got, _ := rawOf(t, r, cn)
		return got == status
	})
	return time.Since(start)
}

// TestMirror: an origin, a mirror of it and a mirror of the mirror, run
// as the programs a site would run. The mirror is killed mid-way and run
// again; every call number then answers byte for byte the same on all
// three; a message stored at the origin reaches both, a removal too;
// a hostile origin is refused; and the origin, its disk lost, is restored
// from the mirror and its run authority's backup with every URL.
func TestMirror(t *testing.T) {
	needPrograms(t)
	dir := t.TempDir()
	origin, a, b := filepath.Join(dir, "origin"), filepath.Join(dir, "a"), filepath.Join(dir, "b")
	msgs := mail(t, 3000)
	manifest := filepath.Join(dir, "m.jsonl")
	imp := start(t, "importer", procOptions{}, "--data", origin, "--manifest", manifest, "--list", "linux-mips", "--log-format", "json", writeFile(t, dir, "in.mbox", mboxOf(t, msgs)))
	if code := imp.wait(5 * time.Minute); code != 0 {
		t.Fatalf("importer exited %d", code)
	}
	var cns []string
	for _, e := range readManifest(t, manifest) {
		if e.Status == "imported" {
			cns = append(cns, e.CallNumber)
		}
	}
	backup := filepath.Join(dir, "runs.backup")
	if code := start(t, "coordinator backup", procOptions{}, "backup", "--db", filepath.Join(origin, "runs.db"), backup).wait(time.Minute); code != 0 {
		t.Fatalf("coordinator backup exited %d", code)
	}
	ro := startResolver(t, origin)

	// The mirror, killed once it has saved a cursor, then run again.
	ma := startMirror(t, "mirror a", ro.url, a)
	state := mirror.StatePathFor(a, ro.url)
	eventually(t, 2*time.Minute, "the mirror to save a cursor", func() bool {
		s, err := mirror.ReadState(state)
		return err == nil && s.Cursor != ""
	})
	ma.kill()
	ma = startMirror(t, "mirror a again", ro.url, a)
	ra := startResolver(t, a)
	eventually(t, 3*time.Minute, "the mirror to catch up", func() bool {
		n, err := ra.stats(t.Context())
		return err == nil && n == int64(len(cns))
	})
	mb := startMirror(t, "mirror b", ra.url, b)
	eventually(t, 2*time.Minute, "the archive b to exist", func() bool {
		_, err := os.Stat(filepath.Join(b, "messages.db"))
		return err == nil
	})
	rb := startResolver(t, b)
	eventually(t, 3*time.Minute, "the mirror of the mirror to catch up", func() bool {
		n, err := rb.stats(t.Context())
		return err == nil && n == int64(len(cns))
	})
	identical(t, cns, ro, ra, rb)

	// A new message at the origin reaches both; a removal too.
	newMsg := []byte("From: Ann <ann@example.org>\nSubject: stored after the mirrors started\nMessage-ID: <late@mirror.e2e.test>\nDate: Wed, 3 Jan 2024 10:00:00 +0000\n\nLate news.\n")
	lm := filepath.Join(dir, "late.jsonl")
	late := start(t, "importer late", procOptions{}, "--data", origin, "--manifest", lm, writeFile(t, dir, "late.eml", newMsg))
	if code := late.wait(time.Minute); code != 0 {
		t.Fatalf("importer late exited %d", code)
	}
	lateCN := readManifest(t, lm)[0].CallNumber
	t.Logf("a message stored at the origin: served by the mirror %v later, by the mirror of the mirror %v later",
		waitFor(t, ra, lateCN, 200, time.Minute).Round(time.Millisecond), waitFor(t, rb, lateCN, 200, time.Minute).Round(time.Millisecond))
	gone := cns[17]
	if code := start(t, "resolver remove", procOptions{}, "remove", "--data", origin, "--reason", "at the author's request", gone).wait(time.Minute); code != 0 {
		t.Fatalf("resolver remove exited %d", code)
	}
	da := waitFor(t, ra, gone, http.StatusGone, 10*time.Second)
	db := waitFor(t, rb, gone, http.StatusGone, 10*time.Second)
	t.Logf("a removal at the origin: on the mirror %v later, on the mirror of the mirror %v later", da.Round(time.Millisecond), db.Round(time.Millisecond))
	cns = append(cns, lateCN)
	identical(t, cns, ro, ra, rb)
	ma.stop()
	mb.stop()

	// A hostile origin, and an archive that is not the origin's.
	t.Run("hostile", func(t *testing.T) {
		u, _ := url.Parse(ro.url)
		proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			r.Header.Del("Accept-Encoding")
			resp, err := http.Get(u.JoinPath(r.URL.Path).String() + "?" + r.URL.RawQuery)
			if err != nil {
				http.Error(w, err.Error(), http.StatusBadGateway)
				return
			}
			defer resp.Body.Close()
			var body bytes.Buffer
			body.ReadFrom(resp.Body)
			w.Header().Set("Content-Type", resp.Header.Get("Content-Type"))
			w.WriteHeader(resp.StatusCode)
			// One byte of one message changed, its digest not.
			w.Write(bytes.Replace(body.Bytes(), []byte("Subject: "), []byte("Subject:_"), 1))
		}))
		defer proxy.Close()
		h := filepath.Join(dir, "hostile")
		p := start(t, "mirror hostile", procOptions{}, "--from", proxy.URL, "--data", h, "--once")
		if code := p.wait(time.Minute); code != 1 || !strings.Contains(p.log(), "digest") {
			t.Errorf("a mirror of a hostile origin exited %d, want 1 naming the digest:\n%s", code, tail(p.log(), 10))
		}
		// A mirror into an archive of another authority: refused, as a
		// lease from elsewhere is (a number held with other bytes:
		// mirror.TestHostileOrigin).
		other := start(t, "importer elsewhere", procOptions{}, "--data", filepath.Join(dir, "elsewhere"), writeFile(t, dir, "x.eml", newMsg))
		if code := other.wait(time.Minute); code != 0 {
			t.Fatalf("importer elsewhere exited %d", code)
		}
		p2 := start(t, "mirror into another archive", procOptions{}, "--from", ro.url, "--data", filepath.Join(dir, "elsewhere"), "--once")
		if code := p2.wait(time.Minute); code != 1 || !strings.Contains(p2.log(), "authority") {
			t.Errorf("a mirror into an archive of another authority exited %d, want 1 naming the authority:\n%s", code, tail(p2.log(), 10))
		}
	})

	// The origin's disk is lost: a new origin from the mirror and the
	// run authority's backup, with every URL.
	ro.stop()
	ra.stop()
	rb.stop()
	if err := os.RemoveAll(origin); err != nil {
		t.Fatal(err)
	}
	ra = startResolver(t, a)
	restored := filepath.Join(dir, "restored")
	if err := os.MkdirAll(restored, 0o755); err != nil {
		t.Fatal(err)
	}
	bk, err := os.ReadFile(backup)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restored, "runs.db"), bk, 0o600); err != nil {
		t.Fatal(err)
	}
	p := start(t, "mirror restore", procOptions{}, "--from", ra.url, "--data", restored, "--once")
	if code := p.wait(3 * time.Minute); code != 0 {
		t.Fatalf("mirror --once into the new origin exited %d", code)
	}
	m := regexp.MustCompile(`highest run (\d+)`).FindStringSubmatch(p.log())
	if m == nil {
		t.Fatalf("mirror --once did not say the highest run:\n%s", tail(p.log(), 5))
	}
	highest, _ := strconv.Atoi(m[1])
	if code := start(t, "coordinator bump", procOptions{}, "bump", "--db", filepath.Join(restored, "runs.db"), "--to", strconv.Itoa(highest+1)).wait(time.Minute); code != 0 {
		t.Fatalf("coordinator bump exited %d", code)
	}
	rr := startResolver(t, restored)
	identical(t, cns, ra, rr)
	if status, _ := rawOf(t, rr, gone); status != http.StatusGone {
		t.Errorf("the removed message on the restored origin answers %d, want 410", status)
	}
	// The restored origin takes new mail, numbered by its authority.
	nm := filepath.Join(dir, "new.jsonl")
	newer := []byte("From: Bob <bob@example.org>\nSubject: after the restore\nMessage-ID: <restored@mirror.e2e.test>\n\nStill here.\n")
	if code := start(t, "importer restored", procOptions{}, "--data", restored, "--manifest", nm, writeFile(t, dir, "newer.eml", newer)).wait(time.Minute); code != 0 {
		t.Fatalf("importing into the restored origin exited %d", code)
	}
	e := readManifest(t, nm)[0]
	if status, body := rawOf(t, rr, e.CallNumber); e.Status != "imported" || status != 200 || !bytes.Equal(body, newer) {
		t.Errorf("a message imported into the restored origin: %+v, answers %d", e, status)
	}
}
