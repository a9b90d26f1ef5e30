// Package sqlite is the durable runtime.Store on SQLite (modernc.org/sqlite,
// pure Go, no cgo). It owns the database schema and its migrations, the
// transaction discipline and the artifact blob directory.
//
// One state directory holds one database file (DatabaseFile) and the blob
// directory artifacts/. The database runs in WAL mode with
// synchronous=FULL: every commit appends to the write-ahead log and fsyncs
// it before Transact returns, so an acknowledged commit survives a crash of
// the process or of the machine. (NORMAL would skip that fsync and keep
// only the integrity of the database across a power loss, not the last
// commits, which is not what "accepted" promises.)
//
// The one exception is asked for by name: TransactDeferSync
// (runtime.DeferredSyncStore) commits one transaction with NORMAL, which
// writes the log without the fsync. Its commit survives a crash of the
// process and reaches the disk with the next synced commit (the log is
// appended in commit order and its frames' checksums chain, so recovery
// keeps a prefix of the commits), or with a sync of the store's own
// within DeferredSyncBound, or at Close. It may record no Change, so the
// change stream never shows what a machine crash could take back. The
// engine uses it for an Execution's recovery metadata after its start.
//
// Writes go through a single writer connection: write transactions are
// serialised in Go, each waiting its turn without spinning and giving up
// when its context ends, and each begins IMMEDIATE so it holds the write
// lock from its first statement. A busy_timeout covers the rare case of
// another process holding the database (a backup, an operator's sqlite3).
// Once begun, a write transaction's statements do not watch its context
// (nothing starts a goroutine per statement to do so): a cancel stops
// its next statement and its commit, not a statement under way.
// Reads (View) run on a separate pool of query-only connections against
// WAL snapshots, concurrently with the writer.
//
// The store counts the sequence of the last Event its own commits
// accepted (runtime.CommittedSequenceStore), so the engine's routing pass
// knows without a read that nothing is left to route, and the active
// Waits, so a write transaction's WaitsForKey reads nothing while none is
// active (a push routed to new Work). The counts see this Store's commits
// only: they hold because one daemon owns a state directory (its state
// lock), and an Event or a Wait written into the database by another
// process while the store is open is outside that contract.
//
// The schema is versioned in the schema_version table and migrated
// forward, one migration per transaction, when the store opens; a database
// newer than this build is refused. Indexes keep the log's reads
// proportional to what they return: Events by (scope_id, sequence), a
// Work's by the Event that created it (works.origin) and the event_works
// link table by (work_id, sequence), and open Work by correlation key
// through work_keys.
//
// Artifact content never enters the database: BlobStore streams it to a
// temporary file under artifacts/, fsyncs it and renames it to its
// content address on commit.
package sqlite
