package authority

import (
	"bytes"
	"context"
	"encoding/hex"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	bolt "go.etcd.io/bbolt"
)

var testHolder = Holder{Program: "test", Host: "h1", PID: 42, Note: "unit test"}

func newAuthority(t testing.TB, opts Options) (*Authority, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	a, created, err := OpenOrCreate(context.Background(), path, opts)
	if err != nil || !created {
		t.Fatalf("OpenOrCreate(%s) = created %v, %v; want a new authority", path, created, err)
	}
	t.Cleanup(func() { a.Close() })
	return a, path
}

// edit changes a closed database directly through bbolt, as a damaged or
// hand-made file would be.
func edit(t *testing.T, path string, fn func(tx *bolt.Tx) error) {
	t.Helper()
	db, err := bolt.Open(path, 0o600, nil)
	if err != nil {
		t.Fatalf("bolt.Open(%s) = %v", path, err)
	}
	defer db.Close()
	if err := db.Update(fn); err != nil {
		t.Fatalf("editing %s: %v", path, err)
	}
}

func TestCreate(t *testing.T) {
	for _, tc := range []struct {
		name   string
		scheme shuffle.Scheme
		want   shuffle.Scheme
	}{
		{"default is mix", "", shuffle.Mix},
		{"bits", shuffle.Bits, shuffle.Bits},
		{"mix", shuffle.Mix, shuffle.Mix},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, path := newAuthority(t, Options{Scheme: tc.scheme})
			if got := a.Scheme(); got != tc.want {
				t.Errorf("Scheme() = %q, want %q", got, tc.want)
			}
			if id, err := hex.DecodeString(a.ID()); err != nil || len(id) != 16 {
				t.Errorf("ID() = %q, want 32 hex digits", a.ID())
			}
			if a.Key() == (shuffle.Key{}) {
				t.Errorf("Key() is all zero")
			}
			next, err := a.NextRun(context.Background())
			if err != nil || next != 1 {
				t.Errorf("NextRun() = %d, %v, want 1, nil", next, err)
			}
			fi, err := os.Stat(path)
			if err != nil {
				t.Fatal(err)
			}
			if got := fi.Mode().Perm(); got != FileMode {
				t.Errorf("mode of %s = %v, want %v", path, got, os.FileMode(FileMode))
			}
			id, key := a.ID(), a.Key()
			a.Close()

			// Reopened, it is the same authority, whatever the scheme asked for.
			b, err := Open(context.Background(), path, Options{Scheme: shuffle.Bits})
			if err != nil {
				t.Fatalf("Open = %v", err)
			}
			defer b.Close()
			if b.ID() != id || b.Key() != key || b.Scheme() != tc.want {
				t.Errorf("reopened as %s/%s, want %s/%s, same key", b.ID(), b.Scheme(), id, tc.want)
			}
			ents, _ := os.ReadDir(filepath.Dir(path))
			if len(ents) != 1 {
				t.Errorf("directory holds %d files after create, want only runs.db", len(ents))
			}
		})
	}
}

// TestCreateRefuses: a create never replaces a file (OpenOrCreate then
// opens what another process created first), and a bad scheme leaves no
// file behind.
func TestCreateRefuses(t *testing.T) {
	_, path := newAuthority(t, Options{})
	if err := create(path, Options{}); !errors.Is(err, errExists) {
		t.Errorf("create over an existing file = %v, want errExists", err)
	}
	bad := filepath.Join(t.TempDir(), "runs.db")
	if _, _, err := OpenOrCreate(context.Background(), bad, Options{Scheme: "rot13"}); !errors.Is(err, shuffle.ErrScheme) {
		t.Errorf("OpenOrCreate with scheme rot13 = %v, want shuffle.ErrScheme", err)
	}
	if _, err := os.Stat(bad); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("failed OpenOrCreate left %s behind (%v)", bad, err)
	}
}

func TestOpenOrCreate(t *testing.T) {
	path := filepath.Join(t.TempDir(), "runs.db")
	a, created, err := OpenOrCreate(context.Background(), path, Options{})
	if err != nil || !created {
		t.Fatalf("OpenOrCreate(new) = %v, created %v, want nil, true", err, created)
	}
	id := a.ID()
	a.Close()
	b, created, err := OpenOrCreate(context.Background(), path, Options{})
	if err != nil || created {
		t.Fatalf("OpenOrCreate(existing) = %v, created %v, want nil, false", err, created)
	}
	defer b.Close()
	if b.ID() != id {
		t.Errorf("ID = %s, want %s", b.ID(), id)
	}
}

// An existing authority keeps its scheme: asking OpenOrCreate for another
// one is an error naming the scheme it has, and changes nothing.
func TestOpenOrCreateOtherScheme(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	a, _, err := OpenOrCreate(ctx, path, Options{Scheme: shuffle.Bits})
	if err != nil {
		t.Fatal(err)
	}
	a.Close()
	_, _, err = OpenOrCreate(ctx, path, Options{Scheme: shuffle.Mix})
	if !errors.Is(err, ErrScheme) || !strings.Contains(err.Error(), "has scheme bits, not mix") {
		t.Fatalf("OpenOrCreate(bits authority, mix) = %v, want %v naming both schemes", err, ErrScheme)
	}
	for _, scheme := range []shuffle.Scheme{"", shuffle.Bits} {
		b, created, err := OpenOrCreate(ctx, path, Options{Scheme: scheme})
		if err != nil || created || b.Scheme() != shuffle.Bits {
			t.Fatalf("OpenOrCreate(bits authority, %q) = %v, created %v; want it opened", scheme, err, created)
		}
		b.Close()
	}
}

func TestIssue(t *testing.T) {
	ctx := context.Background()
	a, path := newAuthority(t, Options{Scheme: shuffle.Mix})
	var leases []callnumber.Lease
	for want := uint32(1); want <= 3; want++ {
		l, err := a.Issue(ctx, testHolder)
		if err != nil {
			t.Fatalf("Issue = %v", err)
		}
		if l.Run != want {
			t.Errorf("Issue().Run = %d, want %d", l.Run, want)
		}
		if err := l.Validate(); err != nil {
			t.Errorf("lease %d: Validate() = %v", l.Run, err)
		}
		if l.Authority != a.ID() || l.Scheme != shuffle.Mix || l.Key != a.Key() || l.Version != 0 {
			t.Errorf("lease %d names %s/%s, want %s/mix", l.Run, l.Authority, l.Scheme, a.ID())
		}
		if l.Program != testHolder.Program || l.Host != testHolder.Host || l.PID != testHolder.PID || l.Note != testHolder.Note {
			t.Errorf("lease %d holder = %q %q %d %q, want %+v", l.Run, l.Program, l.Host, l.PID, l.Note, testHolder)
		}
		if len(l.Nonce) != 32 || l.IssuedAt.IsZero() {
			t.Errorf("lease %d: nonce %q issued at %v, want 32 hex digits and a time", l.Run, l.Nonce, l.IssuedAt)
		}
		leases = append(leases, l)
	}
	if leases[0].Nonce == leases[1].Nonce {
		t.Errorf("two leases share nonce %s", leases[0].Nonce)
	}
	a.Close()

	// Every lease returned was committed: a reopened database has them all.
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	for _, want := range leases {
		got, err := b.Lease(ctx, want.Run)
		if err != nil {
			t.Fatalf("Lease(%d) = %v", want.Run, err)
		}
		if !got.IssuedAt.Equal(want.IssuedAt) {
			t.Errorf("Lease(%d).IssuedAt = %v, want %v", want.Run, got.IssuedAt, want.IssuedAt)
		}
		got.IssuedAt = want.IssuedAt
		if got != want {
			t.Errorf("Lease(%d) = %+v, want %+v", want.Run, got, want)
		}
	}
	if _, err := b.Lease(ctx, 4); !errors.Is(err, ErrNotIssued) {
		t.Errorf("Lease(4) = %v, want ErrNotIssued", err)
	}
	if l, err := b.Issue(ctx, testHolder); err != nil || l.Run != 4 {
		t.Errorf("Issue after reopen = %d, %v, want 4, nil", l.Run, err)
	}
}

func TestIssueConcurrent(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts Options
	}{
		{"shared commits", Options{}},
		{"one commit per issue", Options{OneCommitPerIssue: true}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, _ := newAuthority(t, tc.opts)
			const workers, each = 32, 20
			runs := make(chan uint32, workers*each)
			var wg sync.WaitGroup
			for range workers {
				wg.Go(func() {
					for range each {
						l, err := a.Issue(context.Background(), testHolder)
						if err != nil {
							t.Errorf("Issue = %v", err)
							return
						}
						runs <- l.Run
					}
				})
			}
			wg.Wait()
			close(runs)
			seen := map[uint32]bool{}
			for r := range runs {
				if seen[r] {
					t.Errorf("run %d issued twice", r)
				}
				seen[r] = true
			}
			// Nothing is skipped when nothing fails: exactly 1..n.
			for r := uint32(1); r <= workers*each; r++ {
				if !seen[r] {
					t.Errorf("run %d not issued", r)
				}
			}
		})
	}
}

func TestIssueCancelled(t *testing.T) {
	a, _ := newAuthority(t, Options{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := a.Issue(ctx, testHolder); !errors.Is(err, context.Canceled) {
		t.Errorf("Issue(cancelled) = %v, want context.Canceled", err)
	}
	if next, _ := a.NextRun(context.Background()); next != 1 {
		t.Errorf("NextRun after a cancelled issue = %d, want 1", next)
	}
}

// TestIssueRefusesRecordedRun plants a lease at the next run behind the
// authority's back: Issue must refuse rather than overwrite it.
func TestIssueRefusesRecordedRun(t *testing.T) {
	a, _ := newAuthority(t, Options{})
	if err := a.db.Update(func(tx *bolt.Tx) error {
		return tx.Bucket(bucketLeases).Put(runKey(1), []byte(`{"run":1,"nonce":"planted"}`))
	}); err != nil {
		t.Fatal(err)
	}
	if _, err := a.Issue(context.Background(), testHolder); !errors.Is(err, ErrInconsistent) {
		t.Errorf("Issue over a recorded run = %v, want ErrInconsistent", err)
	}
	l, err := a.Lease(context.Background(), 1)
	if err != nil || l.Nonce != "planted" {
		t.Errorf("Lease(1) = %+v, %v, want the planted lease kept", l, err)
	}
}

func TestOpenRefuses(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		make func(t *testing.T, path string)
		want error
	}{
		{"missing file", func(t *testing.T, path string) {}, fs.ErrNotExist},
		{"empty file", func(t *testing.T, path string) {
			writeFile(t, path, nil)
		}, ErrNotAuthority},
		{"text file", func(t *testing.T, path string) {
			writeFile(t, path, []byte("this is not a database\n"))
		}, ErrNotAuthority},
		{"page of garbage", func(t *testing.T, path string) {
			writeFile(t, path, bytes.Repeat([]byte{0xA5}, 16384))
		}, ErrNotAuthority},
		{"another bbolt database", func(t *testing.T, path string) {
			edit(t, path, func(tx *bolt.Tx) error {
				b, err := tx.CreateBucket([]byte("messages"))
				if err != nil {
					return err
				}
				return b.Put([]byte("k"), []byte("v"))
			})
		}, ErrNotAuthority},
		{"next run equal to a recorded run", func(t *testing.T, path string) {
			issue(t, path, 3)
			setNext(t, path, 3)
		}, ErrInconsistent},
		{"next run below a recorded run", func(t *testing.T, path string) {
			issue(t, path, 3)
			setNext(t, path, 2)
		}, ErrInconsistent},
		{"lease planted above the next run", func(t *testing.T, path string) {
			issue(t, path, 1)
			edit(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket(bucketLeases).Put(runKey(1000), []byte(`{}`))
			})
		}, ErrInconsistent},
		{"next run 0", func(t *testing.T, path string) {
			issue(t, path, 0)
			setNext(t, path, 0)
		}, ErrInconsistent},
		{"next run beyond 2^30", func(t *testing.T, path string) {
			issue(t, path, 0)
			setNext(t, path, callnumber.MaxRun+2)
		}, ErrInconsistent},
		{"bad scheme", func(t *testing.T, path string) {
			issue(t, path, 0)
			edit(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(keyScheme, []byte("rot13"))
			})
		}, ErrInconsistent},
		{"short key", func(t *testing.T, path string) {
			issue(t, path, 0)
			edit(t, path, func(tx *bolt.Tx) error {
				return tx.Bucket(bucketMeta).Put(keyKey, []byte("short"))
			})
		}, ErrInconsistent},
	} {
		t.Run(tc.name, func(t *testing.T) {
			path := filepath.Join(t.TempDir(), "runs.db")
			tc.make(t, path)
			before, _ := os.ReadFile(path)
			a, err := Open(ctx, path, Options{LockTimeout: 1})
			if err == nil {
				a.Close()
			}
			if !errors.Is(err, tc.want) {
				t.Fatalf("Open = %v, want %v", err, tc.want)
			}
			t.Logf("Open: %v", err)
			if errors.Is(tc.want, ErrNotAuthority) && !bytes.Contains([]byte(err.Error()), []byte("not a run authority database")) {
				t.Errorf("Open error %q does not say the file is not an authority database", err)
			}
			if after, _ := os.ReadFile(path); !bytes.Equal(before, after) && !errors.Is(tc.want, ErrInconsistent) {
				t.Errorf("a refused Open changed the file")
			}
		})
	}
}

func writeFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

// issue creates an authority at path and issues n runs.
func issue(t *testing.T, path string, n int) {
	t.Helper()
	a, _, err := OpenOrCreate(context.Background(), path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for range n {
		if _, err := a.Issue(context.Background(), testHolder); err != nil {
			t.Fatal(err)
		}
	}
}

func setNext(t *testing.T, path string, next uint64) {
	t.Helper()
	edit(t, path, func(tx *bolt.Tx) error {
		return tx.Bucket(bucketMeta).Put(keyNextRun, encodeNext(next))
	})
}

func TestExhaustion(t *testing.T) {
	ctx := context.Background()
	path := filepath.Join(t.TempDir(), "runs.db")
	issue(t, path, 2)
	setNext(t, path, callnumber.MaxRun)
	a, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	l, err := a.Issue(ctx, testHolder)
	if err != nil || l.Run != callnumber.MaxRun {
		t.Fatalf("Issue at 2^30-1 = %d, %v, want %d, nil", l.Run, err, callnumber.MaxRun)
	}
	for range 2 {
		_, err = a.Issue(ctx, testHolder)
		if !errors.Is(err, ErrExhausted) {
			t.Fatalf("Issue after 2^30-1 = %v, want ErrExhausted", err)
		}
	}
	if !bytes.Contains([]byte(err.Error()), []byte("run space of this call-number version is exhausted")) {
		t.Errorf("error %q does not say the run space is exhausted", err)
	}
	a.Close()
	// An exhausted authority still opens (its leases can be read), and
	// still refuses.
	b, err := Open(ctx, path, Options{})
	if err != nil {
		t.Fatalf("Open exhausted = %v", err)
	}
	defer b.Close()
	if _, err := b.Issue(ctx, testHolder); !errors.Is(err, ErrExhausted) {
		t.Errorf("Issue after reopen = %v, want ErrExhausted", err)
	}
	if _, err := b.Lease(ctx, callnumber.MaxRun); err != nil {
		t.Errorf("Lease(2^30-1) = %v", err)
	}
}

func TestBump(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t, Options{})
	if _, err := a.Issue(ctx, testHolder); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name     string
		to       uint64
		want     error
		wantNext uint64
	}{
		{"forwards", 1000, nil, 1000},
		{"same", 1000, nil, 1000},
		{"backwards", 999, ErrBackwards, 1000},
		{"zero", 0, callnumber.ErrRun, 1000},
		{"beyond the run space", callnumber.MaxRun + 2, callnumber.ErrRun, 1000},
		{"retire the run space", callnumber.MaxRun + 1, nil, callnumber.MaxRun + 1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := a.Bump(ctx, tc.to); !errors.Is(err, tc.want) {
				t.Errorf("Bump(%d) = %v, want %v", tc.to, err, tc.want)
			}
			if next, _ := a.NextRun(ctx); next != tc.wantNext {
				t.Errorf("NextRun() = %d, want %d", next, tc.wantNext)
			}
		})
	}
	if _, err := a.Issue(ctx, testHolder); !errors.Is(err, ErrExhausted) {
		t.Errorf("Issue after retiring = %v, want ErrExhausted", err)
	}
}

func TestBumpThenIssue(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t, Options{})
	if err := a.Bump(ctx, 500); err != nil {
		t.Fatal(err)
	}
	if l, err := a.Issue(ctx, testHolder); err != nil || l.Run != 500 {
		t.Errorf("Issue after Bump(500) = %d, %v, want 500, nil", l.Run, err)
	}
}

func TestLocked(t *testing.T) {
	a, path := newAuthority(t, Options{})
	_, err := Open(context.Background(), path, Options{LockTimeout: 1})
	if !errors.Is(err, ErrLocked) {
		t.Errorf("second Open = %v, want ErrLocked", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := Open(ctx, path, Options{}); !errors.Is(err, context.Canceled) {
		t.Errorf("Open with a cancelled context on a held file = %v, want context.Canceled", err)
	}
	if err := a.Check(context.Background()); err != nil {
		t.Errorf("Check() = %v", err)
	}
}

func TestClosed(t *testing.T) {
	a, _ := newAuthority(t, Options{})
	a.Close()
	if _, err := a.Issue(context.Background(), testHolder); !errors.Is(err, ErrClosed) {
		t.Errorf("Issue after Close = %v, want ErrClosed", err)
	}
	if err := a.Check(context.Background()); !errors.Is(err, ErrClosed) {
		t.Errorf("Check after Close = %v, want ErrClosed", err)
	}
}

func TestWriteTo(t *testing.T) {
	ctx := context.Background()
	a, _ := newAuthority(t, Options{Scheme: shuffle.Mix})
	var want []callnumber.Lease
	for range 5 {
		l, err := a.Issue(ctx, testHolder)
		if err != nil {
			t.Fatal(err)
		}
		want = append(want, l)
	}
	var buf bytes.Buffer
	var size int64
	n, err := a.Backup(&buf, func(s int64) { size = s })
	if err != nil || n != int64(buf.Len()) {
		t.Fatalf("Backup = %d, %v; wrote %d", n, err, buf.Len())
	}
	if size != n {
		t.Errorf("Backup announced %d bytes, wrote %d", size, n)
	}
	// The authority keeps working while and after it is copied.
	if _, err := a.Issue(ctx, testHolder); err != nil {
		t.Fatal(err)
	}
	copyPath := filepath.Join(t.TempDir(), "backup.db")
	writeFile(t, copyPath, buf.Bytes())
	b, err := Open(ctx, copyPath, Options{ReadOnly: true})
	if err != nil {
		t.Fatalf("Open(backup) = %v", err)
	}
	defer b.Close()
	if b.ID() != a.ID() || b.Key() != a.Key() || b.Scheme() != a.Scheme() {
		t.Errorf("backup is authority %s/%s, want %s/%s", b.ID(), b.Scheme(), a.ID(), a.Scheme())
	}
	for _, l := range want {
		got, err := b.Lease(ctx, l.Run)
		if err != nil || got.Nonce != l.Nonce {
			t.Errorf("backup Lease(%d) = %v, %v, want nonce %s", l.Run, got.Nonce, err, l.Nonce)
		}
	}
	if next, _ := b.NextRun(ctx); next != 6 {
		t.Errorf("backup NextRun() = %d, want 6", next)
	}
}

func TestParseRun(t *testing.T) {
	for _, tc := range []struct {
		in   string
		want uint32
		err  error
	}{
		{"1", 1, nil},
		{"1073741823", callnumber.MaxRun, nil},
		{"0", 0, callnumber.ErrRunZero},
		{"1073741824", 0, callnumber.ErrRun},
		{"", 0, callnumber.ErrRun},
		{"-1", 0, callnumber.ErrRun},
		{"+1", 0, callnumber.ErrRun},
		{"1e3", 0, callnumber.ErrRun},
		{" 1", 0, callnumber.ErrRun},
		{"0x10", 0, callnumber.ErrRun},
		{"99999999999", 0, callnumber.ErrRun},
	} {
		got, err := ParseRun(tc.in)
		if got != tc.want || !errors.Is(err, tc.err) {
			t.Errorf("ParseRun(%q) = %d, %v, want %d, %v", tc.in, got, err, tc.want, tc.err)
		}
	}
}

func FuzzParseRun(f *testing.F) {
	for _, s := range []string{"1", "0", "1073741823", "1073741824", "007", "-5", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		run, err := ParseRun(s)
		if err != nil {
			return
		}
		if run == 0 || run > callnumber.MaxRun {
			t.Fatalf("ParseRun(%q) = %d, outside 1..2^30-1", s, run)
		}
		if again, err := ParseRun(fmtRun(run)); err != nil || again != run {
			t.Fatalf("ParseRun(%q) = %d, %v after ParseRun(%q) = %d", fmtRun(run), again, err, s, run)
		}
	})
}
