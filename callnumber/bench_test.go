package callnumber

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/rs/xid"
	"github.com/sony/sonyflake"
)

// The benchmarks below compare the generator with a bare atomic counter
// and two well-known ID generators, in the same run, so that the ratios
// are visible. Results that are strings are kept local and used (their
// length checked) so that escape analysis keeps them on the stack, as a
// caller that writes the number into a URL or a log line would.

var sink uint64

func BenchmarkAtomicAdd(b *testing.B) {
	b.ReportAllocs()
	var n atomic.Uint64
	for b.Loop() {
		n.Add(1)
	}
	sink = n.Load()
}

func BenchmarkGeneratorNext(b *testing.B) {
	for _, scheme := range schemes {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			// One run is 16,384 numbers: start far from the top so that
			// the source never runs dry, and the refills (which allocate
			// a run record) are amortised as they are in production.
			g := NewGenerator(newRunSource(scheme, 1))
			ctx := context.Background()
			var acc Number
			for b.Loop() {
				n, err := g.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				acc ^= n
			}
			sink = uint64(acc)
		})
	}
}

func BenchmarkGeneratorNextString(b *testing.B) {
	for _, scheme := range schemes {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			g := NewGenerator(newRunSource(scheme, 1))
			ctx := context.Background()
			for b.Loop() {
				n, err := g.Next(ctx)
				if err != nil {
					b.Fatal(err)
				}
				if s := n.String(); len(s) != Length {
					b.Fatalf("String() has %d characters", len(s))
				}
			}
		})
	}
}

func BenchmarkGeneratorNextParallel(b *testing.B) {
	for _, scheme := range schemes {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			g := NewGenerator(newRunSource(scheme, 1))
			ctx := context.Background()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					if _, err := g.Next(ctx); err != nil {
						b.Error(err)
						return
					}
				}
			})
		})
	}
}

func BenchmarkNumberString(b *testing.B) {
	b.ReportAllocs()
	n := Number(1<<Bits - 1)
	for b.Loop() {
		if s := n.String(); len(s) != Length {
			b.Fatalf("String() has %d characters", len(s))
		}
		n -= 0x9e3779b9
	}
}

func BenchmarkNumberAppendText(b *testing.B) {
	b.ReportAllocs()
	buf := make([]byte, 0, 64)
	n := Number(1<<Bits - 1)
	for b.Loop() {
		buf, _ = n.AppendText(buf[:0])
		n -= 0x9e3779b9
	}
	sink = uint64(len(buf))
}

func BenchmarkParse(b *testing.B) {
	b.ReportAllocs()
	const s = "3kTMd2xB"
	for b.Loop() {
		n, err := Parse(s)
		if err != nil {
			b.Fatal(err)
		}
		sink = uint64(n)
	}
}

func BenchmarkCodecParse(b *testing.B) {
	for _, scheme := range schemes {
		b.Run(string(scheme), func(b *testing.B) {
			b.ReportAllocs()
			c := mustCodec(b, scheme)
			n, err := c.Encode(Fields{Run: 123456, Sequence: 789})
			if err != nil {
				b.Fatal(err)
			}
			s := n.String()
			for b.Loop() {
				_, f, err := c.Parse(s)
				if err != nil {
					b.Fatal(err)
				}
				sink = uint64(f.Sequence)
			}
		})
	}
}

func BenchmarkXID(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if s := xid.New().String(); len(s) != 20 {
			b.Fatalf("xid = %q", s)
		}
	}
}

// BenchmarkSonyflake measures NextID as it is: sonyflake hands out 256 IDs
// per 10 ms tick and sleeps until the next tick when they are used up, so
// its throughput is capped at 25,600 IDs per second per generator.
func BenchmarkSonyflake(b *testing.B) {
	b.ReportAllocs()
	sf, err := sonyflake.New(sonyflake.Settings{
		MachineID: func() (uint16, error) { return 1, nil },
	})
	if err != nil {
		b.Fatal(err)
	}
	for b.Loop() {
		id, err := sf.NextID()
		if err != nil {
			b.Fatal(err)
		}
		sink = id
	}
}
