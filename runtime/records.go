package runtime

import (
	"encoding/json"
	"time"
)

// Scope is a configured scope: the unit Events are accepted into and routed
// within.
type Scope struct {
	ID        string
	Name      string
	Config    json.RawMessage // optional JSON
	UpdatedAt time.Time       // set by the store
}

// Envelope is what a producer submits for acceptance. Its identity is
// (Source, DeliveryID); its content is everything Signature covers.
type Envelope struct {
	// ID names the Event. Empty means DefaultEventID(Source, DeliveryID).
	// It is not part of the signature, but a different ID for an identity
	// already accepted is ErrConflict.
	ID         string
	Source     string // required
	DeliveryID string // required
	ScopeID    string // empty: no scope recorded yet
	Family     string
	Type       string
	Schema     string          // <base>.v<N> or empty
	Payload    json.RawMessage // absent or one valid JSON value, kept verbatim
	Parent     string          // the Event this one derives from, same scope
	Works      []string        // IDs of the Work the Event names; stored as a sorted set
	OccurredAt time.Time       // optional, from the producer
}

// Event is an accepted, immutable Envelope.
type Event struct {
	Envelope
	// Sequence is the Event's place in the global log, assigned in commit
	// order starting at 1.
	Sequence int64
	// Root and Depth are the causal chain: a root Event is its own root at
	// depth 0; a derived Event has its parent's root and depth+1.
	Root       string
	Depth      int
	Signature  string
	AcceptedAt time.Time // set by the store
}

// ChangeKind names what a Change records.
type ChangeKind string

// The kinds of Change.
const (
	// ChangeEvent: an Event was accepted (AcceptEvent with added=true).
	ChangeEvent ChangeKind = "event"
	// ChangeWork: a Work was created or replaced (PutWork).
	ChangeWork ChangeKind = "work"
)

// Change is one entry of the durable change log: every accepted Event and
// every stored Work revision, in commit order. A client that remembers the
// last Seq it saw resumes from it and misses nothing.
type Change struct {
	// Seq is the change's place in the log, from 1, in commit order.
	Seq  int64
	Kind ChangeKind
	// ID is the Event's ID (ChangeEvent) or the Work's ID (ChangeWork).
	ID      string
	ScopeID string
	// Sequence is the Event's sequence (ChangeEvent only).
	Sequence int64
	// State and Revision are the Work's as of this change (ChangeWork only).
	State    WorkState
	Revision int64
	At       time.Time // set by the store
}

// WorkState is where a Work is in its life.
type WorkState string

// The Work states.
const (
	WorkPending   WorkState = "pending"
	WorkRunning   WorkState = "running"
	WorkWaiting   WorkState = "waiting"
	WorkDone      WorkState = "done"
	WorkFailed    WorkState = "failed"
	WorkCancelled WorkState = "cancelled"
)

// Valid reports whether s is one of the Work states.
func (s WorkState) Valid() bool {
	switch s {
	case WorkPending, WorkRunning, WorkWaiting, WorkDone, WorkFailed, WorkCancelled:
		return true
	}
	return false
}

// Terminal reports whether s is final (done, failed, cancelled).
func (s WorkState) Terminal() bool {
	return s == WorkDone || s == WorkFailed || s == WorkCancelled
}

// Work is a unit of work created or attached by routing.
type Work struct {
	ID      string
	ScopeID string
	Kind    string
	Binding string // the binding whose executor runs it
	State   WorkState
	// CorrelationKeys attach later Events to this Work (Works can be listed
	// by key).
	CorrelationKeys []string
	Display         json.RawMessage // optional JSON
	Context         json.RawMessage // optional JSON
	Grants          []string
	// Revision is 0 for a Work not yet stored; the store sets 1 on creation
	// and increments it on every update. An update must name the stored
	// revision, else ErrConflict.
	Revision  int64
	CreatedAt time.Time // set by the store
	UpdatedAt time.Time // set by the store
}

// WorkFilter selects Works for Tx.Works. Zero fields do not filter. Works
// come in ID order, after the cursor After.
type WorkFilter struct {
	ScopeID        string
	Kind           string
	State          WorkState
	CorrelationKey string
	After          string
	Limit          int
}

// ExecutionState is where one attempt is.
type ExecutionState string

// The Execution states.
const (
	ExecutionStarting  ExecutionState = "starting"
	ExecutionRunning   ExecutionState = "running"
	ExecutionSucceeded ExecutionState = "succeeded"
	ExecutionFailed    ExecutionState = "failed"
	ExecutionStopped   ExecutionState = "stopped"
)

// Valid reports whether s is one of the Execution states.
func (s ExecutionState) Valid() bool {
	switch s {
	case ExecutionStarting, ExecutionRunning, ExecutionSucceeded, ExecutionFailed, ExecutionStopped:
		return true
	}
	return false
}

// Execution is one attempt at a Work by an executor, under a lease.
type Execution struct {
	ID       string
	WorkID   string
	Attempt  int
	Executor string
	// Lease and Epoch fence every write for this attempt: the write is
	// refused with ErrConflict unless Epoch is the lease's current epoch.
	Lease     string
	Epoch     int64
	State     ExecutionState
	Recovery  json.RawMessage // the executor's recovery metadata, optional JSON
	Error     string
	StartedAt time.Time
	EndedAt   time.Time
	UpdatedAt time.Time // set by the store
}

// Lease is a named, fenced claim. Each acquisition starts a new epoch.
type Lease struct {
	Name      string
	Holder    string
	Epoch     int64
	ExpiresAt time.Time
	Released  bool
}

// LeaseRequest asks for a lease.
type LeaseRequest struct {
	Name   string
	Holder string
	Now    time.Time
	TTL    time.Duration
	// Supersede takes the lease even from a live holder (one whose lease
	// has not expired or been released). Without it that is ErrConflict.
	Supersede bool
}

// WaitState is where a Wait is.
type WaitState string

// The Wait states.
const (
	WaitActive    WaitState = "active"
	WaitSatisfied WaitState = "satisfied"
	WaitCancelled WaitState = "cancelled"
	WaitExpired   WaitState = "expired"
)

// Valid reports whether s is one of the Wait states.
func (s WaitState) Valid() bool {
	switch s {
	case WaitActive, WaitSatisfied, WaitCancelled, WaitExpired:
		return true
	}
	return false
}

// Wait is what a Work waits for. A Work has at most one active Wait.
type Wait struct {
	ID          string
	WorkID      string
	Keys        []string // input keys that wake it
	Target      string   // a <kind>:<name> target, optional
	Description string
	Progress    string // set only by Owner
	Owner       string
	State       WaitState
	Deadline    time.Time // optional timeout
	CreatedAt   time.Time // set by the store
	ResolvedAt  time.Time
}

// Timer fires at Due. Arming an existing key replaces it.
type Timer struct {
	Key        string
	ScopeID    string
	WorkID     string
	Kind       string // e.g. the recurrence kind that computes the next Due
	Due        time.Time
	Recurrence string          // the recurrence's own spec, optional
	Payload    json.RawMessage // optional JSON
	ArmedAt    time.Time       // set by the store
}

// Artifact is the metadata of a committed blob. The blob itself lives
// outside the database (see BlobStore); Digest names it.
type Artifact struct {
	ID          string
	WorkID      string
	ExecutionID string
	Name        string
	MediaType   string
	Digest      string // "sha256:<hex>" of the content
	Size        int64
	CreatedAt   time.Time // set by the store
}

// ToolResult is a toolbelt call's committed result, keyed by the call's
// request ID, so a retry replays it.
type ToolResult struct {
	RequestID    string
	Operation    string
	Result       json.RawMessage // optional JSON
	ErrorCode    string
	ErrorMessage string
	CommittedAt  time.Time // set by the store
}

// KVEntry is one namespaced KV value with its version.
type KVEntry struct {
	Namespace string
	Key       string
	Value     []byte
	Version   string // KVVersion(Value)
}

// KVKey names one KV entry.
type KVKey struct {
	Namespace string
	Key       string
}

// KVPrecondition is checked before a commit applies anything: the entry
// must be at Version, or absent when Absent is set (exactly one of the two).
type KVPrecondition struct {
	Namespace string
	Key       string
	Version   string
	Absent    bool
}

// KVPut writes Value under (Namespace, Key).
type KVPut struct {
	Namespace string
	Key       string
	Value     []byte
}

// KVBatch is one atomic KV commit: every precondition holds, then every put
// and delete applies; or nothing applies. A key may appear in at most one
// put or delete.
type KVBatch struct {
	Preconditions []KVPrecondition
	Puts          []KVPut
	Deletes       []KVKey
}
