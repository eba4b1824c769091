//go:build !race

package imapserve

import "github.com/chibrary/chibrary/internal/testkit/testcorpus"

// corpusLimit is how many corpus messages the tests with real clients
// serve: all of them (see race_test.go).
const corpusLimit = testcorpus.Messages
