package imapwatch

import (
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"
)

// value reads a counter or gauge.
func value(c prometheus.Metric) float64 {
	var m dto.Metric
	if err := c.Write(&m); err != nil {
		panic(err)
	}
	if m.Counter != nil {
		return m.Counter.GetValue()
	}
	return m.Gauge.GetValue()
}

// waitValue polls a metric until it reaches want: the watcher updates its
// metrics just after the store accepted a batch, so a test that saw the
// messages in the store may still be a moment early.
func waitValue(t *testing.T, name string, c prometheus.Metric, want float64) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for value(c) != want {
		if time.Now().After(deadline) {
			t.Errorf("%s = %v after 10 s, want %v", name, value(c), want)
			return
		}
		time.Sleep(10 * time.Millisecond)
	}
}
