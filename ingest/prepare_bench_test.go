package ingest_test

import (
	"testing"

	"github.com/chibrary/chibrary/ingest"
	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/store"
)

// BenchmarkPrepare is the CPU work per message that the import workers do
// (the header fields), beside the digest the store computes.
func BenchmarkPrepare(b *testing.B) {
	list := corpusItems(b)
	var size int64
	for _, it := range list {
		size += int64(len(it.Raw))
	}
	b.Run("all", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, it := range list {
				ingest.Prepare(it.Raw, it.Where)
			}
		}
	})
	b.Run("digest", func(b *testing.B) {
		b.SetBytes(size)
		for b.Loop() {
			for _, it := range list {
				store.DigestOf(it.Raw)
			}
		}
	})
	b.Run("header", func(b *testing.B) {
		b.SetBytes(size)
		b.ReportAllocs()
		for b.Loop() {
			for _, it := range list {
				mailmsg.Parse(it.Raw)
			}
		}
	})
}
