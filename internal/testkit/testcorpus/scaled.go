package testcorpus

import (
	"bufio"
	"bytes"
	"compress/gzip"
	"fmt"
	"io"
	"os"
	"regexp"
)

// ScaledCopies is how many copies of the sample make an archive the size
// of the whole linux-mips list it is every 16th message of (84,096
// messages, 603 MB).
const ScaledCopies = 16

var msgIDToken = regexp.MustCompile(`<([^<>\s]+)>`)

// WriteScaled writes the corpus at path copies times to w, as one mbox. In
// copy k every Message-ID token <id> becomes <k.id>, and every message
// gains "X-Chibrary-Copy: k", so that all copies are distinct messages
// that thread as the original does.
func WriteScaled(w io.Writer, path string, copies int) error {
	bw := bufio.NewWriterSize(w, 1<<20)
	for k := range copies {
		if err := writeCopy(bw, path, k); err != nil {
			return err
		}
	}
	return bw.Flush()
}

func writeCopy(w *bufio.Writer, path string, k int) error {
	f, err := os.Open(path)
	if err != nil {
		return err
	}
	defer f.Close()
	var r io.Reader = f
	if zr, err := gzip.NewReader(f); err == nil {
		r = zr
	} else if _, err := f.Seek(0, io.SeekStart); err != nil {
		return err
	}
	br := bufio.NewReaderSize(r, 1<<20)
	inHeader := false
	var field []byte // the threading field being read, folded lines included
	flush := func() error {
		if field == nil {
			return nil
		}
		if k > 0 {
			field = msgIDToken.ReplaceAll(field, []byte(fmt.Sprintf("<%d.$1>", k)))
		}
		_, err := w.Write(field)
		field = nil
		return err
	}
	for {
		line, err := br.ReadBytes('\n')
		if len(line) > 0 {
			switch {
			case bytes.HasPrefix(line, []byte("From ")) && !inHeader:
				// A separator (mboxrd quotes body lines starting "From ").
				if _, err := w.Write(line); err != nil {
					return err
				}
				if _, err := fmt.Fprintf(w, "X-Chibrary-Copy: %d\n", k); err != nil {
					return err
				}
				inHeader = true
			case inHeader && (line[0] == ' ' || line[0] == '\t') && field != nil:
				field = append(field, line...)
			case inHeader:
				if err := flush(); err != nil {
					return err
				}
				if len(bytes.TrimRight(line, "\r\n")) == 0 {
					inHeader = false
				}
				if inHeader && isThreadingField(line) {
					field = append([]byte(nil), line...)
				} else if _, err := w.Write(line); err != nil {
					return err
				}
			default:
				if _, err := w.Write(line); err != nil {
					return err
				}
			}
		}
		if err == io.EOF {
			return flush()
		}
		if err != nil {
			return err
		}
	}
}

func isThreadingField(line []byte) bool {
	for _, name := range []string{"message-id:", "in-reply-to:", "references:"} {
		if len(line) >= len(name) && bytes.EqualFold(line[:len(name)], []byte(name)) {
			return true
		}
	}
	return false
}
