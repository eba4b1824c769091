package catalog

import (
	"math/rand/v2"
	"testing"
)

// BenchmarkPlace reads the place of the corpus's messages in a random
// order, as the message pages of a cold cache ask for them: the
// catalog's share of a cold message page.
func BenchmarkPlace(b *testing.B) {
	c := corpusCatalog(b)
	_, cns, _ := loadCorpus(b)
	r := rand.New(rand.NewPCG(1, 2))
	ctx := b.Context()
	b.ResetTimer()
	for b.Loop() {
		cn := cns[r.IntN(len(cns))]
		if _, err := c.Place(ctx, cn); err != nil {
			b.Fatalf("Place(%s): %v", cn, err)
		}
	}
}
