package protocol

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"slices"
)

// ManifestFile is the name of the manifest file in an extension's directory.
const ManifestFile = "open-conduit-extension.json"

// MaxManifestBytes caps the size of a manifest file. A manifest declares
// names and short texts; anything near this size is a mistake.
const MaxManifestBytes = 1 << 20

// Manifest is open-conduit-extension.json: what an extension is and which
// surfaces it provides. It holds mechanical declarations only, and it is
// read strictly (ParseManifest) and validated offline (Validate). Every
// surface the manifest declares enables the wire methods of that surface
// (Enabled); nothing else is enabled.
//
// Naming: identifier-shaped names (types, handlers, executors, providers,
// tasks, work kinds, recurrences, page IDs) are the extension's name or
// begin with name + "-"; dotted names (families, operations, toolsets,
// payload schema bases) begin with name + ".". See OwnsName and OwnsDotted.
type Manifest struct {
	// Name identifies the extension: an identifier (IsIdentifier) that is
	// not reserved (ReservedNames). It names the install directory, the KV
	// namespace and every name the extension owns.
	Name string `json:"name"`
	// Title is the display name operators read where the extension's Work
	// and sources are listed: one line of at most MaxTitleRunes characters.
	// Without one the extension shows as its name.
	Title string `json:"title,omitempty"`
	// Version is the release's own version, free text of one line (such as
	// "1.4.0"). The host shows it and compares nothing with it.
	Version string `json:"version"`
	// Command is the argv the host starts the extension with, in the
	// extension directory and its own process group. Command[0] is a
	// relative path resolved against the extension directory (never
	// against PATH) and must stay inside it; a script names its
	// interpreter with a "#!" line. The one exception is exactly
	// HostRunCommand(Name), which the host runs on its own executable.
	Command []string `json:"command"`
	// Protocol lists the protocol versions the extension speaks; at least
	// one must be one this build supports (SupportedVersions).
	Protocol []Version `json:"protocol"`
	// Provides declares the extension's surfaces.
	Provides Provides `json:"provides"`
	// Permissions lists the host services beyond the extension's own
	// surfaces that it asks for (KnownPermissions), each once. An unknown
	// one needs a newer Open Conduit (ErrNewerManifest).
	Permissions []string `json:"permissions,omitempty"`
	// KVVersion versions the layout of the extension's own KV (default 0,
	// never negative). The host refuses to start a release with an older
	// kv_version than the stored layout (kv_downgrade).
	KVVersion int `json:"kv_version,omitempty"`
}

// Provides lists the surfaces an extension declares. A surface left out is
// not provided, and its methods are not enabled.
type Provides struct {
	// Extensions are the extension's config types: the entries operators
	// write in a scope's configuration.
	Extensions []ExtensionDecl `json:"extensions,omitempty"`
	// Connections are the connection types the extension acts as. Their
	// secrets reach it only through secret.resolve.
	Connections []ConnectionDecl `json:"connections,omitempty"`
	// Routes are the route handlers the extension serves (route.match).
	Routes []RouteDecl `json:"routes,omitempty"`
	// WorkKinds are the kinds of Work the extension's routes create, with
	// their policy. Declaring any needs a route handler.
	WorkKinds []WorkKindDecl `json:"work_kinds,omitempty"`
	// Recurrences are the calendar recurrences whose next occurrence the
	// extension computes inside the timer's fire-and-rearm transaction
	// (recurrence.next); it arms and cancels their timers with timer.arm
	// and timer.cancel.
	Recurrences []RecurrenceDecl `json:"recurrences,omitempty"`
	// Operations are the toolbelt operations the extension serves.
	Operations []OperationDecl `json:"operations,omitempty"`
	// Targets are the wait target kinds the extension resolves
	// (target.resolve): a wait on "<kind>:<name>" goes to the extension
	// that declares kind. Each is lower-case letters, digits, '-' or '_'.
	Targets []string `json:"targets,omitempty"`
	// Toolsets are named sets of the extension's operations that config
	// grants to an agent's role as "@<toolset>".
	Toolsets []ToolsetDecl `json:"toolsets,omitempty"`
	// Executors are the executors the extension runs Work with.
	Executors []ExecutorDecl `json:"executors,omitempty"`
	// Resources are the resource (workspace) provider types it serves.
	Resources []ResourceDecl `json:"resources,omitempty"`
	// Sandboxes are the process sandbox provider types it serves.
	Sandboxes []SandboxDecl `json:"sandboxes,omitempty"`
	// Containers are the container provider types it serves.
	Containers []ContainerDecl `json:"containers,omitempty"`
	// Tunnels are the webhook tunnel provider types it serves.
	Tunnels []TunnelDecl `json:"tunnels,omitempty"`
	// Tasks are background passes the host runs at an interval (task.run).
	Tasks []TaskDecl `json:"tasks,omitempty"`
	// Checks are the doctor checks the extension answers (check.run).
	Checks []CheckDecl `json:"checks,omitempty"`
	// Probes are the read-only setup probes the extension offers
	// (probe.serve); the host lists each as "<name>.<probe>".
	Probes []ProbeDecl `json:"probes,omitempty"`
	// Pages are pages of the extension's own in the web view, at most
	// MaxPages. Core draws them from the extension's panels and actions.
	Pages []PageDecl `json:"pages,omitempty"`
	// Schemas declares each payload schema base the extension writes, with
	// the versions this release reads.
	Schemas []SchemaDecl `json:"schemas,omitempty"`
	// EntryGated makes the extension's operations join a generation's
	// toolbelt only while an enabled scope has one of its entries. It needs
	// operations and an extension type.
	EntryGated bool `json:"entry_gated,omitempty"`
	// EntryNamed makes the extension's action provider, and the source of
	// its annotations, go by the name of its first entry on each scope
	// rather than by the extension's name. It needs an extension type.
	EntryNamed bool `json:"entry_named,omitempty"`
	// SegmentEnd asks the host to tell the extension when a container
	// segment ends (segment.ended), so it revokes what it issued for it.
	SegmentEnd bool `json:"segment_end,omitempty"`
	// StartGate asks the host to consult the extension before the first
	// attempt of any Work in its scopes starts (work.admit). It needs the
	// work.start_gate permission.
	StartGate bool `json:"start_gate,omitempty"`
	// OperationGate asks the host to consult the extension about other
	// extensions' operation calls in its scopes (operation.gate). It needs
	// the operation.gate permission.
	OperationGate bool `json:"operation_gate,omitempty"`
	// ConfigCandidate says the extension's Work may propose configuration
	// (config.candidate). It needs the config.read permission.
	ConfigCandidate bool `json:"config_candidate,omitempty"`
	// Actions says the extension is an action provider: it lists the
	// actions it offers on Work (work.actions) and plans the one a person
	// takes (work.act). A page needs it.
	Actions bool `json:"actions,omitempty"`
	// Panels says the extension renders panels on scope and Work pages
	// (view.render).
	Panels bool `json:"panels,omitempty"`
	// RunEnvironment says the extension adds an environment layer to each
	// run of Work in a scope that uses it (run.environment).
	RunEnvironment bool `json:"run_environment,omitempty"`
	// Annotations says the extension is told the display of Work in its
	// scopes, to show it on its own surface (work.annotate).
	Annotations bool `json:"annotations,omitempty"`
	// TelemetryExporter says the extension exports the host's telemetry
	// (telemetry.export).
	TelemetryExporter bool `json:"telemetry_exporter,omitempty"`
	// Setup says the extension offers an interactive setup (setup.run and
	// its setup.* callbacks).
	Setup bool `json:"setup,omitempty"`
	// Playbooks are directories of playbooks, relative to the extension
	// directory and inside it, that the host writes into agent executors'
	// plugin directories. A convention of agent executors, not a core
	// concept.
	Playbooks []string `json:"playbooks,omitempty"`
	// ExternalStores declare stores larger than coordination state that the
	// extension keeps elsewhere, each reached through one of its connection
	// types, so the store is explicit in config. The extension's KV is
	// always provided and is never declared.
	ExternalStores []ExternalStoreDecl `json:"external_stores,omitempty"`
}

// ExtensionDecl is an extension (config) type: what an operator's entry in a
// scope configures.
type ExtensionDecl struct {
	// Type names the config type (identifier-shaped).
	Type string `json:"type"`
	// Ingress says entries of the type are ingress sources: the extension
	// pushes and reconciles observations (ingress.push, ingress.reconcile)
	// and may deliver from its own receivers (ingress.deliver). An ingress
	// type declares its families.
	Ingress bool `json:"ingress,omitempty"`
	// Families are the Event families the type's entries produce.
	Families []FamilyDecl `json:"families,omitempty"`
	// Webhooks says entries of the type register webhook paths in
	// configure, which the host serves through webhook.handle. It needs
	// Ingress.
	Webhooks bool `json:"webhooks,omitempty"`
	// Settings are the top-level config fields safe to show an operator,
	// with their value types; every other field is shown by name alone.
	Settings []SettingDecl `json:"settings,omitempty"`
	// Describe says what an entry sets up, one line per element of a list
	// field, for the operator's view; nil for none.
	Describe *DescribeDecl `json:"describe,omitempty"`
	// Fields describe the type's config fields for operators and editors.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// FamilyDecl is an Event family an extension produces. A family is either
// re-derivable, so losing its Events loses nothing the source cannot give
// again, or it states in Loss what is lost with them.
type FamilyDecl struct {
	// Name is the family (a dotted name).
	Name string `json:"name"`
	// Rederivable says the family's Events can be observed again from
	// their source (by reconcile, say), so losing them loses nothing.
	Rederivable bool `json:"rederivable,omitempty"`
	// Loss says, in one line of at most MaxLossBytes, what is lost for
	// good when an Event of this family is lost (such as "a chat message
	// sent while the daemon was down"). Required unless Rederivable, and
	// forbidden with it.
	Loss string `json:"loss,omitempty"`
}

// SettingDecl is a config field safe to show an operator.
type SettingDecl struct {
	// Field is the top-level config field's name.
	Field string `json:"field"`
	// Type is the field's value type: "string", "boolean", "number" or
	// "strings" (an array of strings).
	Type string `json:"type"`
	// Default is the value the field takes when absent, of Type; nil for
	// none. Decoded numbers are json.Number.
	Default any `json:"default,omitempty"`
}

// The setting value types.
const (
	SettingString  = "string"
	SettingBoolean = "boolean"
	SettingNumber  = "number"
	SettingStrings = "strings"
)

// DescribeDecl names the config fields that say what an entry sets up: one
// line per element of the array field List, named by the element's Name
// field and detailed by its Detail field.
type DescribeDecl struct {
	// List is the top-level array field.
	List string `json:"list"`
	// Name is the field of each element that names it.
	Name string `json:"name"`
	// Detail is the field of each element that details it.
	Detail string `json:"detail"`
}

// FieldDecl describes one config field of a type for operators, adapters and
// editors. It is descriptive only: the type's validate still checks a config.
type FieldDecl struct {
	// Name is the field's name (on a connection type with Secret, the key
	// of its secret_refs).
	Name string `json:"name"`
	// Help is one line of at most MaxFieldHelpBytes.
	Help string `json:"help,omitempty"`
	// Default is the value, as text, the field takes when absent; "" for
	// none. A required field has none. A field the type's settings also
	// declare takes its default from there when it gives none.
	Default string `json:"default,omitempty"`
	// Required says a config must set the field.
	Required bool `json:"required,omitempty"`
	// Options is the fixed set of values the field takes, if any: distinct,
	// non-empty and including Default.
	Options []string `json:"options,omitempty"`
	// Secret marks a key of a connection's secret_refs rather than of its
	// config. Only connection types have secret fields.
	Secret bool `json:"secret,omitempty"`
}

// ConnectionDecl is a connection type: an account the extension acts as.
type ConnectionDecl struct {
	// Type names the connection type (identifier-shaped).
	Type string `json:"type"`
	// Fields describe its config fields and secret keys.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// RouteDecl is a route handler (route.match).
type RouteDecl struct {
	// Handler names the route handler (identifier-shaped).
	Handler string `json:"handler"`
	// Samples says the handler offers named sample Events for a route
	// trace (route.samples).
	Samples bool `json:"samples,omitempty"`
	// Binding says the handler checks the binding each of its routes binds
	// (validate with kind binding).
	Binding bool `json:"binding,omitempty"`
	// Display says the handler returns a Work display with its matches.
	// It is informational: the host takes a display from any handler, and
	// certification checks the display limits of handlers that declare it.
	Display bool `json:"display,omitempty"`
	// Fields describe the handler's route config fields.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// WorkKindDecl is a kind of Work and its policy.
type WorkKindDecl struct {
	// Name names the kind (identifier-shaped).
	Name string `json:"name"`
	// Standing says one long-lived Work of the kind takes each new input.
	Standing bool `json:"standing,omitempty"`
	// Trigger says the extension picks the input that starts the Work
	// (work_kind.trigger, inside the start transaction). When the call
	// fails, the runtime's first input is used.
	Trigger bool `json:"trigger,omitempty"`
	// Timed says Work of the kind runs on a clock, so a dry run starts none.
	Timed bool `json:"timed,omitempty"`
	// RunOnce says Work of the kind runs once and is not retried as a new
	// attempt after it settles.
	RunOnce bool `json:"run_once,omitempty"`
}

// RecurrenceDecl is a calendar recurrence (recurrence.next).
type RecurrenceDecl struct {
	// Name names the recurrence (identifier-shaped); timers armed for it
	// carry it as their kind.
	Name string `json:"name"`
}

// The operation kinds.
const (
	// OperationKindHandler: the extension answers the call (operation.call).
	OperationKindHandler = "handler"
	// OperationKindWait: the call becomes a Wait the extension plans
	// (operation.wait).
	OperationKindWait = "wait"
	// OperationKindEmit: the call becomes an Event the host accepts
	// (operation.emit), optionally with records committed with it
	// (emit.commit).
	OperationKindEmit = "emit"
)

// OperationDecl is a toolbelt operation.
type OperationDecl struct {
	// Name names the operation (a dotted name).
	Name string `json:"name"`
	// Kind is OperationKindHandler, OperationKindWait or OperationKindEmit.
	Kind string `json:"kind"`
	// Commit says an emit operation commits records in the emission's
	// transaction (emit.commit). Only an emit operation commits.
	Commit bool `json:"commit,omitempty"`
	// Summary is one line of at most MaxSummaryBytes saying what the
	// operation does.
	Summary string `json:"summary,omitempty"`
	// Guidance is the agent guidance, at most MaxGuidanceBytes.
	Guidance string `json:"guidance,omitempty"`
	// Input is the JSON Schema of the call's input data: a JSON object
	// whose "type", when present, is "object". nil for none.
	Input any `json:"input,omitempty"`
	// Serves names the capability a handler operation serves (a name shaped
	// like an operation's). Only a handler serves one.
	Serves string `json:"serves,omitempty"`
	// DependencyFilter says a wait operation filters which Events wake its
	// Waits (dependency.filter, inside the subscription transaction). When
	// the call fails, the Event counts as no match.
	DependencyFilter bool `json:"dependency_filter,omitempty"`
}

// ToolsetDecl is a named set of operations granted together.
type ToolsetDecl struct {
	// Name names the toolset (a dotted name).
	Name string `json:"name"`
	// Operations are the operations it grants: at least one, each once,
	// each declared by the manifest or builtin (IsBuiltinOperation).
	Operations []ToolsetOperation `json:"operations"`
}

// ToolsetOperation is one operation of a toolset.
type ToolsetOperation struct {
	// Name is the operation's name.
	Name string `json:"name"`
	// Since is the toolset version the operation joined in; 0 for the
	// first. Never negative.
	Since int `json:"since,omitempty"`
}

// The toolbelt labels: how an executor gives its runs the toolbelt.
const (
	ToolbeltNone = "none"
	ToolbeltCLI  = "cli"
	ToolbeltMCP  = "mcp"
	ToolbeltSDK  = "sdk"
)

// PoolJobs is the capacity pool of jobs (settings.job_concurrency). The empty
// pool is agent turns (settings.concurrency).
const PoolJobs = "jobs"

// ExecutorDecl is an executor.
type ExecutorDecl struct {
	// Name names the executor (identifier-shaped).
	Name string `json:"name"`
	// Labels are the core's mechanical labels, exactly: an unknown label
	// needs a newer Open Conduit, so a semantic one cannot be expressed.
	Labels ExecutorLabels `json:"labels"`
	// Controls are the optional operator controls the executor serves.
	// An undeclared control is answered unsupported without a call.
	Controls ExecutorControls `json:"controls"`
	// Pool is the capacity pool its runs count against: "" (agent turns)
	// or PoolJobs.
	Pool string `json:"pool,omitempty"`
	// LaunchNames are other names an interactive launch takes for the
	// executor. They need the interactive_launch control, are identifiers,
	// and repeat neither one another nor an executor of the manifest.
	LaunchNames []string `json:"launch_names,omitempty"`
	// ResourceMode says the executor answers validate with kind
	// executor_mode: the resource mode a binding's config requests.
	ResourceMode bool `json:"resource_mode,omitempty"`
	// Playbook says the executor answers validate with kind
	// executor_playbook: the playbook a binding's config turns on.
	Playbook bool `json:"playbook,omitempty"`
	// FolderConfig says the executor adapts a binding from an included
	// folder (validate with kind executor_folder).
	FolderConfig bool `json:"folder_config,omitempty"`
	// Sandbox says the executor launches its runs through the binding's
	// sandbox provider (sandbox.plan, sandbox.adopt).
	Sandbox bool `json:"sandbox,omitempty"`
	// Container says the executor launches its runs through the binding's
	// container provider (container.launch, container.adopt).
	Container bool `json:"container,omitempty"`
	// Fields describe the executor's binding config fields.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// ExecutorLabels are an executor's mechanical labels.
type ExecutorLabels struct {
	// Interrupt: a run can be interrupted (executor.interrupt).
	Interrupt bool `json:"interrupt,omitempty"`
	// Inject: input can be injected into a running run (executor.inject).
	Inject bool `json:"inject,omitempty"`
	// Resume: a settled run can be resumed with new input (executor.resume).
	Resume bool `json:"resume,omitempty"`
	// Workspace: runs acquire a workspace resource (resource.acquire,
	// resource.lookup).
	Workspace bool `json:"workspace,omitempty"`
	// Toolbelt is how runs reach the toolbelt: ToolbeltNone, ToolbeltCLI,
	// ToolbeltMCP or ToolbeltSDK; "" is none.
	Toolbelt string `json:"toolbelt,omitempty"`
}

// ExecutorControls are the optional controls an executor serves. They are
// methods, not claims about what the executor is good for.
type ExecutorControls struct {
	// Stop: physical-stop evidence (executor.stop).
	Stop bool `json:"stop,omitempty"`
	// Forget: drop what the executor keeps for a run (executor.forget).
	Forget bool `json:"forget,omitempty"`
	// Attach: an operator's terminal on a run's session (executor.attach).
	Attach bool `json:"attach,omitempty"`
	// ContainerAttach: attach to Work that ran in a container
	// (executor.container_attach).
	ContainerAttach bool `json:"container_attach,omitempty"`
	// Live: a running attempt's output so far (executor.live).
	Live bool `json:"live,omitempty"`
	// InteractiveLaunch: start the executor's own program on a playbook in
	// the operator's terminal (executor.interactive_launch).
	InteractiveLaunch bool `json:"interactive_launch,omitempty"`
}

// The resource modes.
const (
	ResourceModeShared = "shared"
	ResourceModeWork   = "work"
	ResourceModeFresh  = "fresh"
)

// ResourceDecl is a resource (workspace) provider type.
type ResourceDecl struct {
	// Type names the provider type (identifier-shaped).
	Type string `json:"type"`
	// Modes are the modes it serves: distinct values of shared, work and
	// fresh.
	Modes []string `json:"modes,omitempty"`
	// ModeDefault says it answers validate with kind resource_mode (the
	// mode a resource config writes).
	ModeDefault bool `json:"mode_default,omitempty"`
	// Sandbox says it answers validate with kind resource_sandbox (whether
	// its workspace fits a binding's sandbox or container).
	Sandbox bool `json:"sandbox,omitempty"`
	// Sweep says the host also asks it to remove spare resources
	// (provider.sweep).
	Sweep bool `json:"sweep,omitempty"`
	// Settings are the resource config fields safe to show an operator.
	Settings []SettingDecl `json:"settings,omitempty"`
	// Fields describe its resource config fields.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// SandboxDecl is a process sandbox provider type.
type SandboxDecl struct {
	// Type names the provider type (identifier-shaped).
	Type string `json:"type"`
}

// ContainerDecl is a container provider type.
type ContainerDecl struct {
	// Type names the provider type (identifier-shaped).
	Type string `json:"type"`
	// Forward says its containers reach the toolbelt through a TCP address
	// the provider names (container_provider.forward).
	Forward bool `json:"forward,omitempty"`
}

// TunnelDecl is a webhook tunnel provider type.
type TunnelDecl struct {
	// Type names the tunnel type: the extension's name, or a name that
	// begins with it.
	Type string `json:"type"`
	// Fields describe the tunnel's config fields.
	Fields []FieldDecl `json:"fields,omitempty"`
}

// TaskDecl is a background pass.
type TaskDecl struct {
	// Name names the task (identifier-shaped).
	Name string `json:"name"`
	// Interval is how often the host runs it, as a duration: decimal
	// numbers with a unit, such as "90s", "5m" or "1h30m" (units ns, us,
	// ms, s, m, h). At least one second.
	Interval string `json:"interval"`
}

// CheckDecl is a doctor check.
type CheckDecl struct {
	// Name names the check (an identifier). Doctor lists it under its name
	// when that is the extension's name or begins with it and '_' or '-',
	// and otherwise under "<name>_<check>".
	Name string `json:"name"`
	// Offline says offline doctor runs it too.
	Offline bool `json:"offline,omitempty"`
}

// ProbeDecl is a read-only setup probe.
type ProbeDecl struct {
	// Name names the probe (an identifier); the host lists it as
	// "<extension>.<name>".
	Name string `json:"name"`
	// Args are the argument names it takes (distinct config field names);
	// the host runs it with no others.
	Args []string `json:"args,omitempty"`
}

// MaxPages is how many pages an extension may declare.
const MaxPages = 4

// PageDecl is a page of the extension's own in the web view.
type PageDecl struct {
	// ID is the page's path (/pages/<id>), identifier-shaped.
	ID string `json:"id"`
	// Title is one line of at most MaxTitleRunes characters.
	Title string `json:"title"`
	// Summary is one line of at most MaxSummaryBytes; optional.
	Summary string `json:"summary,omitempty"`
	// Entry names the extension type whose entry on a scope offers the page.
	Entry string `json:"entry"`
	// WorkKind names the extension's Work kind of the page's sessions.
	WorkKind string `json:"work_kind"`
	// Start is the action that starts a session.
	Start string `json:"start"`
	// Compose are the actions a message box sends, first offered first.
	Compose []string `json:"compose,omitempty"`
	// Route names the extension's route handler whose binding's grants the
	// page offers; "" for none.
	Route string `json:"route,omitempty"`
}

// SchemaDecl declares a payload schema base and the versions the release reads;
// the last is the version it writes.
type SchemaDecl struct {
	// Base is a dotted name under the extension's name, without a version
	// suffix; payloads carry "<base>.v<N>".
	Base string `json:"base"`
	// Versions are positive and strictly increasing.
	Versions []int `json:"versions"`
}

// ExternalStoreDecl declares a store kept outside the host.
type ExternalStoreDecl struct {
	// Connection names one of the extension's connection types.
	Connection string `json:"connection"`
}

// The permissions a manifest may ask for.
const (
	// PermissionTelemetrySink: receive every telemetry event (telemetry.sink).
	PermissionTelemetrySink = "telemetry.sink"
	// PermissionTelemetryCapture: record telemetry events (telemetry.capture).
	PermissionTelemetryCapture = "telemetry.capture"
	// PermissionProbes: list and run setup probes (probe.list, probe.run).
	PermissionProbes = "probes"
	// PermissionConfigRead: read and build configuration candidates
	// (config.*).
	PermissionConfigRead = "config.read"
	// PermissionWorkStartGate: gate the start of Work (work.admit,
	// work.settle_hold).
	PermissionWorkStartGate = "work.start_gate"
	// PermissionOperationGate: gate other extensions' operation calls
	// (operation.gate).
	PermissionOperationGate = "operation.gate"
	// PermissionActionSubmit: invoke and list actions for a person
	// (action.submit, action.list).
	PermissionActionSubmit = "action.submit"
)

// KnownPermissions lists every permission this build knows, sorted.
func KnownPermissions() []string {
	p := []string{
		PermissionTelemetrySink, PermissionTelemetryCapture, PermissionProbes,
		PermissionConfigRead, PermissionWorkStartGate, PermissionOperationGate,
		PermissionActionSubmit,
	}
	slices.Sort(p)
	return p
}

// ReservedNames are names no extension may take.
func ReservedNames() []string {
	return []string{"core", "execution", "manual", "open-conduit", "os"}
}

// HostRunCommand is the command of a package the host serves from its own
// executable: open-conduit extension-run <name>.
func HostRunCommand(name string) []string {
	return []string{"open-conduit", "extension-run", name}
}

// RunsOnHost reports whether the manifest's command is exactly
// HostRunCommand(m.Name).
func (m *Manifest) RunsOnHost() bool {
	return slices.Equal(m.Command, HostRunCommand(m.Name))
}

// BuiltinWait is the builtin wait operation: the toolbelt's own Wait on
// keys, a target or a timeout, with no extension behind it.
const BuiltinWait = "os.wait"

// BuiltinOperations lists the builtin toolbelt operations, sorted. They
// live under the reserved name os, which no extension can declare, and a
// toolset may grant them beside its own operations.
func BuiltinOperations() []string { return []string{BuiltinWait} }

// IsBuiltinOperation reports whether name is one of BuiltinOperations.
// Another name under os is no builtin: a toolset that grants one is
// refused (toolsets.operation) rather than granting nothing.
func IsBuiltinOperation(name string) bool {
	return slices.Contains(BuiltinOperations(), name)
}

// ParseManifest reads a manifest strictly and validates it. Malformed JSON,
// invalid UTF-8, duplicate keys, out-of-range numbers, trailing data and
// values of the wrong type are ErrInvalidManifest; an unknown field,
// permission or executor label, or a storage field, is ErrNewerManifest.
// Either way the error is a *ManifestError naming the rule and the path, or
// (from Validate) several joined.
func ParseManifest(data []byte) (*Manifest, error) {
	m, err := DecodeManifest(data)
	if err != nil {
		return nil, err
	}
	if err := m.Validate(); err != nil {
		return nil, LocateManifestErrors(data, err)
	}
	return m, nil
}

// DecodeManifest reads a manifest strictly, as ParseManifest does, without
// validating it.
func DecodeManifest(data []byte) (*Manifest, error) {
	var m Manifest
	if err := decodeStrict(data, &m); err != nil {
		return nil, err
	}
	normalizeEmpty(&m)
	return &m, nil
}

// LoadManifest reads and parses dir/ManifestFile, then checks the
// package's files against it (CheckPackage).
func LoadManifest(dir string) (*Manifest, error) {
	path := filepath.Join(dir, ManifestFile)
	data, err := ReadManifestFile(path)
	if err == nil {
		var m *Manifest
		if m, err = ParseManifest(data); err == nil {
			if err = CheckPackage(dir, m); err == nil {
				return m, nil
			}
		}
	}
	var me *ManifestError
	if errors.As(err, &me) {
		return nil, fmt.Errorf("%s: %w", path, err)
	}
	return nil, err
}

// ReadManifestFile reads the manifest file at path, reading at most
// MaxManifestBytes+1 bytes whatever the file's size. A longer file is
// refused with the rule json.size (and its size, when the file says it),
// so a huge file costs no more than the limit.
func ReadManifestFile(path string) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, MaxManifestBytes+1))
	if err != nil {
		return nil, err
	}
	if len(data) > MaxManifestBytes {
		size := int64(len(data))
		if info, err := f.Stat(); err == nil && info.Mode().IsRegular() && info.Size() > size {
			size = info.Size()
		}
		return nil, tooLarge(data, size)
	}
	return data, nil
}
