package main

import (
	"bufio"
	"bytes"
	"compress/flate"
	"compress/gzip"
	"flag"
	"fmt"
	"os"
	"strconv"
	"strings"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"
)

var beamPid = flag.String("pid", "", "")

func beamCPU() float64 {
	b, _ := os.ReadFile("/proc/" + *beamPid + "/stat")
	f := strings.Fields(string(b)[strings.LastIndex(string(b), ")")+2:])
	u, _ := strconv.ParseFloat(f[11], 64)
	s, _ := strconv.ParseFloat(f[12], 64)
	return (u + s) / 100
}

func main() {
	addr := flag.String("addr", "", "")
	flag.Parse()
	f, _ := os.Open("/work/shared/corpus/linux-mips-sample.mbox.gz")
	zr, _ := gzip.NewReader(f)
	var msgs [][]byte
	sc := bufio.NewScanner(zr)
	sc.Buffer(nil, 64<<20)
	var cur bytes.Buffer
	for sc.Scan() {
		l := sc.Bytes()
		if bytes.HasPrefix(l, []byte("From ")) && cur.Len() > 0 {
			msgs = append(msgs, bytes.Clone(cur.Bytes()))
			cur.Reset()
			continue
		}
		cur.Write(l)
		cur.WriteByte('\n')
	}
	var packs, zpacks [][]byte
	for i := 0; i+16 <= len(msgs); i += 16 {
		p := bytes.Join(msgs[i:i+16], nil)
		packs = append(packs, p)
		var b bytes.Buffer
		w, _ := flate.NewWriter(&b, flate.BestSpeed)
		w.Write(p)
		w.Close()
		zpacks = append(zpacks, b.Bytes())
	}
	tot, ztot := 0, 0
	for i := range packs {
		tot += len(packs[i])
		ztot += len(zpacks[i])
	}
	fmt.Printf("%d packs, %d bytes, compressed %d (%.0f%%)\n", len(packs), tot, ztot, 100*float64(ztot)/float64(tot))
	node, _ := riak.NewNode(&riak.NodeOptions{RemoteAddress: *addr, MaxConnections: 512})
	cl, _ := riak.NewCluster(&riak.ClusterOptions{Nodes: []*riak.Node{node}, ExecutionAttempts: 1})
	cl.Start()
	defer cl.Stop()
	run := func(name string, vals [][]byte) {
		var wg sync.WaitGroup
		ch := make(chan int)
		start := time.Now()
		c0 := beamCPU()
		for range 32 {
			wg.Go(func() {
				for i := range ch {
					o := &riak.Object{ContentType: "application/octet-stream", Value: vals[i]}
					cmd, _ := riak.NewStoreValueCommandBuilder().WithBucketType("chibrary_kv").WithBucket("probe-" + name + strconv.Itoa(int(start.UnixNano()))).WithKey(strconv.Itoa(i)).WithContent(o).Build()
					if err := cl.Execute(cmd); err != nil {
						fmt.Println(err)
					}
				}
			})
		}
		for i := range vals {
			ch <- i
		}
		close(ch)
		wg.Wait()
		fmt.Printf("%-8s %.0f puts/s, riak cpu %.2f ms/put = %.3f ms/msg\n", name, float64(len(vals))/time.Since(start).Seconds(), (beamCPU()-c0)*1000/float64(len(vals)), (beamCPU()-c0)*1000/float64(len(vals))/16)
	}
	run("plain", packs)
	run("flate", zpacks)
	run("plain", packs)
	run("flate", zpacks)
}
