package authority_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/chibrary/chibrary/authority"
	"github.com/chibrary/chibrary/authority/authoritytest"
	"github.com/chibrary/chibrary/shuffle"
)

// TestConformance runs the authority conformance suite on the bbolt
// authority (authority/riakauthority runs it on Riak).
func TestConformance(t *testing.T) {
	authoritytest.Run(t, authoritytest.Backend{
		New: func(t *testing.T) authoritytest.Opener {
			return opener(filepath.Join(t.TempDir(), "runs.db"))
		},
		StartAt: func(t *testing.T, next uint64) authoritytest.Opener {
			path := filepath.Join(t.TempDir(), "runs.db")
			a, _, err := authority.OpenOrCreate(t.Context(), path, authority.Options{})
			if err != nil {
				t.Fatal(err)
			}
			defer a.Close()
			if err := a.Bump(t.Context(), next); err != nil {
				t.Fatal(err)
			}
			return opener(path)
		},
	})
}

func opener(path string) authoritytest.Opener {
	return func(ctx context.Context, scheme shuffle.Scheme) (authority.Issuer, error) {
		a, _, err := authority.OpenOrCreate(ctx, path, authority.Options{Scheme: scheme})
		if err != nil {
			return nil, err
		}
		return a, nil
	}
}
