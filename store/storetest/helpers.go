// Package storetest is the conformance suite of store.Store: every backend
// runs the same tests through Run. It also has the small helpers those
// tests need to act as a run authority.
package storetest

import (
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"testing"
	"time"

	"github.com/chibrary/chibrary/callnumber"
	"github.com/chibrary/chibrary/shuffle"
	"github.com/chibrary/chibrary/store"
)

// Authority issues leases the way a run authority does, for tests: a
// random ID and key, and a fresh random nonce per lease.
type Authority struct {
	ID     string
	Scheme shuffle.Scheme
	Key    shuffle.Key
	Codec  *callnumber.Codec
}

// NewAuthority returns an authority with a random ID and key.
func NewAuthority(t testing.TB, scheme shuffle.Scheme) *Authority {
	t.Helper()
	a := &Authority{ID: randomHex(16), Scheme: scheme}
	rand.Read(a.Key[:])
	c, err := callnumber.NewCodec(scheme, a.Key)
	if err != nil {
		t.Fatalf("NewCodec(%q) = %v", scheme, err)
	}
	a.Codec = c
	return a
}

// Lease returns a new lease of run with a fresh nonce.
func (a *Authority) Lease(run uint32) callnumber.Lease {
	return callnumber.Lease{
		Run:       run,
		Version:   callnumber.CurrentVersion,
		Authority: a.ID,
		Scheme:    a.Scheme,
		Key:       a.Key,
		Nonce:     randomHex(8),
		Program:   "storetest",
		Host:      "test-host",
		PID:       4242,
		Note:      fmt.Sprintf("run %d", run),
		IssuedAt:  time.Now().UTC().Truncate(time.Second),
	}
}

// Number returns the call number of run and seq.
func (a *Authority) Number(t testing.TB, run uint32, seq int) callnumber.Number {
	t.Helper()
	n, err := a.Codec.Encode(callnumber.Fields{Version: callnumber.CurrentVersion, Run: run, Sequence: uint16(seq)})
	if err != nil {
		t.Fatalf("Encode(run %d, seq %d) = %v", run, seq, err)
	}
	return n
}

// Binding returns the binding a store gets from this authority's leases.
func (a *Authority) Binding() store.Binding {
	return store.Binding{Authority: a.ID, Scheme: a.Scheme, Key: a.Key}
}

// Message returns a store.Message with its digest.
func Message(n callnumber.Number, raw []byte, msgid, list string) store.Message {
	return store.Message{Number: n, Raw: raw, Digest: store.DigestOf(raw), MessageID: msgid, List: list}
}

// Mail returns a small, distinct RFC 5322 message.
func Mail(msgid, subject string) []byte {
	h := ""
	if msgid != "" {
		h = "Message-ID: <" + msgid + ">\n"
	}
	return []byte("From: someone@example.org\nTo: list@example.org\nSubject: " + subject + "\n" + h + "\nBody of " + subject + ".\n")
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}
