package protocol_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
)

func readExample(t *testing.T, name string) *protocol.Manifest {
	t.Helper()
	data, err := os.ReadFile(filepath.Join("testdata", name))
	require.NoError(t, err)
	m, err := protocol.ParseManifest(data)
	require.NoError(t, err, "%s", name)
	return m
}

// methodsWithPrefix lists the enabled methods of m whose names start with any of prefixes.
func enabledWithPrefix(m *protocol.Manifest, prefixes ...string) []string {
	var out []string
	for _, mt := range m.EnabledMethods() {
		for _, p := range prefixes {
			if strings.HasPrefix(mt.Name, p) {
				out = append(out, mt.Name)
				break
			}
		}
	}
	return out
}

var executionPrefixes = []string{"executor.", "execution.", "resource.", "provider.", "sandbox", "container", "artifact."}

// TestExampleManifests parses, validates and round-trips each example and
// checks what it enables.
func TestExampleManifests(t *testing.T) {
	t.Run("ingress-support", func(t *testing.T) {
		m := readExample(t, "ingress-support.json")
		assert.Empty(t, m.Provides.Executors)
		assert.Empty(t, m.Provides.Resources)
		assert.Empty(t, enabledWithPrefix(m, executionPrefixes...), "a workspace-free ingress workload enables no execution method")
		for _, name := range []string{
			"webhook.handle", "ingress.push", "ingress.reconcile", "ingress.deliver", "route.match", "route.samples",
			"operation.call", "task.run", "check.run", "event.render", "event.accept", "kv.commit", "secret.resolve", "work.cancel",
		} {
			assert.True(t, m.Enabled(name), name)
		}
		for _, name := range []string{"operation.wait", "operation.emit", "emit.commit", "recurrence.next", "work_kind.trigger", "probe.list", "telemetry.sink"} {
			assert.False(t, m.Enabled(name), name)
		}
		assert.Equal(t, []protocol.Version{1}, m.Protocol)
		assert.False(t, m.RunsOnHost())
	})
	t.Run("executor-workspace", func(t *testing.T) {
		m := readExample(t, "executor-workspace.json")
		assert.True(t, m.RunsOnHost())
		for _, name := range []string{
			"executor.run", "executor.wait", "executor.recover", "executor.resume", "executor.inject", "executor.interrupt",
			"executor.stop", "executor.forget", "executor.attach", "execution.persist_recovery", "artifact.write",
			"resource.acquire", "provider.acquire", "provider.lookup", "provider.reconcile", "provider.sweep", "provider.owner_status",
		} {
			assert.True(t, m.Enabled(name), name)
		}
		for _, name := range []string{
			"executor.live", "executor.container_attach", "executor.interactive_launch", "sandbox.plan", "container.launch",
			"route.match", "ingress.push", "webhook.handle", "operation.call",
		} {
			assert.False(t, m.Enabled(name), name)
		}
	})
	t.Run("scheduled-reporting", func(t *testing.T) {
		m := readExample(t, "scheduled-reporting.json")
		assert.Empty(t, enabledWithPrefix(m, executionPrefixes...))
		for _, name := range []string{
			"recurrence.next", "timer.arm", "timer.cancel", "work_kind.trigger", "operation.emit", "emit.commit",
			"operation.wait", "dependency.filter", "wait.progress", "wait.target", "target.resolve", "work.cancel",
		} {
			assert.True(t, m.Enabled(name), name)
		}
		assert.False(t, m.Enabled("operation.call"))
		var standing bool
		for _, k := range m.Provides.WorkKinds {
			standing = standing || k.Standing && k.Trigger
		}
		assert.True(t, standing, "a standing Work kind with trigger selection")
	})
	for _, name := range []string{"ingress-support.json", "executor-workspace.json", "scheduled-reporting.json"} {
		t.Run("round trip "+name, func(t *testing.T) {
			m := readExample(t, name)
			data, err := json.Marshal(m)
			require.NoError(t, err)
			again, err := protocol.ParseManifest(data)
			require.NoError(t, err)
			assert.Equal(t, m, again)
		})
	}
}

func TestFullManifestRoundTrip(t *testing.T) {
	m := fullManifest()
	data, err := json.Marshal(m)
	require.NoError(t, err)
	again, err := protocol.ParseManifest(data)
	require.NoError(t, err)
	// Decoded defaults and schemas are JSON values.
	m.Provides.Extensions[0].Settings[1].Default = true
	m.Provides.Operations[0].Input = map[string]any{"type": "object"}
	assert.Equal(t, m, again)
}

func TestDecodeManifestDoesNotValidate(t *testing.T) {
	m, err := protocol.DecodeManifest([]byte(`{"name":"Bad Name","kv_version":-1,"provides":{"routes":[]}}`))
	require.NoError(t, err)
	assert.Equal(t, "Bad Name", m.Name)
	assert.Nil(t, m.Provides.Routes, "an empty list decodes as none, as it encodes")
	assert.ErrorIs(t, m.Validate(), protocol.ErrInvalidManifest)
}

func TestParseManifestNumbers(t *testing.T) {
	// Numbers inside free-form JSON keep their literal; finite ones pass.
	m, err := protocol.ParseManifest([]byte(`{"name":"demo","version":"1","command":["demo"],"protocol":[1],
		"provides":{"operations":[{"name":"demo.op","kind":"handler","input":{"type":"object","maximum":1.50,"minimum":-0,"tiny":1e-400}}]}}`))
	require.NoError(t, err)
	in := m.Provides.Operations[0].Input.(map[string]any)
	assert.Equal(t, json.Number("1.50"), in["maximum"])
	assert.Equal(t, json.Number("1e-400"), in["tiny"])
}

func TestLoadManifest(t *testing.T) {
	dir := t.TempDir()
	_, err := protocol.LoadManifest(dir)
	assert.ErrorIs(t, err, fs.ErrNotExist)

	data, err := os.ReadFile(filepath.Join("testdata", "ingress-support.json"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), data, 0o600))
	m, err := protocol.LoadManifest(dir)
	require.NoError(t, err)
	assert.Equal(t, "support", m.Name)

	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), []byte(`{"name":"support","extra":1}`), 0o600))
	_, err = protocol.LoadManifest(dir)
	assert.ErrorIs(t, err, protocol.ErrNewerManifest)
	assert.Contains(t, err.Error(), protocol.ManifestFile)

	big := make([]byte, protocol.MaxManifestBytes+10)
	for i := range big {
		big[i] = ' '
	}
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile), big, 0o600))
	_, err = protocol.LoadManifest(dir)
	require.ErrorIs(t, err, protocol.ErrInvalidManifest)
	assert.Equal(t, protocol.RuleJSONSize, protocol.ManifestErrors(err)[0].Rule)
}

func TestHostRunCommand(t *testing.T) {
	assert.Equal(t, []string{"open-conduit", "extension-run", "notes"}, protocol.HostRunCommand("notes"))
	m := minimalManifest()
	m.Command = protocol.HostRunCommand("demo")
	assert.True(t, m.RunsOnHost())
	require.NoError(t, m.Validate())
	m.Command = protocol.HostRunCommand("other")
	assert.False(t, m.RunsOnHost())
}

func TestKnownPermissions(t *testing.T) {
	assert.Equal(t, []string{"action.submit", "config.read", "operation.gate", "probes", "telemetry.capture", "telemetry.sink", "work.start_gate"},
		protocol.KnownPermissions())
}

func ExampleParseManifest() {
	_, err := protocol.ParseManifest([]byte(`{"name":"notes","version":"1","command":["bin/notes"],"protocol":[1],
		"provides":{"operations":[{"name":"notes.read","kind":"handler","commit":true}]}}`))
	for _, e := range protocol.ManifestErrors(err) {
		fmt.Println(e.Rule, e.Path)
	}
	fmt.Println(errors.Is(err, protocol.ErrInvalidManifest))

	_, err = protocol.ParseManifest([]byte(`{"name":"notes","provides":{"storage":{"kind":"sql"}}}`))
	fmt.Println(errors.Is(err, protocol.ErrNewerManifest))
	// Output:
	// operations.commit provides.operations[0].commit
	// true
	// true
}
