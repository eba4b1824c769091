package pisource

// UseBatch makes r ask git cat-file with --batch, as it does with a git
// older than 2.36, rather than --batch-command --buffer; before the first
// Next.
func UseBatch(r *Reader) { r.batchCommand = false }
