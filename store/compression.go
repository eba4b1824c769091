package store

// Compression configures how a backend compresses the messages it
// stores. The zero value is the default: every message compressed on its
// own with zstd, with a dictionary trained on the store's own messages
// once it holds TrainAt of them (store/internal/compress has the details).
// Compression is invisible above the store: Get returns the bytes Put was
// given, and the digest is that of the raw bytes.
type Compression struct {
	// Off writes messages uncompressed, in the record layout written
	// before compression existed. Compressed records stay readable.
	Off bool
	// TrainAt is the number of stored messages at which the first
	// dictionary is trained. Zero means 1,000; negative means never
	// here: messages are compressed without a dictionary unless another
	// writer trained one.
	TrainAt int64
}
