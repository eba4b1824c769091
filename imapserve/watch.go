package imapserve

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"github.com/chibrary/chibrary/catalog"
	"github.com/chibrary/chibrary/catalog/keeper"
)

// hub polls the catalog's numbers and wakes the sessions waiting for a
// change (IDLE) when they change: a message numbered in a list, a number
// gone, or the catalog swapped for another (rebuilt).
type hub struct {
	k        *keeper.Keeper
	interval time.Duration
	log      *slog.Logger

	// last is the catalog polled last, and swaps counts the times it was
	// another than the time before: part of the state, since a rebuilt
	// catalog may have numbers of the same totals.
	last  *catalog.Catalog
	swaps int

	mu      sync.Mutex
	state   string
	changed chan struct{} // closed at the next change
}

func newHub(k *keeper.Keeper, interval time.Duration, log *slog.Logger) *hub {
	return &hub{k: k, interval: interval, log: log, changed: make(chan struct{})}
}

// poll reads the state of the catalog served now; "" when there is none.
func (h *hub) poll(ctx context.Context) (string, error) {
	c, release := h.k.Current()
	defer release()
	if c == nil {
		return "", nil
	}
	state, _, err := c.NumbersState(ctx)
	if err != nil {
		h.k.Notice(c, err)
		return "", err
	}
	if c != h.last {
		h.last = c
		h.swaps++
	}
	return fmt.Sprintf("%d/%s", h.swaps, state), nil
}

// run polls until ctx is done.
func (h *hub) run(ctx context.Context) {
	t := time.NewTicker(h.interval)
	defer t.Stop()
	failing := false
	for {
		state, err := h.poll(ctx)
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				h.log.Warn("cannot read the catalog for new messages", "err", err)
			}
			failing = true
		case err == nil && state != "":
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
