package riakstore

import (
	"errors"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/chibrary/chibrary/internal/testkit/riaktest"
	"github.com/chibrary/chibrary/store"
)

// TestConsensus: on a node whose consensus groups all serve, every probe
// is answered.
func TestConsensus(t *testing.T) {
	s, err := Open(t.Context(), testOptions(t))
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Consensus(t.Context()); err != nil {
		t.Errorf("Consensus() = %v, want nil", err)
	}
}

// TestConsensusAfterFaults: on a cluster of 3, two nodes killed at once
// (so that most groups have a majority of restarted members, which wait
// for every member before they serve again) stop some consensus groups,
// which Consensus reports; once both are started again, every group
// serves again by itself, without anything done to the cluster.
func TestConsensusAfterFaults(t *testing.T) {
	if os.Getenv(riaktest.EnvFaults) == "" {
		t.Skipf("set %s=1 to kill nodes of a 3-node cluster (several minutes)", riaktest.EnvFaults)
	}
	nodes := riaktest.Cluster(t, 3)
	var addrs []string
	for _, n := range nodes {
		addrs = append(addrs, n.PB)
	}
	s, err := Open(t.Context(), Options{Nodes: addrs, Archive: testArchive()})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Consensus(t.Context()); err != nil {
		t.Fatalf("Consensus() on a healthy cluster = %v, want nil", err)
	}
	for _, n := range nodes[1:] {
		if err := n.Kill(); err != nil {
			t.Fatal(err)
		}
	}
	err = s.Consensus(t.Context())
	if !errors.Is(err, ErrConsensus) || !errors.Is(err, store.ErrUnavailable) {
		t.Fatalf("Consensus() with 2 nodes of 3 killed = %v, want ErrConsensus and store.ErrUnavailable", err)
	}
	if !strings.Contains(err.Error(), "ensemble-status") {
		t.Errorf("Consensus() error does not name the command that shows the groups: %v", err)
	}
	start := time.Now()
	errs := make(chan error, 2)
	for _, n := range nodes[1:] {
		go func() { errs <- n.Restart() }()
	}
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(3 * time.Minute)
	for {
		err := s.Consensus(t.Context())
		if err == nil {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Consensus() %v after both nodes were started again = %v, want every group serving", time.Since(start).Round(time.Second), err)
		}
		time.Sleep(2 * time.Second)
	}
	t.Logf("every group served again %v after the nodes were started again", time.Since(start).Round(time.Second))
}
