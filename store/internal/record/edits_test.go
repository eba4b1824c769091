package record

import (
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

func TestCheckMove(t *testing.T) {
	when := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		want  store.Move
		given bool
		err   error
	}{
		{"move", store.Move{Number: 1, List: "a.list"}, false, nil},
		{"move, a date ignored", store.Move{Number: 1, List: "a.list", Moved: when}, false, nil},
		{"record", store.Move{Number: 1, List: "a.list", Moved: when}, true, nil},
		{"record without its date", store.Move{Number: 1, List: "a.list"}, true, store.ErrInvalidMessage},
		{"no list", store.Move{Number: 1}, false, store.ErrBadList},
		{"list too long", store.Move{Number: 1, List: strings.Repeat("l", store.MaxList+1)}, true, store.ErrBadList},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckMove(tt.want, tt.given)
			if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("CheckMove(%+v, %v) = %v, want %v", tt.want, tt.given, err, tt.err)
			}
		})
	}
}

func TestNewMove(t *testing.T) {
	now := time.Date(2025, 6, 1, 9, 30, 0, 5, time.FixedZone("CEST", 2*3600))
	when := time.Date(2024, 3, 1, 14, 0, 0, 7, time.FixedZone("CET", 3600))
	want := store.Move{Number: 42, List: "b.list", Moved: when}
	if got := NewMove(want, false, now); got != (store.Move{Number: 42, List: "b.list", Moved: now.UTC()}) {
		t.Errorf("NewMove(%+v, false) = %+v, want it dated now in UTC", want, got)
	}
	if got := NewMove(want, true, now); got != (store.Move{Number: 42, List: "b.list", Moved: when.UTC()}) {
		t.Errorf("NewMove(%+v, true) = %+v, want it dated as given, in UTC", want, got)
	}
}

func TestCheckRemoval(t *testing.T) {
	when := time.Date(2024, 3, 1, 12, 0, 0, 0, time.UTC)
	tests := []struct {
		name  string
		want  store.Removal
		given bool
		err   error
	}{
		{"remove", store.Removal{Number: 1, Reason: "spam"}, false, nil},
		{"remove, no reason", store.Removal{Number: 1}, false, nil},
		{"record", store.Removal{Number: 1, Reason: "spam", Removed: when}, true, nil},
		{"record without its date", store.Removal{Number: 1, Reason: "spam"}, true, store.ErrInvalidMessage},
		{"reason too long", store.Removal{Number: 1, Reason: strings.Repeat("r", store.MaxReason+1)}, false, store.ErrBadReason},
		{"reason not UTF-8", store.Removal{Number: 1, Reason: "\xff", Removed: when}, true, store.ErrBadReason},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckRemoval(tt.want, tt.given)
			if tt.err == nil && err != nil || tt.err != nil && !errors.Is(err, tt.err) {
				t.Errorf("CheckRemoval(%+v, %v) = %v, want %v", tt.want, tt.given, err, tt.err)
			}
		})
	}
}

func TestNewRemoval(t *testing.T) {
	raw := []byte("Message-ID: <a@example.org>\nSubject: hi\n\nbody\n")
	m := Message{Digest: store.DigestOf(raw), MessageID: "a@example.org", List: "a.list", Raw: raw}
	now := time.Date(2025, 6, 1, 9, 30, 15, 999, time.FixedZone("CEST", 2*3600))
	when := time.Date(2024, 3, 1, 14, 0, 0, 7, time.FixedZone("CET", 3600))
	other := store.Digest{1}

	t.Run("remove", func(t *testing.T) {
		got, err := NewRemoval(m, store.Removal{Number: 7, Reason: "spam"}, false, now)
		want := store.Removal{Number: 7, Digest: m.Digest, MessageIDSum: store.MessageIDSum(m.MessageID),
			Content: store.ContentOf(raw, m.MessageID), Removed: now.UTC().Truncate(time.Second), Reason: "spam"}
		if err != nil || got != want {
			t.Errorf("NewRemoval(remove) = %+v, %v, want %+v", got, err, want)
		}
		if got.Content == (store.Digest{}) {
			t.Errorf("NewRemoval(remove) has no content digest for a message with a Message-ID")
		}
	})
	t.Run("remove, no Message-ID", func(t *testing.T) {
		m := Message{Digest: store.DigestOf([]byte("x\n")), Raw: []byte("x\n")}
		got, err := NewRemoval(m, store.Removal{Number: 7}, false, now)
		if err != nil || got.Content != (store.Digest{}) || got.MessageIDSum != ([32]byte{}) {
			t.Errorf("NewRemoval(no Message-ID) = %+v, %v, want no content digest and no Message-ID sum", got, err)
		}
	})
	t.Run("record keeps what it brings", func(t *testing.T) {
		in := store.Removal{Number: 7, Digest: m.Digest, MessageIDSum: [32]byte{9}, Content: other, Removed: when, Reason: "legal"}
		got, err := NewRemoval(m, in, true, now)
		want := in
		want.Removed = when.UTC()
		if err != nil || got != want {
			t.Errorf("NewRemoval(record) = %+v, %v, want %+v", got, err, want)
		}
	})
	t.Run("record without content digest", func(t *testing.T) {
		in := store.Removal{Number: 7, Digest: m.Digest, Removed: when}
		got, err := NewRemoval(m, in, true, now)
		if err != nil || got.Content != store.ContentOf(raw, m.MessageID) {
			t.Errorf("NewRemoval(record, no content) = %+v, %v, want the message's content digest", got, err)
		}
	})
	t.Run("record of another message", func(t *testing.T) {
		in := store.Removal{Number: 7, Digest: other, Removed: when}
		if got, err := NewRemoval(m, in, true, now); !errors.Is(err, store.ErrNumberTaken) {
			t.Errorf("NewRemoval(record, other digest) = %+v, %v, want %v", got, err, store.ErrNumberTaken)
		}
	})
}

func TestReservation(t *testing.T) {
	when := time.Date(2024, 3, 1, 14, 0, 0, 7, time.FixedZone("CET", 3600))
	in := store.Removal{Number: 7, Digest: store.Digest{3}, Content: store.Digest{4}, Removed: when, Reason: "spam"}
	want := in
	want.Removed = when.UTC()
	if got := Reservation(in); got != want {
		t.Errorf("Reservation(%+v) = %+v, want %+v", in, got, want)
	}
	if err := DigestElsewhere(in.Digest, callnumber.Number(8), in.Number); !errors.Is(err, store.ErrNumberTaken) {
		t.Errorf("DigestElsewhere() = %v, want %v", err, store.ErrNumberTaken)
	}
}
