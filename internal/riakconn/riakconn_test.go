package riakconn

import (
	"errors"
	"net"
	"reflect"
	"testing"

	riak "github.com/basho/riak-go-client"
)

func TestIsFailed(t *testing.T) {
	failed := riak.RiakError{Errcode: 0, Errmsg: "failed"}
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"nil", nil, false},
		{"failed", failed, true},
		{"wrapped by the cluster", riak.ClientError{Errmsg: riak.ErrClusterNoNodesAvailable, InnerError: failed}, true},
		{"match_found", riak.RiakError{Errmsg: "match_found"}, false},
		{"other riak error mentioning failure", riak.RiakError{Errmsg: "{precommit_failed, x}"}, false},
		{"other error", errors.New("failed"), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := IsFailed(tt.err); got != tt.want {
				t.Errorf("IsFailed(%v) = %v, want %v", tt.err, got, tt.want)
			}
		})
	}
}

func TestClassify(t *testing.T) {
	netErr := &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connection refused")}
	tests := []struct {
		name        string
		err         error
		unavailable bool
	}{
		{"nil", nil, false},
		{"no node answered", riak.ClientError{Errmsg: "no nodes available", InnerError: netErr}, true},
		{"network error", netErr, true},
		{"riak timeout", riak.RiakError{Errmsg: "timeout"}, true},
		{"overloaded vnode", riak.ClientError{Errmsg: "no nodes available", InnerError: riak.RiakError{Errmsg: "overload"}}, true},
		{"too few replicas up", riak.RiakError{Errmsg: "{insufficient_vnodes,1,need,2}"}, true},
		{"consensus without quorum", riak.RiakError{Errmsg: "unavailable"}, true},
		{"a node starting up", riak.ClientError{Errmsg: "no nodes available", InnerError: riak.RiakError{Errmsg: "Unknown message code: 9"}}, true},
		{"refused conditional write", riak.ClientError{Errmsg: "no nodes available", InnerError: riak.RiakError{Errmsg: "failed"}}, false},
		{"missing bucket type", riak.RiakError{Errmsg: "Error no bucket type `chibrary_kv`"}, false},
	}
	// A caller's own sentinel marks what could not be served, as
	// ErrUnavailable does by default.
	mine := errors.New("mine: unavailable")
	for _, tt := range tests {
		for _, sentinel := range []error{ErrUnavailable, mine} {
			t.Run(tt.name+"/"+sentinel.Error(), func(t *testing.T) {
				got := classify(sentinel, tt.err)
				if errors.Is(got, sentinel) != tt.unavailable {
					t.Errorf("classify(%v, %v) = %v, want unavailable %v", sentinel, tt.err, got, tt.unavailable)
				}
				if tt.err != nil && !tt.unavailable && got != tt.err {
					t.Errorf("classify(%v, %v) = %v, want it unchanged", sentinel, tt.err, got)
				}
			})
		}
	}
}

// A read answered "failed" (a consistent key whose ensemble lost a
// member) is tried again; a write answered so was refused.
func TestClassifyAnswer(t *testing.T) {
	failed := riak.ClientError{Errmsg: "all retries exhausted", InnerError: riak.RiakError{Errmsg: "failed"}}
	fetch, err := riak.NewFetchValueCommandBuilder().WithBucketType("t").WithBucket("b").WithKey("k").Build()
	if err != nil {
		t.Fatal(err)
	}
	put, err := riak.NewStoreValueCommandBuilder().WithBucketType("t").WithBucket("b").WithKey("k").
		WithContent(&riak.Object{Value: []byte("v")}).Build()
	if err != nil {
		t.Fatal(err)
	}
	if got := classifyAnswer(ErrUnavailable, fetch, failed); !errors.Is(got, ErrUnavailable) {
		t.Errorf("a read answered failed: %v, want unavailable", got)
	}
	if got := classifyAnswer(ErrUnavailable, put, failed); errors.Is(got, ErrUnavailable) || !IsFailed(got) {
		t.Errorf("a write answered failed: %v, want refused as it is", got)
	}
	if got := classifyAnswer(ErrUnavailable, fetch, nil); got != nil {
		t.Errorf("a read answered: %v, want nil", got)
	}
}

func TestPrimeNodeManager(t *testing.T) {
	n, err := riak.NewNode(&riak.NodeOptions{RemoteAddress: "127.0.0.1:1"})
	if err != nil {
		t.Fatal(err)
	}
	c, err := riak.NewCluster(&riak.ClusterOptions{Nodes: []*riak.Node{n}})
	if err != nil {
		t.Fatal(err)
	}
	if err := PrimeNodeManager(c); err != nil {
		t.Fatalf("PrimeNodeManager = %v: the client library changed; rework the workaround", err)
	}
	idx := reflect.ValueOf(c).Elem().FieldByName("nodeManager").Elem().Elem().FieldByName("nodeIndex").Int()
	if idx != 1 {
		t.Errorf("the node manager's index after PrimeNodeManager = %d, want 1", idx)
	}
}

func TestDialOptions(t *testing.T) {
	tests := []struct {
		name string
		opts Options
	}{
		{"no nodes", Options{}},
		{"negative timeout", Options{Nodes: []string{"127.0.0.1:1"}, Timeout: -1}},
		{"negative retry", Options{Nodes: []string{"127.0.0.1:1"}, RetryFor: -1}},
		{"more kept open than allowed", Options{Nodes: []string{"127.0.0.1:1"}, MinConnections: 8, MaxConnections: 4}},
		{"too many connections", Options{Nodes: []string{"127.0.0.1:1"}, MaxConnections: 5000}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if c, err := Dial(tt.opts); err == nil {
				c.Close()
				t.Errorf("Dial(%+v) = nil error, want one", tt.opts)
			}
		})
	}
}
