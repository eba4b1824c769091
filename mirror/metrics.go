package mirror

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are a mirror's Prometheus metrics; a nil *Metrics records nothing.
type Metrics struct {
	messages, bytes, removals, errors prometheus.Counter
	lastSync                          prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "chibrary", Subsystem: "mirror", Name: name, Help: help})
	}
	m := &Metrics{
		messages: counter("messages_total", "Messages received from the origin and stored (new or already here)."),
		bytes:    counter("message_bytes_total", "Bytes of the messages received from the origin."),
		removals: counter("removals_total", "Removals received from the origin and applied."),
		errors:   counter("errors_total", "Requests to the origin that failed (retried, or fatal)."),
		lastSync: prometheus.NewGauge(prometheus.GaugeOpts{Namespace: "chibrary", Subsystem: "mirror", Name: "last_sync_timestamp_seconds",
			Help: "Unix time of the last answer of the origin applied whole (the cursor saved)."}),
	}
	reg.MustRegister(m.messages, m.bytes, m.removals, m.errors, m.lastSync)
	return m
}

func (m *Metrics) stored(messages, bytes int) {
	if m != nil {
		m.messages.Add(float64(messages))
		m.bytes.Add(float64(bytes))
	}
}

func (m *Metrics) removed() {
	if m != nil {
		m.removals.Inc()
	}
}

func (m *Metrics) failed() {
	if m != nil {
		m.errors.Inc()
	}
}

func (m *Metrics) synced(t time.Time) {
	if m != nil {
		m.lastSync.Set(float64(t.UnixNano()) / 1e9)
	}
}
