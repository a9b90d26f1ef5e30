// Package runtime is the coordination core of Open Conduit. This part of it
// owns the records the core keeps (Scope, Event, Work, Execution, Wait,
// Timer, Lease, Artifact metadata, toolbelt results and namespaced KV
// entries) and the Store contract every durable store implements.
//
// A Store runs read-write transactions (Transact) and read-only ones (View).
// Everything an extension is promised rests on the Tx operations:
//
//   - Event acceptance is idempotent by (source, delivery_id) and bound to a
//     canonical signature of the envelope (see Signature): the same content
//     again returns the stored Event with added=false, different content is
//     ErrConflict and writes nothing.
//   - Every accepted Event gets the next global sequence. Sequences grow in
//     commit order, so a cursor that pages by sequence never skips an Event
//     that becomes visible later.
//   - ScopeEvents and WorkEvents are indexed reads: a page costs what it
//     returns, not the size of the log.
//   - Work carries a revision; a write naming a stale revision is
//     ErrConflict.
//   - Leases carry epochs. Acquiring a lease starts a new epoch that
//     supersedes every earlier one, and every fenced write (PutExecution,
//     PersistRecovery, RenewLease, ReleaseLease, CheckLease) naming a
//     superseded epoch is ErrConflict.
//   - A KV commit checks all its preconditions before it applies any put or
//     delete. A failed commit applies nothing, even when the caller goes on
//     to commit the surrounding transaction.
//
// A Store may offer capabilities the engine finds by type assertion, uses
// when present and does without otherwise, with the same outcome:
//   - PreAcceptStore: a push's routing is decided before its acceptance
//     and commits with it, one commit instead of two;
//   - DeferredSyncStore: a commit that does not wait for the disk, for the
//     one write a machine crash may lose without breaking a rule (an
//     Execution's metadata after its start);
//   - CommittedSequenceStore: the last accepted sequence known without a
//     read, so a routing pass with nothing left to route reads nothing
//     (exact only while the Store is its database's only writer);
//   - StartTx, on a Tx: an Execution's start in fewer statements (one read
//     of the startable Work, of the prior attempts, one update each of
//     the Work and the run).
//
// Bad input (see the limits in limits.go) is refused with ErrInvalid or
// ErrTooLarge before anything is written.
//
// This package imports the standard library only; runtime/sqlite is the
// durable implementation and conformance.RunStore is the suite every Store
// must pass.
package runtime
