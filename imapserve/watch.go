package imapserve

import (
	"context"
	"log/slog"
	"sync"
	"time"

	"github.com/chibrary/chibrary/catalog"
)

// hub polls the catalog's numbers and wakes the sessions waiting for a
// change (IDLE) when they change: a message numbered in a list, or a
// number gone.
type hub struct {
	c        *catalog.Catalog
	interval time.Duration
	log      *slog.Logger

	mu      sync.Mutex
	state   string
	changed chan struct{} // closed at the next change
}

func newHub(c *catalog.Catalog, interval time.Duration, log *slog.Logger) *hub {
	return &hub{c: c, interval: interval, log: log, changed: make(chan struct{})}
}

// run polls until ctx is done.
func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	failing := false
	for {
		state, _, err := h.c.NumbersState(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				h.log.Warn("cannot read the catalog for new messages", "err", err)
			}
			failing = true
		case err == nil:
			failing = false
			h.mu.Lock()
			if state != h.state {
				h.state = state
				close(h.changed)
				h.changed = make(chan struct{})
			}
			h.mu.Unlock()
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// wait returns a channel closed at the next change the hub sees.
func (h *hub) wait() <-chan struct{} {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.changed
}

// current returns the state the hub last saw.
func (h *hub) current() string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.state
}
