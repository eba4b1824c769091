package pisource

// NoPacks makes r read every message with git cat-file.
func NoPacks(r *Reader) { r.noPacks = true }

// NoWalk makes r read every epoch's history with git log.
func NoWalk(r *Reader) { r.noWalk = true }
