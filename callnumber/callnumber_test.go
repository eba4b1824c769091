package callnumber

import (
	"errors"
	"math/rand/v2"
	"testing"
)

func TestPackUnpack(t *testing.T) {
	tests := []struct {
		name   string
		fields Fields
		packed uint64
	}{
		{"first number", Fields{Run: 1}, 1 << 14},
		{"run 1 last sequence", Fields{Run: 1, Sequence: MaxSequence}, 1<<14 | 16383},
		{"run 2", Fields{Run: 2}, 2 << 14},
		{"last run", Fields{Run: MaxRun}, (1<<30 - 1) << 14},
		{"last run last sequence", Fields{Run: MaxRun, Sequence: MaxSequence}, 1<<44 - 1},
		{"version 7", Fields{Version: 7, Run: 1}, 7<<44 | 1<<14},
		{"largest value", Fields{Version: MaxVersion, Run: MaxRun, Sequence: MaxSequence}, 1<<47 - 1},
		{"mixed", Fields{Version: 5, Run: 0x2aaaaaaa, Sequence: 0x1555}, 5<<44 | 0x2aaaaaaa<<14 | 0x1555},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pack(tt.fields)
			if err != nil || got != tt.packed {
				t.Fatalf("Pack(%v) = %#x, %v, want %#x, nil", tt.fields, got, err, tt.packed)
			}
			f, err := Unpack(tt.packed)
			if err != nil || f != tt.fields {
				t.Fatalf("Unpack(%#x) = %v, %v, want %v, nil", tt.packed, f, err, tt.fields)
			}
		})
	}
}

func TestPackErrors(t *testing.T) {
	tests := []struct {
		name   string
		fields Fields
		err    error
	}{
		{"run 0", Fields{Run: 0, Sequence: 5}, ErrRunZero},
		{"run 2^30", Fields{Run: MaxRun + 1}, ErrRun},
		{"run max uint32", Fields{Run: ^uint32(0)}, ErrRun},
		{"sequence 16384", Fields{Run: 1, Sequence: MaxSequence + 1}, ErrSequence},
		{"sequence max uint16", Fields{Run: 1, Sequence: ^uint16(0)}, ErrSequence},
		{"version 8", Fields{Version: MaxVersion + 1, Run: 1}, ErrVersion},
		{"version 255", Fields{Version: 255, Run: 1}, ErrVersion},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := Pack(tt.fields)
			if !errors.Is(err, tt.err) || got != 0 {
				t.Errorf("Pack(%v) = %#x, %v, want 0, %v", tt.fields, got, err, tt.err)
			}
		})
	}
}

func TestUnpackErrors(t *testing.T) {
	tests := []struct {
		name   string
		packed uint64
		err    error
	}{
		{"zero", 0, ErrRunZero},
		{"run 0 sequence 16383", MaxSequence, ErrRunZero},
		{"run 0 version 7", 7 << 44, ErrRunZero},
		{"2^47", 1 << 47, ErrRange},
		{"2^47 plus run 1", 1<<47 | 1<<14, ErrRange},
		{"max uint64", ^uint64(0), ErrRange},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f, err := Unpack(tt.packed)
			if !errors.Is(err, tt.err) || f != (Fields{}) {
				t.Errorf("Unpack(%#x) = %v, %v, want {}, %v", tt.packed, f, err, tt.err)
			}
		})
	}
}

// TestPackRandom checks that Pack and Unpack are exact inverses on random
// valid fields, and that Unpack accepts every value below 2^47 with a run.
func TestPackRandom(t *testing.T) {
	rng := rand.New(rand.NewPCG(3, 44))
	for range 100_000 {
		f := Fields{Version: uint8(rng.IntN(8)), Run: 1 + rng.Uint32N(MaxRun), Sequence: uint16(rng.IntN(SequencesPerRun))}
		v, err := Pack(f)
		if err != nil {
			t.Fatalf("Pack(%v) = %v", f, err)
		}
		if v>>Bits != 0 {
			t.Fatalf("Pack(%v) = %#x, not below 2^47", f, v)
		}
		if got, err := Unpack(v); err != nil || got != f {
			t.Fatalf("Unpack(Pack(%v)) = %v, %v", f, got, err)
		}
	}
}

func TestLayoutConstants(t *testing.T) {
	if Bits != 47 || SequencesPerRun != 16384 || MaxRun != 1<<30-1 || MaxVersion != 7 {
		t.Errorf("layout: Bits %d, SequencesPerRun %d, MaxRun %d, MaxVersion %d", Bits, SequencesPerRun, MaxRun, MaxVersion)
	}
	// Every call number fits in a JavaScript number and a signed int64.
	if uint64(1)<<Bits > 1<<53 {
		t.Errorf("2^%d does not fit in a float64 mantissa", Bits)
	}
	if got := (Fields{Version: 1, Run: 2, Sequence: 3}).String(); got != "v1/run 2/seq 3" {
		t.Errorf("Fields.String() = %q", got)
	}
}
