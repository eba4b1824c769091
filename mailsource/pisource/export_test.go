package pisource

// NoPacks makes r read every message with git cat-file.
func NoPacks(r *Reader) { r.noPacks = true }
