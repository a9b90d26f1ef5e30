package runtime

import (
	"context"
	"io"
	"time"
)

// Store is the durable home of the records. It is safe for concurrent use.
type Store interface {
	// Transact runs fn in one read-write transaction and commits it when fn
	// returns nil. When fn returns an error or panics, or ctx is cancelled
	// before the commit, nothing fn wrote is kept and Transact returns the
	// error (ctx.Err() for a cancellation). Write transactions are
	// serialised; fn runs exactly once, never retried, so it should be
	// short and make no open-ended calls, and it must not start another
	// transaction. The Tx must not be used by several goroutines at once;
	// after fn returns its methods fail with ErrInvalid.
	Transact(ctx context.Context, fn func(Tx) error) error

	// View runs fn in one read-only transaction that sees a consistent
	// snapshot of committed data. Views run concurrently with each other
	// and with a writer.
	View(ctx context.Context, fn func(ReadTx) error) error

	// Close releases the store. Calls after Close fail.
	Close() error
}

// DeferredSyncStore is a Store that can also commit a transaction without
// waiting for the disk. The engine uses it only for writes whose loss
// leaves a state the crash table already handles (an Execution's
// recovery metadata after its start: an intent without metadata is not
// adoptable, so stopped and retried).
type DeferredSyncStore interface {
	Store
	// TransactDeferSync is Transact whose commit is atomic and visible when
	// it returns and survives a crash of the process, but reaches the disk
	// with the store's next synced commit (a later commit syncs every
	// earlier one) or within the store's own bound, whichever is first. A
	// machine crash before then loses it (with any deferred commit after
	// it), never a synced commit.
	// Its fn may not record a Change (accept an Event, put a Work): a
	// change stream shows only durable changes. Doing so fails with
	// ErrInvalid and commits nothing.
	TransactDeferSync(ctx context.Context, fn func(Tx) error) error
}

// PreAcceptStore is a Store whose Events can be known before they are
// accepted, so a push's routing can be decided first (outside any
// transaction, as route handlers must be called) and applied in the
// transaction that accepts it: one commit instead of two. Its
// transactions are PreAcceptTx.
type PreAcceptStore interface {
	Store
	// Now reads the clock that stamps the store's records.
	Now() time.Time
}

// PreAcceptTx is the Tx of a PreAcceptStore.
type PreAcceptTx interface {
	// AcceptEventAt is AcceptEvent stamping a new Event accepted at at (a
	// reading of the store's Now) instead of reading the clock itself.
	AcceptEventAt(env Envelope, at time.Time) (Event, bool, error)
}

// CommittedSequenceStore is a Store that knows, without a read, the
// sequence of the last Event its committed transactions accepted, so a
// routing pass that has nothing left to route need not read the log to
// find that out.
type CommittedSequenceStore interface {
	Store
	// CommittedSequence is the sequence of the last Event accepted by
	// this Store's transactions (0 if none): never below that of an
	// Event any of its commits made (a commit under way may be counted
	// before it lands), and in a write transaction of the Store exactly
	// the log's last sequence. known is false once the Store cannot
	// vouch for it (a commit failed after it was counted). It counts
	// only this Store's own commits, so it holds while this Store is its
	// database's only writer, which is the design (one daemon owns a
	// state directory: its state lock).
	CommittedSequence() (seq int64, known bool)
}

// transactDeferSync commits fn through s's deferred-sync path when it has
// one, else as an ordinary synced transaction.
func transactDeferSync(ctx context.Context, s Store, fn func(Tx) error) error {
	if d, ok := s.(DeferredSyncStore); ok {
		return d.TransactDeferSync(ctx, fn)
	}
	return s.Transact(ctx, fn)
}

// ReadTx holds the reads. Missing single records are ErrNotFound; an empty
// page is not an error. A page limit ≤ 0 means DefaultPageLimit and a limit
// above MaxPageLimit reads MaxPageLimit.
//
// Errors other than the package's sentinels are storage failures. After
// one, fn must return an error so the transaction rolls back: the promise
// that a refused operation wrote nothing covers refusals (ErrConflict,
// ErrInvalid, ErrTooLarge, ErrNotFound), not a failing disk.
type ReadTx interface {
	// Event reads an Event by ID.
	Event(id string) (Event, error)
	// EventByDelivery reads an Event by its identity.
	EventByDelivery(source, deliveryID string) (Event, error)
	// Events pages the whole log by sequence, after the cursor after.
	Events(after int64, limit int) ([]Event, error)
	// ScopeEvents pages one scope's Events by sequence, after the cursor
	// after. The empty scope ID reads the Events with no scope recorded.
	// It is filtered by scope before the limit applies, so a page is short
	// only at the end of the scope's log.
	ScopeEvents(scopeID string, after int64, limit int) ([]Event, error)
	// WorkEvents pages one Work's Events (those naming it and those linked
	// to it by LinkEventWork) by sequence, after the cursor after.
	WorkEvents(workID string, after int64, limit int) ([]Event, error)
	// LatestSequence is the sequence of the last accepted Event, 0 if none.
	LatestSequence() (int64, error)

	// Changes pages the change log by Seq, after the cursor after: one
	// Change per accepted Event and per stored Work revision, written in
	// the transaction that made it. Seqs are assigned in commit order, so
	// once a reader has seen Seq n no later commit adds a Seq ≤ n: paging
	// from the last Seq seen misses nothing.
	Changes(after int64, limit int) ([]Change, error)
	// LatestChange is the Seq of the last Change, 0 if none.
	LatestChange() (int64, error)

	Scope(id string) (Scope, error)
	// Scopes lists every scope by ID.
	Scopes() ([]Scope, error)

	Work(id string) (Work, error)
	// Works pages the Works that match filter, by ID.
	Works(filter WorkFilter) ([]Work, error)

	Execution(id string) (Execution, error)
	// Executions lists a Work's Executions by attempt.
	Executions(workID string) ([]Execution, error)

	Lease(name string) (Lease, error)

	Wait(id string) (Wait, error)
	// ActiveWait is the Work's active Wait, ErrNotFound if it has none.
	ActiveWait(workID string) (Wait, error)
	// Waits lists a Work's Waits, oldest first.
	Waits(workID string) ([]Wait, error)
	// ActiveWaits pages every active Wait by the ID of its Work, after the
	// Work ID cursor afterWork ("" starts at the first).
	ActiveWaits(afterWork string, limit int) ([]Wait, error)
	// WaitsForKey lists the active Waits one of whose keys is key.
	WaitsForKey(key string) ([]Wait, error)

	Timer(key string) (Timer, error)
	// DueTimers lists timers due at or before t, earliest first.
	DueTimers(t time.Time, limit int) ([]Timer, error)

	// KVGet reads one entry; found is false (and err nil) when it is absent.
	KVGet(namespace, key string) (entry KVEntry, found bool, err error)
	// KVList pages a namespace's entries whose key starts with prefix, in
	// byte order of the key, after the key after ("" starts at the first).
	KVList(namespace, prefix, after string, limit int) ([]KVEntry, error)

	Artifact(id string) (Artifact, error)
	// Artifacts lists a Work's artifacts by ID.
	Artifacts(workID string) ([]Artifact, error)

	ToolResult(requestID string) (ToolResult, error)
}

// Tx is a read-write transaction: the reads see its own writes.
type Tx interface {
	ReadTx

	// AcceptEvent accepts env once. A new Event is stored with the next
	// sequence and added=true, and a ChangeEvent is logged. An identity already accepted with the same
	// signature returns the stored Event and added=false; with a different
	// signature (or a different explicit ID) it is ErrConflict. A Parent
	// must be an accepted Event of the same scope (ErrInvalid otherwise).
	AcceptEvent(env Envelope) (ev Event, added bool, err error)
	// LinkEventWork records that an Event was routed to a Work, so
	// WorkEvents returns it. Linking twice is a no-op.
	LinkEventWork(eventID, workID string) error

	// PutScope creates or replaces a scope.
	PutScope(s Scope) (Scope, error)

	// PutWork creates w when w.Revision is 0 (ErrConflict if the ID exists)
	// and otherwise replaces the stored Work if its revision is
	// w.Revision (ErrConflict if not, ErrNotFound if absent). It returns
	// the stored Work with its new revision. Every stored revision logs a
	// ChangeWork.
	PutWork(w Work) (Work, error)

	// AcquireLease starts a new epoch of the named lease (1 for a new
	// lease), expiring at Now+TTL. A lease held live by another holder (not
	// released, not expired at Now) is ErrConflict unless Supersede is
	// set. Expiry only lets others acquire: a write at an expired epoch
	// that nobody superseded still passes the fence.
	AcquireLease(req LeaseRequest) (Lease, error)
	// RenewLease extends the lease at epoch to now+ttl.
	RenewLease(name string, epoch int64, now time.Time, ttl time.Duration) (Lease, error)
	// ReleaseLease ends the lease at epoch; later fenced writes at that
	// epoch are ErrConflict.
	ReleaseLease(name string, epoch int64) error
	// CheckLease is the fence: nil only if epoch is the lease's current,
	// unreleased epoch; ErrConflict otherwise.
	CheckLease(name string, epoch int64) error

	// PutExecution creates or replaces an Execution, fenced by its Lease
	// and Epoch (an Execution without a Lease is refused as ErrInvalid).
	PutExecution(x Execution) (Execution, error)
	// PersistRecovery stores an Execution's recovery metadata, fenced by
	// the Execution's lease at epoch.
	PersistRecovery(executionID string, epoch int64, recovery []byte) error

	// ArmTimer creates or replaces the timer under t.Key.
	ArmTimer(t Timer) (Timer, error)
	// CancelTimer removes a timer; cancelled is false if none was armed.
	CancelTimer(key string) (cancelled bool, err error)

	// PutWait creates or replaces a Wait. A second active Wait for the
	// same Work is ErrConflict.
	PutWait(w Wait) (Wait, error)
	// SetWaitProgress sets an active Wait's progress; only its owner may
	// (ErrConflict otherwise).
	SetWaitProgress(waitID, owner, progress string) error

	// KVCommit applies b atomically (see KVBatch). A failed precondition
	// is ErrConflict and applies nothing.
	KVCommit(b KVBatch) error

	// PutArtifact records a committed blob's metadata once; an ID already
	// recorded is ErrConflict.
	PutArtifact(a Artifact) (Artifact, error)

	// PutToolResult commits a toolbelt result under its request ID once:
	// the first commit wins and later ones return it with added=false.
	PutToolResult(r ToolResult) (stored ToolResult, added bool, err error)
}

// BlobStore keeps artifact content outside the database. A blob is
// written as a stream and becomes durable (and addressable by its digest)
// only when its writer commits.
type BlobStore interface {
	CreateBlob() (BlobWriter, error)
	// OpenBlob opens committed content by digest; ErrNotFound if absent.
	OpenBlob(digest string) (io.ReadCloser, error)
}

// BlobWriter streams one blob. Commit makes it durable and returns its
// digest ("sha256:<hex>") and size; Abort discards it. After either, the
// writer is done.
type BlobWriter interface {
	io.Writer
	Commit() (digest string, size int64, err error)
	Abort() error
}
