package batch

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

func TestCheckDigests(t *testing.T) {
	var msgs []store.Message
	for i := range 50 {
		raw := fmt.Appendf(nil, "Subject: %d\r\n\r\nbody %d\r\n", i, i)
		msgs = append(msgs, store.Message{Number: 1, Raw: raw, Digest: store.DigestOf(raw)})
	}
	if err := CheckDigests(msgs); err != nil {
		t.Fatalf("CheckDigests(good batch) = %v, want nil", err)
	}
	if err := CheckDigests(nil); err != nil {
		t.Fatalf("CheckDigests(nil) = %v, want nil", err)
	}
	// The digest of the LF form is the digest of the CRLF form.
	msgs[3].Digest = store.DigestOf([]byte(strings.ReplaceAll(string(msgs[3].Raw), "\r\n", "\n")))
	if err := CheckDigests(msgs); err != nil {
		t.Fatalf("CheckDigests(LF digest of a CRLF message) = %v, want nil", err)
	}
	// A digest of another message: the message would pass for a duplicate.
	msgs[37].Digest = msgs[12].Digest
	err := CheckDigests(msgs)
	if !errors.Is(err, store.ErrInvalidMessage) || !strings.Contains(err.Error(), "message 38 of the batch") {
		t.Fatalf("CheckDigests(batch with a wrong digest) = %v, want ErrInvalidMessage naming message 38", err)
	}
}

// mapLookup is a Lookup over maps, counting the digests it is asked for.
type mapLookup struct {
	digests  map[store.Digest]callnumber.Number
	removals map[callnumber.Number]*store.Removal
	none     bool // NoRemovals' answer
	asked    map[store.Digest]int
}

func (l *mapLookup) HasLease(context.Context, uint32) (bool, error) { return true, nil }
func (l *mapLookup) Raw(context.Context, callnumber.Number) ([]byte, bool, error) {
	return nil, false, nil
}
func (l *mapLookup) Digest(_ context.Context, d store.Digest) (callnumber.Number, bool, error) {
	l.asked[d]++
	n, ok := l.digests[d]
	return n, ok, nil
}
func (l *mapLookup) Removal(_ context.Context, n callnumber.Number) (*store.Removal, error) {
	return l.removals[n], nil
}

// withNoRemovals adds NoRemovals to a mapLookup.
type withNoRemovals struct{ *mapLookup }

func (l withNoRemovals) NoRemovals(context.Context) (bool, error) { return l.none, nil }

// A message whose content is a removed message's is a duplicate of it,
// Removed; a Lookup that says its store has no removals is not asked for
// any content, and one that says it has some, or says nothing, is.
func TestMakeRemovedContent(t *testing.T) {
	ctx := context.Background()
	var key shuffle.Key
	key[0] = 7
	codec, err := callnumber.NewCodec(shuffle.Mix, key)
	if err != nil {
		t.Fatal(err)
	}
	number := func(seq int) callnumber.Number {
		n, err := codec.Encode(callnumber.Fields{Run: 1, Sequence: uint16(seq)})
		if err != nil {
			t.Fatal(err)
		}
		return n
	}
	raw := []byte("Message-ID: <a@example.org>\nReceived: by relay one\n\nthe body\n")
	copyRaw := []byte("Message-ID: <a@example.org>\nReceived: by relay two\n\nthe body\n")
	content := store.ContentOf(raw, "a@example.org")
	gone := number(0)
	msgs := []store.Message{{Number: number(1), Raw: copyRaw, Digest: store.DigestOf(copyRaw), MessageID: "a@example.org"}}
	for _, tc := range []struct {
		name        string
		look        func(*mapLookup) Lookup
		none        bool
		wantAsked   int
		wantRemoved bool
	}{
		{"no NoRemovals", func(l *mapLookup) Lookup { return l }, false, 1, true},
		{"removals", func(l *mapLookup) Lookup { return withNoRemovals{l} }, false, 1, true},
		// A store that says it has none is not asked (here it holds one all
		// the same, so that the test sees the lookup skipped).
		{"no removals", func(l *mapLookup) Lookup { return withNoRemovals{l} }, true, 0, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := &mapLookup{
				digests:  map[store.Digest]callnumber.Number{content: gone},
				removals: map[callnumber.Number]*store.Removal{gone: {Number: gone, Content: content}},
				none:     tc.none,
				asked:    map[store.Digest]int{},
			}
			p, err := Make(ctx, codec, msgs, tc.look(l))
			if err != nil {
				t.Fatal(err)
			}
			if got := l.asked[content]; got != tc.wantAsked {
				t.Errorf("content looked up %d times, want %d", got, tc.wantAsked)
			}
			r := p.Results[0]
			if tc.wantRemoved {
				if p.Actions[0] != Duplicate || r != (store.Result{Number: gone, Duplicate: true, Removed: true}) {
					t.Errorf("Make = %v, %+v; want Duplicate of %v, Removed", p.Actions[0], r, gone)
				}
			} else if p.Actions[0] != Write || r != (store.Result{Number: msgs[0].Number}) {
				t.Errorf("Make = %v, %+v; want Write", p.Actions[0], r)
			}
		})
	}
}
