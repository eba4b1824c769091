package resolver

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"io"
	"os"
	"path/filepath"
	"testing"
)

// corpusPath is the shared sample of real mail (see TESTING.md).
var corpusPath = filepath.Join("..", "..", "shared", "corpus", "linux-mips-sample.mbox.gz")

// readCorpus returns up to limit messages (0: all) of the shared corpus,
// split as mboxrd (RFC 4155 and the mboxrd quoting): a "From " line after
// a blank line (or at the start) begins a message; the blank line before it
// and the From_ line are not part of any message; one '>' is removed from
// lines matching ^>+From . It skips the test when the corpus is absent.
func readCorpus(tb testing.TB, limit int) [][]byte {
	tb.Helper()
	f, err := os.Open(corpusPath)
	if os.IsNotExist(err) {
		tb.Skipf("shared corpus %s not present", corpusPath)
	}
	if err != nil {
		tb.Fatal(err)
	}
	defer f.Close()
	zr, err := gzip.NewReader(f)
	if err != nil {
		tb.Fatal(err)
	}
	br := bufio.NewReaderSize(zr, 1<<16)
	var (
		msgs      [][]byte
		cur       *bytes.Buffer
		prevBlank = true
	)
	flush := func() {
		if cur == nil {
			return
		}
		b := cur.Bytes()
		if bytes.HasSuffix(b, []byte("\n\n")) {
			b = b[:len(b)-1] // the separating blank line
		}
		msgs = append(msgs, bytes.Clone(b))
	}
	for limit == 0 || len(msgs) < limit {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case prevBlank && bytes.HasPrefix(line, []byte("From ")):
				flush()
				cur = new(bytes.Buffer)
			case cur != nil:
				if q := bytes.TrimLeft(line, ">"); len(q) < len(line) && bytes.HasPrefix(q, []byte("From ")) {
					line = line[1:]
				}
				cur.Write(line)
			}
			prevBlank = len(bytes.TrimRight(line, "\r\n")) == 0
		}
		if err == io.EOF {
			flush()
			break
		}
		if err != nil {
			tb.Fatal(err)
		}
	}
	if len(msgs) == 0 {
		tb.Fatalf("no messages in %s", corpusPath)
	}
	return msgs
}
