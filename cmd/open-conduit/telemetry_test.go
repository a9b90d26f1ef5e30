package main

import (
	"bufio"
	"bytes"
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/internal/daemontest"
	"github.com/open-conduit/open-conduit/protocol"
)

// The telemetry packages: telemetry-probe holds telemetry.capture and
// telemetry.sink, telemetry-mute neither; both run the same main.py, which
// captures at each configure.
var telemetryProbeDir = filepath.Join("testdata", "telemetry-probe")

// telemetryMuteDir assembles telemetry-mute: its own manifest
// (testdata/telemetry-mute) and the probe's program.
func telemetryMuteDir(t *testing.T) string {
	t.Helper()
	dir := filepath.Join(t.TempDir(), "telemetry-mute")
	require.NoError(t, os.MkdirAll(dir, 0o755))
	for _, f := range []struct{ from, name string }{
		{filepath.Join("testdata", "telemetry-mute", protocol.ManifestFile), protocol.ManifestFile},
		{filepath.Join(telemetryProbeDir, "main.py"), "main.py"},
	} {
		data, err := os.ReadFile(f.from)
		require.NoError(t, err)
		require.NoError(t, os.WriteFile(filepath.Join(dir, f.name), data, 0o755))
	}
	return dir
}

const telemetryConfig = `{"scopes":[{"id":"home","entries":[
  {"id": "p", "type": "telemetry-probe"},
  {"id": "m", "type": "telemetry-mute"}
]}]}`

// jsonLines decodes every line of a JSON-lines file.
func jsonLines[T any](t *testing.T, path string) []T {
	t.Helper()
	f, err := os.Open(path)
	require.NoError(t, err)
	defer f.Close()
	var out []T
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		var v T
		require.NoError(t, json.Unmarshal(sc.Bytes(), &v), "%s: %s", path, sc.Text())
		out = append(out, v)
	}
	require.NoError(t, sc.Err())
	return out
}

// TestTelemetryCaptureAndSink: against the built binary's daemon, a
// package without the permission has every capture refused (undeclared)
// and none recorded; the one with it has its captures for the machine and
// its scope written to the telemetry log and delivered to its sink, all of
// them by the time the daemon has shut down; doctor accounts for them.
func TestTelemetryCaptureAndSink(t *testing.T) {
	ctx := serveContext(t)
	d := daemontest.Start(t, daemontest.Options{Binary: daemonBinary(t), Packages: []string{telemetryProbeDir, telemetryMuteDir(t)},
		Config: []byte(telemetryConfig)})
	st, err := d.Client.Status(ctx)
	require.NoError(t, err)
	require.Equal(t, int64(1), st.Generation.Number, "the configuration is applied")
	// A second generation configures the packages again, in scope home
	// now: the probe captures for it.
	gen, err := d.Client.ApplyConfig(ctx, []byte(strings.Replace(telemetryConfig, `"id":"home"`, `"id":"home","title":"Home"`, 1)))
	require.NoError(t, err)
	require.Equal(t, int64(2), gen.Number)

	// An applied generation has every configure answered, so each capture
	// those made has been answered too.
	type answer struct {
		ScopeID string `json:"scope_id"`
		Answer  string `json:"answer"`
	}
	mute := jsonLines[answer](t, filepath.Join(d.StateDir, "extensions", "telemetry-mute", "captures.jsonl"))
	require.NotEmpty(t, mute)
	for _, a := range mute {
		assert.Equal(t, "undeclared", a.Answer, "a package without telemetry.capture is refused")
	}
	probe := jsonLines[answer](t, filepath.Join(d.StateDir, "extensions", "telemetry-probe", "captures.jsonl"))
	// The start's empty configure and generation 1's (the machine), then
	// generation 2's (the machine and home, which generation 1 gave it).
	assert.Equal(t, []answer{{"", "ok"}, {"", "ok"}, {"", "ok"}, {"home", "ok"}}, probe)

	rep, err := d.Client.Doctor(ctx, false)
	require.NoError(t, err)
	checks := doctorChecks(rep)
	require.Contains(t, checks, "telemetry")
	assert.Contains(t, checks["telemetry"].Detail, "4 events captured, 1 sinks")

	require.NoError(t, d.Stop())
	logged := jsonLines[protocol.TelemetryEvent](t, filepath.Join(d.StateDir, "logs", "telemetry.jsonl"))
	require.Len(t, logged, 4, "the telemetry log has every capture, and only the permitted ones")
	for _, ev := range logged {
		assert.Equal(t, "telemetry-probe", ev.Extension)
		assert.Equal(t, "telemetry-probe.configured", ev.Name)
		assert.False(t, ev.Time.IsZero(), "stamped by the daemon")
	}
	assert.Equal(t, "home", logged[3].ScopeID)

	var sunk []protocol.TelemetryEvent
	for _, batch := range jsonLines[protocol.TelemetrySinkParams](t, filepath.Join(d.StateDir, "extensions", "telemetry-probe", "sink.jsonl")) {
		sunk = append(sunk, batch.Events...)
	}
	assert.Equal(t, compacted(t, logged), compacted(t, sunk), "the sink got every recorded event, in order, before the daemon stopped")
}

// compacted is events with their properties compacted (the sink wrote
// them back in its own spacing).
func compacted(t *testing.T, evs []protocol.TelemetryEvent) []protocol.TelemetryEvent {
	out := make([]protocol.TelemetryEvent, len(evs))
	for i, ev := range evs {
		var b bytes.Buffer
		require.NoError(t, json.Compact(&b, ev.Properties))
		ev.Properties = b.Bytes()
		ev.Time = ev.Time.UTC()
		out[i] = ev
	}
	return out
}
