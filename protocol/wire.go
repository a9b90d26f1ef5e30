package protocol

import (
	"encoding/json"
	"fmt"
	"maps"
	"time"
	"unicode/utf8"
)

// This file holds the Go forms of the wire messages: the params and result
// of each method, snake_case JSON. They are wire types, apart from the
// host's and the runtime's own records, so either side can change its
// internals without changing the protocol.
//
// Conventions:
//   - A field tagged omitempty or omitzero may be left out; every other
//     field is always sent.
//   - Config objects, payloads and KV values are raw JSON: one valid JSON
//     value, passed through without being re-encoded.
//   - Times are RFC 3339 strings in UTC.
//   - A page is asked for with after (a cursor, exclusive) and limit (≤ 0
//     means the host's default, above MaxPageLimit reads MaxPageLimit).

// Empty is the params or result of a method that carries nothing. It
// encodes as {}; a receiver should accept null or absent params too.
type Empty struct{}

// ---- Lifecycle ----

// HostInfo names the host in initialize.
type HostInfo struct {
	// Name is the host program, "open-conduit".
	Name string `json:"name"`
	// Version is the host's release.
	Version string `json:"version"`
}

// InitializeParams is the first message the host sends. No other method is
// valid before initialize succeeds.
type InitializeParams struct {
	// ProtocolVersions lists every protocol version the host speaks.
	ProtocolVersions []Version `json:"protocol_versions"`
	// Host names the host.
	Host HostInfo `json:"host"`
	// StateDir is the extension's private state directory, which survives
	// restarts and upgrades.
	StateDir string `json:"state_dir"`
	// ExecutorDirs maps each executor the manifest declares to the
	// directory it keeps its runs in.
	ExecutorDirs map[string]string `json:"executor_dirs,omitempty"`
	// ResourceDirs maps each declared resource provider type to its state
	// directory.
	ResourceDirs map[string]string `json:"resource_dirs,omitempty"`
	// ContainerDirs maps each declared container provider type to its
	// state directory.
	ContainerDirs map[string]string `json:"container_dirs,omitempty"`
	// ContainerHost is the label value that marks this host's containers.
	ContainerHost string `json:"container_host,omitempty"`
	// ConfigDir is the configuration file's directory, against which a
	// relative path in a config object resolves.
	ConfigDir string `json:"config_dir,omitempty"`
}

// InitializeResult is the extension's answer to initialize.
type InitializeResult struct {
	// ProtocolVersion is the version the extension chose: the highest
	// version both sides list.
	ProtocolVersion Version `json:"protocol_version"`
	// Manifest is the extension's manifest, which must mean the same as
	// its open-conduit-extension.json (compared as parsed, not as bytes).
	Manifest json.RawMessage `json:"manifest"`
}

// ConfigEntry is one config entry of one of the extension's types.
type ConfigEntry struct {
	// ScopeID is the scope the entry is in.
	ScopeID string `json:"scope_id"`
	// ID names the entry within its scope.
	ID string `json:"id"`
	// Type is the extension type the entry is of.
	Type string `json:"type"`
	// Config is the entry's config object.
	Config json.RawMessage `json:"config,omitempty"`
	// Connection is the name of the connection the entry names, one of
	// the connections sent with it; empty when it names none.
	Connection string `json:"connection,omitempty"`
	// BindingConnections names the connections the bindings of the
	// entry's scope name, each of one of the extension's connection types
	// and granted by the scope.
	BindingConnections []string `json:"binding_connections,omitempty"`
}

// Connection is a connection of one of the extension's connection types.
// It never carries a secret value or a secret reference: the extension
// asks for the values with secret.resolve.
type Connection struct {
	// Name names the connection in the configuration.
	Name string `json:"name"`
	// Type is the connection type.
	Type string `json:"type"`
	// Config is the connection's config object.
	Config json.RawMessage `json:"config,omitempty"`
	// SecretNames lists the secret keys the connection has values for.
	SecretNames []string `json:"secret_names,omitempty"`
}

// KVLayout reports the extension's KV layout versions in configure.
type KVLayout struct {
	// Stored is the layout version the extension last reported from a
	// successful configure (0 at first).
	Stored int `json:"stored"`
	// Declared is the manifest's kv_version. When stored < declared the
	// extension migrates its KV before it answers configure, with
	// idempotent, precondition-guarded kv.commit batches.
	Declared int `json:"declared"`
}

// ConfigureParams is the current configuration generation. The host sends
// it after initialize and again on every config apply or public URL
// change, without a restart.
type ConfigureParams struct {
	// Entries are the extension's entries in enabled scopes.
	Entries []ConfigEntry `json:"entries"`
	// Connections are the connections the entries and bindings name.
	Connections []Connection `json:"connections"`
	// PublicURL is where the host's webhook listener is reachable, empty
	// when it is not exposed.
	PublicURL string `json:"public_url,omitempty"`
	// DryRun asks the extension to start nothing: no timers, no receivers.
	DryRun bool `json:"dry_run,omitempty"`
	// Disabled are the extension's entries in scopes configured but
	// disabled: it starts nothing for them but keeps what it holds.
	Disabled []ConfigEntry `json:"disabled,omitempty"`
	// KV is the extension's KV layout.
	KV KVLayout `json:"kv"`
	// Generation is the number of the operator's configuration generation
	// these params come from, 0 for the empty configuration a daemon runs
	// before one is applied. A package may log or report it; it never
	// needs to compare it.
	Generation int64 `json:"generation,omitempty"`
	// GenerationHash is the hash ("sha256:<hex>") of that generation's
	// document.
	GenerationHash string `json:"generation_hash,omitempty"`
}

// SourceDecl is an ingress source the extension registers in configure.
type SourceDecl struct {
	// Name is the source, in the extension's source namespace (its name,
	// or name/…).
	Name string `json:"name"`
	// ScopeID is the scope the source delivers into.
	ScopeID string `json:"scope_id,omitempty"`
	// Families are the Event families the source produces, each declared
	// by the manifest.
	Families []string `json:"families"`
	// Reconcile marks a source the host also pages with ingress.reconcile.
	Reconcile bool `json:"reconcile,omitempty"`
	// ReconcileInterval, for a Reconcile source, is how often the host
	// scans it: a duration of at least one second, such as "90s" or "5m"
	// (units ns, us, ms, s, m, h); empty takes the host's default.
	ReconcileInterval string `json:"reconcile_interval,omitempty"`
}

// ConfigureResult is what the extension registers for the generation.
type ConfigureResult struct {
	// Sources are the ingress sources it registers.
	Sources []SourceDecl `json:"sources,omitempty"`
	// WebhookPaths are the webhook paths it serves, each under its own
	// namespace; a path covers the paths beneath it.
	WebhookPaths []string `json:"webhook_paths,omitempty"`
}

// The kinds of object validate checks.
const (
	// ValidateExtension is a config entry of one of the extension's
	// extension types (Type is the type).
	ValidateExtension = "extension"
	// ValidateRoute is a route's handler config (Type is the handler).
	ValidateRoute = "route"
	// ValidateBinding is the binding a route binds, checked by a handler
	// declared with binding (Type is the handler, Binding the binding).
	ValidateBinding = "binding"
	// ValidateExecutor is a binding's executor config (Type is the
	// executor).
	ValidateExecutor = "executor"
	// ValidateConnection is a connection of one of the extension's
	// connection types (Type is the type; SecretNames its secret keys).
	ValidateConnection = "connection"
)

// ValidateParams asks the extension to check one config object of one of
// its types, before the host applies a configuration. It is a pure
// question: the extension answers from the params alone.
type ValidateParams struct {
	// Kind is what the object is: "extension" (an entry of an extension
	// type), "route" (a route's handler config), "binding" (the binding a
	// route binds), "executor" (a binding's executor config) or
	// "connection".
	Kind string `json:"kind"`
	// Type names the type, handler or executor the object is of.
	Type string `json:"type"`
	// ScopeID is the scope the object is in; empty for a connection.
	ScopeID string `json:"scope_id,omitempty"`
	// ID names the object: the entry, route or binding, or the connection.
	ID string `json:"id,omitempty"`
	// Config is the object's config, as the operator wrote it.
	Config json.RawMessage `json:"config,omitempty"`
	// Binding is the binding a route binds (kind binding only).
	Binding *BindingView `json:"binding,omitempty"`
	// SecretNames are the secret keys a connection has references for
	// (kind connection only); never their references or values.
	SecretNames []string `json:"secret_names,omitempty"`
}

// BindingView is a binding as validate shows it to a route handler.
type BindingView struct {
	// Name names the binding in its scope.
	Name string `json:"name"`
	// Executor is the executor that runs the route's Work.
	Executor string `json:"executor"`
	// ExecutorConfig is the binding's executor config.
	ExecutorConfig json.RawMessage `json:"executor_config,omitempty"`
	// Operations are the toolbelt operations the binding grants.
	Operations []string `json:"operations,omitempty"`
	// Toolsets are the toolsets the binding grants.
	Toolsets []string `json:"toolsets,omitempty"`
	// Connection is the connection the executions act as.
	Connection string `json:"connection,omitempty"`
}

// ValidateResult is a valid object's description. A refusal is an error
// answer coded invalid whose message says what is wrong (one line, naming
// the rule, never echoing a config value).
type ValidateResult struct {
	// Describe says, a line each, what the object sets up, for the
	// config view.
	Describe []string `json:"describe,omitempty"`
	// Warnings are fixed sentences about a valid config that should
	// change (a deprecated or ignored setting).
	Warnings []string `json:"warnings,omitempty"`
}

// ---- KV ----
//
// A KV value is raw JSON: any one JSON value (an object, a string, a
// number …), stored and returned exactly as sent. Bytes go in a base64
// string. A version is an opaque digest of the value: compare it, never
// parse it.

// KVKey names one entry.
type KVKey struct {
	// Namespace is one of the extension's namespaces.
	Namespace string `json:"namespace"`
	// Key is the entry's key within the namespace.
	Key string `json:"key"`
}

// KVGetParams reads one entry.
type KVGetParams struct {
	// Namespace is one of the extension's namespaces.
	Namespace string `json:"namespace"`
	// Key is the entry's key.
	Key string `json:"key"`
}

// KVGetResult is one entry, or found false when it is absent.
type KVGetResult struct {
	// Found is false when no value is stored; value and version are then
	// left out.
	Found bool `json:"found"`
	// Value is the stored value.
	Value json.RawMessage `json:"value,omitempty"`
	// Version is the value's digest, for a precondition.
	Version string `json:"version,omitempty"`
}

// KVListParams pages a namespace's entries whose key starts with a
// prefix, in byte order of the key.
type KVListParams struct {
	// Namespace is one of the extension's namespaces.
	Namespace string `json:"namespace"`
	// Prefix keeps the keys that start with it; empty keeps all.
	Prefix string `json:"prefix,omitempty"`
	// After is the last key of the previous page; empty starts at the first.
	After string `json:"after,omitempty"`
	// Limit is the page size.
	Limit int `json:"limit,omitempty"`
}

// KVItem is one listed entry.
type KVItem struct {
	// Key is the entry's key.
	Key string `json:"key"`
	// Value is the stored value.
	Value json.RawMessage `json:"value"`
	// Version is the value's digest, for a precondition.
	Version string `json:"version"`
}

// KVListResult is one page of entries.
type KVListResult struct {
	// Items are the page's entries in key order.
	Items []KVItem `json:"items"`
	// Next is the cursor for the following page, empty after the last.
	Next string `json:"next,omitempty"`
}

// KVPrecondition must hold for a commit to apply: the entry is at a
// version, or has no value. Exactly one of version and absent is set.
type KVPrecondition struct {
	// Namespace is one of the extension's namespaces.
	Namespace string `json:"namespace"`
	// Key is the entry's key.
	Key string `json:"key"`
	// Version is the version the entry must be at, as kv.get returned it.
	Version string `json:"version,omitempty"`
	// Absent requires that the entry has no value.
	Absent bool `json:"absent,omitempty"`
}

// KVPut writes one value.
type KVPut struct {
	// Namespace is one of the extension's namespaces.
	Namespace string `json:"namespace"`
	// Key is the entry's key.
	Key string `json:"key"`
	// Value is the value to store: one JSON value.
	Value json.RawMessage `json:"value"`
}

// Emission is an Event a kv.commit batch returns for the host to accept in
// the same transaction as the batch's writes: a root Event of a scope (no
// parent) or one derived from a parent. The host gives it the id
// EmittedEventID(source, delivery_id) computes, so the batch's own records
// can name it before it exists.
type Emission struct {
	// Source is in the extension's source namespace.
	Source string `json:"source"`
	// DeliveryID with the source is the Event's identity: emitting the
	// same identity and content again is the same Event.
	DeliveryID string `json:"delivery_id"`
	// ScopeID is the scope the Event is accepted into; required for a
	// root, and for a derived Event the parent's scope.
	ScopeID string `json:"scope_id,omitempty"`
	// Family is one of the extension's declared families.
	Family string `json:"family"`
	// Type is the Event's type within its family.
	Type string `json:"type,omitempty"`
	// Schema is absent or the current version of one of the extension's
	// schemas.
	Schema string `json:"schema,omitempty"`
	// Payload is the Event's data.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Parent is the Event this one derives from, in the same scope; empty
	// for a root.
	Parent string `json:"parent,omitempty"`
	// Works are the ids of the Work the Event names.
	Works []string `json:"works,omitempty"`
	// OccurredAt is when it happened, as the producer saw it.
	OccurredAt time.Time `json:"occurred_at,omitzero"`
}

// KVCommitParams is one atomic batch: every precondition holds, then every
// emission is accepted and every put and delete applies; or nothing does.
// A key appears in at most one put or delete. A batch that names any
// namespace not the extension's applies nothing.
type KVCommitParams struct {
	// Preconditions are checked before anything applies; one that fails
	// is conflict.
	Preconditions []KVPrecondition `json:"preconditions,omitempty"`
	// Puts are the values to write.
	Puts []KVPut `json:"puts,omitempty"`
	// Deletes are the entries to remove.
	Deletes []KVKey `json:"deletes,omitempty"`
	// Emissions are the Events to accept with the writes.
	Emissions []Emission `json:"emissions,omitempty"`
}

// EmissionOutcome is the answer for one Emission, in the batch's order.
type EmissionOutcome struct {
	// Event is the accepted Event; left out when the emission was refused.
	Event *Event `json:"event,omitempty"`
	// Added is false when the identity was already accepted with the same
	// content (the stored Event is returned).
	Added bool `json:"added"`
	// Refused is the code of an emission refused alone, such as
	// causal_limit; the rest of the batch committed.
	Refused Code `json:"refused,omitempty"`
}

// KVCommitResult answers a committed batch.
type KVCommitResult struct {
	// Accepted has one outcome per emission, in order.
	Accepted []EmissionOutcome `json:"accepted,omitempty"`
}

// ---- Records, as state reads return them ----

// Event is an accepted Event. Events are immutable: the host never
// rewrites one.
type Event struct {
	// ID names the Event.
	ID string `json:"id"`
	// Sequence is the Event's place in the host's log, from 1.
	Sequence int64 `json:"sequence"`
	// ScopeID is the scope the Event was accepted into; empty when none is
	// recorded yet.
	ScopeID string `json:"scope_id,omitempty"`
	// Source is the producer's source.
	Source string `json:"source"`
	// DeliveryID with the source is the Event's identity.
	DeliveryID string `json:"delivery_id"`
	// Family is the declared family the Event belongs to.
	Family string `json:"family"`
	// Type is the Event's type within its family.
	Type string `json:"type,omitempty"`
	// Schema is the payload's schema id <base>.v<N>, empty for none.
	Schema string `json:"schema,omitempty"`
	// Payload is the Event's data.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Parent is the Event this one derives from; empty for a root.
	Parent string `json:"parent,omitempty"`
	// Root is the first Event of the causal chain; a root is its own.
	Root string `json:"root"`
	// Depth is the distance from the root, 0 for a root.
	Depth int `json:"depth"`
	// Works are the ids of the Work the Event names.
	Works []string `json:"works,omitempty"`
	// OccurredAt is when it happened, as the producer saw it.
	OccurredAt time.Time `json:"occurred_at,omitzero"`
	// AcceptedAt is when the host accepted it.
	AcceptedAt time.Time `json:"accepted_at"`
}

// Work is a unit of work that routing created.
type Work struct {
	// ID names the Work.
	ID string `json:"id"`
	// ScopeID is the Work's scope.
	ScopeID string `json:"scope_id"`
	// Kind is the Work's kind.
	Kind string `json:"kind"`
	// Binding is the binding whose executor runs it.
	Binding string `json:"binding,omitempty"`
	// State is pending, running, waiting, done, failed or cancelled.
	State string `json:"state"`
	// CorrelationKeys attach later Events to the Work.
	CorrelationKeys []string `json:"correlation_keys,omitempty"`
	// Display is what the operator sees of the Work.
	Display json.RawMessage `json:"display,omitempty"`
	// Context is the route's context for the Work.
	Context json.RawMessage `json:"context,omitempty"`
	// Grants are the operations the Work's runs may call.
	Grants []string `json:"grants,omitempty"`
	// Revision counts the Work's updates, from 1.
	Revision int64 `json:"revision"`
	// CreatedAt is when the Work was created.
	CreatedAt time.Time `json:"created_at"`
	// UpdatedAt is when it last changed.
	UpdatedAt time.Time `json:"updated_at"`
}

// Execution is one attempt at a Work by an executor.
type Execution struct {
	// ID names the Execution.
	ID string `json:"id"`
	// WorkID is the Work it attempts.
	WorkID string `json:"work_id"`
	// Attempt counts the Work's attempts, from 1.
	Attempt int `json:"attempt"`
	// Executor is the executor that runs it.
	Executor string `json:"executor"`
	// State is starting, running, succeeded, failed or stopped.
	State string `json:"state"`
	// Error says why a failed attempt failed.
	Error string `json:"error,omitempty"`
	// StartedAt is when the attempt started.
	StartedAt time.Time `json:"started_at,omitzero"`
	// EndedAt is when it ended.
	EndedAt time.Time `json:"ended_at,omitzero"`
}

// Wait is what a Work waits for. A Work has at most one active Wait.
type Wait struct {
	// ID names the Wait.
	ID string `json:"id"`
	// WorkID is the waiting Work.
	WorkID string `json:"work_id"`
	// Keys are the input keys that wake it.
	Keys []string `json:"keys,omitempty"`
	// Target is a <kind>:<name> wait target.
	Target string `json:"target,omitempty"`
	// Description says what the Work waits for.
	Description string `json:"description,omitempty"`
	// Progress is the waiting side's latest report.
	Progress string `json:"progress,omitempty"`
	// State is active, satisfied, cancelled or expired.
	State string `json:"state"`
	// Deadline is when the Wait times out; absent for none.
	Deadline time.Time `json:"deadline,omitzero"`
	// CreatedAt is when the Wait began.
	CreatedAt time.Time `json:"created_at"`
	// ResolvedAt is when it stopped being active.
	ResolvedAt time.Time `json:"resolved_at,omitzero"`
}

// Scope is a configured scope.
type Scope struct {
	// ID names the scope.
	ID string `json:"id"`
	// Name is the scope's display name.
	Name string `json:"name,omitempty"`
	// Config is the scope's configuration, without secret references.
	Config json.RawMessage `json:"config,omitempty"`
}

// Timer is an armed timer.
type Timer struct {
	// Key names the timer; arming the same key replaces it.
	Key string `json:"key"`
	// ScopeID is the timer's scope.
	ScopeID string `json:"scope_id,omitempty"`
	// WorkID is the Work the timer belongs to, if any.
	WorkID string `json:"work_id,omitempty"`
	// Kind is the recurrence that computes its next occurrence.
	Kind string `json:"kind,omitempty"`
	// Due is when it fires.
	Due time.Time `json:"due"`
	// Recurrence is the recurrence's own spec.
	Recurrence string `json:"recurrence,omitempty"`
	// Payload is the timer's data.
	Payload json.RawMessage `json:"payload,omitempty"`
}

// ---- State reads ----
//
// Reads see only the scopes whose configuration uses the extension and the
// Work of its own kinds anywhere. A record outside them reads as
// not_found, and a page outside them as empty, so a read reveals nothing
// of what the extension may not see.

// IDParams names one record: state.work, state.event, state.scope.
type IDParams struct {
	// ID is the record's id.
	ID string `json:"id"`
}

// WorkIDParams names a Work whose records are listed: state.executions,
// state.waits.
type WorkIDParams struct {
	// WorkID is the Work's id.
	WorkID string `json:"work_id"`
}

// WorkResult is one Work.
type WorkResult struct {
	// Work is the Work read.
	Work Work `json:"work"`
}

// WorksParams filters state.works; a field left out does not filter.
// Works come in id order.
type WorksParams struct {
	// ScopeID keeps one scope's Work.
	ScopeID string `json:"scope_id,omitempty"`
	// Kind keeps one kind.
	Kind string `json:"kind,omitempty"`
	// State keeps one state.
	State string `json:"state,omitempty"`
	// CorrelationKey keeps the Work with this key.
	CorrelationKey string `json:"correlation_key,omitempty"`
	// After is the last id of the previous page.
	After string `json:"after,omitempty"`
	// Limit is the page size.
	Limit int `json:"limit,omitempty"`
}

// WorksResult is one page of Work.
type WorksResult struct {
	// Works are the page's Work in id order.
	Works []Work `json:"works"`
	// Next is the cursor for the following page, empty after the last.
	Next string `json:"next,omitempty"`
}

// ExecutionsResult is a Work's Executions.
type ExecutionsResult struct {
	// Executions are in attempt order.
	Executions []Execution `json:"executions"`
}

// WaitsResult is a Work's Waits.
type WaitsResult struct {
	// Waits are oldest first.
	Waits []Wait `json:"waits"`
}

// EventResult is one Event.
type EventResult struct {
	// Event is the Event read.
	Event Event `json:"event"`
}

// EventsParams pages state.events by sequence. The scope filter applies
// before the limit, so a page comes back short only at the end of the log.
type EventsParams struct {
	// ScopeID keeps one of the extension's scopes; empty reads all of them.
	ScopeID string `json:"scope_id,omitempty"`
	// After is a sequence: the page starts after it.
	After int64 `json:"after,omitempty"`
	// Limit is the page size.
	Limit int `json:"limit,omitempty"`
}

// WorkEventsParams pages one Work's Events (those naming it and those
// routed to it) by sequence. A Work the extension may not see reads as an
// empty page.
type WorkEventsParams struct {
	// ID is the Work's id.
	ID string `json:"id"`
	// After is a sequence: the page starts after it.
	After int64 `json:"after,omitempty"`
	// Limit is the page size.
	Limit int `json:"limit,omitempty"`
}

// EventsResult is one page of Events.
type EventsResult struct {
	// Events are in sequence order. The next page starts after the last
	// one's sequence; a page shorter than its limit is the end.
	Events []Event `json:"events"`
}

// ScopeResult is one scope.
type ScopeResult struct {
	// Scope is the scope read.
	Scope Scope `json:"scope"`
}

// ScopesResult is the scopes whose configuration uses the extension.
type ScopesResult struct {
	// Scopes are in id order.
	Scopes []Scope `json:"scopes"`
}

// SequenceResult answers state.sequence.
type SequenceResult struct {
	// Sequence is the latest accepted Event's sequence in the whole log,
	// 0 when it is empty: a cursor for state.events.
	Sequence int64 `json:"sequence"`
}

// TimersParams filters state.timers; a field left out does not filter.
type TimersParams struct {
	// ScopeID keeps one scope's timers.
	ScopeID string `json:"scope_id,omitempty"`
	// Kind keeps one recurrence's timers.
	Kind string `json:"kind,omitempty"`
}

// TimersResult is the extension's armed timers.
type TimersResult struct {
	// Timers are earliest due first.
	Timers []Timer `json:"timers"`
}

// ---- Events ----

// EventAcceptParams derives one Event from a parent, with KV writes that
// commit atomically with it. event.accept only derives: a root Event comes
// from ingress or a kv.commit emission. The Event's scope is its parent's.
// The KV records apply only when the Event is new: accepting the same Event
// again writes nothing.
type EventAcceptParams struct {
	// Source is in the extension's source namespace.
	Source string `json:"source"`
	// DeliveryID with the source is the Event's identity.
	DeliveryID string `json:"delivery_id"`
	// Family is one of the extension's declared families.
	Family string `json:"family"`
	// Type is the Event's type within its family.
	Type string `json:"type,omitempty"`
	// Schema is absent or the current version of one of the extension's
	// schemas.
	Schema string `json:"schema,omitempty"`
	// Payload is the Event's data.
	Payload json.RawMessage `json:"payload,omitempty"`
	// Parent is required: an accepted Event in one of the extension's
	// scopes.
	Parent string `json:"parent"`
	// Works are the ids of the Work the Event names.
	Works []string `json:"works,omitempty"`
	// OccurredAt is when it happened, as the producer saw it.
	OccurredAt time.Time `json:"occurred_at,omitzero"`
	// Preconditions are KV preconditions checked with the Event.
	Preconditions []KVPrecondition `json:"preconditions,omitempty"`
	// Puts are KV writes that commit with the Event.
	Puts []KVPut `json:"puts,omitempty"`
	// Deletes are KV deletes that commit with the Event.
	Deletes []KVKey `json:"deletes,omitempty"`
}

// EventAcceptResult answers event.accept.
type EventAcceptResult struct {
	// Event is the accepted Event.
	Event Event `json:"event"`
	// Added is false when the same identity and content was accepted
	// before; the stored Event is returned.
	Added bool `json:"added"`
}

// methodShape is the params and result of one method, as zero values, for
// the generated reference. A nil result marks a notification.
type methodShape struct {
	params, result any
}

// allShapes is every method with wire types: methodShapes (this file's)
// and messageShapes (messages.go's).
func allShapes() map[string]methodShape {
	out := make(map[string]methodShape, len(methodShapes)+len(messageShapes))
	maps.Copy(out, messageShapes)
	maps.Copy(out, methodShapes)
	return out
}

// methodShapes lists the methods whose wire types this file defines.
var methodShapes = map[string]methodShape{
	"initialize": {InitializeParams{}, InitializeResult{}},
	"configure":  {ConfigureParams{}, ConfigureResult{}},
	"shutdown":   {Empty{}, Empty{}},

	"kv.get":    {KVGetParams{}, KVGetResult{}},
	"kv.list":   {KVListParams{}, KVListResult{}},
	"kv.commit": {KVCommitParams{}, KVCommitResult{}},

	"state.work":        {IDParams{}, WorkResult{}},
	"state.works":       {WorksParams{}, WorksResult{}},
	"state.executions":  {WorkIDParams{}, ExecutionsResult{}},
	"state.waits":       {WorkIDParams{}, WaitsResult{}},
	"state.event":       {IDParams{}, EventResult{}},
	"state.events":      {EventsParams{}, EventsResult{}},
	"state.work_events": {WorkEventsParams{}, EventsResult{}},
	"state.scope":       {IDParams{}, ScopeResult{}},
	"state.scopes":      {Empty{}, ScopesResult{}},
	"state.sequence":    {Empty{}, SequenceResult{}},
	"state.timers":      {TimersParams{}, TimersResult{}},

	"event.accept": {EventAcceptParams{}, EventAcceptResult{}},
}

// ---- Checks of form ----
//
// Validate checks what a message says on its own: required fields, the
// form of namespaces and JSON values, one write per key. Whose namespaces,
// sources and families they are is the host's check, made against the
// identity it started the extension with (see Namespace and
// SourceNamespace). A refusal is an *Error coded invalid naming the field.

// Validate checks a kv.commit batch's form.
func (p *KVCommitParams) Validate() error {
	if err := validateKV(p.Preconditions, p.Puts, p.Deletes); err != nil {
		return err
	}
	for i, e := range p.Emissions {
		if err := validateEmitted(fmt.Sprintf("emissions[%d]", i), e.Source, e.DeliveryID, e.Family, e.Payload); err != nil {
			return err
		}
	}
	return nil
}

// Validate checks an event.accept request's form; parent is required.
func (p *EventAcceptParams) Validate() error {
	if p.Parent == "" {
		return Errorf(CodeInvalid, "parent is required: event.accept only derives; a root Event comes from ingress or a kv.commit emission")
	}
	if err := validateEmitted("event", p.Source, p.DeliveryID, p.Family, p.Payload); err != nil {
		return err
	}
	return validateKV(p.Preconditions, p.Puts, p.Deletes)
}

func validateEmitted(at, source, deliveryID, family string, payload json.RawMessage) error {
	switch {
	case source == "":
		return Errorf(CodeInvalid, "%s.source is required", at)
	case deliveryID == "":
		return Errorf(CodeInvalid, "%s.delivery_id is required", at)
	case family == "":
		return Errorf(CodeInvalid, "%s.family is required", at)
	case len(payload) > 0 && !json.Valid(payload):
		return Errorf(CodeInvalid, "%s.payload is not one valid JSON value", at)
	}
	return nil
}

func validateKV(pre []KVPrecondition, puts []KVPut, deletes []KVKey) error {
	for i, c := range pre {
		at := fmt.Sprintf("preconditions[%d]", i)
		if err := validateKVKey(at, c.Namespace, c.Key); err != nil {
			return err
		}
		if (c.Version == "") == !c.Absent {
			return Errorf(CodeInvalid, "%s: exactly one of version and absent must be set", at)
		}
	}
	written := map[KVKey]string{}
	write := func(at string, k KVKey) error {
		if err := validateKVKey(at, k.Namespace, k.Key); err != nil {
			return err
		}
		if prev, dup := written[k]; dup {
			return Errorf(CodeInvalid, "%s: key %q in namespace %q is already written by %s", at, k.Key, k.Namespace, prev)
		}
		written[k] = at
		return nil
	}
	for i, put := range puts {
		at := fmt.Sprintf("puts[%d]", i)
		if err := write(at, KVKey{put.Namespace, put.Key}); err != nil {
			return err
		}
		if len(put.Value) == 0 || !json.Valid(put.Value) {
			return Errorf(CodeInvalid, "%s.value is not one valid JSON value", at)
		}
	}
	for i, del := range deletes {
		if err := write(fmt.Sprintf("deletes[%d]", i), del); err != nil {
			return err
		}
	}
	return nil
}

func validateKVKey(at, namespace, key string) error {
	if err := ValidNamespace(namespace); err != nil {
		return Errorf(CodeInvalid, "%s.namespace: %v", at, err)
	}
	if key == "" || !utf8.ValidString(key) {
		return Errorf(CodeInvalid, "%s.key must be non-empty valid UTF-8", at)
	}
	return nil
}
