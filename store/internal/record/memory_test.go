package record

import (
	"bytes"
	"runtime"
	"testing"
)

// heapAfterGC returns the live heap once the garbage collector has run.
func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestStoredDictMemory: StoredDict keeps nothing once it returns (it kept
// its encoder, and with it 20 MiB: an importer's first training added
// that to its heap for good), and its encoder's small window loses
// nothing.
func TestStoredDictMemory(t *testing.T) {
	d := dictionary(t)
	// The decoder CheckDictionary keeps is made once, before measuring.
	if _, err := CheckDictionary(d.ID, d.Bytes); err != nil {
		t.Fatal(err)
	}
	const limit = 1 << 20
	before := heapAfterGC()
	var z []byte
	for range 4 {
		z = StoredDict(d.Bytes)
	}
	if held := int64(heapAfterGC()) - int64(before) - int64(cap(z)); held > limit {
		t.Errorf("StoredDict left %d KiB on the heap after compressing a %d-byte dictionary 4 times; want at most %d KiB", held>>10, len(d.Bytes), limit>>10)
	}
	got, err := CheckDictionary(d.ID, z)
	if err != nil || !bytes.Equal(got.Bytes, d.Bytes) {
		t.Fatalf("CheckDictionary(StoredDict(d)) = %v, %v; want dictionary %v", got, err, d.ID)
	}
	// The window holds the largest dictionary Train makes.
	if dictWindow < DictSize+4<<10 {
		t.Errorf("dictWindow %d, want DictSize (%d) and its header's tables within it", dictWindow, DictSize)
	}
}
