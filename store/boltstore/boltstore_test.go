package boltstore_test

import (
	"context"
	"path/filepath"
	"testing"

	"github.com/chibrary/chibrary/store"
	"github.com/chibrary/chibrary/store/boltstore"
	"github.com/chibrary/chibrary/store/storetest"
)

func TestConformance(t *testing.T) {
	for _, tt := range []struct {
		name string
		opts boltstore.Options
	}{
		{"default", boltstore.Options{}},
		{"no linger", boltstore.Options{Linger: -1}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			storetest.Run(t, func(t *testing.T) storetest.Opener {
				path := filepath.Join(t.TempDir(), "data", "messages.db")
				return func(ctx context.Context) (store.Store, error) {
					return boltstore.Open(ctx, path, tt.opts)
				}
			})
		})
	}
}
