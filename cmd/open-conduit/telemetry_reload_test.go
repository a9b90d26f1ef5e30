package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/protocol"
)

// telemetryLateDir assembles telemetry-late: the probe under another name
// and type, a second sink for a package reload to bring in.
func telemetryLateDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "telemetry-late")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	m, err := os.ReadFile(filepath.Join(telemetryProbeDir, protocol.ManifestFile))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, protocol.ManifestFile),
		[]byte(strings.ReplaceAll(string(m), `"telemetry-probe`, `"telemetry-late`)), 0o644))
	py, err := os.ReadFile(filepath.Join(telemetryProbeDir, "main.py"))
	require.NoError(t, err)
	require.NoError(t, os.WriteFile(filepath.Join(dir, "main.py"), py, 0o755))
	return dir
}

// sunk is every event a sink package wrote to its sink.jsonl, in order.
func sunk(t *testing.T, stateDir, pkg string) []protocol.TelemetryEvent {
	t.Helper()
	path := filepath.Join(stateDir, "extensions", pkg, "sink.jsonl")
	if _, err := os.Stat(path); os.IsNotExist(err) {
		return nil
	}
	var out []protocol.TelemetryEvent
	for _, batch := range jsonLines[protocol.TelemetrySinkParams](t, path) {
		out = append(out, batch.Events...)
	}
	return out
}

// TestTelemetrySinksFollowAPackageReload: against the built binary's
// daemon, POST /v1/packages/reload restarts the sink telemetry-probe and
// starts telemetry-late, a sink new to the daemon. Both are sinks from the
// reload on: the restarted probe gets every event, those before the
// reload and after it, through whichever process runs; telemetry-late
// gets every event recorded since the reload. (Before, the sinks were
// fixed when the daemon opened: the probe's batches went to its stopped
// process and failed, and telemetry-late got nothing.)
func TestTelemetrySinksFollowAPackageReload(t *testing.T) {
	ctx := serveContext(t)
	const onePackage = `{"scopes":[{"id":"home","entries":[{"id": "p", "type": "telemetry-probe"}]}]}`
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{telemetryProbeDir},
		Config: []byte(onePackage)})
	st, err := d.Client.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Generation.Number, "the configuration is applied")
	logPath := filepath.Join(d.StateDir, "logs", "telemetry.jsonl")
	// The log is written before a capture is answered, and an applied
	// generation has every capture answered.
	before := len(jsonLines[protocol.TelemetryEvent](t, logPath))
	require.Positive(t, before, "the probe captured at its configures")

	require.NoError(t, daemontest.Install(d.ConfigDir, telemetryLateDir(t)))
	rl, err := d.Client.ReloadPackages(ctx, []string{"telemetry-probe"})
	require.NoError(t, err)
	require.Equal(t, []string{"telemetry-probe"}, rl.Restarted)
	require.Equal(t, []string{"telemetry-late"}, rl.Started)
	for _, w := range rl.Warnings {
		assert.NotContains(t, w, "telemetry", "a sink needs no daemon restart")
	}
	// Both configured in a new generation: both capture again.
	gen, err := d.Client.ApplyConfig(ctx, []byte(`{"scopes":[{"id":"home","entries":[
	  {"id": "p", "type": "telemetry-probe"}, {"id": "l", "type": "telemetry-late"}]}]}`))
	require.NoError(t, err)
	require.Equal(t, int64(2), gen.Number)

	require.NoError(t, d.Stop()) // the sinks' buffers are flushed before the packages stop
	logged := jsonLines[protocol.TelemetryEvent](t, logPath)
	require.Greater(t, len(logged), before, "captures since the reload were recorded")
	var late int
	for _, ev := range logged[before:] {
		if ev.Extension == "telemetry-late" {
			late++
		}
	}
	require.Positive(t, late, "the package the reload started captured")
	assert.Equal(t, compacted(t, logged), compacted(t, sunk(t, d.StateDir, "telemetry-probe")),
		"the restarted sink got every event, before the reload and after it, in order")
	assert.Equal(t, compacted(t, logged[before:]), compacted(t, sunk(t, d.StateDir, "telemetry-late")),
		"the started sink got every event since the reload, in order")
}
