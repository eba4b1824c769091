// Package riakstore is the distributed store.Store, on Riak KV through
// github.com/basho/riak-go-client, for archives that outgrow one machine:
// many importers and watchers on many hosts write at once; the run
// authority (the coordinator) stays the only shared point besides Riak.
//
// # Bucket types
//
// An operator creates four bucket types once per cluster (docs/riak.md
// has the commands): chibrary_kv (allow_mult true, last_write_wins
// false), chibrary_once (write_once true), chibrary_counters (datatype
// counter) and chibrary_claims (consistent true, which needs
// strong_consistency = on on every node). The storage backend must keep
// secondary indexes (leveled or leveldb, not bitcask). Open checks all of
// this but write_once, which the client library does not read, and names
// what is missing (ErrSetup), with the commands that set it right.
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
//	chibrary_once      ARCHIVE.digests  digest in hex (".N" for generation N): a call number (digest.go);
//	                                    also a removed message's content (store.ContentOf)
//	chibrary_counters  ARCHIVE.counts   "messages": the message count
//
// Nothing lists keys.
//
// # Replication
//
// Every value is kept on n_val replicas. Packs are written with w = all,
// because a secondary index query reads one replica per partition and
// must find a message once its Put has returned. Reads of what should
// exist take the first replica that has a value, so a replica that is
// behind cannot hide a message. Every message read is checked against
// its digest. A duplicate may be reported before the other writer's
// write has reached every replica; if that write fails, read repair
// completes the copies.
//
// The consistent bucket type needs a majority of each consensus group.
// On small clusters some groups have two members on one node, and while
// it is down, writes whose ledger slot falls in such a group stop.
//
// # Once for every message
//
// Riak's if_none_match on an ordinary bucket is a read then a write, not
// a compare-and-set; on a consistent bucket type a create is. A Put
// therefore claims its new messages in the ledger (ledger.go) before
// writing them, one consistent create per batch rather than per message,
// which would cost the node far more. A writer creates slot N only after
// reading every slot before it, so of two writers that claim one digest,
// the lower slot writes the message and the other reports a duplicate.
//
// Messages stored earlier are found in the digest index (digest.go),
// whose entry is written before its message. A claim whose writer died
// expires after ClaimTimeout + MaxClockSkew and is taken over; a live
// writer claims again if it has not started writing within
// ClaimTimeout/2. A writer that stalls past its claim anyway, while
// another takes its messages over, leaves them stored twice under two
// numbers, and logs "message stored twice".
//
// # Put and Count
//
// A batch is checked whole before anything is written, so a batch
// refused by a safety rule writes nothing. Riak has no transactions,
// though: a batch cut short may be partly written, and running it again
// completes it. Count reads a counter incremented after each batch; it
// is an estimate, since a batch cut short or a retried increment skews it.
//
// # Compression
//
// Every message is compressed on its own with zstd and a dictionary
// trained on the archive (dicts.go), so one message is read without
// inflating its pack's neighbours. The leveled backend should not
// compress values again (leveled.compression_point = on_compact).
//
// # The change feed
//
// Changes reads the ledger in slot order (changes.go). A message whose
// Put is still writing is pending, so a slow writer holds back neither
// itself nor the batches after it; a dead writer's pending messages are
// dropped once their claim has expired.
//
// # Removal
//
// Remove works in steps that a second Remove of the number completes if
// the first is killed (remove.go). The removal record and the digest
// entry stay, and an entry for its content is added, so the same bytes,
// and the same message with headers or whitespace added in transit, are
// reported Removed and never stored again.
//
// Riak itself does not erase what is replaced or deleted: tombstones
// stay until reaped (delete_mode), the leveled journal keeps old values
// until compaction rewrites their file (perhaps never, on a small
// archive), and backups are out of reach. An operator who must know the
// bytes are gone can make journals roll and compact sooner, or rebuild
// each node's data in turn from its replicas (riak_kv_vnode:repair/1).
//
// Programs older than removals read a removal entry as corrupt: upgrade
// every program that uses the archive before the first removal.
//
// # Failures
//
// A request Riak could not serve is tried again on the next node for
// Options.RetryFor; Riak's own answers (not found, a refused create) are
// final. A cancelled context abandons the wait; the request itself ends
// at its timeout.
package riakstore
