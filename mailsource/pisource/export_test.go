package pisource

// NoPacks makes r read every message with git cat-file.
func NoPacks(r *Reader) { r.noPacks = true }

// NoWalk makes r read every epoch's history with git log.
func NoWalk(r *Reader) { r.noWalk = true }

// FirstDiff is the index of the first string where a and b differ, or
// the shorter one's length.
func FirstDiff(a, b []string) int { return firstDiff(a, b) }

// ReadAll reads every message of r (see readAll).
var ReadAll = readAll
