package host_test

import (
	"context"
	"encoding/json"
	"strings"
	"sync"
	"testing"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/host"
	"github.com/open-conduit/open-conduit/protocol"
)

type recordedTelemetry struct {
	mu  sync.Mutex
	evs []protocol.TelemetryEvent
}

func (r *recordedTelemetry) RecordTelemetry(_ context.Context, ev protocol.TelemetryEvent) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.evs = append(r.evs, ev)
	return nil
}

// telemetryService is a service for "mine", configured in scope s1, with
// the given permissions.
func telemetryService(t *testing.T, rec host.TelemetryRecorder, permissions ...string) *host.Service {
	t.Helper()
	m := &protocol.Manifest{Name: "mine", Version: "1.0.0", Permissions: permissions,
		Provides: protocol.Provides{Extensions: []protocol.ExtensionDecl{{Type: "mine"}}}}
	svc := host.NewService(host.ServiceConfig{Manifest: m, Telemetry: rec})
	require.NoError(t, svc.Configure(protocol.ConfigureParams{Entries: []protocol.ConfigEntry{{ScopeID: "s1", ID: "e", Type: "mine", Config: json.RawMessage(`{}`)}}},
		protocol.ConfigureResult{}))
	return svc
}

// TestTelemetryCaptureNeedsThePermission: without telemetry.capture in
// its manifest a package's capture is undeclared and nothing is recorded.
func TestTelemetryCaptureNeedsThePermission(t *testing.T) {
	rec := &recordedTelemetry{}
	for _, perms := range [][]string{nil, {protocol.PermissionTelemetrySink}} {
		svc := telemetryService(t, rec, perms...)
		err := svc.Call(t.Context(), "telemetry.capture", protocol.TelemetryCaptureParams{Name: "x"}, nil)
		assert.ErrorIs(t, err, protocol.ErrUndeclared, "permissions %v", perms)
	}
	assert.Empty(t, rec.evs, "nothing recorded")
}

// TestTelemetryCaptureBounds: with the permission, a capture for one of
// the package's scopes or the machine is recorded, named by the host; the
// spec's bounds refuse the rest, each as invalid, and a scope it is not
// configured for as unauthorized.
func TestTelemetryCaptureBounds(t *testing.T) {
	rec := &recordedTelemetry{}
	svc := telemetryService(t, rec, protocol.PermissionTelemetryCapture)
	ctx := t.Context()
	require.NoError(t, svc.Call(ctx, "telemetry.capture", protocol.TelemetryCaptureParams{ScopeID: "s1", Name: "mine.synced",
		Properties: json.RawMessage(`{"n":3}`)}, &protocol.TelemetryCaptureResult{}))
	require.NoError(t, svc.Call(ctx, "telemetry.capture", protocol.TelemetryCaptureParams{Name: strings.Repeat("m", protocol.MaxTelemetryNameBytes)}, nil))
	require.Len(t, rec.evs, 2)
	assert.Equal(t, protocol.TelemetryEvent{Name: "mine.synced", ScopeID: "s1", Extension: "mine", Properties: json.RawMessage(`{"n":3}`)}, rec.evs[0])
	assert.Empty(t, rec.evs[1].ScopeID, "the machine")

	big := `{"k":"` + strings.Repeat("x", protocol.MaxTelemetryPropertiesBytes) + `"}`
	for _, tc := range []struct {
		name string
		p    protocol.TelemetryCaptureParams
		want error
	}{
		{"no name", protocol.TelemetryCaptureParams{}, protocol.ErrInvalid},
		{"long name", protocol.TelemetryCaptureParams{Name: strings.Repeat("m", protocol.MaxTelemetryNameBytes+1)}, protocol.ErrInvalid},
		{"two-line name", protocol.TelemetryCaptureParams{Name: "a\nb"}, protocol.ErrInvalid},
		{"big properties", protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(big)}, protocol.ErrInvalid},
		{"properties not an object", protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`[1]`)}, protocol.ErrInvalid},
		{"properties carry scope", protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`{"scope":"s2"}`)}, protocol.ErrInvalid},
		{"properties carry scope_id", protocol.TelemetryCaptureParams{Name: "x", Properties: json.RawMessage(`{"scope_id":"s2"}`)}, protocol.ErrInvalid},
		{"foreign scope", protocol.TelemetryCaptureParams{ScopeID: "s2", Name: "x"}, protocol.ErrUnauthorized},
	} {
		assert.ErrorIs(t, svc.Call(ctx, "telemetry.capture", tc.p, nil), tc.want, tc.name)
	}
	assert.Len(t, rec.evs, 2, "no refused capture is recorded")

	// Without a recorder (offline validation) the method is unsupported.
	offline := telemetryService(t, nil, protocol.PermissionTelemetryCapture)
	assert.ErrorIs(t, offline.Call(ctx, "telemetry.capture", protocol.TelemetryCaptureParams{Name: "x"}, nil), protocol.ErrUnsupported)
}
