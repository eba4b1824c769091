// Package compress compresses a store's message records and runs the life
// of its dictionaries: when one is trained, where it is kept, which one new
// records are written with, and how a newer one takes over. Backends keep
// the dictionaries through a small hook, Dictionaries; the record layouts
// are in store/internal/record.
//
// # Why a dictionary, and its life
//
// Every message is compressed on its own (zstd), so that one message is
// read and decompressed alone. A mailing-list message is short and most
// of it is header lines its neighbours share; zstd alone cannot know them,
// a dictionary trained on the archive's own messages does (on the
// linux-mips sample: messages under 16 KiB shrink to 0.39 of their size
// with one, 0.46 without; README has the figures).
//
//   - When: not on an empty archive. Until the store holds TrainAt
//     messages (store.Compression; 1,000 by default) records are
//     compressed without a dictionary. The Put that brings the store to
//     TrainAt trains the first one from the newest stored messages (up to
//     store.Compression.SampleBytes of them) before it returns, so that a
//     bulk import uses it from its next batch on. A list's mail changes over the years
//     (its server, its headers, its people), and a dictionary learnt from
//     the newest messages serves the next ones best: on the corpus, the
//     messages under 16 KiB of its last fifth compress to 0.35 of their
//     size with a dictionary of the 8 MB before them, 0.42 with one of
//     the archive's first 2 MB (0.48 without). So when the store has
//     grown eight times, or by RetrainEvery messages, since the current
//     dictionary was trained, a writer trains a newer one in the
//     background from as many of the newest; records keep using
//     the current one meanwhile.
//   - Where: in the store, for every backend (Dictionaries): a
//     dictionary is kept under its ID, which is a hash of its bytes
//     (record.DictID); the current one is named by a small record
//     (record.Current) beside it.
//   - How a record names it: by that ID, in its header. Dictionaries are
//     immutable and never deleted, so a newer dictionary changes nothing
//     for older records, and a dictionary read back is checked against
//     its ID before it decodes anything.
//   - Two writers training at once (two importers starting on one new
//     archive): each saves its own dictionary under its own ID, and each
//     makes its own current; the last one to do so wins. Records written
//     with the other one name it and stay readable. Harmless, at the
//     cost of one redundant training. A writer rereads the current
//     dictionary at least every RefreshEvery, so every writer moves to
//     the winner soon after.
//
// Compression runs before a backend takes any lock (bolt's file lock),
// on all CPUs, like the digest check; every compressed record is decoded
// again and compared before it is written (record.Codec.Append).
//
// # A backend's part
//
// The bolt store (store/boltstore: dicts.go, and Put, Get and the change
// feed) is the example; the Riak store (store/riakstore: dicts.go, put.go,
// read.go) the second. A backend:
//
//   - implements Dictionaries over its own storage (bolt: a bucket of
//     dictionaries and a meta key; Riak: a bucket of dictionaries keyed
//     by the ID in hex, written with if_none_match, and beside them the
//     key "current", whose siblings resolve to the latest Trained);
//   - creates a Compressor with New in Open and closes it in Close;
//   - in Put, after checking digests and before any lock or request that
//     writes, gets the records with Encode (skipping messages it knows are
//     stored), writes them as its values, and after the batch is durable
//     calls Stored with the store's message count;
//   - reads every value with Decode, passing a LoadFunc that reads a
//     dictionary where the backend stands (bolt: in the same read
//     transaction); record.DecodeMessage is for records whose raw bytes
//     are kept elsewhere;
//   - lets its conformance test reach beneath the interface
//     (storetest.Tamperer), so that the suite's tests of old records,
//     missing dictionaries and damaged records run against it.
package compress

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Dictionaries is the hook a backend implements to keep the compression
// dictionaries of its store. Several goroutines and processes may call
// these at once.
type Dictionaries interface {
	// LoadDict returns the bytes of dictionary id, or an error wrapping
	// store.ErrNotFound if the store has none under id.
	LoadDict(ctx context.Context, id record.DictID) ([]byte, error)
	// SaveDict stores dictionary id, in the form b a store keeps it in
	// (record.StoredDict: compressed), unless a dictionary is stored under
	// id already: dictionaries are immutable, and never deleted, since
	// every record that names one needs it. LoadDict returns that form,
	// which record.CheckDictionary reads.
	SaveDict(ctx context.Context, id record.DictID, b []byte) error
	// CurrentDict returns the store's current dictionary, and false if it
	// has none yet.
	CurrentDict(ctx context.Context) (record.Current, bool, error)
	// SetCurrentDict makes c the current dictionary. c.ID is saved
	// already. Of concurrent calls, the last one wins.
	SetCurrentDict(ctx context.Context, c record.Current) error
	// Sample returns the raw bytes of recently stored messages, newest
	// first, to train a dictionary on: at most n of them, skipping
	// messages over record.MaxSample, and stopping once their sizes add
	// up to maxBytes.
	Sample(ctx context.Context, n int, maxBytes int64) ([][]byte, error)
}

// Defaults and bounds of the life cycle (see the package doc).
const (
	// DefaultTrainAt is the default store.Compression.TrainAt.
	DefaultTrainAt = 1000
	// DefaultRetrain is the default store.Compression.Retrain: how many
	// times a store grows before a newer dictionary is trained (at 8,000
	// messages), and RetrainEvery the most it grows before one (18,000,
	// 28,000...). Not sooner by default: between the first thousand
	// messages of a list and its next few thousand little changes, a
	// training costs a tenth to a third of a second of CPU, and a
	// compaction trains dictionaries of each era anyway. A Riak store,
	// never compacted, retrains as it doubles (store/riakstore).
	DefaultRetrain = 8
	RetrainEvery   = 10000
	// DefaultSampleBytes is the default store.Compression.SampleBytes,
	// which bounds every training (a writer waits for the first one):
	// about a quarter of a second on one core. Twice as much took twice
	// the CPU (about half a second beside a Riak node on 2 cores) for
	// records 0.1% smaller. Half as much makes the bolt store's S2
	// records larger (S2 uses the last 64 KiB of the dictionary's
	// content, which more samples choose better), zstd's records no
	// larger (store/riakstore uses 1 MiB; docs/performance.md).
	DefaultSampleBytes = 2 << 20
	// MaxSamples bounds the number of messages a dictionary learns from.
	MaxSamples = 4000
	// RefreshEvery is how often a writer rereads the current dictionary.
	RefreshEvery = time.Second
)

// Compressor encodes and decodes the message records of one store. It is
// safe for concurrent use. Close it with the store: it waits for a
// background training.
type Compressor struct {
	dicts   Dictionaries
	off     bool
	trainAt int64 // <= 0: never
	retrain int64 // >= 2
	sample  int64 // bytes a training learns from
	level   record.Level
	log     *slog.Logger
	codec   record.Codec

	mu       sync.Mutex
	cache    map[record.DictID]*record.Dictionary
	cur      *record.Dictionary // nil: none
	curInfo  record.Current
	checked  time.Time // when cur was last read from the store
	failedAt int64     // store size at the last failed training

	training atomic.Bool
	ctx      context.Context
	cancel   context.CancelFunc
	wg       sync.WaitGroup
}

// New returns a Compressor for the store whose dictionaries d keeps.
func New(d Dictionaries, opts store.Compression, log *slog.Logger) *Compressor {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	trainAt := opts.TrainAt
	if trainAt == 0 {
		trainAt = DefaultTrainAt
	}
	retrain := opts.Retrain
	if retrain == 0 {
		retrain = DefaultRetrain
	}
	sample := opts.SampleBytes
	if sample <= 0 {
		sample = DefaultSampleBytes
	}
	ctx, cancel := context.WithCancel(context.Background())
	return &Compressor{
		dicts: d, off: opts.Off, trainAt: trainAt, retrain: max(retrain, 2), sample: sample, level: recordLevel(opts.Level), log: log,
		cache: make(map[record.DictID]*record.Dictionary),
		ctx:   ctx, cancel: cancel,
	}
}

// Off reports whether records are written uncompressed.
func (c *Compressor) Off() bool { return c.off }

// Close stops a background training (it is tried again by the next
// writer's Put) and waits for it to end.
func (c *Compressor) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// Encode returns the record of every message of msgs whose skip entry is
// false (skip may be nil), nil for the others, compressed on all CPUs.
// added is the time the records say the messages were added.
func (c *Compressor) Encode(ctx context.Context, msgs []store.Message, skip []bool, added time.Time) ([][]byte, error) {
	out := make([][]byte, len(msgs))
	var d *record.Dictionary
	if !c.off {
		var err error
		if d, err = c.current(ctx); err != nil {
			return nil, err
		}
	}
	errs := make([]error, len(msgs))
	var next atomic.Int64
	var wg sync.WaitGroup
	for range min(runtime.GOMAXPROCS(0), len(msgs)) {
		wg.Go(func() {
			for {
				i := int(next.Add(1)) - 1
				if i >= len(msgs) {
					return
				}
				if skip != nil && skip[i] {
					continue
				}
				out[i], errs[i] = c.encode(&msgs[i], added, d)
			}
		})
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}
	return out, nil
}

// EncodeOne returns the record of m (see Encode).
func (c *Compressor) EncodeOne(ctx context.Context, m *store.Message, added time.Time) ([]byte, error) {
	var d *record.Dictionary
	if !c.off {
		var err error
		if d, err = c.current(ctx); err != nil {
			return nil, err
		}
	}
	return c.encode(m, added, d)
}

func (c *Compressor) encode(m *store.Message, added time.Time, d *record.Dictionary) ([]byte, error) {
	if !m.Added.IsZero() {
		added = m.Added.UTC()
	}
	rm := record.Message{Digest: m.Digest, Added: added, MessageID: m.MessageID, List: m.List, Raw: m.Raw}
	if c.off {
		return record.AppendMessage(make([]byte, 0, record.Size(rm)), rm), nil
	}
	b, err := c.codec.AppendLevel(nil, rm, d, c.level)
	if errors.Is(err, record.ErrVerify) {
		// Never store what does not read back: keep this one as it is.
		c.log.Warn("compressed message did not decode to itself: stored uncompressed", "callnumber", m.Number.String(), "err", err)
		return record.AppendMessage(make([]byte, 0, record.Size(rm)), rm), nil
	}
	if err != nil {
		return nil, fmt.Errorf("cannot compress message %v: %w", m.Number, err)
	}
	return b, nil
}

// recordLevel is the record package's name of a store's level; a backend
// that chose none gets zstd's fastest.
func recordLevel(l store.CompressionLevel) record.Level {
	switch l {
	case store.LevelFastest:
		return record.Fastest
	case store.LevelDefault:
		return record.Default
	case store.LevelStrong:
		return record.Strong
	}
	return record.Fast
}

// LoadFunc returns the bytes of dictionary id, or an error wrapping
// store.ErrNotFound. A backend passes one to Decode that reads where it is
// (within its transaction, say).
type LoadFunc func(id record.DictID) ([]byte, error)

// Decode decodes a record of any version and checks its digest. A
// dictionary it needs is taken from the cache, else from load (once per
// process and dictionary). A dictionary the store does not have is an
// error wrapping record.ErrNoDictionary that names it.
func (c *Compressor) Decode(rec []byte, load LoadFunc) (record.Message, error) {
	return c.codec.Decode(rec, func(id record.DictID) (*record.Dictionary, error) {
		return c.dictionary(id, load)
	})
}

// dictionary returns dictionary id from the cache or load.
func (c *Compressor) dictionary(id record.DictID, load LoadFunc) (*record.Dictionary, error) {
	c.mu.Lock()
	d := c.cache[id]
	c.mu.Unlock()
	if d != nil {
		return d, nil
	}
	b, err := load(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: the record was compressed with dictionary %v, which this store does not have (was the record copied without its dictionary, or the dictionary deleted?)", record.ErrNoDictionary, id)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read compression dictionary %v: %w", id, err)
	}
	if d, err = record.CheckDictionary(id, b); err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cached := c.cache[id]; cached != nil {
		return cached, nil
	}
	c.cache[id] = d
	return d, nil
}

// Known reports whether dictionary id is cached (a backend can then skip
// reading it).
func (c *Compressor) Known(id record.DictID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache[id] != nil
}

// current returns the dictionary new records use, or nil, rereading the
// store's choice if it was read more than RefreshEvery ago.
func (c *Compressor) current(ctx context.Context) (*record.Dictionary, error) {
	c.mu.Lock()
	d, fresh := c.cur, time.Since(c.checked) < RefreshEvery
	c.mu.Unlock()
	if fresh {
		return d, nil
	}
	info, ok, err := c.dicts.CurrentDict(ctx)
	if err != nil {
		return nil, fmt.Errorf("cannot read the current compression dictionary: %w", err)
	}
	if ok {
		if d, err = c.dictionary(info.ID, func(id record.DictID) ([]byte, error) { return c.dicts.LoadDict(ctx, id) }); err != nil {
			return nil, err
		}
	} else {
		d = nil
	}
	c.mu.Lock()
	old := c.cur
	c.cur, c.curInfo, c.checked = d, info, time.Now()
	c.mu.Unlock()
	if old != nil && old != d {
		old.ReleaseEncoder()
	}
	return d, nil
}

// Stored tells the Compressor that a Put has stored messages and the
// store now holds count. When the store has just reached TrainAt without
// a dictionary, it trains the first one before returning; when it has
// grown enough since the current one (see Retrain), it starts training a newer
// one in the background. A failed training is logged, and tried again
// once the store has doubled.
func (c *Compressor) Stored(ctx context.Context, count int64) {
	if c.off || c.trainAt < 0 || count < c.trainAt {
		return
	}
	c.mu.Lock()
	info, have, failedAt := c.curInfo, c.cur != nil, c.failedAt
	c.mu.Unlock()
	if failedAt > 0 && count < 2*failedAt {
		return
	}
	if have && !retrainDue(info, count, c.retrain) {
		return
	}
	// Another process may have trained meanwhile: look before training.
	if _, err := c.current(ctx); err != nil {
		c.log.Warn("cannot read the current compression dictionary", "err", err)
		return
	}
	c.mu.Lock()
	info, have = c.curInfo, c.cur != nil
	c.mu.Unlock()
	if have && !retrainDue(info, count, c.retrain) {
		return
	}
	if !c.training.CompareAndSwap(false, true) {
		return // this process is training already
	}
	if !have {
		defer c.training.Store(false)
		c.train(ctx, count, c.sample)
		return
	}
	c.wg.Go(func() {
		defer c.training.Store(false)
		c.train(c.ctx, count, c.sample)
	})
}

// retrainDue reports whether a store of count messages has grown enough
// since its current dictionary to train a newer one: retrain times, or
// by RetrainEvery messages.
func retrainDue(cur record.Current, count, retrain int64) bool {
	return count >= retrain*max(cur.Messages, 1) || count >= cur.Messages+RetrainEvery
}

// train trains a dictionary on the store's newest messages, saves it and
// makes it current.
func (c *Compressor) train(ctx context.Context, count, sampleBytes int64) {
	start := time.Now()
	d, samples, err := c.trainSave(ctx, count, sampleBytes)
	if err != nil {
		if ctx.Err() == nil {
			c.log.Warn("cannot train a compression dictionary: messages are compressed without a new one; trying again when the store has doubled", "messages", count, "err", err)
		}
		c.mu.Lock()
		c.failedAt = count
		c.mu.Unlock()
		return
	}
	c.log.Debug("trained a compression dictionary", "dict", d.ID.String(), "bytes", len(d.Bytes), "samples", samples, "messages", count, "took", time.Since(start).Round(time.Millisecond))
}

func (c *Compressor) trainSave(ctx context.Context, count, sampleBytes int64) (*record.Dictionary, int, error) {
	samples, err := c.dicts.Sample(ctx, MaxSamples, sampleBytes)
	if err != nil {
		return nil, 0, fmt.Errorf("cannot read messages to train on: %w", err)
	}
	b, err := record.Train(ctx, samples)
	if err != nil {
		return nil, 0, err
	}
	d, err := record.NewDictionary(b)
	if err != nil {
		return nil, 0, fmt.Errorf("trained dictionary unusable: %w", err)
	}
	if err := ctx.Err(); err != nil {
		return nil, 0, err
	}
	if err := c.dicts.SaveDict(ctx, d.ID, record.StoredDict(d.Bytes)); err != nil {
		return nil, 0, fmt.Errorf("cannot save dictionary %v: %w", d.ID, err)
	}
	info := record.Current{ID: d.ID, Messages: count, Samples: len(samples), Trained: time.Now().UTC()}
	if err := c.dicts.SetCurrentDict(ctx, info); err != nil {
		return nil, 0, fmt.Errorf("cannot make dictionary %v current: %w", d.ID, err)
	}
	c.mu.Lock()
	c.cache[d.ID] = d
	old := c.cur
	c.cur, c.curInfo, c.checked = d, info, time.Now()
	c.mu.Unlock()
	if old != nil && old != d {
		old.ReleaseEncoder()
	}
	return d, len(samples), nil
}
