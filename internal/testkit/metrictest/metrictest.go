// Package metrictest reads a server's Prometheus metrics in tests: the
// open-connection gauges and accept counters by which the tests of cut
// connections see that every place comes back.
package metrictest

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Value reads the gauge or counter name of reg, of the series whose one
// label has the value label ("" for a metric without labels); a counter
// of a label not yet seen reads 0.
func Value(t testing.TB, reg *prometheus.Registry, name, label string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if label != "" && (len(m.GetLabel()) != 1 || m.GetLabel()[0].GetValue() != label) {
				continue
			}
			if m.GetGauge() != nil {
				return m.GetGauge().GetValue()
			}
			return m.GetCounter().GetValue()
		}
		return 0
	}
	t.Fatalf("no metric %s", name)
	return 0
}

// Await waits up to 10 s for get to return want, and returns what it
// returned last.
func Await(get func() float64, want float64) float64 {
	deadline := time.Now().Add(10 * time.Second)
	for {
		got := get()
		if got == want || time.Now().After(deadline) {
			return got
		}
		time.Sleep(10 * time.Millisecond)
	}
}

// Settled waits until every connection of the server counted under
// namespace (NAMESPACE_connections_total and _open, package netserve)
// that was dialed, dialed in all, was taken in or refused, then until
// none is open; it returns how many are open then.
func Settled(t testing.TB, reg *prometheus.Registry, namespace string, dialed float64) float64 {
	t.Helper()
	taken := func() float64 {
		return Value(t, reg, namespace+"_connections_total", "accepted") + Value(t, reg, namespace+"_connections_total", "refused")
	}
	if got := Await(taken, dialed); got != dialed {
		t.Fatalf("%v connections taken in or refused, want %v", got, dialed)
	}
	return Await(func() float64 { return Value(t, reg, namespace+"_connections_open", "") }, 0)
}
