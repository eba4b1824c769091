// Package catalog is the index the resolver reads to present an archive as
// lists, months and threads: a derived index in SQLite (modernc.org/sqlite,
// pure Go, WAL), never the source of truth. It can be deleted at any time
// and is rebuilt from the store by reading its change feed from the
// beginning (Rebuild, `resolver reindex`), which is also how a new schema
// is adopted.
//
// # What it keeps
//
// Per message (extract.go): its call number, list, date, sender (name and
// address, decoded), subject (decoded), Message-ID, references, size and
// number of attachments, and its thread. Per thread: its first message
// (the root), subject, number of messages and first and last date. Per
// list and per month of a list: the number of messages and the first and
// last date.
//
//   - List: the --list a message was archived with; without one, the list
//     its List-Id header names (RFC 2919: the list-id inside the angle
//     brackets); else "unlisted". Names are lower-case [a-z0-9._-]+, the
//     form they take in URLs (ListName).
//   - List: a message moved (store.Store.Move) is in the list it was
//     moved to (move.go).
//   - Date: the Date header (RFC 5322 section 3.6.1); where it is missing,
//     unreadable or implausible (before 1970, more than two days after
//     the message was archived, or more than 30 days before or a day
//     after its topmost Received header's date), the date of the topmost
//     Received header, the time the last server before the archive took
//     the message; else the time it was archived. An mbox From_ line's
//     date would come between those two, but the store does not keep
//     From_ lines.
//   - Arrival: the topmost Received header's date, else the date: what
//     "newest" orders by (a list's threads, feeds), so that a Date
//     header years off does not put a message on top (Arrival).
//   - Sender: the From, or for mail a list rewrote for DMARC ("Name via
//     LIST"), its writer, the list's address kept as Via (RealSender).
//
// # Threads
//
// A thread is a set of messages of one list connected by Message-IDs, as
// in JWZ's algorithm (https://www.jwz.org/doc/threading.html), with rules
// that keep one message from joining everything (anyone can write
// References naming every message of a list):
//
//   - The catalog keeps the last MaxReferences IDs a message names: of
//     References (RFC 5322 section 3.6.4: its last ID is the parent), or
//     without References the first of In-Reply-To.
//   - A message joins the thread of its parent: of an archived message
//     with that ID, else of a message naming it. Where the list knows
//     neither, the ID before it, and so on: its nearest ancestor the list
//     knows. Older references join nothing.
//   - It joins the threads of its replies stored before it (messages
//     naming its ID) and of messages sharing its ID.
//   - When that is more than one thread, they are merged only if at most
//     one of them is established (two messages or more); else the message
//     joins its parent's thread alone (without one, its replies'), and
//     the threads stay apart. A message naming every ID of a list merges
//     no established thread, nor does a late parent whose replies, stored
//     before it, already make a thread of their own (that thread's tree
//     then shows their parent as missing from it).
//
// Membership is kept incrementally (index.go: connected), with one
// lookup per kind of message and ID (LIMIT 1), and a reply stored before
// its parent is joined to the parent's thread when the parent arrives.
//
// Old lists (pipermail, before clients wrote References) have no
// threading headers at all. A message without References and In-Reply-To
// joins a thread of its list with the same subject, once "Re:"-like
// prefixes and [tags] are removed, active within 30 days of it: the one
// it quotes, else one where it or the thread's first message has a
// reply prefix, else one someone else started under a distinctive
// subject (subject.go); each message records how it joined (JoinedBy).
//
// The tree of a thread is computed when it is read (tree.go), from its
// messages and their references: JWZ's containers, with a placeholder for
// each named message that was never archived, loops broken (the link
// made last goes), and messages that share a Message-ID kept side by
// side; each link is made once, so the work is linear in the messages
// and references however they name each other. A message whose parent was
// never archived says so. Building threads in feed order, the same for a
// follower and for a rebuild, makes a rebuilt catalog's threads the same.
//
// # Following the store
//
// The catalog saves the store's change-feed cursor in the transaction that
// indexes a page of messages, so a follower that stops anywhere carries on
// where the catalog stands; a message seen twice is skipped. One process
// writes a catalog file (the lock file PATH.lock says which); any number
// read it. The catalog also records the authority of the store it was
// built from and refuses to follow another store.
package catalog
