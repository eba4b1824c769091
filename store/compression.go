package store

// Compression configures how a backend compresses the messages it
// stores: each on its own, with a dictionary trained on the store's own
// messages (store/internal/compress). A zero field takes the backend's
// default, which each backend documents on its Options. Compression is
// invisible above the store: Get returns the bytes Put was given.
type Compression struct {
	// Off writes messages uncompressed; compressed records stay readable.
	Off bool
	// TrainAt is the number of stored messages at which the first
	// dictionary is trained; negative means never by this writer.
	TrainAt int64
	// Retrain is how many times the store grows (or by 10,000 messages)
	// before a newer dictionary is trained from its newest messages; less
	// than 2 is 2. A store whose compaction trains dictionaries of its own
	// can retrain rarely.
	Retrain int64
	// SampleBytes is how many bytes of the newest mail a dictionary learns
	// from; a training's CPU grows with it.
	SampleBytes int64
	// Level is how hard records are compressed as they are written.
	Level CompressionLevel
	// CachedDicts is how many dictionaries besides the current one are
	// kept ready to decode, the least recently used let go first; zero or
	// less means 8. Each costs a few hundred KiB; a store has one for
	// every era a compaction wrote, so a reader of random old messages
	// (a resolver serving a large archive) keeps more than a writer, which
	// needs one or two.
	CachedDicts int
}

// CompressionLevel is how much CPU a store spends compressing the records
// it writes. Readers need not know it.
type CompressionLevel int

const (
	// LevelBackend is the backend's own default.
	LevelBackend CompressionLevel = iota
	// LevelFastest is S2 (zstd's fastest level for messages of 64 KiB or
	// more).
	LevelFastest
	// LevelStrong is zstd's "better" level, which compactions write.
	LevelStrong
)
