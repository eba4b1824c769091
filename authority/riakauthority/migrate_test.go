package riakauthority

import (
	"errors"
	"fmt"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/authority"
)

var testHolder = authority.Holder{Program: "test", Host: "h1", PID: 1}

// checkMoved checks that the authority of src is in the archive of opts,
// ready, with every lease of src, and issues runs from at least next.
func checkMoved(t *testing.T, src *authority.Authority, opts Options, next uint64) {
	t.Helper()
	a, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatalf("Open() after the migration = %v", err)
	}
	defer a.Close()
	if a.ID() != src.ID() || a.Scheme() != src.Scheme() || a.Key() != src.Key() {
		t.Errorf("moved authority %s %s, want %s %s and the same key", a.ID(), a.Scheme(), src.ID(), src.Scheme())
	}
	leases, err := src.Leases(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range leases {
		got, err := a.Lease(t.Context(), want.Run)
		if err != nil {
			t.Errorf("Lease(%d) = %v", want.Run, err)
			continue
		}
		if got.Nonce != want.Nonce || !got.IssuedAt.Equal(want.IssuedAt) || got.Program != want.Program || got.PID != want.PID {
			t.Errorf("Lease(%d) = %+v, want %+v", want.Run, got, want)
		}
	}
	l, err := a.Issue(t.Context(), testHolder)
	if err != nil {
		t.Fatalf("Issue() after the migration = %v", err)
	}
	if uint64(l.Run) < next {
		t.Errorf("first run issued after the migration = %d, want at least the file's next run %d", l.Run, next)
	}
}

func checkRetired(t *testing.T, src *authority.Authority, url string) {
	t.Helper()
	_, err := src.Issue(t.Context(), testHolder)
	if !errors.Is(err, authority.ErrRetired) || !strings.Contains(err.Error(), url) {
		t.Errorf("Issue() from the migrated file = %v, want ErrRetired naming %s", err, url)
	}
	if err := src.Bump(t.Context(), 1<<20); !errors.Is(err, authority.ErrRetired) {
		t.Errorf("Bump() of the migrated file = %v, want ErrRetired", err)
	}
}

// TestMigrate moves a file with leases and a bumped next run: every lease
// is copied, runs are issued from the file's next run on, the file refuses
// to issue, and a second migration finds nothing to do.
func TestMigrate(t *testing.T) {
	src := boltAt(t, 5, 20)
	opts := newArchive(t)
	url := opts.URL()
	rep, err := Migrate(t.Context(), src, url, opts)
	if err != nil {
		t.Fatalf("Migrate() = %v", err)
	}
	if rep.ID != src.ID() || rep.Leases != 5 || rep.Copied != 5 || rep.Next != 20 || rep.Done {
		t.Errorf("Migrate() = %+v, want 5 leases copied, next 20", rep)
	}
	checkRetired(t, src, url)
	checkMoved(t, src, opts, 20)
	rep, err = Migrate(t.Context(), src, url, opts)
	if err != nil || !rep.Done || rep.Copied != 0 {
		t.Errorf("Migrate() again = %+v, %v; want done, nothing copied", rep, err)
	}
	if _, err := Migrate(t.Context(), src, "riak://elsewhere:8087/x", opts); !errors.Is(err, authority.ErrRetired) {
		t.Errorf("Migrate() to another place = %v, want ErrRetired", err)
	}
}

// TestMigrateInterrupted stops the migration at each of its steps, as a
// crash would, and runs it again: meanwhile no run is issued from the
// cluster (and none created there), afterwards the authority is whole.
func TestMigrateInterrupted(t *testing.T) {
	for _, step := range []string{"claimed", "retired", "half-copied", "copied", "next"} {
		t.Run(step, func(t *testing.T) {
			src := boltAt(t, 40, 0)
			opts := newArchive(t)
			url := opts.URL()
			crash := errors.New("crash at " + step)
			_, err := migrate(t.Context(), src, url, opts, func(at string) error {
				if at == step {
					return crash
				}
				return nil
			})
			if !errors.Is(err, crash) {
				t.Fatalf("migrate() stopped at %s = %v", step, err)
			}
			for _, open := range []func() (*Authority, error){
				func() (*Authority, error) { return Open(t.Context(), opts) },
				func() (*Authority, error) { a, _, err := OpenOrCreate(t.Context(), opts); return a, err },
			} {
				a, err := open()
				if !errors.Is(err, ErrMigrating) || !strings.Contains(err.Error(), "coordinator migrate --db "+src.Path()) {
					t.Errorf("opening the authority half-moved = %v, want ErrMigrating saying to run coordinator migrate again", err)
				}
				if err == nil {
					a.Close()
				}
			}
			next := uint64(41)
			if step == "claimed" {
				// Not retired yet: the file may still issue (a program
				// run before the migration is run again).
				l, err := src.Issue(t.Context(), testHolder)
				if err != nil {
					t.Fatalf("Issue() from the file, not yet retired = %v", err)
				}
				next = uint64(l.Run) + 1
			} else {
				checkRetired(t, src, url)
			}
			if _, err := Migrate(t.Context(), src, url, opts); err != nil {
				t.Fatalf("Migrate() again after a crash at %s = %v", step, err)
			}
			checkRetired(t, src, url)
			checkMoved(t, src, opts, next)
		})
	}
}

// TestMigrateRace moves two files into one archive at once: one wins, the
// other is refused with ErrOther and its file still issues.
func TestMigrateRace(t *testing.T) {
	a, b := boltAt(t, 3, 0), boltAt(t, 4, 0)
	opts := newArchive(t)
	var wg sync.WaitGroup
	errs := make([]error, 2)
	for i, src := range []*authority.Authority{a, b} {
		wg.Go(func() { _, errs[i] = Migrate(t.Context(), src, opts.URL(), opts) })
	}
	wg.Wait()
	won := 0
	for i, src := range []*authority.Authority{a, b} {
		switch {
		case errs[i] == nil:
			won++
			checkRetired(t, src, opts.URL())
			checkMoved(t, src, opts, 0)
		case errors.Is(errs[i], ErrOther):
			if _, err := src.Issue(t.Context(), testHolder); err != nil {
				t.Errorf("Issue() from the file that lost the race = %v, want it to issue still", err)
			}
		default:
			t.Errorf("Migrate() of file %d = %v, want success or ErrOther", i, errs[i])
		}
	}
	if won != 1 {
		t.Errorf("%d migrations into one archive succeeded, want 1: %v", won, errs)
	}
}

// TestMigrateOntoAnother refuses to move a file into an archive whose
// authority is another, and leaves the file as it was.
func TestMigrateOntoAnother(t *testing.T) {
	opts := newArchive(t)
	there, _, err := OpenOrCreate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	there.Close()
	src := boltAt(t, 2, 0)
	if _, err := Migrate(t.Context(), src, opts.URL(), opts); !errors.Is(err, ErrOther) {
		t.Errorf("Migrate() onto another authority = %v, want ErrOther", err)
	}
	if _, err := src.Issue(t.Context(), testHolder); err != nil {
		t.Errorf("Issue() from the file after the refused migration = %v", err)
	}
}

// TestSearchForward: with lease records above the next key (the next key
// lags behind what other hosts issued), Issue finds the first free run.
func TestSearchForward(t *testing.T) {
	opts := newArchive(t)
	a, _, err := OpenOrCreate(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	for run := 1; run <= 30; run++ {
		v := fmt.Sprintf(`{"run":%d,"program":"elsewhere","nonce":"%032x"}`, run, run)
		if ok, err := a.create(t.Context(), a.issued, strconv.Itoa(run), []byte(v)); err != nil || !ok {
			t.Fatalf("create(%d) = %v, %v", run, ok, err)
		}
	}
	b, err := Open(t.Context(), opts)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	l, err := b.Issue(t.Context(), testHolder)
	if err != nil || l.Run != 31 {
		t.Errorf("Issue() with runs 1-30 taken = %d, %v; want 31", l.Run, err)
	}
	if l, err := a.Issue(t.Context(), testHolder); err != nil || l.Run != 32 {
		t.Errorf("Issue() of the other handle = %d, %v; want 32", l.Run, err)
	}
	if got, err := b.Lease(t.Context(), 7); err != nil || got.Program != "elsewhere" {
		t.Errorf("Lease(7) = %+v, %v", got, err)
	}
	if next, err := b.NextRun(t.Context()); err != nil || next < 32 {
		t.Errorf("NextRun() = %d, %v; want at least 32", next, err)
	}
}

// TestNotConsistent refuses a bucket type that is not strongly consistent:
// a create there is not a claim.
func TestNotConsistent(t *testing.T) {
	opts := newArchive(t)
	opts.Type = "chibrary_kv"
	if a, _, err := OpenOrCreate(t.Context(), opts); !errors.Is(err, ErrSetup) || !strings.Contains(err.Error(), "not consistent") {
		if err == nil {
			a.Close()
		}
		t.Errorf("OpenOrCreate() on bucket type chibrary_kv = %v, want ErrSetup saying it is not consistent", err)
	}
	opts.Type = "no_such_type"
	if _, err := Open(t.Context(), opts); !errors.Is(err, ErrSetup) {
		t.Errorf("Open() on a missing bucket type = %v, want ErrSetup", err)
	}
}
