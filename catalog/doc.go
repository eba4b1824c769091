// Package catalog is the index the resolver reads to present an archive as
// lists, months and threads: a derived index in SQLite (modernc.org/sqlite,
// WAL), never the source of truth. It can be deleted at any time and is
// rebuilt from the store's change feed (Rebuild, `resolver reindex`), which
// is also how a new schema is adopted.
//
// Per message it keeps the call number, list, date, arrival, sender,
// subject, Message-ID, references, size, attachments and thread; per
// thread, list and month of a list, counts and first and last dates. A
// message's list is the one it was archived with or moved to, else its
// List-Id (RFC 2919), else "unlisted". Its date is the Date header (RFC
// 5322 section 3.6.1) unless missing or implausible, else the topmost
// Received header's date, else the time it was archived. "Newest" orders
// by arrival (the topmost Received date), so that a Date header years off
// does not put a message on top.
//
// # Threads
//
// A thread is a set of messages of one list connected by Message-IDs, as
// in JWZ's algorithm (https://www.jwz.org/doc/threading.html), with rules
// that keep one message from joining everything, since anyone can write
// References naming every message of a list:
//
//   - Only the last MaxReferences IDs a message names are kept (References,
//     RFC 5322 section 3.6.4, else the first of In-Reply-To).
//   - A message joins the thread of its nearest ancestor the list knows, of
//     its replies stored before it and of messages sharing its ID.
//   - Several threads merge only if at most one of them is established (two
//     messages or more); otherwise the message joins its parent's thread
//     alone and the threads stay apart.
//
// A message without threading headers (old pipermail lists) joins a thread
// of its list with the same subject active within 30 days (subject.go);
// each message records how it joined (JoinedBy). A thread's tree is
// computed when it is read (tree.go), each link made once, so the work is
// linear in the messages and references however they name each other.
// Threads are built in feed order, so a rebuild makes the same threads as
// following.
//
// # Following the store
//
// The catalog saves the store's change-feed cursor in the transaction that
// indexes a page of messages, so a follower that stops anywhere carries on
// where the catalog stands. One process writes a catalog file (the lock
// file PATH.lock says which); any number read it. A catalog refuses to
// follow a store other than the one it was built from.
package catalog
