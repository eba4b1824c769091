// Package callnumber assigns, encodes and parses call numbers: the short,
// permanent identifiers that name archived messages. A call number is 47
// bits, most significant first:
//
//	 46    44 43                                 14 13             0
//	+--------+-------------------------------------+---------------+
//	|version |                 run                 |   sequence    |
//	| 3 bits |               30 bits               |    14 bits    |
//	+--------+-------------------------------------+---------------+
//
// The run authority issues each run once, to one process, which then
// numbers its messages without talking to anyone. Run 0 is never issued, so
// no call number is 0, and all are below 2^47 (a JavaScript number). A
// [Codec] shuffles the value with the authority's keyed permutation
// (package shuffle) and writes it as 8 base62 characters; since 62^8 > 2^47,
// some strings ("zzzzzzzz") are out of range. The shuffle hides the order
// of numbers, but call numbers are public names, not secrets.
package callnumber
