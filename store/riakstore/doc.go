// Package riakstore is the distributed store.Store, on Riak KV through
// github.com/basho/riak-go-client, for archives that outgrow one machine:
// many importers and watchers on many hosts write at once; the run
// authority (the coordinator) stays the only shared point besides Riak.
//
// # Bucket types
//
// An operator creates four bucket types once per cluster. On OpenRiak
// 3.x, `riak admin bucket-type create` garbles its JSON argument, so
// create them through the node itself (on any one node):
//
//	riak eval 'riak_kv_console:bucket_type_create(["chibrary_kv", "{\"props\":{\"allow_mult\":true,\"last_write_wins\":false}}"]).'
//	riak eval 'riak_kv_console:bucket_type_create(["chibrary_once", "{\"props\":{\"write_once\":true}}"]).'
//	riak eval 'riak_kv_console:bucket_type_create(["chibrary_counters", "{\"props\":{\"datatype\":\"counter\"}}"]).'
//	riak eval 'riak_kv_console:bucket_type_create(["chibrary_claims", "{\"props\":{\"consistent\":true}}"]).'
//	riak eval 'riak_core_bucket_type:activate(<<"chibrary_kv">>).'         # and the same for the other three
//
// On Riak 2.x (2.1 or later, for write_once):
//
//	riak-admin bucket-type create chibrary_kv '{"props":{"allow_mult":true,"last_write_wins":false}}'
//	riak-admin bucket-type create chibrary_once '{"props":{"write_once":true}}'
//	riak-admin bucket-type create chibrary_counters '{"props":{"datatype":"counter"}}'
//	riak-admin bucket-type create chibrary_claims '{"props":{"consistent":true}}'
//	riak-admin bucket-type activate chibrary_kv                          # and the same for the other three
//
// chibrary_claims needs strong_consistency = on in riak.conf of every
// node, and the storage backend must keep secondary indexes (leveled or
// leveldb, not bitcask). Open checks all of this and names what is
// missing (ErrSetup), with the commands that set it right. write_once is
// not checked, since the client library does not read it; without it the
// digest index still works.
//
// # Archives and layout
//
// Several archives share a cluster: Options.Archive (the ARCHIVE of the
// store URL riak://host:port,.../ARCHIVE) starts the name of every
// bucket, so archives never see each other's messages:
//
//	chibrary_claims    ARCHIVE.meta     "binding": the authority, scheme and key (JSON)
//	chibrary_claims    ARCHIVE.runs     the run in decimal: its lease, without the key (JSON)
//	chibrary_claims    ARCHIVE.log      the ledger: slot N in decimal, one entry per batch,
//	                                    removal or move (ledger.go)
//	chibrary_claims    ARCHIVE.removed  call number: a removal's record and how far it got (remove.go)
//	chibrary_kv        ARCHIVE.packs    "VERSION.RUN.PACK": up to 16 messages, or their
//	                                    removal records (pack.go); secondary index
//	                                    msgid_bin: their Message-IDs
//	chibrary_kv        ARCHIVE.large    call number: a large message (its pack has a stub)
//	chibrary_kv        ARCHIVE.dicts    dictionary ID in hex: a compression dictionary;
//	                                    "current": the one new records use (dicts.go)
//	chibrary_kv        ARCHIVE.removals call number: a copy of its removal record;
//	                                    secondary index removed_int: when (Unix seconds)
//	chibrary_kv        ARCHIVE.moves    call number: the list a moved message is in (move.go)
//	chibrary_once      ARCHIVE.digests  digest in hex (".N" for generation N): a call number (digest.go)
//	chibrary_counters  ARCHIVE.counts   "messages": the message count
//
// The binding and the leases are created with create-if-absent on the
// consistent bucket type, so exactly one of two racing programs wins.
// Nothing lists keys.
//
// # Replication
//
// Every value is kept on n_val replicas, so losing one node loses
// nothing. Packs are written with w = all, because a secondary index
// query reads one replica per partition and must find a message once its
// Put has returned. Reads of what should exist take the first replica
// that has a value, so a replica that is behind cannot hide a message; a
// pack found without a message it should hold is read again from all
// replicas. Every message read is checked against its digest.
//
// A writer may report a message as a duplicate of another writer's as
// soon as one replica holds it, before that writer's w = all write has
// returned. If that write then fails, fewer than n_val replicas hold the
// message until read repair copies it; it is lost only if those replicas
// lose their disks first. A quorum read would not close this, since a
// replica holding the pack as it was before counts as much as one
// holding it after.
//
// The consistent bucket type needs a majority of each consensus group
// up. On small clusters some groups have two members on one node; while
// that node is down, writes whose ledger slot falls in such a group stop.
// Reads go on.
//
// # Once for every message
//
// Riak's if_none_match on an ordinary bucket is a read then a write, not
// a compare-and-set; on a consistent bucket type a create is. A Put
// therefore claims its new messages in the ledger before writing them:
// one consistent create per batch, at the first free slot, listing each
// new message's digest and call number. A writer creates slot N only
// after reading every slot before it, so of two writers that claim one
// digest, the lower slot writes the message and the other waits for it
// and reports a duplicate. A consistent create per digest would be
// simpler but costs the node far more.
//
// Messages stored earlier are found in the digest index. A writer puts a
// digest entry after claiming it and before writing its message, so no
// message is stored without its entry; readers therefore believe an
// entry only once they have seen its message. A writer keeps the recent
// ledger claims in memory and judges a digest by the index and those
// claims together; one that stalled for more than ClaimTimeout/2 between
// lookup and claim looks up again, or it could miss a claim whose message
// was stored meanwhile. A writer that has read the ledger from its first
// slot knows every digest ever claimed, and skips the lookup of the
// others (see unclaimed).
//
// A writer may die between its claim and its writes. Its claim then
// holds for ClaimTimeout + MaxClockSkew, after which another writer takes
// the message over, writing its digest entry as the next generation of
// the key. So that a claim never expires under a live writer, a writer
// that has not started writing within ClaimTimeout/2 claims again. A
// writer that stalls for longer than the claim timeout after that check
// and then writes, while another takes its messages over, leaves them
// stored twice under two numbers; it logs "message stored twice" for
// each when it finishes.
//
// # Put
//
// A batch is checked whole before anything is written, so a batch
// refused by a safety rule writes nothing. Riak has no transactions,
// though: a batch cut short by a failure may be partly written, and
// running it again completes it.
//
// Count reads a counter incremented after each batch. It is an estimate:
// a batch cut short before its increment under-counts, and an increment
// retried after a lost reply over-counts.
//
// # Compression
//
// Every message is compressed on its own with zstd and a dictionary
// trained on the archive's messages, as in the bolt store
// (store/internal/record and store/internal/compress). Records are kept
// as written, since Riak has no compaction of ours to recompress them
// later, so they are compressed at a better level than the fastest. A
// version 2 pack is not compressed as a whole, so one message is read
// without inflating its neighbours; version 1 packs (DEFLATE over the
// whole pack) are still read, and rewritten as version 2 when a Put adds
// to them. The leveled backend should be told not to compress values
// again (leveled.compression_point = on_compact, see the README).
//
// Dictionaries are written once under their IDs; "current" names the one
// new records use, and its siblings resolve to the newest. It lives in
// the kv type, not the consistent one, because every writer reads it
// often and a consensus group without a leader would stop every Put;
// records name their dictionary, so "one of them wins" is enough.
//
// # The change feed
//
// Changes reads the ledger in slot order. A message whose entry is read
// before its Put has written it is pending: the cursor keeps it and later
// calls look again, so a slow writer holds back neither itself nor the
// batches after it. A dead writer's pending messages are dropped once
// their claim has expired.
//
// # Removal
//
// Remove works in steps that a second Remove of the number completes if
// the first is killed (remove.go lists them): the removal's record is
// created in the consistent bucket type, so of two removers one record
// wins; then its copy for Removals, a ledger entry, the pack rewritten
// with the removal record in place of the message, the large object
// deleted, the record marked done and the count decremented.
//
// What stays is the removal record, its copy, its ledger entry and the
// digest entry, so the same bytes are reported Removed and never stored
// again. When siblings of a pack disagree the removal wins, and a Put
// that wrote a pack beside a removal writes it again without the message.
//
// Riak itself does not erase what is replaced or deleted: tombstones
// stay until reaped (delete_mode), the leveled journal keeps old values
// until journal compaction rewrites their file (which may be never on a
// small archive), nodes that were down keep old values in their
// journals, and backups are out of reach. An operator who must know the
// bytes are gone can make journals roll and compact sooner, or rebuild
// each node's data in turn from its replicas (riak_kv_vnode:repair/1).
//
// Programs older than removals read a removal entry as corrupt: upgrade
// every program that uses the archive before the first removal.
//
// # Failures
//
// The client spreads requests over Options.Nodes. A request Riak could
// not serve (a timeout, an overloaded node, too few replicas, a consensus
// group without a leader) is tried again on the next node for
// Options.RetryFor. Open gives up sooner when no node answers or strong
// consistency is not serving, and says which. Riak's own answers (not
// found, a refused create) are final. A cancelled context abandons the
// wait; the request itself ends at its timeout.
package riakstore
