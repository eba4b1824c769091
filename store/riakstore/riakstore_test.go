package riakstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"os"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/internal/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }

// testArchive returns a new archive name: every test has its own, so no
// test needs a wiped node.
func testArchive() string {
	b := make([]byte, 6)
	rand.Read(b)
	return "test-" + hex.EncodeToString(b)
}

// testOptions are the options of a new archive on the test node.
func testOptions(t testing.TB) Options {
	return Options{Nodes: strings.Split(riaktest.Addr(t), ","), Archive: testArchive()}
}

// TestConformance runs the store suite against a real Riak node, each
// subtest in its own archive.
func TestConformance(t *testing.T) {
	riaktest.Addr(t)
	storetest.Run(t, func(t *testing.T) storetest.Opener {
		opts := testOptions(t)
		return func(ctx context.Context) (store.Store, error) { return Open(ctx, opts) }
	})
}

func TestOpenNoNodes(t *testing.T) {
	if s, err := Open(t.Context(), Options{}); err == nil {
		s.Close()
		t.Errorf("Open(no nodes) = nil error, want one")
	}
}
