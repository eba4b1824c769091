package mirror_test

import (
	"crypto/rand"
	"encoding/hex"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/riakstore"
)

func TestMain(m *testing.M) { os.Exit(riaktest.Main(m)) }

// TestMirrorIntoRiak: a mirror whose store is a Riak archive gets the
// origin's messages, leases and removals, a removal made before it
// started (a number it never stored) included.
func TestMirrorIntoRiak(t *testing.T) {
	addr := riaktest.Addr(t)
	o := newOrigin(t, 60)
	gone := o.msgs[7]
	if _, err := o.st.Remove(t.Context(), gone.Number, "before the mirror started"); err != nil {
		t.Fatal(err)
	}
	b := make([]byte, 6)
	rand.Read(b)
	st, err := riakstore.Open(t.Context(), riakstore.Options{Nodes: strings.Split(addr, ","), Archive: "mirror-" + hex.EncodeToString(b)})
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	m := newMirror(t, o.srv.URL, st, filepath.Join(t.TempDir(), "s.json"), nil)
	if _, err := m.CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	later := o.msgs[20]
	if _, err := o.st.Remove(t.Context(), later.Number, "after"); err != nil {
		t.Fatal(err)
	}
	if _, err := m.CatchUp(t.Context()); err != nil {
		t.Fatal(err)
	}
	same(t, o, st, gone, later)
	if res, err := st.Put(t.Context(), []store.Message{gone}); err != nil || !res[0].Removed || res[0].Number != gone.Number {
		t.Errorf("Put(a message removed before the mirror started) = %v, %v; want it removed", res, err)
	}
	if _, err := st.Get(t.Context(), later.Number); !errors.Is(err, store.ErrRemoved) {
		t.Errorf("Get(removed after) = %v", err)
	}
}
