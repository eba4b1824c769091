package riakstore

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"strconv"
	"strings"
	"testing"
	"time"

	riak "github.com/basho/riak-go-client"
)

func nodeCPU(t *testing.T) time.Duration {
	b, err := os.ReadFile("/tmp/perfw/riak1/.riak-node/beam.pid")
	if err != nil {
		t.Skip(err)
	}
	st, _ := os.ReadFile("/proc/" + strings.TrimSpace(string(b)) + "/stat")
	f := strings.Fields(string(st)[strings.LastIndexByte(string(st), ')')+1:])
	u, _ := strconv.ParseInt(f[11], 10, 64)
	s, _ := strconv.ParseInt(f[12], 10, 64)
	return time.Duration(u+s) * 10 * time.Millisecond
}

func TestZZCost(t *testing.T) {
	if os.Getenv("ZZCOST") == "" {
		t.Skip()
	}
	s := open(t, testOptions(t))
	ctx := context.Background()
	const n = 3000
	keys := make([]string, n)
	for i := range keys {
		var b [32]byte
		rand.Read(b[:])
		keys[i] = hex.EncodeToString(b[:])
	}
	big := make([]byte, 48<<10)
	rand.Read(big)
	measure := func(name string, count int, f func(ctx context.Context, i int) error) {
		c0, t0 := nodeCPU(t), time.Now()
		if err := parallel(ctx, count, 64, f); err != nil {
			t.Fatal(err)
		}
		c1 := nodeCPU(t)
		fmt.Printf("%-40s %5d ops %6.0f ops/s  node %.3f ms/op\n", name, count, float64(count)/time.Since(t0).Seconds(), float64((c1-c0).Microseconds())/1000/float64(count))
	}
	measure("digest get sure (absent)", n, func(ctx context.Context, i int) error {
		_, err := s.fetch(ctx, s.b.types.Once, s.b.digests, keys[i], sure)
		return err
	})
	measure("digest get quick (absent)", n, func(ctx context.Context, i int) error {
		_, err := s.fetch(ctx, s.b.types.Once, s.b.digests, keys[i]+"q", quick)
		return err
	})
	measure("digest put write-once", n, func(ctx context.Context, i int) error {
		return s.put(ctx, s.b.types.Once, s.b.digests, keys[i], &riak.Object{ContentType: "text/plain", Value: []byte("abcdefgh")}, nil)
	})
	measure("digest put kv (absent)", n, func(ctx context.Context, i int) error {
		return s.put(ctx, s.b.types.KV, s.b.digests, keys[i], &riak.Object{ContentType: "text/plain", Value: []byte("abcdefgh")}, nil)
	})
	measure("digest get sure (present)", n, func(ctx context.Context, i int) error {
		_, err := s.fetch(ctx, s.b.types.Once, s.b.digests, keys[i], sure)
		return err
	})
	measure("pack get quick (absent)", n/16, func(ctx context.Context, i int) error {
		_, err := s.fetch(ctx, s.b.types.KV, s.b.packs, keys[i], quick)
		return err
	})
	measure("pack put 48K w=all", n/16, func(ctx context.Context, i int) error {
		obj := &riak.Object{ContentType: "application/octet-stream", Value: big}
		cmd, err := s.do(ctx, func() (riak.Command, error) {
			return riak.NewStoreValueCommandBuilder().WithBucketType(s.b.types.KV).WithBucket(s.b.packs).WithKey(keys[i]).
				WithContent(obj).WithW(rAll).WithReturnHead(true).WithTimeout(s.opts.Timeout).Build()
		})
		_ = cmd
		return err
	})
	measure("ledger create (consistent)", 200, func(ctx context.Context, i int) error {
		_, err := s.create(ctx, s.b.log, "zz"+keys[i], []byte("x"))
		return err
	})
	measure("ledger get (consistent, absent)", 200, func(ctx context.Context, i int) error {
		_, err := s.fetchClaim(ctx, s.b.log, "zy"+keys[i])
		return err
	})
	measure("counter +1", 200, func(ctx context.Context, i int) error {
		_, err := s.addCount(ctx, 1)
		return err
	})
}
