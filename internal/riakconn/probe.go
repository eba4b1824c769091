package riakconn

import (
	"crypto/sha1"
	"encoding/binary"
	"strconv"
)

// KeyHash is the place of bucketType/bucket/key on Riak's ring: Riak
// hashes the Erlang external term format of {{Type, Bucket}, Key}
// (riak_core_util:chash_key, chash:key_of) with SHA-1, and the 160-bit
// result, read big-endian, picks the partitions, and so the consensus
// group of a strongly consistent type, that serve the key.
func KeyHash(bucketType, bucket, key string) [sha1.Size]byte {
	// 131 version; 104 SMALL_TUPLE_EXT of 2; 109 BINARY_EXT, 4-byte length.
	b := []byte{131, 104, 2, 104, 2}
	for _, s := range []string{bucketType, bucket, key} {
		b = append(b, 109)
		b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
		b = append(b, s...)
	}
	return sha1.Sum(b)
}

// ProbeSlices is how many equal slices of the ring ProbeKeys covers: on a
// ring of that many partitions or fewer (ring sizes are powers of two;
// 64 is Riak's default), every partition holds a probe key, so reading
// them all reaches every consensus group of a type.
const ProbeSlices = 64

// ProbeKeys returns ProbeSlices keys of bucketType/bucket, the i-th of
// which hashes into the i-th slice of the ring.
func ProbeKeys(bucketType, bucket string) []string {
	keys := make([]string, ProbeSlices)
	left := ProbeSlices
	for n := 0; left > 0; n++ {
		k := "probe-" + strconv.Itoa(n)
		h := KeyHash(bucketType, bucket, k)
		i := int(h[0]) >> 2 // the top 6 bits: one of 64 slices
		if keys[i] == "" {
			keys[i] = k
			left--
		}
	}
	return keys
}
