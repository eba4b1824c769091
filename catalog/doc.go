// Package catalog is the index the resolver reads to present an archive as
// lists, months and threads: a derived index in SQLite (modernc.org/sqlite,
// WAL), never the source of truth. It is rebuilt from the store's change
// feed (Rebuild, `resolver reindex`) when lost, damaged or of another
// schema.
//
// It keeps each message's list (the one it was archived with or moved to,
// else its List-Id, RFC 2919), date (Arrival), sender, subject, references
// and thread, with counts per thread, list and month.
//
// # Threads
//
// A thread is a set of messages of one list connected by Message-IDs, as
// in JWZ's algorithm (https://www.jwz.org/doc/threading.html). Anyone can
// write References naming every message of a list, so only the last
// MaxReferences IDs of a message are kept, and a message that would join
// several threads merges them only if at most one is established (two
// messages or more); a thread's tree is built when read, in time linear in
// its messages and references. Messages without threading headers join by
// subject (subject.go). Threads are built in feed order, so a rebuild
// makes the same threads.
//
// # Following the store
//
// The feed cursor is saved in the transaction that indexes a page, so a
// follower that stops anywhere carries on where the catalog stands. One
// process writes a catalog file (PATH.lock says which); any number read
// it. A catalog refuses to follow a store other than the one it was built
// from.
package catalog
