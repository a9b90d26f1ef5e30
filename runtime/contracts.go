package runtime

import (
	"context"
	"encoding/json"
	"errors"
	"time"
)

// The contracts below are what the engine drives. In-process Go extensions
// implement them directly; the host's process adapters implement them over
// the wire. Every method that takes a context may be cancelled; a
// cancellation stops the call and never undoes what it already did.

// Sentinel errors of the driven contracts.
var (
	// ErrExecutorCrashed: the executor's process ended while the run was
	// observed. It is not the execution's failure: the engine recovers the
	// run from its persisted recovery metadata.
	ErrExecutorCrashed = errors.New("executor crashed")
	// ErrNotAdoptable: Recover cannot adopt the run its metadata names.
	// The engine stops the run, confirms the stop and retries the Work.
	ErrNotAdoptable = errors.New("not adoptable")
	// ErrCausalLimit: an Event would exceed its causal chain's depth or
	// per-minute limit. It is refused alone and recorded.
	ErrCausalLimit = errors.New("causal limit")
	// ErrUnauthorized: the caller's Authority does not cover the request.
	ErrUnauthorized = errors.New("unauthorized")
	// ErrUnsupported: an executor lacks the optional control asked for.
	ErrUnsupported = errors.New("unsupported")
)

// Ingress.

// Delivery is one push delivery as a transport received it (a webhook
// request, a receiver's message), before the source verified it.
type Delivery struct {
	// ID identifies the delivery at its transport; it may be empty when
	// the source derives delivery IDs from the body.
	ID         string
	Headers    map[string][]string
	Body       []byte
	ReceivedAt time.Time
}

// ReconcileRequest asks a source for one page of a scan.
type ReconcileRequest struct {
	// ScopeID is the scope the source is configured in.
	ScopeID string
	// Checkpoint is what the source returned with the last complete scan
	// ("" before the first).
	Checkpoint string
	// Cursor continues a scan: "" on its first page, then the previous
	// page's Next.
	Cursor string
	// Limit caps the observations in the page.
	Limit int
}

// Observation is one item as a scan saw it. (Item, Version) is its
// identity: the same identity must always carry the same envelope.
type Observation struct {
	Item     string
	Version  string
	Envelope Envelope
}

// ReconcilePage is one page of a scan.
type ReconcilePage struct {
	Observations []Observation
	// Next continues the scan; ignored on the last page.
	Next string
	// Complete marks the last page of a scan that saw every item. Only a
	// complete scan infers absence and advances the checkpoint.
	Complete bool
	// Checkpoint is the position the next scan starts from, kept only if
	// this scan completes.
	Checkpoint string
}

// IngressSource is a configured source of Events.
type IngressSource interface {
	// Push verifies one delivery and returns the envelopes it carries.
	Push(ctx context.Context, d Delivery) ([]Envelope, error)
	// Reconcile returns one page of a scan of the source's items.
	Reconcile(ctx context.Context, req ReconcileRequest) (ReconcilePage, error)
}

// Routing.

// Route is one configured route of a scope: the handler that decides, the
// Work kind it creates and the binding that runs it.
type Route struct {
	Name    string // optional, for traces and records
	Handler string
	Kind    string
	Binding string
	Config  json.RawMessage // the route's handler config, optional
}

// RouteInput is the detached snapshot a handler decides from.
type RouteInput struct {
	ScopeID string
	Route   Route
	Event   Event
	// Work is the first Work the Event names (Works) that is in the
	// Event's own scope, if any, as it stood when the snapshot was taken;
	// its Display is what a match without a display keeps. A Work of
	// another scope is never offered.
	Work *Work
}

// RouteDecision is a handler's verdict.
type RouteDecision struct {
	Match bool
	// Reason explains the verdict in a trace; it never changes routing.
	Reason string
	// CorrelationKeys attach the Event to open Work holding one of them
	// and wake active Waits on them; a new Work gets them all.
	CorrelationKeys []string
	// Kind overrides the route's Work kind when set.
	Kind string
	// Display replaces the Work's display; nil keeps it.
	Display *Display
	// Context and Grants apply only to Work the match creates.
	Context json.RawMessage
	Grants  []string
}

// RouteHandler decides whether a route takes an Event. Match must be free
// of side effects: it is called on snapshots, again after a revision
// conflict, and for hypothetical Events in a route trace.
type RouteHandler interface {
	Match(ctx context.Context, in RouteInput) (RouteDecision, error)
}

// RouteSample is a named sample Event a route trace can run.
type RouteSample struct {
	ID    string
	Title string
	Event Envelope
}

// RouteSampler is an optional RouteHandler method: sample Events for
// traces, written as of now.
type RouteSampler interface {
	Samples(ctx context.Context, scopeID string, route Route, now time.Time) ([]RouteSample, error)
}

// In-transaction callbacks. These run inside a store transaction: they
// must be pure, deterministic and quick, and make no calls back into the
// engine.

// WorkKindPolicy governs a Work kind.
type WorkKindPolicy interface {
	// Standing reports whether Work of the kind stays open after a
	// successful execution, waiting for more input, instead of ending
	// done.
	Standing() bool
	// Trigger picks, inside the start transaction, which of the inputs
	// (the Work's Events not yet given to an execution, oldest first)
	// triggers the attempt. An error or an index out of range falls back
	// to the first input.
	Trigger(inputs []Event) (int, error)
}

// Recurrence computes a recurring timer's next occurrence inside the fire
// transaction, from the timer that fired and the engine's clock. An error
// aborts the fire, which is retried.
type Recurrence interface {
	Next(fired Timer, now time.Time) (Occurrence, error)
}

// Occurrence is a recurrence's answer: when the timer fires next (zero
// ends the recurrence) and the payload that firing carries (nil keeps the
// timer's own).
type Occurrence struct {
	Due     time.Time
	Payload json.RawMessage
}

// DependencyFilter decides, inside the wake transaction, whether an Event
// satisfies a Wait its operation declared. An error counts as no match.
type DependencyFilter interface {
	Matches(wait Wait, ev Event) (bool, error)
}

// Operations.

// Authority is who calls an operation: established by the engine from the
// calling execution, never taken from the caller's word.
type Authority struct {
	ScopeID     string
	WorkID      string
	ExecutionID string
	// Connection is the connection the execution's binding names.
	Connection string
	// Operations are the operations the binding grants.
	Operations []string
}

// Call is one operation call as a handler sees it.
type Call struct {
	Operation string
	// RequestID names the call; a retry carries the same ID, and a
	// handler must be idempotent on it.
	RequestID string
	Authority Authority
	Input     json.RawMessage
}

// WaitRequest asks for a Wait on the calling Work.
type WaitRequest struct {
	Keys        []string
	Target      string
	Description string
	// Timeout, when positive, expires the Wait after that long.
	Timeout time.Duration
}

// Emission is an Event a transaction returns for the engine to accept: a
// root Event of its scope, or one derived from Parent.
type Emission struct {
	Source     string
	DeliveryID string
	ScopeID    string
	Family     string
	Type       string
	Schema     string
	Payload    json.RawMessage
	Parent     string
	Works      []string
	OccurredAt time.Time
}

// EmissionOutcome is what became of one Emission.
type EmissionOutcome struct {
	Event Event
	Added bool
	// Refused is set, and Event empty, when the Emission alone was
	// refused (ErrCausalLimit).
	Refused error
}

// EmitCommit returns, inside the emission transaction, the KV records that
// join it. It sees each Emission's outcome, IDs and sequences included.
type EmitCommit interface {
	Commit(outcomes []EmissionOutcome) (KVBatch, error)
}

// EmitPlan is an operation's emission: the Events and, optionally, the
// in-transaction commit of its records.
type EmitPlan struct {
	Emissions []Emission
	Commit    EmitCommit
	Result    json.RawMessage
}

// Operation is a toolbelt operation. Its handler runs outside any
// transaction and must be idempotent on the call's request ID.
type Operation interface {
	Handle(ctx context.Context, call Call) (json.RawMessage, error)
}

// WaitOperation is an optional Operation method: an operation that plans a
// Wait. The Wait is stored with the result in one transaction.
type WaitOperation interface {
	PlanWait(ctx context.Context, call Call) (WaitRequest, json.RawMessage, error)
}

// EmitOperation is an optional Operation method: an operation that plans
// emissions, accepted with its records in one transaction.
type EmitOperation interface {
	PlanEmit(ctx context.Context, call Call) (EmitPlan, error)
}

// Executors.

// RecoveryPersister stores an execution's recovery metadata through the
// lease-fenced path: a superseded or closed execution is refused
// (ErrConflict).
type RecoveryPersister func(ctx context.Context, metadata json.RawMessage) error

// RunRequest starts one attempt.
type RunRequest struct {
	ExecutionID string
	Attempt     int
	Epoch       int64
	Work        Work
	// Trigger is the input the Work kind's policy chose; Inputs are all
	// the inputs given to this attempt.
	Trigger Event
	Inputs  []Event
	// PersistRecovery must receive the metadata Recover needs before the
	// run can be adopted after a crash.
	PersistRecovery RecoveryPersister
	// Config is the binding's executor config.
	Config json.RawMessage
	// Toolbelt is the attempt's toolbelt endpoint and token (empty when
	// the binding grants none).
	Toolbelt RunToolbelt
}

// RecoverRequest adopts a run after its executor restarted.
type RecoverRequest struct {
	ExecutionID     string
	Attempt         int
	Epoch           int64
	Work            Work
	Recovery        json.RawMessage
	PersistRecovery RecoveryPersister
	// Config is the binding's executor config; Toolbelt the attempt's
	// toolbelt at its new epoch (the token of the earlier epoch is dead).
	Config   json.RawMessage
	Toolbelt RunToolbelt
}

// RunResult is how a run ended.
type RunResult struct {
	// State is ExecutionSucceeded, ExecutionFailed or ExecutionStopped.
	State ExecutionState
	Error string
}

// RunHandle observes one run.
type RunHandle interface {
	// Wait blocks until the run ends. Cancelling ctx cancels only the
	// observation. ErrExecutorCrashed means the executor went away while
	// the run may go on.
	Wait(ctx context.Context) (RunResult, error)
}

// Executor runs Work.
type Executor interface {
	Run(ctx context.Context, req RunRequest) (RunHandle, error)
	// Recover adopts a run from its recovery metadata; ErrNotAdoptable if
	// it cannot.
	Recover(ctx context.Context, req RecoverRequest) (RunHandle, error)
}

// The optional executor controls. An executor lacking one answers
// ErrUnsupported through the engine.
type (
	// Resumer continues a Work's earlier run with new input.
	Resumer interface {
		Resume(ctx context.Context, req RunRequest, previous json.RawMessage) (RunHandle, error)
	}
	// Injector gives a running execution more input.
	Injector interface {
		Inject(ctx context.Context, executionID string, input json.RawMessage) error
	}
	// Interrupter interrupts a running execution's current step.
	Interrupter interface {
		Interrupt(ctx context.Context, executionID string) error
	}
	// Stopper stops a run physically; nil is the evidence it stopped.
	Stopper interface {
		Stop(ctx context.Context, executionID string, epoch int64) error
	}
	// Forgetter drops what the executor kept for an ended execution.
	Forgetter interface {
		Forget(ctx context.Context, executionID string) error
	}
	// Attacher describes how an operator attaches to a run.
	Attacher interface {
		Attach(ctx context.Context, executionID string) (json.RawMessage, error)
	}
	// Liver returns a running execution's output so far.
	Liver interface {
		Live(ctx context.Context, executionID string, tail int) (json.RawMessage, error)
	}
)

// Tasks and checks.

// Task is a background pass an extension runs at its interval.
type Task interface {
	Run(ctx context.Context, name string) error
}

// CheckStatus grades a check.
type CheckStatus string

// The check statuses.
const (
	CheckOK   CheckStatus = "ok"
	CheckInfo CheckStatus = "info"
	CheckWarn CheckStatus = "warn"
	CheckFail CheckStatus = "fail"
)

// CheckResult is a doctor check's answer.
type CheckResult struct {
	Status CheckStatus
	Code   string
	Detail string
	Items  []string
}

// Check is a doctor check.
type Check interface {
	Run(ctx context.Context, name string, deep bool) (CheckResult, error)
}
