package riakstore

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"time"

	riak "github.com/basho/riak-go-client"
)

// ErrSetup is returned by Open when the cluster is not set up to hold an
// archive: a bucket type is missing or has the wrong properties, strong
// consistency is off, or the storage backend has no secondary indexes.
var ErrSetup = errors.New("riakstore: cluster not set up for chibrary")

// typeRole is what a bucket type must be for its use.
type typeRole struct {
	what  string // what the archive keeps there
	props string // the JSON properties to create it with
	check func(p *riak.FetchBucketPropsResponse) string
}

var (
	roleKV = typeRole{
		what:  "messages",
		props: `{"props":{"allow_mult":true,"last_write_wins":false}}`,
		check: func(p *riak.FetchBucketPropsResponse) string {
			switch {
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types, not plain values", p.DataType)
			case p.Consistent:
				return "it is consistent (strongly consistent types are for the claims)"
			case p.LastWriteWins:
				return "last_write_wins is true: Riak would drop one of two concurrent writes by timestamp"
			case !p.AllowMult:
				return "allow_mult is false: Riak would resolve concurrent writes by dropping one"
			}
			return ""
		},
	}
	roleOnce = typeRole{
		what:  "the digest index",
		props: `{"props":{"write_once":true}}`,
		// write_once itself (a speed-up: no read before a write; every
		// key here is written once) is not in the properties this client
		// library reads.
		check: func(p *riak.FetchBucketPropsResponse) string {
			switch {
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types, not plain values", p.DataType)
			case p.Consistent:
				return "it is consistent"
			}
			return ""
		},
	}
	roleCounters = typeRole{
		what:  "the message count",
		props: `{"props":{"datatype":"counter"}}`,
		check: func(p *riak.FetchBucketPropsResponse) string {
			if p.DataType != "counter" {
				dt := p.DataType
				if dt == "" {
					dt = "none"
				}
				return fmt.Sprintf("its datatype is %s, want counter", dt)
			}
			return ""
		},
	}
	roleClaims = typeRole{
		what:  "the binding, the leases and the ledger of claims",
		props: `{"props":{"consistent":true}}`,
		check: func(p *riak.FetchBucketPropsResponse) string {
			switch {
			case !p.Consistent:
				return "consistent is false: the claims need compare-and-set, which only a strongly consistent bucket type gives"
			case p.DataType != "":
				return fmt.Sprintf("it holds %s data types", p.DataType)
			}
			return ""
		},
	}
)

// createHint says how to create a bucket type on today's Riak and on 2.x.
func createHint(name string, r typeRole) string {
	esc := strings.ReplaceAll(r.props, `"`, `\"`)
	return fmt.Sprintf("create it once per cluster, on one node: riak eval 'riak_kv_console:bucket_type_create([\"%s\", \"%s\"]).' then riak eval 'riak_core_bucket_type:activate(<<\"%s\">>).' (Riak 2.x: riak-admin bucket-type create %s '%s', then riak-admin bucket-type activate %s)", name, esc, name, name, r.props, name)
}

// checkType checks the fetched properties of a bucket type for its role;
// it returns "" when they fit.
func checkType(name string, r typeRole, p *riak.FetchBucketPropsResponse) string {
	if p == nil {
		return fmt.Sprintf("bucket type %s (for %s) answered no properties", name, r.what)
	}
	if why := r.check(p); why != "" {
		return fmt.Sprintf("bucket type %s (for %s) is not set up as it must be: %s; it must have the properties %s (allow_mult and last_write_wins can be changed with riak admin bucket-type update; datatype, consistent and write_once only by creating the type anew, under another name, which Options.Types can name)", name, r.what, why, r.props)
	}
	return ""
}

// check verifies at Open that the cluster can hold the archive.
func (s *Store) check(ctx context.Context) error {
	// A program started while no node answers at all (a wrong address, a
	// cluster down) says so in seconds rather than wait RetryFor; once
	// open, a store rides out a node restart.
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
			if re, ok := riakError(err); ok && !isTransient(re) {
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
	// A consistent request only works once the cluster's consensus
	// subsystem is on; reading the binding is one, and caches it.
	if _, err := s.binding(ctx); err != nil {
		return fmt.Errorf("%w: a strongly consistent read on bucket type %s failed: %w (is strong_consistency = on in riak.conf of every node, and has the consensus subsystem started? It starts by itself once the cluster has 3 nodes; `riak admin ensemble-status` shows it)", ErrSetup, s.b.types.Claims, err)
	}
	// Message-IDs are looked up through a secondary index, which the
	// leveled and leveldb backends keep and bitcask does not.
	_, err := s.do(ctx, func() (riak.Command, error) {
		return riak.NewSecondaryIndexQueryCommandBuilder().
			WithBucketType(s.b.types.KV).WithBucket(s.b.packs).
			WithIndexName(indexMsgID).WithIndexKey("\x00open-check").
			WithTimeout(s.opts.Timeout).Build()
	})
	if err != nil {
		if re, ok := riakError(err); ok && strings.Contains(re.Errmsg, "indexes_not_supported") {
			return fmt.Errorf("%w: the storage backend of bucket type %s keeps no secondary indexes (Riak says %q): use leveled or leveldb (storage_backend in riak.conf), not bitcask", ErrSetup, s.b.types.KV, re.Errmsg)
		}
		return fmt.Errorf("cannot query a secondary index on bucket type %s: %w", s.b.types.KV, err)
	}
	return nil
}
