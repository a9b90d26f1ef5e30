package protocol

import (
	"encoding/json"
	"time"
)

// This file holds the wire types of every method beyond the lifecycle, KV,
// state reads and event.accept (wire.go): the surfaces an extension serves
// (routes, ingress, operations, the in-transaction callbacks, executors,
// tasks and checks) and the host services it calls (timers, secrets,
// artifacts, wait progress, ingress delivery, Work cancellation, recovery
// metadata). The conventions of wire.go apply: snake_case JSON, raw JSON
// for configs and payloads, RFC 3339 times, base64 for bytes.

// ---- Shared shapes ----

// Authority is what the host has validated about the caller of a toolbelt
// operation. It never carries the caller's bearer token.
type Authority struct {
	// ScopeID is the scope the calling Execution's Work is in.
	ScopeID string `json:"scope_id"`
	// WorkID is the calling Execution's Work.
	WorkID string `json:"work_id,omitempty"`
	// ExecutionID is the calling Execution.
	ExecutionID string `json:"execution_id,omitempty"`
	// Binding names the binding the Execution runs under.
	Binding string `json:"binding,omitempty"`
	// Connection is the connection the binding names, empty when none: the
	// operation may act as it (its config came in configure, its secrets
	// come from secret.resolve).
	Connection string `json:"connection,omitempty"`
}

// EventDraft is an Event an extension proposes and the host accepts: the
// host assigns its id, sequence, causal chain and acceptance time.
type EventDraft struct {
	// Source is in the extension's source namespace (its name, or name/…).
	Source string `json:"source"`
	// DeliveryID with Source is the Event's identity.
	DeliveryID string `json:"delivery_id"`
	// ScopeID is the scope it is accepted into; empty takes the scope of
	// the source or call it answers.
	ScopeID string `json:"scope_id,omitempty"`
	// Family is one of the extension's declared families.
	Family string `json:"family"`
	// Type is the Event's type within its family.
	Type string `json:"type,omitempty"`
	// Schema is absent or the current version of one of the extension's
	// payload schemas (CheckWrite).
	Schema string `json:"schema,omitempty"`
	// Payload is the Event's data.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Works are the ids of the Work the Event names.
	Works []string `json:"works,omitempty"`
	// OccurredAt is when it happened, as the producer saw it.
	OccurredAt time.Time `json:"occurred_at,omitzero"`
}

// Display says what a Work is, in the words of its source. Every field is
// one line of UTF-8; a display needs a title or a ref.
type Display struct {
	// Title is at most 200 bytes.
	Title string `json:"title,omitempty"`
	// Ref is a short reference such as "#136", at most 40 bytes.
	Ref string `json:"ref,omitempty"`
	// Requester is who asked, at most 100 bytes.
	Requester string `json:"requester,omitempty"`
	// Links are at most 8 labelled http or https links.
	Links []DisplayLink `json:"links,omitempty"`
}

// DisplayLink is one link of a Work display.
type DisplayLink struct {
	// Label is required, at most 60 bytes.
	Label string `json:"label"`
	// URL is an http or https URL of at most 2048 bytes.
	URL string `json:"url"`
}

// ---- Routing ----

// RouteMatchParams asks a route handler how it decides one Event. The
// handler decides from these params alone, free of side effects: the host
// may ask about Events that never happen (route traces) and ask again
// after a revision conflict.
type RouteMatchParams struct {
	// Handler is one of the extension's declared route handlers.
	Handler string `json:"handler"`
	// ScopeID is the scope whose route is evaluated.
	ScopeID string `json:"scope_id"`
	// RouteID names the route within its scope.
	RouteID string `json:"route_id,omitempty"`
	// Config is the route's handler config.
	Config json.RawMessage `json:"config,omitempty"`
	// Event is the Event to decide. An extension SDK upcasts an older
	// payload of its own to the current version before the handler sees it.
	Event Event `json:"event"`
	// Work is the Work the Event would reach, when there is one, so the
	// handler can extend its display.
	Work *Work `json:"work,omitempty"`
}

// RouteMatchResult is a route handler's decision.
type RouteMatchResult struct {
	// Match says the route takes the Event.
	Match bool `json:"match"`
	// Reason explains the verdict in a route trace; it never changes it.
	Reason string `json:"reason,omitempty"`
	// Kind is the kind of Work a match creates or attaches to.
	Kind string `json:"kind,omitempty"`
	// CorrelationKeys create or attach Work by key.
	CorrelationKeys []string `json:"correlation_keys,omitempty"`
	// Display replaces the Work's display; absent keeps it.
	Display *Display `json:"display,omitempty"`
	// Context becomes the context of Work the match creates.
	Context json.RawMessage `json:"context,omitempty"`
	// Grants are the binding's grants Work the match creates opts into.
	Grants []string `json:"grants,omitempty"`
}

// RouteSamplesParams asks a route handler declared with samples for named
// sample Events to trace.
type RouteSamplesParams struct {
	// Handler is one of the extension's route handlers that offers samples.
	Handler string `json:"handler"`
	// ScopeID is the scope of the route.
	ScopeID string `json:"scope_id"`
	// RouteID names the route within its scope.
	RouteID string `json:"route_id,omitempty"`
	// Config is the route's handler config.
	Config json.RawMessage `json:"config,omitempty"`
	// Now is the host's clock: a sample that carries a time writes it as of
	// Now, never the process's own clock.
	Now time.Time `json:"now"`
}

// RouteSample is one named sample Event.
type RouteSample struct {
	// ID names the sample, unique within the handler's answer.
	ID string `json:"id"`
	// Title says what the sample is, in one line.
	Title string `json:"title"`
	// Event is the hypothetical Event. Its payload must be one the
	// extension may write, or the host drops the sample.
	Event EventDraft `json:"event"`
}

// RouteSamplesResult is the handler's samples.
type RouteSamplesResult struct {
	// Samples are offered for a route trace.
	Samples []RouteSample `json:"samples"`
}

// ---- Ingress ----

// Delivery is one verified delivery to an ingress source, such as a
// webhook request.
type Delivery struct {
	// ID identifies the delivery at its source, when the source gives one.
	ID string `json:"id,omitempty"`
	// Path is the webhook path it arrived on, if any.
	Path string `json:"path,omitempty"`
	// Headers are the request headers that matter to the extension.
	Headers map[string][]string `json:"headers,omitempty"`
	// Body is the delivery's body, base64 on the wire.
	Body []byte `json:"body,omitempty"`
	// ReceivedAt is when the host received it.
	ReceivedAt time.Time `json:"received_at,omitzero"`
}

// IngressPushParams gives a source a delivery to turn into Events. The host
// accepts the Events durably before it acknowledges the delivery.
type IngressPushParams struct {
	// Type is the extension type of the source's entry.
	Type string `json:"type"`
	// Source is a source the extension registered in configure.
	Source string `json:"source"`
	// ScopeID is the scope the source delivers into.
	ScopeID string `json:"scope_id"`
	// EntryID is the config entry the source belongs to.
	EntryID string `json:"entry_id,omitempty"`
	// Delivery is what arrived.
	Delivery Delivery `json:"delivery"`
}

// IngressPushResult is the Events a delivery produced.
type IngressPushResult struct {
	// Events are accepted in order; none is an acknowledged no-op.
	Events []EventDraft `json:"events,omitempty"`
}

// WebhookHandleParams is one HTTP request under a webhook path the
// extension registered in configure. The extension verifies it (a
// signature over Body, say) and answers the Events it yields; the host
// answers the sender 2xx only once every one of them is durably
// accepted, and a refusal (an error coded invalid, unauthorized,
// not_found or conflict) 4xx with the error's message.
type WebhookHandleParams struct {
	// Method is the request's HTTP method.
	Method string `json:"method"`
	// Path is the request's path, at or under WebhookPath.
	Path string `json:"path"`
	// WebhookPath is the registered path that covers Path.
	WebhookPath string `json:"webhook_path"`
	// Query is the request's raw query, without the "?".
	Query string `json:"query,omitempty"`
	// Headers are the request's headers, canonically keyed.
	Headers map[string][]string `json:"headers,omitempty"`
	// Body is the request's body, base64 on the wire; the host bounds it.
	Body []byte `json:"body,omitempty"`
	// ReceivedAt is when the host received it.
	ReceivedAt time.Time `json:"received_at,omitzero"`
}

// WebhookHandleResult is the Events a verified request yields. Each names
// a source the extension registered and a family of that source; none is
// an acknowledged no-op.
type WebhookHandleResult struct {
	// Events are accepted together, all or none.
	Events []EventDraft `json:"events,omitempty"`
}

// IngressReconcileParams asks a source for one page of its items.
type IngressReconcileParams struct {
	// Type is the extension type of the source's entry.
	Type string `json:"type"`
	// Source is a reconciled source the extension registered.
	Source string `json:"source"`
	// ScopeID is the scope the source delivers into.
	ScopeID string `json:"scope_id"`
	// EntryID is the config entry the source belongs to.
	EntryID string `json:"entry_id,omitempty"`
	// Cursor is the previous page's Next; empty starts a scan.
	Cursor string `json:"cursor,omitempty"`
	// MaxItems bounds the page's observations.
	MaxItems int `json:"max_items,omitempty"`
	// MaxBytes bounds the page's encoded size.
	MaxBytes int `json:"max_bytes,omitempty"`
}

// Observation is one item as a scan saw it: the host accepts its Event when
// (item, version) is new and infers the absence of items a complete scan
// did not see.
type Observation struct {
	// Item identifies the item at its source.
	Item string `json:"item"`
	// Version identifies the item's state; a new version is a change. A
	// release that changes the payload of unchanged items mints new
	// versions (for example by including the schema version).
	Version string `json:"version"`
	// Event is the Event the observation produces.
	Event EventDraft `json:"event"`
}

// IngressReconcileResult is one page of a scan.
type IngressReconcileResult struct {
	// Observations are the page's items.
	Observations []Observation `json:"observations,omitempty"`
	// Next is the cursor of the following page; empty after the last.
	Next string `json:"next,omitempty"`
	// Complete says the scan saw every item, so absence may be inferred. A
	// partial scan infers nothing and advances no checkpoint.
	Complete bool `json:"complete,omitempty"`
}

// IngressDeliverParams delivers Events from the extension's own receiver.
// The host answers after durable acceptance, so the extension acknowledges
// upstream only then.
type IngressDeliverParams struct {
	// Source is a source the last configure registered.
	Source string `json:"source"`
	// Events are accepted in order.
	Events []EventDraft `json:"events"`
}

// IngressDeliverResult has one outcome per delivered Event, in order.
type IngressDeliverResult struct {
	// Accepted holds each Event's outcome.
	Accepted []EmissionOutcome `json:"accepted"`
}

// ---- Toolbelt operations ----

// OperationCallParams is one toolbelt call of a handler operation. A
// handler must be idempotent on RequestID: a retry carries the same id.
type OperationCallParams struct {
	// Operation is one of the extension's handler operations.
	Operation string `json:"operation"`
	// RequestID identifies the call across retries; empty when the caller
	// gave none (then nothing is replayed).
	RequestID string `json:"request_id,omitempty"`
	// Input is the call's input data.
	Input json.RawMessage `json:"input,omitempty"`
	// Authority is the validated caller.
	Authority Authority `json:"authority"`
}

// OperationCallResult is a handler's answer, committed by the host under
// the request id.
type OperationCallResult struct {
	// Output is the call's result data.
	Output json.RawMessage `json:"output,omitempty"`
}

// OperationWaitParams asks a wait operation to plan the Wait a call
// declares.
type OperationWaitParams struct {
	// Operation is one of the extension's wait operations.
	Operation string `json:"operation"`
	// RequestID identifies the call across retries.
	RequestID string `json:"request_id,omitempty"`
	// Input is the call's input data.
	Input json.RawMessage `json:"input,omitempty"`
	// Authority is the validated caller.
	Authority Authority `json:"authority"`
}

// WaitPlan is the Wait a wait operation declares on the caller's Work.
type WaitPlan struct {
	// Keys are the correlation keys whose input wakes the Wait.
	Keys []string `json:"keys,omitempty"`
	// Target is a "<kind>:<name>" wait target, if any.
	Target string `json:"target,omitempty"`
	// Deadline ends the Wait by timeout; zero for none.
	Deadline time.Time `json:"deadline,omitzero"`
	// Description says what the Work waits for, in the source's words; the
	// host keeps its first line, cut to 200 bytes.
	Description string `json:"description,omitempty"`
}

// OperationWaitResult is the planned Wait.
type OperationWaitResult struct {
	// Wait is declared on the caller's Work.
	Wait WaitPlan `json:"wait"`
	// Output is returned to the caller with the declaration.
	Output json.RawMessage `json:"output,omitempty"`
}

// OperationEmitParams asks an emit operation to plan the Event a call
// emits.
type OperationEmitParams struct {
	// Operation is one of the extension's emit operations.
	Operation string `json:"operation"`
	// RequestID identifies the call across retries.
	RequestID string `json:"request_id,omitempty"`
	// Input is the call's input data.
	Input json.RawMessage `json:"input,omitempty"`
	// Authority is the validated caller.
	Authority Authority `json:"authority"`
}

// OperationEmitResult is the planned emission.
type OperationEmitResult struct {
	// Event is accepted by the host, derived from the caller's input.
	Event EventDraft `json:"event"`
	// Commit is handed back to emit.commit inside the emission's
	// transaction (for an operation declared with commit); absent for none.
	Commit json.RawMessage `json:"commit,omitempty"`
	// Output is returned to the caller.
	Output json.RawMessage `json:"output,omitempty"`
}

// EmitCommitParams asks for the records of an emission, inside the
// transaction that accepts its Event. It is pure and bounded: no callback
// is allowed while it runs.
type EmitCommitParams struct {
	// Operation is the emit operation declared with commit.
	Operation string `json:"operation"`
	// RequestID is the call's request id.
	RequestID string `json:"request_id,omitempty"`
	// Event is the accepted Event, with its id, sequence, root and depth.
	Event Event `json:"event"`
	// Commit is what operation.emit returned as commit.
	Commit json.RawMessage `json:"commit,omitempty"`
}

// EmitCommitResult is the KV records that commit with the Event.
type EmitCommitResult struct {
	// Puts are written in the emission's transaction.
	Puts []KVPut `json:"puts,omitempty"`
	// Deletes are deleted in the emission's transaction.
	Deletes []KVKey `json:"deletes,omitempty"`
}

// DependencyFilterParams asks whether an Event wakes a Wait a wait
// operation declared, inside the subscription transaction. Pure and
// bounded; a failure counts as no match.
type DependencyFilterParams struct {
	// Operation is the wait operation declared with dependency_filter.
	Operation string `json:"operation"`
	// Wait is the active Wait.
	Wait Wait `json:"wait"`
	// Event is the candidate Event, upcast by an extension SDK like a
	// route's.
	Event Event `json:"event"`
}

// DependencyFilterResult is the filter's verdict.
type DependencyFilterResult struct {
	// Match says the Event wakes the Wait.
	Match bool `json:"match"`
}

// ---- Timers and Work kinds ----

// RecurrenceNextParams asks for a recurrence's next occurrence, inside the
// timer's fire-and-rearm transaction. Pure and bounded.
type RecurrenceNextParams struct {
	// Recurrence is one of the extension's declared recurrences.
	Recurrence string `json:"recurrence"`
	// Timer is the timer that fired.
	Timer Timer `json:"timer"`
	// Now is the host's clock at the firing.
	Now time.Time `json:"now"`
}

// RecurrenceNextResult is the next occurrence, or none.
type RecurrenceNextResult struct {
	// Next is when the timer fires again; zero ends the recurrence.
	Next time.Time `json:"next,omitzero"`
	// Schema is the next occurrence's payload schema (absent or current).
	Schema string `json:"schema,omitempty"`
	// Payload is the next occurrence's payload; absent keeps the timer's.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// WorkKindTriggerParams asks which input starts a Work, inside the start
// transaction. Pure and bounded; a failure picks the first input.
type WorkKindTriggerParams struct {
	// Kind is one of the extension's work kinds declared with trigger.
	Kind string `json:"kind"`
	// Work is the Work about to start.
	Work Work `json:"work"`
	// Inputs are its pending inputs, oldest first.
	Inputs []Event `json:"inputs"`
}

// WorkKindTriggerResult names the chosen input.
type WorkKindTriggerResult struct {
	// Trigger is the id of one of the inputs.
	Trigger string `json:"trigger"`
}

// TimerArmParams arms (or re-arms) a timer of a declared recurrence.
type TimerArmParams struct {
	// Key names the timer; the host prefixes it with the extension's name.
	Key string `json:"key"`
	// Recurrence is one of the extension's declared recurrences.
	Recurrence string `json:"recurrence"`
	// ScopeID is one of the extension's configured scopes.
	ScopeID string `json:"scope_id"`
	// WorkID is the Work the timer belongs to, if any.
	WorkID string `json:"work_id,omitempty"`
	// Due is when it fires.
	Due time.Time `json:"due"`
	// Schema is the payload's schema (absent or current).
	Schema string `json:"schema,omitempty"`
	// Payload travels with the firing.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// TimerArmResult is the armed timer.
type TimerArmResult struct {
	// Timer is as stored.
	Timer Timer `json:"timer"`
}

// TimerCancelParams cancels a timer the extension armed.
type TimerCancelParams struct {
	// Key is the key it was armed with.
	Key string `json:"key"`
}

// TimerCancelResult says whether a timer was armed.
type TimerCancelResult struct {
	// Cancelled is false when no such timer was armed.
	Cancelled bool `json:"cancelled"`
}

// WorkCancelParams cancels Work of the extension's own kinds.
type WorkCancelParams struct {
	// WorkID is the Work to cancel.
	WorkID string `json:"work_id"`
	// Reason is recorded with the cancellation.
	Reason string `json:"reason,omitempty"`
}

// WorkCancelResult says whether the Work was still open.
type WorkCancelResult struct {
	// Cancelled is false when the Work had already settled.
	Cancelled bool `json:"cancelled"`
}

// WaitProgressParams sets the progress line of the active Wait of a Work,
// which one of the extension's wait operations declared.
type WaitProgressParams struct {
	// WorkID names the Work (a Work has at most one active Wait).
	WorkID string `json:"work_id"`
	// Progress is one line, cut to 120 bytes; empty clears it.
	Progress string `json:"progress"`
}

// WaitProgressResult acknowledges wait.progress.
type WaitProgressResult struct{}

// ---- Tasks and checks ----

// TaskRunParams runs a background pass.
type TaskRunParams struct {
	// Task is one of the extension's declared tasks.
	Task string `json:"task"`
	// Now is the host's clock.
	Now time.Time `json:"now"`
}

// TaskRunResult reports a pass.
type TaskRunResult struct {
	// Detail says what the pass did, in one line.
	Detail string `json:"detail,omitempty"`
}

// The statuses of a full check result.
const (
	CheckOK   = "ok"
	CheckInfo = "info"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// CheckRunParams runs a doctor check.
type CheckRunParams struct {
	// Check is one of the extension's declared checks.
	Check string `json:"check"`
	// Deep asks for the thorough form (which may resolve secrets).
	Deep bool `json:"deep,omitempty"`
	// Config is the read-only view of the configuration that uses the
	// extension; never secret values or references.
	Config json.RawMessage `json:"config,omitempty"`
}

// CheckRunResult is {ok, detail}, or a full check with Status.
type CheckRunResult struct {
	// OK is read only without Status: true is ok, false a warning.
	OK bool `json:"ok,omitempty"`
	// Status is ok, info, warn or fail.
	Status string `json:"status,omitempty"`
	// Code is a stable code for the finding.
	Code string `json:"code,omitempty"`
	// Detail says what was found.
	Detail string `json:"detail,omitempty"`
	// Items list the findings one by one.
	Items []string `json:"items,omitempty"`
}

// ---- Secrets ----

// SecretResolveParams resolves a connection's secrets.
type SecretResolveParams struct {
	// Connection is bound to one of the extension's entries, or named by a
	// binding of one of its scopes.
	Connection string `json:"connection"`
	// ScopeID is the scope the connection is used in.
	ScopeID string `json:"scope_id,omitempty"`
	// Names are the secret keys wanted; empty asks for all.
	Names []string `json:"names,omitempty"`
}

// SecretResolveResult is the current values. Never log them.
type SecretResolveResult struct {
	// Values maps each secret key to its value.
	Values map[string]string `json:"values"`
}

// ---- Executors ----

// ExecutorRunParams starts a run of a Work. The run is addressed by RunID
// from then on; it survives the extension process, and after a restart
// the host adopts it with executor.recover.
type ExecutorRunParams struct {
	// Executor is one of the extension's executors.
	Executor string `json:"executor"`
	// RunID is the host-assigned, unguessable id of the run.
	RunID string `json:"run_id"`
	// Work is the Work the run serves.
	Work Work `json:"work"`
	// Execution is the attempt.
	Execution Execution `json:"execution"`
	// Config is the binding's executor config.
	Config json.RawMessage `json:"config,omitempty"`
	// Inputs are the Work's inputs, verbatim.
	Inputs []Event `json:"inputs,omitempty"`
	// Endpoint is the per-execution toolbelt endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// Token is the per-execution toolbelt token.
	Token string `json:"token,omitempty"`
	// Env is the environment layer the run starts with.
	Env map[string]string `json:"env,omitempty"`
}

// ExecutorRunResult acknowledges a started run.
type ExecutorRunResult struct {
	// Recovery is the run's first recovery metadata, persisted by the host
	// as execution.persist_recovery would.
	Recovery json.RawMessage `json:"recovery,omitempty"`
}

// ExecutorWaitParams observes a run until it settles. Cancelling the call
// stops observing, never the run.
type ExecutorWaitParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run; an unknown run is not_found.
	RunID string `json:"run_id"`
}

// ExecutorWaitResult is how a run settled.
type ExecutorWaitResult struct {
	// State is succeeded, failed or stopped.
	State string `json:"state"`
	// ExitCode is the run's process exit code, when it has one.
	ExitCode int `json:"exit_code,omitempty"`
	// Error says why it failed.
	Error string `json:"error,omitempty"`
	// Output is the run's result data.
	Output json.RawMessage `json:"output,omitempty"`
}

// ExecutorRecoverParams adopts a run after the extension restarted, from
// its last persisted recovery metadata.
type ExecutorRecoverParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
	// Work is the Work the run serves.
	Work Work `json:"work"`
	// Execution is the attempt.
	Execution Execution `json:"execution"`
	// Recovery is the metadata last persisted for the run.
	Recovery json.RawMessage `json:"recovery,omitempty"`
	// Config is the binding's executor config.
	Config json.RawMessage `json:"config,omitempty"`
	// Endpoint is the run's toolbelt endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// Token is the run's toolbelt token at the attempt's new epoch: the
	// token the run was started with is refused from now on.
	Token string `json:"token,omitempty"`
}

// ExecutorRecoverResult acknowledges the adoption; a run that cannot be
// adopted is not_adoptable.
type ExecutorRecoverResult struct{}

// ExecutorResumeParams resumes a settled run with new input.
type ExecutorResumeParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
	// Inputs are the new inputs.
	Inputs []Event `json:"inputs,omitempty"`
	// Execution is the new attempt the resumed run serves.
	Execution Execution `json:"execution,omitzero"`
	// Config is the binding's executor config.
	Config json.RawMessage `json:"config,omitempty"`
	// Endpoint is the run's toolbelt endpoint.
	Endpoint string `json:"endpoint,omitempty"`
	// Token is the new attempt's toolbelt token: the earlier attempt's is
	// refused.
	Token string `json:"token,omitempty"`
}

// ExecutorResumeResult acknowledges the resume.
type ExecutorResumeResult struct{}

// ExecutorInjectParams delivers input into a running run.
type ExecutorInjectParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
	// Text is the input to deliver.
	Text string `json:"text,omitempty"`
	// Events are input Events to deliver.
	Events []Event `json:"events,omitempty"`
}

// ExecutorInjectResult acknowledges the delivery.
type ExecutorInjectResult struct{}

// ExecutorInterruptParams interrupts a running run.
type ExecutorInterruptParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
}

// ExecutorInterruptResult acknowledges the interrupt.
type ExecutorInterruptResult struct{}

// ExecutorStopParams stops a run's processes for good.
type ExecutorStopParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
	// Epoch is the lease epoch the stop is for.
	Epoch int64 `json:"epoch,omitempty"`
}

// ExecutorStopResult is physical-stop evidence.
type ExecutorStopResult struct {
	// Stopped says no process of the run is left.
	Stopped bool `json:"stopped"`
	// Evidence says how that was confirmed (such as the reaped process
	// group).
	Evidence string `json:"evidence,omitempty"`
}

// ExecutorForgetParams drops what the executor keeps for a settled run.
type ExecutorForgetParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
}

// ExecutorForgetResult acknowledges the forget.
type ExecutorForgetResult struct{}

// ExecutorAttachParams asks how an operator's terminal attaches to a run's
// session.
type ExecutorAttachParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
}

// ExecutorAttachResult is the command that attaches; nothing_to_attach
// when there is no session.
type ExecutorAttachResult struct {
	// Argv is the command to run in the operator's terminal.
	Argv []string `json:"argv"`
	// Dir is its working directory.
	Dir string `json:"dir,omitempty"`
	// Env are variables to add to the operator's environment.
	Env map[string]string `json:"env,omitempty"`
}

// ExecutorLiveParams asks for a running attempt's output so far.
type ExecutorLiveParams struct {
	// Executor is the run's executor.
	Executor string `json:"executor"`
	// RunID is the run.
	RunID string `json:"run_id"`
	// Tail is how many trailing bytes of each output to return.
	Tail int `json:"tail,omitempty"`
}

// LiveOutput is one output of a running attempt.
type LiveOutput struct {
	// Name names the output, such as "stdout".
	Name string `json:"name"`
	// MediaType is its media type.
	MediaType string `json:"media_type,omitempty"`
	// Size is its size so far.
	Size int64 `json:"size"`
	// Tail is its last bytes, base64 on the wire.
	Tail []byte `json:"tail,omitempty"`
}

// ExecutorLiveResult is the outputs so far; not_live when the run is not
// running.
type ExecutorLiveResult struct {
	// Outputs are the run's outputs.
	Outputs []LiveOutput `json:"outputs"`
}

// ExecutionPersistRecoveryParams persists a run's recovery metadata through
// the lease-fenced path; a run the host no longer serves is refused.
type ExecutionPersistRecoveryParams struct {
	// RunID is a run the host opened for this process.
	RunID string `json:"run_id"`
	// Recovery is what executor.recover receives after a restart.
	Recovery json.RawMessage `json:"recovery"`
}

// ExecutionPersistRecoveryResult acknowledges the persistence.
type ExecutionPersistRecoveryResult struct{}

// ---- Artifacts ----

// ArtifactCreateParams opens an artifact of a run for writing.
type ArtifactCreateParams struct {
	// RunID is a run the host opened for this process.
	RunID string `json:"run_id"`
	// Name names the artifact within the run, such as "transcript.jsonl".
	Name string `json:"name"`
	// MediaType is its media type.
	MediaType string `json:"media_type,omitempty"`
}

// ArtifactCreateResult names the open artifact.
type ArtifactCreateResult struct {
	// ArtifactID addresses the artifact in later artifact.* calls.
	ArtifactID string `json:"artifact_id"`
}

// ArtifactWriteParams writes one chunk of at most MaxChunkBytes. Each chunk
// is acknowledged before the next is sent.
type ArtifactWriteParams struct {
	// ArtifactID is an open artifact.
	ArtifactID string `json:"artifact_id"`
	// Offset is where the chunk starts: the bytes written so far. A chunk
	// sent again at an offset already written is answered without writing.
	Offset int64 `json:"offset"`
	// Data is the chunk, base64 on the wire.
	Data []byte `json:"data"`
}

// ArtifactWriteResult acknowledges a chunk: the host accepted it and is
// writing it. An acknowledged chunk is not yet durable; a write that fails
// afterwards fails the next artifact.write or the commit, and a failed
// commit keeps nothing. Only a successful artifact.commit says the
// artifact is kept whole.
type ArtifactWriteResult struct {
	// Size is the artifact's size after the chunk.
	Size int64 `json:"size"`
}

// ArtifactCommitParams finishes an artifact so it is kept.
type ArtifactCommitParams struct {
	// ArtifactID is an open artifact.
	ArtifactID string `json:"artifact_id"`
	// Size is the size the writer wrote, checked by the host.
	Size int64 `json:"size"`
}

// ArtifactCommitResult is the kept artifact.
type ArtifactCommitResult struct {
	// ArtifactID is the artifact.
	ArtifactID string `json:"artifact_id"`
	// Size is its size.
	Size int64 `json:"size"`
	// SHA256 is the lower-case hex digest of its content.
	SHA256 string `json:"sha256,omitempty"`
}

// ArtifactAbortParams discards an artifact being written.
type ArtifactAbortParams struct {
	// ArtifactID is an open artifact.
	ArtifactID string `json:"artifact_id"`
}

// ArtifactAbortResult acknowledges the abort.
type ArtifactAbortResult struct{}

// messageShapes are the shapes of this file's methods; the generated
// reference reads them with wire.go's (allShapes).
var messageShapes = map[string]methodShape{
	"validate": {ValidateParams{}, ValidateResult{}},

	"route.match":   {RouteMatchParams{}, RouteMatchResult{}},
	"route.samples": {RouteSamplesParams{}, RouteSamplesResult{}},

	"ingress.push":      {IngressPushParams{}, IngressPushResult{}},
	"ingress.reconcile": {IngressReconcileParams{}, IngressReconcileResult{}},
	"ingress.deliver":   {IngressDeliverParams{}, IngressDeliverResult{}},
	"webhook.handle":    {WebhookHandleParams{}, WebhookHandleResult{}},

	"operation.call":    {OperationCallParams{}, OperationCallResult{}},
	"operation.wait":    {OperationWaitParams{}, OperationWaitResult{}},
	"operation.emit":    {OperationEmitParams{}, OperationEmitResult{}},
	"emit.commit":       {EmitCommitParams{}, EmitCommitResult{}},
	"dependency.filter": {DependencyFilterParams{}, DependencyFilterResult{}},

	"recurrence.next":   {RecurrenceNextParams{}, RecurrenceNextResult{}},
	"work_kind.trigger": {WorkKindTriggerParams{}, WorkKindTriggerResult{}},
	"timer.arm":         {TimerArmParams{}, TimerArmResult{}},
	"timer.cancel":      {TimerCancelParams{}, TimerCancelResult{}},
	"work.cancel":       {WorkCancelParams{}, WorkCancelResult{}},
	"wait.progress":     {WaitProgressParams{}, WaitProgressResult{}},

	"task.run":  {TaskRunParams{}, TaskRunResult{}},
	"check.run": {CheckRunParams{}, CheckRunResult{}},

	"telemetry.capture": {TelemetryCaptureParams{}, TelemetryCaptureResult{}},
	"telemetry.sink":    {TelemetrySinkParams{}, TelemetrySinkResult{}},
	"secret.resolve":    {SecretResolveParams{}, SecretResolveResult{}},

	"executor.run":               {ExecutorRunParams{}, ExecutorRunResult{}},
	"executor.wait":              {ExecutorWaitParams{}, ExecutorWaitResult{}},
	"executor.recover":           {ExecutorRecoverParams{}, ExecutorRecoverResult{}},
	"executor.resume":            {ExecutorResumeParams{}, ExecutorResumeResult{}},
	"executor.inject":            {ExecutorInjectParams{}, ExecutorInjectResult{}},
	"executor.interrupt":         {ExecutorInterruptParams{}, ExecutorInterruptResult{}},
	"executor.stop":              {ExecutorStopParams{}, ExecutorStopResult{}},
	"executor.forget":            {ExecutorForgetParams{}, ExecutorForgetResult{}},
	"executor.attach":            {ExecutorAttachParams{}, ExecutorAttachResult{}},
	"executor.live":              {ExecutorLiveParams{}, ExecutorLiveResult{}},
	"execution.persist_recovery": {ExecutionPersistRecoveryParams{}, ExecutionPersistRecoveryResult{}},

	"artifact.create": {ArtifactCreateParams{}, ArtifactCreateResult{}},
	"artifact.write":  {ArtifactWriteParams{}, ArtifactWriteResult{}},
	"artifact.commit": {ArtifactCommitParams{}, ArtifactCommitResult{}},
	"artifact.abort":  {ArtifactAbortParams{}, ArtifactAbortResult{}},
}
