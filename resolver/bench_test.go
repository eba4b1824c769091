package resolver

import (
	"context"
	"fmt"
	"io"
	"math/rand/v2"
	"net/http/httptest"
	"os"
	"os/exec"
	"slices"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
)

// writerEnv makes the test binary a writer process for BenchmarkServe:
// the value is the path of messages.db.
const writerEnv = "CHIBRARY_RESOLVER_BENCH_WRITER"

// writerRunEnv is the first run a writer process uses: every writer gets
// its own runs, as from a run authority.
const writerRunEnv = "CHIBRARY_RESOLVER_BENCH_RUN"

// writerRuns hands out first runs to writer processes.
var writerRuns atomic.Uint32

func TestMain(m *testing.M) {
	if path := os.Getenv(writerEnv); path != "" {
		os.Exit(benchWriter(path))
	}
	os.Exit(m.Run())
}

// benchWriter puts batches of 100 new 4 KiB messages into the store at
// path, under runs N, N+1, ... ($CHIBRARY_RESOLVER_BENCH_RUN) of the test authority, until its standard
// input closes; then it prints how many messages and batches it wrote.
func benchWriter(path string) int {
	ctx := context.Background()
	st, err := boltstore.Open(ctx, path, boltstore.Options{})
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer st.Close()
	codec, err := callnumber.NewCodec(shuffle.Bits, testKey)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	firstRun, err := strconv.Atoi(os.Getenv(writerRunEnv))
	if err != nil || firstRun < 2 {
		fmt.Fprintln(os.Stderr, "bad", writerRunEnv)
		return 1
	}
	stop := make(chan struct{})
	go func() { io.Copy(io.Discard, os.Stdin); close(stop) }()
	filler := strings.Repeat("All work and no play makes a dull archive.\n", 90)
	var written, batches, worst int64
	for seq := 0; ; batches++ {
		select {
		case <-stop:
			fmt.Printf("%d %d %d\n", written, batches, worst)
			return 0
		default:
		}
		msgs := make([]store.Message, 100)
		for i := range msgs {
			run := uint32(firstRun + seq/callnumber.SequencesPerRun)
			if seq%callnumber.SequencesPerRun == 0 {
				if err := st.RecordLease(ctx, testLease(run)); err != nil {
					fmt.Fprintln(os.Stderr, err)
					return 1
				}
			}
			n, _ := codec.Encode(callnumber.Fields{Run: run, Sequence: uint16(seq % callnumber.SequencesPerRun)})
			raw := fmt.Appendf(nil, "Message-ID: <w%d-%d@bench>\nSubject: writer %d\n\n%s", os.Getpid(), seq, seq, filler)
			msgs[i] = store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: fmt.Sprintf("w%d-%d@bench", os.Getpid(), seq)}
			seq++
		}
		start := time.Now()
		if _, err := st.Put(ctx, msgs); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		worst = max(worst, int64(time.Since(start)))
		written += int64(len(msgs))
	}
}

// BenchmarkServe measures GET /{callnumber}/raw and GET /{callnumber} for
// random call numbers of the shared corpus, from 32 concurrent clients on
// loopback, with nothing writing and while another process puts batches
// of 100 messages into the same bolt file.
func BenchmarkServe(b *testing.B) {
	msgs := readCorpus(b, 0)
	a := newArchive(b, boltstore.Options{})
	var numbers []callnumber.Number
	for start := 0; start < len(msgs); start += 500 {
		batch := make([]store.Message, 0, 500)
		for _, raw := range msgs[start:min(start+500, len(msgs))] {
			batch = append(batch, a.message(b, raw, "linux-mips"))
		}
		res, err := a.st.Put(context.Background(), batch)
		if err != nil {
			b.Fatal(err)
		}
		for _, r := range res {
			if !r.Duplicate {
				numbers = append(numbers, r.Number)
			}
		}
	}
	srv := httptest.NewServer(New(a.st, Options{}))
	defer srv.Close()
	b.Logf("%d messages in %s", len(numbers), a.path)

	for _, writer := range []bool{false, true} {
		for _, route := range []string{"raw", "page"} {
			name := route
			if writer {
				name += "/writer"
			}
			b.Run(name, func(b *testing.B) {
				var w *benchWriterProc
				if writer {
					w = startBenchWriter(b, a.path)
				}
				suffix := ""
				if route == "raw" {
					suffix = "/raw"
				}
				lat, failed, elapsed := load(b, srv.URL, numbers, suffix, 32)
				if writer {
					w.stop(b, elapsed, true)
				}
				reportLatency(b, lat, failed, elapsed, true)
			})
		}
	}
}

// load sends b.N requests for random numbers (and suffix) from clients
// goroutines, as loadURLs does.
func load(b *testing.B, base string, numbers []callnumber.Number, suffix string, clients int) ([]time.Duration, int64, time.Duration) {
	return loadURLs(b, base, func(r *rand.Rand) string {
		return "/" + numbers[r.IntN(len(numbers))].String() + suffix
	}, clients)
}

// reportLatency fails the benchmark if any request failed, and reports
// the requests per second and the median and 99th percentile latencies
// (and the slowest, with withMax) of lat, which it sorts.
func reportLatency(b *testing.B, lat []time.Duration, failed int64, elapsed time.Duration, withMax bool) {
	b.Helper()
	if failed > 0 {
		b.Errorf("%d of %d requests failed", failed, len(lat))
	}
	slices.Sort(lat)
	b.ReportMetric(float64(len(lat))/elapsed.Seconds(), "req/s")
	b.ReportMetric(float64(lat[len(lat)/2])/1e6, "p50-ms")
	b.ReportMetric(float64(lat[len(lat)*99/100])/1e6, "p99-ms")
	if withMax {
		b.ReportMetric(float64(lat[len(lat)-1])/1e6, "max-ms")
	}
}

// benchWriterProc is a writer process (benchWriter) putting messages into
// the store while a benchmark reads it.
type benchWriterProc struct {
	cmd   *exec.Cmd
	out   strings.Builder
	stdin io.WriteCloser
}

// startBenchWriter starts a writer process on the bolt file at path and
// gives it a moment to start writing.
func startBenchWriter(b *testing.B, path string) *benchWriterProc {
	b.Helper()
	w := &benchWriterProc{cmd: exec.Command(os.Args[0], "-test.run=^$")}
	w.cmd.Env = append(os.Environ(), writerEnv+"="+path,
		writerRunEnv+"="+strconv.Itoa(int(2+1000*writerRuns.Add(1))))
	w.cmd.Stdout, w.cmd.Stderr = &w.out, os.Stderr
	var err error
	if w.stdin, err = w.cmd.StdinPipe(); err != nil {
		b.Fatal(err)
	}
	if err := w.cmd.Start(); err != nil {
		b.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	return w
}

// stop stops the writer and reports its messages per second over elapsed
// (and its slowest batch, with worstBatch).
func (w *benchWriterProc) stop(b *testing.B, elapsed time.Duration, worstBatch bool) {
	b.Helper()
	w.stdin.Close()
	if err := w.cmd.Wait(); err != nil {
		b.Fatalf("writer: %v", err)
	}
	var written, batches, worst int64
	fmt.Sscan(w.out.String(), &written, &batches, &worst)
	b.ReportMetric(float64(written)/elapsed.Seconds(), "writer-msg/s")
	if worstBatch {
		b.ReportMetric(float64(worst)/1e6, "writer-worst-batch-ms")
	}
}
