// Package ingest turns raw messages into archived ones: it digests and
// parses them, gives each new message a call number and writes them in
// batches through a store, for the importer (mbox) and the IMAP watcher.
package ingest

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync/atomic"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store"
)

// Status is what became of one input message.
type Status string

// Statuses, as they appear in the manifest.
const (
	Imported  Status = "imported"
	Duplicate Status = "duplicate"
	Failed    Status = "failed"
	// Removed: archived and removed since, so not taken again; Number is
	// the removed message's.
	Removed Status = "removed"
)

// Prepared is a message ready to be stored: the CPU-bound part, safe in
// parallel. (The store digests it.)
type Prepared struct {
	Raw  []byte
	Meta mailmsg.Meta
	// Where says where the message came from (file:line, a path, a UID).
	Where string
	// HeaderErr is why the header could not be fully read (stored anyway).
	HeaderErr error
	// Err, when set, means the message cannot be stored: it is failed.
	Err error
}

// Prepare reads the header fields of raw that the store keeps.
func Prepare(raw []byte, where string) Prepared {
	meta, herr := mailmsg.Parse(raw)
	return Prepared{Raw: raw, Meta: meta, Where: where, HeaderErr: herr}
}

// Outcome is what became of one message.
type Outcome struct {
	// Number is the new call number, or a duplicate's stored one; 0 if failed.
	Number    callnumber.Number
	MessageID string
	Status    Status
	Err       error
	Where     string
	// OtherList is the other list a duplicate is archived in ("" for none).
	OtherList *string
}

// Options configure an Archiver.
type Options struct {
	// Store receives the messages. Required.
	Store store.Store
	// Runs issues the runs of call numbers, each lease recorded in Store
	// before its run is used. Required.
	Runs callnumber.RunSource
	// List is recorded with every message ("" for none), in canonical
	// form (store.ListName).
	List string
	// Logger receives warnings; nil discards them.
	Logger *slog.Logger
}

// Archiver stores prepared messages under fresh call numbers. It is safe
// for concurrent use.
type Archiver struct {
	st   store.Store
	gen  *callnumber.Generator
	list string
	log  *slog.Logger
	// otherLists counts duplicates found in another list, to log a few.
	otherLists atomic.Int64
}

// maxOtherListWarnings is how many duplicates in another list are logged.
const maxOtherListWarnings = 10

// NewArchiver checks opts and returns an Archiver.
func NewArchiver(opts Options) (*Archiver, error) {
	if opts.Store == nil || opts.Runs == nil {
		return nil, errors.New("ingest: Options.Store and Options.Runs are required")
	}
	if opts.List != "" && store.ListName(opts.List) == "" {
		return nil, fmt.Errorf("ingest: list name %q has no letter or digit", opts.List)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Archiver{
		st:   opts.Store,
		gen:  callnumber.NewGenerator(RecordingSource(opts.Runs, opts.Store)),
		list: store.ListName(opts.List),
		log:  log,
	}, nil
}

// Archive stores a batch. The outcomes are in the order of batch; failed
// messages (Prepared.Err) are reported and skipped. On an error nothing of
// the batch may be taken as stored; earlier calls' messages are unaffected.
func (a *Archiver) Archive(ctx context.Context, batch []Prepared) ([]Outcome, error) {
	return a.start(ctx, batch).wait()
}

// pending is a batch being stored (Archiver.start).
type pending struct {
	done chan struct{}
	out  []Outcome
	err  error
}

// wait returns the batch's outcomes once it is stored, as Archive does.
func (p *pending) wait() ([]Outcome, error) {
	<-p.done
	return p.out, p.err
}

// start gives batch's messages their call numbers, in order, and stores
// them in the background: the caller may number and start the next batch
// while this one is written, so that one batch's compression runs while
// the other holds the store's write lock. The numbers are taken before
// start returns.
func (a *Archiver) start(ctx context.Context, batch []Prepared) *pending {
	p := &pending{done: make(chan struct{}), out: make([]Outcome, len(batch))}
	msgs := make([]store.Message, 0, len(batch))
	idx := make([]int, 0, len(batch)) // position in batch of msgs[i]
	for i := range batch {
		b := &batch[i]
		p.out[i] = Outcome{MessageID: b.Meta.MessageID, Where: b.Where}
		if b.Err != nil {
			p.out[i].Status, p.out[i].Err = Failed, b.Err
			continue
		}
		if b.HeaderErr != nil {
			a.log.Warn("storing message with unreadable header as is", "where", b.Where, "err", b.HeaderErr)
		}
		n, err := a.gen.Next(ctx)
		if err != nil {
			p.out, p.err = nil, err
			close(p.done)
			return p
		}
		msgs = append(msgs, store.Message{Number: n, Raw: b.Raw, MessageID: b.Meta.MessageID, List: a.list})
		idx = append(idx, i)
	}
	if len(msgs) == 0 {
		close(p.done)
		return p
	}
	go func() {
		defer close(p.done)
		if err := a.put(ctx, msgs, idx, p.out); err != nil {
			p.out, p.err = nil, err
		}
	}()
	return p
}

// put stores msgs and fills in out, msgs[j] being out[idx[j]].
func (a *Archiver) put(ctx context.Context, msgs []store.Message, idx []int, out []Outcome) error {
	res, err := a.st.Put(ctx, msgs)
	if err != nil {
		return fmt.Errorf("cannot store batch of %d messages: %w", len(msgs), err)
	}
	if len(res) != len(msgs) {
		return fmt.Errorf("cannot store batch: store returned %d results for %d messages", len(res), len(msgs))
	}
	for j, r := range res {
		o := &out[idx[j]]
		o.Number = r.Number
		o.Status = Imported
		switch {
		case r.Removed:
			o.Status = Removed
		case r.Duplicate:
			o.Status = Duplicate
			if a.list != "" {
				if err := a.checkList(ctx, o); err != nil {
					return err
				}
			}
		}
	}
	return nil
}

// checkList notes a duplicate archived in another list than the one this
// import names: importing it again does not move it (resolver move does).
func (a *Archiver) checkList(ctx context.Context, o *Outcome) error {
	m, err := a.st.Get(ctx, o.Number)
	if errors.Is(err, store.ErrNotFound) || errors.Is(err, store.ErrRemoved) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("cannot read the list of duplicate %v: %w", o.Number, err)
	}
	// Compared in canonical form: a message archived as "Linux MIPS" (as
	// older importers kept --list) is in the list linux-mips.
	if store.ListName(m.List) == a.list {
		return nil
	}
	list := m.List
	o.OtherList = &list
	if a.otherLists.Add(1) <= maxOtherListWarnings {
		in := "no list (its List-Id header names it)"
		if list != "" {
			in = "list " + list
		}
		a.log.Warn("message already archived in "+in+", not "+a.list+": importing it again does not move it; resolver move --list "+a.list+" does",
			"callnumber", o.Number, "where", o.Where)
	}
	return nil
}

// RecordingSource returns a RunSource that records every lease src issues
// in st first, so the store can check every later write against it.
func RecordingSource(src callnumber.RunSource, st store.Store) callnumber.RunSource {
	return callnumber.RunSourceFunc(func(ctx context.Context) (callnumber.Lease, error) {
		l, err := src.NewRun(ctx)
		if err != nil {
			return callnumber.Lease{}, err
		}
		if err := st.RecordLease(ctx, l); err != nil {
			return callnumber.Lease{}, fmt.Errorf("cannot record run %d in the store: %w", l.Run, err)
		}
		return l, nil
	})
}
