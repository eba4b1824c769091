//go:build race

package resolver

// corpusLimit is how many corpus messages the corpus page tests archive.
// Under the race detector the catalog's SQLite (compiled from C to Go)
// runs some fifteen times slower, so they take the first 1,200; without
// -race they take all of them.
const corpusLimit = 1200
