package mailview

import (
	"runtime"
	"testing"

	"github.com/chibrary/chibrary/internal/hostile"
)

// allocated returns the bytes fn allocates.
func allocated(fn func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	fn()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// The work of parsing a hostile message is bounded by its size: a header
// of 100,000 folded References lines (beyond MaxHeaderBytes, so read
// leniently) allocates a few times its size, not a copy of the field per
// line.
func TestCostBounded(t *testing.T) {
	raw := hostile.ManyReferences(hostile.ManyReferencesCount).Raw()
	got := allocated(func() { Parse(raw, Options{}) })
	if limit := uint64(16 * len(raw)); got > limit {
		t.Errorf("Parse(many-references, %d bytes) allocated %d bytes, want at most %d", len(raw), got, limit)
	}
}
