//go:build !race

package catalog

import "github.com/chibrary/chibrary/internal/testkit/testcorpus"

// corpusLimit is how many corpus messages the corpus tests index: all of
// them (see race_test.go).
const corpusLimit = testcorpus.Messages

// raceEnabled: the tests run under the race detector.
const raceEnabled = false
