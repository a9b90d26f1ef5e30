package protocol

import "slices"

// Direction says which side sends a method's request.
type Direction int

const (
	// HostToExtension: the host calls, the extension serves.
	HostToExtension Direction = iota + 1
	// ExtensionToHost: the extension calls, the host serves.
	ExtensionToHost
	// BothDirections: either side sends it ($/cancel).
	BothDirections
)

// String names the direction as the docs write it.
func (d Direction) String() string {
	switch d {
	case HostToExtension:
		return "host-to-extension"
	case ExtensionToHost:
		return "extension-to-host"
	case BothDirections:
		return "both"
	}
	return "unknown"
}

// Method describes one wire method of the catalogue.
type Method struct {
	// Name is the wire name, such as "kv.commit".
	Name string
	// Direction is which side sends the request.
	Direction Direction
	// Surface is the manifest surface that enables the method (see
	// Manifest.Surfaces), "" when the method is always enabled, as the
	// lifecycle, KV and state methods are.
	Surface string
	// Permission is the permission that gates the method, "" for none. A
	// method with both a surface and a permission needs both.
	Permission string
	// InTransaction marks the four bounded methods called inside a
	// coordination transaction (InTransactionDeadline, no callbacks).
	InTransaction bool
	// Notification marks a method sent without an id, never answered.
	Notification bool
	// Use is the shipped use the method carries.
	Use string
}

const (
	h2e  = HostToExtension
	e2h  = ExtensionToHost
	both = BothDirections
)

// methods is the catalogue, sorted by name (TestCatalogueSorted).
var methods = []Method{
	{Name: "$/cancel", Direction: both, Notification: true, Use: "cancel an in-flight request: the receiver stops serving it and answers cancelled, the sender stops waiting at once"},
	{Name: "action.list", Direction: e2h, Permission: PermissionActionSubmit, Use: "list the actions every provider offers on a scope or Work, to show them on the extension's own surface"},
	{Name: "action.submit", Direction: e2h, Permission: PermissionActionSubmit, Use: "take an action for a person the extension identified on its own surface, as a caller of its own kind"},
	{Name: "artifact.abort", Direction: e2h, Surface: "executors", Use: "discard an artifact being written"},
	{Name: "artifact.commit", Direction: e2h, Surface: "executors", Use: "finish an artifact (a transcript, log or output file) so it is kept"},
	{Name: "artifact.create", Direction: e2h, Surface: "executors", Use: "open an artifact of a run for writing"},
	{Name: "artifact.write", Direction: e2h, Surface: "executors", Use: "write one chunk of an artifact, acknowledged before the next"},
	{Name: "check.run", Direction: h2e, Surface: "checks", Use: "run a doctor check against the extension's view of the configuration"},
	{Name: "config.base", Direction: e2h, Permission: PermissionConfigRead, Use: "read the committed configuration as redacted text behind a handle"},
	{Name: "config.candidate", Direction: h2e, Surface: "config_candidate", Permission: PermissionConfigRead, Use: "report the configuration a Work proposes, with the actions that decide each change, for the operator's review"},
	{Name: "config.edit", Direction: e2h, Permission: PermissionConfigRead, Use: "make one pointer edit to the text behind a handle, giving a new candidate"},
	{Name: "config.trace", Direction: e2h, Permission: PermissionConfigRead, Use: "trace a scope's routes against a candidate, writing nothing"},
	{Name: "config.validate", Direction: e2h, Permission: PermissionConfigRead, Use: "validate a candidate as the operator's validation would"},
	{Name: "configure", Direction: h2e, Use: "apply a configuration generation; the extension answers the ingress sources and webhook paths it registers"},
	{Name: "container.adopt", Direction: e2h, Surface: "executors.container", Use: "re-adopt a run's container after a restart, through the binding's provider"},
	{Name: "container.launch", Direction: e2h, Surface: "executors.container", Use: "launch a run in the binding's container, planned by its provider under the binding's policy"},
	{Name: "container_provider.create", Direction: h2e, Surface: "containers", Use: "create the container a pinned plan describes"},
	{Name: "container_provider.forward", Direction: h2e, Surface: "containers.forward", Use: "name the address a container reaches the toolbelt through"},
	{Name: "container_provider.inspect", Direction: h2e, Surface: "containers", Use: "report a container's state"},
	{Name: "container_provider.list", Direction: h2e, Surface: "containers", Use: "list the host's containers, for reconciliation"},
	{Name: "container_provider.plan", Direction: h2e, Surface: "containers", Use: "plan a launch in a container from a binding's container config and the launch's needs"},
	{Name: "container_provider.remove", Direction: h2e, Surface: "containers", Use: "remove a stopped container"},
	{Name: "container_provider.signal", Direction: h2e, Surface: "containers", Use: "signal the process in a container"},
	{Name: "container_provider.stop", Direction: h2e, Surface: "containers", Use: "stop a container"},
	{Name: "dependency.filter", Direction: h2e, Surface: "operations.dependency_filter", InTransaction: true, Use: "decide whether an Event wakes a Wait, inside the subscription transaction (a failure counts as no match)"},
	{Name: "emit.commit", Direction: h2e, Surface: "operations.commit", InTransaction: true, Use: "write the records of an emission with the accepted Event's identity, inside the emission transaction"},
	{Name: "event.accept", Direction: e2h, Surface: "extensions.families", Use: "accept an Event of the extension's families derived from a parent, with KV records in the same transaction"},
	{Name: "event.render", Direction: h2e, Surface: "extensions.families", Use: "render an Event of the extension's families as prompt text"},
	{Name: "event.render_owned", Direction: e2h, Surface: "executors", Use: "render a prompt's Events through the extensions that own their families"},
	{Name: "execution.persist_recovery", Direction: e2h, Surface: "executors", Use: "persist a run's recovery metadata through the lease-fenced path"},
	{Name: "executor.attach", Direction: h2e, Surface: "executors.controls.attach", Use: "give an operator's terminal the run's session, or nothing_to_attach"},
	{Name: "executor.container_attach", Direction: h2e, Surface: "executors.controls.container_attach", Use: "plan an operator's attach to Work that ran in a container"},
	{Name: "executor.forget", Direction: h2e, Surface: "executors.controls.forget", Use: "drop what the executor keeps for a settled run"},
	{Name: "executor.inject", Direction: h2e, Surface: "executors.labels.inject", Use: "deliver new input to a running run"},
	{Name: "executor.interactive_launch", Direction: h2e, Surface: "executors.controls.interactive_launch", Use: "express an interactive launch of the executor's own program in its terms (argv, directory, variables)"},
	{Name: "executor.interrupt", Direction: h2e, Surface: "executors.labels.interrupt", Use: "interrupt a running run"},
	{Name: "executor.live", Direction: h2e, Surface: "executors.controls.live", Use: "a running attempt's output so far, or not_live"},
	{Name: "executor.recover", Direction: h2e, Surface: "executors", Use: "re-adopt a run from its persisted recovery metadata after a restart, or not_adoptable"},
	{Name: "executor.resume", Direction: h2e, Surface: "executors.labels.resume", Use: "resume a settled run with new input"},
	{Name: "executor.run", Direction: h2e, Surface: "executors", Use: "start a run of a Work"},
	{Name: "executor.stop", Direction: h2e, Surface: "executors.controls.stop", Use: "stop a run's processes and give physical-stop evidence"},
	{Name: "executor.wait", Direction: h2e, Surface: "executors", Use: "observe a run until it settles (cancelling stops observing, not the run)"},
	{Name: "ingress.deliver", Direction: e2h, Surface: "extensions.ingress", Use: "deliver from the extension's own receiver, answered after durable acceptance"},
	{Name: "ingress.push", Direction: h2e, Surface: "extensions.ingress", Use: "turn a verified delivery into observations the host accepts durably"},
	{Name: "ingress.reconcile", Direction: h2e, Surface: "extensions.ingress", Use: "scan one page of a source's items for reconciliation"},
	{Name: "initialize", Direction: h2e, Use: "agree on the protocol version and exchange the manifest and state directories"},
	{Name: "kv.commit", Direction: e2h, Use: "apply preconditions, writes and emissions in the extension's namespaces as one atomic unit"},
	{Name: "kv.get", Direction: e2h, Use: "read a value and its version from the extension's namespaces"},
	{Name: "kv.list", Direction: e2h, Use: "list keys and values in one of the extension's namespaces"},
	{Name: "operation.call", Direction: h2e, Surface: "operations.kind.handler", Use: "serve a toolbelt call with its authority, idempotent on the request ID"},
	{Name: "operation.emit", Direction: h2e, Surface: "operations.kind.emit", Use: "plan the Event a toolbelt call emits"},
	{Name: "operation.gate", Direction: h2e, Surface: "operation_gate", Permission: PermissionOperationGate, Use: "let through, park or refuse another extension's operation call in the extension's scopes"},
	{Name: "operation.wait", Direction: h2e, Surface: "operations.kind.wait", Use: "plan the Wait a toolbelt call declares, with its description"},
	{Name: "probe.list", Direction: e2h, Permission: PermissionProbes, Use: "list the setup probes the host, extensions and executors offer"},
	{Name: "probe.run", Direction: e2h, Permission: PermissionProbes, Use: "run a setup probe with its declared arguments"},
	{Name: "probe.serve", Direction: h2e, Surface: "probes", Use: "run one of the extension's own setup probes"},
	{Name: "provider.acquire", Direction: h2e, Surface: "resources", Use: "acquire a workspace for an owner in a mode, idempotently"},
	{Name: "provider.lookup", Direction: h2e, Surface: "resources", Use: "look up an owner's workspace"},
	{Name: "provider.owner_status", Direction: e2h, Surface: "resources", Use: "ask whether the owners of resources are still live, during a reconcile or sweep"},
	{Name: "provider.reconcile", Direction: h2e, Surface: "resources", Use: "repair workspaces against their owners"},
	{Name: "provider.sweep", Direction: h2e, Surface: "resources.sweep", Use: "remove spare resources no release covers"},
	{Name: "recurrence.next", Direction: h2e, Surface: "recurrences", InTransaction: true, Use: "compute a recurrence's next occurrence inside the timer's fire-and-rearm transaction"},
	{Name: "resource.acquire", Direction: e2h, Surface: "executors.labels.workspace", Use: "acquire a run's workspace through the binding's resource"},
	{Name: "resource.lookup", Direction: e2h, Surface: "executors.labels.workspace", Use: "look up a run's workspace"},
	{Name: "route.match", Direction: h2e, Surface: "routes", Use: "decide, free of side effects, whether an Event matches a route, with display, context and grants"},
	{Name: "route.samples", Direction: h2e, Surface: "routes.samples", Use: "offer named sample Events for a route trace"},
	{Name: "run.environment", Direction: h2e, Surface: "run_environment", Use: "add an environment layer to a run of Work in a scope that uses the extension"},
	{Name: "sandbox.adopt", Direction: e2h, Surface: "executors.sandbox", Use: "re-adopt a run's sandboxed segment with its pinned plan"},
	{Name: "sandbox.plan", Direction: e2h, Surface: "executors.sandbox", Use: "plan a launch in the binding's sandbox"},
	{Name: "sandbox_provider.adopt", Direction: h2e, Surface: "sandboxes", Use: "re-adopt a sandboxed segment with its pinned plan"},
	{Name: "sandbox_provider.plan", Direction: h2e, Surface: "sandboxes", Use: "plan a launch in a sandbox from a binding's sandbox config and the launch's needs"},
	{Name: "scope.authorize", Direction: e2h, Use: "ask whether one of the extension's scopes may read or file in another"},
	{Name: "secret.resolve", Direction: e2h, Use: "resolve the secrets of a connection bound to the extension's entries or its scopes' bindings"},
	{Name: "segment.ended", Direction: h2e, Surface: "segment_end", Notification: true, Use: "tell the extension a container segment ended so it revokes what it issued"},
	{Name: "setup.look_path", Direction: e2h, Surface: "setup", Use: "find a program on the operator's path during setup"},
	{Name: "setup.open_browser", Direction: e2h, Surface: "setup", Use: "open a URL in the operator's browser during setup"},
	{Name: "setup.prompt", Direction: e2h, Surface: "setup", Use: "ask the operator a question during setup"},
	{Name: "setup.run", Direction: h2e, Surface: "setup", Use: "run the extension's interactive setup"},
	{Name: "setup.run_command", Direction: e2h, Surface: "setup", Use: "run a command for the operator during setup"},
	{Name: "setup.store_secret", Direction: e2h, Surface: "setup", Use: "store a secret the operator gave during setup"},
	{Name: "shutdown", Direction: h2e, Use: "finish or cancel in-flight work and exit; a telemetry exporter flushes"},
	{Name: "state.event", Direction: e2h, Use: "read one Event in the extension's scopes"},
	{Name: "state.events", Direction: e2h, Use: "page the Events of the extension's scopes after a sequence"},
	{Name: "state.executions", Direction: e2h, Use: "list a Work's executions"},
	{Name: "state.scope", Direction: e2h, Use: "read one of the extension's scopes"},
	{Name: "state.scopes", Direction: e2h, Use: "list the scopes whose configuration uses the extension"},
	{Name: "state.sequence", Direction: e2h, Use: "the latest accepted Event's sequence, a cursor for state.events"},
	{Name: "state.timers", Direction: e2h, Use: "list the timers of the extension's recurrences"},
	{Name: "state.waits", Direction: e2h, Use: "list a Work's Waits"},
	{Name: "state.work", Direction: e2h, Use: "read one Work in the extension's scopes or of its kinds"},
	{Name: "state.work_events", Direction: e2h, Use: "page one Work's Events"},
	{Name: "state.works", Direction: e2h, Use: "list Work in the extension's scopes or of its kinds"},
	{Name: "target.resolve", Direction: h2e, Surface: "targets", Use: "resolve a <kind>:<name> wait target of one of the extension's kinds"},
	{Name: "task.run", Direction: h2e, Surface: "tasks", Use: "run a background pass at its interval"},
	{Name: "telemetry.capture", Direction: e2h, Permission: PermissionTelemetryCapture, Use: "record a named telemetry event for a scope or the machine"},
	{Name: "telemetry.export", Direction: h2e, Surface: "telemetry_exporter", Use: "export a batch of the host's telemetry"},
	{Name: "telemetry.sink", Direction: h2e, Permission: PermissionTelemetrySink, Use: "receive every named telemetry event the host records"},
	{Name: "timer.arm", Direction: e2h, Surface: "recurrences", Use: "arm a timer of a declared recurrence"},
	{Name: "timer.cancel", Direction: e2h, Surface: "recurrences", Use: "cancel a timer of a declared recurrence"},
	{Name: "tunnel.run", Direction: h2e, Surface: "tunnels", Use: "keep the webhook listener exposed for the daemon's life"},
	{Name: "tunnel.url", Direction: e2h, Surface: "tunnels", Use: "publish a tunnel run's public URL as it changes"},
	{Name: "validate", Direction: h2e, Use: "check a config object of one of the extension's types and describe what it sets up"},
	{Name: "view.render", Direction: h2e, Surface: "panels", Use: "render a panel on a scope or Work page"},
	{Name: "wait.progress", Direction: e2h, Surface: "operations.kind.wait", Use: "set the progress line of a Wait the extension declared"},
	{Name: "wait.target", Direction: e2h, Surface: "operations.kind.wait", Use: "resolve a wait target for a wait the extension plans"},
	{Name: "webhook.handle", Direction: h2e, Surface: "extensions.webhooks", Use: "verify and accept a delivery to one of the extension's webhook paths"},
	{Name: "work.act", Direction: h2e, Surface: "actions", Use: "plan the Event of an action a person takes"},
	{Name: "work.actions", Direction: h2e, Surface: "actions", Use: "list the actions the extension offers on a target"},
	{Name: "work.admit", Direction: h2e, Surface: "start_gate", Permission: PermissionWorkStartGate, Use: "admit or hold the first attempt of a Work in the extension's scopes"},
	{Name: "work.annotate", Direction: h2e, Surface: "annotations", Use: "tell the extension a Work's display, to show on its own surface"},
	{Name: "work.cancel", Direction: e2h, Surface: "work_kinds", Use: "cancel Work of the extension's own kinds"},
	{Name: "work.settle_hold", Direction: e2h, Surface: "start_gate", Permission: PermissionWorkStartGate, Use: "settle a hold the extension placed: admit the next start once, or cancel the Work"},
	{Name: "work_kind.trigger", Direction: h2e, Surface: "work_kinds.trigger", InTransaction: true, Use: "pick the input that starts a Work, inside the start transaction (a failure picks the first input)"},
}

// Methods returns the whole catalogue, sorted by name.
func Methods() []Method { return slices.Clone(methods) }

// methodIndex is each method's place in methods. Both sides look a method
// up on every request; a binary search with slices.BinarySearchFunc, which
// hands every probe a copy of the whole entry, cost several times this.
var methodIndex = func() map[string]int {
	idx := make(map[string]int, len(methods))
	for i, m := range methods {
		idx[m.Name] = i
	}
	return idx
}()

// LookupMethod returns the catalogue entry of name.
func LookupMethod(name string) (Method, bool) {
	i, ok := methodIndex[name]
	if !ok {
		return Method{}, false
	}
	return methods[i], true
}

// Enabled reports whether the manifest enables method: the method is in the
// catalogue, the manifest declares its surface (if it has one) and its
// permission (if it has one). The host neither calls nor serves a method
// that is not enabled.
func (m *Manifest) Enabled(method string) bool {
	if m == nil {
		return false
	}
	mt, ok := LookupMethod(method)
	if !ok {
		return false
	}
	if mt.Permission != "" && !slices.Contains(m.Permissions, mt.Permission) {
		return false
	}
	return mt.Surface == "" || slices.Contains(m.Surfaces(), mt.Surface)
}

// EnabledMethods lists the methods the manifest enables, sorted by name.
func (m *Manifest) EnabledMethods() []Method {
	var out []Method
	for _, mt := range methods {
		if m.Enabled(mt.Name) {
			out = append(out, mt)
		}
	}
	return out
}

// Surfaces lists the surfaces the manifest declares, sorted: a top-level
// name for each non-empty provides list or true flag ("routes",
// "start_gate"), and dotted names for what its entries declare
// ("routes.samples", "operations.kind.wait", "executors.controls.stop").
// These are the names Method.Surface uses.
func (m *Manifest) Surfaces() []string {
	p := &m.Provides
	set := map[string]bool{}
	add := func(cond bool, names ...string) {
		if cond {
			for _, n := range names {
				set[n] = true
			}
		}
	}
	add(len(p.Extensions) > 0, "extensions")
	for _, x := range p.Extensions {
		add(x.Ingress, "extensions.ingress")
		add(x.Webhooks, "extensions.webhooks")
		add(len(x.Families) > 0, "extensions.families")
		add(len(x.Settings) > 0, "extensions.settings")
		add(x.Describe != nil, "extensions.describe")
	}
	add(len(p.Connections) > 0, "connections")
	add(len(p.Routes) > 0, "routes")
	for _, r := range p.Routes {
		add(r.Samples, "routes.samples")
		add(r.Binding, "routes.binding")
		add(r.Display, "routes.display")
	}
	add(len(p.WorkKinds) > 0, "work_kinds")
	for _, k := range p.WorkKinds {
		add(k.Standing, "work_kinds.standing")
		add(k.Trigger, "work_kinds.trigger")
		add(k.Timed, "work_kinds.timed")
		add(k.RunOnce, "work_kinds.run_once")
	}
	add(len(p.Recurrences) > 0, "recurrences")
	add(len(p.Operations) > 0, "operations")
	for _, o := range p.Operations {
		add(o.Kind == OperationKindHandler || o.Kind == OperationKindWait || o.Kind == OperationKindEmit, "operations.kind."+o.Kind)
		add(o.Commit, "operations.commit")
		add(o.DependencyFilter, "operations.dependency_filter")
	}
	add(len(p.Targets) > 0, "targets")
	add(len(p.Toolsets) > 0, "toolsets")
	add(len(p.Executors) > 0, "executors")
	for _, x := range p.Executors {
		add(x.Labels.Interrupt, "executors.labels.interrupt")
		add(x.Labels.Inject, "executors.labels.inject")
		add(x.Labels.Resume, "executors.labels.resume")
		add(x.Labels.Workspace, "executors.labels.workspace")
		add(x.Controls.Stop, "executors.controls.stop")
		add(x.Controls.Forget, "executors.controls.forget")
		add(x.Controls.Attach, "executors.controls.attach")
		add(x.Controls.ContainerAttach, "executors.controls.container_attach")
		add(x.Controls.Live, "executors.controls.live")
		add(x.Controls.InteractiveLaunch, "executors.controls.interactive_launch")
		add(x.ResourceMode, "executors.resource_mode")
		add(x.Playbook, "executors.playbook")
		add(x.FolderConfig, "executors.folder_config")
		add(x.Sandbox, "executors.sandbox")
		add(x.Container, "executors.container")
	}
	add(len(p.Resources) > 0, "resources")
	for _, r := range p.Resources {
		add(r.ModeDefault, "resources.mode_default")
		add(r.Sandbox, "resources.sandbox")
		add(r.Sweep, "resources.sweep")
	}
	add(len(p.Sandboxes) > 0, "sandboxes")
	add(len(p.Containers) > 0, "containers")
	for _, c := range p.Containers {
		add(c.Forward, "containers.forward")
	}
	add(len(p.Tunnels) > 0, "tunnels")
	add(len(p.Tasks) > 0, "tasks")
	add(len(p.Checks) > 0, "checks")
	add(len(p.Probes) > 0, "probes")
	add(len(p.Pages) > 0, "pages")
	add(len(p.Schemas) > 0, "schemas")
	add(p.EntryGated, "entry_gated")
	add(p.EntryNamed, "entry_named")
	add(p.SegmentEnd, "segment_end")
	add(p.StartGate, "start_gate")
	add(p.OperationGate, "operation_gate")
	add(p.ConfigCandidate, "config_candidate")
	add(p.Actions, "actions")
	add(p.Panels, "panels")
	add(p.RunEnvironment, "run_environment")
	add(p.Annotations, "annotations")
	add(p.TelemetryExporter, "telemetry_exporter")
	add(p.Setup, "setup")
	add(len(p.Playbooks) > 0, "playbooks")
	add(len(p.ExternalStores) > 0, "external_stores")
	out := make([]string, 0, len(set))
	for s := range set {
		out = append(out, s)
	}
	slices.Sort(out)
	return out
}
