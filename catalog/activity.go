package catalog

// Activity: how many people wrote to a list, and in how many
// threads, over a span of days (a list's page says it of the last 30, as
// HyperKitty does). The posters table counts by month, which cannot say
// 30 days; the messages of the span are read by the index on (list, date)
// instead, at most maxActivityMessages of them, so that a busy list costs a
// page no more than that.

import (
	"context"
	"time"
)

// maxActivityMessages bounds the messages one Activity call reads.
const maxActivityMessages = 2000

// Activity is what a list saw over a span of days (Activity).
type Activity struct {
	// Posters is how many people wrote (by address, case aside; by name
	// without one), Threads in how many threads, Messages how many
	// messages.
	Posters  int `json:"posters"`
	Threads  int `json:"threads"`
	Messages int `json:"messages"`
	// AtLeast says the span had as many messages as Activity reads, or
	// more: the counts are of its newest maxActivityMessages messages, and
	// the true ones may be higher.
	AtLeast bool `json:"at_least,omitempty"`
}

// Activity returns the activity of list among the messages dated from since
// (included) to until (excluded).
func (c *Catalog) Activity(ctx context.Context, list string, since, until time.Time) (Activity, error) {
	return c.activity(ctx, list, since, until, maxActivityMessages)
}

// activity is Activity reading at most limit messages.
func (c *Catalog) activity(ctx context.Context, list string, since, until time.Time, limit int) (Activity, error) {
	var a Activity
	err := c.queryRow(ctx, `SELECT count(DISTINCT `+sqlPosterKey("m")+`), count(DISTINCT m.thread), count(*)
		FROM (SELECT from_addr, from_name, thread FROM messages WHERE list = ? AND date >= ? AND date < ? ORDER BY date DESC LIMIT ?) m`,
		list, since.Unix(), until.Unix(), limit).Scan(&a.Posters, &a.Threads, &a.Messages)
	if err != nil {
		return Activity{}, c.readErr("the recent activity of "+list, err)
	}
	a.AtLeast = a.Messages >= limit
	return a, nil
}
