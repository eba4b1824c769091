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
// chibrary_claims needs strong consistency: strong_consistency = on in
// riak.conf of every node (a cluster of 3 or more nodes then starts its
// consensus subsystem by itself). The storage backend must keep secondary
// indexes (leveled or leveldb, not bitcask). Open checks all of this
// (bucket type properties allow_mult, last_write_wins, datatype and
// consistent; a consistent read; a secondary-index query) and names what
// is missing or wrong (ErrSetup), with the commands that set it right:
// allow_mult and last_write_wins can be changed on an existing type (on
// OpenRiak 3.x, `riak admin bucket-type update` garbles its argument as
// create does: riak eval 'riak_kv_console:bucket_type_update(["NAME",
// "{\"props\":{...}}"]).'; on 2.x, riak-admin bucket-type update NAME
// '{"props":{...}}'); datatype, consistent and write_once cannot.
// (write_once is not among the properties the client library reads, so
// it is not checked: without it the digest index works, a little
// slower.) With strong consistency off, riak eval
// 'riak_ensemble_manager:enabled().' answers false on OpenRiak 3.x
// (whose `riak admin ensemble-status` prints only "ok"); riak-admin
// ensemble-status says it on 2.x.
//
// # Archives and layout
//
// Several archives share a cluster: Options.Archive (the ARCHIVE of the
// store URL riak://host:port,.../ARCHIVE, [a-z0-9_-]+, "chibrary" by
// default) starts the name of every bucket, so archives never see each
// other's messages:
//
//	chibrary_claims    ARCHIVE.meta     "binding": the authority, scheme and key (JSON)
//	chibrary_claims    ARCHIVE.runs     the run in decimal: its lease, without the key (JSON)
//	chibrary_claims    ARCHIVE.log      the ledger: slot N in decimal, one entry per batch,
//	                                    removal or move (ledger.go)
//	chibrary_claims    ARCHIVE.removed  call number: a removal's record and how far it got (remove.go)
//	chibrary_kv        ARCHIVE.packs    "VERSION.RUN.PACK": up to 16 messages, or their
//	                                    removal records (pack.go); secondary index
//	                                    msgid_bin: their Message-IDs
//	chibrary_kv        ARCHIVE.large    call number: a message over 64 KiB (its pack has a stub)
//	chibrary_kv        ARCHIVE.dicts    dictionary ID in hex: a compression dictionary;
//	                                    "current": the one new records use (dicts.go)
//	chibrary_kv        ARCHIVE.removals call number: a copy of its removal record;
//	                                    secondary index removed_int: when (Unix seconds)
//	chibrary_kv        ARCHIVE.moves    call number: the list a moved message is in (move.go)
//	chibrary_once      ARCHIVE.digests  digest in hex (".N" for generation N): a call number (digest.go)
//	chibrary_counters  ARCHIVE.counts   "messages": the message count
//
// The binding and the leases are created with create-if-absent on the
// consistent bucket type: of two programs binding an empty archive, or
// recording the same run, at once, exactly one succeeds. Nothing lists
// keys.
//
// # Replication
//
// The archive uses the bucket types' n_val, 3 by default: every value is
// kept on three nodes, so losing any one node loses nothing. Plain reads
// and writes use Riak's quorum defaults (r = w = dw = 2 of 3, pr = pw = 0,
// sloppy quorum): a write is acknowledged once two replicas have stored
// it (a pack once all three have, w = all: a secondary index query reads
// one replica per partition, and must find a message once its Put has
// returned), and a node down does not stop writes (its replicas are
// written to a fallback node and handed back when it returns). Reads of
// what should exist (a message, a digest entry) take the first replica
// that has a value (r = 1 with not-found replies not counted), so a
// replica that is behind cannot hide a message; a pack found without a
// message it should hold is read again from all replicas. Every message
// read is checked against its digest: a damaged value is an error, never
// other bytes.
//
// A writer therefore reports a message as a duplicate of another
// writer's number as soon as one replica holds it, whether it finds it at
// its batch's lookup or while awaiting that writer's claim: possibly
// before that writer's own write (w = all) has returned. Should that
// write then fail (its writer killed, its node lost, after one or two
// replicas took the pack), the message is acknowledged as a duplicate
// here while the other writer reports its batch failed, and fewer than
// n_val replicas hold it until a read repairs the others (Riak's read
// repair: every read of the pack, the one that found it included, sends
// the replicas that are behind what they lack). It is lost only if the
// replicas that hold it lose their disks before that. A quorum read
// would not close this: a pack holds up to 16 messages, and a replica
// holding the pack as it was before the write counts towards a quorum as
// much as one holding it after; what would (the waiting writer writing
// the pack again, with w = all) costs a pack write per 16 messages
// awaited, on every contested batch, and was not done.
//
// The consistent bucket type keeps its n_val replicas under a consensus
// protocol, one consensus group per preference list: its requests need a
// majority of the group up (2 of 3), and wait a few seconds while a group
// elects a new leader after a node is lost. On fewer than 5 nodes some
// groups have two of their three members on one node (ring sizes are
// powers of two; on the 3-node test cluster 4 to 8 of 16 groups did):
// while that node is down, those groups stop, and so do the writes whose
// ledger slot falls in one of them, until it is back. Reads go on.
//
// # Once for every message
//
// Two importers started together on one file, or an importer and the
// watcher, must give a message one call number. Riak's if_none_match on an
// ordinary bucket is a read then a write, not a compare-and-set (8 writers
// racing on one key: more than one winner in 182-193 of 200 rounds); on a
// consistent bucket type a create is (0 of 200).
//
// A Put therefore claims its new messages in the ledger before writing
// them: one entry per batch, listing each new message's digest and call
// number, created at the first free slot. A writer creates slot N only
// after reading every slot before it, so of two writers that claim one
// digest, the one with the lower slot sees no earlier claim and writes the
// message; the other saw that claim, waits until the message is stored,
// and reports a duplicate of its number. The ledger costs one
// consistent create per batch and the reads of entries other writers
// appended since. A claim per message (a consistent create keyed by the
// digest) would be simpler but was measured at 2.0 ms of the node's CPU
// time each on the test node, more than all the rest of a message's
// writes together.
//
// Messages stored earlier are found in the digest index. A writer puts a
// message's digest entry after claiming it and before writing it, so that
// no message is ever stored without its entry, even by a writer killed
// between the two; readers therefore believe an entry only once they have
// seen its message (one pack read per 16 entries found). Its keys are
// each written once, in a write_once bucket type, which spares Riak the
// read before each write (about a third of the node's CPU time per
// entry). A writer keeps the claims of the ledger's recent entries in
// memory (read back at its first write, then followed), and judges a
// digest by the index and those claims together. It keeps them for
// 1.5 × ClaimTimeout + 2 × MaxClockSkew (150 s by default), which is
// enough to judge a lookup made up to ClaimTimeout/2 + MaxClockSkew
// before: a writer that stalled for more than ClaimTimeout/2 between its
// lookup and its claim looks the digests up again before claiming them
// (TestStalledLookup), or it could miss a claim whose message was stored
// meanwhile, and store the message a second time without knowing.
//
// A digest no ledger entry ever claimed needs no lookup: a message is
// claimed before it is stored, so no message with it is stored, and the
// index holds no entry for it a reader may believe. A writer that has read
// the ledger from its first slot (ledger.go, unclaimed) knows those
// digests: it keeps the first 8 bytes of every digest claimed (a digest
// sharing them with one is merely looked up), and of every digest a
// removal recorded from another store reserved (RecordRemoval writes no
// claim; the removal's state, which names the digest, is created before
// its ledger entry, and a reader believes the reserved entry only once
// the pack holds the removal, which comes after it). It judges a batch's
// digests so after it has read the ledger to its end, as of the moment
// it noted before doing so, exactly as a lookup sent then would; claims
// made since are read when it claims the batch, as for a lookup. A handle
// reads the whole ledger at its first write when the ledger has at most
// half as many slots as that batch has digests (an empty archive's has
// none; a slot costs Riak about four lookups, and a bulk import's slots
// hold hundreds of messages), and gives this up beyond 2^20 digests. The
// one thing a lookup would have seen and this does not: a removal being
// recorded for a number never stored here, between the reservation of
// its digest and its ledger entry, or whose recorder died in between.
// A Put of the same bytes then writes the digest's first generation over
// that entry, where after a lookup it would have written the second one
// beside it. Either way its message is stored: RecordRemoval claims
// nothing, so a Put of the same bytes under way while it reserves them
// stores them too, with or without the lookup.
//
// A writer may die between its claim and its writes. Its claim then holds
// for Options.ClaimTimeout + Options.MaxClockSkew (90 s by default): a
// writer that meets it waits, and takes the message over once the claim is
// that old and the message has not appeared, writing its digest entry as
// the next generation of the key after the one the dead writer may have
// left. (A re-run of an import killed mid-batch therefore waits up to that
// long, once, if it starts within that time.) So that a claim never
// expires under a live writer that is merely slow, a writer that has not
// started writing within ClaimTimeout/2 of its claim claims again before
// it writes.
//
// What this does not guarantee: a writer that stalls for longer than the
// claim timeout after that last look at the clock (a process suspended,
// a machine frozen mid-batch) and then writes, while another writer takes
// the same messages over, leaves them stored twice, under two call
// numbers, both readable and both in the change feed. The stalled writer
// finds out when it finishes (it reads the ledger's entries after its
// own, however long it stalled) and logs "message stored twice" for each.
// It takes a stall of about a minute in the middle of a Put; none was seen
// outside the test that provokes one (TestStalledWriterResidue): 0 in 40
// runs of the conformance test ConcurrentSameDigest (3,600 messages, each
// put by four writers at once).
//
// # Put
//
// A batch is checked whole before anything is written (store/internal/
// batch.Make, on values fetched in parallel): a batch refused by a safety
// rule writes nothing. Riak has no transactions, though: a batch cut short
// by a failure may be partly written. Running it again completes it: its
// stored messages come back as duplicates of their own numbers, and their
// digest entries are repaired.
//
// Requests per new message, measured by TestRequestBudget: about 1.13 (a
// digest entry each; a pack read and written per 16 messages; the ledger
// and the count once per batch), or 2.13 with a digest lookup each for a
// writer that did not read the ledger from its start; about 1.13 per
// message already stored (a digest lookup, and a pack read per 16 to see
// the message is there). Up to Options.Parallel (64) are in flight at
// once.
//
// Count reads a counter data type, incremented after each batch by the
// number of messages written. It is an estimate: a batch cut short before
// its increment under-counts, and an increment tried again after a lost
// reply over-counts.
//
// # Compression
//
// Every message is compressed on its own, with zstd and a dictionary
// trained on the archive's own messages, as in the bolt store: the
// record layouts, and when a dictionary is trained and replaced, are
// store/internal/record's and store/internal/compress's. A Put
// compresses its new messages (on every CPU, before its claim in the
// ledger or any other write), writes the records as they come, and once
// the count is incremented tells the Compressor how many messages the
// archive holds, so that the Put that brings it to 250 trains the first
// dictionary (from the newest messages, read back through the ledger),
// and later ones train newer ones in the background, each time the
// archive has doubled (at 500, 1,000, 2,000... messages, then every
// 10,000), and records are compressed at zstd's better level rather
// than its fastest: a Riak archive keeps its records as they were
// written, where a bolt store's compaction compresses each era again
// harder, with a dictionary of its own; and an import into Riak waits on
// the cluster, not on the importer's CPU (Options.Compression and
// compression have the defaults). Every read decodes a
// record on its own and checks its digest; a dictionary is read from the
// archive once per process.
//
// A pack (pack.go, version 2) is not compressed as a whole: one message
// is read and decompressed without inflating its 15 neighbours.
// (Version 1 packs, which archives written before compressed records
// hold, were DEFLATE-compressed whole, their records not; they are read
// as they are, and a Put into one writes it anew as version 2 with the
// old records unchanged.) Riak's cost per byte matters: the leveled
// backend compresses what it receives, on every replica, unless told to
// wait for its journal's compaction (leveled.compression_point =
// on_compact, which the README recommends: the values are compressed
// already), and the node's CPU time, not the network, bounds an import
// into a small cluster (README: performance). On the linux-mips sample
// the messages kept weigh 0.39 bytes per input byte (DEFLATE over packs
// of 16 took 0.42), and reading one message alone takes a twentieth of
// the CPU.
//
// The dictionaries are kept in ARCHIVE.dicts of the kv type (dicts.go):
// each under its ID, written with if_none_match, never changed; the
// current one's record under "current", whose siblings (two writers
// training at once) resolve to the one trained last. That key is in the
// kv type rather than the consistent one because every writer reads it
// once a second: on the consistent type a consensus group without its
// leader (a node lost) would stop every Put of the archive, where the kv
// type answers from any two replicas; and no more than "one of the
// dictionaries wins" is needed, since records name the dictionary they
// use and every dictionary stays.
//
// # The change feed
//
// Changes reads the ledger (changes.go): entries in slot order, each
// entry's messages in its order. A message whose entry is read before its
// Put has written it is pending: the cursor keeps it and later calls look
// again, so a writer between claim and write holds back neither itself
// nor the batches after it, and a message appears at the follower's next
// call after its Put returned. A dead writer's pending messages are
// dropped once their claim expired (read, as every message the feed reads,
// with a second look at every replica when a pack lacks one). A follower
// reading from the start reads the ledger and the packs in parallel, a
// page at a time: 84,096 messages in under 8 s on the test node.
//
// # Removal
//
// Remove takes a message out of the archive in steps (remove.go lists
// them), since Riak has no transactions: its record is created once, in
// the consistent bucket type (of two removers at once, one creates it
// and both complete the winner's removal); a copy goes where Removals
// finds it through a secondary index (no key is listed); a ledger entry
// puts it in the change feed, after the message's own entry, and the
// record notes which entry counts; the pack is written anew with the
// removal record in place of the message's record (or a large message's
// stub) and without its Message-ID's index term; a large message's
// object is deleted; the record is marked done and the message counted
// out. A remover killed at any point leaves no removal (before the
// record is created) or one that a second Remove of the number completes,
// with the first one's record; until then the message may still be read
// (the pack is rewritten fifth), the feed holds back the removal's entry
// while the record notes none, and Removals lists it once its copy is
// written. A remover killed between marking the removal done and
// counting the message out leaves the count one too high.
//
// What stays: the record (number, digest, the SHA-256 of the
// Message-ID, date, reason), its copy, its ledger entry, and the digest
// index entry, so that the same bytes are reported Removed under the
// number and never stored again. Riak's values hold nothing else of the
// message: when siblings of a pack disagree, the removal entry wins over
// the message's, whatever their order; a Put that wrote the pack from a
// read made before the removal (or that a removal's write went in
// beside) reads the siblings at once and writes the pack again without
// the message, and so does the removal when a Put's write went in beside
// its own. A Put killed between such a write and its repair leaves a
// sibling that still holds the message: readers go by the removal
// entry, and the next write of the pack (a Put into it, or a second
// Remove of the number) drops it.
//
// What Riak itself keeps on disk is another matter. A value replaced or
// deleted is not erased:
//
//   - a deleted key (a large message's object) is kept as a tombstone
//     until Riak reaps it, after delete_mode (3 s by default; riak_kv's
//     delete_mode in advanced.config, where "keep" keeps tombstones for
//     good);
//   - the leveled backend appends every value it receives to its
//     journal, and a replaced value (a pack as it was before the removal,
//     every copy a Put of the pack wrote before) or a reaped one stays in
//     the journal file until journal compaction rewrites that file.
//     Compaction runs leveled.compaction_runs_perday times a day per
//     partition (24 by default) between leveled.compaction_low_hour and
//     leveled.compaction_top_hour, takes a file only once enough of it is
//     replaced or deleted (leveled.singlefile_compactionpercentage and
//     leveled.maxrunlength_compactionpercentage), and never the journal
//     file being written, which rolls at leveled.journal_size bytes (1 GB)
//     or leveled.journal_objectcount values (200,000). On a small archive
//     the bytes of a removed message can therefore stay on disk for good;
//     with leveled.compression_point = on_compact (as the README
//     recommends) they stay there uncompressed (seen on the test kit's
//     node so set: once Remove had returned, a small and a large
//     message's bytes were still in the journal files being written, on
//     every replica). Its ledger (keys and
//     index terms, not values) drops the Message-ID's old index term at
//     its own merges;
//   - a node that was down when the pack was rewritten receives the new
//     value through hinted handoff or read repair, and keeps the old one
//     in its journal as above;
//   - copies outside the cluster (backups of the nodes' data, a cluster
//     replicated to, mirrors, downloads) are out of reach.
//
// An operator who must know the bytes are gone from the disks can make
// journal files roll and compact sooner (smaller leveled.journal_size
// and leveled.journal_objectcount, lower compaction percentages; at a
// cost in write amplification), or rebuild each node's data in turn from
// its replicas: stop the node, move its data directory away and destroy
// it, start it and repair its partitions (riak_kv_vnode:repair/1, through
// riak eval), one node at a time, so that the other replicas hold
// everything meanwhile. A repaired partition receives the current values
// of the other replicas, not their journals. Neither remedy was tried
// here.
//
// Programs older than removals refuse a pack holding a removal entry
// and a ledger holding a removal entry (unknown to them, they read as
// corrupt) rather than take a removed number for one never stored:
// upgrade every program that uses the archive before the first removal.
//
// # Failures
//
// The client spreads requests over Options.Nodes and skips a node that
// does not answer; a request Riak could not serve (a timeout, an
// overloaded node, too few replicas up, a consensus group without a
// leader, a node still starting) is tried again on the next node for
// Options.RetryFor (60 s, long enough to ride out a node restart); Open
// gives up after 5 s when no node answers at all, and after 15 s when
// the cluster serves no strongly consistent request (strong consistency
// off, or its consensus subsystem not started), and says which. Riak's
// own answers (not found, a refused create) are final. A cancelled
// context abandons the wait; the request itself ends at its timeout.
package riakstore
