package batch

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/chibrary/chibrary/store"
)

func TestCheckDigests(t *testing.T) {
	var msgs []store.Message
	for i := range 50 {
		raw := fmt.Appendf(nil, "Subject: %d\r\n\r\nbody %d\r\n", i, i)
		msgs = append(msgs, store.Message{Number: 1, Raw: raw, Digest: store.DigestOf(raw)})
	}
	if err := CheckDigests(msgs); err != nil {
		t.Fatalf("CheckDigests(good batch) = %v, want nil", err)
	}
	if err := CheckDigests(nil); err != nil {
		t.Fatalf("CheckDigests(nil) = %v, want nil", err)
	}
	// The digest of the LF form is the digest of the CRLF form.
	msgs[3].Digest = store.DigestOf([]byte(strings.ReplaceAll(string(msgs[3].Raw), "\r\n", "\n")))
	if err := CheckDigests(msgs); err != nil {
		t.Fatalf("CheckDigests(LF digest of a CRLF message) = %v, want nil", err)
	}
	// A digest of another message: the message would pass for a duplicate.
	msgs[37].Digest = msgs[12].Digest
	err := CheckDigests(msgs)
	if !errors.Is(err, store.ErrInvalidMessage) || !strings.Contains(err.Error(), "message 38 of the batch") {
		t.Fatalf("CheckDigests(batch with a wrong digest) = %v, want ErrInvalidMessage naming message 38", err)
	}
}
