package callnumber

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/chibrary/chibrary/shuffle"
)

// testKey is the shuffle key of the tests' authority: bytes 0x00..0x1f.
var testKey = func() (k shuffle.Key) {
	for i := range k {
		k[i] = byte(i)
	}
	return k
}()

var schemes = []shuffle.Scheme{shuffle.Bits, shuffle.Mix}

// runSource is a RunSource standing in for a run authority: it issues runs
// first, first+1, ... and records what it issued. Setting fail makes the
// next calls return that error.
type runSource struct {
	authority string
	scheme    shuffle.Scheme
	key       shuffle.Key

	mu     sync.Mutex
	next   uint32
	issued []uint32
	fail   error
}

func newRunSource(scheme shuffle.Scheme, first uint32) *runSource {
	return &runSource{authority: "00112233445566778899aabbccddeeff", scheme: scheme, key: testKey, next: first}
}

func (s *runSource) NewRun(ctx context.Context) (Lease, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.fail != nil {
		return Lease{}, s.fail
	}
	run := s.next
	s.next++
	s.issued = append(s.issued, run)
	return Lease{
		Run:       run,
		Version:   CurrentVersion,
		Authority: s.authority,
		Scheme:    s.scheme,
		Key:       s.key,
		Nonce:     fmt.Sprintf("nonce-%d", run),
		Program:   "callnumber.test",
		IssuedAt:  time.Date(2024, 1, 2, 3, 4, 5, 0, time.UTC),
	}, nil
}

func (s *runSource) setFail(err error) {
	s.mu.Lock()
	s.fail = err
	s.mu.Unlock()
}

func (s *runSource) runs() []uint32 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return append([]uint32(nil), s.issued...)
}

func mustCodec(tb testing.TB, scheme shuffle.Scheme) *Codec {
	tb.Helper()
	c, err := NewCodec(scheme, testKey)
	if err != nil {
		tb.Fatalf("NewCodec(%s) = %v", scheme, err)
	}
	return c
}
