package callnumber

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/chibrary/chibrary/shuffle"
)

// ErrLease is returned for a lease a Generator cannot use.
var ErrLease = errors.New("callnumber: unusable lease")

// Lease is a run issued by a run authority to one process. The fields
// after Run identify the authority (whose scheme and key make the codec)
// and the holder; Nonce is random per lease, so that a run issued twice
// (an authority restored from an old backup) can be told apart.
type Lease struct {
	Run       uint32         `json:"run"`
	Version   uint8          `json:"version"`
	Authority string         `json:"authority"`
	Scheme    shuffle.Scheme `json:"scheme,omitempty"`
	Key       shuffle.Key    `json:"key,omitzero"`
	Nonce     string         `json:"nonce"`
	Program   string         `json:"program,omitempty"`
	Host      string         `json:"host,omitempty"`
	PID       int            `json:"pid,omitempty"`
	Note      string         `json:"note,omitempty"`
	IssuedAt  time.Time      `json:"issued_at"`
}

// Validate checks that a Generator can number messages under l.
func (l Lease) Validate() error {
	switch {
	case l.Version != CurrentVersion:
		return fmt.Errorf("%w: version %d, want %d", ErrLease, l.Version, CurrentVersion)
	case l.Run == 0 || l.Run > MaxRun:
		return fmt.Errorf("%w: run %d outside 1..%d", ErrLease, l.Run, MaxRun)
	case l.Authority == "":
		return fmt.Errorf("%w: no authority", ErrLease)
	case l.Nonce == "":
		return fmt.Errorf("%w: no nonce", ErrLease)
	}
	if _, err := shuffle.ParseScheme(string(l.Scheme)); err != nil {
		return fmt.Errorf("%w: %w", ErrLease, err)
	}
	return nil
}

// RunSource issues runs. The local authority and the coordinator client
// implement it. A source must never return the same run twice; it may skip
// runs.
type RunSource interface {
	NewRun(ctx context.Context) (Lease, error)
}

// RunSourceFunc adapts a function to RunSource.
type RunSourceFunc func(ctx context.Context) (Lease, error)

// NewRun calls f.
func (f RunSourceFunc) NewRun(ctx context.Context) (Lease, error) { return f(ctx) }
