//go:build race

package catalog

// corpusLimit is how many corpus messages the corpus tests index. Under
// the race detector SQLite (compiled from C to Go) runs some fifteen times
// slower, so they take the first 1,200; `go test ./catalog` without -race
// takes all of them.
const corpusLimit = 1200

// raceEnabled: the tests run under the race detector.
const raceEnabled = true
