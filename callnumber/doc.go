// Package callnumber assigns, encodes and parses call numbers: the short,
// permanent identifiers that name archived messages.
//
// # Layout
//
// A call number is 47 bits, most significant first:
//
//	 46    44 43                                 14 13             0
//	+--------+-------------------------------------+---------------+
//	|version |                 run                 |   sequence    |
//	| 3 bits |               30 bits               |    14 bits    |
//	+--------+-------------------------------------+---------------+
//
// The version is 0 today. A run is issued once, by the run authority, to
// one process, which then numbers its messages 0..16383 in that run without
// talking to anyone. Run 0 is never issued, so no call number is 0, and
// every call number is below 2^47: it fits in a JavaScript number and in a
// signed 64-bit integer.
//
// [Pack] and [Unpack] convert between [Fields] and that 47-bit value. A
// [Codec] then passes the value through the authority's keyed permutation
// (package shuffle) to get the public [Number], which is written as 8
// base62 characters (alphabet 0-9A-Za-z, big-endian, left-padded with 0).
// [Parse] reads them back and refuses, with a [*ParseError] that says why
// and where, anything that is not 8 alphabet characters or is 2^47 or
// more; [Codec.Parse] also refuses numbers that decode to another version
// or to run 0.
//
// 62^8 (about 2.18e14) is larger than 2^47 (about 1.41e14), so 8
// characters always suffice, and some 8-character strings ("zzzzzzzz")
// are out of range. For the same reason the first character can only be
// 0-9, A-Z or a-d: 2^47 / 62^7 is 39.96, so it takes 40 values, the last
// ("d") slightly less often than the others. The largest call number,
// 2^47-1, is "dxlGgaI3".
//
// A [Generator] hands out numbers from a run lease, concurrently and
// without allocating, and takes a new run from its [RunSource] when the
// 16,384 numbers of its run are used up.
//
// # What the shuffle hides
//
// Consecutive call numbers differ only in their low bits before
// shuffling. The figures below were measured by
// callnumber/internal/measure (go run ./callnumber/internal/measure; the
// statistics over 20 keys, the one-run observer over 1,000 keys, the
// archive observer over 100 keys), on all 16,384 numbers of one run and on
// 100,000 numbers drawn from a Generator across consecutive runs.
//
// Scheme bits only moves bits to other positions; it hides little.
//
//   - Neighbours differ in 4.3% of their bits (ideal: 50%), as they did
//     before shuffling: 2 bits on average. 33 of the 47 output bits are the
//     same in every number of a run.
//   - Characters: the first one takes 5 or 6 of its 40 possible values,
//     the second 16 to 22 of 62; chi-square per degree of freedom against
//     the uniform distribution is in the thousands for the first
//     characters (about 1 would be uniform).
//   - An outsider who sees random numbers of one run knows the run's 14
//     varying positions, and so can list all 16,384 numbers of the run
//     and nothing else, after 6.2 numbers on average (median 6, 90th
//     percentile 9, at most 16 over 1,000 keys). In an archive of runs
//     1..64 (about a million messages) the numbers vary in 21 positions:
//     every second number an outsider builds from them is a real one.
//     Only the order of the numbers within a run stays hidden.
//
// Scheme mix (a keyed Feistel network) makes neighbours look unrelated.
//
//   - Neighbours differ in 50.0% of their bits and 98.3% of their
//     characters (98.4% is ideal); no output bit is constant over a run.
//   - Every character is distributed as uniform values below 2^47 would
//     be: chi-square per degree of freedom 0.9 to 1.1 at every position,
//     all 40 first characters seen.
//   - The varying-positions attack gives nothing: after about 8 numbers
//     all 47 positions vary. An outsider's guess names a message of a
//     million-message archive with probability 7.5e-9. To do better they
//     would need the authority's 256-bit key or a cryptanalytic attack on
//     the network. Mix is obfuscation, not a vetted cipher (its round
//     function is SplitMix64, not a pseudo-random function): it stops
//     enumeration and scraping by counting, but call numbers are public
//     names, not secrets.
package callnumber
