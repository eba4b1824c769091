// Package compress compresses a store's message records, each on its own
// so that it is read alone, with dictionaries trained on the store's own
// mail (short list messages share most of their header lines).
//
// The Put that brings the store to TrainAt messages trains the first
// dictionary before it returns; as a list's mail drifts, newer ones are
// trained in the background from the newest messages. A dictionary is kept
// under a hash of its bytes, which records name; dictionaries are immutable
// and never deleted, so a newer one changes nothing for older records. Of
// two writers training at once, the last to make its own current wins; the
// other's records stay readable.
package compress

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/internal/record"
)

// Dictionaries keeps a store's dictionaries; processes call it at once.
type Dictionaries interface {
	// LoadDict returns dictionary id, or an error wrapping store.ErrNotFound.
	LoadDict(ctx context.Context, id record.DictID) ([]byte, error)
	// SaveDict stores dictionary id in its stored form b (record.StoredDict),
	// unless one is stored under id already: every record naming it needs it.
	SaveDict(ctx context.Context, id record.DictID, b []byte) error
	// CurrentDict returns the current dictionary, and false if none.
	CurrentDict(ctx context.Context) (record.Current, bool, error)
	// SetCurrentDict makes c, saved already, the current dictionary; of
	// concurrent calls, the last one wins.
	SetCurrentDict(ctx context.Context, c record.Current) error
	// Sample returns the raw bytes of up to n recently stored messages, newest
	// first, skipping those over record.MaxSample, up to maxBytes in all.
	Sample(ctx context.Context, n int, maxBytes int64) ([][]byte, error)
}

const (
	// DefaultTrainAt is the default store.Compression.TrainAt.
	DefaultTrainAt = 1000
	// DefaultRetrain is the default store.Compression.Retrain: rarely, since a
	// compaction trains dictionaries of each era anyway.
	DefaultRetrain = 8
	RetrainEvery   = 10000
	// DefaultSampleBytes is the default store.Compression.SampleBytes; less
	// makes S2 records larger, as S2 uses only the dictionary's last 64 KiB.
	DefaultSampleBytes = 2 << 20
	// MaxSamples bounds the number of messages a dictionary learns from.
	MaxSamples = 4000
	// RefreshEvery is how often a writer rereads the current dictionary.
	RefreshEvery = time.Second
)

// Compressor encodes and decodes one store's records; safe for concurrent use.
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
	cache    dictCache
	loading  map[record.DictID]*dictLoad // dictionaries being read
	cur      *record.Dictionary          // nil: none
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
		cache: dictCache{max: cmp.Or(max(opts.CachedDicts, 0), DefaultCachedDicts)},
		ctx:   ctx, cancel: cancel,
	}
}

// Off reports whether records are written uncompressed.
func (c *Compressor) Off() bool { return c.off }

// CachedDicts is how many dictionaries c keeps besides the current one
// (store.Compression.CachedDicts, its default filled in).
func (c *Compressor) CachedDicts() int { return c.cache.max }

// Close stops a background training (a later Put retries it) and waits.
func (c *Compressor) Close() error {
	c.cancel()
	c.wg.Wait()
	return nil
}

// Encode returns the record of every message whose skip entry is false
// (skip may be nil), on all CPUs, saying they were added at added.
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

// recordLevel maps a store's level to the record package's; LevelBackend,
// which a backend replaces with its own before this, is zstd's fastest.
func recordLevel(l store.CompressionLevel) record.Level {
	switch l {
	case store.LevelFastest:
		return record.Fastest
	case store.LevelStrong:
		return record.Strong
	}
	return record.Fast
}

// LoadFunc is LoadDict where a backend stands (in its transaction, say).
type LoadFunc func(id record.DictID) ([]byte, error)

// Decode decodes a record of any version and checks it (record.Codec.Decode).
// A dictionary the store lacks is an error wrapping record.ErrNoDictionary.
func (c *Compressor) Decode(rec []byte, load LoadFunc) (record.Message, error) {
	return c.codec.Decode(rec, func(id record.DictID) (*record.Dictionary, error) {
		return c.dictionary(id, load)
	})
}

// DecodeDigest is Decode checking every record's digest
// (record.Codec.DecodeDigest).
func (c *Compressor) DecodeDigest(rec []byte, load LoadFunc) (record.Message, error) {
	return c.codec.DecodeDigest(rec, func(id record.DictID) (*record.Dictionary, error) {
		return c.dictionary(id, load)
	})
}

func (c *Compressor) dictionary(id record.DictID, load LoadFunc) (*record.Dictionary, error) {
	c.mu.Lock()
	d := c.cache.get(id)
	if d == nil && c.cur != nil && c.cur.ID == id {
		d = c.cur
	}
	if d != nil {
		c.mu.Unlock()
		return d, nil
	}
	// One load of a dictionary at a time: the records of a page of search
	// results, decoded at once, often share a dictionary that none of them
	// found cached, and each load costs about half a millisecond of CPU
	// (decompressing, checking and parsing it).
	if l := c.loading[id]; l != nil {
		c.mu.Unlock()
		<-l.done
		if l.err == nil {
			return l.d, nil
		}
		// The loader's error may be its own (its transaction, its
		// context): this caller reads the dictionary for itself.
		return c.loadDictionary(id, load)
	}
	l := &dictLoad{done: make(chan struct{})}
	if c.loading == nil {
		c.loading = make(map[record.DictID]*dictLoad)
	}
	c.loading[id] = l
	c.mu.Unlock()
	defer func() {
		c.mu.Lock()
		delete(c.loading, id)
		c.mu.Unlock()
		close(l.done)
	}()
	l.d, l.err = c.loadDictionary(id, load)
	return l.d, l.err
}

// dictLoad is a dictionary being read by one caller for others.
type dictLoad struct {
	done chan struct{} // closed once d or err is set
	d    *record.Dictionary
	err  error
}

// loadDictionary reads dictionary id, checks it and caches it.
func (c *Compressor) loadDictionary(id record.DictID, load LoadFunc) (*record.Dictionary, error) {
	b, err := load(id)
	if errors.Is(err, store.ErrNotFound) {
		return nil, fmt.Errorf("%w: the record was compressed with dictionary %v, which this store does not have (was the record copied without its dictionary, or the dictionary deleted?)", record.ErrNoDictionary, id)
	}
	if err != nil {
		return nil, fmt.Errorf("cannot read compression dictionary %v: %w", id, err)
	}
	d, err := record.CheckDictionary(id, b)
	if err != nil {
		return nil, err
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if cached := c.cache.get(id); cached != nil {
		return cached, nil
	}
	c.cache.put(d)
	return d, nil
}

// Known reports whether dictionary id is cached (so need not be read).
func (c *Compressor) Known(id record.DictID) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.cache.get(id) != nil || (c.cur != nil && c.cur.ID == id)
}

// current returns the dictionary new records use, or nil.
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

// Stored tells the Compressor that the store now holds count messages. It
// trains the first dictionary at once, newer ones in the background; a
// failed training is retried once the store has doubled.
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
	// Another process may have trained meanwhile.
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

func retrainDue(cur record.Current, count, retrain int64) bool {
	return count >= retrain*max(cur.Messages, 1) || count >= cur.Messages+RetrainEvery
}

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
	c.cache.put(d)
	old := c.cur
	c.cur, c.curInfo, c.checked = d, info, time.Now()
	c.mu.Unlock()
	if old != nil && old != d {
		old.ReleaseEncoder()
	}
	return d, len(samples), nil
}

// DefaultCachedDicts is how many dictionaries a Compressor keeps besides
// the current one unless store.Compression.CachedDicts says otherwise,
// the least recently used let go first: each holds its decoder's tables
// and buffers, a few hundred KiB, and a store gets a new dictionary
// every RetrainEvery messages and a compaction one for each era, so that
// keeping every one read would grow with the archive (an importer that
// trains as it goes, a reader or a compaction that reads old records).
const DefaultCachedDicts = 8

// dictCache is the dictionaries last used, at most max of them. Its
// users hold the Compressor's lock.
type dictCache struct {
	max   int
	byID  map[record.DictID]*record.Dictionary
	order []record.DictID // least recently used first
}

// get returns dictionary id if cached, and marks it used.
func (c *dictCache) get(id record.DictID) *record.Dictionary {
	d := c.byID[id]
	if d != nil {
		if i := slices.Index(c.order, id); i >= 0 && i < len(c.order)-1 {
			c.order = append(slices.Delete(c.order, i, i+1), id)
		}
	}
	return d
}

// put caches d, used now, and lets go of the least recently used beyond max.
func (c *dictCache) put(d *record.Dictionary) {
	if c.byID == nil {
		c.byID = make(map[record.DictID]*record.Dictionary)
	}
	if c.byID[d.ID] != nil {
		c.byID[d.ID] = d
		c.get(d.ID)
		return
	}
	c.byID[d.ID] = d
	c.order = append(c.order, d.ID)
	for len(c.order) > max(c.max, 1) {
		delete(c.byID, c.order[0])
		c.order = slices.Delete(c.order, 0, 1)
	}
}

// len returns the number of dictionaries cached.
func (c *dictCache) len() int { return len(c.byID) }
