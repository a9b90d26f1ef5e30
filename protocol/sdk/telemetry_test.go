package sdk_test

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/stretchr/testify/assert"
	"github.com/stretchr/testify/require"

	"github.com/open-conduit/open-conduit/protocol"
	"github.com/open-conduit/open-conduit/protocol/sdk"
	"github.com/open-conduit/open-conduit/protocol/sdk/sdktest"
)

const teleManifest = `{"name": "tele", "version": "1.0.0", "command": ["tele"], "protocol": [1],
  "permissions": ["telemetry.capture", "telemetry.sink"],
  "provides": {"extensions": [{"type": "tele", "families": [{"name": "tele.thing", "rederivable": true}]}]}}`

// teleExtension captures one event at configure and keeps every batch
// its sink gets.
func teleExtension(mu *sync.Mutex, got *[]protocol.TelemetryEvent) *sdk.Extension {
	return &sdk.Extension{
		Manifest: []byte(teleManifest),
		Configure: func(ctx context.Context, h *sdk.Host, p protocol.ConfigureParams) (protocol.ConfigureResult, error) {
			return protocol.ConfigureResult{}, h.CaptureTelemetry(ctx, protocol.TelemetryCaptureParams{Name: "tele.configured", Properties: []byte(`{"n":1}`)})
		},
		TelemetrySink: func(_ context.Context, _ *sdk.Host, p protocol.TelemetrySinkParams) (protocol.TelemetrySinkResult, error) {
			mu.Lock()
			defer mu.Unlock()
			*got = append(*got, p.Events...)
			return protocol.TelemetrySinkResult{}, nil
		},
	}
}

// Host.CaptureTelemetry calls telemetry.capture, and telemetry.sink
// reaches Extension.TelemetrySink with the batch, both ways.
func TestTelemetrySinkAndCapture(t *testing.T) {
	t0 := time.Date(2026, 12, 1, 12, 0, 0, 0, time.UTC)
	for _, m := range modes {
		t.Run(m.name, func(t *testing.T) {
			ctx := testContext(t)
			var mu sync.Mutex
			var sunk []protocol.TelemetryEvent
			host := sdktest.New()
			var captured []protocol.TelemetryCaptureParams
			host.Override = func(_ context.Context, method string, params any) (any, bool, error) {
				if method != "telemetry.capture" {
					return nil, false, nil
				}
				p, err := protocol.DecodeParams[protocol.TelemetryCaptureParams](params)
				captured = append(captured, p)
				return protocol.TelemetryCaptureResult{}, true, err
			}
			c, _ := m.start(t, teleExtension(&mu, &sunk), host)
			require.NoError(t, c.Call(ctx, "initialize", initParams, nil))
			require.NoError(t, c.Call(ctx, "configure", protocol.ConfigureParams{}, nil))
			require.Len(t, captured, 1)
			assert.Equal(t, "tele.configured", captured[0].Name)
			assert.JSONEq(t, `{"n":1}`, string(captured[0].Properties))

			batch := protocol.TelemetrySinkParams{Events: []protocol.TelemetryEvent{{Name: "a", ScopeID: "s", Extension: "other", Time: t0}, {Name: "b", Time: t0}}}
			require.NoError(t, c.Call(ctx, "telemetry.sink", batch, &protocol.TelemetrySinkResult{}))
			mu.Lock()
			defer mu.Unlock()
			assert.Equal(t, batch.Events, sunk)
		})
	}
}

// CaptureTelemetry applies the spec's bounds before it calls.
func TestCaptureTelemetryChecksFirst(t *testing.T) {
	host := sdktest.New()
	h := sdk.NewHost(host, nil)
	err := h.CaptureTelemetry(t.Context(), protocol.TelemetryCaptureParams{Name: strings.Repeat("n", protocol.MaxTelemetryNameBytes+1)})
	assert.ErrorIs(t, err, protocol.ErrInvalid)
	assert.Empty(t, host.Calls(), "nothing was sent")
}

// The permission telemetry.sink needs the handler, and the handler needs
// the permission.
func TestTelemetrySinkMatchesThePermission(t *testing.T) {
	var mu sync.Mutex
	var sunk []protocol.TelemetryEvent
	ext := teleExtension(&mu, &sunk)
	ext.TelemetrySink = nil
	_, err := sdk.Attach(ext, sdktest.New())
	assert.ErrorContains(t, err, "the manifest declares the permission telemetry.sink but its handler is nil")

	ext = teleExtension(&mu, &sunk)
	ext.Manifest = []byte(strings.Replace(teleManifest, `, "telemetry.sink"`, "", 1))
	require.NotEqual(t, teleManifest, string(ext.Manifest))
	_, err = sdk.Attach(ext, sdktest.New())
	assert.ErrorContains(t, err, "the permission telemetry.sink has a handler but the manifest does not declare it")
}
