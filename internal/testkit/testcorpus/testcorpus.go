// Package testcorpus finds the shared corpus of real mail the tests and
// benchmarks use: linux-mips-sample.mbox.gz, 5,256 messages of the
// linux-mips list (gzip, mboxrd). It is not part of the repository: it lives
// in ../shared/corpus beside the module root, or wherever $CHIBRARY_CORPUS
// says. Tests that need it skip when it is absent.
package testcorpus

import (
	"os"
	"path/filepath"
	"testing"
)

// Messages is the number of messages in the corpus.
const Messages = 5256

const name = "linux-mips-sample.mbox.gz"

// Path returns the corpus file, or skips tb when it is absent.
func Path(tb testing.TB) string {
	tb.Helper()
	p := Find()
	if p == "" {
		tb.Skip("shared corpus not found: set CHIBRARY_CORPUS to linux-mips-sample.mbox.gz, or put it in ../shared/corpus beside the module root")
	}
	return p
}

// Find returns the corpus file, or "" when it is absent. $CHIBRARY_CORPUS
// may name the file or the directory holding it.
func Find() string {
	if p := os.Getenv("CHIBRARY_CORPUS"); p != "" {
		fi, err := os.Stat(p)
		if err == nil && fi.IsDir() {
			p = filepath.Join(p, name)
			_, err = os.Stat(p)
		}
		if err != nil {
			return ""
		}
		return p
	}
	dir, err := os.Getwd()
	if err != nil {
		return ""
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			p := filepath.Join(dir, "..", "shared", "corpus", name)
			if _, err := os.Stat(p); err == nil {
				return p
			}
			return ""
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}
