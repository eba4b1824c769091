package store

// Compression configures how a backend compresses the messages it
// stores: each on its own, with a dictionary trained on the store's own
// messages once it holds TrainAt of them (store/internal/compress has the
// details). A zero field is the backend's default, which each backend
// documents where it sets it (boltstore's and riakstore's compression
// functions): there is no other default. Compression is invisible above
// the store: Get returns the bytes Put was given, and the digest is that
// of the raw bytes.
type Compression struct {
	// Off writes messages uncompressed, in the record layout written
	// before compression existed. Compressed records stay readable.
	Off bool
	// TrainAt is the number of stored messages at which the first
	// dictionary is trained; zero is the backend's default; negative
	// means never here: messages are compressed without a dictionary
	// unless another writer trained one.
	TrainAt int64
	// Retrain is how many times the store grows before a newer
	// dictionary is trained from its newest messages (and it is trained
	// at least every 10,000 messages); zero is the backend's default;
	// less than 2 is 2. A store whose records are rewritten by a
	// compaction, which trains dictionaries of its own, can afford to
	// retrain rarely; one that keeps its records as written gains by
	// retraining as it doubles.
	Retrain int64
	// SampleBytes is how much of the store's newest mail a dictionary
	// learns from, in bytes of messages; a training's CPU grows with it.
	// Zero means 2 MiB.
	SampleBytes int64
	// Level is how hard records are compressed as they are written.
	// Zero (LevelBackend) is the backend's choice: the bolt store's is
	// LevelFastest (a compaction rewrites its records harder), Riak's
	// LevelStrong (its records stay as written).
	Level CompressionLevel
}

// CompressionLevel is how hard a store compresses the records it writes:
// how much CPU it spends for how few bytes. Readers need not know it.
type CompressionLevel int

const (
	// LevelBackend is the backend's own default.
	LevelBackend CompressionLevel = iota
	// LevelFastest is S2 (zstd's fastest level for messages of 64 KiB or
	// more): a third of the CPU of LevelFast, for records a fifth
	// larger.
	LevelFastest
	// LevelFast is zstd's fastest level.
	LevelFast
	// LevelDefault is zstd's default level: on mail with a dictionary,
	// 3% smaller records than LevelFast for about three times the CPU.
	LevelDefault
	// LevelStrong is zstd's "better" level, which compactions write.
	LevelStrong
)
