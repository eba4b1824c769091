package riakstore

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"time"

	riak "github.com/basho/riak-go-client"

	"github.com/chibrary/chibrary/internal/riakconn"
)

// consensusWait is how long Open waits for a first strongly consistent
// request, longer than a leader election, before it says it is off.
const consensusWait = 15 * time.Second

// ErrSetup is returned by Open when the cluster is not set up to hold an
// archive.
var ErrSetup = errors.New("riakstore: cluster not set up for chibrary")

// typeRole is what a bucket type must be for its use.
type typeRole struct {
	what  string // what the archive keeps there
	props string // the JSON properties to create it with
	// check says what is wrong with a type's properties ("" when
	// nothing), and whether an update of the type can set it right.
	check func(p *riak.FetchBucketPropsResponse) (why string, update bool)
}

var (
	roleKV = typeRole{
		what:  "messages",
		props: `{"props":{"allow_mult":true,"last_write_wins":false}}`,
		check: func(p *riak.FetchBucketPropsResponse) (string, bool) {
			switch {
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types, not plain values", p.DataType), false
			case p.Consistent:
				return "it is consistent (strongly consistent types are for the claims)", false
			case p.LastWriteWins:
				return "last_write_wins is true: Riak would drop one of two concurrent writes by timestamp", true
			case !p.AllowMult:
				return "allow_mult is false: Riak would resolve concurrent writes by dropping one", true
			}
			return "", false
		},
	}
	roleOnce = typeRole{
		what:  "the digest index",
		props: `{"props":{"write_once":true}}`,
		// write_once is not among the properties this client library
		// reads.
		check: func(p *riak.FetchBucketPropsResponse) (string, bool) {
			switch {
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types, not plain values", p.DataType), false
			case p.Consistent:
				return "it is consistent", false
			}
			return "", false
		},
	}
	roleCounters = typeRole{
		what:  "the message count",
		props: `{"props":{"datatype":"counter"}}`,
		check: func(p *riak.FetchBucketPropsResponse) (string, bool) {
			if p.DataType != "counter" {
				dt := p.DataType
				if dt == "" {
					dt = "none"
				}
				return fmt.Sprintf("its datatype is %s, want counter", dt), false
			}
			return "", false
		},
	}
	roleClaims = typeRole{
		what:  "the binding, the leases and the ledger of claims",
		props: `{"props":{"consistent":true}}`,
		check: func(p *riak.FetchBucketPropsResponse) (string, bool) {
			switch {
			case !p.Consistent:
				return "consistent is false: the claims need compare-and-set, which only a strongly consistent bucket type gives", false
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types", p.DataType), false
			}
			return "", false
		},
	}
)

// createHint says how to create a bucket type on today's Riak and on 2.x.
func createHint(name string, r typeRole) string {
	return fmt.Sprintf("create it once per cluster, on one node: riak eval 'riak_kv_console:bucket_type_create([\"%s\", \"%s\"]).' then riak eval 'riak_core_bucket_type:activate(<<\"%s\">>).' (Riak 2.x: riak-admin bucket-type create %s '%s', then riak-admin bucket-type activate %s)", name, erlString(r.props), name, name, r.props, name)
}

// updateHint says how to change the properties of a bucket type on
// today's Riak (through riak eval: `riak admin bucket-type update`
// garbles its argument) and on 2.x.
func updateHint(name string, r typeRole) string {
	return fmt.Sprintf("change them once per cluster, on one node: riak eval 'riak_kv_console:bucket_type_update([\"%s\", \"%s\"]).' (Riak 2.x: riak-admin bucket-type update %s '%s')", name, erlString(r.props), name, r.props)
}

// erlString escapes JSON for an Erlang string literal.
func erlString(json string) string { return strings.ReplaceAll(json, `"`, `\"`) }

// checkType checks the fetched properties of a bucket type for its role;
// it returns "" when they fit.
func checkType(name string, r typeRole, p *riak.FetchBucketPropsResponse) string {
	if p == nil {
		return fmt.Sprintf("bucket type %s (for %s) answered no properties", name, r.what)
	}
	why, update := r.check(p)
	switch {
	case why == "":
		return ""
	case update:
		return fmt.Sprintf("bucket type %s (for %s) is not set up as it must be: %s; it must have the properties %s: %s", name, r.what, why, r.props, updateHint(name, r))
	}
	return fmt.Sprintf("bucket type %s (for %s) is not set up as it must be: %s; it must have the properties %s, and datatype, consistent and write_once cannot be changed once a type exists: create a type with them under another name (Options.Types names it)", name, r.what, why, r.props)
}

// check verifies at Open that the cluster can hold the archive.
func (s *Store) check(ctx context.Context) error {
	// With no node answering at all, fail fast rather than wait RetryFor.
	if _, err := s.doFor(ctx, min(s.opts.RetryFor, 5*time.Second), func() (riak.Command, error) { return (&riak.PingCommandBuilder{}).Build() }); err != nil {
		return fmt.Errorf("no node answers: %w", err)
	}
	roles := []struct {
		name string
		role typeRole
	}{
		{s.b.types.KV, roleKV},
		{s.b.types.Once, roleOnce},
		{s.b.types.Counters, roleCounters},
		{s.b.types.Claims, roleClaims},
	}
	for _, r := range roles {
		cmd, err := s.do(ctx, func() (riak.Command, error) {
			return riak.NewFetchBucketTypePropsCommandBuilder().WithBucketType(r.name).Build()
		})
		if err != nil {
			if re, ok := riakconn.RiakError(err); ok && !riakconn.IsTransient(re) {
				return fmt.Errorf("%w: bucket type %s (for %s) is missing (Riak says %q): %s", ErrSetup, r.name, r.role.what, re.Errmsg, createHint(r.name, r.role))
			}
			return fmt.Errorf("cannot read the properties of bucket type %s: %w", r.name, err)
		}
		p := cmd.(*riak.FetchBucketTypePropsCommand).Response
		if why := checkType(r.name, r.role, p); why != "" {
			return fmt.Errorf("%w: %s", ErrSetup, why)
		}
		if p.NVal < 3 {
			s.log.Warn("bucket type keeps fewer than 3 replicas: a node lost can lose messages or stop writes", "type", r.name, "n_val", p.NVal)
		}
	}
	// Without the consensus subsystem every consistent request is
	// "unavailable", as during a leader election, so the first is tried
	// only for consensusWait; but while a node is down the election may
	// take longer, and then it is tried as long as any request.
	fetch := func() (riak.Command, error) {
		return riak.NewFetchValueCommandBuilder().
			WithBucketType(s.b.types.Claims).WithBucket(s.b.meta).WithKey(bindingKey).
			WithTimeout(s.opts.Timeout).Build()
	}
	wait := min(s.opts.RetryFor, consensusWait)
	_, err := s.doFor(ctx, wait, fetch)
	var down []string
	if re, ok := riakconn.RiakError(err); err != nil && ctx.Err() == nil && (!ok || riakconn.IsTransient(re)) && s.opts.RetryFor > wait {
		if down = unreachable(ctx, s.opts.Nodes); len(down) > 0 {
			s.log.Warn("riak nodes do not answer: waiting for the cluster's consensus without them", "nodes", down, "for", s.opts.RetryFor-wait)
			_, err = s.doFor(ctx, s.opts.RetryFor-wait, fetch)
			wait = s.opts.RetryFor
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			return err
		}
		said := err.Error()
		if re, ok := riakconn.RiakError(err); ok {
			said = re.Errmsg
		}
		if len(down) > 0 {
			return fmt.Errorf("cannot read the archive's binding: the cluster served no strongly consistent request for %v while %s did not answer (Riak says %q): %w", wait, strings.Join(down, ", "), said, err)
		}
		return fmt.Errorf("%w: bucket type %s (for %s) is consistent, but the cluster served no strongly consistent request for %v (Riak says %q): strong consistency is off, or its consensus subsystem has not started. Set strong_consistency = on in riak.conf of every node and restart them; the subsystem then starts by itself once the cluster has 3 nodes (on fewer, riak eval 'riak_ensemble_manager:enable().' starts it). riak eval 'riak_ensemble_manager:enabled().' says whether it runs (Riak 2.x: riak-admin ensemble-status)", ErrSetup, s.b.types.Claims, roleClaims.what, wait, said)
	}
	// Reading the binding caches it.
	if _, err := s.binding(ctx); err != nil {
		return fmt.Errorf("cannot read the binding: %w", err)
	}
	// Message-IDs are looked up through a secondary index, which bitcask
	// does not keep.
	_, err = s.do(ctx, func() (riak.Command, error) {
		return riak.NewSecondaryIndexQueryCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.packs).
			WithIndexName(indexMsgID).WithIndexKey("\x00open-check").
			WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		if re, ok := riakconn.RiakError(err); ok && strings.Contains(re.Errmsg, "indexes_not_supported") {
			return fmt.Errorf("%w: the storage backend of bucket type %s keeps no secondary indexes (Riak says %q): use leveled or leveldb (storage_backend in riak.conf), not bitcask", ErrSetup, s.b.types.KV, re.Errmsg)
		}
		return fmt.Errorf("cannot query a secondary index on bucket type %s: %w", s.b.types.KV, err)
	}
	return nil
}

// unreachable returns the nodes that refuse a connection or do not accept
// one within a few seconds.
func unreachable(ctx context.Context, nodes []string) []string {
	var (
		mu   sync.Mutex
		down []string
		wg   sync.WaitGroup
	)
	d := net.Dialer{Timeout: 3 * time.Second}
	for _, addr := range nodes {
		wg.Go(func() {
			c, err := d.DialContext(ctx, "tcp", addr)
			if err != nil {
				mu.Lock()
				down = append(down, addr)
				mu.Unlock()
				return
			}
			c.Close()
		})
	}
	wg.Wait()
	slices.Sort(down)
	return down
}
