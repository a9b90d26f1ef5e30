package protocol_test

import (
	"slices"
	"sort"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func TestCatalogueIsSortedAndUnique(t *testing.T) {
	ms := protocol.Methods()
	require.NotEmpty(t, ms)
	names := make([]string, len(ms))
	for i, m := range ms {
		names[i] = m.Name
	}
	assert.True(t, sort.StringsAreSorted(names), "methods are sorted by name")
	assert.Equal(t, len(names), len(slices.Compact(slices.Clone(names))), "method names are unique")
}

func TestCatalogueEntries(t *testing.T) {
	known := protocol.KnownPermissions()
	for _, m := range protocol.Methods() {
		assert.NotEmpty(t, m.Use, "%s names the shipped use it carries", m.Name)
		assert.Contains(t, []protocol.Direction{protocol.HostToExtension, protocol.ExtensionToHost, protocol.BothDirections}, m.Direction, m.Name)
		assert.NotEqual(t, "unknown", m.Direction.String(), m.Name)
		if m.Permission != "" {
			assert.Contains(t, known, m.Permission, m.Name)
		}
		got, ok := protocol.LookupMethod(m.Name)
		assert.True(t, ok, m.Name)
		assert.Equal(t, m, got)
		if m.InTransaction {
			assert.Equal(t, protocol.HostToExtension, m.Direction, "%s: in-transaction calls go from the host", m.Name)
			assert.False(t, m.Notification, m.Name)
		}
	}
	_, ok := protocol.LookupMethod("no.such")
	assert.False(t, ok)
	cancel, ok := protocol.LookupMethod("$/cancel")
	require.True(t, ok)
	assert.True(t, cancel.Notification)
	assert.Equal(t, protocol.BothDirections, cancel.Direction)
}

// TestCatalogueCoversTheInventory names the spec's inventory of wire methods;
// the catalogue holds each of them and nothing else.
func TestCatalogueCoversTheInventory(t *testing.T) {
	inventory := []string{
		"$/cancel", "initialize", "configure", "shutdown", "validate",
		"webhook.handle", "ingress.push", "ingress.reconcile", "ingress.deliver",
		"route.match", "route.samples", "work_kind.trigger", "recurrence.next", "timer.arm", "timer.cancel",
		"operation.call", "operation.wait", "operation.emit", "emit.commit", "dependency.filter", "operation.gate",
		"work.admit", "work.settle_hold", "wait.progress", "event.render", "event.render_owned", "target.resolve",
		"wait.target", "scope.authorize", "segment.ended",
		"executor.run", "executor.wait", "executor.recover", "executor.resume", "executor.inject", "executor.interrupt",
		"executor.stop", "executor.forget", "executor.attach", "executor.container_attach", "executor.live",
		"executor.interactive_launch", "execution.persist_recovery",
		"resource.acquire", "resource.lookup",
		"provider.acquire", "provider.lookup", "provider.reconcile", "provider.sweep", "provider.owner_status",
		"sandbox.plan", "sandbox.adopt", "sandbox_provider.plan", "sandbox_provider.adopt",
		"container.launch", "container.adopt",
		"container_provider.plan", "container_provider.create", "container_provider.signal", "container_provider.stop",
		"container_provider.inspect", "container_provider.list", "container_provider.remove", "container_provider.forward",
		"tunnel.run", "tunnel.url",
		"kv.get", "kv.list", "kv.commit",
		"state.work", "state.works", "state.executions", "state.waits", "state.event", "state.events",
		"state.work_events", "state.scope", "state.scopes", "state.sequence", "state.timers",
		"event.accept", "work.cancel",
		"artifact.create", "artifact.write", "artifact.commit", "artifact.abort",
		"secret.resolve", "task.run", "telemetry.export", "telemetry.capture", "telemetry.sink",
		"probe.list", "probe.run", "probe.serve",
		"config.base", "config.edit", "config.validate", "config.trace", "config.candidate",
		"check.run", "run.environment", "work.annotate", "work.actions", "work.act", "action.submit", "action.list",
		"view.render", "setup.run", "setup.prompt", "setup.open_browser", "setup.store_secret", "setup.look_path",
		"setup.run_command",
	}
	var names []string
	for _, m := range protocol.Methods() {
		names = append(names, m.Name)
	}
	slices.Sort(inventory)
	assert.Equal(t, inventory, names)
}

func TestInTransactionSet(t *testing.T) {
	var got []string
	for _, m := range protocol.Methods() {
		if m.InTransaction {
			got = append(got, m.Name)
		}
	}
	assert.Equal(t, []string{"dependency.filter", "emit.commit", "recurrence.next", "work_kind.trigger"}, got)
}

// TestEveryMethodIsReachable: each method is enabled by some valid manifest.
func TestEveryMethodIsReachable(t *testing.T) {
	manifests := map[string]*protocol.Manifest{"full": fullManifest(), "minimal": minimalManifest()}
	for _, name := range []string{"ingress-support.json", "executor-workspace.json", "scheduled-reporting.json"} {
		manifests[name] = readExample(t, name)
	}
	for name, m := range manifests {
		require.NoError(t, m.Validate(), name)
	}
	for _, mt := range protocol.Methods() {
		var by []string
		for name, m := range manifests {
			if m.Enabled(mt.Name) {
				by = append(by, name)
			}
		}
		assert.NotEmpty(t, by, "no manifest enables %s", mt.Name)
	}
}

// TestEverySurfaceIsDeclarable: each method's surface is one a manifest
// can declare, so no method hangs off a name nothing produces.
func TestEverySurfaceIsDeclarable(t *testing.T) {
	surfaces := fullManifest().Surfaces()
	assert.True(t, slices.IsSorted(surfaces))
	for _, mt := range protocol.Methods() {
		if mt.Surface != "" {
			assert.Contains(t, surfaces, mt.Surface, mt.Name)
		}
	}
	assert.Empty(t, minimalManifest().Surfaces())
}

func TestAlwaysEnabledMethods(t *testing.T) {
	m := minimalManifest()
	for _, mt := range protocol.Methods() {
		assert.Equal(t, mt.Surface == "" && mt.Permission == "", m.Enabled(mt.Name), mt.Name)
	}
	assert.False(t, m.Enabled("no.such"))
	var nilManifest *protocol.Manifest
	assert.False(t, nilManifest.Enabled("kv.get"))
}

func TestEveryPermissionGatesAMethod(t *testing.T) {
	for _, p := range protocol.KnownPermissions() {
		var gated []string
		for _, mt := range protocol.Methods() {
			if mt.Permission == p {
				gated = append(gated, mt.Name)
			}
		}
		assert.NotEmpty(t, gated, "permission %s gates no method", p)
	}
}

func TestPermissionGatedMethodNeedsThePermission(t *testing.T) {
	for _, mt := range protocol.Methods() {
		if mt.Permission == "" {
			continue
		}
		m := fullManifest()
		require.True(t, m.Enabled(mt.Name), mt.Name)
		m.Permissions = withoutPermission(m.Permissions, mt.Permission)
		assert.False(t, m.Enabled(mt.Name), "%s without %s", mt.Name, mt.Permission)
	}
}

func TestUndeclaredExecutorControlIsNotEnabled(t *testing.T) {
	controls := map[string]func(*protocol.ExecutorControls){
		"stop":               func(c *protocol.ExecutorControls) { c.Stop = true },
		"forget":             func(c *protocol.ExecutorControls) { c.Forget = true },
		"attach":             func(c *protocol.ExecutorControls) { c.Attach = true },
		"container_attach":   func(c *protocol.ExecutorControls) { c.ContainerAttach = true },
		"live":               func(c *protocol.ExecutorControls) { c.Live = true },
		"interactive_launch": func(c *protocol.ExecutorControls) { c.InteractiveLaunch = true },
	}
	for control, set := range controls {
		method := "executor." + control
		m := minimalManifest()
		m.Provides.Executors = []protocol.ExecutorDecl{{Name: "demo"}}
		require.NoError(t, m.Validate())
		assert.True(t, m.Enabled("executor.run"))
		assert.False(t, m.Enabled(method), "%s without its control", method)
		set(&m.Provides.Executors[0].Controls)
		assert.True(t, m.Enabled(method), "%s with its control", method)
		mt, _ := protocol.LookupMethod(method)
		assert.Equal(t, "executors.controls."+control, mt.Surface)
	}
	labels := map[string]func(*protocol.ExecutorLabels){
		"executor.resume":    func(l *protocol.ExecutorLabels) { l.Resume = true },
		"executor.inject":    func(l *protocol.ExecutorLabels) { l.Inject = true },
		"executor.interrupt": func(l *protocol.ExecutorLabels) { l.Interrupt = true },
		"resource.acquire":   func(l *protocol.ExecutorLabels) { l.Workspace = true },
	}
	for method, set := range labels {
		m := minimalManifest()
		m.Provides.Executors = []protocol.ExecutorDecl{{Name: "demo"}}
		assert.False(t, m.Enabled(method), method)
		set(&m.Provides.Executors[0].Labels)
		assert.True(t, m.Enabled(method), method)
	}
}

func TestEnabledMethodsMatchesEnabled(t *testing.T) {
	m := readExample(t, "ingress-support.json")
	for _, mt := range m.EnabledMethods() {
		assert.True(t, m.Enabled(mt.Name))
		assert.False(t, strings.HasPrefix(mt.Name, "executor."))
	}
}
