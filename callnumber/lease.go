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

// Lease is a run issued to one process. Nonce is random per lease, to tell
// apart a run issued twice (by an authority restored from an old backup).
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

// RunSource issues runs, never the same one twice (it may skip some).
type RunSource interface {
	NewRun(ctx context.Context) (Lease, error)
}

// RunSourceFunc adapts a function to RunSource.
type RunSourceFunc func(ctx context.Context) (Lease, error)

// NewRun calls f.
func (f RunSourceFunc) NewRun(ctx context.Context) (Lease, error) { return f(ctx) }
