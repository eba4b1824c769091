package testcorpus

import (
	"bytes"
	"io"
	"slices"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/mailmsg"
	"github.com/chibrary/chibrary/mbox"
)

func TestWriteScaled(t *testing.T) {
	const src = "../../../fixtures/mbox/demo.mbox"
	var b bytes.Buffer
	if err := WriteScaled(&b, src, 3); err != nil {
		t.Fatal(err)
	}
	r := mbox.NewReader(&b, mbox.Options{})
	var metas []mailmsg.Meta
	var raws [][]byte
	for {
		m, err := r.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		meta, _ := mailmsg.Parse(m.Raw)
		metas = append(metas, meta)
		raws = append(raws, m.Raw)
	}
	if len(metas)%3 != 0 || len(metas) < 3*15 {
		t.Fatalf("3 copies of demo.mbox = %d messages, want a multiple of 3 (and the demo has 20)", len(metas))
	}
	n := len(metas) / 3
	for i := range n {
		for k := 1; k < 3; k++ {
			orig, cp := metas[i], metas[k*n+i]
			prefix := string(rune('0'+k)) + "."
			want := orig.MessageID
			if want != "" {
				want = prefix + want
			}
			if cp.MessageID != want {
				t.Errorf("copy %d of message %d: Message-ID %q, want %q", k, i, cp.MessageID, want)
			}
			var refs []string
			for _, id := range orig.References {
				refs = append(refs, prefix+id)
			}
			if !slices.Equal(cp.References, refs) {
				t.Errorf("copy %d of message %d: References %q, want %q", k, i, cp.References, refs)
			}
			if cp.Subject != orig.Subject {
				t.Errorf("copy %d of message %d: Subject %q, want %q", k, i, cp.Subject, orig.Subject)
			}
			if bytes.Equal(raws[i], raws[k*n+i]) {
				t.Errorf("copy %d of message %d has the same bytes as the original", k, i)
			}
			if !strings.Contains(string(raws[k*n+i]), "X-Chibrary-Copy: ") {
				t.Errorf("copy %d of message %d has no X-Chibrary-Copy line", k, i)
			}
		}
	}
}
