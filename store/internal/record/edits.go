package record

// What Move and Remove write, the same in both backends: their arguments
// checked, and the move and removal records built. How each backend
// writes them (one bolt transaction, steps of Riak writes) is its own.

import (
	"fmt"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/store"
)

// CheckMove checks the arguments of Move (given false) or of RecordMove
// (given true: the move brings its date).
func CheckMove(want store.Move, given bool) error {
	if err := store.CheckList(want.List); err != nil {
		return err
	}
	if given && want.Moved.IsZero() {
		return fmt.Errorf("%w: a move without its date", store.ErrInvalidMessage)
	}
	return nil
}

// NewMove is the move of want.Number to want.List that Move (given
// false) dates now, and RecordMove (given true) dates as want is.
func NewMove(want store.Move, given bool, now time.Time) store.Move {
	m := store.Move{Number: want.Number, List: want.List, Moved: now.UTC()}
	if given {
		m.Moved = want.Moved.UTC()
	}
	return m
}

// CheckRemoval checks the arguments of Remove (given false: want holds
// the number and the reason) or of RecordRemoval (given true: the removal
// brings its date).
func CheckRemoval(want store.Removal, given bool) error {
	if err := store.CheckReason(want.Reason); err != nil {
		return err
	}
	if given && want.Removed.IsZero() {
		return fmt.Errorf("%w: a removal without its date", store.ErrInvalidMessage)
	}
	return nil
}

// NewRemoval is the removal record of m, the message stored under
// want.Number. Remove's (given false) is dated now, to the second, for
// want.Reason, and its content digest is store.ContentOf m. RecordRemoval's
// (given true) is dated and summed as want is, and keeps want's content
// digest if it has one; want must name m's digest, or the number holds
// another message (store.ErrNumberTaken).
func NewRemoval(m Message, want store.Removal, given bool, now time.Time) (store.Removal, error) {
	n := want.Number
	if given && m.Digest != want.Digest {
		return store.Removal{}, fmt.Errorf("%w: the removal names digest %v, and %v holds a message of digest %v", store.ErrNumberTaken, want.Digest, n, m.Digest)
	}
	r := store.Removal{Number: n, Digest: m.Digest, MessageIDSum: store.MessageIDSum(m.MessageID),
		Content: store.ContentOf(m.Raw, m.MessageID), Removed: now.UTC().Truncate(time.Second), Reason: want.Reason}
	if given {
		r.Removed, r.MessageIDSum = want.Removed.UTC(), want.MessageIDSum
		if want.Content != (store.Digest{}) {
			r.Content = want.Content
		}
	}
	return r, nil
}

// Reservation is the removal record of RecordRemoval's want for a number
// never stored here: it reserves the number and want's digest.
func Reservation(want store.Removal) store.Removal {
	r := want
	r.Removed = r.Removed.UTC()
	return r
}

// DigestElsewhere is the error of a Reservation of digest d under n when
// the store holds those bytes under other.
func DigestElsewhere(d store.Digest, other, n callnumber.Number) error {
	return fmt.Errorf("%w: the removed bytes (digest %v) are stored here under %v, not %v", store.ErrNumberTaken, d, other, n)
}
