package callnumber

import (
	"errors"
	"fmt"
)

// Field widths and limits of the layout.
const (
	VersionBits  = 3
	RunBits      = 30
	SequenceBits = 14
	Bits         = VersionBits + RunBits + SequenceBits

	MaxVersion      = 1<<VersionBits - 1
	MaxRun          = 1<<RunBits - 1
	MaxSequence     = 1<<SequenceBits - 1
	SequencesPerRun = 1 << SequenceBits

	// CurrentVersion is the only version issued today.
	CurrentVersion = 0

	sequenceShift = 0
	runShift      = SequenceBits
	versionShift  = SequenceBits + RunBits
)

// Errors returned when a value is out of the layout's range.
var (
	ErrVersion  = errors.New("callnumber: unknown version")
	ErrRun      = errors.New("callnumber: run out of range")
	ErrRunZero  = errors.New("callnumber: run 0 is never issued")
	ErrSequence = errors.New("callnumber: sequence out of range")
	ErrRange    = errors.New("callnumber: value out of range")
)

// Fields are the parts of a call number before shuffling.
type Fields struct {
	Version  uint8
	Run      uint32
	Sequence uint16
}

func (f Fields) String() string {
	return fmt.Sprintf("v%d/run %d/seq %d", f.Version, f.Run, f.Sequence)
}

// Pack returns the 47-bit value of f; it refuses fields out of range and run 0.
func Pack(f Fields) (uint64, error) {
	switch {
	case f.Version > MaxVersion:
		return 0, fmt.Errorf("%w: %d > %d", ErrVersion, f.Version, MaxVersion)
	case f.Run == 0:
		return 0, ErrRunZero
	case f.Run > MaxRun:
		return 0, fmt.Errorf("%w: %d > %d", ErrRun, f.Run, MaxRun)
	case f.Sequence > MaxSequence:
		return 0, fmt.Errorf("%w: %d > %d", ErrSequence, f.Sequence, MaxSequence)
	}
	return uint64(f.Version)<<versionShift | uint64(f.Run)<<runShift | uint64(f.Sequence)<<sequenceShift, nil
}

// Unpack is the exact inverse of Pack.
func Unpack(v uint64) (Fields, error) {
	if v>>Bits != 0 {
		return Fields{}, fmt.Errorf("%w: %d >= 2^%d", ErrRange, v, Bits)
	}
	f := Fields{
		Version:  uint8(v >> versionShift),
		Run:      uint32(v>>runShift) & MaxRun,
		Sequence: uint16(v) & MaxSequence,
	}
	if f.Run == 0 {
		return Fields{}, ErrRunZero
	}
	return f, nil
}
