package resolver

import (
	"context"
	"errors"
	"io"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mailsource"
)

// readCorpus returns up to limit messages (0: all) of the shared corpus of
// real mail, read as the importer reads it. It skips the test when the
// corpus is absent.
func readCorpus(tb testing.TB, limit int) [][]byte {
	tb.Helper()
	src, err := mailsource.Open(context.Background(), testcorpus.Path(tb), mailsource.Options{})
	if err != nil {
		tb.Fatal(err)
	}
	defer src.Close()
	var msgs [][]byte
	for limit == 0 || len(msgs) < limit {
		it, err := src.Next()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
		msgs = append(msgs, it.Raw)
	}
	if len(msgs) == 0 {
		tb.Fatal("no messages in the shared corpus")
	}
	return msgs
}
