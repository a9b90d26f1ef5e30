package client

import (
	"encoding/json"
	"time"

	"github.com/open-conduit/open-conduit/protocol"
)

// This file holds every wire type of the management API: the daemon
// (host/daemon) writes them, the client reads them. JSON field names are
// the API's contract; add fields, never rename them.

// Generation is one applied configuration.
type Generation struct {
	// Number counts applied configurations from 1; 0 is the empty
	// configuration a daemon runs before any was applied.
	Number int64 `json:"number"`
	// Hash is "sha256:<hex>" of the configuration document as applied.
	Hash      string    `json:"hash,omitempty"`
	AppliedAt time.Time `json:"applied_at,omitzero"`
}

// Paths says where a running daemon keeps its parts.
type Paths struct {
	Socket  string `json:"socket"`
	Webhook string `json:"webhook,omitempty"` // the webhook listener's address, empty if none
	Logs    string `json:"logs"`
	State   string `json:"state"`
	Config  string `json:"config"`

	// Toolbelt is the runs' toolbelt endpoint (unix:<socket>), empty if
	// it is not served.
	Toolbelt string `json:"toolbelt,omitempty"`
}

// The origins of a package.
const (
	OriginBundled   = "bundled"
	OriginInstalled = "installed"
)

// Package is one discovered extension package and its process.
type Package struct {
	Name    string `json:"name"`
	Version string `json:"version"`
	// State is the process's state as the host names it (for example
	// "starting", "ready", "restarting", "stopped", "failed"), or
	// "refused" for a package discovery did not admit.
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	// PID is the running process's ID, which leads its own process group
	// (a fault drill kills the group); 0 when no process runs.
	PID int `json:"pid,omitempty"`
	// Protocol is the negotiated protocol version, 0 before the handshake.
	Protocol protocol.Version `json:"protocol"`
	// Origin is OriginBundled or OriginInstalled.
	Origin      string   `json:"origin"`
	Dir         string   `json:"dir"`
	Permissions []string `json:"permissions,omitempty"`
	LastError   string   `json:"last_error,omitempty"`
}

// Status is GET /v1/status: the daemon, its generation and its packages.
type Status struct {
	DaemonVersion    string             `json:"daemon_version"`
	ProtocolVersions []protocol.Version `json:"protocol_versions"`
	Generation       Generation         `json:"generation"`
	// Ready is true once every admitted package is configured with the
	// current generation and the API serves.
	Ready    bool      `json:"ready"`
	PID      int       `json:"pid,omitempty"`
	Started  time.Time `json:"started,omitzero"`
	Paths    Paths     `json:"paths"`
	Packages []Package `json:"packages"`
	// Passes are the background passes (tasks, reconcile scans) and how
	// their last runs went.
	Passes []PassStatus `json:"passes,omitempty"`
}

// The kinds of background pass.
const (
	PassTask      = "task"      // a package's declared task (task.run)
	PassReconcile = "reconcile" // an ingress source's reconcile scan
)

// PassStatus is one background pass in Status: its schedule on the
// daemon's clock and its last run.
type PassStatus struct {
	// Kind is PassTask or PassReconcile.
	Kind string `json:"kind"`
	// Name is the task's or the source's name.
	Name    string `json:"name"`
	Package string `json:"package"`
	// Interval is the time from one run's start to the next's.
	Interval string `json:"interval"`
	// Runs counts finished runs, failed ones included; Failures the
	// failed ones.
	Runs     int64 `json:"runs"`
	Failures int64 `json:"failures"`
	// Overruns counts runs that outlived their interval: the next run
	// waited for each.
	Overruns    int64     `json:"overruns"`
	Running     bool      `json:"running"`
	LastStarted time.Time `json:"last_started,omitzero"`
	LastEnded   time.Time `json:"last_ended,omitzero"`
	// LastDetail is what the last successful run reported; LastError the
	// last run's failure ("" when it succeeded).
	LastDetail string `json:"last_detail,omitempty"`
	LastError  string `json:"last_error,omitempty"`
	// Next is when the next run is due.
	Next time.Time `json:"next,omitzero"`
}

// ClockState is GET /v1/clock and the answer of POST /v1/clock/advance:
// the daemon's time, which its timers, waits, leases and passes run on.
type ClockState struct {
	Now time.Time `json:"now"`
	// Manual says the clock moves only when advanced (serve
	// --test-clock); otherwise it is the system clock.
	Manual bool `json:"manual"`
}

// ClockAdvance is the body of POST /v1/clock/advance: exactly one of By,
// a duration that is not negative (such as "90s" or "1h30m"), and To, a
// time not before the clock's now.
type ClockAdvance struct {
	By string    `json:"by,omitempty"`
	To time.Time `json:"to,omitzero"`
}

// FaultInjection is the body of POST /v1/faults (serve --test-faults): one
// rule of host/faultproxy's grammar, such as "crash method=route.match
// nth=1", armed on the proxy between the host and the package's process.
type FaultInjection struct {
	Package string `json:"package"`
	Rule    string `json:"rule"`
}

// FaultState is a package's armed fault rules: the answer of POST
// /v1/faults, GET /v1/faults/{package} and DELETE /v1/faults/{package}.
type FaultState struct {
	Package string      `json:"package"`
	Rules   []FaultRule `json:"rules"`
}

// FaultRule is one armed rule in its canonical text, with how many
// messages it has counted and how many times it has fired.
type FaultRule struct {
	Rule    string `json:"rule"`
	Counted int    `json:"counted"`
	Fired   int    `json:"fired"`
}

// Readiness is GET /v1/ready: 200 when ready, 503 (unavailable) with the
// same body otherwise.
type Readiness struct {
	Ready      bool       `json:"ready"`
	Generation Generation `json:"generation"`
}

// Diagnostic is one reason a configuration is refused.
type Diagnostic struct {
	// Path is the JSON path of the offending value, e.g.
	// "$.scopes[0].routes[1].handler".
	Path string `json:"path"`
	// Rule is a stable name of the rule broken, e.g. "unknown_field".
	Rule    string `json:"rule"`
	Message string `json:"message"`
}

// Scope is a configured scope.
type Scope struct {
	ID        string    `json:"id"`
	Name      string    `json:"name,omitempty"`
	UpdatedAt time.Time `json:"updated_at,omitzero"`
}

// ScopeList is GET /v1/scopes.
type ScopeList struct {
	Scopes []Scope `json:"scopes"`
}

// Event is an accepted Event.
type Event struct {
	ID         string          `json:"id"`
	Sequence   int64           `json:"sequence"`
	Source     string          `json:"source"`
	DeliveryID string          `json:"delivery_id"`
	ScopeID    string          `json:"scope_id,omitempty"`
	Family     string          `json:"family,omitempty"`
	Type       string          `json:"type,omitempty"`
	Schema     string          `json:"schema,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Parent     string          `json:"parent,omitempty"`
	Root       string          `json:"root,omitempty"`
	Depth      int             `json:"depth"`
	Works      []string        `json:"works,omitempty"`
	OccurredAt time.Time       `json:"occurred_at,omitzero"`
	AcceptedAt time.Time       `json:"accepted_at,omitzero"`
}

// EventQuery selects a page of Events: GET /v1/events?scope=&after=&limit=.
type EventQuery struct {
	// Scope limits the page to one scope's Events; empty reads the whole log.
	Scope string
	// After is the sequence cursor: the page starts after it.
	After int64
	// Limit bounds the page (0: DefaultPageLimit; at most MaxPageLimit).
	Limit int
}

// Page limits of every listing.
const (
	DefaultPageLimit = 100
	MaxPageLimit     = 1000
)

// EventPage is a page of Events in sequence order.
type EventPage struct {
	Events []Event `json:"events"`
	// Next is the cursor of the following page (the last sequence read),
	// 0 when the page was short: the end of the log for now.
	Next int64 `json:"next,omitempty"`
	// LatestChange is the change log's last Seq as of this page's read.
	// To follow the log without a gap, page until a short page, then open
	// the change stream after that page's LatestChange: every Event
	// accepted after the read has a later change.
	LatestChange int64 `json:"latest_change"`
}

// RouteRecord is what routing did with one Event.
type RouteRecord struct {
	// Disposition is "created", "attached" or "unmatched".
	Disposition string `json:"disposition"`
	// Route is the index of the matching route in its scope, -1 if none.
	Route          int      `json:"route"`
	Handler        string   `json:"handler,omitempty"`
	Reason         string   `json:"reason,omitempty"`
	WorkID         string   `json:"work_id,omitempty"`
	Woke           []string `json:"woke,omitempty"`
	DisplayRefused string   `json:"display_refused,omitempty"`
}

// EventDetail is GET /v1/events/{id}: the Event and, once routed, its
// route record.
type EventDetail struct {
	Event Event `json:"event"`
	// Route is nil while the Event waits to be routed.
	Route *RouteRecord `json:"route,omitempty"`
}

// The Work states.
const (
	WorkPending   = "pending"
	WorkRunning   = "running"
	WorkWaiting   = "waiting"
	WorkDone      = "done"
	WorkFailed    = "failed"
	WorkCancelled = "cancelled"
)

// Work is a unit of work.
type Work struct {
	ID              string   `json:"id"`
	ScopeID         string   `json:"scope_id"`
	Kind            string   `json:"kind,omitempty"`
	Binding         string   `json:"binding,omitempty"`
	State           string   `json:"state"`
	CorrelationKeys []string `json:"correlation_keys,omitempty"`
	// Display is what the Work is, in its source's words; nil if none.
	Display *protocol.Display `json:"display,omitempty"`
	// Context is the route's context for the Work (JSON); nil if none.
	Context   json.RawMessage `json:"context,omitempty"`
	Grants    []string        `json:"grants,omitempty"`
	Revision  int64           `json:"revision"`
	CreatedAt time.Time       `json:"created_at,omitzero"`
	UpdatedAt time.Time       `json:"updated_at,omitzero"`
}

// WorkQuery selects a page of Work: GET /v1/work?scope=&state=&after=&limit=.
type WorkQuery struct {
	Scope string
	State string
	// After is the ID cursor: Work comes in ID order.
	After string
	Limit int
}

// WorkPage is a page of Work in ID order.
type WorkPage struct {
	Works []Work `json:"works"`
	// Next is the cursor of the following page, empty when it was short.
	Next string `json:"next,omitempty"`
}

// WorkDetail is GET /v1/work/{id}: the Work, its active Wait and its
// Executions.
type WorkDetail struct {
	Work       Work        `json:"work"`
	Wait       *Wait       `json:"wait,omitempty"`
	Executions []Execution `json:"executions"`
}

// Wait is what a Work waits for.
type Wait struct {
	ID          string    `json:"id"`
	WorkID      string    `json:"work_id"`
	ScopeID     string    `json:"scope_id,omitempty"`
	Keys        []string  `json:"keys,omitempty"`
	Target      string    `json:"target,omitempty"`
	Description string    `json:"description,omitempty"`
	Progress    string    `json:"progress,omitempty"`
	State       string    `json:"state"`
	Due         time.Time `json:"due,omitzero"`
	CreatedAt   time.Time `json:"created_at,omitzero"`
}

// WaitQuery selects a page of active Waits.
type WaitQuery struct {
	Scope string
	// After is the Work ID cursor.
	After string
	Limit int
}

// WaitList is GET /v1/waits?scope=&after=&limit=: the active Waits, by
// the ID of their Work.
type WaitList struct {
	Waits []Wait `json:"waits"`
	// Next is the Work ID cursor of the following page, empty at the end.
	Next string `json:"next,omitempty"`
}

// Execution is one attempt at a Work.
type Execution struct {
	ID       string `json:"id"`
	WorkID   string `json:"work_id"`
	Attempt  int    `json:"attempt"`
	Executor string `json:"executor"`
	Epoch    int64  `json:"epoch"`
	State    string `json:"state"`
	Error    string `json:"error,omitempty"`
	// Recoverable says the executor persisted recovery metadata (its
	// content stays in the store).
	Recoverable bool      `json:"recoverable,omitempty"`
	StartedAt   time.Time `json:"started_at,omitzero"`
	EndedAt     time.Time `json:"ended_at,omitzero"`
}

// ExecutionList is GET /v1/work/{id}/executions.
type ExecutionList struct {
	Executions []Execution `json:"executions"`
}

// CancelRequest is the body of POST /v1/work/{id}/cancel.
type CancelRequest struct {
	Reason string `json:"reason,omitempty"`
}

// TraceEvent is a hypothetical Event for a route trace.
type TraceEvent struct {
	Source     string          `json:"source"`
	DeliveryID string          `json:"delivery_id,omitempty"`
	Family     string          `json:"family,omitempty"`
	Type       string          `json:"type,omitempty"`
	Schema     string          `json:"schema,omitempty"`
	Payload    json.RawMessage `json:"payload,omitempty"`
	Works      []string        `json:"works,omitempty"`
	OccurredAt time.Time       `json:"occurred_at,omitzero"`
}

// TraceRequest is the body of POST /v1/scopes/{id}/route/trace: exactly
// one of Event and Sample.
type TraceRequest struct {
	Event *TraceEvent `json:"event,omitempty"`
	// Sample names one of the scope's samples (GET /v1/scopes/{id}/samples).
	Sample string `json:"sample,omitempty"`
}

// TraceStep is one route's answer in a trace.
type TraceStep struct {
	Route           int               `json:"route"`
	Handler         string            `json:"handler"`
	Match           bool              `json:"match"`
	Reason          string            `json:"reason,omitempty"`
	Kind            string            `json:"kind,omitempty"`
	CorrelationKeys []string          `json:"correlation_keys,omitempty"`
	Display         *protocol.Display `json:"display,omitempty"`
	// Error is the handler's failure, if it failed.
	Error string `json:"error,omitempty"`
	// Chosen marks the route routing would take: the first match.
	Chosen         bool   `json:"chosen,omitempty"`
	DisplayRefused string `json:"display_refused,omitempty"`
}

// TraceResult is a route trace's answer. A trace writes nothing.
type TraceResult struct {
	Scope string      `json:"scope"`
	Event TraceEvent  `json:"event"`
	Steps []TraceStep `json:"steps"`
	// Chosen is the index of the chosen route, -1 if none matched.
	Chosen int `json:"chosen"`
}

// Sample is one named sample Event a scope's routes offer.
type Sample struct {
	ID    string     `json:"id"`
	Title string     `json:"title,omitempty"`
	Event TraceEvent `json:"event"`
}

// SampleList is GET /v1/scopes/{id}/samples.
type SampleList struct {
	Samples []Sample `json:"samples"`
}

// ConfigView is GET /v1/config: the running configuration, redacted (no
// secret reference text), and its generation.
type ConfigView struct {
	Generation Generation      `json:"generation"`
	Config     json.RawMessage `json:"config"`
}

// ConfigResult answers POST /v1/config/validate (200 with Valid and
// every diagnostic) and POST /v1/config/apply (200 with the new
// generation; a refusal is config_invalid with the diagnostics).
type ConfigResult struct {
	Valid       bool         `json:"valid"`
	Diagnostics []Diagnostic `json:"diagnostics,omitempty"`
	// Warnings (validate only) are what packages said about objects they
	// accepted: settings that should change, which refuse nothing.
	Warnings []Diagnostic `json:"warnings,omitempty"`
	// Generation is the applied generation (apply only).
	Generation *Generation `json:"generation,omitempty"`
}

// ReconcileResult answers POST /v1/sources/{name}/reconcile: one scan of
// an ingress source, run now.
type ReconcileResult struct {
	Source   string `json:"source"`
	Pages    int    `json:"pages"`
	Observed int    `json:"observed"`
	// Accepted are the Events the scan added.
	Accepted  []Event `json:"accepted"`
	Unchanged int     `json:"unchanged"`
	// Complete reports a complete scan: only then were absent items
	// inferred and the checkpoint advanced.
	Complete bool     `json:"complete"`
	Absent   []string `json:"absent,omitempty"`
}

// The kinds of change on the stream.
const (
	ChangeEvent = "event" // an Event was accepted
	ChangeWork  = "work"  // a Work was created or changed state or revision
	// ChangePackage: a package's process changed state (started, ready,
	// crashed and restarting, refused, stopped). A journal change.
	ChangePackage = "package"
	// ChangeExecution: an Execution was written (started, adopted at a
	// new epoch, stopped, ended). A journal change.
	ChangeExecution = "execution"
)

// The causes of a Work change (WorkChange).
const (
	WorkCreated = "created" // the Work's first revision
	WorkUpdated = "updated" // a later revision: State is the Work's state as of it
)

// ChangeQuery selects the change stream: the changes after After (0:
// from the first), of one scope if Scope is set. AfterJournal is the
// journal cursor (the last Change.Journal seen, 0 for none): with it the
// stream resumes exactly; without it a resume from After may repeat a
// journal change placed at After, or miss one placed before After that
// was recorded while the log moved past it. WaitFor passes both.
type ChangeQuery struct {
	After        int64
	AfterJournal int64
	Scope        string
}

// Change is one entry of the change stream (GET /v1/changes?after=SEQ,
// server-sent events whose id is Seq, or Seq.Journal for a journal
// change). Changes come in (Seq, Journal) order; a client that reconnects
// with the last of each it saw misses none.
//
// Event and Work changes are the store's durable change log. Package and
// Execution changes are the daemon's journal: numbered by Journal from 1
// for each daemon process, each placed after the log's Seq that was
// latest when it happened (its Seq). A client resuming from before a
// restart of a package sees it though it was not listening; the journal
// keeps the last JournalSize changes of this daemon process only, so a
// client resuming across a daemon restart sees none of the old daemon's
// (and a cursor beyond this journal's end is refused as conflict).
type Change struct {
	// Seq is the change's place in the durable change log, from 1; for a
	// journal change, the log's last Seq when it happened.
	Seq  int64  `json:"seq"`
	Kind string `json:"kind"`
	// Journal is a journal change's number, 0 for a change of the log.
	Journal int64 `json:"journal,omitempty"`
	// Event is set for ChangeEvent.
	Event *Event `json:"event,omitempty"`
	// Work is set for ChangeWork: the Work as of this change.
	Work *Work `json:"work,omitempty"`
	// WorkChange is a Work change's cause: WorkCreated or WorkUpdated.
	WorkChange string `json:"work_change,omitempty"`
	// Package is set for ChangePackage: the package as of this change.
	Package *PackageChange `json:"package,omitempty"`
	// Execution is set for ChangeExecution: the Execution as written.
	Execution *ExecutionChange `json:"execution,omitempty"`
}

// JournalSize is how many journal changes a daemon keeps for the stream.
const JournalSize = 4096

// PackageChange is a package's process as of a ChangePackage.
type PackageChange struct {
	Name string `json:"name"`
	// State is Package.State's name ("starting", "ready", "restarting",
	// "refused", "stopped").
	State    string `json:"state"`
	Restarts int    `json:"restarts"`
	// PID is the running process's ID, 0 when none runs.
	PID       int       `json:"pid,omitempty"`
	LastError string    `json:"last_error,omitempty"`
	At        time.Time `json:"at"`
}

// ExecutionChange is an Execution as of a ChangeExecution.
type ExecutionChange struct {
	ID       string `json:"id"`
	WorkID   string `json:"work_id"`
	ScopeID  string `json:"scope_id,omitempty"`
	Attempt  int    `json:"attempt"`
	Executor string `json:"executor,omitempty"`
	Epoch    int64  `json:"epoch"`
	// State is the Execution's state: "starting", "running",
	// "succeeded", "failed" or "stopped".
	State string    `json:"state"`
	Error string    `json:"error,omitempty"`
	At    time.Time `json:"at"`
}

// The statuses of a doctor check, from best to worst.
const (
	CheckOK   = "ok"
	CheckInfo = "info"
	CheckWarn = "warn"
	CheckFail = "fail"
)

// DoctorCheck is one check of GET /v1/doctor.
type DoctorCheck struct {
	// Name is the check's name: one of the daemon's own ("extensions",
	// "store", "lock", "telemetry"), or a package's check under the
	// spec's naming (the check's name when it is the package's name or
	// starts with "<package>_" or "<package>-", else "<package>_<check>").
	Name string `json:"name"`
	// Package declares the check; empty for the daemon's own.
	Package string `json:"package,omitempty"`
	// Status is CheckOK, CheckInfo, CheckWarn or CheckFail.
	Status string `json:"status"`
	// Code is a stable code for the finding, such as
	// "extension_check_failed".
	Code   string   `json:"code,omitempty"`
	Detail string   `json:"detail,omitempty"`
	Items  []string `json:"items,omitempty"`
}

// DoctorReport is GET /v1/doctor[?deep=true]: every check, the daemon's
// own first, then the packages' by name.
type DoctorReport struct {
	// OK is false when any check's status is CheckFail.
	OK     bool          `json:"ok"`
	Checks []DoctorCheck `json:"checks"`
}

// KVQuery selects a page of one package's KV: GET
// /v1/kv?package=&namespace=&prefix=&after=&limit=.
type KVQuery struct {
	// Package is the extension package whose KV is read (required).
	Package string
	// Namespace is one of the package's namespaces: its name (the
	// default when empty) or its name, a dot and a suffix.
	Namespace string
	// Prefix keeps the keys that start with it.
	Prefix string
	// After is the key cursor: keys come in byte order.
	After string
	// Limit bounds the page (0: DefaultPageLimit; at most MaxPageLimit).
	Limit int
}

// KVEntry is one KV entry: its key, its JSON value and its version (a
// digest of the value, as kv.get reports it to the package).
type KVEntry struct {
	Key     string          `json:"key"`
	Value   json.RawMessage `json:"value"`
	Version string          `json:"version"`
}

// KVPage is a page of one namespace's entries in key order.
type KVPage struct {
	Package   string    `json:"package"`
	Namespace string    `json:"namespace"`
	Entries   []KVEntry `json:"entries"`
	// Next is the key cursor of the following page, empty when the page
	// was short.
	Next string `json:"next,omitempty"`
}

// PackageReloadRequest is the body of POST /v1/packages/reload: the
// daemon discovers its packages again and restarts only what changed.
type PackageReloadRequest struct {
	// Changed names packages to restart even when their manifest reads
	// the same (their files changed); any package added, removed or whose
	// manifest changed is reloaded anyway.
	Changed []string `json:"changed,omitempty"`
}

// PackageReload is the answer of POST /v1/packages/reload: what the
// reload did, by package name, and the packages after it.
type PackageReload struct {
	// Started are packages new to the daemon; Restarted those whose old
	// process stopped before the new release started; Stopped those no
	// longer on disk; Unchanged those whose process kept running.
	Started   []string `json:"started"`
	Restarted []string `json:"restarted"`
	Stopped   []string `json:"stopped"`
	Unchanged []string `json:"unchanged"`
	// Warnings say what takes a daemon restart, or a configuration fix.
	Warnings []string  `json:"warnings,omitempty"`
	Packages []Package `json:"packages"`
}

// KVLayouts is GET /v1/packages/kv-layouts: the KV layout version the
// store records for each package that has one (the kv_version of its
// last successful configure), which no release below may run on.
type KVLayouts struct {
	Layouts map[string]int `json:"layouts"`
}

// ---- the test wire log (serve --test-wire-log) ----

// WireLogSuffix ends a package's wire log's name, STATE/logs/extensions/
// NAME.wire.jsonl: one WireLogRecord a line, which the daemon writes and a
// test harness (extensiontest) reads.
const WireLogSuffix = ".wire.jsonl"

// WireLogRecord directions.
const (
	WireToExtension   = "to_extension"
	WireFromExtension = "from_extension"
)

// WireLogRecord is one line between the daemon and a package.
type WireLogRecord struct {
	Time      time.Time `json:"time"`
	Direction string    `json:"direction,omitempty"`
	// Message is the line when it is a JSON object (with a secret.resolve
	// answer's result redacted), else Text is the line.
	Message json.RawMessage `json:"message,omitempty"`
	Text    string          `json:"text,omitempty"`
	// Truncated is the line's full length when only its prefix is kept.
	Truncated int `json:"truncated,omitempty"`
	// Full marks a file's last record: the file reached its bound.
	Full bool `json:"full,omitempty"`
}
