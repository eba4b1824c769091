package riakconn

import (
	"encoding/hex"
	"testing"
)

func TestKeyHash(t *testing.T) {
	// From the kit's node: binary:encode_hex(riak_core_util:chash_key(
	// {{<<"chibrary_claims">>,<<"a.health">>},<<"k1">>})).
	const want = "52ea59c5e0709faa631e83fe8bc62f4825a53f54"
	h := KeyHash("chibrary_claims", "a.health", "k1")
	if got := hex.EncodeToString(h[:]); got != want {
		t.Errorf("KeyHash() = %s, want %s", got, want)
	}
}

func TestProbeKeys(t *testing.T) {
	keys := ProbeKeys("chibrary_claims", "a.health")
	if len(keys) != ProbeSlices {
		t.Fatalf("ProbeKeys() gave %d keys, want %d", len(keys), ProbeSlices)
	}
	for i, k := range keys {
		h := KeyHash("chibrary_claims", "a.health", k)
		if got := int(h[0]) * ProbeSlices / 256; got != i {
			t.Errorf("key %d %q hashes into slice %d, want %d", i, k, got, i)
		}
	}
}
