package sdk

import (
	"context"
	"encoding/json"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// Func is a handler that may call the host: it serves one request with
// the request's params P and answers R. host is the extension's client of
// the host services (KV, state reads, timers, artifacts …).
type Func[P, R any] func(ctx context.Context, host *Host, params P) (R, error)

// PureFunc is a handler that decides from its params alone. Route
// handlers and the four in-transaction callbacks are pure: they get no
// Host, so they cannot make a callback (the host refuses one with
// reentrant_call while an in-transaction call is outstanding) and a route
// trace can ask them about Events that never happen.
type PureFunc[P, R any] func(ctx context.Context, params P) (R, error)

// Upcaster converts a payload of one version of a schema to the next
// version. Extension.Upcasters holds one per step, keyed by the schema id
// it reads.
type Upcaster func(payload json.RawMessage) (json.RawMessage, error)

// Extension is what an extension author provides. Every field but
// Manifest is optional; the manifest decides which surfaces the extension
// declares, and Serve and Attach refuse an Extension whose handlers do not
// match it, so a declared surface always has a handler and a handler
// always a declaration. Maps are keyed by the names the manifest declares.
//
// The SDK serves the lifecycle, routes, ingress push and reconcile,
// webhooks, operations (with their dependency filters and emission
// commits), recurrences, work-kind triggers, executors, tasks and checks.
// A manifest that enables any other host-to-extension surface (providers,
// targets, probes, tunnels …) is refused when serving starts;
// validate, which every manifest enables, checks the object's type
// against the manifest and then asks Validate; event.render is answered
// method_not_found, so the host falls back to what it does without it.
//
// Handlers may run concurrently; each gets the request's context, which
// ends when the host cancels the request or the connection ends.
// Returning a *protocol.Error (or an error wrapping one) answers with its
// code and message; any other error answers internal, its detail logged
// to stderr only.
type Extension struct {
	// Manifest is the open-conduit-extension.json the extension ships
	// with, usually embedded with //go:embed. It is parsed and validated
	// when serving starts, and returned verbatim in initialize.
	Manifest []byte

	// Initialize is told the host's initialize params (the state
	// directory, executor directories …) once a protocol version is agreed.
	Initialize func(ctx context.Context, params protocol.InitializeParams) error

	// Migrate upgrades the extension's KV layout from version stored to
	// declared. It runs before Configure whenever configure reports
	// kv.stored < kv.declared, and again after a crash mid-migration (the
	// host records the new version only after configure succeeds), so it
	// must be idempotent: write with precondition-guarded batches
	// (Host.Update) that are no-ops when already applied.
	Migrate func(ctx context.Context, host *Host, stored, declared int) error

	// Configure applies a configuration generation and answers the ingress
	// sources and webhook paths it registers. It is called after
	// initialize and again on every config apply.
	Configure Func[protocol.ConfigureParams, protocol.ConfigureResult]

	// Upcasters convert older payloads of the extension's own schemas, one
	// version step each, keyed by the schema id they read:
	// "notes.note.v1" turns a v1 payload into v2. Every version a schema
	// declares below its current one needs its step. The SDK chains them,
	// so decision handlers (routes, dependency filters, triggers) only see
	// current payloads; retired, newer and undeclared payloads of the
	// extension's own never reach them and are answered deterministically
	// (no match, false, the first input).
	Upcasters map[string]Upcaster

	// Webhook verifies and turns into Events a request under one of the
	// webhook paths Configure registered (webhook.handle); set exactly when
	// an extension type of the manifest declares webhooks. Return a
	// *protocol.Error coded unauthorized (a bad signature) or invalid (a
	// malformed body) to refuse the request: the host answers its sender
	// 4xx with the message and accepts nothing.
	Webhook Func[protocol.WebhookHandleParams, protocol.WebhookHandleResult]

	// Routes are the route handlers, by handler name.
	Routes map[string]Route
	// Ingress serves the ingress extension types, by type.
	Ingress map[string]Ingress
	// Operations are the toolbelt operations, by operation name.
	Operations map[string]Operation
	// Recurrences compute the next occurrence of each recurrence, by name,
	// inside the timer's fire-and-rearm transaction.
	Recurrences map[string]PureFunc[protocol.RecurrenceNextParams, protocol.RecurrenceNextResult]
	// Triggers pick the starting input of each work kind declared with
	// trigger, by kind, inside the start transaction.
	Triggers map[string]PureFunc[protocol.WorkKindTriggerParams, protocol.WorkKindTriggerResult]
	// Executors are the executors, by name.
	Executors map[string]Executor
	// Tasks are the background passes, by task name.
	Tasks map[string]Func[protocol.TaskRunParams, protocol.TaskRunResult]
	// Checks are the doctor checks, by check name.
	Checks map[string]Func[protocol.CheckRunParams, protocol.CheckRunResult]
	// TelemetrySink receives every telemetry event the host records, from
	// every scope, in batches (telemetry.sink); set exactly when the
	// manifest holds the permission telemetry.sink. Host.CaptureTelemetry
	// records one (permission telemetry.capture).
	TelemetrySink Func[protocol.TelemetrySinkParams, protocol.TelemetrySinkResult]

	// Validate checks one config object before the host applies a
	// configuration (an entry, a route's config, a binding, an executor
	// config, a connection). The SDK first refuses a type the manifest
	// does not declare for the kind; nil then accepts every object of a
	// declared type. Return a *protocol.Error coded invalid to refuse,
	// with a message that names the rule and never echoes a config value.
	Validate PureFunc[protocol.ValidateParams, protocol.ValidateResult]

	// Shutdown runs when the host asks the extension to stop, once new
	// requests are refused and before the SDK waits for those in flight:
	// stop receivers and background work so nothing new starts, and flush
	// what must be kept.
	Shutdown func(ctx context.Context, host *Host) error

	// ShutdownGrace bounds how long shutdown waits for in-flight requests
	// before it cancels them; zero means DefaultShutdownGrace.
	ShutdownGrace time.Duration

	// Logf receives the extension's diagnostics, such as the detail of an
	// error that crossed as internal. nil logs to os.Stderr.
	Logf func(format string, args ...any)
}

// DefaultShutdownGrace is how long shutdown waits for in-flight requests
// before it cancels them: as long as the host waits for shutdown's answer
// (protocol.HostShutdownGrace).
const DefaultShutdownGrace = protocol.HostShutdownGrace

// Route is a route handler.
type Route struct {
	// Match decides whether an Event matches; required.
	Match PureFunc[protocol.RouteMatchParams, protocol.RouteMatchResult]
	// Samples offers sample Events for route traces; set exactly when the
	// manifest declares the handler with samples.
	Samples PureFunc[protocol.RouteSamplesParams, protocol.RouteSamplesResult]
}

// Ingress serves the sources of an ingress extension type. A type whose
// sources only deliver from the extension's own receivers
// (Host.IngressDeliver) may leave both functions nil; a call then answers
// unsupported.
type Ingress struct {
	// Push turns a delivery into Events.
	Push Func[protocol.IngressPushParams, protocol.IngressPushResult]
	// Reconcile scans one page of a source's items; required when a
	// source of the type is registered with reconcile.
	Reconcile Func[protocol.IngressReconcileParams, protocol.IngressReconcileResult]
}

// Operation is a toolbelt operation. Set the function of its kind: Handler
// or Pure for a handler operation, Wait for a wait, Emit for an emit.
type Operation struct {
	// Handler serves a handler operation. It must be idempotent on the
	// call's request id: see Once and IntentKey.
	Handler Func[protocol.OperationCallParams, protocol.OperationCallResult]
	// Pure, set instead of Handler, serves a handler operation that
	// answers from the call alone (its input, request id and authority):
	// a conversion, a check, a computation over the input. Over the wire
	// the connection's reader serves such a call itself, as it reads it,
	// with no goroutine, no timer and no context of its own
	// (jsonrpc.Options.Inline), which makes it the cheapest call an
	// extension answers. The price is what Pure may not do. While it
	// runs, the extension reads nothing, so it must not block (on a
	// channel, a lock held elsewhere, I/O, a sleep), must not call the
	// host (it gets no Host, and a Host kept from elsewhere would wait
	// for an answer nobody reads: the extension hangs), and it cannot be
	// cancelled: a $/cancel for the call is read only after it returned,
	// and it gets no context to watch. A slow one holds up every message
	// behind it, other calls, answers to other handlers' host calls and
	// cancellations included. Anything that may take longer than a few
	// microseconds of CPU belongs in Handler. Its errors cross as a
	// Handler's do, a panic as internal, and the bound of
	// protocol.MaxInflight requests in flight answers it overloaded as it
	// does any request. Answering from the call alone, it is idempotent on
	// the request id by construction: it needs no Once. In process
	// (Attach) it is called directly, as Handler would be.
	Pure func(call protocol.OperationCallParams) (protocol.OperationCallResult, error)
	// Wait plans the Wait of a wait operation.
	Wait Func[protocol.OperationWaitParams, protocol.OperationWaitResult]
	// DependencyFilter decides whether an Event wakes the wait's Wait;
	// set exactly when the manifest declares dependency_filter.
	DependencyFilter PureFunc[protocol.DependencyFilterParams, protocol.DependencyFilterResult]
	// Emit plans the Event of an emit operation.
	Emit Func[protocol.OperationEmitParams, protocol.OperationEmitResult]
	// Commit gives the records that commit with the emitted Event, inside
	// the emission's transaction; set exactly when the manifest declares
	// commit.
	Commit PureFunc[protocol.EmitCommitParams, protocol.EmitCommitResult]
}

// Executor runs Work. Run, Wait and Recover are required; each optional
// function must be set exactly when the manifest declares its label or
// control (interrupt, inject, resume; stop, forget, attach, live).
type Executor struct {
	// Run starts a run and returns once it has started. Runs should
	// survive the extension process: persist what Recover needs with
	// Host.PersistRecovery.
	Run Func[protocol.ExecutorRunParams, protocol.ExecutorRunResult]
	// Wait observes a run until it settles. Its context ending stops the
	// observation, never the run.
	Wait Func[protocol.ExecutorWaitParams, protocol.ExecutorWaitResult]
	// Recover adopts a run after a restart from its persisted metadata, or
	// answers protocol.ErrNotAdoptable.
	Recover Func[protocol.ExecutorRecoverParams, protocol.ExecutorRecoverResult]

	// Resume resumes a settled run with new input (label resume).
	Resume Func[protocol.ExecutorResumeParams, protocol.ExecutorResumeResult]
	// Inject delivers input into a running run (label inject).
	Inject Func[protocol.ExecutorInjectParams, protocol.ExecutorInjectResult]
	// Interrupt interrupts a running run (label interrupt).
	Interrupt Func[protocol.ExecutorInterruptParams, protocol.ExecutorInterruptResult]
	// Stop stops a run's processes and says how that was confirmed
	// (control stop): the host's physical-stop evidence.
	Stop Func[protocol.ExecutorStopParams, protocol.ExecutorStopResult]
	// Forget drops what the executor keeps for a settled run (control
	// forget).
	Forget Func[protocol.ExecutorForgetParams, protocol.ExecutorForgetResult]
	// Attach gives an operator's terminal the run's session, or answers
	// protocol.ErrNothingToAttach (control attach).
	Attach Func[protocol.ExecutorAttachParams, protocol.ExecutorAttachResult]
	// Live answers a running attempt's output so far, or
	// protocol.ErrNotLive (control live).
	Live Func[protocol.ExecutorLiveParams, protocol.ExecutorLiveResult]
}
