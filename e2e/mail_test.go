package e2e

import (
	"bytes"
	"compress/gzip"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/testcorpus"
	"github.com/chibrary/chibrary/mbox"
)

// corpus caches the shared corpus's messages for the tests of one run.
var corpus struct {
	once sync.Once
	msgs [][]byte
	err  error
}

// mail returns n messages of real mail from the shared corpus (all of it
// for n <= 0), or n synthetic messages when the corpus is absent (4,000
// for n <= 0), so that the tests run everywhere and on real mail where it
// is available.
func mail(t *testing.T, n int) [][]byte {
	t.Helper()
	path := testcorpus.Find()
	if path == "" {
		if n <= 0 {
			n = 4000
		}
		t.Logf("shared corpus absent: using %d synthetic messages", n)
		return synthetic(n)
	}
	corpus.once.Do(func() { corpus.msgs, corpus.err = readCorpus(path) })
	if corpus.err != nil {
		t.Fatalf("cannot read the corpus: %v", corpus.err)
	}
	if n <= 0 || n > len(corpus.msgs) {
		return corpus.msgs
	}
	return corpus.msgs[:n]
}

func readCorpus(path string) ([][]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		return nil, err
	}
	r := mbox.NewReader(zr, mbox.Options{Name: path})
	var msgs [][]byte
	for {
		m, err := r.Next()
		if errors.Is(err, io.EOF) {
			return msgs, nil
		}
		if err != nil {
			return nil, err
		}
		msgs = append(msgs, m.Raw)
	}
}

// synthetic returns n distinct, plausible messages.
func synthetic(n int) [][]byte {
	msgs := make([][]byte, n)
	for i := range msgs {
		msgs[i] = fmt.Appendf(nil, "From: user%d@example.org\nTo: list@example.org\nSubject: synthetic message %d\n"+
			"Message-ID: <synthetic-%d@e2e.test>\nDate: Mon, 1 Jan 2024 00:%02d:%02d +0000\n\n"+
			"Body of message %d.\n\nFrom a line that needs quoting\n%s\n",
			i%97, i, i, i/60%60, i%60, i, bytes.Repeat([]byte("lorem ipsum "), i%50))
	}
	return msgs
}

// mboxOf writes msgs as an mboxrd file.
func mboxOf(t *testing.T, msgs [][]byte) []byte {
	t.Helper()
	var b bytes.Buffer
	w := mbox.NewWriter(&b)
	for _, m := range msgs {
		if err := w.WriteMessage("", m); err != nil {
			t.Fatal(err)
		}
	}
	if err := w.Flush(); err != nil {
		t.Fatal(err)
	}
	return b.Bytes()
}

// watcherMessage is a message delivered over IMAP during a test.
func watcherMessage(test string, i int) []byte {
	return fmt.Appendf(nil, "From: sender%d@example.org\nTo: list@example.org\nSubject: %s delivery %d\n"+
		"Message-ID: <%s-%d@watcher.e2e.test>\nDate: Tue, 2 Jan 2024 10:00:%02d +0000\n\n"+
		"Delivered over IMAP while the test ran (%d).\nFrom here on, a line that looks like an mbox separator.\n",
		i, test, i, test, i, i%60, i)
}
