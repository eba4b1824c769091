//go:build !race

package resolver

// corpusLimit is how many corpus messages the corpus page tests archive:
// all of them (see race_test.go).
const corpusLimit = 0
