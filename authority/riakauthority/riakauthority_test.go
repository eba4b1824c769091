package riakauthority

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/authoritytest"
	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/shuffle"
)

func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }

// newArchive returns the options of a new archive on the test node: every
// test has its own.
func newArchive(t testing.TB) Options {
	t.Helper()
	addr := riaktest.Addr(t)
	b := make([]byte, 6)
	rand.Read(b)
	return Options{Nodes: strings.Split(addr, ","), Archive: "auth-" + hex.EncodeToString(b)}
}

func opener(opts Options) authoritytest.Opener {
	return func(ctx context.Context, scheme shuffle.Scheme) (authority.Issuer, error) {
		o := opts
		o.Scheme = scheme
		a, _, err := OpenOrCreate(ctx, o)
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}

// boltAt makes a runs.db whose next run is next, having issued issue runs
// first (from 1).
func boltAt(t testing.TB, issue int, next uint64) *authority.Authority {
	t.Helper()
	path := filepath.Join(t.TempDir(), "runs.db")
	a, _, err := authority.OpenOrCreate(t.Context(), path, authority.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { a.Close() })
	for range issue {
		if _, err := a.Issue(t.Context(), authority.Holder{Program: "old", Host: "h0", PID: 7}); err != nil {
			t.Fatal(err)
		}
	}
	if next > 0 {
		if err := a.Bump(t.Context(), next); err != nil {
			t.Fatal(err)
		}
	}
	return a
}

// TestConformance runs the authority conformance suite on Riak.
func TestConformance(t *testing.T) {
	authoritytest.Run(t, authoritytest.Backend{
		New: func(t *testing.T) authoritytest.Opener { return opener(newArchive(t)) },
		StartAt: func(t *testing.T, next uint64) authoritytest.Opener {
			opts := newArchive(t)
			if _, err := Migrate(t.Context(), boltAt(t, 0, next), opts.URL(), opts); err != nil {
				t.Fatalf("Migrate() = %v", err)
			}
			return opener(opts)
		},
		Several: true,
	})
}
