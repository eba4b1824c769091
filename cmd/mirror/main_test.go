package main

import (
	"path/filepath"
	"testing"

	"github.com/chibrary/chibrary/internal/testkit/riaktest"
)

// A SIGTERM while a following mirror still opens its store (a Riak node
// that does not answer) is a stop, exit status 0, as one while following.
func TestSignalWhileStarting(t *testing.T) {
	dir := t.TempDir()
	riaktest.StopWhileStarting(t, run, func(addr string) []string {
		return []string{"--from", "http://127.0.0.1:1/", "--store", "riak://" + addr + "/signal", "--state", filepath.Join(dir, "state.json")}
	})
}
