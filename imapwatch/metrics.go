package imapwatch

import (
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Metrics are the watcher's Prometheus metrics; a nil *Metrics records nothing.
type Metrics struct {
	archived, duplicates, failures, errors, reconnects prometheus.Counter
	skipped, removed                                   prometheus.Counter
	lastArchived                                       prometheus.Gauge
}

// NewMetrics creates the metrics and registers them with reg.
func NewMetrics(reg prometheus.Registerer) *Metrics {
	counter := func(name, help string) prometheus.Counter {
		return prometheus.NewCounter(prometheus.CounterOpts{Namespace: "chibrary", Subsystem: "watcher", Name: name, Help: help})
	}
	m := &Metrics{
		archived:   counter("messages_archived_total", "Messages stored under a new call number."),
		duplicates: counter("messages_duplicate_total", "Messages fetched that the store already held."),
		failures:   counter("messages_failed_total", "Messages that could not be archived (left untouched in the mailbox)."),
		errors:     counter("errors_total", "Sessions that ended with a network, server or store error."),
		reconnects: counter("reconnects_total", "Connections made after the first one."),
		skipped:    counter("messages_skipped_total", "Messages not archived because they ask not to be (X-No-Archive)."),
		removed:    counter("messages_removed_total", "Messages fetched that the archive holds as removed, and does not take again."),
		lastArchived: prometheus.NewGauge(prometheus.GaugeOpts{
			Namespace: "chibrary", Subsystem: "watcher", Name: "last_archived_timestamp_seconds",
			Help: "Unix time at which a message was last stored (new or duplicate).",
		}),
	}
	reg.MustRegister(m.archived, m.duplicates, m.failures, m.errors, m.reconnects, m.lastArchived, m.skipped, m.removed)
	return m
}

func (m *Metrics) add(imported, duplicates, failed int, now time.Time) {
	if m == nil {
		return
	}
	m.archived.Add(float64(imported))
	m.duplicates.Add(float64(duplicates))
	m.failures.Add(float64(failed))
	if imported+duplicates > 0 {
		m.lastArchived.Set(float64(now.UnixNano()) / 1e9)
	}
}

func (m *Metrics) skip(skipped, removed int) {
	if m == nil {
		return
	}
	m.skipped.Add(float64(skipped))
	m.removed.Add(float64(removed))
}

func (m *Metrics) error() {
	if m != nil {
		m.errors.Inc()
	}
}

func (m *Metrics) reconnect() {
	if m != nil {
		m.reconnects.Inc()
	}
}
