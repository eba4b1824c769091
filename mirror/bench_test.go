package mirror_test

import (
	"compress/gzip"
	"io"
	"net/http/httptest"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
	"github.com/chibrary/chibrary/mirror"
	"github.com/chibrary/chibrary/resolver"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

// BenchmarkMirror mirrors the shared corpus (5,256 messages) from a
// resolver on loopback into a new bbolt store, both in this process: the
// origin's side and the mirror's, for a profile of the two together.
func BenchmarkMirror(b *testing.B) {
	path := testcorpus.Path(b)
	f, err := os.Open(path)
	if err != nil {
		b.Fatal(err)
	}
	zr, err := gzip.NewReader(f)
	if err != nil {
		b.Fatal(err)
	}
	st, err := boltstore.Open(b.Context(), filepath.Join(b.TempDir(), "messages.db"), boltstore.Options{})
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	a := storetest.NewAuthority(b, shuffle.Mix)
	if err := st.RecordLease(b.Context(), a.Lease(1)); err != nil {
		b.Fatal(err)
	}
	r := mbox.NewReader(zr, mbox.Options{})
	var batch []store.Message
	var size int64
	for i := 0; ; i++ {
		msg, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			b.Fatal(err)
		}
		raw := msg.Raw
		meta, _ := mailmsg.Parse(raw)
		batch = append(batch, storetest.Message(a.Number(b, 1, i), raw, meta.MessageID, "linux-mips"))
		size += int64(len(raw))
		if len(batch) == 500 {
			if _, err := st.Put(b.Context(), batch); err != nil {
				b.Fatal(err)
			}
			batch = batch[:0]
		}
	}
	if _, err := st.Put(b.Context(), batch); err != nil {
		b.Fatal(err)
	}
	f.Close()
	srv := httptest.NewServer(resolver.New(st, resolver.Options{}))
	defer srv.Close()
	b.SetBytes(size)
	cpu0 := cpuTime()
	var mirrored int64
	b.ResetTimer()
	for range b.N {
		dst, err := boltstore.Open(b.Context(), filepath.Join(b.TempDir(), "messages.db"), boltstore.Options{})
		if err != nil {
			b.Fatal(err)
		}
		m, err := mirror.New(mirror.Options{From: srv.URL, Store: dst, StatePath: filepath.Join(b.TempDir(), "state.json")})
		if err != nil {
			b.Fatal(err)
		}
		s, err := m.CatchUp(b.Context())
		if err != nil {
			b.Fatal(err)
		}
		mirrored += s.Messages
		dst.Close()
	}
	b.ReportMetric(float64(mirrored)/b.Elapsed().Seconds(), "msg/s")
	b.ReportMetric(float64((cpuTime()-cpu0).Microseconds())/float64(mirrored), "cpu-µs/msg")
}

// cpuTime is the CPU time this process has used.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}
