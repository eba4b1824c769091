// Package riakconn is a connection to a Riak cluster: it runs commands on
// the next node that can take them, retries what the cluster could not
// serve (and only that), and tells Riak's refusals from its failures.
// The Riak run authority and the Riak store both reach Riak through it.
package riakconn

import (
	"context"
	"errors"
	"fmt"
	"log"
	"log/slog"
	"reflect"
	"strings"
	"sync"
	"sync/atomic"
	"time"
	"unsafe"

	riak "github.com/basho/riak-go-client"
)

// ErrUnavailable: the cluster could not serve a request in time; retry later.
var ErrUnavailable = errors.New("riak: cluster unavailable")

// Options configure Dial; Nodes is required, zero values are defaults.
type Options struct {
	Nodes          []string      // protocol buffers addresses, host:port
	Timeout        time.Duration // of every request; zero means 10 seconds
	RetryFor       time.Duration // see Do; zero means 60 seconds
	MinConnections int           // per node, kept open; zero means 1
	MaxConnections int           // per node; zero means 64
	// Unavailable marks the errors of requests the cluster could not
	// serve in time, those Do tries again; nil means ErrUnavailable. A
	// store passes its own sentinel, so that its callers test one error
	// whatever the backend.
	Unavailable error
	Logger      *slog.Logger // the client library's lines, at debug level
}

// Conn is a connection to a cluster. It is safe for concurrent use.
type Conn struct {
	opts     Options
	cluster  *riak.Cluster
	requests atomic.Int64
	// inflight counts requests the library still runs, even those whose
	// caller gave up: stopping the cluster under them panics the library.
	inflight sync.WaitGroup
	mu       sync.RWMutex
	closed   bool
}

// ErrClosed is returned by Do after Close.
var ErrClosed = errors.New("riak: connection closed")

// Dial sends nothing: the first Do finds out whether a node answers.
func Dial(opts Options) (*Conn, error) {
	if len(opts.Nodes) == 0 {
		return nil, errors.New("cannot connect to riak: no nodes given")
	}
	if opts.Timeout == 0 {
		opts.Timeout = 10 * time.Second
	}
	if opts.RetryFor == 0 {
		opts.RetryFor = 60 * time.Second
	}
	if opts.MinConnections == 0 {
		opts.MinConnections = 1
	}
	if opts.MaxConnections == 0 {
		opts.MaxConnections = 64
	}
	if opts.Unavailable == nil {
		opts.Unavailable = ErrUnavailable
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.DiscardHandler)
	}
	if opts.Timeout < 0 || opts.RetryFor < 0 || opts.MinConnections < 1 || opts.MaxConnections < opts.MinConnections || opts.MaxConnections > 4096 {
		return nil, fmt.Errorf("cannot connect to riak: bad options (timeout %v, retry for %v, connections %d to %d)", opts.Timeout, opts.RetryFor, opts.MinConnections, opts.MaxConnections)
	}
	RouteClientLogs(opts.Logger)
	var nodes []*riak.Node
	for _, addr := range opts.Nodes {
		n, err := riak.NewNode(&riak.NodeOptions{
			RemoteAddress:  addr,
			MinConnections: uint16(opts.MinConnections),
			MaxConnections: uint16(opts.MaxConnections),
			ConnectTimeout: min(opts.Timeout, 5*time.Second),
			RequestTimeout: opts.Timeout,
		})
		if err != nil {
			return nil, fmt.Errorf("cannot use riak node %s: %w", addr, err)
		}
		nodes = append(nodes, n)
	}
	// One attempt per command in the client: Do tries again what is
	// worth it, never a conditional write Riak refused.
	cluster, err := riak.NewCluster(&riak.ClusterOptions{Nodes: nodes, ExecutionAttempts: 1})
	if err != nil {
		return nil, fmt.Errorf("cannot set up riak cluster client: %w", err)
	}
	if err := PrimeNodeManager(cluster); err != nil {
		return nil, fmt.Errorf("cannot set up riak cluster client: %w", err)
	}
	if err := cluster.Start(); err != nil {
		return nil, fmt.Errorf("cannot start riak cluster client: %w", err)
	}
	return &Conn{opts: opts, cluster: cluster}, nil
}

// Timeout returns the per-request timeout.
func (c *Conn) Timeout() time.Duration { return c.opts.Timeout }

// Requests returns how many requests were sent (each attempt counts).
func (c *Conn) Requests() int64 { return c.requests.Load() }

// Do runs a command, retrying on the next node what could not be served
// (Options.Unavailable) for up to Options.RetryFor, with a growing pause;
// Riak's own answers (not found, a refused conditional write) are
// returned at once.
func (c *Conn) Do(ctx context.Context, build func() (riak.Command, error)) (riak.Command, error) {
	return c.DoFor(ctx, c.opts.RetryFor, build)
}

// DoFor is Do, trying again for up to retryFor.
func (c *Conn) DoFor(ctx context.Context, retryFor time.Duration, build func() (riak.Command, error)) (riak.Command, error) {
	c.mu.RLock()
	defer c.mu.RUnlock()
	if c.closed {
		return nil, ErrClosed
	}
	var err error
	start := time.Now()
	for attempt := 0; ; attempt++ {
		if attempt > 0 {
			wait := min(25*time.Millisecond<<min(attempt, 6), time.Second)
			if time.Since(start)+wait > retryFor {
				return nil, err
			}
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return nil, context.Cause(ctx)
			}
		}
		cmd, berr := build()
		if berr != nil {
			return nil, berr
		}
		if err = c.exec(ctx, cmd); err == nil {
			return cmd, nil
		}
		if !errors.Is(err, c.opts.Unavailable) || ctx.Err() != nil {
			return nil, err
		}
	}
}

// exec gives up waiting when ctx ends; the request ends at its timeout.
func (c *Conn) exec(ctx context.Context, cmd riak.Command) error {
	c.requests.Add(1)
	a := &riak.Async{Command: cmd, Done: make(chan riak.Command, 1)}
	c.inflight.Add(1)
	if err := c.cluster.ExecuteAsync(a); err != nil {
		c.inflight.Done()
		return classify(c.opts.Unavailable, err)
	}
	select {
	case <-a.Done:
		c.inflight.Done()
	case <-ctx.Done():
		go func() {
			<-a.Done
			c.inflight.Done()
		}()
		return context.Cause(ctx)
	}
	if a.Error != nil {
		return classifyAnswer(c.opts.Unavailable, cmd, a.Error)
	}
	return classifyAnswer(c.opts.Unavailable, cmd, cmd.Error())
}

// Close waits for every request in flight, even abandoned, then stops.
func (c *Conn) Close() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return nil
	}
	c.closed = true
	c.inflight.Wait()
	if err := c.cluster.Stop(); err != nil {
		return fmt.Errorf("cannot stop riak cluster client: %w", err)
	}
	return nil
}

// RiakError finds Riak's own answer in err, through ClientError (no Unwrap).
func RiakError(err error) (riak.RiakError, bool) {
	for err != nil {
		var re riak.RiakError
		if errors.As(err, &re) {
			return re, true
		}
		var ce riak.ClientError
		if !errors.As(err, &ce) {
			return riak.RiakError{}, false
		}
		err = ce.InnerError
	}
	return riak.RiakError{}, false
}

// IsFailed reports whether err is Riak's refusal of a conditional write on
// a consistent bucket.
func IsFailed(err error) bool {
	re, ok := RiakError(err)
	return ok && strings.TrimSpace(re.Errmsg) == "failed"
}

// classify marks errors that say the cluster could not serve a request in
// time with unavailable; Riak's other answers are returned as they are.
func classify(unavailable, err error) error {
	if err == nil {
		return nil
	}
	if re, ok := RiakError(err); ok && !IsTransient(re) {
		return err
	}
	return fmt.Errorf("%w: %w", unavailable, err)
}

// classifyAnswer is classify for the answer to cmd: Riak's "failed" to a
// read means that a consistent key's ensemble cannot serve it now, where to
// a write it means refused.
func classifyAnswer(unavailable error, cmd riak.Command, err error) error {
	if _, read := cmd.(*riak.FetchValueCommand); read && IsFailed(err) {
		return fmt.Errorf("%w: %w", unavailable, err)
	}
	return classify(unavailable, err)
}

// IsTransient reports whether Riak could not serve the request now, rather
// than refused it. A node starting up answers "Unknown message code".
func IsTransient(re riak.RiakError) bool {
	msg := strings.ToLower(re.Errmsg)
	for _, s := range []string{"timeout", "overload", "insufficient_vnodes", "r_val_unsatisfied", "w_val_unsatisfied", "pw_val_unsatisfied", "pr_val_unsatisfied", "unavailable", "all_nodes_down", "nodedown", "unknown message code"} {
		if strings.Contains(msg, s) {
			return true
		}
	}
	return false
}

// PrimeNodeManager works around a bug of riak-go-client's default node
// manager: ExecuteOnNode goes round the nodes until its round-robin index,
// incremented after each try, comes back to where it started, which an
// initial 0 never does, so that a command no node can take spins for ever.
// Setting the unexported index to 1 (through reflect and unsafe) makes it
// give up after one round; if the library changed shape, this refuses.
func PrimeNodeManager(c *riak.Cluster) error {
	bad := errors.New("riak-go-client's node manager is not the one this package knows (a newer client?): see PrimeNodeManager")
	m := reflect.ValueOf(c).Elem().FieldByName("nodeManager")
	if !m.IsValid() || m.Kind() != reflect.Interface || m.IsNil() {
		return bad
	}
	p := m.Elem()
	if p.Kind() != reflect.Pointer || p.Elem().Kind() != reflect.Struct || p.Elem().Type().Name() != "defaultNodeManager" {
		return bad
	}
	idx := p.Elem().FieldByName("nodeIndex")
	if !idx.IsValid() || idx.Kind() != reflect.Int {
		return bad
	}
	reflect.NewAt(idx.Type(), unsafe.Pointer(idx.UnsafeAddr())).Elem().SetInt(1)
	return nil
}

// clientLogs: the library logs to stderr through package variables.
var clientLogs sync.Once

// RouteClientLogs sends the library's log lines to l at debug level, once.
func RouteClientLogs(l *slog.Logger) {
	clientLogs.Do(func() {
		w := &lineLogger{l: l}
		riak.SetLogger(log.New(w, "", 0))
		riak.SetErrorLogger(log.New(w, "", 0))
	})
}

type lineLogger struct{ l *slog.Logger }

func (w *lineLogger) Write(p []byte) (int, error) {
	w.l.Debug("riak client", "line", strings.TrimSpace(string(p)))
	return len(p), nil
}
