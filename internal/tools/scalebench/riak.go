package main

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/internal/testkit/scalecorpus"
)

// riakCluster is where the Riak stage imports: nodes this tool started
// from the test kit (stopped at the end), or the nodes --riak names.
type riakCluster struct {
	addrs []string
	nodes []*riaktest.Node // nil for nodes this tool did not start
}

// parseRiak reads --riak: "" (no Riak stage), "kit" (start a cluster
// from the test kit), or the protocol buffers addresses of running nodes.
func parseRiak(v string) (kit bool, addrs []string, err error) {
	switch v {
	case "":
		return false, nil, nil
	case "kit":
		return true, nil, nil
	}
	for _, a := range strings.Split(v, ",") {
		host, port, err := net.SplitHostPort(a)
		if err != nil || host == "" || port == "" {
			return false, nil, fmt.Errorf("--riak %q: want kit or host:port[,host:port...] (the nodes' protocol buffers addresses)", v)
		}
		addrs = append(addrs, a)
	}
	return false, addrs, nil
}

// startRiak starts the cluster of the Riak stage, or names the nodes
// --riak gave; nil when there is no Riak stage (said why on stdout when
// the kit is missing).
func startRiak(c config) (*riakCluster, error) {
	kit, addrs, err := parseRiak(c.riak)
	if err != nil || (!kit && addrs == nil) {
		return nil, err
	}
	if !kit {
		return &riakCluster{addrs: addrs}, nil
	}
	script, err := riaktest.Kit()
	if err != nil {
		fmt.Printf("Riak stage skipped: no Riak test kit (%v); put it in ../shared/riak or pass --riak host:8087\n", err)
		return nil, nil
	}
	start := time.Now()
	nodes, err := riaktest.StartCluster(script, c.riakNodes, func(format string, args ...any) {
		fmt.Fprintf(os.Stderr, "scalebench: "+format+"\n", args...)
	})
	if err != nil {
		return nil, err
	}
	rc := &riakCluster{nodes: nodes}
	// Leveled compresses every value on receipt unless told to do it on
	// journal compaction; the store's values are compressed already.
	// docs/riak.md recommends on_compact: measure the cluster as set up.
	for _, n := range nodes {
		if err := n.Configure(map[string]string{"leveled.compression_point": "on_compact"}); err != nil {
			rc.stop()
			return nil, err
		}
		rc.addrs = append(rc.addrs, n.PB)
	}
	fmt.Printf("Riak: a cluster of %d nodes from the test kit (leveled.compression_point = on_compact), ready in %.0f s: %s\n",
		len(nodes), time.Since(start).Seconds(), strings.Join(rc.addrs, ","))
	return rc, nil
}

func (rc *riakCluster) stop() {
	for _, n := range rc.nodes {
		if err := n.Stop(); err != nil {
			fmt.Fprintln(os.Stderr, "scalebench:", err)
		}
		os.RemoveAll(n.Dir)
	}
}

// cpu is the nodes' CPU time so far, when this tool started them.
func (rc *riakCluster) cpu() time.Duration {
	var sum time.Duration
	for _, n := range rc.nodes {
		if d, err := n.CPU(); err == nil {
			sum += d
		}
	}
	return sum
}

// measureRiak imports the lists of res into a fresh archive on the
// cluster, list by list, then builds a catalog from it with resolver
// reindex, and prints each figure beside bbolt's (from fig, this size's
// figures so far), adding its own to fig.
func measureRiak(ctx context.Context, c config, rc *riakCluster, dir string, size int, res scalecorpus.Result, fig *figures) error {
	importer, resolver := filepath.Join(c.bin, "importer"), filepath.Join(c.bin, "resolver")
	// A fresh archive on the cluster each time: names are never reused.
	name := fmt.Sprintf("scale%d-%d", size, time.Now().Unix())
	url := "riak://" + strings.Join(rc.addrs, ",") + "/" + name
	data := filepath.Join(dir, fmt.Sprintf("riak-%d", size)) // its runs.db and catalog
	os.RemoveAll(data)
	if !c.keep {
		defer os.RemoveAll(data)
	}
	fmt.Printf("\nRiak, %d nodes, archive %s:\n", len(rc.addrs), name)
	fmt.Printf("%-20s %9s %8s %8s %10s %10s %9s\n", "import", "messages", "wall s", "msg/s", "CPU ms/msg", "nodes' CPU", "peak RSS")
	var total, totalWall, maxRSS float64
	var cpu, nodesCPU time.Duration
	for i, l := range res.Lists {
		n0 := rc.cpu()
		r, err := runChild(ctx, importer, "--data", data, "--store", url, "--list", l.Name, "--log-level", "error", l.Path)
		if err != nil {
			return fmt.Errorf("importer %s into Riak: %w", l.Name, err)
		}
		n, err := importedCount(r.stderr)
		if err != nil {
			return fmt.Errorf("importer %s into Riak: %w", l.Name, err)
		}
		nodes := rc.cpu() - n0
		nodesCol := "-"
		if rc.nodes != nil {
			nodesCol = fmt.Sprintf("%.3f", msPer(nodes, n))
		}
		rate := float64(n) / r.wall.Seconds()
		fmt.Printf("%-20s %9d %8.1f %8.0f %10.3f %10s %6.0f MB\n", l.Name, n, r.wall.Seconds(), rate, msPer(r.cpu, n), nodesCol, r.rss/1e6)
		if i == 0 {
			fig.add("riak import: first list", "msg/s", rate)
		}
		if i == len(res.Lists)-1 {
			fig.add("riak import: last list", "msg/s", rate)
		}
		total += float64(n)
		totalWall += r.wall.Seconds()
		maxRSS = max(maxRSS, r.rss)
		cpu += r.cpu
		nodesCPU += nodes
	}
	fig.add("riak import: all lists", "msg/s", total/totalWall)
	fig.add("riak import: importer CPU", "ms/msg", msPer(cpu, int(total)))
	if rc.nodes != nil {
		fig.add("riak import: nodes' CPU", "ms/msg", msPer(nodesCPU, int(total)))
	}
	fig.add("riak import: peak RSS, largest", "MB", maxRSS/1e6)

	catalog := filepath.Join(data, "catalog.db")
	n0 := rc.cpu()
	r, err := runChild(ctx, resolver, "reindex", "--store", url, "--catalog", catalog, "--log-level", "error")
	if err != nil {
		return fmt.Errorf("resolver reindex from Riak: %w", err)
	}
	nodes := rc.cpu() - n0
	fmt.Printf("%-20s %9.0f msg/s in %.1f s, %.3f ms of CPU a message (the nodes' %s), peak RSS %.0f MB\n", "resolver reindex", total/r.wall.Seconds(), r.wall.Seconds(),
		msPer(r.cpu, int(total)), map[bool]string{true: fmt.Sprintf("%.3f", msPer(nodes, int(total))), false: "not measured"}[rc.nodes != nil], r.rss/1e6)
	fig.add("riak reindex", "msg/s", total/r.wall.Seconds())
	fig.add("riak reindex: time", "s", r.wall.Seconds())
	fig.add("riak reindex: CPU", "ms/msg", msPer(r.cpu, int(total)))
	fig.add("riak reindex: peak RSS", "MB", r.rss/1e6)

	fmt.Println("Riak beside bbolt, this size:")
	for _, p := range [][3]string{
		{"riak import: all lists", "import: all lists", "msg/s"},
		{"riak import: peak RSS, largest", "import: peak RSS, largest", "MB"},
		{"riak reindex", "reindex", "msg/s"},
		{"riak reindex: CPU", "reindex: CPU", "ms/msg"},
	} {
		rv, ok1 := fig.get(p[0], p[2])
		bv, ok2 := fig.get(p[1], p[2])
		if !ok1 || !ok2 || bv == 0 {
			return fmt.Errorf("internal: no figures %q and %q in %s", p[0], p[1], p[2])
		}
		fmt.Printf("  %-30s Riak %10s, bbolt %10s: %.2fx\n", strings.TrimPrefix(p[0], "riak ")+" ("+p[2]+")", num(rv), num(bv), rv/bv)
	}
	return nil
}

// get returns the value of the figure of that name and unit.
func (f figures) get(name, unit string) (float64, bool) {
	for _, x := range f {
		if x.name == name && x.unit == unit {
			return x.value, true
		}
	}
	return 0, false
}
