//go:build race

package nntpserve

// corpusLimit is how many corpus messages the tests with real clients
// serve. Under the race detector the catalog (SQLite compiled from C to
// Go) indexes much slower, so they take the first 1,200;
// `go test ./nntpserve` without -race takes all of them.
const corpusLimit = 1200
